"""The float adder in the weights (issue 14): is it exact, how deep, and does the machine hold it?

Prints three tables:

1. exactness: ``machine.fpu.fadd`` run by the compiler's exact evaluator against the interpreter's
   ``simt.fp32.add`` (rn, with and without ftz; and its two machine modes: ``sub`` against
   ``fp32.sub``, rounding to odd against ``fp32.add_odd``) on special values (every pair) and
   random words (uniform, near-equal exponents, the subnormal range); bits compared;
2. the unit alone on the Qwen3.5-2B layer shape: layers, neurons, residual;
3. the 2B-shape machine (with the multiplier) without and with four such adders muxed into the
   datapath's result (an ``fadd`` row), at MLP reserves for the allocator's resets: layers, where
   the result latch lands, or why it does not fit.

The machine variant is assembled here from the shipped units (``circuit.fetch_decode`` ...), with
the adder selected by an op code past ``ROM_OPS``: a layout measurement, not a machine that runs.

    python bench/fadd_unit.py [--cases N] [--seed S] [--reserve 0,512,1536] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from qwengpu.compiler import Circuit, FitError, LayoutReport, compile_circuit, evaluate, text_config
from qwengpu.compiler.ir import Word
from qwengpu.machine import circuit as M
from qwengpu.machine.fpu import fadd
from qwengpu.model.configs import test_config
from qwengpu.simt import fp32

SPECIAL = [0, 0x80000000, 1, 0x80000001, 0x7FFFFF, 0x807FFFFF, 0x800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,
           0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x3F800000, 0xBF800000, 0x3F800001,
           0xBF7FFFFF, 0x33800000, 0xB3800000, 0x4B800000, 0xCB7FFFFF, 0x00400000, 0x80400000]


def operand_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of SPECIAL, then n uniform pairs, n pairs with exponents at most 3 apart (the
    cancellations), n pairs in the subnormal and smallest-normal range."""
    rng = np.random.default_rng(seed)
    u = lambda: rng.integers(0, 2**32, size=n, dtype=np.uint64)  # noqa: E731
    near_a = (u() & 0xFF800000) | rng.integers(0, 2**23, size=n, dtype=np.uint64)
    shift = (rng.integers(-3, 4, size=n).astype(np.int64) << 23).astype(np.uint64)
    near_b = ((near_a + shift) & 0xFFFFFFFF) ^ (rng.integers(0, 2, size=n, dtype=np.uint64) << 31)
    a = [x for x in SPECIAL for _ in SPECIAL] + list(u()) + list(near_a) + list(u() & 0x81FFFFFF)
    b = [y for _ in SPECIAL for y in SPECIAL] + list(u()) + list(near_b) + list(u() & 0x81FFFFFF)
    return np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64)


def unit_circuit(modes: bool = False) -> Circuit:
    """The adder of one lane; ``modes``: with the machine's two ROM bits as inputs (``neg``: a - b,
    ``odd``: round to odd)."""
    c = Circuit("fadd")
    a, b, f = c.input("a", 32), c.input("b", 32), c.input("ftz", 1)
    if modes:
        neg, odd = c.input("neg", 1), c.input("odd", 1)
        c.output("y", fadd(c, a, b, f.bits[0], neg=neg.bits[0], odd=odd.bits[0]))
    else:
        c.output("y", fadd(c, a, b, f.bits[0]))
    return c


def exactness(n: int, seed: int) -> list[dict]:
    """Every mode of the machine's adder (add, sub, add rounded to odd; ftz or not) against the
    interpreter's fp32 semantics (``fp32.add``, ``fp32.sub``, ``fp32.add_odd``)."""
    c = unit_circuit(modes=True)
    a, b = operand_pairs(n, seed)
    a32, b32 = a.astype(np.uint32), b.astype(np.uint32)
    rows = []
    for mode, neg, odd in (("add.rn", 0, 0), ("sub.rn", 1, 0), ("add.odd", 0, 1)):
        for ftz in (False, True):
            t0 = time.perf_counter()
            got = evaluate(c, {"a": a.astype(object), "b": b.astype(object),
                               "ftz": np.full(len(a), int(ftz), dtype=object),
                               "neg": np.full(len(a), neg, dtype=object),
                               "odd": np.full(len(a), odd, dtype=object)})["y"].ravel()
            got = np.array([int(v) for v in got], dtype=np.uint64)
            want = (fp32.add_odd(a32, b32, ftz) if odd else fp32.sub(a32, b32, "rn", ftz) if neg
                    else fp32.add(a32, b32, "rn", ftz)).astype(np.uint64)
            bad = np.nonzero(got != want)[0]
            rows.append({"mode": f"{mode}{'.ftz' if ftz else ''}.f32", "pairs": len(a),
                         "bit-exact": len(a) - len(bad), "first mismatch": (
                             f"{int(a[bad[0]]):#x}, {int(b[bad[0]]):#x}" if len(bad) else "-"),
                         "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def _layout(rep: LayoutReport) -> dict:
    text = str(rep)
    head = text.splitlines()[1].strip()
    rows = [ln.split()[0] for ln in text.splitlines() if "latch" in ln and ln.strip().startswith("L")]
    latch = rows[0] if rows else "-"
    return {"layout": head.split(": ", 1)[1], "result latch": latch}


def machine_with_adder(reserve: int, with_adder: bool) -> LayoutReport:
    """The 2B-shape machine (multiplier included), optionally with the four adders."""

    def adder(c: Circuit, fx: M.Fetch, a: Word, b: Word) -> Word:
        return fadd(c, a, b, fx.f["csign"][0])

    c = M.build_machine(M.MachineShape(multiplier=True), extra=adder if with_adder else None)
    return LayoutReport.of(compile_circuit(c, test_config(intermediate=6144), mlp_reserve=reserve))


def layouts(reserves: list[int]) -> list[dict]:
    rows = []
    t0 = time.perf_counter()
    rows.append({"circuit": "fadd unit alone (one lane), 2B shape",
                 **_layout(LayoutReport.of(compile_circuit(unit_circuit(), text_config("qwen3_5_2b_text")))),
                 "seconds": round(time.perf_counter() - t0, 1)})
    for adder in (False, True):
        for r in reserves:
            label = f"2B machine + multiplier{' + 4 adders' if adder else ''}, MLP reserve {r}"
            t0 = time.perf_counter()
            try:
                rows.append({"circuit": label, **_layout(machine_with_adder(r, adder)),
                             "seconds": round(time.perf_counter() - t0, 1)})
            except FitError as e:
                rows.append({"circuit": label, "layout": "does not fit: " + " ".join(str(e).split())[:150],
                             "result latch": "-", "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def table(rows: list[dict]) -> str:
    keys = list(rows[0])
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=20000, help="random pairs per family (default 20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reserve", default="0,512,1536", help="MLP reserves to try (comma-separated)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = ap.parse_args(argv)
    ex = exactness(args.cases, args.seed)
    lay = layouts([int(x) for x in args.reserve.split(",")])
    if args.json:
        print(json.dumps({"exactness": ex, "layouts": lay}))
    else:
        cmd = f"python bench/fadd_unit.py --cases {args.cases} --seed {args.seed} --reserve {args.reserve}"
        print(f"$ {cmd}\n")
        print(table(ex) + "\n\n" + table(lay))
    return 0 if all(r["bit-exact"] == r["pairs"] for r in ex) else 1


if __name__ == "__main__":
    sys.exit(main())
