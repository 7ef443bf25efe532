"""Tests for qwengpu.simt.fp32 against the exact Fraction reference in fp_reference.py."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import fp_reference as ref
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwengpu.simt import fp32

MODES = ["rn", "rz", "rm", "rp"]
INT_MODES = ["rni", "rzi", "rmi", "rpi"]
INT_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]
CMPS = ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"]
TESTP = ["finite", "infinite", "number", "notanumber", "normal", "subnormal"]

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

# QWENGPU_FP_SCALE=20 multiplies the number of examples for a thorough (slow) campaign.
_SCALE = float(os.environ.get("QWENGPU_FP_SCALE", "1"))
FAST = settings(max_examples=int(120 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])
MEDIUM = settings(max_examples=int(60 * _SCALE), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------------------------------------
# strategies
# ------------------------------------------------------------------------------------------------

EDGE32 = [
    0x00000000, 0x80000000,  # +-0
    0x00000001, 0x80000001,  # +-min subnormal
    0x00000002, 0x00400000,  # subnormals
    0x007FFFFF, 0x807FFFFF,  # +-max subnormal
    0x00800000, 0x80800000,  # +-min normal
    0x00800001, 0x00FFFFFF,
    0x7F7FFFFF, 0xFF7FFFFF,  # +-FLT_MAX
    0x7F7FFFFE, 0x7F000000,
    0x7F800000, 0xFF800000,  # +-inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF,  # NaNs
    0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF, 0x40000000, 0x3F000000,  # 1, -1, 1+ulp, 1-ulp, 2, .5
    0x33800000, 0x33800001, 0x34000000,  # 2^-24, 2^-24+, 2^-23
    0x3FC00000, 0xBFC00000, 0x40200000, 0x3EFFFFFF,  # 1.5, -1.5, 2.5, 0.49999997
    0x4B000000, 0x4B800000, 0x4B7FFFFF,  # 2^23, 2^24, 2^24-1
    0x4F000000, 0xCF000000, 0x4F800000,  # 2^31, -2^31, 2^32
    0x5F000000, 0xDF000000, 0x5F800000,  # 2^63, -2^63, 2^64
    0x3FB504F3, 0x40490FDB, 0x42C80000,  # sqrt2, pi, 100
]  # fmt: skip
GRID32 = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x80800001, 0x7F7FFFFF, 0xFF7FFFFF,
          0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF, 0x33800000,
          0xB3800001, 0x3FC00000, 0x4B800000, 0x00400001, 0x3EAAAAAB, 0xC0490FDB]  # fmt: skip

EDGE64 = [
    0x0000000000000000, 0x8000000000000000,
    0x0000000000000001, 0x8000000000000001, 0x000FFFFFFFFFFFFF, 0x0008000000000000,
    0x0010000000000000, 0x8010000000000000, 0x0010000000000001, 0x001FFFFFFFFFFFFF,
    0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFE, 0x7FE0000000000000,
    0x7FF0000000000000, 0xFFF0000000000000,
    0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF,
    0x3FF0000000000000, 0xBFF0000000000000, 0x3FF0000000000001, 0x3FEFFFFFFFFFFFFF,
    0x3CA0000000000000, 0x3CA0000000000001, 0x3FF8000000000000, 0x4340000000000000,
    0x47EFFFFFE0000000, 0x47EFFFFFF0000000, 0x47F0000000000000, 0x36A0000000000000,  # f32 ovf edge, 2^-149
    0x3690000000000000, 0x3690000000000001, 0x380FFFFFF0000000, 0x3810000000000000,  # 2^-150, f32 sub edge
    0x43E0000000000000, 0xC3E0000000000000, 0x43F0000000000000, 0x41E0000000000000,  # 2^63, -2^63, 2^64, 2^31
]  # fmt: skip


def _wrap32(t: tuple[int, int]) -> int:
    return (t[0] + t[1]) & 0xFFFFFFFF


def _wrap64(t: tuple[int, int]) -> int:
    return (t[0] + t[1]) & 0xFFFFFFFFFFFFFFFF


_mantissa23 = st.one_of(
    st.integers(0, (1 << 23) - 1),
    st.sampled_from([0, 1, 2, 3, 1 << 22, (1 << 22) + 1, (1 << 23) - 1, (1 << 23) - 2]),
    st.integers(0, 22).map(lambda k: 1 << k),
    st.integers(1, 23).map(lambda k: (1 << k) - 1),
    st.integers(0, 0xFFF).map(lambda k: k << 11),
)
_exp8 = st.one_of(st.integers(0, 255), st.integers(110, 145), st.integers(0, 3), st.integers(250, 254))
structured32 = st.builds(lambda s, e, m: (s << 31) | (e << 23) | m, st.integers(0, 1), _exp8, _mantissa23)
near_edge32 = st.tuples(st.sampled_from(EDGE32), st.integers(-3, 3)).map(_wrap32)
f32s = st.one_of(
    st.sampled_from(EDGE32),
    near_edge32,
    st.integers(0, 0xFFFFFFFF),
    structured32,
    st.floats(width=32, allow_nan=False).map(lambda x: int(fp32.f32_bits(x)[()])),
)

_mantissa52 = st.one_of(
    st.integers(0, (1 << 52) - 1),
    st.sampled_from([0, 1, (1 << 51), (1 << 52) - 1, (1 << 29), (1 << 29) - 1, 1 << 28]),
    st.integers(0, 51).map(lambda k: 1 << k),
    st.integers(1, 52).map(lambda k: (1 << k) - 1),
    st.integers(0, (1 << 23) - 1).map(lambda k: k << 29),  # float32-representable mantissas
)
_exp11 = st.one_of(st.integers(0, 2047), st.integers(1000, 1050), st.integers(0, 60), st.integers(1990, 2046))
structured64 = st.builds(lambda s, e, m: (s << 63) | (e << 52) | m, st.integers(0, 1), _exp11, _mantissa52)
f64s = st.one_of(
    st.sampled_from(EDGE64),
    st.tuples(st.sampled_from(EDGE64), st.integers(-3, 3)).map(_wrap64),
    st.integers(0, 0xFFFFFFFFFFFFFFFF),
    structured64,
    st.floats(allow_nan=False).map(lambda x: int(fp32.f64_bits(x)[()])),
)


@st.composite
def close_pair32(draw: st.DrawFn) -> tuple[int, int]:
    """Two floats with nearby exponents: sums with carries, cancellations and exact ties."""
    e = draw(st.integers(1, 254))
    a = (draw(st.integers(0, 1)) << 31) | (e << 23) | draw(_mantissa23)
    e2 = min(255, max(0, e - draw(st.integers(-2, 26))))
    b = (draw(st.integers(0, 1)) << 31) | (e2 << 23) | draw(_mantissa23)
    return (a, b) if draw(st.booleans()) else (b, a)


def lists(s: st.SearchStrategy[Any], max_size: int = 8) -> st.SearchStrategy[list[Any]]:
    return st.lists(s, min_size=1, max_size=max_size)


def u32(xs: Sequence[int]) -> np.ndarray:
    return np.array(xs, dtype=np.uint32)


def u64(xs: Sequence[int]) -> np.ndarray:
    return np.array(xs, dtype=np.uint64)


def check(got: np.ndarray, want: Sequence[Any], *inputs: Sequence[int], what: str = "") -> None:
    got_l = [g.item() for g in np.asarray(got)]
    want_l = list(want)
    if got_l != want_l:
        bad = [
            f"  in={[hex(x[i]) for x in inputs]} got={hex(g) if isinstance(g, int) else g} "
            f"want={hex(w) if isinstance(w, int) else w}"
            for i, (g, w) in enumerate(zip(got_l, want_l, strict=True))
            if g != w
        ]
        raise AssertionError(f"{what}: {len(bad)} mismatches\n" + "\n".join(bad[:10]))


# ------------------------------------------------------------------------------------------------
# basic f32 arithmetic
# ------------------------------------------------------------------------------------------------

BINOPS: dict[str, tuple[Callable[..., Any], Callable[..., int]]] = {
    "add": (fp32.add, ref.add),
    "sub": (fp32.sub, ref.sub),
    "mul": (fp32.mul, ref.mul),
}


@pytest.mark.parametrize("name", list(BINOPS))
@FAST
@given(
    xs=lists(st.tuples(f32s, f32s)),
    rnd=st.sampled_from(MODES),
    ftz=st.booleans(),
    sat=st.booleans(),
)
def test_binop_random(name: str, xs: list[tuple[int, int]], rnd: str, ftz: bool, sat: bool) -> None:
    fn, rf = BINOPS[name]
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    check(fn(u32(a), u32(b), rnd, ftz, sat), [rf(x, y, rnd, ftz, sat) for x, y in xs], a, b, what=name)


@pytest.mark.parametrize("name", ["add", "sub"])
@FAST
@given(xs=lists(close_pair32()), rnd=st.sampled_from(MODES), ftz=st.booleans())
def test_addsub_close(name: str, xs: list[tuple[int, int]], rnd: str, ftz: bool) -> None:
    fn, rf = BINOPS[name]
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    check(fn(u32(a), u32(b), rnd, ftz), [rf(x, y, rnd, ftz) for x, y in xs], a, b, what=name)


def _grid2() -> tuple[list[int], list[int]]:
    a = [x for x in GRID32 for _ in GRID32]
    b = [y for _ in GRID32 for y in GRID32]
    return a, b


@pytest.mark.parametrize("rnd", MODES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_edge_grid(name: str, rnd: str) -> None:
    a, b = _grid2()
    for ftz in (False, True):
        if name == "div":
            got = fp32.div(u32(a), u32(b), rnd, ftz)
            want = [ref.div(x, y, rnd, ftz) for x, y in zip(a, b, strict=True)]
        else:
            fn, rf = BINOPS[name]
            got, want = fn(u32(a), u32(b), rnd, ftz), [rf(x, y, rnd, ftz) for x, y in zip(a, b, strict=True)]
        check(got, want, a, b, what=f"{name}.{rnd} ftz={ftz}")


def test_add_ties_and_signed_zero() -> None:
    one, tie = 0x3F800000, 0x33800000  # 1 + 2^-24 is an exact tie
    assert fp32.add(u32([one]), u32([tie]))[0] == one  # to even
    assert fp32.add(u32([0x3F800001]), u32([tie]))[0] == 0x3F800002  # to even (up)
    assert fp32.add(u32([one]), u32([tie]), "rp")[0] == 0x3F800001
    assert fp32.add(u32([one]), u32([0x00000001]), "rp")[0] == 0x3F800001  # sticky far below
    assert fp32.add(u32([one]), u32([0x80000001]), "rz")[0] == 0x3F7FFFFF
    x = u32([0x3FC00000, 0x00000000, 0x80000000, 0x80000000])
    y = u32([0xBFC00000, 0x80000000, 0x80000000, 0x00000000])
    for rnd in MODES:
        want = [0x80000000 if rnd == "rm" else 0, 0x80000000 if rnd == "rm" else 0, 0x80000000]
        want.append(want[1])
        assert list(fp32.add(x, y, rnd)) == want, rnd
    assert fp32.sub(u32([0x3F800000]), u32([0x3F800000]), "rm")[0] == 0x80000000


def test_overflow_modes() -> None:
    big = u32([0x7F7FFFFF, 0xFF7FFFFF])
    two = u32([0x40000000, 0x40000000])
    assert list(fp32.mul(big, two, "rn")) == [0x7F800000, 0xFF800000]
    assert list(fp32.mul(big, two, "rz")) == [0x7F7FFFFF, 0xFF7FFFFF]
    assert list(fp32.mul(big, two, "rm")) == [0x7F7FFFFF, 0xFF800000]
    assert list(fp32.mul(big, two, "rp")) == [0x7F800000, 0xFF7FFFFF]


def test_ftz_and_sat() -> None:
    sub_ = u32([0x00000001, 0x80400000, 0x80400000])
    zero = u32([0, 0, 0x80000000])
    assert list(fp32.add(sub_, zero)) == [1, 0x80400000, 0x80400000]
    assert list(fp32.add(sub_, zero, ftz=True)) == [0, 0, 0x80000000]  # -0 + +0 = +0
    # a result that is subnormal after rounding is flushed; one that rounds up to normal is kept
    mn = u32([0x00800000])
    half = u32([0x3F000000])
    assert list(fp32.mul(mn, half)) == [0x00400000]
    assert list(fp32.mul(mn, half, ftz=True)) == [0]
    assert list(fp32.mul(u32([0x007FFFFF]), u32([0x3F800001]), "rp")) == [0x00800000]
    assert list(fp32.mul(u32([0x00FFFFFF]), u32([0x3F000000]), "rp", ftz=True)) == [0x00800000]
    v = u32([0x7FC00000, 0xBF800000, 0x80000000, 0x3F800001, 0x7F800000, 0x3F000000, 0x00000001])
    assert list(fp32.add(v, u32([0] * 7), sat=True)) == [0, 0, 0, 0x3F800000, 0x3F800000, 0x3F000000, 1]
    assert list(fp32.add(v, u32([0] * 7), ftz=True, sat=True))[-1] == 0
    assert list(fp32.sat_f32(v)) == [0, 0, 0, 0x3F800000, 0x3F800000, 0x3F000000, 1]
    assert list(fp32.sat_f32(v, ftz=True))[-1] == 0


def test_canonical_nan() -> None:
    nans = u32([0x7F800001, 0xFFC00000, 0x7FC01234, 0xFFFFFFFF])
    one = u32([0x3F800000] * 4)
    for fn in (fp32.add, fp32.sub, fp32.mul, fp32.div):
        assert list(fn(nans, one)) == [fp32.CANONICAL_NAN] * 4
        assert list(fn(one, nans)) == [fp32.CANONICAL_NAN] * 4
    assert list(fp32.fma(nans, one, one)) == [fp32.CANONICAL_NAN] * 4
    assert list(fp32.sqrt(u32([0xBF800000, 0xFF800000]))) == [fp32.CANONICAL_NAN] * 2
    inf = u32([0x7F800000])
    assert fp32.sub(inf, inf)[0] == fp32.CANONICAL_NAN
    assert fp32.mul(inf, u32([0x80000000]))[0] == fp32.CANONICAL_NAN


# ------------------------------------------------------------------------------------------------
# fma
# ------------------------------------------------------------------------------------------------


@st.composite
def fma_close(draw: st.DrawFn) -> tuple[int, int, int]:
    """c close to -a*b: massive cancellation, exact zeros, tiny results."""
    a, b = draw(f32s), draw(f32s)
    p = fp32.mul(u32([a]), u32([b]), draw(st.sampled_from(MODES)))[0].item()
    c = (p ^ 0x80000000) + draw(st.integers(-2, 2))
    return a, b, c & 0xFFFFFFFF


@FAST
@given(
    xs=lists(st.one_of(st.tuples(f32s, f32s, f32s), fma_close())),
    rnd=st.sampled_from(MODES),
    ftz=st.booleans(),
    sat=st.booleans(),
)
def test_fma_random(xs: list[tuple[int, int, int]], rnd: str, ftz: bool, sat: bool) -> None:
    a, b, c = ([x[i] for x in xs] for i in range(3))
    got = fp32.fma(u32(a), u32(b), u32(c), rnd, ftz, sat)
    check(got, [ref.fma(x, y, z, rnd, ftz, sat) for x, y, z in xs], a, b, c, what=f"fma.{rnd}")


def _bits(x: float) -> int:
    return int(fp32.f32_bits(x)[()])


def _naive_fma(a: list[int], b: list[int], c: list[int]) -> list[int]:
    x, y, z = (u32(v).view(np.float32).astype(np.float64) for v in (a, b, c))
    return [int(v) for v in (x * y + z).astype(np.float32).view(np.uint32)]


def test_fma_double_rounding_cases() -> None:
    """c = 2^E (1 + j 2^-23) with j odd, a*b = 2^(E-24) (1 - k^2 2^-46): the exact sum lies just
    below a float32 midpoint, float64 rounds it onto the midpoint, and ties-to-even then goes up."""
    a, b, c = [], [], []
    for j in (1, 3, 0x7FFFFF, 12345):
        for k in (1, 2, 7, 300):
            for e in (-90, 0, 60):
                for s in (0, 1):
                    c.append((s << 31) | ((e + 127) << 23) | j)
                    a.append((s << 31) | ((-12 + 127) << 23) | k)  # (1 + k 2^-23) * 2^-12
                    b.append(((e - 13 + 127) << 23) | ((1 << 23) - 2 * k))  # (1 - k 2^-23) * 2^(e-12)
    want = [ref.fma(x, y, z) for x, y, z in zip(a, b, c, strict=True)]
    assert want == c  # the correct answer is c itself
    check(fp32.fma(u32(a), u32(b), u32(c)), want, a, b, c, what="fma double rounding")
    naive = _naive_fma(a, b, c)
    # float64 double rounding is wrong on every one of them
    assert all(n != w for n, w in zip(naive, want, strict=True))


def test_fma_directed_sticky_cases() -> None:
    """a*b far below ulp(c) but nonzero: the directed result must move by one ulp."""
    c = [0x3F800000, 0xBF800000, 0x3F800000, 0x7F7FFFFF]
    a = [0x26800000, 0x26800000, 0xA6800000, 0x3F800000]  # 2^-50
    b = [0x26800000, 0x26800000, 0x26800000, 0x73800000]  # a*b = 2^-100 ; last: 2^104 > ulp/2
    for rnd in MODES:
        want = [ref.fma(x, y, z, rnd) for x, y, z in zip(a, b, c, strict=True)]
        check(fp32.fma(u32(a), u32(b), u32(c), rnd), want, a, b, c, what=rnd)
    assert list(fp32.fma(u32(a), u32(b), u32(c), "rp"))[:3] == [0x3F800001, 0xBF7FFFFF, 0x3F800000]
    assert fp32.fma(u32(a), u32(b), u32(c), "rn")[3] == 0x7F800000
    assert fp32.fma(u32(a), u32(b), u32(c), "rz")[3] == 0x7F7FFFFF
    # exact cancellation: +0, or -0 in rm
    x, y = u32([0x3FC00000]), u32([0x40000000])
    z = u32([0xC0400000])
    assert fp32.fma(x, y, z, "rn")[0] == 0 and fp32.fma(x, y, z, "rm")[0] == 0x80000000


# ------------------------------------------------------------------------------------------------
# div / rcp / sqrt
# ------------------------------------------------------------------------------------------------


@st.composite
def exact_quotient(draw: st.DrawFn) -> tuple[int, int]:
    """a = b * small integer (exact quotients and quotients one ulp away)."""
    b = draw(structured32)
    q = draw(st.sampled_from([1, 3, 5, 7, 0.5, 0.25, 1.5, 3.0000002]))
    a = fp32.mul(u32([b]), fp32.f32_bits(np.array([q], dtype=np.float32)))[0].item()
    return (a + draw(st.integers(-1, 1))) & 0xFFFFFFFF, b


@FAST
@given(
    xs=lists(st.one_of(st.tuples(f32s, f32s), exact_quotient(), close_pair32())),
    rnd=st.sampled_from(MODES),
    ftz=st.booleans(),
)
def test_div_random(xs: list[tuple[int, int]], rnd: str, ftz: bool) -> None:
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    check(fp32.div(u32(a), u32(b), rnd, ftz), [ref.div(x, y, rnd, ftz) for x, y in xs], a, b, what="div")
    if rnd == "rn":
        check(fp32.div_full(u32(a), u32(b), ftz), [ref.div(x, y, "rn", ftz) for x, y in xs], a, b)
        check(fp32.rcp(u32(b), "rn", ftz), [ref.div(0x3F800000, y, "rn", ftz) for y in b], b)
        check(fp32.rcp_approx(u32(b), ftz), [ref.div(0x3F800000, y, "rn", ftz) for y in b], b)
    check(fp32.rcp(u32(b), rnd, ftz), [ref.div(0x3F800000, y, rnd, ftz) for y in b], b, what="rcp")


@FAST
@given(
    xs=lists(st.one_of(f32s, st.integers(0, 1 << 23).map(lambda n: _bits(float(n * n))))),
    rnd=st.sampled_from(MODES),
    ftz=st.booleans(),
)
def test_sqrt_random(xs: list[int], rnd: str, ftz: bool) -> None:
    check(fp32.sqrt(u32(xs), rnd, ftz), [ref.sqrt(x, rnd, ftz) for x in xs], xs, what=f"sqrt.{rnd}")
    if rnd == "rn":
        check(fp32.sqrt_approx(u32(xs), ftz), [ref.sqrt(x, "rn", ftz) for x in xs], xs)


def test_div_approx_model() -> None:
    a = u32([0x40400000, 0x7F800000, 0x3F800000, 0x3F800000])
    b = u32([0x40000000, 0x7F000000, 0x7F000000, 0x7E800000])  # 2, 2^127, 2^127, 2^126
    got = list(fp32.div_approx(a, b))
    assert got == [0x3FC00000, fp32.CANONICAL_NAN, 0, 0x00800000]
    assert list(fp32.div_approx(a, b, ftz=True)) == got


# ------------------------------------------------------------------------------------------------
# approximate transcendental models
# ------------------------------------------------------------------------------------------------

APPROX: dict[str, tuple[Callable[..., Any], Callable[..., int]]] = {
    "rsqrt": (fp32.rsqrt_approx, ref.rsqrt),
    "ex2": (fp32.ex2_approx, ref.ex2),
    "lg2": (fp32.lg2_approx, ref.lg2),
    "sin": (fp32.sin_approx, ref.sin),
    "cos": (fp32.cos_approx, ref.cos),
    "tanh": (lambda a, ftz: fp32.tanh_approx(a), lambda a, ftz: ref.tanh(a)),
}

_approx_inputs = st.one_of(
    f32s,
    st.floats(-160, 130, width=32).map(_bits),
    st.integers(-152, 130).map(lambda n: _bits(float(n))),
    st.floats(-10, 10, width=32).map(_bits),
)


@pytest.mark.parametrize("name", list(APPROX))
@MEDIUM
@given(xs=lists(_approx_inputs), ftz=st.booleans())
def test_approx_models(name: str, xs: list[int], ftz: bool) -> None:
    fn, rf = APPROX[name]
    check(fn(u32(xs), ftz), [rf(x, ftz) for x in xs], xs, what=name)


@pytest.mark.parametrize("name", list(APPROX))
def test_approx_mpmath_fallback(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Force every element through the mpmath path: it must agree with the float64 path."""
    fn, rf = APPROX[name]
    xs = [0x3F800000, 0x40490FDB, 0xC2F00000, 0x3E99999A, 0x00000005, 0x7E000000, 0xC1200000, 0x42FE0000]
    fast = fn(u32(xs), False)
    monkeypatch.setattr(fp32, "_HARD_TOL", 1.0)
    slow = fn(u32(xs), False)
    assert list(fast) == list(slow)
    check(slow, [rf(x, False) for x in xs], xs, what=name)


# real inputs whose float64 value lies within 2^-40 (relative) of a float32 rounding midpoint
HARD_APPROX = {
    "rsqrt": [0x1DEA0774, 0x591DFCA8],
    "ex2": [0x42EC4FF9, 0x42A24FF9, 0xC234273C],
    "lg2": [0x15A8031C, 0x5F138FB8, 0x04FBF0CF],
    "sin": [0xDDCB3BD7, 0x576B1A4A, 0xC0951492],
    "cos": [0x4592B5F2, 0x596492D7, 0x429E19B9],
}


@pytest.mark.parametrize("name", list(HARD_APPROX))
def test_approx_hard_cases(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fn, rf = APPROX[name]
    xs = HARD_APPROX[name]
    calls: list[float] = []
    orig = fp32._mp_round32

    def spy(f: Any, x: float) -> float:
        calls.append(x)
        return orig(f, x)

    monkeypatch.setattr(fp32, "_mp_round32", spy)
    check(fn(u32(xs), False), [rf(x, False) for x in xs], xs, what=name)
    assert len(calls) == len(xs)


def test_approx_special_cases() -> None:
    pz, nz, pinf, ninf, nan, one = 0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x3F800000
    x = u32([pz, nz, pinf, ninf, nan, 0xBF800000, one])
    cn = fp32.CANONICAL_NAN
    assert list(fp32.ex2_approx(x)) == [0x3F800000, 0x3F800000, pinf, pz, cn, 0x3F000000, 0x40000000]
    assert list(fp32.lg2_approx(x)) == [ninf, ninf, pinf, cn, cn, cn, pz]
    assert list(fp32.rsqrt_approx(x)) == [pinf, ninf, pz, cn, cn, cn, 0x3F800000]
    assert list(fp32.rcp_approx(x)) == [pinf, ninf, pz, nz, cn, 0xBF800000, 0x3F800000]
    assert list(fp32.sqrt_approx(x)) == [pz, nz, pinf, cn, cn, cn, 0x3F800000]
    assert list(fp32.sin_approx(x))[:5] == [pz, nz, cn, cn, cn]
    assert list(fp32.cos_approx(x))[:5] == [0x3F800000, 0x3F800000, cn, cn, cn]
    t = [ref.tanh(0xBF800000), ref.tanh(one)]
    assert list(fp32.tanh_approx(x)) == [pz, nz, 0x3F800000, 0xBF800000, cn, *t]
    # ex2 of -150 is exactly the midpoint between 0 and 2^-149: ties to even (0)
    e = u32([_bits(-150.0), _bits(-149.0), _bits(-149.5)])
    assert list(fp32.ex2_approx(e)) == [0, 1, 1]
    assert list(fp32.ex2_approx(u32([0x00000001, 0x80000001]), ftz=True)) == [0x3F800000] * 2
    assert list(fp32.ex2_approx(u32([_bits(-130.0)]), ftz=True)) == [0]


# ------------------------------------------------------------------------------------------------
# min / max / sign ops / compare / classify
# ------------------------------------------------------------------------------------------------


@FAST
@given(xs=lists(st.tuples(f32s, f32s)), ftz=st.booleans(), nan=st.booleans())
def test_minmax_random(xs: list[tuple[int, int]], ftz: bool, nan: bool) -> None:
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    check(fp32.min(u32(a), u32(b), ftz, nan), [ref.minmax(x, y, True, ftz, nan) for x, y in xs], a, b)
    check(fp32.max(u32(a), u32(b), ftz, nan), [ref.minmax(x, y, False, ftz, nan) for x, y in xs], a, b)


def test_minmax_special() -> None:
    pz, nz, nan, one = 0x00000000, 0x80000000, 0x7FC00001, 0x3F800000
    a = u32([pz, nz, nan, one, nan, 0x00000001])
    b = u32([nz, pz, one, nan, 0xFFC00000, 0x80000001])
    assert list(fp32.min(a, b)) == [nz, nz, one, one, fp32.CANONICAL_NAN, 0x80000001]
    assert list(fp32.max(a, b)) == [pz, pz, one, one, fp32.CANONICAL_NAN, 0x00000001]
    assert list(fp32.min(a, b, ftz=True))[-1] == 0x80000000
    assert list(fp32.max(a, b, nan=True))[2:5] == [fp32.CANONICAL_NAN] * 3


def test_sign_ops() -> None:
    a = u32([0x3F800000, 0x80000000, 0x7FC01234, 0x00000001, 0xFF800000])
    assert list(fp32.abs(a)) == [0x3F800000, 0, 0x7FC01234, 1, 0x7F800000]
    assert list(fp32.neg(a)) == [0xBF800000, 0, 0xFFC01234, 0x80000001, 0x7F800000]
    assert list(fp32.abs(a, ftz=True))[3] == 0
    assert list(fp32.neg(a, ftz=True))[3] == 0x80000000
    # copysign.f32 d, a, b: sign of a, magnitude of b
    s = u32([0x80000000, 0x00000000, 0xBF800000])
    m = u32([0x40490FDB, 0xC0490FDB, 0x7FC01234])
    assert list(fp32.copysign(s, m)) == [0xC0490FDB, 0x40490FDB, 0xFFC01234]
    assert list(fp32.neg64(u64([0, 0x3FF0000000000000]))) == [0x8000000000000000, 0xBFF0000000000000]
    assert list(fp32.abs64(u64([0x8000000000000000, 0xBFF0000000000000]))) == [0, 0x3FF0000000000000]


@FAST
@given(xs=lists(st.tuples(f32s, f32s), 6), ftz=st.booleans())
def test_setp_testp_random(xs: list[tuple[int, int]], ftz: bool) -> None:
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    for cmp in CMPS:
        check(fp32.setp(cmp, u32(a), u32(b), ftz), [ref.setp(cmp, x, y, ftz) for x, y in xs], a, b, what=cmp)
    for kind in TESTP:
        check(fp32.testp(kind, u32(a)), [ref.testp(kind, x) for x in a], a, what=kind)


def test_setp_nan_and_zero() -> None:
    nan, one, pz, nz = 0x7FC00000, 0x3F800000, 0, 0x80000000
    a, b = u32([nan, one, pz, 0x00000001]), u32([one, nan, nz, 0])
    res = {c: list(fp32.setp(c, a, b)) for c in CMPS}
    assert res["eq"] == [False, False, True, False]
    assert res["ne"] == [False, False, False, True]
    assert res["equ"] == [True, True, True, False]
    assert res["neu"] == [True, True, False, True]
    assert res["num"] == [False, False, True, True]
    assert res["nan"] == [True, True, False, False]
    assert list(fp32.setp("eq", a, b, ftz=True))[3]
    assert list(fp32.testp("subnormal", u32([0, 1, 0x807FFFFF, 0x00800000]))) == [False, True, True, False]
    assert list(fp32.testp("normal", u32([0, 1, 0x00800000, 0x7F800000]))) == [False, False, True, False]


# ------------------------------------------------------------------------------------------------
# conversions
# ------------------------------------------------------------------------------------------------


def _int_strategy(t: str) -> st.SearchStrategy[int]:
    lo, hi = ref.INT_RANGE[t]
    bits = 64 if t.endswith("64") else int(t[1:])

    def clamp(n: int) -> int:
        return min(max(n, lo), hi)

    return st.one_of(
        st.integers(lo, hi),
        st.sampled_from([lo, hi, 0, 1, lo + 1, hi - 1]).map(clamp),
        # odd << k: values with exactly representable / tie / sticky low bits
        st.tuples(st.integers(1, (1 << 26) - 1), st.integers(0, bits), st.booleans()).map(
            lambda t: clamp((t[0] << t[1]) * (-1 if t[2] else 1))
        ),
        st.tuples(st.integers(bits // 2, bits), st.integers(-3, 3), st.booleans()).map(
            lambda t: clamp(((1 << t[0]) + t[1]) * (-1 if t[2] else 1))
        ),
    )


@pytest.mark.parametrize("src", INT_TYPES)
@FAST
@given(data=st.data(), rnd=st.sampled_from(MODES))
def test_float_from_int(src: str, data: st.DataObject, rnd: str) -> None:
    xs = data.draw(lists(_int_strategy(src)))
    arr = np.array(xs, dtype=fp32._INT_TYPES[src])
    check(fp32.f32_from_int(arr, src, rnd), [ref.float_from_int(x, rnd) for x in xs], xs, what="f32")
    want64 = [ref.float_from_int(x, rnd, ref.F64) for x in xs]
    check(fp32.f64_from_int(arr, src, rnd), want64, xs, what="f64")


def test_float_from_int_64bit_cases() -> None:
    u = [(1 << 64) - 1, (1 << 63) + (1 << 39), (1 << 63) + (1 << 39) + 1, (1 << 53) + 1, (1 << 24) + 1, 0]
    s = [-(1 << 63), (1 << 63) - 1, -(1 << 53) - 1, (1 << 62) + (1 << 38), -((1 << 40) + (1 << 16) + 1)]
    for rnd in MODES:
        au, as_ = np.array(u, np.uint64), np.array(s, np.int64)
        check(fp32.f32_from_int(au, "u64", rnd), [ref.float_from_int(x, rnd) for x in u], u)
        check(fp32.f32_from_int(as_, "s64", rnd), [ref.float_from_int(x, rnd) for x in s], s)
        check(
            fp32.f64_from_int(np.array(u, np.uint64), "u64", rnd),
            [ref.float_from_int(x, rnd, ref.F64) for x in u],
            u,
        )
    assert fp32.f32_from_int(np.array([(1 << 64) - 1], np.uint64), "u64", "rn")[0] == 0x5F800000  # 2^64
    assert fp32.f32_from_int(np.array([(1 << 64) - 1], np.uint64), "u64", "rz")[0] == 0x5F7FFFFF
    assert fp32.f32_from_int(np.array([16777217], np.int32), "s32", "rn")[0] == 0x4B800000  # tie to even


@pytest.mark.parametrize("dst", INT_TYPES)
@FAST
@given(xs=lists(f32s), xs64=lists(f64s, 4), rnd=st.sampled_from(INT_MODES), ftz=st.booleans())
def test_int_from_float(dst: str, xs: list[int], xs64: list[int], rnd: str, ftz: bool) -> None:
    got = fp32.int_from_f32(u32(xs), dst, rnd, ftz)
    assert got.dtype == fp32._INT_TYPES[dst]
    check(got, [ref.int_from_float(x, dst, rnd, ref.F32, ftz) for x in xs], xs, what=f"{dst}.{rnd}")
    got = fp32.int_from_f64(u64(xs64), dst, rnd)
    assert got.dtype == fp32._INT_TYPES[dst]
    check(got, [ref.int_from_float(x, dst, rnd, ref.F64) for x in xs64], xs64, what=f"{dst}.{rnd} f64")


def test_int_saturation_and_nan() -> None:
    v = u32([0x7FC00000, 0x7F800000, 0xFF800000, 0x4F000000, 0xCF000000, 0xCF000001, 0x4F800000, 0xBF800000])
    assert list(fp32.int_from_f32(v, "s32", "rzi")) == [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), -(2**31),
                                                        2**31 - 1, -1]  # fmt: skip
    assert list(fp32.int_from_f32(v, "u32", "rzi")) == [0, 2**32 - 1, 0, 2**31, 0, 0, 2**32 - 1, 0]
    # a NaN to 64 bits is 1 << 63 (PTX ISA 9.0; what an H200 gives for __float2ll_rz(NaN))
    assert list(fp32.int_from_f32(v, "s64", "rzi"))[:3] == [-(2**63), 2**63 - 1, -(2**63)]
    assert list(fp32.int_from_f32(v, "u64", "rzi"))[:3] == [2**63, 2**64 - 1, 0]
    assert list(fp32.int_from_f32(v, "s8", "rzi")) == [0, 127, -128, 127, -128, -128, 127, -1]
    assert list(fp32.int_from_f32(u32([0x5F000000]), "s64", "rni")) == [2**63 - 1]
    assert list(fp32.int_from_f32(u32([0xDF000000]), "s64", "rni")) == [-(2**63)]
    # ties to even
    h = u32([_bits(x) for x in (0.5, 1.5, 2.5, -0.5, -1.5, -2.5)])
    assert list(fp32.int_from_f32(h, "s32", "rni")) == [0, 2, 2, 0, -2, -2]
    assert list(fp32.int_from_f32(h, "s32", "rmi")) == [0, 1, 2, -1, -2, -3]
    assert list(fp32.int_from_f32(h, "s32", "rpi")) == [1, 2, 3, 0, -1, -2]
    assert list(fp32.int_from_f32(u32([0x80000001]), "s32", "rmi")) == [-1]
    assert list(fp32.int_from_f32(u32([0x80000001]), "s32", "rmi", ftz=True)) == [0]
    d = u64([0x41DFFFFFFFC00000, 0x41E0000000000000, 0xC1E0000000200000, 0x7FF8000000000000])
    assert list(fp32.int_from_f64(d, "s32", "rni")) == [2**31 - 1, 2**31 - 1, -(2**31), -(2**31)]


@FAST
@given(xs=lists(f32s), rnd=st.sampled_from(INT_MODES), ftz=st.booleans())
def test_round_f32(xs: list[int], rnd: str, ftz: bool) -> None:
    check(fp32.round_f32(u32(xs), rnd, ftz), [ref.round_float_integral(x, rnd, ftz) for x in xs], xs)
    check(fp32.sat_f32(u32(xs), ftz), [ref.sat(x, ftz) for x in xs], xs, what="sat")


def test_round_f32_cases() -> None:
    h = u32([_bits(x) for x in (0.5, 1.5, 2.5, -0.5, -2.5, 8388609.0)])
    assert list(fp32.round_f32(h, "rni")) == [0, _bits(2.0), _bits(2.0), 0x80000000, _bits(-2.0), 0x4B000001]
    assert list(fp32.round_f32(h, "rzi"))[3] == 0x80000000  # rzi(-0.5) = -0
    assert list(fp32.round_f32(h, "rpi"))[3] == 0x80000000
    assert list(fp32.round_f32(u32([0x7FC00001]), "rni")) == [fp32.CANONICAL_NAN]


@st.composite
def f64_near_f32_midpoint(draw: st.DrawFn) -> int:
    """An f64 exactly at, or a few f64 ulps away from, the midpoint of two f32 values."""
    f = draw(structured32) & 0x7FFFFFFF
    f = min(f, 0x7F7FFFFF)
    lo = int(fp32.f64_from_f32(u32([f]))[0])
    hi = int(fp32.f64_from_f32(u32([f + 1]))[0]) if f < 0x7F7FFFFF else 0x47F0000000000000
    mid = (fp32.bits_f64([lo])[0] + fp32.bits_f64([hi])[0]) / 2
    m = int(fp32.f64_bits(mid)[()]) + draw(st.integers(-2, 2))
    return m | (draw(st.integers(0, 1)) << 63)


@FAST
@given(xs=lists(st.one_of(f64s, f64_near_f32_midpoint())), rnd=st.sampled_from(MODES), ftz=st.booleans())
def test_f32_f64_conversions(xs: list[int], rnd: str, ftz: bool) -> None:
    got = fp32.f32_from_f64(u64(xs), rnd, ftz)
    check(got, [ref.convert(x, ref.F64, ref.F32, rnd, ftz) for x in xs], xs, what=f"f32.f64.{rnd}")
    ys = [int(v) for v in got]
    check(fp32.f64_from_f32(u32(ys), ftz), [ref.convert(y, ref.F32, ref.F64, "rn", ftz) for y in ys], ys)


# ------------------------------------------------------------------------------------------------
# f64
# ------------------------------------------------------------------------------------------------

BINOPS64: dict[str, tuple[Callable[..., Any], Callable[..., int]]] = {
    "add64": (fp32.add64, lambda a, b, r: ref.add(a, b, r, fmt=ref.F64)),
    "sub64": (fp32.sub64, lambda a, b, r: ref.sub(a, b, r, fmt=ref.F64)),
    "mul64": (fp32.mul64, lambda a, b, r: ref.mul(a, b, r, fmt=ref.F64)),
    "div64": (fp32.div64, lambda a, b, r: ref.div(a, b, r, fmt=ref.F64)),
}


@st.composite
def close_pair64(draw: st.DrawFn) -> tuple[int, int]:
    e = draw(st.one_of(st.integers(1, 2046), st.integers(1, 60), st.integers(1000, 1050)))
    a = (draw(st.integers(0, 1)) << 63) | (e << 52) | draw(_mantissa52)
    e2 = min(2047, max(0, e - draw(st.integers(-2, 55))))
    b = (draw(st.integers(0, 1)) << 63) | (e2 << 52) | draw(_mantissa52)
    return (a, b) if draw(st.booleans()) else (b, a)


@pytest.mark.parametrize("name", list(BINOPS64))
@FAST
@given(xs=lists(st.one_of(st.tuples(f64s, f64s), close_pair64()), 6), rnd=st.sampled_from(MODES))
def test_binop64_random(name: str, xs: list[tuple[int, int]], rnd: str) -> None:
    fn, rf = BINOPS64[name]
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    check(fn(u64(a), u64(b), rnd), [rf(x, y, rnd) for x, y in xs], a, b, what=f"{name}.{rnd}")
    if name == "div64":
        check(fp32.rcp64(u64(b), rnd), [rf(0x3FF0000000000000, y, rnd) for y in b], b, what="rcp64")


@FAST
@given(
    xs=lists(st.one_of(f64s, st.integers(0, 1 << 26).map(lambda n: int(fp32.f64_bits(float(n * n))[()]))), 6),
    rnd=st.sampled_from(MODES),
)
def test_sqrt64_random(xs: list[int], rnd: str) -> None:
    check(fp32.sqrt64(u64(xs), rnd), [ref.sqrt(x, rnd, fmt=ref.F64) for x in xs], xs, what=f"sqrt64.{rnd}")


@st.composite
def fma64_close(draw: st.DrawFn) -> tuple[int, int, int]:
    a, b = draw(f64s), draw(f64s)
    p = int(fp32.mul64(u64([a]), u64([b]), draw(st.sampled_from(MODES)))[0])
    return a, b, ((p ^ (1 << 63)) + draw(st.integers(-2, 2))) & 0xFFFFFFFFFFFFFFFF


@FAST
@given(
    xs=lists(st.one_of(st.tuples(f64s, f64s, f64s), fma64_close(), st.tuples(*[structured64] * 3)), 6),
    rnd=st.sampled_from(MODES),
)
def test_fma64_random(xs: list[tuple[int, int, int]], rnd: str) -> None:
    a, b, c = ([x[i] for x in xs] for i in range(3))
    got = fp32.fma64(u64(a), u64(b), u64(c), rnd)
    check(got, [ref.fma(x, y, z, rnd, fmt=ref.F64) for x, y, z in xs], a, b, c, what=f"fma64.{rnd}")


def test_fma64_double_rounding_cases() -> None:
    """f64 analogue of the f32 construction: a*b = 2^(E-53)(1 - k^2 2^-104), c = 2^E (1 + j 2^-52)."""
    a, b, c = [], [], []
    for j in (1, 3, (1 << 52) - 1):
        for k in (1, 5, 1 << 20):
            for e in (-500, 0, 700):
                c.append(((e + 1023) << 52) | j)
                a.append(((-26 + 1023) << 52) | k)
                b.append(((e - 28 + 1023) << 52) | ((1 << 52) - 2 * k))  # (1 - k 2^-52) 2^(e-27)
    for rnd in MODES:
        want = [ref.fma(x, y, z, rnd, fmt=ref.F64) for x, y, z in zip(a, b, c, strict=True)]
        check(fp32.fma64(u64(a), u64(b), u64(c), rnd), want, a, b, c, what=f"fma64.{rnd}")
        if rnd == "rn":
            assert want == c
            fa, fb, fc = (u64(v).view(np.float64) for v in (a, b, c))
            naive = [int(v) for v in (fa * fb + fc).view(np.uint64)]
            assert all(n != w for n, w in zip(naive, want, strict=True))


def test_fma64_special() -> None:
    big, huge, ninf = 0x7FEFFFFFFFFFFFFF, 0x43E0000000000000, 0xFFF0000000000000
    for rnd in MODES:  # a*b overflows float64 but is finite: the sum with -inf is -inf
        assert fp32.fma64(u64([big]), u64([huge]), u64([ninf]), rnd)[0] == ninf
        assert fp32.fma64(u64([big]), u64([huge]), u64([0]), rnd)[0] == ref.mul(big, huge, rnd, fmt=ref.F64)
    assert fp32.fma(u32([0x7F7FFFFF]), u32([0x7F7FFFFF]), u32([0xFF800000]))[0] == 0xFF800000


@FAST
@given(xs=lists(st.tuples(f64s, f64s), 6), nan=st.booleans())
def test_minmax_setp64(xs: list[tuple[int, int]], nan: bool) -> None:
    a, b = [x[0] for x in xs], [x[1] for x in xs]
    F = ref.F64
    check(fp32.min64(u64(a), u64(b), nan), [ref.minmax(x, y, True, False, nan, F) for x, y in xs], a, b)
    check(fp32.max64(u64(a), u64(b), nan), [ref.minmax(x, y, False, False, nan, F) for x, y in xs], a, b)
    for cmp in CMPS:
        check(fp32.setp64(cmp, u64(a), u64(b)), [ref.setp(cmp, x, y, False, F) for x, y in xs], a, b)
    for kind in TESTP:
        check(fp32.testp64(kind, u64(a)), [ref.testp(kind, x, F) for x in a], a, what=kind)


# ------------------------------------------------------------------------------------------------
# API hygiene
# ------------------------------------------------------------------------------------------------


def test_inputs_not_mutated_and_shapes() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(0, 1 << 32, (4, 8), dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 1 << 32, (4, 8), dtype=np.uint64).astype(np.uint32)
    c = rng.integers(0, 1 << 32, (4, 8), dtype=np.uint64).astype(np.uint32)
    a0, b0, c0 = a.copy(), b.copy(), c.copy()
    for rnd in MODES:
        for ftz in (False, True):
            for out in (
                fp32.add(a, b, rnd, ftz, True),
                fp32.mul(a, b, rnd, ftz),
                fp32.fma(a, b, c, rnd, ftz),
                fp32.div(a, b, rnd, ftz),
                fp32.sqrt(a, rnd, ftz),
                fp32.min(a, b, ftz),
                fp32.abs(a, ftz),
                fp32.neg(a, ftz),
                fp32.round_f32(a, rnd, ftz),
                fp32.sin_approx(a, ftz),
            ):
                assert out.shape == a.shape and out.dtype == np.uint32
                assert out is not a and not np.shares_memory(out, a)
    assert (a == a0).all() and (b == b0).all() and (c == c0).all()
    d = a.astype(np.uint64) << 32 | b
    d0 = d.copy()
    for rnd in MODES:
        assert fp32.fma64(d, d, d, rnd).shape == d.shape
        assert fp32.add64(d, d, rnd).shape == d.shape
    assert (d == d0).all()
    assert fp32.add(np.uint32(0x3F800000), np.uint32(0x3F800000)).tolist() == [0x40000000]
    with pytest.raises(ValueError):
        fp32.add(a, b, "rx")
    with pytest.raises(ValueError):
        fp32.setp("lg", a, b)


def test_bit_helpers() -> None:
    assert fp32.f32_bits(1.0) == 0x3F800000 and fp32.f32_bits(1.0).dtype == np.uint32
    assert list(fp32.f32_bits([0.5, -2.0])) == [0x3F000000, 0xC0000000]
    assert fp32.bits_f32(u32([0x40490FDB])).dtype == np.float32
    assert fp32.bits_f32(u32([0x40490FDB]))[0] == np.float32(np.pi)
    assert fp32.f64_bits(1.0) == 0x3FF0000000000000
    assert fp32.bits_f64(u64([0x3FF0000000000000]))[0] == 1.0
