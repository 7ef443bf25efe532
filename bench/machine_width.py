"""Which width the 2B-shape machine needs: compile it at several hidden sizes (compile only).

Why: the one-lane float multiplier (``MachineShape.fmulf``) does not fit the 2,041 signal dimensions
of a 2,048-wide residual; the machine's width (``configs.MACHINE_WIDTH_2B``) is the narrowest that
fits at most 45 layers, and it is what a mount pays (the mount's hidden is the base's plus it).
Every layer field but the hidden size is Qwen3.5-2B's.

    python bench/machine_width.py [--widths 2048,2304,2560,3072] [--without-unit] [--json]   # ~15 s a width
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace


def measure(width: int, unit: bool) -> dict:
    from qwengpu.compiler import FitError, compile_circuit, text_config
    from qwengpu.machine.circuit import build_machine, mlp_reserve
    from qwengpu.model.configs import machine_2b_config, shape_for

    cfg = text_config("qwen3_5_2b_text", hidden_size=width)
    shape = replace(shape_for(machine_2b_config()), fmulf=unit)
    t0 = time.perf_counter()
    row: dict = {"width": width, "fmulf": unit}
    try:
        comp = compile_circuit(build_machine(shape), cfg, mlp_reserve=mlp_reserve(shape))
        row.update(fits=len(comp.layers) <= 45, layers=len(comp.layers),
                   signal_dims=len(comp.residual.signal_dims))
    except FitError as exc:
        row.update(fits=False, error=str(exc))
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--widths", default="2048,2304,2560,3072", help="comma-separated hidden sizes")
    ap.add_argument("--without-unit", action="store_true", help="the machine without the one-lane multiplier")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = [measure(int(w), not args.without_unit) for w in args.widths.split(",")]
    if args.json:
        print(json.dumps(rows))
        return 0
    print("command: python bench/machine_width.py " + " ".join(sys.argv[1:]))
    print("| width | one-lane multiplier | layers | signal dims | fits (<= 45 layers) |")
    print("|---:|---|---:|---:|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['width']:,} | {'yes' if r['fmulf'] else 'no'} | - | - | no: {r['error']} |")
        else:
            unit, fits = "yes" if r["fmulf"] else "no", "yes" if r["fits"] else "no"
            print(f"| {r['width']:,} | {unit} | {r['layers']} | {r['signal_dims']:,} | {fits} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
