"""Is there room for another unit in the 2B-shape machine? (issue 14: why the levers stop here)

The next instruction levers after the multiplier and the four float adders would be more units: a
float multiply, a fused multiply-add, the multiplier's high word. Each is a 4-lane circuit beside
the others, and what a unit costs the machine is residual width: every live bit is a dimension of
the 2,048 the layer shape (and the user's Qwen3.5-2B, when mounted) has. This prints:

1. candidate units alone (one lane) on the Qwen3.5-2B layer shape: layers, residual slots, MLP
   neurons. ``fmul (fast range)`` is a float multiply for the lowering's fast range (normal factors
   whose exponent fields sum to 174..377, ``softfloat.ES_MIN..ES_MAX``: the product is normal):
   a 24 x 24 significand product, round to nearest even, the exponent, the sign; it is checked
   here bit for bit against float32 multiplication on random pairs of that range. ``mul, full
   64-bit product`` is the shipped multiplier's Booth product kept to 64 bits (mul.hi in one row);
2. the shipped 2B-shape machine (multiplier + four adders, ``circuit.mlp_reserve``) and the same
   machine with four more of a candidate unit muxed into the result (a layout measurement: an op
   code past ``ROM_OPS``, not a machine that runs): layers and peak live residual, or why it does
   not fit.

    python bench/unit_room.py [--pairs N] [--json]     # ~1 min
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import numpy as np

from qwengpu.compiler import Circuit, FitError, LayoutReport, compile_circuit, evaluate, text_config
from qwengpu.compiler.ir import Bit, Word
from qwengpu.machine import circuit as M
from qwengpu.machine import fpu
from qwengpu.machine.fpu import fadd
from qwengpu.model.configs import shape_for

Unit = Callable[[Circuit, Word, Word], Word]


def fmul_fast(c: Circuit, a: Word, b: Word) -> Word:
    """``a * b`` rounded to nearest even for normal factors whose exponent fields sum to 174..377:
    the machine's one-lane unit, ``machine.fpu.fmul_fast`` (since 9.21 it also returns the signed
    zero for a zero factor; the logs of 9.12 and 9.20 were measured before that, without it)."""
    return fpu.fmul_fast(c, a, b)


def mul_full(c: Circuit, a: Word, b: Word) -> Word:
    """The 64-bit product of two 32-bit words (the shipped multiplier keeps the low 32)."""
    zero = Bit(c, const=0)
    return (Word(c, list(a.bits) + [zero] * 32) * Word(c, list(b.bits) + [zero] * 32))[:64]


def mul_low(c: Circuit, a: Word, b: Word) -> Word:
    return (a * b)[:32]


def fadd_shipped(c: Circuit, a: Word, b: Word, modes: list[Bit] | None = None) -> Word:
    """The shipped adder with its three mode bits (ftz, negate b, round to odd): inputs when alone,
    the ROM word's bits inside the machine, as the shipped one has them."""
    ftz, neg, odd = modes if modes is not None else c.input("mode", 3).bits
    return fadd(c, a, b, ftz, neg=neg, odd=odd)


UNITS: dict[str, Unit] = {
    "fadd (shipped, fpu.fadd)": fadd_shipped,
    "mul, low word (shipped)": mul_low,
    "fmul (fast range)": fmul_fast,
    "mul, full 64-bit product": mul_full,
}


def fmul_exactness(n: int, seed: int = 1) -> dict:
    """``fmul_fast`` on n random pairs of its range against float32 multiplication, bit for bit."""
    c = Circuit("fmul")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("y", fmul_fast(c, a, b))
    rng = np.random.default_rng(seed)
    ea, eb = rng.integers(1, 255, 4 * n), rng.integers(1, 255, 4 * n)
    keep = np.nonzero((ea + eb >= 174) & (ea + eb <= 377))[0][:n]
    ea, eb = ea[keep], eb[keep]
    x = (rng.integers(0, 2, len(ea)) << 31) | (ea << 23) | rng.integers(0, 1 << 23, len(ea))
    y = (rng.integers(0, 2, len(ea)) << 31) | (eb << 23) | rng.integers(0, 1 << 23, len(ea))
    got = np.array([int(v) for v in evaluate(c, {"a": x.astype(object), "b": y.astype(object)})["y"].ravel()],
                   dtype=np.uint64)
    want = (x.astype(np.uint32).view(np.float32) * y.astype(np.uint32).view(np.float32)).view(np.uint32)
    return {"pairs": len(ea), "bit-exact": int((got == want.astype(np.uint64)).sum())}


def _layout(rep: LayoutReport) -> dict:
    return {"layers": rep.n_layers, "residual slots": rep.signal_dims, "peak live residual": rep.peak_live,
            "available": rep.available_dims, "MLP neurons": rep.total_neurons}


def unit_alone(name: str, unit: Unit) -> dict:
    c = Circuit(name.split()[0])
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("y", unit(c, a, b))
    return {"circuit": f"{name}, one lane", **_layout(LayoutReport.of(compile_circuit(
        c, text_config("qwen3_5_2b_text"))))}


def machine(unit: Unit | None) -> LayoutReport:
    """The shipped 2B-shape machine, with four of ``unit`` muxed into the datapath's result."""

    def lane(c: Circuit, fx: M.Fetch, a: Word, b: Word) -> Word:
        if unit is fadd_shipped:  # its modes from the ROM row, as the shipped adder has them
            return fadd_shipped(c, a, b, [fx.f["csign"][0], fx.f["cmp"][0], fx.f["cmp"][1]])
        return unit(c, a, b)

    cfg = text_config("qwen3_5_2b_text")  # the Qwen3.5-2B layer (its DeltaNet value heads hold the banks)
    shape = shape_for(cfg)
    c = M.build_machine(shape, extra=lane if unit is not None else None)
    return LayoutReport.of(compile_circuit(c, cfg, mlp_reserve=M.mlp_reserve(shape)))


def machines(extras: list[str]) -> list[dict]:
    rows = []
    for name in [None, *extras]:
        label = "2B machine as shipped (multiplier + 4 fadd)" + (f" + 4 x {name}" if name else "")
        t0 = time.perf_counter()
        try:
            row = {"circuit": label, **_layout(machine(UNITS[name] if name else None))}
        except FitError as e:
            row = {"circuit": label, "layers": "does not fit: " + " ".join(str(e).split())[:140]}
        rows.append({**row, "seconds": round(time.perf_counter() - t0, 1)})
    return rows


def table(rows: list[dict]) -> str:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    out += ["| " + " | ".join(f"{r[k]:,}" if isinstance(r.get(k), int) else str(r.get(k, "")) for k in keys)
            + " |" for r in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=20000, help="random in-range pairs for the fmul check")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = ap.parse_args(argv)
    ex = fmul_exactness(args.pairs)
    alone = [unit_alone(k, u) for k, u in UNITS.items()]
    mach = machines(["fadd (shipped, fpu.fadd)", "fmul (fast range)"])
    total = text_config("qwen3_5_2b_text").hidden_size
    if args.json:
        print(json.dumps({"fmul_exactness": ex, "units": alone, "machines": mach, "hidden": total}))
    else:
        print(f"$ python bench/unit_room.py --pairs {args.pairs}\n")
        print(f"fmul (fast range) against float32 multiplication: {ex['bit-exact']:,} of {ex['pairs']:,} "
              "random pairs bit-exact\n")
        print(table(alone) + "\n\n" + table(mach))
        print(f"\n(hidden size {total}; the compiler keeps a few dimensions for its constants)")
    return 0 if ex["bit-exact"] == ex["pairs"] else 1


if __name__ == "__main__":
    sys.exit(main())
