"""Stock HF greedy loop vs the fast runtime on the machine slice's launches, in one run.

    python bench/runtime_speed.py [--kernel tests/machine_weights/kernels/vadd.cu ...] [--threads 2]
                                  [--repeat 3] [--no-stock] [--shape test --shape 2b]

For each kernel both run the same prompt to HALT: the stock model as
``qwengpu.runtime.engine.generate`` does (one prefill on the chunked path, then one token at a
time with the cache, recurrent path), the fast runtime with ``FastModel.generate`` (every prompt
token through the recurrent step). Tokens counted: prompt + trace (every token is one pass through
all layers); the traces must be equal. Warp instructions/s counts the PASS tokens (one warp
instruction each, plus the first).

Fast rows: "cold" runs start with every memo cleared (``FastModel.clear_memos``), so a run gains
nothing from an earlier run of the same launch; "first run" is the first of them (right after the
gather); "warm" repeats the launch with the memos the previous run left (what a second launch of
the same program sees); "general paths" is ``FastModel.from_model(model, shortcuts=False)`` (no
guarded shortcut, no memo). ``--no-stock`` skips the stock loop (minutes) for quick checks.

Several ``--shape``: each machine in turn in the same process (the previous one freed first), then
one table of every row's tokens/s per shape and the ratio to the first shape: issue 14's "no
slower per token", measured in one run.
"""

from __future__ import annotations

import argparse
import gc
import shlex
import sys
import time
from pathlib import Path

import torch

from qwengpu.shapes import default_shape_name

ROOT = Path(__file__).resolve().parent.parent


def _timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", action="append", help="a .cu with its .json beside it (repeatable; "
                    "default tests/machine_weights/kernels/vadd.cu)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="cold fast runs per kernel (the best is reported)")
    ap.add_argument("--no-stock", action="store_true", help="skip the stock loop (no speed-up is printed)")
    ap.add_argument("--shape", action="append", choices=["test", "2b"],
                    help="the machine's layer shape: test, or Qwen3.5-2B's (with the multiplier); "
                    "repeatable: each in turn, then a comparison (default: the default machine, as "
                    "`qwengpu run`: 2b unless $QWENGPU_MACHINE_SHAPE says test)")
    args = ap.parse_args()
    kernels = args.kernel or [str(ROOT / "tests/machine_weights/kernels/vadd.cu")]
    shapes = args.shape or [default_shape_name()]
    torch.set_num_threads(args.threads)
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    results = {}
    for name in shapes:
        results[name] = run_shape(name, kernels, args)
        gc.collect()
    if len(shapes) > 1:
        compare(shapes, results)


def compare(shapes: list[str], results: dict[str, dict]) -> None:
    """tokens/s of every (kernel, row) per shape, and each shape's ratio to the first."""
    first = shapes[0]
    head = " | ".join([f"{s} tokens/s" for s in shapes] + [f"{s} / {first}" for s in shapes[1:]])
    print(f"\n| kernel | runtime | {head} |")
    print("|---|---|" + "---:|" * (2 * len(shapes) - 1))
    for (kernel, row), base in results[first].items():
        tps = [results[s].get((kernel, row)) for s in shapes]
        cells = [f"{t:,.1f}" if t else "-" for t in tps]
        ratios = [f"{t / base:.2f}x" if t and base else "-" for t in tps[1:]]
        print(f"| {kernel} | {row} | " + " | ".join(cells + ratios) + " |")


def run_shape(shape_name: str, kernels: list[str], args: argparse.Namespace) -> dict:
    """Build the machine of ``shape_name``, time every runtime on every kernel, print the tables;
    returns {(kernel, row): tokens/s} (the stock row's "vs stock" ratio is in the printed table)."""
    from qwengpu.machine import protocol as P
    from qwengpu.runtime import FastModel
    from qwengpu.runtime.engine import generate, machine_config, machine_model, prepare, shape_for

    out: dict = {}
    config = machine_config(shape_name)
    shape = shape_for(config)
    (_, model), t_build = _timed(machine_model, config)
    fast, t_gather = _timed(FastModel.from_model, model)
    general, t_gather_general = _timed(FastModel.from_model, model, shortcuts=False)
    st = fast.stats()
    print(f"model build {t_build:.1f} s, fast gather {t_gather:.1f} s (one-time; general-paths gather "
          f"{t_gather_general:.1f} s), torch threads {args.threads}, shape {shape_name}"
          f"{' (with the multiplier)' if shape.multiplier else ''}, {st['layers']} layers, "
          f"{st['deltanet_heads']} DeltaNet heads used, {st['mlp_neurons']} MLP neurons used")
    halt = P.ctl(P.HALT)
    for kernel in kernels:
        prompt = prepare(kernel, None, shape)[2]
        stock_trace, t_stock = (None, None) if args.no_stock else _timed(generate, model, prompt, 20000)
        colds = []
        for _ in range(max(1, args.repeat)):
            fast.clear_memos()
            trace, dt = _timed(fast.generate, prompt, 20000, stop=halt)
            colds.append(dt)
            if stock_trace is None:
                stock_trace = trace
            if trace != stock_trace:
                raise SystemExit(f"{kernel}: fast trace differs from the stock trace")
        warm_trace, t_warm = _timed(fast.generate, prompt, 20000, stop=halt)
        gen_trace, t_general = _timed(general.generate, prompt, 20000, stop=halt)
        same = warm_trace == stock_trace and gen_trace == stock_trace
        n = len(prompt) + len(stock_trace)
        warps = 1 + sum(P.decode(t).kind == "PASS" for t in stock_trace)
        print(f"\nkernel {Path(kernel).name}: prompt {len(prompt)} + trace {len(stock_trace)} = {n} tokens, "
              f"{warps} warp instructions; traces equal: {same}{'' if t_stock else ' (fast runs only)'}")
        print(f"| {'runtime':<30} | {'tokens':>6} | {'seconds':>8} | {'tokens/s':>9} | {'warp instr/s':>12} |"
              f" {'vs stock':>8} |")
        print(f"|{'-' * 32}|{'-' * 8}|{'-' * 10}|{'-' * 11}|{'-' * 14}|{'-' * 10}|")
        rows = [("stock HF (greedy)", t_stock), ("fast, cold, first run", colds[0]),
                (f"fast, cold, best of {len(colds)}", min(colds)), ("fast, warm (memos kept)", t_warm),
                ("fast, general paths", t_general)]
        for name, sec in rows:
            if sec is None:
                continue
            ratio = f"{t_stock / sec:.0f}x" if t_stock else "-"
            out[(Path(kernel).name, name.replace(f"best of {len(colds)}", "best"))] = n / sec
            print(f"| {name:<30} | {n:>6} | {sec:>8.3f} | {n / sec:>9.1f} | {warps / sec:>12.1f} |"
                  f" {ratio:>8} |")
        if not same:
            raise SystemExit(f"{kernel}: a fast trace differs from the stock trace")
    paths = {k: v for k, v in fast.stats().items() if k.startswith(("deltanet_", "mlp_memo", "head_"))
             and k != "deltanet_heads"}
    print("\nfast paths taken (all runs): " + ", ".join(f"{k} {v}" for k, v in paths.items()))
    del model, fast, general
    return out


if __name__ == "__main__":
    main()
