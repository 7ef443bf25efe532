"""NVIDIA cuda-samples kernels: expected outputs from each sample's meaning (exact float32 / float64
rounding in the order the kernel's PTX performs the operations; integers wrap as in C)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from corpus import f32 as F
from corpus.ints import Rng, s32, u32
from corpus.spec import Launch, Registry, buf, val

from .common import decimal_f32, f64_add, shfl_down

kernel = Registry()


@kernel
def vector_add() -> Launch:
    r = Rng(1001)
    n = 50
    a = r.floats(n, -50, 50)
    b = r.floats(n, -1, 1)
    a[0], b[0] = np.float32(-0.0), np.float32(-0.0)  # -0 + -0 = -0, then + 0.0f = +0
    a[1], b[1] = F.FLT_MAX, F.FLT_MAX  # overflow to inf
    a[2], b[2] = np.float32(1.0), F.from_bits(0x33800000)  # 1 + 2^-24: a tie, stays 1
    c = [np.float32(7.0)] * n
    exp = [F.add(F.add(a[i], b[i]), np.float32(0.0)) for i in range(n)]
    return Launch(
        "vectorAdd",
        4,
        [16, 1, 1],
        [buf("A", "f32", a), buf("B", "f32", b), buf("C", "f32", c), val("numElements", "i32", n)],
        ["C"],
        {"C": exp},
        description="C[i] = A[i] + B[i] + 0.0f for i < 50 (4 blocks of 16)",
    )


@kernel
def simple_templates_f32() -> Launch:
    r = Rng(1002)
    n = 32
    x = r.floats(n, -1e3, 1e3)
    x[0] = F.FLT_MAX  # 32 * FLT_MAX overflows
    x[1] = F.from_bits(0x00000001)  # a subnormal, scaled exactly
    scale = F.from_int(n)
    return Launch(
        "testKernel_float",
        1,
        [n, 1, 1],
        [buf("g_idata", "f32", x), buf("g_odata", "f32", [0] * n)],
        ["g_odata"],
        {"g_odata": [F.mul(scale, v) for v in x]},
        shared_bytes=4 * n,
        description="g_odata[tid] = (float)blockDim.x * g_idata[tid] through dynamic shared memory",
    )


@kernel
def simple_templates_i32() -> Launch:
    r = Rng(1003)
    n = 32
    x = r.ints(n, -(1 << 31), (1 << 31) - 1)
    return Launch(
        "testKernel_int",
        1,
        [n, 1, 1],
        [buf("g_idata", "i32", x), buf("g_odata", "i32", [0] * n)],
        ["g_odata"],
        {"g_odata": [s32(n * v) for v in x]},
        shared_bytes=4 * n,
        description="g_odata[tid] = (int)blockDim.x * g_idata[tid] (wrapping) through dynamic shared memory",
    )


def _block_input(data: list, blocks: int, bs: int, zero) -> list[list]:
    """Each block's shared array after sdata[tid] = (i < n) ? g_idata[i] : 0."""
    n = len(data)
    return [[data[b * bs + t] if b * bs + t < n else zero for t in range(bs)] for b in range(blocks)]


@kernel
def reduce0_int() -> Launch:
    r = Rng(1004)
    n, blocks, bs = 60, 2, 32
    x = r.ints(n, -(1 << 31), (1 << 31) - 1)
    out = []
    for s in _block_input(x, blocks, bs, 0):
        step = 1
        while step < bs:
            for tid in range(bs):
                if tid % (2 * step) == 0:
                    s[tid] = s32(s[tid] + s[tid + step])
            step *= 2
        out.append(s[0])
    return Launch(
        "reduce0_int",
        blocks,
        [bs, 1, 1],
        [buf("g_idata", "i32", x), buf("g_odata", "i32", [0] * blocks), val("n", "u32", n)],
        ["g_odata"],
        {"g_odata": out},
        shared_bytes=4 * bs,
        description="interleaved-addressing tree sum per block (wrapping int), last block partial",
    )


@kernel
def reduce2_f32() -> Launch:
    r = Rng(1005)
    n, blocks, bs = 40, 2, 32
    x = r.floats(n, -100, 100)
    x[3] = np.float32(3e7)  # large terms make the tree order matter
    x[20] = np.float32(-3e7)
    out = []
    for s in _block_input(x, blocks, bs, np.float32(0.0)):
        step = bs // 2
        while step > 0:
            for tid in range(step):
                s[tid] = F.add(s[tid], s[tid + step])
            step //= 2
        out.append(s[0])
    return Launch(
        "reduce2_float",
        blocks,
        [bs, 1, 1],
        [buf("g_idata", "f32", x), buf("g_odata", "f32", [0] * blocks), val("n", "u32", n)],
        ["g_odata"],
        {"g_odata": out},
        shared_bytes=4 * bs,
        description="sequential-addressing float tree sum per block (strides 16..1), last block partial",
    )


@kernel
def reduce4_int() -> Launch:
    r = Rng(1006)
    n, blocks, bs = 200, 2, 64
    x = r.ints(n, -(1 << 31), (1 << 31) - 1)
    out = []
    for b in range(blocks):
        my = []
        for tid in range(bs):
            i = b * 2 * bs + tid
            v = x[i] if i < n else 0
            if i + bs < n:
                v = s32(v + x[i + bs])
            my.append(v)
        lanes = [s32(my[t] + my[t + 32]) for t in range(32)]  # blockSize >= 64: add the 2nd warp's sums
        off = 16
        while off > 0:
            lanes = [s32(a + b_) for a, b_ in zip(lanes, shfl_down(lanes, off), strict=True)]
            off //= 2
        out.append(lanes[0])
    return Launch(
        "reduce4_int_64",
        blocks,
        [bs, 1, 1],
        [buf("g_idata", "i32", x), buf("g_odata", "i32", [0] * blocks), val("n", "u32", n)],
        ["g_odata"],
        {"g_odata": out},
        shared_bytes=4 * bs,
        description="two elements per thread, then __shfl_down_sync over warpSize (wrapping int)",
    )


@kernel
def reduce6_f64() -> Launch:
    r = Rng(1007)
    n, bs = 40, 32
    x = [float(np.float64(r.r.uniform(-1, 1)) * 2.0 ** r.int(-30, 30)) for _ in range(n)]
    lanes = []
    for tid in range(bs):
        acc = 0.0
        i = tid
        while i < n:
            acc = f64_add(acc, x[i])
            i += bs
        lanes.append(acc)
    off = 16
    while off > 0:
        lanes = [f64_add(a, b) for a, b in zip(lanes, shfl_down(lanes, off), strict=True)]
        off //= 2
    return Launch(
        "reduce6_double_32",
        1,
        [bs, 1, 1],
        [buf("g_idata", "f64", x), buf("g_odata", "f64", [0.0]), val("n", "u32", n)],
        ["g_odata"],
        {"g_odata": [lanes[0]]},
        shared_bytes=8 * bs,
        description="float64 grid-stride sums, then a float64 __shfl_down_sync tree (blockSize 32)",
    )


@kernel
def shfl_scan() -> Launch:
    r = Rng(1008)
    blocks, bs = 2, 64
    x = r.ints(blocks * bs, -1000, 1000)
    x[7] = (1 << 31) - 1  # the scan wraps past INT_MAX
    data, partial = [], []
    for b in range(blocks):
        acc = 0
        for t in range(bs):
            acc = s32(acc + x[b * bs + t])
            data.append(acc)
        partial.append(acc)
    return Launch(
        "shfl_scan_test",
        blocks,
        [bs, 1, 1],
        [buf("data", "i32", x), val("width", "i32", 32), buf("partial_sums", "i32", [0] * blocks)],
        ["data", "partial_sums"],
        {"data": data, "partial_sums": partial},
        shared_bytes=4 * (bs // 32),
        description="inclusive prefix sum per 64-thread block: __shfl_up_sync per warp, then over warp sums",
    )


def _bitonic_shared(keys: list[int], vals: list[int], dir_: int) -> tuple[list[int], list[int]]:
    """bitonicSortShared on one 64-element block, comparator by comparator (threads of a stage touch
    disjoint pairs, so their order inside a stage does not matter)."""
    k, v = list(keys), list(vals)
    n = len(k)
    nthreads = n // 2

    def comparator(a: int, b: int, d: int) -> None:
        if (k[a] > k[b]) == bool(d):
            k[a], k[b] = k[b], k[a]
            v[a], v[b] = v[b], v[a]

    size = 2
    while size < n:
        for stride in _strides(size // 2):
            for t in range(nthreads):
                ddd = dir_ ^ (1 if (t & (size // 2)) != 0 else 0)
                pos = 2 * t - (t & (stride - 1))
                comparator(pos, pos + stride, ddd)
        size <<= 1
    for stride in _strides(n // 2):
        for t in range(nthreads):
            pos = 2 * t - (t & (stride - 1))
            comparator(pos, pos + stride, dir_)
    return k, v


def _strides(start: int) -> list[int]:
    out = []
    while start > 0:
        out.append(start)
        start >>= 1
    return out


@kernel
def bitonic_sort_shared() -> Launch:
    r = Rng(1009)
    n = 64
    keys = r.bits(n)
    keys[10] = keys[40]  # duplicate keys: their values' order is the network's
    keys[3] = keys[50] = keys[60] = 12345
    vals = list(range(n))
    sk, sv = _bitonic_shared(keys, vals, 1)
    assert sk == sorted(keys)
    return Launch(
        "bitonicSortShared",
        1,
        [n // 2, 1, 1],
        [
            buf("d_DstKey", "u32", [0] * n),
            buf("d_DstVal", "u32", [0] * n),
            buf("d_SrcKey", "u32", keys),
            buf("d_SrcVal", "u32", vals),
            val("arrayLength", "u32", n),
            val("dir", "u32", 1),
        ],
        ["d_DstKey", "d_DstVal"],
        {"d_DstKey": sk, "d_DstVal": sv},
        description="bitonic sort of 64 key/value pairs in shared memory by 32 threads (ascending)",
    )


def _transpose(m: list, width: int, height: int) -> list:
    """out (width rows x height columns) with out[x][y] = in[y][x]."""
    return [m[y * width + x] for x in range(width) for y in range(height)]


@kernel
def transpose_naive() -> Launch:
    r = Rng(1010)
    w, h, tile, rows = 16, 8, 8, 4
    m = r.floats(w * h, -10, 10)
    out = [None] * (w * h)
    for by in range(1):
        for bx in range(2):
            for ty in range(rows):
                for tx in range(tile):
                    x, y = bx * tile + tx, by * tile + ty
                    for i in range(0, tile, rows):
                        out[y + h * x + i] = m[x + w * y + i * w]
    assert out == _transpose(m, w, h)
    return Launch(
        "transposeNaive",
        [2, 1, 1],
        [tile, rows, 1],
        [
            buf("odata", "f32", [0] * (w * h)),
            buf("idata", "f32", m),
            val("width", "i32", w),
            val("height", "i32", h),
        ],
        ["odata"],
        {"odata": out},
        description="naive transpose of a 16 x 8 matrix, 2-D grid of 8 x 4 blocks",
    )


@kernel
def transpose_no_bank_conflicts() -> Launch:
    r = Rng(1011)
    w, h, tile = 16, 8, 8
    m = r.floats(w * h, -10, 10)
    return Launch(
        "transposeNoBankConflicts",
        [2, 1, 1],
        [tile, 4, 1],
        [
            buf("odata", "f32", [0] * (w * h)),
            buf("idata", "f32", m),
            val("width", "i32", w),
            val("height", "i32", h),
        ],
        ["odata"],
        {"odata": _transpose(m, w, h)},
        description="shared-tile transpose (tile 8 x 9) of a 16 x 8 matrix, 2-D grid of 8 x 4 blocks",
    )


@kernel
def transpose_diagonal() -> Launch:
    r = Rng(1012)
    w, h, tile, rows = 12, 8, 4, 2
    gx, gy = 3, 2
    m = r.floats(w * h, -10, 10)
    out = [None] * (w * h)
    for by in range(gy):
        for bx in range(gx):
            bid = bx + gx * by
            bdy = bid % gy
            bdx = ((bid // gy) + bdy) % gx
            for ty in range(rows):
                for tx in range(tile):
                    index_in = (bdx * tile + tx) + (bdy * tile + ty) * w
                    index_out = (bdy * tile + tx) + (bdx * tile + ty) * h
                    for i in range(0, tile, rows):
                        # tile[ty + i][tx] = idata[index_in + i*w]; odata[...] = tile[tx][ty + i]
                        src_row, src_col = bdy * tile + tx, bdx * tile + ty + i
                        out[index_out + i * h] = m[src_row * w + src_col]
                        assert index_in + i * w < w * h
    assert out == _transpose(m, w, h)
    return Launch(
        "transposeDiagonal",
        [gx, gy, 1],
        [tile, rows, 1],
        [
            buf("odata", "f32", [0] * (w * h)),
            buf("idata", "f32", m),
            val("width", "i32", w),
            val("height", "i32", h),
        ],
        ["odata"],
        {"odata": out},
        description="diagonal block reordering transpose of a 12 x 8 matrix (non-square path), grid 3 x 2",
    )


@kernel
def matrix_mul() -> Launch:
    r = Rng(1013)
    h, w, n = 4, 4, 8  # C (h x n) = A (h x w) * B (w x n)
    a = r.floats(h * w, -2, 2)
    b = r.floats(w * n, -2, 2)
    c = []
    for row in range(h):
        for col in range(n):
            acc = np.float32(0.0)
            for k in range(w):  # Csub += As[ty][k] * Bs[k][tx]: one fma per k (PTX fma.rn.f32)
                acc = F.fma(a[row * w + k], b[k * n + col], acc)
            c.append(acc)
    return Launch(
        "MatrixMulCUDA_4",
        [2, 1, 1],
        [4, 4, 1],
        [
            buf("C", "f32", [0] * (h * n)),
            buf("A", "f32", a),
            buf("B", "f32", b),
            val("wA", "i32", w),
            val("wB", "i32", n),
        ],
        ["C"],
        {"C": c},
        description="tiled (4 x 4)(4 x 8) matrix product (BLOCK_SIZE 4): each element an fma chain over k",
    )


@kernel
def atomic_intrinsics() -> Launch:
    nthreads = 16
    init = [0] * 11
    init[8] = init[10] = 0xFF
    g = list(init)
    for tid in range(nthreads):  # lane order
        g[0] = s32(g[0] + 10)
        g[1] = s32(g[1] - 10)
        g[2] = tid
        g[3] = max(g[3], tid)
        g[4] = min(g[4], tid)
        old = u32(g[5])
        g[5] = 0 if old >= 17 else old + 1
        old = u32(g[6])
        g[6] = 137 if (old == 0 or old > 137) else old - 1
        if u32(g[7]) == u32(tid - 1):
            g[7] = tid
        g[8] &= 2 * tid + 7
        g[9] = s32(g[9] | (1 << tid))
        g[10] ^= tid
    return Launch(
        "testKernel",
        1,
        [nthreads, 1, 1],
        [buf("g_odata", "i32", init)],
        ["g_odata"],
        {"g_odata": g},
        description="add sub exch max min inc dec cas and or xor atomics from 16 lanes (lane order)",
    )


@kernel
def vote_any() -> Launch:
    n = 64
    inp = [0] * 32 + [0] * 32
    inp[32 + 17] = 5
    res = [1 if any(inp[w * 32 : (w + 1) * 32]) else 0 for w in range(2) for _ in range(32)]
    return Launch(
        "VoteAnyKernel1",
        1,
        [n, 1, 1],
        [buf("input", "u32", inp), buf("result", "u32", [7] * n), val("size", "i32", n)],
        ["result"],
        {"result": res},
        description="__any_sync per warp: an all-zero warp and one nonzero lane",
    )


@kernel
def vote_all() -> Launch:
    n = 64
    inp = [1 + (i % 5) for i in range(n)]
    inp[32 + 9] = 0
    res = [1 if all(inp[w * 32 : (w + 1) * 32]) else 0 for w in range(2) for _ in range(32)]
    return Launch(
        "VoteAllKernel2",
        1,
        [n, 1, 1],
        [buf("input", "u32", inp), buf("result", "u32", [7] * n), val("size", "i32", n)],
        ["result"],
        {"result": res},
        description="__all_sync per warp: an all-nonzero warp and one zero lane",
    )


@kernel
def vote_any3() -> Launch:
    n, ws = 64, 32
    info = [0] * (3 * n)
    for tx in range(n):
        warp = range((tx // ws) * ws, (tx // ws + 1) * ws)
        pred = [t >= (ws * 3) // 2 for t in warp]
        info[3 * tx] = 1 if any(pred) else 0
        info[3 * tx + 1] = 1 if tx >= (ws * 3) // 2 else 0
        if all(pred):
            info[3 * tx + 2] = 1
    return Launch(
        "VoteAnyKernel3",
        1,
        [n, 1, 1],
        [buf("info", "u8", [0] * (3 * n)), val("warp_size", "i32", ws)],
        ["info"],
        {"info": info},
        description="__any_sync / __all_sync on tx >= 48 into a bool array",
    )


@kernel
def warp_aggregated_filter() -> Launch:
    r = Rng(1014)
    n = 80
    src = r.ints(n, -50, 50)
    src[0], src[1] = 0, 1  # zero is filtered out
    kept = [v for v in src if v > 0]
    dst = kept + [-1] * (n - len(kept))
    return Launch(
        "filter_arr",
        1,
        [32, 1, 1],
        [buf("dst", "i32", [-1] * n), buf("nres", "i32", [0]), buf("src", "i32", src), val("n", "i32", n)],
        ["dst", "nres"],
        {"dst": dst, "nres": [len(kept)]},
        description="stream compaction of the positive ints with one warp-aggregated atomicAdd per pass",
    )


@kernel
def cg_sum_reduction() -> Launch:
    bs = 64
    out = [sum(range(bs))] + [sum(range(16))] * 4 + [(bs - 1) * bs // 2, 15 * 16 // 2]
    return Launch(
        "cgkernel",
        1,
        [bs, 1, 1],
        [buf("out", "i32", [0] * 7)],
        ["out"],
        {"out": out},
        shared_bytes=4 * bs,
        description="sum of thread ranks over the block and over each 16-thread tile (shared-memory halving)",
    )


def _fwt_radix4(d: list, i0: int, stride: int) -> None:
    """One radix-4 butterfly of the kernels, in their order of operations."""
    i1, i2, i3 = i0 + stride, i0 + 2 * stride, i0 + 3 * stride
    d0, d1, d2, d3 = d[i0], d[i1], d[i2], d[i3]
    t = d0
    d0 = F.add(d0, d2)
    d2 = F.sub(t, d2)
    t = d1
    d1 = F.add(d1, d3)
    d3 = F.sub(t, d3)
    t = d0
    d[i0] = F.add(d0, d1)
    d[i1] = F.sub(t, d1)
    t = d2
    d[i2] = F.add(d2, d3)
    d[i3] = F.sub(t, d3)


@kernel
def fwt_batch1() -> Launch:
    r = Rng(1015)
    log2n, batch, threads = 5, 2, 8
    n = 1 << log2n
    x = r.floats(batch * n, -10, 10)
    out = []
    for b in range(batch):
        d = list(x[b * n : (b + 1) * n])
        stride = n >> 2
        while stride > 0:
            for pos in range(threads):
                lo = pos & (stride - 1)
                _fwt_radix4(d, ((pos - lo) << 2) + lo, stride)
            stride >>= 2
        if log2n & 1:
            for pos in range(n // 2):
                i0 = pos << 1
                d0, d1 = d[i0], d[i0 + 1]
                d[i0], d[i0 + 1] = F.add(d0, d1), F.sub(d0, d1)
        out += d
    return Launch(
        "fwtBatch1Kernel",
        batch,
        [threads, 1, 1],
        [buf("d_Output", "f32", [0] * (batch * n)), buf("d_Input", "f32", x), val("log2N", "i32", log2n)],
        ["d_Output"],
        {"d_Output": out},
        shared_bytes=4 * n,
        description="fast Walsh transform of 2 vectors of 32 floats in shared memory (radix-4, then radix-2)",
    )


@kernel
def fwt_batch2() -> Launch:
    r = Rng(1016)
    gx, gy, bs, stride = 2, 2, 8, 4
    n = bs * gx * 4
    x = r.floats(gy * n, -10, 10)
    out = list(x)
    for by in range(gy):
        d = out[by * n : (by + 1) * n]
        for pos in range(gx * bs):
            lo = pos & (stride - 1)
            _fwt_radix4(d, ((pos - lo) << 2) + lo, stride)
        out[by * n : (by + 1) * n] = d
    return Launch(
        "fwtBatch2Kernel",
        [gx, gy, 1],
        [bs, 1, 1],
        [buf("d_Output", "f32", [0] * (gy * n)), buf("d_Input", "f32", x), val("stride", "i32", stride)],
        ["d_Output"],
        {"d_Output": out},
        description="one radix-4 Walsh step (stride 4) on 2 vectors of 64 floats, 2-D grid (2, 2)",
    )


@kernel
def fwt_modulate() -> Launch:
    r = Rng(1017)
    n = 48
    a = r.floats(n, -100, 100)
    b = r.floats(n, -100, 100)
    rcpn = F.div(np.float32(1.0), F.from_int(n))
    out = [F.mul(a[i], F.mul(b[i], rcpn)) for i in range(n)]
    return Launch(
        "modulateKernel",
        2,
        [16, 1, 1],
        [buf("d_A", "f32", a), buf("d_B", "f32", b), val("N", "i32", n)],
        ["d_A"],
        {"d_A": out},
        description="d_A[i] *= d_B[i] * (1.0f / N) over a grid-stride loop",
    )


@kernel
def quasirandom_generator() -> Launch:
    r = Rng(1018)
    dims, res, n, seed = 3, 31, 24, 5
    table = [x & 0x7FFFFFFF for x in r.bits(dims * res)]
    scale = F.div(np.float32(1.0), F.from_int(0x80000001))  # (float)0x80000001U rounds to 2^31
    assert F.exact(scale) == Fraction(1, 1 << 31)
    out = []
    for d in range(dims):
        for pos in range(n):
            result, data = 0, seed + pos
            for bit in range(res):
                if data & 1:
                    result ^= table[d * res + bit]
                data >>= 1
            out.append(F.mul(F.from_int(u32(result + 1)), scale))
    return Launch(
        "quasirandomGeneratorKernel",
        1,
        [8, dims, 1],
        [
            buf("d_Output", "f32", [0] * (dims * n)),
            buf("c_Table", "u32", table),
            val("seed", "u32", seed),
            val("N", "u32", n),
        ],
        ["d_Output"],
        {"d_Output": out},
        description="Niederreiter-style XOR of 31 table words per set bit of seed+pos, 3 dimensions",
    )


@kernel
def histogram256() -> Launch:
    r = Rng(1019)
    bins, blocks, bs, n = 64, 2, 64, 80
    words = [sum(r.int(0, bins - 1) << (8 * k) for k in range(4)) for _ in range(n)]
    words[0] = 0x3F3F3F3F  # four hits of the last bin
    partial = []
    for b in range(blocks):
        h = [0] * bins
        pos = b * bs
        while pos < n:
            for t in range(bs):
                if pos + t < n:
                    for k in range(4):
                        h[(words[pos + t] >> (8 * k)) & 0xFF] += 1
            pos += bs * blocks
        partial += h
    return Launch(
        "histogram256Kernel",
        blocks,
        [bs, 1, 1],
        [
            buf("d_PartialHistograms", "u32", [0] * (blocks * bins)),
            buf("d_Data", "u32", words),
            val("dataCount", "u32", n),
        ],
        ["d_PartialHistograms"],
        {"d_PartialHistograms": partial},
        description="per-warp shared-memory byte histograms (atomicAdd), merged per block (64 bins)",
    )


@kernel
def nbody_integrate() -> Launch:
    r = Rng(1020)
    n, bs = 8, 4
    pos = []
    for _ in range(n):
        pos += r.floats(3, -2, 2) + r.floats(1, 0.5, 1.5)  # x, y, z, mass
    vel = []
    for _ in range(n):
        vel += r.floats(3, -0.5, 0.5) + [np.float32(0.0)]
    dt, damping = decimal_f32("0.016"), decimal_f32("0.995")
    soft = F.mul(decimal_f32("0.00125"), decimal_f32("0.00125"))  # folded by the compiler in float
    new_pos, new_vel = list(pos), list(vel)
    for i in range(n):
        bi = pos[4 * i : 4 * i + 4]
        acc = [np.float32(0.0)] * 3
        for j in range(n):  # tiles of 4 bodies in order, counter 0..3 inside each: j = 0..7
            bj = pos[4 * j : 4 * j + 4]
            rv = [F.sub(bj[k], bi[k]) for k in range(3)]
            # PTX: mul (r.y^2), fma (r.x^2 + ..), fma (r.z^2 + ..), add softening, sqrt.rn, rcp.rn
            dist = F.fma(rv[2], rv[2], F.fma(rv[0], rv[0], F.mul(rv[1], rv[1])))
            inv = F.div(np.float32(1.0), F.sqrt(F.add(soft, dist)))
            cube = F.mul(inv, F.mul(inv, inv))
            s = F.mul(bj[3], cube)
            acc = [F.fma(rv[k], s, acc[k]) for k in range(3)]
        for k in range(3):
            v = F.mul(F.fma(acc[k], dt, vel[4 * i + k]), damping)
            new_vel[4 * i + k] = v
            new_pos[4 * i + k] = F.fma(v, dt, pos[4 * i + k])
    return Launch(
        "integrateBodies_float",
        n // bs,
        [bs, 1, 1],
        [
            buf("newPos", "f32", [0] * (4 * n)),
            buf("oldPos", "f32", pos),
            buf("vel", "f32", vel),
            val("deviceOffset", "u32", 0),
            val("deviceNumBodies", "u32", n),
            val("deltaTime", "f32", dt),
            val("damping", "f32", damping),
            val("numTiles", "i32", n // bs),
        ],
        ["newPos", "vel"],
        {"newPos": new_pos, "vel": new_vel},
        shared_bytes=16 * bs,
        description="one all-pairs n-body step of 8 bodies (softened gravity, tiles through shared memory)",
    )


def _odd_even_merge_shared(keys: list[int], vals: list[int], dir_: int) -> tuple[list[int], list[int]]:
    """oddEvenMergeSortShared on one block (Batcher's network), comparator by comparator; the pairs of
    one stage are disjoint, so the threads' order inside a stage does not matter."""
    k, v = list(keys), list(vals)
    nthreads = len(k) // 2

    def comparator(a: int, b: int) -> None:
        if (k[a] > k[b]) == bool(dir_):
            k[a], k[b] = k[b], k[a]
            v[a], v[b] = v[b], v[a]

    size = 2
    while size <= len(k):
        stride = size // 2
        for t in range(nthreads):
            pos = 2 * t - (t & (stride - 1))
            comparator(pos, pos + stride)
        offsets = [t & (size // 2 - 1) for t in range(nthreads)]
        stride >>= 1
        while stride > 0:
            for t in range(nthreads):
                pos = 2 * t - (t & (stride - 1))
                if offsets[t] >= stride:
                    comparator(pos - stride, pos)
            stride >>= 1
        size <<= 1
    return k, v


@kernel
def odd_even_merge_sort() -> Launch:
    r = Rng(1021)
    n = 32
    keys = r.ints(n, 0, 20)  # many duplicate keys: the values' order is the network's
    vals = list(range(n))
    sk, sv = _odd_even_merge_shared(keys, vals, 0)
    assert sk == sorted(keys, reverse=True)
    return Launch(
        "oddEvenMergeSortShared",
        1,
        [n // 2, 1, 1],
        [
            buf("d_DstKey", "u32", [0] * n),
            buf("d_DstVal", "u32", [0] * n),
            buf("d_SrcKey", "u32", keys),
            buf("d_SrcVal", "u32", vals),
            val("arrayLength", "u32", n),
            val("dir", "u32", 0),
        ],
        ["d_DstKey", "d_DstVal"],
        {"d_DstKey": sk, "d_DstVal": sv},
        description="Batcher odd-even merge sort of 32 key/value pairs in shared memory (descending)",
    )
