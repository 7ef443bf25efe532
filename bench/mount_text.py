"""Text decode through a mount: our text runtime (``qwengpu/runtime/mounted_text.py``: the base layers
alone, the machine layers skipped after its checks) against the stock forward of the whole mount
(``AutoModelForCausalLM.from_pretrained``, every layer), in the same process, float32, one thread.

    OMP_NUM_THREADS=1 python bench/mount_text.py --mount DIR            # an existing mount
    OMP_NUM_THREADS=1 python bench/mount_text.py --shape 2b --base-layers 4 --vocab 32768

``--shape 2b`` writes a random base of the real Qwen3.5-2B layer shape (hidden 2048, the 2B's
heads, intermediate size and layer pattern) with ``--base-layers`` layers and a ``--vocab``-token
vocabulary, mounts it (hidden 4096, the 37-layer machine in front) and deletes both afterwards. The
whole 24-layer, 248,320-token 2B mount is ~39 GB in float32 and its stock forward does not fit this
24 GB machine: the layer count and vocabulary are cut so the stock side fits, and are printed.

Greedy decoding with the cache (``generate``) after a fixed prompt; both sides must write the same
tokens (checked), and their prefill logits must be bit-identical (checked). Printed: tokens/s of
each, the ratio, load seconds and RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def _rss() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(mount: Path, tokens: int, prompt_len: int, with_stock: bool = True) -> dict:
    """Both runtimes on one mount, in this process (``with_stock=False``: ours alone, for a mount whose
    stock forward does not fit)."""
    import torch
    from transformers import AutoModelForCausalLM

    from qwengpu.runtime.mounted_text import MountText

    torch.set_num_threads(1)
    res: dict = {"mount": str(mount)}
    g = torch.Generator().manual_seed(0)
    t = time.perf_counter()
    ours = MountText(mount)
    res["ours_load_seconds"] = time.perf_counter() - t
    assert ours.runtime == "mounted-text", ours.fallback_reason
    V = ours.V
    ids = torch.randint(0, V, (1, prompt_len), generator=g)
    kw = {"max_new_tokens": tokens, "min_new_tokens": tokens, "do_sample": False,
          "attention_mask": torch.ones_like(ids), "pad_token_id": 0}
    out = {}

    def decode(label: str, model) -> None:
        with torch.no_grad():
            model.generate(ids, **(kw | {"max_new_tokens": 2, "min_new_tokens": 2}))  # warm-up
            t = time.perf_counter()
            gen = model.generate(ids, **kw)
            dt = time.perf_counter() - t
        out[label] = gen[0, prompt_len:].tolist()
        res[f"{label}_tokens_per_second"] = tokens / dt

    decode("ours", ours)
    res["ours_rss"] = _rss()  # after decoding: every weight it reads is resident (memory-mapped shards)
    res["layers"] = {"ours": len(ours.base.model.layers)}
    if not with_stock:
        return res
    t = time.perf_counter()
    stock = AutoModelForCausalLM.from_pretrained(str(mount), dtype=torch.float32).eval()
    res["stock_load_seconds"] = time.perf_counter() - t
    res["layers"]["stock"] = len(stock.model.layers)
    decode("stock", stock)
    res["rss_both"] = _rss()
    with torch.no_grad():
        a, b = ours(input_ids=ids).logits, stock(input_ids=ids).logits
    res["prefill_bit_identical"] = bool(torch.equal(a, b))
    res["same_tokens"] = out["ours"] == out["stock"]
    res["ratio"] = res["ours_tokens_per_second"] / res["stock_tokens_per_second"]
    res["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return res


def _sh(argv: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mount", metavar="DIR", help="measure this existing mount")
    ap.add_argument("--shape", choices=["2b"], help="write and mount a random base of this layer shape")
    ap.add_argument("--base-layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--tokens", type=int, default=16, help="tokens to decode (default 16)")
    ap.add_argument("--prompt", type=int, default=32, help="prompt length (default 32)")
    ap.add_argument("--work", default=os.environ.get("TMPDIR", "/tmp"))
    ap.add_argument("--no-stock", action="store_true", help="our runtime alone (a mount too big for stock)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not args.mount and not args.shape:
        ap.error("pass --mount DIR or --shape 2b")
    work = None
    try:
        if args.mount:
            mount = Path(args.mount)
        else:
            work = Path(args.work) / f"qwengpu-text-bench-{os.getpid()}"
            work.mkdir(parents=True)
            base, mount = work / "base", work / "mount"
            print(f"[{time.strftime('%H:%M:%S')}] writing the base", file=sys.stderr, flush=True)
            _sh([sys.executable, "-c", "import torch; torch.set_num_threads(1)\nfrom qwengpu.model.synthetic "
                 f"import make_synthetic_base\nmake_synthetic_base({str(base)!r}, shape='2b', "
                 f"layers={args.base_layers}, vocab={args.vocab})"])
            print(f"[{time.strftime('%H:%M:%S')}] building the mount", file=sys.stderr, flush=True)
            _sh([sys.executable, "-m", "qwengpu.cli", "build", "--stock", "--base", str(base), "--out",
                 str(mount)])
            shutil.rmtree(base, ignore_errors=True)
        print(f"[{time.strftime('%H:%M:%S')}] measuring", file=sys.stderr, flush=True)
        res = measure(mount, args.tokens, args.prompt, with_stock=not args.no_stock)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    cmd = " ".join(["OMP_NUM_THREADS=1 python bench/mount_text.py", *sys.argv[1:]])
    if args.json:
        print(json.dumps(res | {"command": cmd}))
        return 0
    print(f"command: {cmd}")
    if args.no_stock:
        print(f"our text runtime: {res['layers']['ours']} layers, load {res['ours_load_seconds']:.1f} s, "
              f"greedy decode {res['ours_tokens_per_second']:.2f} tokens/s, RSS after decoding "
              f"{res['ours_rss'] / 2**30:.2f} GiB")
        return 0
    print("\n| measured | our text runtime | stock forward of the whole mount |")
    print("|---|---|---|")
    print(f"| layers run per token | {res['layers']['ours']} | {res['layers']['stock']} |")
    print(f"| load | {res['ours_load_seconds']:.1f} s (checks included) | "
          f"{res['stock_load_seconds']:.1f} s |")
    print(f"| greedy decode, {args.tokens} tokens after {args.prompt} | "
          f"{res['ours_tokens_per_second']:.2f} tokens/s | {res['stock_tokens_per_second']:.2f} tokens/s |")
    print(f"\nratio {res['ratio']:.1f}x; same tokens: {res['same_tokens']}; prefill logits bit-identical: "
          f"{res['prefill_bit_identical']}; RSS after decoding: ours alone "
          f"{res['ours_rss'] / 2**30:.2f} GiB, "
          f"then with the stock model too {res['rss_both'] / 2**30:.2f} GiB (memory-mapped shards: pages "
          "shared)")
    return 0 if res["same_tokens"] and res["prefill_bit_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
