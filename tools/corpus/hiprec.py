"""Correctly rounded float32 values of exp, exp2, tanh, sin, cos and 1/sqrt, for the kernels that use
approximate hardware instructions (their launches carry a ULP tolerance around these values).

Each function brackets the exact value in a rational interval with big-integer fixed-point
arithmetic and explicit error bounds, rounds both ends to float32, and raises the precision until
they agree, so the result is the correctly rounded mathematical value.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np

from . import f32 as F


@cache
def _atanh_inv(n: int, p: int) -> int:
    """floor-ish of atanh(1/n) * 2^p; error below 2^-p * (number of terms)."""
    total = 0
    k = 0
    power = (1 << p) // n  # (1/n)^(2k+1) * 2^p
    n2 = n * n
    while power:
        total += power // (2 * k + 1)
        power //= n2
        k += 1
    return total


@cache
def _atan_inv(n: int, p: int) -> int:
    total = 0
    k = 0
    power = (1 << p) // n
    n2 = n * n
    while power:
        term = power // (2 * k + 1)
        total += -term if k % 2 else term
        power //= n2
        k += 1
    return total


@cache
def ln2_fixed(p: int) -> int:
    """ln 2 * 2^p with |error| <= 2^-p * 2p (ln2 = 2 atanh(1/3))."""
    return 2 * _atanh_inv(3, p)


@cache
def pi_fixed(p: int) -> int:
    """pi * 2^p with |error| <= 2^-p * 20p (Machin: pi = 16 atan(1/5) - 4 atan(1/239))."""
    return 16 * _atan_inv(5, p) - 4 * _atan_inv(239, p)


def _fixed(q: Fraction, p: int) -> int:
    return (q.numerator << p) // q.denominator


def _exp_fixed(r: int, p: int) -> tuple[int, int]:
    """e^(r/2^p) * 2^p for |r/2^p| <= 1, and an error bound in units of 2^-p."""
    one = 1 << p
    total = one
    term = one
    n = 1
    while term:
        term = term * r // (one * n)
        total += term
        n += 1
    return total, 2 * n + 4


def exp_interval(q: Fraction, p: int) -> tuple[Fraction, Fraction]:
    ln2 = ln2_fixed(p + 16)
    k = round(float(q) / math.log(2))
    # r = q - k ln2, in units of 2^-(p+16)
    r = _fixed(q, p + 16) - k * ln2
    err_r = 2 + abs(k) * 2 * (p + 16)  # units of 2^-(p+16)
    r >>= 16
    err_r = (err_r >> 16) + 2
    val, err = _exp_fixed(r, p)
    err += 3 * err_r  # e^r <= e^0.36 < 3: sensitivity to the error in r
    scale = Fraction(2) ** k / (1 << p)
    return (val - err) * scale, (val + err) * scale


def _sin_cos_fixed(r: int, p: int) -> tuple[int, int, int]:
    """sin and cos of r/2^p (|r/2^p| <= 1) times 2^p, with an error bound."""
    one = 1 << p
    r2 = r * r // one
    s = term = r
    n = 1
    while term:
        term = -term * r2 // (one * (n + 1) * (n + 2))
        s += term
        n += 2
    c = term = one
    m = 0
    while term:
        term = -term * r2 // (one * (m + 1) * (m + 2))
        c += term
        m += 2
    return s, c, 2 * (n + m) + 8


def sin_cos_interval(q: Fraction, p: int) -> tuple[tuple[Fraction, Fraction], tuple[Fraction, Fraction]]:
    extra = max(0, int(abs(q)).bit_length()) + 32
    pp = p + extra
    pi = pi_fixed(pp)
    half_pi = pi >> 1
    qf = _fixed(q, pp)
    n = (qf + (half_pi >> 1)) // half_pi  # nearest multiple of pi/2
    r = qf - n * half_pi
    err_r = 2 + abs(n) * 20 * pp
    r >>= extra
    err_r = (err_r >> extra) + 2
    s, c, err = _sin_cos_fixed(r, p)
    err += err_r
    quadrant = n % 4
    sin_v, cos_v = {0: (s, c), 1: (c, -s), 2: (-s, -c), 3: (-c, s)}[quadrant]
    unit = Fraction(1, 1 << p)
    return ((sin_v - err) * unit, (sin_v + err) * unit), ((cos_v - err) * unit, (cos_v + err) * unit)


def _round_interval(lo: Fraction, hi: Fraction) -> np.float32 | None:
    a, b = F.round_f32(lo), F.round_f32(hi)
    if F.bits(a) == F.bits(b):
        return a
    return None


def _converge(interval_fn) -> np.float32:
    for p in (160, 320, 640, 1280):
        got = _round_interval(*interval_fn(p))
        if got is not None:
            return got
    raise ArithmeticError("could not round the interval")


def exp(x) -> np.float32:
    q = F.exact(x)
    return _converge(lambda p: exp_interval(q, p))


def exp2(x) -> np.float32:
    q = F.exact(x)

    def interval(p: int):
        ln2 = ln2_fixed(p)
        err = 2 * p
        lo_ln2 = Fraction(ln2 - err, 1 << p)
        hi_ln2 = Fraction(ln2 + err, 1 << p)
        a, b = (q * lo_ln2, q * hi_ln2) if q >= 0 else (q * hi_ln2, q * lo_ln2)
        return exp_interval(a, p)[0], exp_interval(b, p)[1]

    return _converge(interval)


def tanh(x) -> np.float32:
    q = F.exact(x)
    if q == 0:
        return np.float32(x)

    def interval(p: int):
        lo, hi = exp_interval(2 * q, p)
        return (lo - 1) / (lo + 1), (hi - 1) / (hi + 1)

    return _converge(interval)


def sin(x) -> np.float32:
    q = F.exact(x)
    if q == 0:
        return np.float32(x)
    return _converge(lambda p: sin_cos_interval(q, p)[0])


def cos(x) -> np.float32:
    q = F.exact(x)
    return _converge(lambda p: sin_cos_interval(q, p)[1])


def rsqrt(x) -> np.float32:
    """1/sqrt(x) for finite x > 0."""
    q = F.exact(x)
    assert q > 0
    inv = 1 / q  # sqrt(1/q) = sqrt(den/num)

    def interval(p: int):
        big = (inv.numerator << (2 * p)) // inv.denominator
        s = math.isqrt(big)
        return Fraction(s, 1 << p), Fraction(s + 1, 1 << p)

    return _converge(interval)
