"""The lean mount at Qwen3.5-2B shapes: build, disk, load, memory and text speed against the base.

    OMP_NUM_THREADS=1 python bench/mount_lean.py                       # the 2B shape (24 layers, 248,320)
    OMP_NUM_THREADS=1 python bench/mount_lean.py --layers 2 --vocab 32768   # a quick run

Writes a random base of the real Qwen3.5-2B layer shape (hidden 2048, its heads, intermediate size
and layer pattern; bfloat16 on disk, as Qwen3.5 ships) with ``--layers`` layers and a ``--vocab``
vocabulary, builds the lean mount (``qwengpu build``: the base's files hard-linked, the 2B-shape
machine stored sparse), then measures, each in a fresh child process so that each peak RSS is its
own:

* **base**: ``AutoModelForCausalLM.from_pretrained(BASE, dtype=bfloat16)`` alone: load time, greedy
  decode tokens/s, peak RSS;
* **chat**: what ``qwengpu chat --model MOUNT`` holds: the lean text model (bfloat16) *and* the machine
  loaded for launches: load times, the same greedy decode (its tokens must equal the base's, checked),
  one launch (vadd) and its tokens/s, peak RSS.

Disk: the base, the mount (counted as the bytes it would take on another filesystem: the hard-linked
base files included), and the stock single checkpoint's size from its plan (``qwengpu build --stock``
would write that many bytes; not written). Everything is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

KERNEL = Path(__file__).resolve().parent.parent / "tests" / "machine_weights" / "kernels" / "vadd.cu"

CHILD = r'''
import json, resource, sys, time, torch
torch.set_num_threads(1)
what, path, tokens, prompt = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
res = {}
t = time.perf_counter()
if what == "base":
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
else:
    from qwengpu.runtime.mounted_text import load_mount_text
    model = load_mount_text(path, dtype="bfloat16")
res["text_load_seconds"] = time.perf_counter() - t
V = model.config.vocab_size
ids = torch.randint(0, V, (1, prompt), generator=torch.Generator().manual_seed(0))
kw = {"do_sample": False, "attention_mask": torch.ones_like(ids), "pad_token_id": 0}
with torch.no_grad():
    model.generate(ids, max_new_tokens=2, min_new_tokens=2, **kw)
    t = time.perf_counter()
    out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **kw)
    res["decode_tokens_per_second"] = tokens / (time.perf_counter() - t)
res["tokens"] = out[0, prompt:].tolist()
if what == "chat":
    from qwengpu.runtime.mounted import mounted_model
    t = time.perf_counter()
    mm = mounted_model(path)
    res["machine_load_seconds"] = time.perf_counter() - t
    run = mm.launch(sys.argv[5])
    best = run.stats["seconds"]
    for _ in range(2):
        mm.fast.clear_memos()
        best = min(best, mm.launch(sys.argv[5]).stats["seconds"])
    res["launch_tokens"] = len(run.trace)
    res["launch_tokens_per_second"] = len(run.trace) / best
res["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(res))
'''

PLAN = r'''
import json, sys, torch
torch.set_num_threads(1)
from qwengpu.model.mount import Checkpoint, inspect_machine, machine_config_for, machine_entry
from qwengpu.model.mount import make_plan, text_config_of
base = Checkpoint(sys.argv[1])
_, text = text_config_of(base.config)
plan = make_plan(base, base.config, inspect_machine(machine_entry(machine_config_for(text))))
print(json.dumps({"stock_bytes": plan.total_bytes, "mounted_hidden": plan.Hp}))
'''


def _sh(argv: list[str]) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv[:4])} ...\n{done.stderr[-3000:]}")
    lines = [ln for ln in done.stdout.strip().splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _note(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=24, help="base layers (default 24, the 2B's)")
    ap.add_argument("--vocab", type=int, default=248_320, help="base vocabulary (default 248,320, the 2B's)")
    ap.add_argument("--layout", choices=["causal", "conditional"], default="causal")
    ap.add_argument("--tokens", type=int, default=16, help="tokens to decode (default 16)")
    ap.add_argument("--prompt", type=int, default=32, help="prompt length (default 32)")
    ap.add_argument("--no-stock-estimate", action="store_true",
                    help="skip the stock checkpoint's planned size")
    ap.add_argument("--work", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(args.work) / f"qwengpu-lean-bench-{os.getpid()}"
    work.mkdir(parents=True)
    res: dict = {"layers": args.layers, "vocab": args.vocab, "layout": args.layout}
    try:
        base, mount = work / "base", work / "mount"
        _note("writing the base")
        t = time.perf_counter()
        _sh([sys.executable, "-c", "import torch; torch.set_num_threads(1)\nfrom qwengpu.model.synthetic "
             f"import make_synthetic_base\nmake_synthetic_base({str(base)!r}, shape='2b', "
             f"layout={args.layout!r}, layers={args.layers}, vocab={args.vocab})"])
        res["base_write_seconds"] = time.perf_counter() - t
        res["base_bytes"] = _du(base)
        _note("building the lean mount")
        t = time.perf_counter()
        build = _sh([sys.executable, "-m", "qwengpu.cli", "build", "--base", str(base), "--out", str(mount),
                     "--json"])
        res["build_seconds"] = time.perf_counter() - t
        res["build_peak_rss"] = build["peak_rss_bytes"]
        res["mount_bytes"] = _du(mount)
        res["machine_bytes"] = build["machine_bytes"]
        res["machine_dense_bytes"] = build["machine_dense_bytes"]
        if not args.no_stock_estimate:
            _note("planning the stock checkpoint (not written)")
            res |= _sh([sys.executable, "-c", PLAN, str(base)])
        _note("measuring the base alone")
        res["base"] = _sh([sys.executable, "-c", CHILD, "base", str(base), str(args.tokens),
                           str(args.prompt)])
        _note("measuring the chat footprint (lean text + the machine)")
        res["chat"] = _sh([sys.executable, "-c", CHILD, "chat", str(mount), str(args.tokens),
                           str(args.prompt), str(KERNEL)])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["same_tokens"] = res["base"]["tokens"] == res["chat"]["tokens"]
    res["speed_ratio"] = res["chat"]["decode_tokens_per_second"] / res["base"]["decode_tokens_per_second"]
    cmd = " ".join(["OMP_NUM_THREADS=1 python bench/mount_lean.py", *sys.argv[1:]])
    if args.json:
        print(json.dumps(res | {"command": cmd}))
        return 0 if res["same_tokens"] else 1
    G = 1e9
    b, c = res["base"], res["chat"]
    print(f"command: {cmd}")
    print(f"\nbase: Qwen3.5-2B layer shape, {args.layers} layers, vocabulary {args.vocab:,}, "
          f"{args.layout}, bfloat16, random weights; one torch thread\n")
    print("| measured | figure |")
    print("|---|---|")
    print(f"| base written (bf16) | {res['base_bytes'] / G:.2f} GB in {res['base_write_seconds']:.0f} s |")
    print(f"| `qwengpu build` (lean) | {res['build_seconds']:.0f} s, peak RSS "
          f"{res['build_peak_rss'] / 2**30:.2f} GiB |")
    print(f"| lean mount on disk | {res['mount_bytes'] / G:.2f} GB = base {res['base_bytes'] / G:.2f} GB "
          f"(hard links: 0 extra here) + machine sparse {res['machine_bytes'] / G:.2f} GB (dense "
          f"{res['machine_dense_bytes'] / G:.2f} GB) |")
    if "stock_bytes" in res:
        print(f"| stock single checkpoint (`--stock`, planned, float32, hidden {res['mounted_hidden']}) | "
              f"{res['stock_bytes'] / G:.2f} GB |")
    print(f"| load: base alone (bf16) | {b['text_load_seconds']:.1f} s |")
    print(f"| load: chat (lean text bf16 + machine) | text {c['text_load_seconds']:.1f} s + machine "
          f"{c['machine_load_seconds']:.1f} s |")
    print(f"| text decode bf16, {args.tokens} tokens after {args.prompt}: base alone vs ours | "
          f"{b['decode_tokens_per_second']:.2f} vs {c['decode_tokens_per_second']:.2f} tokens/s "
          f"({res['speed_ratio']:.2f}x; same tokens: {res['same_tokens']}) |")
    print(f"| peak RSS: base alone vs chat (text + machine) | {b['peak_rss'] / 2**30:.2f} vs "
          f"{c['peak_rss'] / 2**30:.2f} GiB |")
    print(f"| launch (vadd, {c['launch_tokens']} tokens), best of 3 | "
          f"{c['launch_tokens_per_second']:.0f} tokens/s |")
    return 0 if res["same_tokens"] else 1


if __name__ == "__main__":
    sys.exit(main())
