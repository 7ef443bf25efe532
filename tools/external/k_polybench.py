"""PolyBench/GPU kernels (cavazos-lab/PolyBench-ACC, CUDA): expected outputs from each kernel's loop
nest, every float operation rounded as the kernel's PTX performs it (NVRTC contracts a*b+c into fma
by default, as nvcc does; each builder names the form it models)."""

from __future__ import annotations

import numpy as np
from corpus import f32 as F
from corpus.ints import Rng
from corpus.spec import Launch, Registry, buf, val

from .common import decimal_f32, double_literal_to_f32, f64_fma, f64_mul

kernel = Registry()
ZERO = np.float32(0.0)


@kernel
def polybench_atax1() -> Launch:
    r = Rng(3001)
    nx, ny = 12, 8
    a = r.floats(nx * ny, -1, 1)
    x = r.floats(ny, -1, 1)
    tmp = []
    for i in range(nx):
        acc = ZERO  # tmp[i] = 0; tmp[i] += A*x: fma.rn.f32 per j
        for j in range(ny):
            acc = F.fma(a[i * ny + j], x[j], acc)
        tmp.append(acc)
    tmp += [np.float32(-9.0)] * 4
    return Launch(
        "atax_kernel1",
        1,
        [16, 1, 1],
        [
            val("nx", "i32", nx),
            val("ny", "i32", ny),
            buf("A", "f32", a),
            buf("x", "f32", x),
            buf("tmp", "f32", [-9.0] * 16),
        ],
        ["tmp"],
        {"tmp": tmp},
        description="tmp = A x for a 12 x 8 matrix (one row per thread, fma chain)",
    )


@kernel
def polybench_bicg1() -> Launch:
    r = Rng(3002)
    nx, ny = 8, 12
    a = r.floats(nx * ny, -1, 1)
    rv = r.floats(nx, -1, 1)
    s = []
    for j in range(ny):
        acc = ZERO
        for i in range(nx):
            acc = F.fma(rv[i], a[i * ny + j], acc)
        s.append(acc)
    s += [np.float32(-9.0)] * 4
    return Launch(
        "bicg_kernel1",
        1,
        [16, 1, 1],
        [
            val("nx", "i32", nx),
            val("ny", "i32", ny),
            buf("A", "f32", a),
            buf("r", "f32", rv),
            buf("s", "f32", [-9.0] * 16),
        ],
        ["s"],
        {"s": s},
        description="s = A^T r for an 8 x 12 matrix (one column per thread, fma chain)",
    )


@kernel
def polybench_gesummv() -> Launch:
    r = Rng(3003)
    n = 8
    alpha, beta = np.float32(43532), np.float32(12313)
    a = r.floats(n * n, -1, 1)
    b = r.floats(n * n, -1, 1)
    x = r.floats(n, -1, 1)
    tmp0 = r.floats(n, -1, 1)  # the kernel accumulates onto whatever tmp and y hold
    y0 = r.floats(n, -1, 1)
    tmp, y = list(tmp0), list(y0)
    for i in range(n):
        for j in range(n):
            tmp[i] = F.fma(a[i * n + j], x[j], tmp[i])
            y[i] = F.fma(b[i * n + j], x[j], y[i])
        y[i] = F.fma(alpha, tmp[i], F.mul(beta, y[i]))  # PTX: mul.f32 beta*y, then fma alpha*tmp + that
    return Launch(
        "gesummv_kernel",
        1,
        [16, 1, 1],
        [
            val("n", "i32", n),
            val("alpha", "f32", alpha),
            val("beta", "f32", beta),
            buf("A", "f32", a),
            buf("B", "f32", b),
            buf("tmp", "f32", tmp0),
            buf("x", "f32", x),
            buf("y", "f32", y0),
        ],
        ["tmp", "y"],
        {"tmp": tmp, "y": y},
        description="y = alpha A x + beta B x (n = 8), fma chains and one fma/mul combination",
    )


@kernel
def polybench_gesummv_f64() -> Launch:
    r = Rng(3004)
    n, threads = 4, 8
    alpha, beta = 43532.0, 12313.0

    def d(k: int) -> list[float]:
        return [float(np.float64(r.r.uniform(-1, 1))) for _ in range(k)]

    a, b, x, tmp0, y0 = d(n * n), d(n * n), d(n), d(n), d(n)
    tmp, y = list(tmp0), list(y0)
    for i in range(n):
        for j in range(n):
            tmp[i] = f64_fma(a[i * n + j], x[j], tmp[i])
            y[i] = f64_fma(b[i * n + j], x[j], y[i])
        y[i] = f64_fma(alpha, tmp[i], f64_mul(beta, y[i]))  # PTX: mul.f64, then fma.rn.f64
    return Launch(
        "gesummv_kernel_f64",
        1,
        [threads, 1, 1],
        [
            val("n", "i32", n),
            val("alpha", "f64", alpha),
            val("beta", "f64", beta),
            buf("A", "f64", a),
            buf("B", "f64", b),
            buf("tmp", "f64", tmp0),
            buf("x", "f64", x),
            buf("y", "f64", y0),
        ],
        ["tmp", "y"],
        {"tmp": tmp, "y": y},
        description="gesummv in float64 (n = 4): fma.rn.f64 chains",
    )


@kernel
def polybench_mvt2() -> Launch:
    r = Rng(3005)
    n = 10
    a = r.floats(n * n, -1, 1)
    y2 = r.floats(n, -1, 1)
    x20 = r.floats(n, -1, 1)
    x2 = list(x20)
    for i in range(n):
        for j in range(n):
            x2[i] = F.fma(a[j * n + i], y2[j], x2[i])
    return Launch(
        "mvt_kernel2",
        1,
        [16, 1, 1],
        [val("n", "i32", n), buf("a", "f32", a), buf("x2", "f32", x20), buf("y_2", "f32", y2)],
        ["x2"],
        {"x2": x2},
        description="x2 += A^T y_2 (n = 10), column access per thread",
    )


def _gemm_like(c0, beta, alpha, terms) -> np.float32:
    """c *= beta; c += alpha * p * q for each (p, q): PTX mul (c*beta), mul (alpha*p), fma (.. * q + c)."""
    c = F.mul(c0, beta)
    for p, q in terms:
        c = F.fma(F.mul(alpha, p), q, c)
    return c


@kernel
def polybench_gemm() -> Launch:
    r = Rng(3006)
    ni, nj, nk = 4, 6, 4
    alpha, beta = np.float32(32412), np.float32(2123)
    a = r.floats(ni * nk, -1, 1)
    b = r.floats(nk * nj, -1, 1)
    c0 = r.floats(ni * nj, -1, 1)
    c = [
        _gemm_like(c0[i * nj + j], beta, alpha, [(a[i * nk + k], b[k * nj + j]) for k in range(nk)])
        for i in range(ni)
        for j in range(nj)
    ]
    return Launch(
        "gemm_kernel",
        [2, 1, 1],
        [4, 4, 1],
        [
            val("ni", "i32", ni),
            val("nj", "i32", nj),
            val("nk", "i32", nk),
            val("alpha", "f32", alpha),
            val("beta", "f32", beta),
            buf("a", "f32", a),
            buf("b", "f32", b),
            buf("c", "f32", c0),
        ],
        ["c"],
        {"c": c},
        description="C = alpha A B + beta C (4 x 6 x 4), 2-D grid of 4 x 4 blocks",
    )


@kernel
def polybench_syrk() -> Launch:
    r = Rng(3007)
    ni, nj = 4, 4
    alpha, beta = np.float32(32412), np.float32(2123)
    a = r.floats(ni * nj, -1, 1)
    c0 = r.floats(ni * ni, -1, 1)
    c = [
        _gemm_like(c0[i * ni + j], beta, alpha, [(a[i * nj + k], a[j * nj + k]) for k in range(nj)])
        for i in range(ni)
        for j in range(ni)
    ]
    return Launch(
        "syrk_kernel",
        [1, 2, 1],
        [4, 3, 1],
        [
            val("ni", "i32", ni),
            val("nj", "i32", nj),
            val("alpha", "f32", alpha),
            val("beta", "f32", beta),
            buf("a", "f32", a),
            buf("c", "f32", c0),
        ],
        ["c"],
        {"c": c},
        description="C = alpha A A^T + beta C (4 x 4), 2-D grid of 4 x 3 blocks",
    )


@kernel
def polybench_jacobi1d() -> Launch:
    r = Rng(3008)
    n = 40
    a = r.floats(n, -10, 10)
    b0 = r.floats(n, -10, 10)
    third = decimal_f32("0.33333")
    assert F.bits(third) == 0x3EAAAA3B
    b = list(b0)
    for i in range(2, n - 1):
        b[i] = F.mul(third, F.add(F.add(a[i - 1], a[i]), a[i + 1]))
    return Launch(
        "jacobi1d_kernel1",
        3,
        [16, 1, 1],
        [val("n", "i32", n), buf("A", "f32", a), buf("B", "f32", b0)],
        ["B"],
        {"B": b},
        description="B[i] = 0.33333f * (A[i-1] + A[i] + A[i+1]) for 1 < i < N-1",
    )


@kernel
def polybench_jacobi2d() -> Launch:
    r = Rng(3009)
    n = 6
    a = r.floats(n * n, -10, 10)
    b0 = r.floats(n * n, -10, 10)
    fifth = decimal_f32("0.2")
    b = list(b0)
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            s = F.add(a[i * n + j], a[i * n + j - 1])
            s = F.add(s, a[i * n + j + 1])
            s = F.add(s, a[(i + 1) * n + j])
            s = F.add(s, a[(i - 1) * n + j])
            b[i * n + j] = F.mul(fifth, s)
    return Launch(
        "jacobi2d_kernel1",
        [2, 2, 1],
        [4, 4, 1],
        [val("n", "i32", n), buf("A", "f32", a), buf("B", "f32", b0)],
        ["B"],
        {"B": b},
        description="five-point Jacobi stencil on a 6 x 6 grid, 2-D grid of 4 x 4 blocks",
    )


@kernel
def polybench_conv2d() -> Launch:
    r = Rng(3010)
    ni, nj = 5, 6
    a = r.floats(ni * nj, -10, 10)
    c = {
        k: double_literal_to_f32(v)
        for k, v in {
            "c11": "0.2",
            "c21": "0.5",
            "c31": "-0.8",
            "c12": "-0.3",
            "c22": "0.6",
            "c32": "-0.9",
            "c13": "0.4",
            "c23": "0.7",
            "c33": "0.10",
        }.items()
    }
    b = [np.float32(-9.0)] * (ni * nj)
    for i in range(1, ni - 1):
        for j in range(1, nj - 1):

            def at(di: int, dj: int, i: int = i, j: int = j) -> np.float32:
                return a[(i + di) * nj + (j + dj)]

            # PTX: c21 * A[i-1][j] first (mul), then one fma per remaining term in source order
            acc = F.mul(c["c21"], at(-1, 0))
            acc = F.fma(c["c11"], at(-1, -1), acc)
            for name, di, dj in (
                ("c31", -1, 1),
                ("c12", 0, -1),
                ("c22", 0, 0),
                ("c32", 0, 1),
                ("c13", 1, -1),
                ("c23", 1, 0),
                ("c33", 1, 1),
            ):
                acc = F.fma(c[name], at(di, dj), acc)
            b[i * nj + j] = acc
    return Launch(
        "convolution2D_kernel",
        [2, 1, 1],
        [4, 5, 1],
        [val("ni", "i32", ni), val("nj", "i32", nj), buf("A", "f32", a), buf("B", "f32", [-9.0] * (ni * nj))],
        ["B"],
        {"B": b},
        description="3 x 3 convolution of a 5 x 6 grid (9 coefficients), 2-D grid",
    )


@kernel
def polybench_fdtd2d_step3() -> Launch:
    r = Rng(3011)
    nx, ny = 6, 10
    ex = r.floats(nx * ny, -1, 1)
    ey = r.floats(nx * ny, -1, 1)
    hz0 = r.floats(nx * ny, -1, 1)
    c = decimal_f32("0.7")
    hz = list(hz0)
    for i in range(nx - 1):
        for j in range(ny - 1):
            s = F.sub(ex[i * ny + j + 1], ex[i * ny + j])
            s = F.add(s, ey[(i + 1) * ny + j])
            s = F.sub(s, ey[i * ny + j])
            hz[i * ny + j] = F.fma(F.neg(c), s, hz0[i * ny + j])  # PTX: fma(s, -0.7f, hz)
    return Launch(
        "fdtd_step3_kernel",
        [2, 1, 1],
        [8, 8, 1],
        [
            val("nx", "i32", nx),
            val("ny", "i32", ny),
            buf("ex", "f32", ex),
            buf("ey", "f32", ey),
            buf("hz", "f32", hz0),
            val("t", "i32", 0),
        ],
        ["hz"],
        {"hz": hz},
        description="FDTD magnetic-field update hz -= 0.7 (dex + dey) on a 6 x 10 grid, 2-D grid",
    )
