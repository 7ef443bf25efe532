"""Slow, obviously-correct reference for PTX float semantics (tests only).

Values are decoded from raw bits into exact ``Fraction`` magnitudes; a result is encoded by a
binary search over the monotonic bit patterns of the format (the largest pattern whose value is
<= the exact magnitude), then choosing between that pattern and the next one according to the
rounding mode.  Nothing here shares code with ``qwengpu.simt.fp32``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import mpmath


@dataclass(frozen=True)
class Fmt:
    width: int  # total bits
    man: int  # stored mantissa bits
    exp: int  # exponent bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp - 1)) - 1

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)

    @property
    def inf_pat(self) -> int:
        return ((1 << self.exp) - 1) << self.man

    @property
    def max_pat(self) -> int:
        return self.inf_pat - 1

    @property
    def canonical_nan(self) -> int:
        return (1 << (self.width - 1)) - 1

    def value(self, pat: int) -> Fraction:
        """Magnitude of a finite non-negative pattern (pat < inf_pat)."""
        e = pat >> self.man
        m = pat & ((1 << self.man) - 1)
        if e == 0:  # subnormal: no hidden bit, exponent of the smallest normal
            sh = 1 - self.bias - self.man
        else:
            m += 1 << self.man
            sh = e - self.bias - self.man
        return Fraction(m << sh) if sh >= 0 else Fraction(m, 1 << -sh)

    def overflow_value(self) -> Fraction:
        """The value the pattern after max_pat would have with an unbounded exponent."""
        return Fraction(2) ** (self.bias + 1)


F32 = Fmt(32, 23, 8)
F64 = Fmt(64, 52, 11)


@dataclass(frozen=True)
class Val:
    kind: str  # "nan", "inf", "fin"
    neg: bool
    mag: Fraction = Fraction(0)

    @property
    def q(self) -> Fraction:
        return -self.mag if self.neg else self.mag

    @property
    def is_zero(self) -> bool:
        return self.kind == "fin" and self.mag == 0


def decode(bits: int, fmt: Fmt = F32) -> Val:
    neg = bool(bits & fmt.sign_bit)
    pat = bits & (fmt.sign_bit - 1)
    if pat > fmt.inf_pat:
        return Val("nan", neg)
    if pat == fmt.inf_pat:
        return Val("inf", neg)
    return Val("fin", neg, fmt.value(pat))


def is_subnormal(bits: int, fmt: Fmt = F32) -> bool:
    pat = bits & (fmt.sign_bit - 1)
    return 0 < pat < (1 << fmt.man)


def flush(bits: int, fmt: Fmt = F32) -> int:
    return bits & fmt.sign_bit if is_subnormal(bits, fmt) else bits


def round_by(cmp: Callable[[Fraction], int], neg: bool, rnd: str, fmt: Fmt = F32) -> int:
    """Round a positive magnitude t described by ``cmp(v) = sign(v - t)``; returns the bits.

    ``cmp`` must never be asked about ties it cannot decide: the caller provides exact comparisons.
    """
    lo, hi = 0, fmt.max_pat  # invariant: value(lo) <= t; find the largest such pattern
    if cmp(fmt.value(hi)) <= 0:
        lo = hi
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cmp(fmt.value(mid)) <= 0:
                lo = mid
            else:
                hi = mid
    below = fmt.value(lo)
    if cmp(below) == 0:
        pat = lo
    else:
        up_pat = lo + 1
        above = fmt.value(up_pat) if up_pat <= fmt.max_pat else fmt.overflow_value()
        if rnd == "rn":
            c = cmp((below + above) / 2)
            pat = up_pat if c < 0 or (c == 0 and up_pat % 2 == 0) else lo
        elif rnd == "rz" or (rnd == "rm" and not neg) or (rnd == "rp" and neg):
            pat = lo
        else:
            pat = up_pat
    return (fmt.sign_bit if neg else 0) | pat


def round_q(q: Fraction, rnd: str, fmt: Fmt = F32, zero_neg: bool = False) -> int:
    """Bits of the exact rational ``q`` rounded; an exact zero gets the sign ``zero_neg``."""
    if q == 0:
        return fmt.sign_bit if zero_neg else 0
    t = abs(q)
    return round_by(lambda v: (v > t) - (v < t), q < 0, rnd, fmt)


def nan(fmt: Fmt = F32) -> int:
    return fmt.canonical_nan


def inf(neg: bool, fmt: Fmt = F32) -> int:
    return (fmt.sign_bit if neg else 0) | fmt.inf_pat


def zero(neg: bool, fmt: Fmt = F32) -> int:
    return fmt.sign_bit if neg else 0


def _post(bits: int, ftz: bool, sat: bool, fmt: Fmt = F32) -> int:
    if ftz:
        bits = flush(bits, fmt)
    if sat:
        v = decode(bits, fmt)
        if v.kind == "nan" or v.neg:
            return 0
        if v.kind == "inf" or v.mag > 1:
            return 0x3F800000
    return bits


def _sum_zero_neg(x_neg: bool, x_zero: bool, y_neg: bool, y_zero: bool, rnd: str) -> bool:
    """Sign of an exact zero sum x + y (IEEE 754 6.3)."""
    if x_zero and y_zero and x_neg == y_neg:
        return x_neg
    return rnd == "rm"


# ------------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------------


def add(a: int, b: int, rnd: str = "rn", ftz: bool = False, sat: bool = False, fmt: Fmt = F32) -> int:
    if ftz:
        a, b = flush(a, fmt), flush(b, fmt)
    x, y = decode(a, fmt), decode(b, fmt)
    if x.kind == "nan" or y.kind == "nan":
        r = nan(fmt)
    elif x.kind == "inf" and y.kind == "inf":
        r = inf(x.neg, fmt) if x.neg == y.neg else nan(fmt)
    elif x.kind == "inf" or y.kind == "inf":
        r = inf(x.neg if x.kind == "inf" else y.neg, fmt)
    else:
        q = x.q + y.q
        r = round_q(q, rnd, fmt, _sum_zero_neg(x.neg, x.is_zero, y.neg, y.is_zero, rnd))
    return _post(r, ftz, sat, fmt)


def sub(a: int, b: int, rnd: str = "rn", ftz: bool = False, sat: bool = False, fmt: Fmt = F32) -> int:
    return add(a, b ^ fmt.sign_bit, rnd, ftz, sat, fmt)


def mul(a: int, b: int, rnd: str = "rn", ftz: bool = False, sat: bool = False, fmt: Fmt = F32) -> int:
    if ftz:
        a, b = flush(a, fmt), flush(b, fmt)
    x, y = decode(a, fmt), decode(b, fmt)
    neg = x.neg != y.neg
    if x.kind == "nan" or y.kind == "nan":
        r = nan(fmt)
    elif (x.kind == "inf" and y.is_zero) or (y.kind == "inf" and x.is_zero):
        r = nan(fmt)
    elif x.kind == "inf" or y.kind == "inf":
        r = inf(neg, fmt)
    else:
        r = round_q(x.q * y.q, rnd, fmt, neg)
    return _post(r, ftz, sat, fmt)


def fma(a: int, b: int, c: int, rnd: str = "rn", ftz: bool = False, sat: bool = False, fmt: Fmt = F32) -> int:
    if ftz:
        a, b, c = flush(a, fmt), flush(b, fmt), flush(c, fmt)
    x, y, z = decode(a, fmt), decode(b, fmt), decode(c, fmt)
    pneg = x.neg != y.neg
    if "nan" in (x.kind, y.kind, z.kind):
        r = nan(fmt)
    elif (x.kind == "inf" and y.is_zero) or (y.kind == "inf" and x.is_zero):
        r = nan(fmt)
    elif x.kind == "inf" or y.kind == "inf":
        r = nan(fmt) if z.kind == "inf" and z.neg != pneg else inf(pneg, fmt)
    elif z.kind == "inf":
        r = inf(z.neg, fmt)
    else:
        p = x.q * y.q
        q = p + z.q
        r = round_q(q, rnd, fmt, _sum_zero_neg(pneg, p == 0, z.neg, z.is_zero, rnd))
    return _post(r, ftz, sat, fmt)


def div(a: int, b: int, rnd: str = "rn", ftz: bool = False, fmt: Fmt = F32) -> int:
    if ftz:
        a, b = flush(a, fmt), flush(b, fmt)
    x, y = decode(a, fmt), decode(b, fmt)
    neg = x.neg != y.neg
    if x.kind == "nan" or y.kind == "nan":
        r = nan(fmt)
    elif (x.kind == "inf" and y.kind == "inf") or (x.is_zero and y.is_zero):
        r = nan(fmt)
    elif x.kind == "inf" or y.is_zero:
        r = inf(neg, fmt)
    elif y.kind == "inf" or x.is_zero:
        r = zero(neg, fmt)
    else:
        r = round_q(x.q / y.q, rnd, fmt)
    return _post(r, ftz, False, fmt)


def sqrt(a: int, rnd: str = "rn", ftz: bool = False, fmt: Fmt = F32) -> int:
    if ftz:
        a = flush(a, fmt)
    x = decode(a, fmt)
    if x.kind == "nan" or (x.neg and not x.is_zero):
        r = nan(fmt)
    elif x.kind == "inf" or x.is_zero:
        r = a
    else:
        t = x.mag
        r = round_by(lambda v: (v * v > t) - (v * v < t), False, rnd, fmt)
    return _post(r, ftz, False, fmt)


# ------------------------------------------------------------------------------------------------
# transcendental models: rn of the exact value (mpmath at very high precision)
# ------------------------------------------------------------------------------------------------


def _mp_round(fn: Callable[[mpmath.mpf], mpmath.mpf], t: Fraction) -> int:
    with mpmath.workprec(1200):
        v = fn(mpmath.mpf(t.numerator) / t.denominator)
        sign, man, exp, _ = v._mpf_
        q = Fraction(man) * Fraction(2) ** exp
        q = -q if sign else q
    return round_q(q, "rn")


def ex2(a: int, ftz: bool = False) -> int:
    if ftz:
        a = flush(a)
    x = decode(a)
    if x.kind == "nan":
        r = nan()
    elif x.kind == "inf":
        r = 0 if x.neg else inf(False)
    elif x.q > 200 or x.q < -200:  # far beyond the float32 range (avoid huge exact powers)
        r = 0 if x.neg else inf(False)
    elif x.q.denominator == 1:
        r = round_q(Fraction(2) ** int(x.q), "rn")
    else:
        r = _mp_round(lambda v: mpmath.power(2, v), x.q)
    return _post(r, ftz, False)


def lg2(a: int, ftz: bool = False) -> int:
    if ftz:
        a = flush(a)
    x = decode(a)
    if x.kind == "nan" or (x.neg and not x.is_zero):
        r = nan()
    elif x.is_zero:
        r = inf(True)
    elif x.kind == "inf":
        r = inf(False)
    else:
        n, d = x.mag.numerator, x.mag.denominator
        if n & (n - 1) == 0 and d & (d - 1) == 0:  # exact power of two: integral result
            r = round_q(Fraction(n.bit_length() - d.bit_length()), "rn")
        else:
            r = _mp_round(lambda v: mpmath.log(v, 2), x.mag)
    return _post(r, ftz, False)


def _odd_fn(fn: Callable[[mpmath.mpf], mpmath.mpf], inf_result: int | None) -> Callable[[int, bool], int]:
    def f(a: int, ftz: bool = False) -> int:
        if ftz:
            a = flush(a)
        x = decode(a)
        if x.kind == "nan":
            r = nan()
        elif x.kind == "inf":
            r = nan() if inf_result is None else inf_result | (F32.sign_bit if x.neg else 0)
        elif x.is_zero:
            r = a
        else:
            r = _mp_round(fn, x.q)
        return _post(r, ftz, False)

    return f


sin = _odd_fn(mpmath.sin, None)
tanh = _odd_fn(mpmath.tanh, 0x3F800000)


def cos(a: int, ftz: bool = False) -> int:
    if ftz:
        a = flush(a)
    x = decode(a)
    if x.kind != "fin":
        r = nan()
    elif x.is_zero:
        r = 0x3F800000
    else:
        r = _mp_round(mpmath.cos, x.q)
    return _post(r, ftz, False)


def rsqrt(a: int, ftz: bool = False) -> int:
    if ftz:
        a = flush(a)
    x = decode(a)
    if x.kind == "nan" or (x.neg and not x.is_zero):
        r = nan()
    elif x.is_zero:
        r = inf(x.neg)
    elif x.kind == "inf":
        r = 0
    else:
        t = x.mag  # find v with v^2 * t = 1 exactly
        r = round_by(lambda v: (v * v * t > 1) - (v * v * t < 1), False, "rn")
    return _post(r, ftz, False)


# ------------------------------------------------------------------------------------------------
# min / max / compare
# ------------------------------------------------------------------------------------------------


def _total_key(v: Val) -> tuple[int, Fraction]:
    """Ordering with -0 < +0 (finite or inf only)."""
    if v.kind == "inf":
        return (-2, Fraction(0)) if v.neg else (2, Fraction(0))
    if v.is_zero:
        return (0, Fraction(-1 if v.neg else 0))
    return (-1 if v.neg else 1, v.q)


def minmax(a: int, b: int, is_min: bool, ftz: bool = False, nan_mode: bool = False, fmt: Fmt = F32) -> int:
    if ftz:
        a, b = flush(a, fmt), flush(b, fmt)
    x, y = decode(a, fmt), decode(b, fmt)
    if x.kind == "nan" and y.kind == "nan":
        return nan(fmt)
    if x.kind == "nan" or y.kind == "nan":
        if nan_mode:
            return nan(fmt)
        return b if x.kind == "nan" else a
    kx, ky = _total_key(x), _total_key(y)
    if is_min:
        return a if kx <= ky else b
    return a if kx >= ky else b


def setp(cmp: str, a: int, b: int, ftz: bool = False, fmt: Fmt = F32) -> bool:
    if ftz:
        a, b = flush(a, fmt), flush(b, fmt)
    x, y = decode(a, fmt), decode(b, fmt)
    unordered = x.kind == "nan" or y.kind == "nan"
    if cmp == "num":
        return not unordered
    if cmp == "nan":
        return unordered
    if unordered:
        return cmp.endswith("u")

    def key(v: Val) -> Fraction | float:
        if v.kind == "inf":
            return -math.inf if v.neg else math.inf
        return v.q

    kx, ky = key(x), key(y)
    base = cmp[:2]
    return {
        "eq": kx == ky,
        "ne": kx != ky,
        "lt": kx < ky,
        "le": kx <= ky,
        "gt": kx > ky,
        "ge": kx >= ky,
    }[base]


def testp(kind: str, a: int, fmt: Fmt = F32) -> bool:
    v = decode(a, fmt)
    return {
        "finite": v.kind == "fin",
        "infinite": v.kind == "inf",
        "number": v.kind != "nan",
        "notanumber": v.kind == "nan",
        "normal": v.kind == "fin" and not v.is_zero and not is_subnormal(a, fmt),
        "subnormal": is_subnormal(a, fmt),
    }[kind]


# ------------------------------------------------------------------------------------------------
# conversions
# ------------------------------------------------------------------------------------------------

INT_RANGE = {
    "s8": (-(1 << 7), (1 << 7) - 1),
    "s16": (-(1 << 15), (1 << 15) - 1),
    "s32": (-(1 << 31), (1 << 31) - 1),
    "s64": (-(1 << 63), (1 << 63) - 1),
    "u8": (0, (1 << 8) - 1),
    "u16": (0, (1 << 16) - 1),
    "u32": (0, (1 << 32) - 1),
    "u64": (0, (1 << 64) - 1),
}


def round_integral(q: Fraction, rnd: str) -> int:
    if rnd in ("rn", "rni"):
        return round(q)  # Fraction rounds half to even
    if rnd in ("rz", "rzi"):
        return math.trunc(q)
    if rnd in ("rm", "rmi"):
        return math.floor(q)
    return math.ceil(q)


def int_from_float(bits: int, dst: str, rnd: str, fmt: Fmt = F32, ftz: bool = False) -> int:
    if ftz:
        bits = flush(bits, fmt)
    lo, hi = INT_RANGE[dst]
    v = decode(bits, fmt)
    if v.kind == "nan":  # PTX ISA 9.0: 0, unless from f64 or to 64 bits: 1 << (width - 1)
        if fmt is F32 and hi < 2**32:
            return 0
        return lo if lo < 0 else (hi + 1) // 2
    if v.kind == "inf":
        return lo if v.neg else hi
    n = round_integral(v.q, rnd)
    return min(max(n, lo), hi)


def float_from_int(n: int, rnd: str, fmt: Fmt = F32) -> int:
    return round_q(Fraction(n), rnd, fmt)


def round_float_integral(bits: int, rnd: str, ftz: bool = False) -> int:
    if ftz:
        bits = flush(bits)
    v = decode(bits)
    if v.kind == "nan":
        return nan()
    if v.kind == "inf":
        return bits
    n = round_integral(v.q, rnd)
    return round_q(Fraction(n), "rn", F32, v.neg)  # integral values are exact; zero keeps sign


def sat(bits: int, ftz: bool = False) -> int:
    return _post(flush(bits) if ftz else bits, False, True)


def convert(bits: int, src: Fmt, dst: Fmt, rnd: str = "rn", ftz: bool = False) -> int:
    """Float-to-float conversion; ftz (f32 only) flushes an f32 source or an f32 result."""
    if ftz and src is F32:
        bits = flush(bits, src)
    v = decode(bits, src)
    if v.kind == "nan":
        return nan(dst)
    if v.kind == "inf":
        return inf(v.neg, dst)
    r = round_q(v.q, rnd, dst, v.neg)
    if ftz and dst is F32:
        r = flush(r, dst)
    return r
