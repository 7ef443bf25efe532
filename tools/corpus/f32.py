"""Exact IEEE-754 binary32 arithmetic for the corpus generator.

Everything here is written from the IEEE-754 / PTX definitions with Python integers and
``fractions.Fraction``: it shares no code with the project's interpreter (whose numerics are what
the corpus tests). Values are passed around as ``numpy.float32`` scalars.

Conventions that follow GPU behaviour (PTX ISA, no ``.ftz``):
- every arithmetic result that is NaN is the canonical NaN ``0x7fffffff``;
- subnormal inputs and results are kept (gradual underflow);
- rounding modes: ``rn`` (nearest, ties to even), ``rz`` (toward zero), ``rd``/``rm`` (toward -inf),
  ``ru``/``rp`` (toward +inf).
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

CANONICAL_NAN_BITS = 0x7FFFFFFF
FLT_MAX = np.float32(3.4028234663852886e38)
INF = np.float32(np.inf)
_TWO128 = Fraction(2) ** 128
_MIN_QUANTUM_EXP = -149  # exponent of the smallest subnormal

MODES = ("rn", "rz", "rd", "ru")
_ALIASES = {"rm": "rd", "rp": "ru"}


def _mode(mode: str) -> str:
    mode = _ALIASES.get(mode, mode)
    if mode not in MODES:
        raise ValueError(f"unknown rounding mode {mode!r}")
    return mode


# ---------------------------------------------------------------------------------------------
# bits <-> float


def bits(x) -> int:
    """The 32 raw bits of a float32 value."""
    return struct.unpack("<I", struct.pack("<f", np.float32(x)))[0]


def from_bits(b: int) -> np.float32:
    return np.frombuffer(struct.pack("<I", b & 0xFFFFFFFF), dtype=np.float32)[0]


def f32(x) -> np.float32:
    """A float32 from a Python number that must be exactly representable (guards typos in tables)."""
    if isinstance(x, str):
        return from_bits(int(x, 16))
    v = np.float32(x)
    if not math.isnan(float(x)) and Fraction(float(v)) != Fraction(x):
        raise ValueError(f"{x!r} is not exactly a float32")
    return v


def nan() -> np.float32:
    return from_bits(CANONICAL_NAN_BITS)


def is_nan(x) -> bool:
    return math.isnan(float(x))


def is_inf(x) -> bool:
    return math.isinf(float(x))


def sign_bit(x) -> int:
    return bits(x) >> 31


def exact(x) -> Fraction:
    """The exact rational value of a finite float32."""
    return Fraction(float(np.float32(x)))


def zero(negative: bool) -> np.float32:
    return from_bits(0x80000000 if negative else 0)


def inf(negative: bool) -> np.float32:
    return from_bits(0xFF800000 if negative else 0x7F800000)


# ---------------------------------------------------------------------------------------------
# rounding a rational to float32


def _round_magnitude(a: Fraction, up_away: bool, nearest: bool) -> tuple[Fraction, bool]:
    """Round a > 0 to the binary32 grid with an unbounded exponent range above.

    Returns (rounded value, overflowed)."""
    num, den = a.numerator, a.denominator
    e = num.bit_length() - den.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    # now 2^e <= a < 2^(e+1)
    qe = max(e - 23, _MIN_QUANTUM_EXP)
    scaled = a / (Fraction(2) ** qe)
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if nearest:
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
            n += 1
    elif up_away and rem > 0:
        n += 1
    value = n * Fraction(2) ** qe
    return value, value >= _TWO128


def round_f32(q: Fraction, mode: str = "rn") -> np.float32:
    """Round an exact rational to float32 in the given mode. Zero rounds to +0; a nonzero value
    that rounds to zero keeps its sign."""
    mode = _mode(mode)
    if q == 0:
        return zero(False)
    neg = q < 0
    a = -q if neg else q
    nearest = mode == "rn"
    away = (mode == "ru" and not neg) or (mode == "rd" and neg)
    value, overflow = _round_magnitude(a, away, nearest)
    if overflow:
        if nearest or away:
            return inf(neg)
        return np.float32(-FLT_MAX if neg else FLT_MAX)
    if value == 0:
        return zero(neg)
    r = np.float32(float(value))
    assert Fraction(float(r)) == value
    return np.float32(-r) if neg else r


def _exact_zero(mode: str) -> np.float32:
    """Sign of an exact zero sum of operands of opposite sign (IEEE 754 6.3)."""
    return zero(_mode(mode) == "rd")


# ---------------------------------------------------------------------------------------------
# arithmetic


def add(x, y, mode: str = "rn") -> np.float32:
    x, y = np.float32(x), np.float32(y)
    if is_nan(x) or is_nan(y):
        return nan()
    if is_inf(x) or is_inf(y):
        if is_inf(x) and is_inf(y) and sign_bit(x) != sign_bit(y):
            return nan()
        return x if is_inf(x) else y
    s = exact(x) + exact(y)
    if s == 0:
        if float(x) == 0 and float(y) == 0 and sign_bit(x) == sign_bit(y):
            return x
        return _exact_zero(mode)
    return round_f32(s, mode)


def sub(x, y, mode: str = "rn") -> np.float32:
    y = np.float32(y)
    return add(x, neg(y) if not is_nan(y) else y, mode)


def neg(x) -> np.float32:
    return from_bits(bits(x) ^ 0x80000000)


def fabs(x) -> np.float32:
    return from_bits(bits(x) & 0x7FFFFFFF)


def mul(x, y, mode: str = "rn") -> np.float32:
    x, y = np.float32(x), np.float32(y)
    if is_nan(x) or is_nan(y):
        return nan()
    negative = sign_bit(x) != sign_bit(y)
    if is_inf(x) or is_inf(y):
        if float(x) == 0 or float(y) == 0:
            return nan()
        return inf(negative)
    p = exact(x) * exact(y)
    if p == 0:
        return zero(negative)
    return round_f32(p, mode)


def fma(x, y, z, mode: str = "rn") -> np.float32:
    """Fused multiply-add x*y+z with a single rounding."""
    x, y, z = np.float32(x), np.float32(y), np.float32(z)
    if is_nan(x) or is_nan(y) or is_nan(z):
        return nan()
    pneg = sign_bit(x) != sign_bit(y)
    if is_inf(x) or is_inf(y):
        if float(x) == 0 or float(y) == 0:
            return nan()
        if is_inf(z) and sign_bit(z) != pneg:
            return nan()
        return inf(pneg)
    if is_inf(z):
        return z
    p = exact(x) * exact(y)
    if p == 0:
        # exact zero product: (+-0) + z
        if float(z) == 0:
            if sign_bit(z) == pneg:
                return z
            return _exact_zero(mode)
        return z
    s = p + exact(z)
    if s == 0:
        return _exact_zero(mode)
    return round_f32(s, mode)


def div(x, y, mode: str = "rn") -> np.float32:
    x, y = np.float32(x), np.float32(y)
    if is_nan(x) or is_nan(y):
        return nan()
    negative = sign_bit(x) != sign_bit(y)
    if is_inf(x):
        if is_inf(y):
            return nan()
        return inf(negative)
    if is_inf(y):
        return zero(negative)
    if float(y) == 0:
        if float(x) == 0:
            return nan()
        return inf(negative)
    if float(x) == 0:
        return zero(negative)
    return round_f32(exact(x) / exact(y), mode)


def rcp(x, mode: str = "rn") -> np.float32:
    return div(np.float32(1.0), x, mode)


def _sqrt_fraction_rounded(a: Fraction, mode: str) -> np.float32:
    """Correctly rounded sqrt of a positive rational that is a float32 (a dyadic rational)."""
    # a = m / 2^k exactly (k may be negative). Choose an even shift so the integer square root has
    # plenty of bits beyond the 24 of a float32.
    num, den = a.numerator, a.denominator
    assert den & (den - 1) == 0, "float32 values are dyadic"
    k = den.bit_length() - 1  # a = num / 2^k
    shift = 120 + (k % 2)  # make (k + shift) even
    big = num << shift  # a * 2^(k + shift) ... = num * 2^shift, value = big / 2^(k+shift)
    half = (k + shift) // 2
    s = math.isqrt(big)
    if s * s == big:
        return round_f32(Fraction(s, 1 << half), mode)
    # the true root lies strictly between s and s+1 (in units of 2^-half); any point strictly
    # inside rounds the same way because s has far more than 25 significant bits.
    return round_f32(Fraction(2 * s + 1, 1 << (half + 1)), mode)


def sqrt(x, mode: str = "rn") -> np.float32:
    x = np.float32(x)
    if is_nan(x):
        return nan()
    if float(x) == 0:
        return x  # sqrt(-0) = -0
    if float(x) < 0:
        return nan()
    if is_inf(x):
        return x
    return _sqrt_fraction_rounded(exact(x), mode)


def fmin(x, y) -> np.float32:
    """PTX min.f32 / fminf: a single NaN operand is ignored; -0 < +0."""
    x, y = np.float32(x), np.float32(y)
    if is_nan(x) and is_nan(y):
        return nan()
    if is_nan(x):
        return y
    if is_nan(y):
        return x
    if float(x) == float(y):
        return x if sign_bit(x) else y
    return x if float(x) < float(y) else y


def fmax(x, y) -> np.float32:
    x, y = np.float32(x), np.float32(y)
    if is_nan(x) and is_nan(y):
        return nan()
    if is_nan(x):
        return y
    if is_nan(y):
        return x
    if float(x) == float(y):
        return y if sign_bit(x) else x
    return x if float(x) > float(y) else y


def copysign(x, y) -> np.float32:
    return from_bits((bits(x) & 0x7FFFFFFF) | (bits(y) & 0x80000000))


def saturate(x) -> np.float32:
    """cvt.sat.f32.f32: clamp to [0, 1]; NaN -> +0."""
    x = np.float32(x)
    if is_nan(x):
        return zero(False)
    if float(x) <= 0:
        return zero(False) if float(x) < 0 else x
    if float(x) >= 1:
        return np.float32(1.0)
    return x


# ---------------------------------------------------------------------------------------------
# conversions


def _round_int(q: Fraction, mode: str) -> int:
    """Round a rational to an integer: ``rni`` nearest-even, ``rzi`` toward zero, ``rmi`` floor,
    ``rpi`` ceil (also accepts rn/rz/rd/ru)."""
    mode = {"rni": "rn", "rzi": "rz", "rmi": "rd", "rpi": "ru"}.get(mode, mode)
    mode = _mode(mode)
    fl = q.numerator // q.denominator
    if mode == "rd":
        return fl
    if mode == "ru":
        return fl if fl == q else fl + 1
    if mode == "rz":
        return fl if q >= 0 or fl == q else fl + 1
    rem = q - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        return fl + 1
    return fl


def round_to_integral(x, mode: str) -> np.float32:
    """cvt.rni/rzi/rmi/rpi.f32.f32 (rintf, truncf, floorf, ceilf): zero results keep x's sign."""
    x = np.float32(x)
    if is_nan(x):
        return nan()
    if is_inf(x) or float(x) == 0:
        return x
    n = _round_int(exact(x), mode)
    if n == 0:
        return zero(sign_bit(x) == 1)
    return np.float32(float(n))


def roundf(x) -> np.float32:
    """C roundf: nearest integer, ties away from zero."""
    x = np.float32(x)
    if is_nan(x):
        return nan()
    if is_inf(x) or float(x) == 0:
        return x
    a = abs(exact(x))
    n = int(a + Fraction(1, 2))  # floor(a + 1/2): ties away from zero
    if n == 0:
        return zero(sign_bit(x) == 1)
    v = np.float32(float(n))
    return neg(v) if sign_bit(x) else v


def to_int(x, mode: str, nbits: int = 32, signed: bool = True) -> int:
    """cvt.{rni,rzi,rmi,rpi}.{s,u}N.f32: round, saturate to the type's range; NaN -> 0, but to
    1 << 63 for a 64-bit destination (PTX ISA 9.0, cvt; what an H200 gives)."""
    x = np.float32(x)
    lo = -(1 << (nbits - 1)) if signed else 0
    hi = (1 << (nbits - 1)) - 1 if signed else (1 << nbits) - 1
    if is_nan(x):
        return 0 if nbits < 64 else (lo if signed else 1 << 63)
    if is_inf(x):
        return hi if float(x) > 0 else lo
    n = _round_int(exact(x), mode)
    return min(max(n, lo), hi)


def from_int(n: int, mode: str = "rn") -> np.float32:
    """cvt.{rn,rz,rm,rp}.f32.{s,u}N."""
    return round_f32(Fraction(n), mode)


# ---------------------------------------------------------------------------------------------
# comparisons (PTX setp on f32)


def compare(op: str, x, y) -> bool:
    """setp.<op>.f32 for the ordered ops eq ne lt le gt ge, the unordered equ neu ltu leu gtu geu,
    and num / nan."""
    x, y = np.float32(x), np.float32(y)
    unordered = is_nan(x) or is_nan(y)
    if op == "num":
        return not unordered
    if op == "nan":
        return unordered
    base = op[:-1] if op.endswith("u") else op
    if op.endswith("u"):
        if unordered:
            return True
    elif unordered:
        return False
    a, b = float(x), float(y)
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[base]


# ---------------------------------------------------------------------------------------------
# ULP distance (for reporting how far an approximation is)


def ordered(x) -> int:
    b = bits(x)
    return -(b & 0x7FFFFFFF) if b & 0x80000000 else b


def ulp_distance(x, y) -> int:
    return abs(ordered(x) - ordered(y))
