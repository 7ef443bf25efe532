"""How many machine instructions write a result no later instruction reads (the ROM's ``nowb`` bit).

    python bench/dead_results.py [--dir kernels] [--dir kernels/external] [--shape 2b|test] [--json]

Machine v2 stops writing back dead results (``qwengpu/codegen/liveness.py``): a pass whose result
is dead writes no result tokens. This counts, per suite, the machine program rows the analysis
marks dead (each launch lowered as ``qwengpu run`` lowers it, ``engine.prepare``), so the saving is
measured, not assumed: every dead row saves its result tokens once per pass that runs it. No model
is built or run; seconds per kernel (the CUDA compile).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def count(kdir: Path, shape_name: str) -> dict:
    """Rows, dead rows and the kernels holding them, for every ``.cu`` with a spec in ``kdir``."""
    from qwengpu.codegen.liveness import dead_results
    from qwengpu.errors import QwenGPUError
    from qwengpu.model.configs import shape_for
    from qwengpu.runtime.engine import machine_config, prepare

    shape = shape_for(machine_config(shape_name))
    name = str(kdir.relative_to(ROOT)) if kdir.is_relative_to(ROOT) else str(kdir)
    out: dict = {"dir": name, "kernels": 0, "refused": {}, "rows": 0, "dead": 0, "by_kernel": {}}
    for cu in sorted(kdir.glob("*.cu")):
        if not cu.with_suffix(".json").exists():
            continue
        try:
            prog = prepare(cu, shape=shape)[1]
        except QwenGPUError as e:
            out["refused"][cu.stem] = str(e).splitlines()[0]
            continue
        dead = dead_results(prog.code)
        out["kernels"] += 1
        out["rows"] += len(dead)
        out["dead"] += sum(dead)
        if any(dead):
            out["by_kernel"][cu.stem] = sum(dead)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", action="append", help="kernel folders (default: kernels, kernels/external)")
    ap.add_argument("--shape", choices=["2b", "test"], default="2b")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [count(ROOT / d, args.shape) for d in (args.dir or ["kernels", "kernels/external"])]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"command: python bench/dead_results.py --shape {args.shape}"
          + "".join(f" --dir {d}" for d in args.dir or []) + f"   ({time.perf_counter() - t0:.0f} s)\n")
    print("| suite | kernels lowered | refused | machine rows | dead rows | where |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        where = ", ".join(f"{k} {v}" for k, v in r["by_kernel"].items()) or "—"
        n_ref = len(r["refused"])
        print(f"| {r['dir']} | {r['kernels']} | {n_ref} | {r['rows']:,} | {r['dead']:,} | {where} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
