"""Exact float64 semantics of the machine's f64 ops, on Python integers and fractions.

Why its own module: the simulator is the second oracle between the interpreter and the weights,
so its float64 ops must not share code with the interpreter's (``qwengpu/simt/fp32.py``, which
builds its directed modes on NumPy error-free transforms). Here every finite operand is an exact
rational, the exact result is formed (sum, product, fused ``a*b+c``, quotient; the square root
as an integer square root with a sticky bit) and rounded ONCE by :func:`round_bits` in any IEEE
mode, to binary64 or binary32. Slow (one Python call per lane) and simple, which is the point.

PTX rules (PTX ISA, "Floating Point Instructions"): every NaN result is the canonical NaN
0x7FFFFFFFFFFFFFFF (0x7FFFFFFF for f32 results); min/max ignore one NaN operand and order -0
below +0; comparisons are ordered (false on NaN) or unordered (``equ`` ... true on NaN);
float -> integer conversions round by ``rni rzi rmi rpi``, saturate and give 0 for NaN; the f64
forms have no ``.ftz`` (``cvt.ftz.f32.f64`` flushes its f32 result, ``cvt.ftz.f64.f32`` its f32
source).
"""

from __future__ import annotations

from fractions import Fraction

SIGN = 1 << 63
ABS = SIGN - 1
EXP = 0x7FF0000000000000
CNAN = 0x7FFFFFFFFFFFFFFF
CNAN32 = 0x7FFFFFFF
M64 = (1 << 64) - 1

#: (fraction bits, minimum normal exponent, exponent bias, exponent field of inf) per format
F64 = (52, -1022, 1023, 0x7FF)
F32 = (23, -126, 127, 0xFF)


def is_nan(x: int) -> bool:
    return (x & ABS) > EXP


def is_inf(x: int) -> bool:
    return (x & ABS) == EXP


def is_zero(x: int) -> bool:
    return (x & ABS) == 0


def neg(x: int) -> bool:
    return bool(x >> 63)


def value(x: int, fmt: tuple[int, int, int, int] = F64) -> Fraction:
    """The exact value of a finite float (raw bits)."""
    fb, emin, bias, _ = fmt
    width = fb + (11 if fmt is F64 else 8)
    e = (x >> fb) & ((1 << (width - fb)) - 1)
    m = x & ((1 << fb) - 1)
    if e:
        m |= 1 << fb
    else:
        e = 1
    k = e - bias - fb
    v = Fraction(m << k) if k >= 0 else Fraction(m, 1 << -k)
    return -v if x >> width & 1 else v


def round_bits(q: Fraction, rnd: str, fmt: tuple[int, int, int, int] = F64) -> int:
    """Raw bits of the exact nonzero rational ``q`` rounded in mode ``rnd`` (rn rz rm rp):
    subnormals, overflow to inf or the largest finite number as the mode says."""
    fb, emin, bias, einf = fmt
    s = q < 0
    a = -q if s else q
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(0, -e)) < (d << max(0, e)):
        e -= 1  # now 2^e <= a < 2^(e+1)
    E = max(e, emin)  # the quantum is 2^(E - fb)
    sh = fb - E
    num, den = (n << sh, d) if sh >= 0 else (n, d << -sh)
    k, r = divmod(num, den)
    if r:
        if rnd == "rn":
            up = 2 * r > den or (2 * r == den and k & 1)
        elif rnd == "rz":
            up = False
        elif rnd == "rp":
            up = not s
        elif rnd == "rm":
            up = s
        else:
            raise ValueError(f"unknown rounding mode {rnd!r}")
        k += int(up)
    if k >> (fb + 1):  # rounded up to the next binade
        k >>= 1
        E += 1
    sbit = 1 << (fb + (11 if fmt is F64 else 8))
    sign = sbit if s else 0
    if k < 1 << fb:  # subnormal (or zero)
        return sign | k
    biased = E + bias
    if biased >= einf:
        to_inf = rnd == "rn" or (rnd == "rp" and not s) or (rnd == "rm" and s)
        return sign | ((einf << fb) if to_inf else ((einf << fb) - 1))
    return sign | (biased << fb) | (k - (1 << fb))


def _zero_sum_sign(a_zero_neg: bool | None, b_zero_neg: bool | None, rnd: str) -> int:
    """Sign of an exact zero sum: both operands zeros of one sign keep it; otherwise +0, -0 in rm."""
    if a_zero_neg is not None and a_zero_neg == b_zero_neg:
        return SIGN if a_zero_neg else 0
    return SIGN if rnd == "rm" else 0


def add(a: int, b: int, rnd: str = "rn") -> int:
    """add.rnd.f64."""
    if is_nan(a) or is_nan(b):
        return CNAN
    if is_inf(a) or is_inf(b):
        if is_inf(a) and is_inf(b) and neg(a) != neg(b):
            return CNAN
        return a if is_inf(a) else b
    q = value(a) + value(b)
    if q == 0:
        if is_zero(a) and is_zero(b):
            return _zero_sum_sign(neg(a), neg(b), rnd)
        return SIGN if rnd == "rm" else 0
    return round_bits(q, rnd)


def mul(a: int, b: int, rnd: str = "rn") -> int:
    """mul.rnd.f64."""
    if is_nan(a) or is_nan(b):
        return CNAN
    sgn = (a ^ b) & SIGN
    if is_inf(a) or is_inf(b):
        return CNAN if is_zero(a) or is_zero(b) else sgn | EXP
    if is_zero(a) or is_zero(b):
        return sgn
    return round_bits(value(a) * value(b), rnd)


def fma(a: int, b: int, c: int, rnd: str = "rn") -> int:
    """fma.rnd.f64: a * b + c with one rounding."""
    if is_nan(a) or is_nan(b) or is_nan(c):
        return CNAN
    psgn = (a ^ b) & SIGN
    if is_inf(a) or is_inf(b):
        if is_zero(a) or is_zero(b):
            return CNAN
        if is_inf(c) and (c & SIGN) != psgn:
            return CNAN
        return psgn | EXP
    if is_inf(c):
        return c
    q = value(a) * value(b) + value(c)
    if q == 0:
        pz = is_zero(a) or is_zero(b)
        if pz and is_zero(c):
            return _zero_sum_sign(bool(psgn), neg(c), rnd)
        return SIGN if rnd == "rm" else 0
    return round_bits(q, rnd)


def div(a: int, b: int, rnd: str = "rn") -> int:
    """div.rnd.f64 (also rcp.rnd.f64 = div(1.0, b))."""
    if is_nan(a) or is_nan(b):
        return CNAN
    sgn = (a ^ b) & SIGN
    if is_inf(a):
        return CNAN if is_inf(b) else sgn | EXP
    if is_inf(b):
        return sgn
    if is_zero(b):
        return CNAN if is_zero(a) else sgn | EXP
    if is_zero(a):
        return sgn
    return round_bits(value(a) / value(b), rnd)


def _isqrt(n: int) -> int:
    """floor(sqrt(n)) by Newton's method on integers (no math.isqrt: spelled out, as the oracle)."""
    if n < 2:
        return n
    x = 1 << ((n.bit_length() + 1) // 2)
    while True:
        y = (x + n // x) // 2
        if y >= x:
            return x
        x = y


def sqrt(a: int, rnd: str = "rn") -> int:
    """sqrt.rnd.f64: sqrt(-0) = -0, sqrt(x < 0) = NaN."""
    if is_nan(a) or (neg(a) and not is_zero(a)):
        return CNAN
    if is_zero(a) or is_inf(a):
        return a
    v = value(a)
    n, d = v.numerator, v.denominator  # d is a power of two
    k = -(d.bit_length() - 1)  # v = n * 2^k
    if k & 1:
        n, k = n << 1, k - 1
    p = 64  # n * 2^(2p) has >= 2 * 60 bits: the root has >= 60, far more than 53 + 2
    s = _isqrt(n << (2 * p))
    exact = s * s == n << (2 * p)
    half = k // 2 - p  # sqrt(v) = sqrt(n * 2^(2p)) * 2^half
    # inexact: the true root lies strictly inside (s, s + 1); s + 1/2 rounds the same way in
    # every mode (every rounding boundary is an integer at this scale)
    q = Fraction(2 * s + (0 if exact else 1), 2)
    q = q * (Fraction(1 << half) if half >= 0 else Fraction(1, 1 << -half))
    return round_bits(q, rnd)


def minmax(a: int, b: int, is_min: bool) -> int:
    """min/max.f64: one NaN operand ignored (two: canonical NaN); -0 < +0; the result is an operand."""
    if is_nan(a) and is_nan(b):
        return CNAN
    if is_nan(a):
        return b
    if is_nan(b):
        return a
    if is_zero(a) and is_zero(b):
        return (a | b) if is_min else (a & b)
    va, vb = value(a) if not is_inf(a) else _inf(a), value(b) if not is_inf(b) else _inf(b)
    if is_min:
        return a if va <= vb else b
    return a if va >= vb else b


def _inf(x: int) -> Fraction:
    """A stand-in beyond every finite float for comparisons."""
    big = Fraction(1 << 1100)
    return -big if neg(x) else big


def _key(x: int) -> Fraction:
    return _inf(x) if is_inf(x) else value(x)


def setp(cmp: str, a: int, b: int) -> bool:
    """setp.cmp.f64: ordered eq ne lt le gt ge (false on NaN), unordered equ neu ltu leu gtu geu
    (true on NaN), num, nan."""
    unordered = is_nan(a) or is_nan(b)
    if cmp == "num":
        return not unordered
    if cmp == "nan":
        return unordered
    base = cmp[:2]
    if unordered:
        return len(cmp) == 3
    x, y = _key(a), _key(b)
    r = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[base]
    return r


def to_f32(a: int, rnd: str = "rn", ftz: bool = False) -> int:
    """cvt.rnd{.ftz}.f32.f64: correctly rounded; NaN -> 0x7FFFFFFF; ftz flushes a subnormal result."""
    s32 = 0x80000000 if neg(a) else 0
    if is_nan(a):
        return CNAN32
    if is_inf(a):
        return s32 | 0x7F800000
    if is_zero(a):
        return s32
    r = round_bits(value(a), rnd, F32)
    if ftz and (r & 0x7F800000) == 0:
        return r & 0x80000000
    return r


def from_f32(x: int, ftz: bool = False) -> int:
    """cvt{.ftz}.f64.f32: exact; ftz flushes a subnormal source; NaN -> canonical f64 NaN."""
    x &= 0xFFFFFFFF
    sgn = SIGN if x >> 31 else 0
    mag = x & 0x7FFFFFFF
    if mag > 0x7F800000:
        return CNAN
    if mag == 0x7F800000:
        return sgn | EXP
    if mag == 0 or (ftz and mag < 0x00800000):
        return sgn
    return round_bits(value(x, F32), "rn")


def from_int(v: int, rnd: str = "rn") -> int:
    """cvt.rnd.f64.{s,u}{32,64} of the integer value v."""
    return 0 if v == 0 else round_bits(Fraction(v), rnd)


def _round_int(q: Fraction, irnd: str) -> int:
    """q rounded to an integer: rni (ties to even), rzi, rmi, rpi."""
    fl = q.numerator // q.denominator
    frac = q - fl
    if frac == 0:
        return fl
    if irnd == "rmi":
        return fl
    if irnd == "rpi":
        return fl + 1
    if irnd == "rzi":
        return fl + 1 if q < 0 else fl
    if irnd == "rni":
        if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and fl & 1):
            return fl + 1
        return fl
    raise ValueError(f"unknown integer rounding {irnd!r}")


def to_int(a: int, irnd: str, signed: bool, bits: int) -> int:
    """cvt.irnd.{s,u}{32,64}.f64: rounded, saturated to the range, NaN -> 1 << (bits - 1) (PTX
    ISA 9.0: from f64, never 0); the bit pattern."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if is_nan(a):
        v = 1 << (bits - 1)
    elif is_inf(a):
        v = lo if neg(a) else hi
    else:
        v = min(max(_round_int(value(a), irnd), lo), hi)
    return v & ((1 << bits) - 1)


def round_integral(a: int, irnd: str) -> int:
    """cvt.irnd.f64.f64: round to an integral float64, keeping the sign of a zero result."""
    if is_nan(a):
        return CNAN
    if is_inf(a) or is_zero(a):
        return a
    k = _round_int(value(a), irnd)
    if k == 0:
        return a & SIGN
    return round_bits(Fraction(k), "rn")
