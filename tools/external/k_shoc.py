"""SHOC kernels (vetter/shoc): expected outputs from each kernel's meaning."""

from __future__ import annotations

import numpy as np
from corpus import f32 as F
from corpus.ints import Rng
from corpus.spec import Launch, Registry, buf, val

kernel = Registry()


@kernel
def shoc_triad() -> Launch:
    r = Rng(4001)
    n = 48
    a = r.floats(n, -100, 100)
    b = r.floats(n, -100, 100)
    s = np.float32(1.75)
    c = [F.fma(s, b[i], a[i]) for i in range(n)]  # A + s*B: fma.rn.f32 in the PTX
    return Launch(
        "triad",
        3,
        [16, 1, 1],
        [buf("A", "f32", a), buf("B", "f32", b), buf("C", "f32", [0] * n), val("s", "f32", s)],
        ["C"],
        {"C": c},
        description="STREAM triad C = A + s B (48 floats, 3 blocks)",
    )


def _csr(r: Rng, row_lengths: list[int], ncols: int) -> tuple[list[int], list[int], list[np.float32]]:
    delim, cols, vals = [0], [], []
    for length in row_lengths:
        cols += sorted(r.ints(length, 0, ncols - 1))
        vals += r.floats(length, -2, 2)
        delim.append(len(cols))
    return delim, cols, vals


@kernel
def shoc_spmv_csr_scalar() -> Launch:
    r = Rng(4002)
    dim = 12
    lengths = [3, 0, 7, 1, 5, 2, 6, 4, 0, 3, 5, 4]
    delim, cols, vals = _csr(r, lengths, dim)
    vec = r.floats(dim, -2, 2)
    out = []
    for row in range(dim):
        t = np.float32(0.0)
        for j in range(delim[row], delim[row + 1]):
            t = F.fma(vals[j], vec[cols[j]], t)
        out.append(t)
    return Launch(
        "spmv_csr_scalar_float",
        1,
        [16, 1, 1],
        [
            buf("val", "f32", vals),
            buf("cols", "i32", cols),
            buf("rowDelimiters", "i32", delim),
            val("dim", "i32", dim),
            buf("out", "f32", [-9.0] * dim),
            buf("vec", "f32", vec),
        ],
        ["out"],
        {"out": out},
        description="CSR sparse matrix-vector product, one row per thread",
    )


@kernel
def shoc_spmv_csr_vector() -> Launch:
    r = Rng(4003)
    dim, ncols = 4, 48
    lengths = [3, 33, 0, 20]
    delim, cols, vals = _csr(r, lengths, ncols)
    vec = r.floats(ncols, -2, 2)
    out = []
    for row in range(dim):
        lanes = []
        for lane in range(32):
            s = np.float32(0.0)
            j = delim[row] + lane
            while j < delim[row + 1]:
                s = F.fma(vals[j], vec[cols[j]], s)
                j += 32
            lanes.append(s)
        for half in (16, 8, 4, 2, 1):  # partialSums[t] += partialSums[t + half] for id < half
            for lane in range(half):
                lanes[lane] = F.add(lanes[lane], lanes[lane + half])
        out.append(lanes[0])
    return Launch(
        "spmv_csr_vector_float",
        2,
        [64, 1, 1],
        [
            buf("val", "f32", vals),
            buf("cols", "i32", cols),
            buf("rowDelimiters", "i32", delim),
            val("dim", "i32", dim),
            buf("out", "f32", [-9.0] * dim),
            buf("vec", "f32", vec),
        ],
        ["out"],
        {"out": out},
        description="CSR SpMV, one warp per row: strided fma sums, then a warp-synchronous shared tree",
    )
