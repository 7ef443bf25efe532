"""Program size against the machine's ROM (``soft.ROM_BUDGET``; 4,096 rows on the 2B shape, 1,024
before): inline expansions vs shared routines.

    python bench/rom_size.py                    # corpus table (~1-2 min)
    python bench/rom_size.py --kernels mulhi,gcd
    python bench/rom_size.py --json

Per lowered corpus kernel, after ``soft.expand_for_weights`` (every expander: integer multiply,
float ops, ...) and register allocation (what ``engine.prepare`` runs):

* ``lowered``: machine instructions before the expansion (lower.py's own sequences: division,
  sqrt, 64-bit ... are already there);
* ``inline``: ``routines="never"``, every expansion inline (the program before subroutines; the
  multiply still falls back to the ``loop`` shape when unrolled does not fit). A program over
  the ISA's 4096-instruction limit cannot be allocated or run: its expanded size is shown with
  ``*`` (allocation changes sizes by ~1 %);
* ``routines``: the default ``routines="auto"``: inline when the program fits the ROM, else the
  expansions with the largest measured saving become calls of shared routines until it fits;
* ``always``: every routable expansion (mul, mulhi, float ops) is a call;
* ``dyn``: machine warp instructions the simulator issues for the spec's launch (inline /
  routines): what the calls cost at run time (~3-5 per call: moves, ``call``, ``ret``);
* ``calls``/``bodies``: call sites and routine bodies of the ``routines`` program.

The summary counts the kernels that fit the ROM before (inline) and after (routines).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from qwengpu.codegen import soft  # noqa: E402
from qwengpu.codegen.lower import lower_kernel  # noqa: E402
from qwengpu.codegen.regalloc import allocate  # noqa: E402
from qwengpu.cuda import compile_file  # noqa: E402
from qwengpu.errors import MachineLimitError  # noqa: E402
from qwengpu.isa.sim import MachineSim, check_launch_limits, check_program_limits  # noqa: E402
from qwengpu.ptx.inline import inline_calls  # noqa: E402
from qwengpu.ptx.parser import parse_ptx  # noqa: E402
from qwengpu.runner import COMPILE_OPTIONS, corpus  # noqa: E402
from qwengpu.simt.interp import _find_kernel  # noqa: E402
from qwengpu.spec import bind, load_spec  # noqa: E402

ROM = soft.ROM_BUDGET
LIMIT = 4096  # LIMITS.program: larger programs are refused before allocation


def _run(module, fn, spec, prog) -> int | None:
    """Machine warp instructions of the spec's launch (None when the machine refuses it)."""
    try:
        check_program_limits(prog)
        bound = bind(spec, inline_calls(module, fn))
        check_launch_limits(prog, spec.grid, spec.block, bound.gmem, spec.shared_bytes)
        st = MachineSim(prog).launch(
            spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes
        )
    except MachineLimitError:
        return None
    return st.warp_instructions


def measure(cu: Path, spec_path: Path, *, dynamic: bool = True) -> dict | None:
    """One kernel's row (None when it is not lowered)."""
    spec = load_spec(spec_path)
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=f"{cu.name} (PTX)")
    fn = _find_kernel(module, spec.kernel)
    try:
        prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
    except MachineLimitError:
        return None
    row: dict = {"kernel": cu.stem, "lowered": len(prog.code)}
    for key, mode in (("inline", "never"), ("routines", "auto"), ("always", "always")):
        t0 = time.perf_counter()
        ex = soft.expand_for_weights(prog, routines=mode, outline=mode if mode != "auto" else "auto")
        row[f"{key}_expanded"] = len(ex.code)
        if len(ex.code) > LIMIT:
            row[key], row[f"{key}_allocated"] = len(ex.code), False
        else:
            try:
                al = allocate(ex)
                row[key], row[f"{key}_allocated"] = len(al.code), True
            except MachineLimitError as e:  # registers: the expanded size, marked
                row[key], row[f"{key}_allocated"] = len(ex.code), False
                row[f"{key}_error"] = str(e)
                al = None
            if key == "routines":
                row["calls"] = sum(1 for x in ex.code if x.op == "call")
                row["bodies"] = sum(1 for x in ex.code if x.op == "ret")
            if dynamic and key != "always" and al is not None:
                row[f"{key}_dyn"] = _run(module, fn, spec, al)
        row[f"{key}_seconds"] = round(time.perf_counter() - t0, 2)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", help="comma-separated corpus kernel names (default: all)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-dynamic", action="store_true", help="skip the simulator runs")
    args = ap.parse_args()
    soft.route_floats()  # float ops are routable too (idempotent)
    want = set(args.kernels.split(",")) if args.kernels else None
    rows = []
    for cu, sp in corpus(ROOT / "kernels"):
        if want is not None and cu.stem not in want:
            continue
        row = measure(cu, sp, dynamic=not args.no_dynamic)
        if row is None:
            print(f"{cu.stem}: not lowered", file=sys.stderr)
            continue
        rows.append(row)
        if not args.json:
            print(_line(row), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    fit_before = [r["kernel"] for r in rows if r["inline"] <= ROM]
    fit_after = [r["kernel"] for r in rows if r["routines"] <= ROM]
    print(
        f"\n{len(rows)} lowered kernels; fit {ROM} instructions: {len(fit_before)} inline -> "
        f"{len(fit_after)} with routines (always: {sum(1 for r in rows if r['always'] <= ROM)})"
    )
    print("newly fitting: " + ", ".join(sorted(set(fit_after) - set(fit_before))))
    print(
        "still too big: " + ", ".join(f"{r['kernel']} ({r['routines']})" for r in rows if r["routines"] > ROM)
    )
    print(
        f"total size: inline {sum(r['inline'] for r in rows)} -> routines {sum(r['routines'] for r in rows)} "
        f"(always {sum(r['always'] for r in rows)})"
    )


HEADER = "| kernel | lowered | inline | routines | always | calls / bodies | dyn inline | dyn routines |"


def _line(r: dict) -> str:
    def size(key: str) -> str:
        return f"{r[key]}{'' if r[f'{key}_allocated'] else '*'}"

    def dyn(key: str) -> str:
        v = r.get(f"{key}_dyn")
        return "-" if v is None else str(v)

    return (
        f"| {r['kernel']} | {r['lowered']} | {size('inline')} | {size('routines')} | {size('always')} | "
        f"{r.get('calls', 0)} / {r.get('bodies', 0)} | {dyn('inline')} | {dyn('routines')} |"
    )


if __name__ == "__main__":
    print(HEADER)
    print("|---|" + "---:|" * 7)
    main()
