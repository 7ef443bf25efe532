"""Stock HF greedy loop vs the fast runtime on the machine slice's vadd launch, in one run.

    python bench/runtime_speed.py [--kernel tests/machine_weights/kernels/vadd.cu] [--threads 2]
                                  [--repeat 3]

Both run the same prompt to HALT: the stock model as ``qwengpu.machine.engine.generate`` does
(one prefill on the chunked path, then one token at a time with the cache, recurrent path), the
fast runtime with ``FastModel.generate`` (every prompt token through the recurrent step). Tokens
counted: prompt + trace (every token is one pass through all layers); the traces must be equal.
Warp instructions/s counts the PASS tokens (one warp instruction each, plus the first).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default=str(ROOT / "tests/machine_weights/kernels/vadd.cu"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="fast runs (the best is reported)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from qwengpu.machine import protocol as P
    from qwengpu.machine.engine import generate, machine_model, prepare
    from qwengpu.runtime import FastModel

    t0 = time.perf_counter()
    _, model = machine_model()
    prompt = prepare(args.kernel)[2]
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = FastModel.from_model(model)
    t_gather = time.perf_counter() - t0

    t0 = time.perf_counter()
    stock_trace = generate(model, prompt, 20000)
    t_stock = time.perf_counter() - t0

    halt = P.ctl(P.HALT)
    best, fast_trace, cold = float("inf"), [], 0.0
    for i in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        fast_trace = fast.generate(prompt, 20000, stop=halt)
        dt = time.perf_counter() - t0
        cold = dt if i == 0 else cold
        best = min(best, dt)

    same = fast_trace == stock_trace
    n = len(prompt) + len(stock_trace)
    warps = 1 + sum(P.decode(t).kind == "PASS" for t in stock_trace)
    print(f"kernel {Path(args.kernel).name}: prompt {len(prompt)} + trace {len(stock_trace)} = {n} tokens, "
          f"{warps} warp instructions; traces equal: {same}")
    print(f"model build {t_build:.1f} s, fast gather {t_gather:.1f} s (one-time), "
          f"torch threads {args.threads}")
    print(f"{'runtime':<22}{'tokens':>8}{'seconds':>10}{'tokens/s':>11}{'warp instr/s':>14}")
    rows = [("stock HF (greedy)", t_stock), ("fast (first run)", cold),
            (f"fast (best of {args.repeat})", best)]
    for name, sec in rows:
        print(f"{name:<22}{n:>8}{sec:>10.3f}{n / sec:>11.1f}{warps / sec:>14.1f}")
    print(f"speed-up: {t_stock / best:.0f}x (best), {t_stock / cold:.0f}x (first run)")
    if not same:
        raise SystemExit("fast trace differs from the stock trace")


if __name__ == "__main__":
    main()
