"""Stock prefill vs our chunked-path runtime on the same teacher-forced replay, in one run.

    python bench/replay_speed.py [--kernel kernels/dot.cu ...] [--threads 2] [--repeat 2]

For each kernel: the fast runtime writes the trace (recurrent path); then prompt + trace are fed
in one prefill, once through the stock ``Qwen3_5ForCausalLM`` forward (``use_cache=False``: the
chunked DeltaNet rule over the whole sequence) and once through
``qwengpu.runtime.chunked.ChunkedModel`` (best of ``--repeat``). Both argmax sequences must equal
the trace at every model step (and each other everywhere). Prints tokens/s of both and the ratio.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", action="append", help="a .cu with its .json beside it (repeatable; "
                    "default kernels/dot.cu)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="chunked-runtime runs per kernel (best reported)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from qwengpu.runtime.chunked import ChunkedModel
    from qwengpu.runtime.engine import machine_model, run_machine

    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    _, model = machine_model()
    t0 = time.perf_counter()
    cm = ChunkedModel(model)
    print(f"chunked runtime gather {time.perf_counter() - t0:.1f} s (one-time), torch threads {args.threads}")
    print(f"{'kernel':14s} {'tokens':>7s} {'stock s':>8s} {'stock tok/s':>11s} {'ours s':>7s} "
          f"{'ours tok/s':>10s} {'ratio':>6s}  replay")
    for k in args.kernel or [str(ROOT / "kernels/dot.cu")]:
        run = run_machine(Path(k), model=model, max_tokens=400000)
        ids = run.prompt + run.trace[:-1]
        n = len(run.prompt) - 1
        t0 = time.perf_counter()
        with torch.no_grad():
            stock = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].argmax(-1).tolist()
        t_stock = time.perf_counter() - t0
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ours = cm.argmaxes(ids)
            best = min(best, time.perf_counter() - t0)
        same = "equal at every position" if ours == stock and stock[n:] == run.trace else "DIFFERS"
        print(f"{Path(k).stem:14s} {len(ids):>7,} {t_stock:>8.1f} {len(ids) / t_stock:>11.1f} {best:>7.2f} "
              f"{len(ids) / best:>10.1f} {t_stock / best:>5.0f}x  {same}")


if __name__ == "__main__":
    main()
