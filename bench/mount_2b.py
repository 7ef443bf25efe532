"""The mount on Qwen3.5-2B shapes (random weights): build time, peak build memory, size on disk,
launch tokens/s through the mount (our runtime) vs the standalone machine in the same process,
memory with our runtime, text decode with our text runtime (tokens/s, RSS), and the stock forward's
cost per token at the mounted width.

    OMP_NUM_THREADS=1 python bench/mount_2b.py --layout causal --layout conditional [--work DIR]

Each layout: a random 2B-shaped base is written in bfloat16 shard by shard (``qwengpu.model.
synthetic``, ~4 GB), mounted by ``qwengpu build`` in a child process (its peak RSS is the build's
peak memory), the launches run in another child process, then base and mount are deleted. The
stock float32 2B mount (~39 GB) does not fit this 24 GB machine, so the stock forward is timed on
random stock models of the mounted layer shape (hidden 4096, two layers of one kind each) and a
65,536-row head scaled to the real vocabulary, and the per-token cost of the whole stack is
extrapolated from them (labelled so).
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

ROOT = Path(__file__).resolve().parent.parent
KERNELS = [ROOT / "tests/machine_weights/kernels/vadd.cu", ROOT / "tests/machine_weights/kernels/intops.cu",
           ROOT / "tests/machine_weights/kernels/bitops.cu"]

LAUNCH = r"""
import json, resource, sys, time, gc, torch
torch.set_num_threads(1)
from qwengpu.runtime.mounted import MountedModel
from qwengpu.runtime.engine import run_machine
from qwengpu.runtime import fast as F
from qwengpu.model.machine_checkpoint import load_or_build
mount, kernels = sys.argv[1], sys.argv[2:]
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
t = time.perf_counter()
mm = MountedModel.load(mount)
load = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {"load_seconds": load, "rss_after_load": rss(), "peak_after_load": peak,
       "runtime": mm.runtime, "kernels": {}}
from qwengpu.model.mount import machine_config_for, text_config_of
cfg = machine_config_for(text_config_of(json.load(open(mount + "/config.json")))[1])
_, machine = load_or_build(cfg)
for k in kernels:
    row = {}
    runs = (("mount", lambda: mm.launch(k)),
            ("standalone", lambda: run_machine(k, config=cfg, model=machine)))
    for label, fn in runs:
        best = None
        for rep in range(3):
            mm.fast.clear_memos()  # cold runs: every memo of both runtimes forgotten
            for _, f in list(F._CACHE.values()):
                f.clear_memos()
            r = fn()
            n = r.stats["tokens"] + r.stats["prompt_tokens"]
            tps = n / r.stats["seconds"]
            best = max(best or 0, tps)
            row[label + "_trace"] = r.trace
        row[label] = best
        row["tokens"] = n
    row["same_trace"] = row.pop("mount_trace") == row.pop("standalone_trace")
    out["kernels"][k] = row
print(json.dumps(out))
"""

STOCK = r"""
import json, sys, time, torch
torch.set_num_threads(1)
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
from qwengpu.compiler import text_config
hidden, vocab = int(sys.argv[1]), int(sys.argv[2])
def model_of(kinds):
    cfg = text_config("qwen3_5_2b_text").to_dict()
    for k in ("architectures", "transformers_version", "dtype", "torch_dtype", "layer_types",
              "_name_or_path"):
        cfg.pop(k, None)
    cfg.update(hidden_size=hidden, num_hidden_layers=2, layer_types=kinds, vocab_size=1024,
               tie_word_embeddings=False)
    return Qwen3_5ForCausalLM(Qwen3_5TextConfig(**cfg)).float().eval()
def decode_ms(model, n=10):
    with torch.no_grad():
        out = model(torch.randint(0, 1000, (1, 64)), use_cache=True)
        cache = out.cache
        t = time.perf_counter()
        for _ in range(n):
            out = model(torch.tensor([[5]]), cache=cache, use_cache=True)
            cache = out.cache
        return 1e3 * (time.perf_counter() - t) / n
res = {}
# the stock cache needs an attention layer: time [attention, attention] and [DeltaNet, attention]
# (the 1024-row head and the embedding cost next to nothing)
m = model_of(["full_attention", "full_attention"])
res["attention_layer_ms"] = decode_ms(m) / 2
del m
m = model_of(["linear_attention", "full_attention"])
res["deltanet_layer_ms"] = decode_ms(m) - res["attention_layer_ms"]
del m
rows = 65536
head = torch.nn.Linear(hidden, rows, bias=False)
x = torch.randn(1, 1, hidden)
with torch.no_grad():
    t = time.perf_counter()
    for _ in range(10):
        head(x)
res["lm_head_ms"] = 1e3 * (time.perf_counter() - t) / 10 * vocab / rows  # scaled to the whole vocabulary
print(json.dumps(res))
"""


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a child with one thread; a failure says what the child said (e.g. too little disk)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, **kw)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"{' '.join(argv[:4])} ... exited {done.returncode}:\n  " + "\n  ".join(tail))
    return done


def run_layout(layout: str, work: Path) -> dict:
    base, mount = work / f"base-{layout}", work / f"mount-{layout}"
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(mount, ignore_errors=True)
    row: dict = {"layout": layout}
    t = time.perf_counter()
    sh([sys.executable, "-c", "import torch; torch.set_num_threads(1)\nfrom qwengpu.model.synthetic import "
        f"make_synthetic_base\nmake_synthetic_base({str(base)!r}, layout={layout!r}, shape='2b')"])
    row["base_seconds"] = time.perf_counter() - t
    row["base_bytes"] = sum(p.stat().st_size for p in base.iterdir())
    try:
        done = sh([sys.executable, "-m", "qwengpu.cli", "build", "--stock", "--base", str(base), "--out",
                   str(mount), "--json"])
        info = json.loads(done.stdout.strip().splitlines()[-1])
        row.update(build_seconds=info["seconds"], build_peak_rss=info["peak_rss_bytes"],
                   mount_bytes=sum(p.stat().st_size for p in mount.iterdir()),
                   hidden=info["hidden"], mounted_hidden=info["mounted_hidden"], layers=info["layers"])
        shutil.rmtree(base, ignore_errors=True)  # the launches need only the mount
        done = sh([sys.executable, "-c", LAUNCH, str(mount), *map(str, KERNELS)])
        row["launch"] = json.loads(done.stdout.strip().splitlines()[-1])
        # the text runtime on the whole 2B mount (its stock forward does not fit: ours alone)
        done = sh([sys.executable, str(ROOT / "bench" / "mount_text.py"), "--mount", str(mount), "--no-stock",
                   "--tokens", "8", "--json"])
        row["text"] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(mount, ignore_errors=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layout", action="append", choices=["causal", "conditional"])
    ap.add_argument("--work", default=os.environ.get("TMPDIR", "/tmp"), help="folder for base and mount")
    ap.add_argument("--no-stock", action="store_true", help="skip the stock-forward timing")
    ap.add_argument("--mount", metavar="DIR", help="only the launch comparison, on an existing mount")
    args = ap.parse_args()
    if args.mount:
        done = sh([sys.executable, "-c", LAUNCH, args.mount, *map(str, KERNELS)])
        res = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"command: OMP_NUM_THREADS=1 python bench/mount_2b.py --mount {args.mount}")
        print(f"load {res['load_seconds']:.1f} s, RSS after load {res['rss_after_load'] / 2**30:.2f} GiB")
        for k, x in res["kernels"].items():
            print(f"{Path(k).stem}: mount {x['mount']:,.0f} vs standalone {x['standalone']:,.0f} tokens/s "
                  f"({x['tokens']} tokens, trace {'equal' if x['same_trace'] else 'DIFFERENT'})")
        return 0
    layouts = args.layout or ["causal"]
    work = Path(args.work) / f"qwengpu-mount-bench-{os.getpid()}"
    work.mkdir(parents=True)
    rows = []
    try:
        for lay in layouts:
            print(f"[{time.strftime('%H:%M:%S')}] layout {lay}", file=sys.stderr, flush=True)
            rows.append(run_layout(lay, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stock = None
    if not args.no_stock and rows:
        hp = rows[0]["mounted_hidden"]
        done = sh([sys.executable, "-c", STOCK, str(hp), str(248320 + 65536)])
        stock = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"command: OMP_NUM_THREADS=1 python bench/mount_2b.py {' '.join('--layout ' + x for x in layouts)}")
    print("\n| measured | " + " | ".join(r["layout"] for r in rows) + " |")
    print("|---|" + "---|" * len(rows))
    def line(label, f):
        print(f"| {label} | " + " | ".join(f(r) for r in rows) + " |")
    line("random 2B base written (bf16)",
         lambda r: f"{r['base_bytes'] / 1e9:.2f} GB in {r['base_seconds']:.0f} s")
    line("hidden -> mounted hidden", lambda r: f"{r['hidden']} -> {r['mounted_hidden']}")
    line("layers (machine + base)", lambda r: f"{r['layers']['machine'][1]} + "
         f"{r['layers']['base'][1] - r['layers']['base'][0]}")
    line("build time (`qwengpu build`)", lambda r: f"{r['build_seconds']:.0f} s")
    line("peak build memory (ru_maxrss)", lambda r: f"{r['build_peak_rss'] / 2**30:.2f} GiB")
    line("mount on disk (float32)", lambda r: f"{r['mount_bytes'] / 1e9:.2f} GB")
    line("load with our runtime (checks + gather)", lambda r: f"{r['launch']['load_seconds']:.0f} s, "
         f"RSS {r['launch']['rss_after_load'] / 2**30:.2f} GiB")
    line("text: our text runtime (base layers alone), greedy decode of 8 tokens, RSS after it",
         lambda r: f"{r['text']['ours_tokens_per_second']:.2f} tokens/s, "
         f"{r['text']['ours_rss'] / 2**30:.2f} GiB (load {r['text']['ours_load_seconds']:.0f} s)"
         if "text" in r else "not run")
    for k in KERNELS:
        def cell(r, k=str(k)):
            x = r["launch"]["kernels"][k]
            return (f"{x['mount']:,.0f} vs {x['standalone']:,.0f} tokens/s ({x['tokens']} tokens; "
                    f"trace {'equal' if x['same_trace'] else 'DIFFERENT'})")
        line(f"{Path(k).stem}: mount (ours) vs standalone, best of 3 cold", cell)
    if stock is not None:
        hp = rows[0]["mounted_hidden"]
        lm = rows[0]["layers"]["machine"][1]
        nb = rows[0]["layers"]["base"][1] - rows[0]["layers"]["base"][0]
        per = ((lm + nb * 3 / 4) * stock["deltanet_layer_ms"] + nb / 4 * stock["attention_layer_ms"]
               + stock["lm_head_ms"])
        print(f"\nstock forward at hidden {hp}, one decode token (float32, 1 thread, random layers): "
              f"DeltaNet layer "
              f"{stock['deltanet_layer_ms']:.1f} ms, attention layer {stock['attention_layer_ms']:.1f} ms, "
              f"lm_head ({248320 + 65536:,} rows, scaled from 65,536) {stock['lm_head_ms']:.1f} ms; "
              "extrapolated to the whole "
              f"{lm} + {nb}-layer stack: about {per / 1e3:.2f} s per token (the machine's layers all "
              "DeltaNet, a quarter of the base's attention)")
    print("\n" + json.dumps({"rows": rows, "stock": stock}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
