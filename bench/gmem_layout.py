"""How much global memory fits the 2B-shape machine, and where: compiled layers per memory size,
bank size and placement (compile only, no model; ~1 min).

    python bench/gmem_layout.py [--json]

A memory sits in one layer (16 key heads of 128 rows: 2,048 one-word rows), and the machine reads
global memory through 4 ports (one copy per lane), so 4,096 words are 4 x 2 banks of 2,048 rows in
8 layers. Two placements: ``early`` builds the memory where version 1 had it (before the
datapath; the loaded word goes through the datapath's result select), ``late`` after the
scheduler and the units (``circuit.global_memory``: the loaded word joins the result as the
multiplier's does, and the scheduler's ``mpc`` keeps its layer). Rows: layers of the compiled
machine (the shipped one: 39 at 1,024 words), the layers holding a memory bank, the peak live
residual. A mount holds at most 45 machine layers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = [(1024, 1024, "early"), (4096, 2048, "early"), (4096, 1024, "late"), (4096, 2048, "late"),
         (6144, 2048, "late"), (8192, 2048, "late")]


def build(shape, placement: str):
    """The machine circuit with global memory built ``early`` (version 1's place) or ``late``
    (``MachineShape.gmem_late``)."""
    from dataclasses import replace

    from qwengpu.machine import circuit as M

    return M.build_machine(replace(shape, gmem_late=placement == "late"))


def measure(words: int, rows: int, placement: str) -> dict:
    from qwengpu.compiler import FitError, LayoutReport, compile_circuit, text_config
    from qwengpu.machine import circuit as M

    shape = M.MachineShape(multiplier=True, fadd=True, gmem_words=words, gmem_bank_rows=rows)
    t0 = time.perf_counter()
    row = {"words": words, "bank_rows": rows, "placement": placement}
    try:
        comp = compile_circuit(build(shape, placement), text_config("qwen3_5_2b_text"),
                               mlp_reserve=M.mlp_reserve(shape))
    except FitError as e:
        return {**row, "layers": None, "why": " ".join(str(e).split())[:160]}
    rep = LayoutReport.of(comp)
    gl = [lp.index for lp in comp.layers if any(b.name.startswith("gmem") for b in lp.banks)]
    mpc = [lp.index for lp in comp.layers if any(b.name.startswith("mpc") for b in lp.banks)]
    return {**row, "layers": rep.n_layers, "gmem_layers": f"{gl[0]}-{gl[-1]}" if gl else "",
            "mpc_layer": mpc[0] if mpc else None, "peak_live": rep.peak_live,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    args = ap.parse_args(argv)
    rows = [measure(*case) for case in CASES]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print("command: python bench/gmem_layout.py\n")
    print("| global words | bank rows | placement | layers | memory banks in layers | scheduler's mpc | "
          "peak live residual |")
    print("|---:|---:|---|---:|---|---:|---:|")
    for r in rows:
        print(f"| {r['words']:,} | {r['bank_rows']:,} | {r['placement']} | {r['layers'] or r.get('why')} | "
              f"{r.get('gmem_layers', '')} | {r.get('mpc_layer', '')} | {r.get('peak_live', '')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
