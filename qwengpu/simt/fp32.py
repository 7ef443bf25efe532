"""Bit-exact PTX floating-point semantics for the reference interpreter.

Why: the SIMT reference interpreter must reproduce, bit for bit, what PTX ``.f32``/``.f64``
instructions produce, and numpy alone does not (no rounding modes, no fused fma, no canonical NaN,
no ftz, IEEE ``min`` instead of PTX ``min``...).  Every function is vectorized over whole warps.

Representation: f32 values travel as ``uint32`` arrays of raw bits, f64 values as ``uint64``;
integers as arrays of their natural dtype.  Inputs are never mutated; new arrays of the same shape
are returned (a 0-d input is treated as shape ``(1,)``).
Rounding modes: ``rn`` (nearest-even), ``rz``, ``rm`` (toward -inf), ``rp`` (toward +inf); the
integer-rounding spellings ``rni rzi rmi rpi`` are accepted wherever an integral rounding is meant.

Model choices (the hardware-visible ones to verify on a real GPU are marked [verify]):

* NaN: every arithmetic NaN result is the canonical ``CANONICAL_NAN`` = 0x7FFFFFFF (f64:
  ``CANONICAL_NAN64`` = 0x7FFFFFFFFFFFFFFF [verify f64]).  ``cvt.f64.f32`` of a NaN and
  ``cvt.f32.f64`` of a NaN also give the canonical NaN [verify].
* ftz: subnormal inputs are flushed to sign-preserving zero before the operation, and a subnormal
  *result* is flushed after rounding (a value that rounds up to the smallest normal survives).
* sat: applied last; clamps to [+0.0, 1.0].  NaN -> +0.0 and -0.0 (and every negative) -> +0.0.
* Exact zero results of add/sub/fma (exact cancellation or +0 + -0) are +0, except -0 in ``rm``;
  -0 + -0 = -0 in every mode (IEEE 754).
* Overflow: rn -> inf; rz -> +-max finite; rm/rp -> inf on the side they round toward, else max.
* ``abs``/``neg``/``copysign`` are pure sign-bit operations: a NaN keeps its payload (also with
  ftz, which only flushes subnormals) [verify: the ISA says "unspecified NaN"].
* ``min``/``max``: a NaN operand is ignored; two NaNs -> canonical NaN; -0 < +0.  The optional
  ``nan=True`` models the ``.NaN`` modifier (any NaN operand -> canonical NaN).
* ``div_full`` (div.full.f32): modeled as the correctly rounded (rn) quotient [verify: hardware is
  documented as <= 2 ulp].
* ``div_approx`` (div.approx.f32): ``rn(a * R)`` with ``R = rcp_approx(b)`` flushed to zero when
  subnormal, which reproduces the documented "for 2^126 < |b| < 2^128 the result is 0, or NaN when
  a is inf" [verify].
* Approximate instructions (``rcp sqrt rsqrt ex2 lg2 sin cos tanh .approx``): the correctly rounded
  (rn) float32 value of the exact mathematical function, with PTX's special cases (ex2(-inf)=+0,
  lg2(+-0)=-inf, lg2(x<0)=NaN, rsqrt(+-0)=+-inf, sin/cos(+-inf)=NaN, tanh(+-inf)=+-1, ...).
  Platform independence: evaluated in float64, and every element whose float64 value is within a
  relative 2^-40 of a float32 rounding midpoint is recomputed with mpmath at increasing precision.
  The real hardware results (<= 2 ulp, 2^-22 abs for sin/cos) will differ in the last bits.
* float -> int conversions saturate to the destination range, NaN -> 0 (1 << (width - 1) from f64
  or to 64 bits, PTX ISA 9.0); ``ftz`` is optional there.
* ``testp.normal``/``testp.subnormal``: IEEE classes (zero is neither).
* f64 arithmetic: all four rounding modes.  rn uses numpy (correctly rounded); directed modes use
  error-free transformations, with an exact ``fractions.Fraction`` fallback for elements near the
  underflow/overflow range.  ``fma64`` rn is Boldo-Melquiond's round-to-odd emulation; ``fma64``
  in a directed mode always takes the (slow, exact) Fraction path for finite non-trivial elements.

How f32 arithmetic is made exact: numpy's float32 ``+ * / sqrt`` are IEEE rn.  For directed modes
and for fma, the exact result is represented as ``hi + lo`` in float64 (products of two float32 are
exact in float64, TwoSum gives the exact error of a sum), ``hi`` is rounded to odd using ``lo``, and
the rounded-to-odd float64 (53 >= 24 + 2 bits) is rounded once to float32 in the requested mode.
Division and sqrt compare the rn candidate back against the operands exactly (``q*b`` vs ``a``,
``s*s`` vs ``a``) to step one ulp in directed modes.

Micro-benchmark (32-element arrays, best of 7, 2-core dev VM under load; ``python -m
qwengpu.simt.fp32``): add rn 3.5 us, mul rn 3.4 us, div rn 3.5 us, sqrt rn 3.4 us, setp 3.5 us,
min 6.6 us, add rn.ftz.sat 11-13 us, add rz 13-19 us, mul rp 7 us, fma rn 11 us, fma rm/rz 15-16
us, div rz 10-12 us, ex2/sin.approx 21-27 us; f64: add64 3.8 us, fma64 rn 43 us, fma64 directed
~300 us (Fraction path).
"""

from __future__ import annotations

import builtins
import math
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "CANONICAL_NAN",
    "CANONICAL_NAN64",
    "f32_bits",
    "bits_f32",
    "f64_bits",
    "bits_f64",
    "add",
    "sub",
    "mul",
    "fma",
    "div",
    "div_full",
    "div_approx",
    "sqrt",
    "rcp",
    "rcp_approx",
    "sqrt_approx",
    "rsqrt_approx",
    "ex2_approx",
    "lg2_approx",
    "sin_approx",
    "cos_approx",
    "tanh_approx",
    "min",
    "max",
    "abs",
    "neg",
    "copysign",
    "setp",
    "testp",
    "f32_from_int",
    "int_from_f32",
    "round_f32",
    "sat_f32",
    "f32_from_f64",
    "f64_from_f32",
    "f64_from_int",
    "int_from_f64",
    "add64",
    "sub64",
    "mul64",
    "div64",
    "rcp64",
    "fma64",
    "sqrt64",
    "neg64",
    "abs64",
    "min64",
    "max64",
    "setp64",
    "testp64",
]

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
Bool = npt.NDArray[np.bool_]
IntArr = npt.NDArray[np.integer[Any]]

CANONICAL_NAN = 0x7FFFFFFF
CANONICAL_NAN64 = 0x7FFFFFFFFFFFFFFF

_SIGN32 = np.uint32(0x80000000)
_ABS32 = np.uint32(0x7FFFFFFF)
_EXP32 = np.uint32(0x7F800000)
_ONE32 = np.uint32(0x3F800000)
_CNAN32 = np.uint32(CANONICAL_NAN)
_FMIN32 = np.float32(2.0**-126)
_SIGN64 = np.uint64(0x8000000000000000)
_ABS64 = np.uint64(0x7FFFFFFFFFFFFFFF)
_EXP64 = np.uint64(0x7FF0000000000000)
_CNAN64 = np.uint64(CANONICAL_NAN64)

_RND = {"rn": "rn", "rz": "rz", "rm": "rm", "rp": "rp", "rni": "rn", "rzi": "rz", "rmi": "rm", "rpi": "rp"}
_INT_TYPES: dict[str, Any] = {
    "s8": np.int8,
    "s16": np.int16,
    "s32": np.int32,
    "s64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}

# float32 / float64 format parameters: (precision, emin, emax)
_FMT32 = (24, -126, 127)
_FMT64 = (53, -1022, 1023)


def _mode(rnd: str) -> str:
    try:
        return _RND[rnd]
    except KeyError:
        raise ValueError(f"unknown rounding mode {rnd!r}") from None


def _int_type(t: str) -> Any:
    try:
        return _INT_TYPES[t]
    except KeyError:
        raise ValueError(f"unknown integer type {t!r}") from None


def _u32(a: Any) -> U32:
    x = np.asarray(a, dtype=np.uint32)
    return x if x.ndim else x.reshape(1)


def _u64(a: Any) -> U64:
    x = np.asarray(a, dtype=np.uint64)
    return x if x.ndim else x.reshape(1)


def _iarr(a: Any, t: Any) -> IntArr:
    """Integer array of dtype ``t`` (other integer dtypes are reinterpreted modulo 2^bits)."""
    x = np.asarray(a).astype(t, copy=False)
    return x if x.ndim else x.reshape(1)


# ---------------------------------------------------------------------------------------------
# bit helpers
# ---------------------------------------------------------------------------------------------


def f32_bits(x: float | npt.ArrayLike) -> U32:
    """Raw bits (uint32) of ``x`` converted to float32 (rn)."""
    return np.array(x, dtype=np.float32).view(np.uint32)


def bits_f32(u: npt.ArrayLike) -> F32:
    """float32 array holding the raw bits ``u``."""
    return np.array(u, dtype=np.uint32).view(np.float32)


def f64_bits(x: float | npt.ArrayLike) -> U64:
    """Raw bits (uint64) of ``x`` as float64."""
    return np.array(x, dtype=np.float64).view(np.uint64)


def bits_f64(u: npt.ArrayLike) -> F64:
    """float64 array holding the raw bits ``u``."""
    return np.array(u, dtype=np.uint64).view(np.float64)


def _flush32(bits: U32) -> U32:
    """Subnormals (and zeros) to sign-preserving zero."""
    return np.where((bits & _EXP32) == 0, bits & _SIGN32, bits)


def _sat32(bits: U32) -> U32:
    # every value with the sign bit set, and every NaN, is > 0x7F800000 as an unsigned integer
    return np.where(bits > _EXP32, np.uint32(0), np.minimum(bits, _ONE32))


def _f32_in(a: Any, ftz: bool) -> F32:
    """float32 view of the operand bits; with ftz, subnormals -> signed zero (NaN payloads may
    change: only for arithmetic, whose NaN results are canonical anyway).  Call under errstate."""
    x = _u32(a).view(np.float32)
    return x * (np.abs(x) >= _FMIN32) if ftz else x


def _finish32(r: F32, ftz: bool, sat: bool = False) -> U32:
    """ftz of the result, canonical NaN, then saturation.  ``r`` must be a fresh array or a numpy
    scalar.  Call under errstate."""
    if ftz:
        r = r * (np.abs(r) >= _FMIN32)
    bits = np.asarray(r).view(np.uint32)
    bits[r != r] = _CNAN32
    if sat:
        bits = _sat32(bits)
    return bits


def _finish64(r: F64) -> U64:
    bits = np.asarray(r).view(np.uint64)
    bits[r != r] = _CNAN64
    return bits


# ---------------------------------------------------------------------------------------------
# rounding machinery
# ---------------------------------------------------------------------------------------------


def _adjust(r: Any, too_high: Bool, too_low: Bool, rnd: str) -> Any:
    """Turn the rn result ``r`` (float32 or float64) into the directed result, given whether ``r``
    lies above (``too_high``) or below (``too_low``) the exact value."""
    if rnd == "rm":
        return np.where(too_high, np.nextafter(r, -np.inf), r)
    if rnd == "rp":
        return np.where(too_low, np.nextafter(r, np.inf), r)
    if rnd == "rz":
        return np.where((too_high & (r > 0)) | (too_low & (r < 0)), np.nextafter(r, 0.0), r)
    return r


def _f64_to_f32(x: F64, rnd: str) -> F32:
    """Round float64 ``x`` (the exact value, or its round-to-odd) to float32 in mode ``rnd``."""
    r = x.astype(np.float32)
    if rnd == "rn":
        return r
    r64 = r.astype(np.float64)
    if rnd == "rm":
        return np.where(r64 > x, np.nextafter(r, -np.inf), r)
    if rnd == "rp":
        return np.where(r64 < x, np.nextafter(r, np.inf), r)
    return np.where(np.abs(r64) > np.abs(x), np.nextafter(r, 0.0), r)


def _round_to_odd32(hi: F64, lo: F64) -> F64:
    """Round-to-odd of the exact ``hi + lo`` (``hi`` = rn of it) for f32-derived values.

    ``lo * hi`` cannot underflow or overflow here (all values are multiples of 2^-298 and below
    2^258); a NaN ``lo`` (from infinite ``hi``) counts as exact."""
    t = lo * hi
    bits = hi.view(np.int64)
    return ((bits - (t < 0)) | (np.abs(t) > 0)).view(np.float64)


def _round_to_odd64(hi: F64, lo: F64) -> F64:
    """Round-to-odd of ``hi + lo`` in float64 without multiplying (no underflow risk)."""
    inexact = (lo < 0) | (lo > 0)
    below = ((lo < 0) & (hi > 0)) | ((lo > 0) & (hi < 0))
    bits = hi.view(np.int64)
    return ((bits - below) | inexact).view(np.float64)


def _pair_to_f32(hi: F64, lo: F64, rnd: str) -> F32:
    return _f64_to_f32(_round_to_odd32(hi, lo), rnd)


def _two_sum(a: F64, b: F64) -> tuple[F64, F64]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


_SPLITTER = 134217729.0  # 2^27 + 1


def _two_prod(a: F64, b: F64) -> tuple[F64, F64]:
    """Dekker's product: p = rn(a*b), e = a*b - p exactly (when :func:`_two_prod_safe`)."""
    p = a * b
    t = _SPLITTER * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLITTER * b
    bh = t - (t - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _two_prod_safe(a: F64, b: F64, p: F64) -> Bool:
    aa, ab, ap = np.abs(a), np.abs(b), np.abs(p)
    return (
        (aa >= 2.0**-1000)
        & (aa <= 2.0**995)
        & (ab >= 2.0**-1000)
        & (ab <= 2.0**995)
        & (ap >= 2.0**-900)
        & (ap <= 2.0**1000)
    )


def _round_rational(q: Fraction, rnd: str, fmt: tuple[int, int, int]) -> float:
    """Round a rational to the binary format ``fmt`` = (precision, emin, emax); returns the exact
    rounded value as a Python float (a float32 value is exact in a float).  Zero -> +0.0."""
    p, emin, emax = fmt
    if q == 0:
        return 0.0
    neg = q < 0
    n, d = builtins.abs(q.numerator), q.denominator
    e = n.bit_length() - d.bit_length()
    if (n << builtins.max(-e, 0)) < (d << builtins.max(e, 0)):
        e -= 1
    sh = builtins.max(e, emin) - (p - 1)
    num, den = (n, d << sh) if sh >= 0 else (n << -sh, d)
    m, r = divmod(num, den)
    if r:
        if rnd == "rn":
            m += 2 * r > den or (2 * r == den and m & 1)
        elif rnd == "rp":
            m += not neg
        elif rnd == "rm":
            m += neg
    if m.bit_length() + sh > emax + 1:  # overflow
        if rnd == "rn" or (rnd == "rp" and not neg) or (rnd == "rm" and neg):
            v = math.inf
        else:
            v = math.ldexp((1 << p) - 1, emax - p + 1)
    else:
        v = math.ldexp(m, sh)
    return -v if neg else v


def _exact_fallback64(
    out: F64, mask: Bool, fn: Callable[..., Fraction], rnd: str, zero_neg: bool, *args: F64
) -> None:
    """Recompute ``out[mask]`` exactly: ``fn`` maps the operands (as Fractions) to the exact result.
    An exact zero result becomes -0.0 when ``zero_neg`` else +0.0."""
    for i in np.flatnonzero(mask):
        q = fn(*(Fraction(float(x.flat[i])) for x in args))
        if q == 0:
            out.flat[i] = -0.0 if zero_neg else 0.0
        else:
            out.flat[i] = _round_rational(q, rnd, _FMT64)


# ---------------------------------------------------------------------------------------------
# f32 arithmetic
# ---------------------------------------------------------------------------------------------


def _rm_zero_fix(r: Any, zero: Bool, x_bits: Any, y_bits: Any) -> Any:
    """In rm an exact-zero sum is -0 unless both addends are +0 (bit pattern 0)."""
    if not zero.any():
        return r
    fix = zero & ~((x_bits == 0) & (y_bits == 0))
    return np.where(fix, -0.0, r).astype(r.dtype, copy=False)


def add(a: U32, b: U32, rnd: str = "rn", ftz: bool = False, sat: bool = False) -> U32:
    """``add{.rnd}{.ftz}{.sat}.f32``."""
    rnd = _mode(rnd)
    with np.errstate(all="ignore"):
        x, y = _f32_in(a, ftz), _f32_in(b, ftz)
        if rnd == "rn":
            r = x + y
        else:
            s, err = _two_sum(x.astype(np.float64), y.astype(np.float64))
            r = _pair_to_f32(s, err, rnd)
            if rnd == "rm":
                r = _rm_zero_fix(r, s == 0, x.view(np.uint32), y.view(np.uint32))
        return _finish32(r, ftz, sat)


def add_odd(a: U32, b: U32, ftz: bool = False) -> U32:
    """``a + b`` rounded to odd: the significand truncated toward zero, its last bit set when the
    sum was inexact. Not a PTX rounding: it is the machine's float adder's second mode (``fadd``
    with ``odd``), which lets an exactly rounded fma be computed from plain adds (Boldo and
    Melquiond). Infinities, NaNs and exact zeros as ``add`` in ``rn``; a finite sum at or above
    2^128 is an infinity, as the adder's overflow makes it; with ``ftz`` subnormal operands and
    results are zeros of their sign."""
    a, b = _u32(a), _u32(b)
    rn = add(a, b, "rn", ftz)
    with np.errstate(all="ignore"):
        x, y = _f32_in(a, ftz).astype(np.float64), _f32_in(b, ftz).astype(np.float64)
        s, err = _two_sum(x, y)
        v = _round_to_odd32(s, err)  # float64 round-to-odd of the exact sum: rounds to f32 once
        r = _f64_to_f32(np.asarray(v, dtype=np.float64), "rz")
        bits = np.asarray(r).view(np.uint32) | (r.astype(np.float64) != v).astype(np.uint32)
        bits = np.where(np.abs(v) >= 2.0**128, (bits & _SIGN32) | _EXP32, bits)
        if ftz:
            bits = _flush32(bits)
        keep_rn = ~np.isfinite(x) | ~np.isfinite(y) | (s == 0)
        return np.where(keep_rn, rn, bits).astype(np.uint32)


def _fast_product(a: U64, b: U64) -> tuple[U64, U64, U64, Bool]:
    """(the 48-bit significand product with the hidden bits forced to 1, its bit 47, the 24-bit
    significand kept, round up?) of the fast-range multiplier (``machine.fpu.fmul_fast``)."""
    p = ((a & 0x7FFFFF) | 0x800000) * ((b & 0x7FFFFF) | 0x800000)  # 48 bits
    top = (p >> 47) & 1
    m = np.where(top == 1, p >> 24, p >> 23) & 0xFFFFFF
    r = np.where(top == 1, (p >> 23) & 1, (p >> 22) & 1)
    sticky = ((p & 0x3FFFFF) != 0) | ((top == 1) & (((p >> 22) & 1) == 1))
    return p, top, m, (r == 1) & (sticky | ((m & 1) == 1))


def mul_fast(a: U32, b: U32) -> U32:
    """The weights' fast-range float multiplier (``machine.fpu.fmul_fast``), bit for bit on EVERY
    input: ``a * b`` rounded to nearest even when both factors are normal and their exponent fields
    sum to 174..377 (then it equals ``mul``), the signed zero when a factor's exponent field is 0;
    elsewhere the same fixed function of the bits (hidden bits forced to 1, the exponent field
    wrapping mod 256). Not a PTX operation: the code generator
    uses it only behind the fast path's range check (``codegen.softfloat``)."""
    a, b = _u32(a).astype(np.uint64), _u32(b).astype(np.uint64)
    p, top, m, up = _fast_product(a, b)
    s = ((a >> 23) & 0xFF) + ((b >> 23) & 0xFF) + top
    e8 = (s ^ 0x80) & 0xFF
    mag = ((e8 << 23) + m + up.astype(np.uint64)) & 0x7FFFFFFF
    mag = np.where((((a >> 23) & 0xFF) == 0) | (((b >> 23) & 0xFF) == 0), 0, mag)  # a zero factor
    return ((((a ^ b) >> 31) & 1) << 31 | mag).astype(np.uint32)


def mul_fast_err(a: U32, b: U32) -> U32:
    """The fast-range multiplier's error mode (``machine.fpu.fmul_fast`` with ``err``), bit for bit on
    every input: ``a * b - mul_fast(a, b)`` exactly in the range (a normal float, +0 when the product
    is exact), +0 when a factor's exponent field is 0; elsewhere the same fixed function of the bits."""
    a, b = _u32(a).astype(np.uint64), _u32(b).astype(np.uint64)
    p, top, m, up = _fast_product(a, b)
    up = up.astype(np.uint64)
    dd = np.where(top == 1, p & 0xFFFFFF, (p & 0x7FFFFF) << 1)
    mag = np.where(up == 1, ((1 << 24) - dd) & 0xFFFFFF, dd)
    pos = np.zeros_like(mag)
    for k in range(1, 24):
        pos = np.where(mag >> k != 0, k, pos)
    lz = 23 - pos
    frac = (mag << lz) & 0x7FFFFF
    e = (((a >> 23) & 0xFF) + ((b >> 23) & 0xFF) + top - 151 - lz) & 0xFF
    sign = (((a ^ b) >> 31) ^ up) & 1
    off = (mag == 0) | (((a >> 23) & 0xFF) == 0) | (((b >> 23) & 0xFF) == 0)
    return np.where(off, 0, (sign << 31) | (e << 23) | frac).astype(np.uint32)


def mul_fast_ok(a: U32, b: U32, ftz: bool = False) -> Bool:
    """Where ``mul_fast`` is ``mul(a, b, "rn", ftz)``: the weights' range row (``fpu.fmul_range_ok``):
    both finite, and a factor zero (exponent field 0 under ``ftz``, the word ±0 without) or both
    normal with exponent fields summing to 174..377."""
    a, b = _u32(a), _u32(b)
    ea, eb = (a >> 23) & 0xFF, (b >> 23) & 0xFF
    es = ea.astype(np.int64) + eb
    za = (ea == 0) & (bool(ftz) | ((a & 0x7FFFFF) == 0))
    zb = (eb == 0) & (bool(ftz) | ((b & 0x7FFFFF) == 0))
    r = (es >= 174) & (es <= 377) & (ea != 0) & (eb != 0)
    return (ea != 255) & (eb != 255) & (za | zb | r)


def sub(a: U32, b: U32, rnd: str = "rn", ftz: bool = False, sat: bool = False) -> U32:
    """``sub{.rnd}{.ftz}{.sat}.f32`` (= a + (-b))."""
    return add(a, _u32(b) ^ _SIGN32, rnd, ftz, sat)


def mul(a: U32, b: U32, rnd: str = "rn", ftz: bool = False, sat: bool = False) -> U32:
    """``mul{.rnd}{.ftz}{.sat}.f32``."""
    rnd = _mode(rnd)
    with np.errstate(all="ignore"):
        x, y = _f32_in(a, ftz), _f32_in(b, ftz)
        if rnd == "rn":
            r = x * y
        else:  # the float64 product of two float32 is exact
            r = _f64_to_f32(x.astype(np.float64) * y, rnd)
        return _finish32(r, ftz, sat)


def fma(a: U32, b: U32, c: U32, rnd: str = "rn", ftz: bool = False, sat: bool = False) -> U32:
    """``fma.rnd{.ftz}{.sat}.f32`` (also ``mad.rnd.f32``): a*b+c with a single rounding."""
    rnd = _mode(rnd)
    with np.errstate(all="ignore"):
        x, y, z = _f32_in(a, ftz), _f32_in(b, ftz), _f32_in(c, ftz)
        p = x.astype(np.float64) * y  # exact
        s, err = _two_sum(p, z.astype(np.float64))  # s + err is exact
        r = _pair_to_f32(s, err, rnd)
        if rnd == "rm":
            r = _rm_zero_fix(r, s == 0, p.view(np.uint64), z.view(np.uint32))
        return _finish32(r, ftz, sat)


def div(a: U32, b: U32, rnd: str = "rn", ftz: bool = False) -> U32:
    """``div.rnd{.ftz}.f32``: correctly rounded quotient."""
    rnd = _mode(rnd)
    with np.errstate(all="ignore"):
        x, y = _f32_in(a, ftz), _f32_in(b, ftz)
        q = x / y
        if rnd != "rn":
            # q*b is exact in float64; comparing it with a tells on which side of a/b q lies
            x64 = x.astype(np.float64)
            pq = q.astype(np.float64) * y
            hi, lo = pq > x64, pq < x64
            pos = y > 0
            q = _adjust(q, np.where(pos, hi, lo), np.where(pos, lo, hi), rnd)
        return _finish32(q, ftz)


def div_full(a: U32, b: U32, ftz: bool = False) -> U32:
    """``div.full{.ftz}.f32``.  Model: the correctly rounded (rn) quotient."""
    return div(a, b, "rn", ftz)


def rcp(a: U32, rnd: str = "rn", ftz: bool = False) -> U32:
    """``rcp.rnd{.ftz}.f32``: correctly rounded 1/a."""
    a = _u32(a)
    return div(np.full(a.shape, _ONE32, dtype=np.uint32), a, rnd, ftz)


def sqrt(a: U32, rnd: str = "rn", ftz: bool = False) -> U32:
    """``sqrt.rnd{.ftz}.f32``: correctly rounded square root (sqrt(-0) = -0, sqrt(x<0) = NaN)."""
    rnd = _mode(rnd)
    with np.errstate(all="ignore"):
        x = _f32_in(a, ftz)
        s = np.sqrt(x)
        if rnd != "rn":
            s64 = s.astype(np.float64)
            sq = s64 * s64  # exact
            x64 = x.astype(np.float64)
            s = _adjust(s, sq > x64, sq < x64, rnd)
        return _finish32(s, ftz)


# ---------------------------------------------------------------------------------------------
# approximate f32 instructions: correctly rounded models
# ---------------------------------------------------------------------------------------------

_HARD_TOL = 2.0**-40
_MP_LOCK = threading.Lock()
_MP_CTX: Any = None


def _mp_ctx() -> Any:
    global _MP_CTX
    if _MP_CTX is None:
        import mpmath

        _MP_CTX = mpmath.MPContext()
    return _MP_CTX


def _mpf_to_fraction(v: Any) -> Fraction:
    sign, man, exp, _bc = v._mpf_
    q = Fraction(int(man)) * (Fraction(2) ** int(exp))
    return -q if sign else q


def _mp_round32(fn: Callable[[Any, Any], Any], x: float) -> float:
    """rn float32 of fn(x) computed with mpmath, increasing precision until the rounding is decided."""
    with _MP_LOCK:
        ctx = _mp_ctx()
        prec = 128
        while True:
            ctx.prec = prec
            v = fn(ctx, ctx.mpf(x))
            q = _mpf_to_fraction(v)
            slack = builtins.abs(q) / (Fraction(2) ** (prec - 8))
            lo = _round_rational(q - slack, "rn", _FMT32)
            hi = _round_rational(q + slack, "rn", _FMT32)
            if lo == hi or prec >= 8192:
                return _round_rational(q, "rn", _FMT32)
            prec *= 2


def _cr_f32(y: F64, x: F32, mp_fn: Callable[[Any, Any], Any], exact: Bool | None = None) -> F32:
    """rn float32 of a function value whose float64 approximation is ``y``; elements too close to
    a float32 rounding midpoint are recomputed with mpmath from the float32 argument ``x``."""
    r = y.astype(np.float32)
    lim = 2.0**128
    r64 = np.clip(r.astype(np.float64), -lim, lim)
    lo = np.clip(np.nextafter(r, np.float32(-np.inf)).astype(np.float64), -lim, lim)
    hi = np.clip(np.nextafter(r, np.float32(np.inf)).astype(np.float64), -lim, lim)
    d = np.minimum(np.abs(y - 0.5 * (lo + r64)), np.abs(y - 0.5 * (r64 + hi)))
    hard = (d <= _HARD_TOL * np.abs(y)) & np.isfinite(y)
    if exact is not None:
        hard &= ~exact
    if hard.any():
        for i in np.flatnonzero(hard):
            r.flat[i] = _mp_round32(mp_fn, float(x.flat[i]))
    return r


def _approx_in(a: U32, ftz: bool) -> tuple[U32, F32, F64]:
    """Operand bits (flushed with ftz), their float32 view and exact float64 value (call under
    errstate: a signaling NaN raises 'invalid' when widened)."""
    a = _u32(a)
    if ftz:
        a = _flush32(a)
    x = a.view(np.float32)
    return a, x, x.astype(np.float64)


def rcp_approx(a: U32, ftz: bool = False) -> U32:
    """``rcp.approx{.ftz}.f32``.  Model: correctly rounded (rn) 1/a."""
    return rcp(a, "rn", ftz)


def sqrt_approx(a: U32, ftz: bool = False) -> U32:
    """``sqrt.approx{.ftz}.f32``.  Model: correctly rounded (rn) sqrt."""
    return sqrt(a, "rn", ftz)


def div_approx(a: U32, b: U32, ftz: bool = False) -> U32:
    """``div.approx{.ftz}.f32``.  Model: rn(a * R), R = rcp_approx(b) with a subnormal R flushed
    to sign-preserving zero (so |b| > 2^126 gives 0, or NaN for infinite a, as documented)."""
    return mul(a, _flush32(rcp_approx(b, ftz)), "rn", ftz)


def rsqrt_approx(a: U32, ftz: bool = False) -> U32:
    """``rsqrt.approx{.ftz}.f32``.  Model: rn(1/sqrt(a)); rsqrt(+-0) = +-inf, rsqrt(x<0) = NaN."""
    with np.errstate(all="ignore"):
        a, x, x64 = _approx_in(a, ftz)
        y = 1.0 / np.sqrt(x64)
        r = _cr_f32(y, x, lambda ctx, v: 1 / ctx.sqrt(v))
        return _finish32(r, ftz)


def ex2_approx(a: U32, ftz: bool = False) -> U32:
    """``ex2.approx{.ftz}.f32``.  Model: rn(2^a); ex2(-inf) = +0, ex2(+inf) = +inf."""
    with np.errstate(all="ignore"):
        a, x, x64 = _approx_in(a, ftz)
        y = np.exp2(x64)
        # 2^n for integral n is exact in float64 (down to 2^-1074); it can be an exact midpoint
        # (2^-150), where float64 -> float32 rounding already breaks the tie correctly.
        r = _cr_f32(y, x, lambda ctx, v: ctx.power(2, v), exact=(np.floor(x64) == x64))
        return _finish32(r, ftz)


def lg2_approx(a: U32, ftz: bool = False) -> U32:
    """``lg2.approx{.ftz}.f32``.  Model: rn(log2(a)); lg2(+-0) = -inf, lg2(x<0) = NaN, lg2(1) = +0."""
    with np.errstate(all="ignore"):
        a, x, x64 = _approx_in(a, ftz)
        y = np.log2(x64)
        y[x64 == 0] = -np.inf
        y[x64 == 1] = 0.0
        r = _cr_f32(y, x, lambda ctx, v: ctx.log(v, 2))
        return _finish32(r, ftz)


def sin_approx(a: U32, ftz: bool = False) -> U32:
    """``sin.approx{.ftz}.f32``.  Model: rn(sin(a)); sin(+-0) = +-0, sin(+-inf) = NaN."""
    with np.errstate(all="ignore"):
        a, x, x64 = _approx_in(a, ftz)
        y = np.sin(x64)
        y[x64 == 0] = x64[x64 == 0]
        r = _cr_f32(y, x, lambda ctx, v: ctx.sin(v))
        return _finish32(r, ftz)


def cos_approx(a: U32, ftz: bool = False) -> U32:
    """``cos.approx{.ftz}.f32``.  Model: rn(cos(a)); cos(+-0) = 1, cos(+-inf) = NaN."""
    with np.errstate(all="ignore"):
        a, x, x64 = _approx_in(a, ftz)
        y = np.cos(x64)
        r = _cr_f32(y, x, lambda ctx, v: ctx.cos(v))
        return _finish32(r, ftz)


def tanh_approx(a: U32) -> U32:
    """``tanh.approx.f32``.  Model: rn(tanh(a)); tanh(+-0) = +-0, tanh(+-inf) = +-1."""
    with np.errstate(all="ignore"):
        a, x, x64 = _approx_in(a, False)
        y = np.tanh(x64)
        y[x64 == 0] = x64[x64 == 0]
        r = _cr_f32(y, x, lambda ctx, v: ctx.tanh(v))
        return _finish32(r, False)


# ---------------------------------------------------------------------------------------------
# min / max / sign operations / comparisons
# ---------------------------------------------------------------------------------------------


def _minmax(a: Any, b: Any, x: Any, y: Any, nan: bool, is_min: bool, absmask: Any, cnan: Any) -> Any:
    """PTX min/max on bits ``a, b`` with float views ``x, y``; the result is one operand's bits."""
    with np.errstate(all="ignore"):
        r = (np.fmin if is_min else np.fmax)(x, y)  # ignores a quiet NaN operand
        bad = r != r
        if nan:
            bad |= (x != x) | (y != y)
        bits = r.view(a.dtype)
        if bad.any():  # two NaNs, a signaling NaN operand, or the .NaN modifier
            xn, yn = x != x, y != y
            bits = np.where(xn, b, np.where(yn, a, bits))
            bits[(xn | yn) if nan else (xn & yn)] = cnan
    both_zero = ((a | b) & absmask) == 0
    if both_zero.any():  # -0 < +0
        bits = np.where(both_zero, (a | b) if is_min else (a & b), bits)
    return bits


def _minmax32(a: U32, b: U32, ftz: bool, nan: bool, is_min: bool) -> U32:
    a, b = _u32(a), _u32(b)
    if ftz:
        a, b = _flush32(a), _flush32(b)
    return _minmax(a, b, a.view(np.float32), b.view(np.float32), nan, is_min, _ABS32, _CNAN32)


def min(a: U32, b: U32, ftz: bool = False, nan: bool = False) -> U32:
    """``min{.ftz}{.NaN}.f32``: NaN operand ignored (both NaN -> canonical NaN); -0 < +0."""
    return _minmax32(a, b, ftz, nan, True)


def max(a: U32, b: U32, ftz: bool = False, nan: bool = False) -> U32:
    """``max{.ftz}{.NaN}.f32``: NaN operand ignored (both NaN -> canonical NaN); -0 < +0."""
    return _minmax32(a, b, ftz, nan, False)


def abs(a: U32, ftz: bool = False) -> U32:
    """``abs{.ftz}.f32``: clears the sign bit (NaN payload kept)."""
    a = _u32(a)
    if ftz:
        a = _flush32(a)
    return a & _ABS32


def neg(a: U32, ftz: bool = False) -> U32:
    """``neg{.ftz}.f32``: flips the sign bit (NaN payload kept)."""
    a = _u32(a)
    if ftz:
        a = _flush32(a)
    return a ^ _SIGN32


def copysign(a: U32, b: U32) -> U32:
    """``copysign.f32 d, a, b``: the sign of ``a`` with the magnitude (and payload) of ``b``."""
    return (_u32(b) & _ABS32) | (_u32(a) & _SIGN32)


_CMP_OPS = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")


def _setp(cmp: str, x: Any, y: Any) -> Bool:
    nan = (x != x) | (y != y)
    if cmp == "eq":
        return x == y
    if cmp == "ne":
        return (x != y) & ~nan
    if cmp == "lt":
        return x < y
    if cmp == "le":
        return x <= y
    if cmp == "gt":
        return x > y
    if cmp == "ge":
        return x >= y
    if cmp == "equ":
        return (x == y) | nan
    if cmp == "neu":
        return x != y
    if cmp == "ltu":
        return ~(x >= y)
    if cmp == "leu":
        return ~(x > y)
    if cmp == "gtu":
        return ~(x <= y)
    if cmp == "geu":
        return ~(x < y)
    if cmp == "num":
        return ~nan
    if cmp == "nan":
        return nan
    raise ValueError(f"unknown comparison {cmp!r}")


def setp(cmp: str, a: U32, b: U32, ftz: bool = False) -> Bool:
    """``setp.cmp{.ftz}.f32``: ordered (eq ne lt le gt ge: false on NaN), unordered (equ neu ltu
    leu gtu geu: true on NaN), num, nan."""
    a, b = _u32(a), _u32(b)
    if ftz:
        a, b = _flush32(a), _flush32(b)
    with np.errstate(all="ignore"):
        return np.asarray(_setp(cmp, a.view(np.float32), b.view(np.float32)))


def _testp(kind: str, bits: Any, expmask: Any, absmask: Any) -> Bool:
    mag = bits & absmask
    if kind == "finite":
        return mag < expmask
    if kind == "infinite":
        return mag == expmask
    if kind == "number":
        return mag <= expmask
    if kind == "notanumber":
        return mag > expmask
    if kind == "normal":
        return ((bits & expmask) != 0) & (mag < expmask)
    if kind == "subnormal":
        return ((bits & expmask) == 0) & (mag != 0)
    raise ValueError(f"unknown testp kind {kind!r}")


def testp(kind: str, a: U32) -> Bool:
    """``testp.kind.f32`` for finite infinite number notanumber normal subnormal (IEEE classes)."""
    return _testp(kind, _u32(a), _EXP32, _ABS32)


# ---------------------------------------------------------------------------------------------
# conversions
# ---------------------------------------------------------------------------------------------


def _int_split(x: Any, src: str) -> tuple[F64, F64]:
    """Exact value of a 64-bit integer array as hi + lo float64 (TwoSum of its two halves)."""
    h = (x >> 32).astype(np.float64) * 4294967296.0
    lo = (x & 0xFFFFFFFF).astype(np.float64)
    return _two_sum(h, lo)


def f32_from_int(x: IntArr, src: str, rnd: str = "rn") -> U32:
    """``cvt.rnd.f32.src``: integer -> float32, correctly rounded in every mode."""
    rnd = _mode(rnd)
    t = _int_type(src)
    x = _iarr(x, t)
    with np.errstate(all="ignore"):
        if np.dtype(t).itemsize < 8:
            r = _f64_to_f32(x.astype(np.float64), rnd)
        else:
            r = _pair_to_f32(*_int_split(x, src), rnd)
    return r.view(np.uint32)


def f64_from_int(x: IntArr, src: str, rnd: str = "rn") -> U64:
    """``cvt.rnd.f64.src``: integer -> float64, correctly rounded in every mode."""
    rnd = _mode(rnd)
    t = _int_type(src)
    x = _iarr(x, t)
    if np.dtype(t).itemsize < 8:
        return x.astype(np.float64).view(np.uint64)
    s, err = _int_split(x, src)
    return _adjust(s, err < 0, err > 0, rnd).view(np.uint64)


_RINT = {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}


def _float_to_int(x: F64, dst: str, rnd: str, from_f64: bool = False) -> IntArr:
    """Round, saturate; a NaN gives 0, or 1 << (width - 1) when the source is f64 or the
    destination 64 bits wide (PTX ISA 9.0, cvt; an H200 gives 0x8000000000000000 for
    ``__float2ll_rz(NaN)``)."""
    t = _int_type(dst)
    info = np.iinfo(t)
    v = _RINT[_mode(rnd)](x)
    nan = v != v
    hi_lim = float(int(info.max) + 1)  # a power of two, exact
    over = v >= hi_lim
    v = np.where(nan | over, 0.0, np.maximum(v, float(info.min)))
    out = v.astype(t)
    out[over] = info.max
    if from_f64 or info.bits == 64:
        out[nan] = info.min if info.min < 0 else 1 << (info.bits - 1)
    return out


def int_from_f32(bits: U32, dst: str, rnd: str = "rzi", ftz: bool = False) -> IntArr:
    """``cvt.rnd{.ftz}.dst.f32``: round to integer (rni rzi rmi rpi), saturate to the destination
    range, NaN -> 0 (64-bit destinations: 1 << 63).  Returns the natural dtype of ``dst``."""
    bits = _u32(bits)
    if ftz:
        bits = _flush32(bits)
    with np.errstate(all="ignore"):
        return _float_to_int(bits.view(np.float32).astype(np.float64), dst, rnd)


def int_from_f64(bits64: U64, dst: str, rnd: str = "rzi") -> IntArr:
    """``cvt.rnd.dst.f64``: as :func:`int_from_f32` for float64 sources."""
    with np.errstate(all="ignore"):
        return _float_to_int(_u64(bits64).view(np.float64), dst, rnd, from_f64=True)


def round_f32(bits: U32, rnd: str, ftz: bool = False) -> U32:
    """``cvt.rni/rzi/rmi/rpi{.ftz}.f32.f32``: round to an integral float32 (keeps -0, e.g.
    rzi(-0.5) = -0.0); NaN -> canonical NaN."""
    bits = _u32(bits)
    if ftz:
        bits = _flush32(bits)
    with np.errstate(all="ignore"):
        r = _RINT[_mode(rnd)](bits.view(np.float32))
        return _finish32(r, ftz)


def round_f64(bits64: U64, rnd: str) -> U64:
    """``cvt.rni/rzi/rmi/rpi.f64.f64``: round to an integral float64 (what ``floor``/``ceil``/
    ``trunc``/``rint`` of a double compile to); keeps -0 (rpi(-0.5) = -0.0), infinities pass
    through, NaN -> canonical NaN.  numpy's rint/trunc/floor/ceil are exact on float64."""
    with np.errstate(all="ignore"):
        return _finish64(_RINT[_mode(rnd)](_u64(bits64).view(np.float64)))


def sat_f32(bits: U32, ftz: bool = False) -> U32:
    """``cvt.sat{.ftz}.f32.f32``: clamp to [+0, 1]; NaN and -0 -> +0."""
    bits = _u32(bits)
    if ftz:
        bits = _flush32(bits)
    return _sat32(bits)


def f32_from_f64(bits64: U64, rnd: str = "rn", ftz: bool = False) -> U32:
    """``cvt.rnd{.ftz}.f32.f64``: correctly rounded; NaN -> canonical NaN; ftz flushes the result."""
    rnd = _mode(rnd)
    with np.errstate(all="ignore"):
        r = _f64_to_f32(_u64(bits64).view(np.float64), rnd)
        return _finish32(r, ftz)


def f64_from_f32(bits: U32, ftz: bool = False) -> U64:
    """``cvt{.ftz}.f64.f32``: exact; ftz flushes subnormal inputs; NaN -> canonical f64 NaN."""
    bits = _u32(bits)
    if ftz:
        bits = _flush32(bits)
    with np.errstate(all="ignore"):
        return _finish64(bits.view(np.float32).astype(np.float64))


# ---------------------------------------------------------------------------------------------
# f64 arithmetic
# ---------------------------------------------------------------------------------------------


def _f64_in(*xs: Any) -> list[F64]:
    return [_u64(x).view(np.float64) for x in xs]


def add64(a: U64, b: U64, rnd: str = "rn") -> U64:
    """``add.rnd.f64``."""
    rnd = _mode(rnd)
    x, y = _f64_in(a, b)
    with np.errstate(all="ignore"):
        s = x + y
        if rnd == "rn":
            return _finish64(s)
        _, err = _two_sum(x, y)
        ovf = np.isinf(s) & np.isfinite(x) & np.isfinite(y)
        err = np.where(np.isfinite(s), err, 0.0)
        r = _adjust(s, (err < 0) | (ovf & (s > 0)), (err > 0) | (ovf & (s < 0)), rnd)
        if rnd == "rm":
            r = _rm_zero_fix(r, s == 0, x.view(np.uint64), y.view(np.uint64))
    return _finish64(r)


def sub64(a: U64, b: U64, rnd: str = "rn") -> U64:
    """``sub.rnd.f64``."""
    return add64(a, _u64(b) ^ _SIGN64, rnd)


def _nontrivial(*xs: F64) -> Bool:
    """All operands finite and nonzero."""
    m = np.isfinite(xs[0]) & (xs[0] != 0)
    for x in xs[1:]:
        m &= np.isfinite(x) & (x != 0)
    return m


def mul64(a: U64, b: U64, rnd: str = "rn") -> U64:
    """``mul.rnd.f64``."""
    rnd = _mode(rnd)
    x, y = _f64_in(a, b)
    with np.errstate(all="ignore"):
        p = x * y
        if rnd == "rn":
            return _finish64(p)
        _, e = _two_prod(x, y)
        safe = _two_prod_safe(x, y, p)
        r = _adjust(p, safe & (e < 0), safe & (e > 0), rnd)
        _exact_fallback64(r, _nontrivial(x, y) & ~safe, lambda u, v: u * v, rnd, False, x, y)
    return _finish64(r)


def div64(a: U64, b: U64, rnd: str = "rn") -> U64:
    """``div.rnd.f64``."""
    rnd = _mode(rnd)
    x, y = _f64_in(a, b)
    with np.errstate(all="ignore"):
        q = x / y
        if rnd == "rn":
            return _finish64(q)
        p, e = _two_prod(q, y)
        safe = _two_prod_safe(q, y, p) & (np.abs(x) >= 2.0**-900)
        r1 = x - p  # exact (Sterbenz) where safe
        # remainder x - q*y = r1 - e; q is below x/y iff remainder and y have the same sign
        rem_pos, rem_neg = r1 > e, r1 < e
        pos = y > 0
        too_low = safe & np.where(pos, rem_pos, rem_neg)
        too_high = safe & np.where(pos, rem_neg, rem_pos)
        r = _adjust(q, too_high, too_low, rnd)
        _exact_fallback64(r, _nontrivial(x, y) & ~safe, lambda u, v: u / v, rnd, False, x, y)
    return _finish64(r)


def rcp64(a: U64, rnd: str = "rn") -> U64:
    """``rcp.rnd.f64``: correctly rounded 1/a."""
    a = _u64(a)
    return div64(np.full(a.shape, 0x3FF0000000000000, dtype=np.uint64), a, rnd)


def sqrt64(a: U64, rnd: str = "rn") -> U64:
    """``sqrt.rnd.f64``."""
    rnd = _mode(rnd)
    (x,) = _f64_in(a)
    with np.errstate(all="ignore"):
        s = np.sqrt(x)
        if rnd == "rn":
            return _finish64(s)
        # scale x by an even power of two into [0.5, 2): exact, and sqrt never underflows
        _, ex = np.frexp(x)
        k = ex // 2
        xs = np.ldexp(x, -2 * k)
        ss = np.sqrt(xs)
        p, e = _two_prod(ss, ss)
        r1 = xs - p  # exact
        ok = np.isfinite(x) & (x > 0)
        ss = _adjust(ss, ok & (r1 < e), ok & (r1 > e), rnd)
        r = np.where(ok, np.ldexp(ss, k), s)
    return _finish64(r)


def fma64(a: U64, b: U64, c: U64, rnd: str = "rn") -> U64:
    """``fma.rnd.f64``: a*b+c with a single rounding (rn vectorized; directed modes exact but slow)."""
    rnd = _mode(rnd)
    x, y, z = _f64_in(a, b, c)
    with np.errstate(all="ignore"):
        p0 = x * y
        trivial = ~_nontrivial(x, y) | ~np.isfinite(z)  # a*b exact (0/inf/NaN): one IEEE addition
        r = p0 + z
        # ... except that a finite a*b may overflow in float64 while the exact sum with an inf is inf
        r = np.where(np.isfinite(x) & np.isfinite(y) & np.isinf(z), z, r)
        if rnd == "rm":
            r = _rm_zero_fix(r, trivial & (r == 0), p0.view(np.uint64), z.view(np.uint64))
        if rnd == "rn":
            uh, ul = _two_prod(x, y)
            th, tl = _two_sum(z, uh)
            vs, ve = _two_sum(tl, ul)
            res = th + _round_to_odd64(vs, ve)  # Boldo-Melquiond
            safe = (
                _two_prod_safe(x, y, uh)
                & (np.abs(z) <= 2.0**1000)
                & ((np.abs(res) >= 2.0**-960) | ((res == 0) & (ve == 0)))
            )
            r = np.where(trivial, r, res)
            slow = ~trivial & ~safe
        else:
            slow = ~trivial
        _exact_fallback64(r, slow, lambda u, v, w: u * v + w, rnd, rnd == "rm", x, y, z)
    return _finish64(r)


def neg64(a: U64) -> U64:
    """``neg.f64``: flips the sign bit."""
    return _u64(a) ^ _SIGN64


def abs64(a: U64) -> U64:
    """``abs.f64``: clears the sign bit."""
    return _u64(a) & _ABS64


def _minmax64(a: U64, b: U64, nan: bool, is_min: bool) -> U64:
    a, b = _u64(a), _u64(b)
    return _minmax(a, b, a.view(np.float64), b.view(np.float64), nan, is_min, _ABS64, _CNAN64)


def min64(a: U64, b: U64, nan: bool = False) -> U64:
    """``min{.NaN}.f64`` (same NaN and signed-zero rules as :func:`min`)."""
    return _minmax64(a, b, nan, True)


def max64(a: U64, b: U64, nan: bool = False) -> U64:
    """``max{.NaN}.f64`` (same NaN and signed-zero rules as :func:`max`)."""
    return _minmax64(a, b, nan, False)


def setp64(cmp: str, a: U64, b: U64) -> Bool:
    """``setp.cmp.f64`` (see :func:`setp`)."""
    x, y = _f64_in(a, b)
    with np.errstate(all="ignore"):
        return np.asarray(_setp(cmp, x, y))


def testp64(kind: str, a: U64) -> Bool:
    """``testp.kind.f64`` (see :func:`testp`)."""
    return _testp(kind, _u64(a), _EXP64, _ABS64)


def _bench() -> None:  # pragma: no cover - manual micro-benchmark
    import timeit

    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    c = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("add rn", lambda: add(a, b)),
        ("add rz", lambda: add(a, b, "rz")),
        ("add rn ftz sat", lambda: add(a, b, "rn", True, True)),
        ("mul rn", lambda: mul(a, b)),
        ("mul rp", lambda: mul(a, b, "rp")),
        ("fma rn", lambda: fma(a, b, c)),
        ("fma rm", lambda: fma(a, b, c, "rm")),
        ("div rn", lambda: div(a, b)),
        ("div rz", lambda: div(a, b, "rz")),
        ("sqrt rn", lambda: sqrt(a)),
        ("min", lambda: min(a, b)),
        ("setp lt", lambda: setp("lt", a, b)),
        ("ex2.approx", lambda: ex2_approx(a)),
        ("sin.approx", lambda: sin_approx(a)),
    ]
    for name, fn in cases:
        n = 5000
        t = builtins.min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e6
        print(f"{name:16s} {t:7.2f} us")


if __name__ == "__main__":  # pragma: no cover
    _bench()
