"""Interpreter speed over the corpus: warp instructions per second (median of several runs).

Compile and parse are cached/excluded: the figure is the launch itself (closure building
included), which is what a user waits for on repeated runs. Prints a table; ``--json`` for scripts.

    python bench/interp_speed.py [--dir kernels] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from qwengpu.cuda import compile_file
from qwengpu.ptx.parser import parse_ptx
from qwengpu.runner import COMPILE_OPTIONS, corpus
from qwengpu.simt.interp import Interpreter, _find_kernel
from qwengpu.spec import bind, load_spec


def measure(cu: Path, js: Path, repeat: int) -> tuple[int, float]:
    spec = load_spec(js)
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
    fn = _find_kernel(module, spec.kernel)
    times, cold, steps = [], [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        interp = Interpreter(module, fn.name)
        bound = bind(spec, interp.fn)
        t1 = time.perf_counter()
        interp.launch(spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes)
        cold.append(time.perf_counter() - t0)
        bound = bind(spec, interp.fn)  # fresh memory, same interpreter: closures already built
        t2 = time.perf_counter()
        st = interp.launch(
            spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes
        )
        times.append(time.perf_counter() - t2)
        steps = st.warp_instructions
        del t1
    return steps, statistics.median(times), statistics.median(cold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="kernels")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for cu, js in corpus(args.dir):
        steps, sec, cold = measure(cu, js, args.repeat)
        rows.append(
            {
                "kernel": cu.stem,
                "warp_instructions": steps,
                "seconds": sec,
                "per_second": steps / sec,
                "cold_seconds": cold,
            }
        )
    total_steps = sum(r["warp_instructions"] for r in rows)
    total_sec = sum(r["seconds"] for r in rows)
    total_cold = sum(r["cold_seconds"] for r in rows)
    summary = {
        "kernels": len(rows),
        "warp_instructions": total_steps,
        "seconds": total_sec,
        "per_second": total_steps / total_sec,
        "cold_seconds": total_cold,
        "cold_per_second": total_steps / total_cold,
        "median_kernel_per_second": statistics.median(r["per_second"] for r in rows),
    }
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}))
        return 0
    print(f"{'kernel':28s} {'warp instr':>10s} {'launch ms':>10s} {'warp instr/s':>13s} {'cold ms':>8s}")
    for r in sorted(rows, key=lambda r: -r["warp_instructions"]):
        print(
            f"{r['kernel']:28s} {r['warp_instructions']:10,d} {r['seconds'] * 1e3:10.2f} "
            f"{r['per_second']:13,.0f}"
            f" {r['cold_seconds'] * 1e3:8.2f}"
        )
    print(f"\ncorpus total: {summary['kernels']} kernels, {total_steps:,} warp instructions")
    print(
        f"  launch (closures built):  {total_sec:.3f} s = {summary['per_second']:,.0f} warp instructions/s "
        f"(median per kernel {summary['median_kernel_per_second']:,.0f}/s)"
    )
    print(
        f"  cold (parse->closures->launch, compile cached): {total_cold:.3f} s = "
        f"{summary['cold_per_second']:,.0f} warp instructions/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
