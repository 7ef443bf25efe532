"""Numerical kernels: layer norm (exact), and the few kernels whose PTX uses approximate hardware
instructions or library functions that are not correctly rounded. For those, ``expected`` is the
correctly rounded mathematical result (``hiprec``) and ``tolerance_ulp`` is justified per kernel."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import f32 as F
from . import hiprec as HP
from .ints import Rng
from .spec import Launch, Registry, buf, val

kernel = Registry()

# CUDA Programming Guide, "Mathematical Functions" (single precision, default compile): maximum
# ULP error of expf, exp2f, rsqrtf, tanhf, sinf, cosf is 2, and of __fdividef(x, y) is 2 for
# 2^-126 <= |y| <= 2^126. Those bounds are against the exact result, so distances to the correctly
# rounded value are at most 2 ulp as well (both are float32 and within 2.5 ulp of each other).
DOC_ULP = 2


def _f32_sum(values) -> np.float32:
    acc = np.float32(0.0)
    for v in values:
        acc = F.add(acc, v)
    return acc


def _ulp_step(x: np.float32, k: int) -> np.float32:
    """x moved k ulps (k may be negative) along the float32 line (finite, positive x)."""
    return F.from_bits(F.bits(x) + k)


@kernel
def softmax() -> Launch:
    r = Rng(701)
    rows, cols = 8, 8
    # multiples of 1/64 in [-4, 4]: x - max is exact, so the only approximations are expf's
    x = r.grid_floats(rows * cols, -256, 256, 1 / 64)
    y, worst = [], 0
    for row in range(rows):
        xs = x[row * cols:(row + 1) * cols]
        m = xs[0]
        for v in xs[1:]:
            m = F.fmax(m, v)
        d = [F.sub(v, m) for v in xs]
        assert all(F.exact(di) == F.exact(v) - F.exact(m) for di, v in zip(d, xs, strict=True))
        # exact softmax, correctly rounded
        e_cr = [HP.exp(di) for di in d]
        for c in range(cols):
            lo_e = [_ulp_step(e, -DOC_ULP) for e in e_cr]
            hi_e = [_ulp_step(e, DOC_ULP) for e in e_cr]
            # the kernel's own float32 ops are monotone: bound its output given expf's 2-ulp error
            y_lo = F.div(lo_e[c], _f32_sum(hi_e))
            y_hi = F.div(hi_e[c], _f32_sum(lo_e))
            exact_y = _softmax_exact(d, c)
            target = F.round_f32(exact_y)
            worst = max(worst, F.ulp_distance(y_lo, target), F.ulp_distance(y_hi, target))
            y.append(target)
    assert worst <= 8, worst
    return Launch("softmax", 1, [rows, 1, 1],
                  [buf("x", "f32", x), buf("y", "f32", [0] * (rows * cols)), val("cols", "i32", cols)],
                  ["y"], {"y": y}, tolerance_ulp=worst,
                  description=f"row softmax with expf (ex2.approx inside); expected is the exact softmax "
                              f"rounded; tolerance {worst} ulp = the kernel's float ops bounded with expf "
                              f"at its documented 2 ulp")


def _softmax_exact(d, c) -> Fraction:
    """exp(d_c) / sum_j exp(d_j) to far more than float32 precision (exact to ~2^-150)."""
    p = 200
    los, his = zip(*(HP.exp_interval(F.exact(di), p) for di in d), strict=True)
    lo = los[c] / sum(his, Fraction(0))
    hi = his[c] / sum(los, Fraction(0))
    a, b = F.round_f32(lo), F.round_f32(hi)
    assert F.bits(a) == F.bits(b)
    return (lo + hi) / 2


@kernel
def layernorm() -> Launch:
    r = Rng(702)
    rows, cols = 4, 8
    x = r.floats(rows * cols, -3, 3)
    gamma = r.floats(cols, 0.5, 1.5)
    beta = r.floats(cols, -0.5, 0.5)
    eps = np.float32(1e-5)
    n = F.from_int(cols)
    y = []
    for row in range(rows):
        xs = x[row * cols:(row + 1) * cols]
        s = np.float32(0.0)
        for v in xs:
            s = F.add(s, v)
        mean = F.div(s, n)
        sq = np.float32(0.0)
        for v in xs:
            dv = F.sub(v, mean)
            sq = F.fma(dv, dv, sq)
        var = F.div(sq, n)
        denom = F.sqrt(F.add(var, eps))
        for c in range(cols):
            q = F.div(F.sub(xs[c], mean), denom)
            y.append(F.fma(q, gamma[c], beta[c]))
    return Launch("layernorm", 1, [rows, 1, 1],
                  [buf("x", "f32", x), buf("gamma", "f32", gamma), buf("beta", "f32", beta),
                   buf("y", "f32", [0] * (rows * cols)), val("cols", "i32", cols), val("eps", "f32", eps)],
                  ["y"], {"y": y},
                  description="layer norm of 4 rows x 8 with only exact ops: sequential sums, fma for "
                              "squares, div.rn, sqrt.rn, fma for the affine output")


@kernel
def rsqrt_norm() -> Launch:
    r = Rng(703)
    xs = [np.float32(v) for v in (1.0, 4.0, 2.0, 0.25, 3.0, 1e-30, 1e30, 0.1)] + [F.FLT_MAX,
                                                                                    F.from_bits(0x00800000)]
    xs += r.floats(22, 0.001, 1000)
    n = len(xs)
    return Launch("rsqrt_norm", 1, [n, 1, 1],
                  [buf("x", "f32", xs), buf("y", "f32", [0] * n)], ["y"],
                  {"y": [HP.rsqrt(v) for v in xs]}, tolerance_ulp=DOC_ULP,
                  description="rsqrtf = rsqrt.approx.f32; expected 1/sqrt(x) correctly rounded, "
                              "tolerance = the documented 2 ulp")


@kernel
def tanh_approx() -> Launch:
    r = Rng(704)
    xs = [np.float32(v) for v in (0.0, -0.0, 0.5, -0.5, 0.6, 0.59999996, 1.0, -1.0, 3.0, 9.0, 9.1, -10.0,
                                  1e-3, -2e-6)]
    xs += r.floats(18, -5, 5)
    n = len(xs)
    return Launch("tanh_approx", 1, [n, 1, 1],
                  [buf("x", "f32", xs), buf("y", "f32", [0] * n)], ["y"],
                  {"y": [HP.tanh(v) for v in xs]}, tolerance_ulp=DOC_ULP,
                  description="tanhf (ex2.approx.ftz and rcp.approx.ftz inside); expected tanh(x) correctly "
                              "rounded, tolerance = the documented 2 ulp")


@kernel
def fast_intrinsics() -> Launch:
    r = Rng(705)
    a = [np.float32(v) for v in (1.0, 2.0, -3.0, 10.0, 1e20, 7.0)] + r.floats(18, -100, 100)
    b = [np.float32(v) for v in (3.0, 0.5, 7.0, -0.1, 2.5, 1.0)] + r.floats(18, -20, 20)
    b = [v if abs(float(v)) > 0.01 else np.float32(0.5) for v in b]
    n = len(a)
    return Launch("fast_intrinsics", 1, [n, 1, 1],
                  [buf("a", "f32", a), buf("b", "f32", b), buf("q", "f32", [0] * n),
                   buf("e", "f32", [0] * n)],
                  ["q", "e"],
                  {"q": [F.div(x, y) for x, y in zip(a, b, strict=True)], "e": [HP.exp2(y) for y in b]},
                  tolerance_ulp=DOC_ULP,
                  description="__fdividef (div.approx.f32) and exp2f (ex2.approx.f32); expected exact values "
                              "correctly rounded, tolerance = the documented 2 ulp")


@kernel
def sin_cos() -> Launch:
    r = Rng(706)
    xs = [np.float32(v) for v in (0.0, -0.0, 0.5, 1.0, -1.0, 3.1415927, 1.5707964, 100.0, -1000.5,
                                  105614.0, 105616.0, 1e6, -3.0e7, 1e30, -2.5e38, 1e-20)]
    xs += r.floats(16, -50, 50)
    n = len(xs)
    return Launch("sin_cos", 1, [n, 1, 1],
                  [buf("x", "f32", xs), buf("s", "f32", [0] * n), buf("c", "f32", [0] * n)],
                  ["s", "c"], {"s": [HP.sin(v) for v in xs], "c": [HP.cos(v) for v in xs]},
                  tolerance_ulp=DOC_ULP,
                  description="sinf/cosf incl. Payne-Hanek arguments (>= 105615); expected correctly rounded "
                              "sin/cos, tolerance = the documented 2 ulp")
