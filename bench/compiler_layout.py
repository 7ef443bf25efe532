"""Layout of the standard compositions on a Qwen3.5 layer shape: layers, residual slots, neurons.

    python bench/compiler_layout.py [--config qwen3_5_2b_text] [--json]

Compile only (no model is built), so it runs in seconds; the figures are the compiler's own
layout report, the same one ``LayoutReport.of(compiled)`` prints.
"""

from __future__ import annotations

import argparse
import json
import sys

from qwengpu.compiler import Circuit, compile_circuit, text_config
from qwengpu.compiler.report import LayoutReport


def compositions() -> dict[str, Circuit]:
    out = {}
    c = Circuit("add32")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("y", a + b)
    out["32-bit adder"] = c
    c = Circuit("cmp32")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("ult", a < b)
    c.output("slt", a.as_signed() < b.as_signed())
    c.output("eq", a == b)
    out["comparator (u, s, eq)"] = c
    c = Circuit("shift32")
    a, k = c.input("a", 32), c.input("k", 5)
    c.output("shl", a << k)
    c.output("shr", a >> k)
    c.output("sar", a.as_signed() >> k)
    out["shifter (shl, shr, sar)"] = c
    c = Circuit("mux32")
    a, b, s = c.input("a", 32), c.input("b", 32), c.bit_input("s")
    c.output("y", c.mux(s, a, b))
    out["32-bit mux"] = c
    c = Circuit("mul32")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("y", a * b)
    out["32-bit multiplier (low word)"] = c
    c = Circuit("regfile")
    we, wa = c.bit_input("we"), c.input("wa", 7)
    x = c.input("x", 32)
    rf = c.memory("regs", rows=128, width=32)
    rf.write(wa, x, we)
    for i in range(3):
        c.output(f"r{i}", rf.read(c.input(f"ra{i}", 7)))
    out["register file 128x32, 3 read ports"] = c
    c = Circuit("alu")
    a, b, op = c.input("a", 32), c.input("b", 32), c.input("op", 3)
    k = b[:5]
    c.output("y", c.select(op, [a + b, a - b, a & b, a | b, a ^ b, a << k, a >> k, a.as_signed() >> k]))
    out["8-op ALU with select"] = c
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="qwen3_5_2b_text", help="a shipped config name or a config.json path")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cfg = text_config(args.config)
    rows = []
    for label, circ in compositions().items():
        rep = LayoutReport.of(compile_circuit(circ, cfg))
        heads = sum(r.heads or 0 for r in rep.layers)
        rows.append({"circuit": label, "layers": rep.n_layers, "slots": rep.peak_live,
                     "neurons": rep.total_neurons, "max_neurons_per_layer": rep.max_neurons, "heads": heads})
    if args.json:
        print(json.dumps({"config": args.config, "rows": rows}))
        return 0
    print(f"layer shape: {args.config} (hidden {cfg.hidden_size}, intermediate {cfg.intermediate_size})")
    print(f"{'circuit':38s} {'layers':>6s} {'slots':>6s} {'neurons':>8s} {'max/layer':>9s} {'heads':>6s}")
    for r in rows:
        print(f"{r['circuit']:38s} {r['layers']:6d} {r['slots']:6d} {r['neurons']:8d} "
              f"{r['max_neurons_per_layer']:9d} {r['heads']:6d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
