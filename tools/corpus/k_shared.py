"""Shared memory, barriers, multi-warp blocks, 2-D launches: reductions, scans, transposes, matmul."""

from __future__ import annotations

import numpy as np

from . import f32 as F
from .ints import Rng, s32, u32
from .spec import Launch, Registry, buf, val

kernel = Registry()


@kernel
def smem_reduce() -> Launch:
    r = Rng(401)
    blocks, bs = 2, 64
    inp = r.floats(blocks * bs, -10, 10)
    inp[5] = np.float32(1e30)
    inp[70] = np.float32(1e-7)
    out = []
    for b in range(blocks):
        s = list(inp[b * bs:(b + 1) * bs])
        stride = bs // 2
        while stride > 0:
            for t in range(stride):
                s[t] = F.add(s[t], s[t + stride])
            stride //= 2
        out.append(s[0])
    return Launch("smem_reduce", blocks, [bs, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * blocks)], ["out"], {"out": out},
                  description="shared-memory tree reduction of 64 floats per block (2 warps, strides 32..1)")


@kernel
def scan_hillis_steele() -> Launch:
    r = Rng(402)
    n = 64
    inp = r.floats(n, -5, 5)
    x = list(inp)
    d = 1
    while d < n:
        x = [F.add(x[t - d], x[t]) if t >= d else x[t] for t in range(n)]
        d *= 2
    return Launch("scan_hillis_steele", 1, [n, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * n)], ["out"], {"out": x},
                  description="Hillis-Steele inclusive float scan of 64 elements, "
                              "double-buffered shared memory")


@kernel
def scan_blelloch() -> Launch:
    r = Rng(403)
    n = 64
    inp = r.floats(n, -5, 5)
    s = list(inp)
    offset = 1
    d = n >> 1
    while d > 0:
        for t in range(d):
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            s[bi] = F.add(s[bi], s[ai])
        offset <<= 1
        d >>= 1
    total = s[n - 1]
    s[n - 1] = np.float32(0.0)
    d = 1
    while d < n:
        offset >>= 1
        for t in range(d):
            ai = offset * (2 * t + 1) - 1
            bi = offset * (2 * t + 2) - 1
            tmp = s[ai]
            s[ai] = s[bi]
            s[bi] = F.add(s[bi], tmp)
        d <<= 1
    return Launch("scan_blelloch", 1, [32, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * n), buf("total", "f32", [0])],
                  ["out", "total"], {"out": s, "total": [total]},
                  description="Blelloch exclusive scan of 64 floats with 32 threads (up-sweep, down-sweep)")


@kernel
def dyn_smem_reverse() -> Launch:
    r = Rng(404)
    blocks, bs = 3, 16
    inp = r.ints(blocks * bs, -100000, 100000)
    out = []
    for b in range(blocks):
        for t in range(bs):
            out.append(s32(inp[b * bs + bs - 1 - t] * 10 + t))
    return Launch("dyn_smem_reverse", blocks, [bs, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * (blocks * bs))], ["out"], {"out": out},
                  shared_bytes=bs * 4,
                  description="extern __shared__ (64 bytes from the launch): reverse each block's slice")


@kernel
def smem_transpose() -> Launch:
    r = Rng(405)
    w = 16
    inp = r.floats(w * w, -100, 100)
    inp[3] = F.from_bits(0x7FC0BEEF)   # NaN payloads are moved, not computed: they pass unchanged
    inp[40] = F.from_bits(0xFFFFFFFF)
    inp[77] = np.float32(-0.0)
    # out[row][col] = in[col][row]
    out = [inp[col * w + row] for row in range(w) for col in range(w)]
    return Launch("smem_transpose", [2, 2, 1], [8, 8, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * (w * w)), val("width", "i32", w)],
                  ["out"], {"out": out},
                  description="16x16 transpose through a padded 8x9 shared tile: 2x2 grid of 8x8 blocks")


@kernel
def matmul() -> Launch:
    r = Rng(406)
    M, N, K = 6, 10, 5
    A = r.floats(M * K, -2, 2)
    B = r.floats(K * N, -2, 2)
    C = []
    for row in range(M):
        for col in range(N):
            acc = np.float32(0.0)
            for k in range(K):
                acc = F.fma(A[row * K + k], B[k * N + col], acc)
            C.append(acc)
    return Launch("matmul", [2, 2, 1], [8, 4, 1],
                  [buf("A", "f32", A), buf("B", "f32", B), buf("C", "f32", [0] * (M * N)),
                   val("M", "i32", M), val("N", "i32", N), val("K", "i32", K)],
                  ["C"], {"C": C},
                  description="6x5 @ 5x10 matmul on a 2x2 grid of 8x4 blocks; acc = fma(a, b, "
                              "acc) in k order")


@kernel
def transpose_2d() -> Launch:
    r = Rng(407)
    rows, cols = 5, 7
    inp = r.ints(rows * cols, -1000, 1000)
    out = [0] * (rows * cols)
    for y in range(rows):
        for x in range(cols):
            out[x * rows + y] = inp[y * cols + x]
    return Launch("transpose_2d", [2, 2, 1], [4, 4, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * (rows * cols)),
                   val("rows", "i32", rows), val("cols", "i32", cols)],
                  ["out"], {"out": out},
                  description="naive 5x7 transpose on a 2x2 grid of 4x4 blocks; threads outside return")


@kernel
def block_reduce_atomic() -> Launch:
    r = Rng(408)
    blocks = 4
    inp = r.ints(blocks * 32, -10**7, 10**7)
    partial = [s32(sum(inp[b * 32:(b + 1) * 32])) for b in range(blocks)]
    total = s32(5 + sum(partial))
    return Launch("block_reduce_atomic", blocks, [32, 1, 1],
                  [buf("in", "i32", inp), buf("partial", "i32", [0] * blocks), buf("total", "i32", [5])],
                  ["partial", "total"], {"partial": partial, "total": [total]},
                  description="per-block shared-memory int reduction, then atomicAdd of each block's sum")


@kernel
def stencil_1d() -> Launch:
    r = Rng(409)
    n, bs = 64, 32
    inp = r.floats(n, -10, 10)

    def at(i: int) -> np.float32:
        return inp[i] if 0 <= i < n else np.float32(0.0)

    out = []
    q, h = np.float32(0.25), np.float32(0.5)
    for g in range(n):
        left = F.mul(q, at(g - 1))
        out.append(F.fma(q, at(g + 1), F.fma(h, at(g), left)))
    return Launch("stencil_1d", n // bs, [bs, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * n), val("n", "i32", n)],
                  ["out"], {"out": out},
                  description="3-point stencil with a shared-memory halo across 2 blocks")


@kernel
def smem_histogram() -> Launch:
    r = Rng(410)
    blocks, bs = 2, 32
    data = r.bits(blocks * bs)
    hist0 = list(range(100, 116))
    hist = list(hist0)
    for v in data:
        hist[v % 16] = u32(hist[v % 16] + 1)
    return Launch("smem_histogram", blocks, [bs, 1, 1],
                  [buf("data", "u32", data), buf("hist", "u32", hist0)], ["hist"], {"hist": hist},
                  description="shared-memory atomicAdd histogram per block, merged with global atomicAdd")
