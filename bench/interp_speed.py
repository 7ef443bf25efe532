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
    times, steps = [], 0
    for _ in range(repeat):
        interp = Interpreter(module, fn.name)
        bound = bind(spec, interp.fn)
        t0 = time.perf_counter()
        st = interp.launch(spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes)
        times.append(time.perf_counter() - t0)
        steps = st.warp_instructions
    return steps, statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="kernels")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for cu, js in corpus(args.dir):
        steps, sec = measure(cu, js, args.repeat)
        rows.append({"kernel": cu.stem, "warp_instructions": steps, "seconds": sec, "per_second": steps / sec})
    total_steps = sum(r["warp_instructions"] for r in rows)
    total_sec = sum(r["seconds"] for r in rows)
    summary = {"kernels": len(rows), "warp_instructions": total_steps, "seconds": total_sec,
               "per_second": total_steps / total_sec,
               "median_kernel_per_second": statistics.median(r["per_second"] for r in rows)}
    if args.json:
        print(json.dumps({"rows": rows, "summary": summary}))
        return 0
    print(f"{'kernel':28s} {'warp instr':>10s} {'ms (median)':>12s} {'warp instr/s':>13s}")
    for r in sorted(rows, key=lambda r: -r["warp_instructions"]):
        print(f"{r['kernel']:28s} {r['warp_instructions']:10,d} {r['seconds'] * 1e3:12.2f} {r['per_second']:13,.0f}")
    print(f"\ncorpus total: {summary['kernels']} kernels, {total_steps:,} warp instructions in {total_sec:.3f} s "
          f"= {summary['per_second']:,.0f} warp instructions/s "
          f"(median per kernel {summary['median_kernel_per_second']:,.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
