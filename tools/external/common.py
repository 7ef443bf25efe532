"""Exact helpers shared by the external suite's generators: float64 rounding written in the spirit of
``tools/corpus/f32.py`` (rationals rounded once), small exact float32 data, warp shuffles.

Nothing here imports or runs the project's interpreter; the helpers follow the PTX ISA definitions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from corpus import f32 as F
from corpus.ints import Rng

# ---------------------------------------------------------------------------------------------
# float64: Fraction.__float__ divides two Python ints, which CPython rounds correctly (nearest-even),
# subnormals included; zero signs follow IEEE 754 6.3 for round-to-nearest.


def f64_round(q: Fraction, zero_negative: bool = False) -> float:
    """The float64 nearest to q (ties to even); an exact zero gets the sign IEEE gives the operation."""
    if q == 0:
        return -0.0 if zero_negative else 0.0
    v = float(q)
    assert not math.isinf(v), "float64 overflow is not expected in this suite"
    return v


def f64_add(a: float, b: float) -> float:
    """add.rn.f64 on finite operands."""
    q = Fraction(a) + Fraction(b)
    both_neg = math.copysign(1, a) < 0 and math.copysign(1, b) < 0
    return f64_round(q, zero_negative=both_neg)


def f64_mul(a: float, b: float) -> float:
    """mul.rn.f64 on finite operands."""
    neg = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
    return f64_round(Fraction(a) * Fraction(b), zero_negative=neg)


def f64_fma(a: float, b: float, c: float) -> float:
    """fma.rn.f64 on finite operands: a*b+c rounded once (NumPy has no exact float64 fma)."""
    q = Fraction(a) * Fraction(b) + Fraction(c)
    prod_neg = (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0)
    both_neg = prod_neg and math.copysign(1, c) < 0 and Fraction(a) * Fraction(b) == 0
    return f64_round(q, zero_negative=both_neg)


# ---------------------------------------------------------------------------------------------
# float32 data


def f32s(values) -> list[np.float32]:
    """Exact float32 values from Python numbers (a value that is not a float32 is an error)."""
    return [F.f32(v) for v in values]


def dyadic_floats(r: Rng, n: int, mant_bits: int = 8, emin: int = -8, emax: int = 8) -> list[np.float32]:
    """n float32 values k * 2^e with |k| < 2^mant_bits: products of two of them are exact, sums round."""
    out = []
    for _ in range(n):
        k = r.int(-(1 << mant_bits) + 1, (1 << mant_bits) - 1)
        e = r.int(emin, emax)
        out.append(F.f32(k * 2.0**e))
    return out


def decimal_f32(text: str) -> np.float32:
    """A C float literal (decimal, ``f`` suffix) rounded once, correctly, to float32."""
    return F.round_f32(Fraction(text))


def double_literal_to_f32(text: str) -> np.float32:
    """A C double literal assigned to a float: rounded to float64 first, then to float32."""
    return F.round_f32(Fraction(float(Fraction(text))))


# ---------------------------------------------------------------------------------------------
# warp shuffles (PTX shfl.sync, one 32-lane warp, all lanes in the mask)


def shfl_down(vals: list, delta: int, width: int = 32) -> list:
    """__shfl_down_sync: lane l reads lane l + delta of its width-segment, or keeps its own value."""
    out = []
    for lane, v in enumerate(vals):
        seg_end = (lane // width + 1) * width
        src = lane + delta
        out.append(vals[src] if src < seg_end else v)
    return out


def shfl_up(vals: list, delta: int, width: int = 32) -> list:
    """__shfl_up_sync: lane l reads lane l - delta of its width-segment, or keeps its own value."""
    out = []
    for lane, v in enumerate(vals):
        seg_start = (lane // width) * width
        src = lane - delta
        out.append(vals[src] if src >= seg_start else v)
    return out
