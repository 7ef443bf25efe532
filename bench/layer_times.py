"""Where the fast runtime's time goes: microseconds per token in each layer's blocks, one launch.

    python bench/layer_times.py [--kernel kernels/gcd.cu] [--shape 2b] [--threads 1]

Builds (or loads from the cache) the machine of ``--shape``, gathers the fast runtime
(:class:`qwengpu.runtime.FastModel`), runs the launch once cold to fill the memos as a real launch
does, then again cold with a timer around every DeltaNet and MLP block, and prints one row per layer
(µs per token of its mixer and its MLP, the mixer's memo hit rate) and the totals. The trace of the
timed run must equal the untimed one (the timers change nothing). Speed claims are ratios measured
in one run (``bench/side_by_side.py``); this table says which layers a change should look at.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


class _Timed:
    """A block with a clock: total seconds spent in its calls."""

    def __init__(self, block) -> None:
        self.block = block
        self.seconds = 0.0

    def __call__(self, x) -> None:
        t0 = time.perf_counter()
        self.block(x)
        self.seconds += time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", default=str(ROOT / "kernels/gcd.cu"), help="a .cu with its .json beside it")
    ap.add_argument("--shape", choices=["test", "2b"], default="2b")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))

    from qwengpu.machine import protocol as P
    from qwengpu.runtime import FastModel
    from qwengpu.runtime.engine import machine_config, machine_model, prepare, shape_for

    config = machine_config(args.shape)
    _, model = machine_model(config)
    fast = FastModel.from_model(model)
    prompt = prepare(args.kernel, None, shape_for(config))[2]
    halt = P.ctl(P.HALT)
    fast.clear_memos()
    untimed = fast.generate(prompt, 10_000_000, stop=halt)
    timed = [(_Timed(m) if m is not None else None, _Timed(f) if f is not None else None)
             for m, f in fast.blocks]
    plain, fast.blocks = fast.blocks, timed
    fast.clear_memos()
    t0 = time.perf_counter()
    trace = fast.generate(prompt, 10_000_000, stop=halt)
    wall = time.perf_counter() - t0
    fast.blocks = plain
    if trace != untimed:
        raise SystemExit("the timed trace differs from the untimed one")
    n = len(prompt) + len(trace)
    print(f"{Path(args.kernel).name}, shape {args.shape}: {n:,} tokens (prompt {len(prompt):,}), "
          f"{n / wall:,.0f} tokens/s with the timers, {1e6 * wall / n:,.0f} µs per token")
    print("\n| layer | mixer µs/token | mixer memo hits | MLP µs/token | MLP memo hits | MLP neurons |")
    print("|---:|---:|---:|---:|---:|---:|")
    tot_m = tot_f = 0.0
    for i, (m, f) in enumerate(timed):
        um = 1e6 * m.seconds / n if m else 0.0
        uf = 1e6 * f.seconds / n if f else 0.0
        tot_m, tot_f = tot_m + um, tot_f + uf
        hits = "-"
        if m is not None and getattr(m.block, "plans", None) is not None and m.block.plans.looks:
            hits = f"{m.block.plans.hits / m.block.plans.looks:.0%}"
        mhits, neurons = "-", "-"
        if f is not None:
            memo, neurons = f.block.memo, f"{f.block.n:,}"
            mhits = f"{memo.hits / memo.looks:.0%}" + ("" if memo.on else " (off)") if memo.looks else "off"
        print(f"| {i} | {um:,.1f} | {hits} | {uf:,.1f} | {mhits} | {neurons} |")
    print(f"| all | {tot_m:,.0f} | | {tot_f:,.0f} | | |")
    print(f"\nlayer time {tot_m + tot_f:,.0f} of {1e6 * wall / n:,.0f} µs per token")


if __name__ == "__main__":
    main()
