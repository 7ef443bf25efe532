"""Basic memory kernels, integer arithmetic and bit operations."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from . import f32 as F
from .ints import (
    INT_MAX,
    INT_MIN,
    LLONG_MAX,
    LLONG_MIN,
    UINT_MAX,
    ULLONG_MAX,
    Rng,
    asr,
    brev,
    cdiv,
    clz,
    crem,
    ffs,
    lsr,
    popc,
    s16,
    s32,
    s64,
    u8,
    u32,
    u64,
)
from .spec import Launch, Registry, buf, val

kernel = Registry()


def exact_sum_f32(values) -> np.float32:
    """Sum of float32 values that is exact in every order (asserted): all values are multiples of a
    common power of two and every partial sum stays below 2^24 of those units."""
    fr = [F.exact(v) for v in values]
    den = 1
    for q in fr:
        den = max(den, q.denominator)
    units = sum(abs(q) * den for q in fr)
    assert units < (1 << 24), "sums would round: not order-independent"
    return F.round_f32(sum(fr, Fraction(0)))


# ---------------------------------------------------------------------------------------------
# memory and simple arithmetic


@kernel
def dot() -> Launch:
    a = [1, 2, 3]
    n = 3
    products = [F.mul(np.float32(a[i]), F.from_int(n + 1 + i)) for i in range(n)]
    total = exact_sum_f32([np.float32(0)] + products)
    assert float(total) == 32
    return Launch("dot", 1, [4, 1, 1],
                  [buf("a", "f32", a), val("n", "i32", n), buf("out", "f32", [0])],
                  ["out"], {"out": [total]})


@kernel
def vec_add() -> Launch:
    r = Rng(101)
    n = 50
    a = r.floats(n, -100, 100)
    b = r.floats(n, -1e-3, 1e-3)
    a[0], b[0] = np.float32(1.0), F.from_bits(0x33800000)   # 1 + 2^-24: tie, stays 1
    a[1], b[1] = np.float32(1.0), F.from_bits(0x33800001)   # just above the tie: rounds up
    a[2], b[2] = F.FLT_MAX, F.FLT_MAX                       # overflow to inf
    a[3], b[3] = np.float32(-0.0), np.float32(-0.0)         # -0 + -0 = -0
    a[4], b[4] = np.float32(2.5), np.float32(-2.5)          # exact cancellation: +0
    c = [np.float32(-1.0)] * (n + 2)
    exp = list(c)
    for i in range(n):
        exp[i] = F.add(a[i], b[i])
    return Launch("vec_add", 4, [16, 1, 1],
                  [buf("a", "f32", a), buf("b", "f32", b), buf("c", "f32", c), val("n", "i32", n)],
                  ["c"], {"c": exp},
                  description="c[i] = a[i] + b[i], 4 blocks x 16 threads, n = 50; c's 2 tail sentinels stay")


@kernel
def saxpy() -> Launch:
    r = Rng(102)
    n = 60
    alpha = np.float32(0.1)
    x = r.floats(n, -10, 10)
    y = r.floats(n, -10, 10)
    # cases where a separately rounded multiply would differ from the fused result
    x[0], y[0] = np.float32(10.0), np.float32(-1.0)
    x[1], y[1] = F.from_bits(0x4b000001), np.float32(-838861.0)
    x[2], y[2] = np.float32(3.0), F.neg(F.mul(alpha, np.float32(3.0)))  # fma exposes the product error
    out = list(y) + [np.float32(7.0)] * 4
    exp = list(out)
    for i in range(n):
        exp[i] = F.fma(alpha, x[i], y[i])
    return Launch("saxpy", 2, [32, 1, 1],
                  [val("alpha", "f32", alpha), buf("x", "f32", x), buf("y", "f32", out), val("n", "i32", n)],
                  ["y"], {"y": exp},
                  description="y[i] = fma(alpha, x[i], y[i]) (contracted), 64 threads, n = 60")


@kernel
def square() -> Launch:
    x = [np.float32(v) for v in (3.0, -1.5, 1e20, -1e-30, 0.1, -0.0)] + [F.from_bits(0x00000001), F.FLT_MAX]
    n = 7
    exp = [F.mul(v, v) if i < n else v for i, v in enumerate(x)]
    return Launch("square", 1, [8, 1, 1],
                  [buf("x", "f32", x), val("n", "i32", n)], ["x"], {"x": exp},
                  description="C++ linkage (_Z6squarePfi): x[i] *= x[i] for i < 7, "
                              "overflow to inf and underflow to 0")


@kernel
def iota_scale() -> Launch:
    base, stride = 0xFFFFFFF0, 0x10000001
    n = 16
    exp = [u32(base + i * stride) for i in range(n)]
    return Launch("iota_scale", 2, [8, 1, 1],
                  [buf("out", "u32", [0] * n), val("base", "u32", base), val("stride", "u32", stride)],
                  ["out"], {"out": exp},
                  description="C++ linkage (_Z10iota_scalePjjj): out[i] = base + i * stride mod 2^32")


@kernel
def copy_nc() -> Launch:
    r = Rng(103)
    n = 16
    inp = r.floats(n, -4, 4)
    inp[0], inp[1] = F.from_bits(0x00000003), F.from_bits(0x80000001)  # halving a subnormal is inexact
    inp[2], inp[3] = F.from_bits(0x7f7fffff), F.from_bits(0x7f7fffff)
    exp = [F.fma(np.float32(0.5), inp[i], inp[i ^ 1]) for i in range(n)]
    return Launch("copy_nc", 1, [n, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * n)], ["out"], {"out": exp},
                  description="ld.global.nc through const __restrict__: out[i] = fma(0.5, in[i], in[i^1])")


@kernel
def grid_stride() -> Launch:
    r = Rng(104)
    n = 100
    inp = r.ints(n, -10**9, 10**9)
    out = [0] * n
    exp = [s32(3 * i - inp[i]) for i in range(n)]
    return Launch("grid_stride", 3, [8, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", out), val("n", "i32", n)],
                  ["out"], {"out": exp},
                  description="grid-stride loop over 100 elements with 3 x 8 threads: out[i] = 3*i - in[i]")


@kernel
def char_short() -> Launch:
    n = 16
    sc = [0, 1, -1, 127, -128, 0, 5, -7, 100, -100, 0, 3, 64, -64, 9, -2]
    uc = [0, 255, 128, 127, 1, 200, 5, 7, 99, 250, 0, 3, 64, 192, 9, 254]
    ss = [0, -1, 32767, -32768, 5, 300, 5, 1000, -300, 12345, -5, 5, 511, -511, 2, 1]
    ints = []
    bytes_out = []
    shorts = []
    for i in range(n):
        a, b, c = sc[i], uc[i], ss[i]
        ints.append(s32(a * 1000 + b - c))
        if a == 0:
            rr = c & 0xFF
        elif c != 5:
            rr = u8(a + c)
        else:
            rr = 7
        bytes_out.append(rr)
        shorts.append(s16(a * c))
    return Launch("char_short", 1, [n, 1, 1],
                  [buf("sc", "i8", sc), buf("uc", "u8", uc), buf("ss", "i16", ss),
                   buf("bytes_out", "u8", [0xAA] * n), buf("shorts_out", "i16", [0] * n),
                   buf("ints_out", "i32", [0] * n)],
                  ["bytes_out", "shorts_out", "ints_out"],
                  {"bytes_out": bytes_out, "shorts_out": shorts, "ints_out": ints},
                  description="8/16-bit buffers: sign/zero-extending loads, byte and short stores, "
                              "16-bit compares and wraparound")


@kernel
def mixed_width() -> Launch:
    r = Rng(115)
    t = 16
    v = r.ints(4 * t, INT_MIN, INT_MAX)
    v[0:4] = [INT_MAX, INT_MAX, INT_MAX, INT_MAX]
    v[4:8] = [INT_MIN, INT_MIN, -1, INT_MIN]
    nbytes = 40
    data = r.ints(nbytes, 0, 255)
    sums = [s64(sum(v[4 * k:4 * k + 4]) * 1000003) for k in range(t)]
    out0 = [0xEE] * (nbytes + 4)
    out = list(out0)
    for k in range(nbytes):
        out[k] = u8(data[k] + k)
    return Launch("mixed_width", 1, [t, 1, 1],
                  [buf("v", "i32", v), buf("bytes", "u8", data), buf("sums", "i64", [0] * t),
                   buf("out", "u8", out0), val("n", "u64", nbytes)],
                  ["sums", "out"], {"sums": sums, "out": out},
                  description="int -> long long accumulation (ld.global.s32), a byte loop with a 64-bit "
                              "counter; the 4 bytes past n keep their sentinel")


# ---------------------------------------------------------------------------------------------
# integer arithmetic


@kernel
def int64_arith() -> Launch:
    r = Rng(105)
    a = [0, ULLONG_MAX, 0xFFFFFFFF, 0x8000000000000000, 0x123456789ABCDEF0] + r.bits(3, 64)
    b = [0, 1, 1, 0x8000000000000000, 0x0FEDCBA987654321] + r.bits(3, 64)
    a[7] = b[7]  # equal pair
    s = [LLONG_MIN, -1, LLONG_MAX, -0x123456789, 0x7FFF_FFFF_FFFF, -5, 1 << 40, -(1 << 62)]
    n = len(a)
    out, sout = [], []
    for i in range(n):
        x, y = a[i], b[i]
        sh = y & 63
        out += [u64(x + y), u64(x - y), u64(x * y),
                u64((x << sh) | (x >> ((64 - sh) & 63))),
                u64((x >> 7) ^ (y << 3)),
                1 if x < y else (2 if x == y else 3)]
        z = s[i]
        sout += [z >> 5, s64(z * (i - 3) + (x & 0xFFFFFFFF))]
    return Launch("int64_arith", 1, [n, 1, 1],
                  [buf("a", "u64", a), buf("b", "u64", b), buf("s", "i64", s),
                   buf("out", "u64", [0] * (6 * n)), buf("sout", "i64", [0] * (2 * n))],
                  ["out", "sout"], {"out": out, "sout": sout},
                  description="64-bit add/sub/mul with carries and wraparound, rotate, shifts, compares")


@kernel
def mulhi() -> Launch:
    r = Rng(106)
    a = [INT_MIN, INT_MIN, INT_MAX, -1, 0x12345678, -2, 65536] + r.ints(9, INT_MIN, INT_MAX)
    b = [INT_MIN, -1, INT_MAX, -1, -0x789ABCDE, 3, 65536] + r.ints(9, INT_MIN, INT_MAX)
    n = len(a)
    hs, hu, wide, h64s, h64u = [], [], [], [], []
    for i in range(n):
        x, y = a[i], b[i]
        hs.append((x * y) >> 32)
        hu.append((u32(x) * u32(y)) >> 32)
        wide.append(x * y)
        X = (u32(x) << 32) | u32(y)
        Y = (u32(y) << 32) | u32(x ^ 0x5BD1E995)
        h64s.append((s64(X) * s64(Y)) >> 64)
        h64u.append((X * Y) >> 64)
    return Launch("mulhi", 1, [n, 1, 1],
                  [buf("a", "i32", a), buf("b", "i32", b), buf("hi_s", "i32", [0] * n),
                   buf("hi_u", "u32", [0] * n), buf("wide", "i64", [0] * n),
                   buf("hi64_s", "i64", [0] * n), buf("hi64_u", "u64", [0] * n)],
                  ["hi_s", "hi_u", "wide", "hi64_s", "hi64_u"],
                  {"hi_s": hs, "hi_u": hu, "wide": wide, "hi64_s": h64s, "hi64_u": h64u},
                  description="__mulhi, __umulhi, 32x32->64 widening multiply, __mul64hi, __umul64hi")


@kernel
def int_divmod() -> Launch:
    r = Rng(107)
    a = [7, -7, 7, -7, INT_MIN, INT_MAX, 0, -1, INT_MIN, 1000000007, -123456789, 5]
    b = [2, 2, -2, -2, 2, -1, 5, 3, INT_MIN, 10, 1000, INT_MAX]
    c = [3, 3, -3, -3, 7, 2, -5, 2, -2, -10, 7, -1]
    a += r.ints(4, INT_MIN, INT_MAX)
    b += [v | 1 for v in r.ints(4, -1000, 1000)]
    c += [v if v not in (0, -1) else 2 for v in r.ints(4, -100000, 100000)]
    n = len(a)
    q, rr, uq, ur = [], [], [], []
    for i in range(n):
        x, y, z = a[i], b[i], c[i]
        assert y != 0 and z != 0 and not (x == INT_MIN and (y == -1 or z == -1))
        q.append(cdiv(x, y))
        rr.append(crem(x, z))
        uq.append(u32(x) // u32(z))
        ur.append(u32(x) % u32(y))
    return Launch("int_divmod", 1, [n, 1, 1],
                  [buf("a", "i32", a), buf("b", "i32", b), buf("c", "i32", c),
                   buf("q", "i32", [0] * n), buf("r", "i32", [0] * n),
                   buf("uq", "u32", [0] * n), buf("ur", "u32", [0] * n)],
                  ["q", "r", "uq", "ur"], {"q": q, "r": rr, "uq": uq, "ur": ur},
                  description="signed / and % truncate toward zero; unsigned / and % of the same bits")


@kernel
def div_s64() -> Launch:
    a = [7, -7, LLONG_MIN, LLONG_MAX, 1 << 40, -(1 << 40) - 3, 1000, 0xFFFFFFFF, -1, 123456789012345]
    b = [2, 2, 3, -1, -7, 1 << 20, 7, 0xFFFF, 10, -1]
    n = len(a)
    q = [cdiv(x, y) for x, y in zip(a, b, strict=True)]
    rr = [crem(x, y) for x, y in zip(a, b, strict=True)]
    uq = [u64(x) // u64(y) for x, y in zip(a, b, strict=True)]
    return Launch("div_s64", 1, [n, 1, 1],
                  [buf("a", "i64", a), buf("b", "i64", b), buf("q", "i64", [0] * n),
                   buf("r", "i64", [0] * n), buf("uq", "u64", [0] * n)],
                  ["q", "r", "uq"], {"q": q, "r": rr, "uq": uq},
                  description="64-bit signed and unsigned division/remainder (32-bit fast path and div.s64)")


@kernel
def int_edges() -> Launch:
    r = Rng(108)
    a = [INT_MAX, INT_MIN, INT_MIN, -1, 0, 0x10000, INT_MAX, -5] + r.ints(4, INT_MIN, INT_MAX)
    b = [1, -1, INT_MIN, -1, INT_MIN, 0x10000, INT_MIN, 5] + r.ints(4, INT_MIN, INT_MAX)
    n = len(a)
    out, uout = [], []
    for x, y in zip(a, b, strict=True):
        out += [s32(x + y), s32(x - y), s32(x * y), s32(-x), s32(abs(x)), max(x, y), min(x, y)]
        uout += [max(u32(x), u32(y)), min(u32(x), u32(y)) ^ (1 if x < 0 else 0)]
    return Launch("int_edges", 1, [n, 1, 1],
                  [buf("a", "i32", a), buf("b", "i32", b), buf("out", "i32", [0] * (7 * n)),
                   buf("uout", "u32", [0] * (2 * n))],
                  ["out", "uout"], {"out": out, "uout": uout},
                  description="wraparound +,-,*, negation, abs(INT_MIN) = INT_MIN, signed/unsigned min/max")


# ---------------------------------------------------------------------------------------------
# bit operations


@kernel
def bit_count() -> Launch:
    r = Rng(109)
    a = [0, 1, 0x80000000, UINT_MAX, 0x00F000F0, 0x7FFFFFFF] + r.bits(6)
    w = [0, 1, 1 << 63, ULLONG_MAX, 0x00000000FFFF0000, 0x0000000100000000] + r.bits(6, 64)
    n = len(a)
    out, rev = [], []
    for x, y in zip(a, w, strict=True):
        out += [popc(x), clz(x), ffs(x), popc(y), clz(y, 64), ffs(y, 64)]
        rev.append(brev(x))
    return Launch("bit_count", 1, [n, 1, 1],
                  [buf("a", "u32", a), buf("w", "u64", w), buf("out", "i32", [0] * (6 * n)),
                   buf("rev", "u32", [0] * n)],
                  ["out", "rev"], {"out": out, "rev": rev},
                  description="__popc, __clz, __ffs, __popcll, __clzll, __ffsll, __brev (zero "
                              "inputs included)")


@kernel
def bitfield() -> Launch:
    r = Rng(110)
    n = 16
    a = [UINT_MAX, 0] + r.bits(n - 2)
    b = [0, UINT_MAX] + r.bits(n - 2)
    c = [ULLONG_MAX, 0] + r.bits(n - 2, 64)
    out, out64 = [], []
    for i in range(n):
        x, y = a[i], b[i]
        pos, ln = i & 15, 1 + (i % 12)
        mask = (1 << ln) - 1
        out += [(x >> pos) & mask,
                u32((x & ~(mask << pos)) | ((y & mask) << pos)),
                (x & 0xFFFF00FF) | ((y & 0xFF) << 8)]
        z = c[i]
        out64.append((z & ~(0xFFFF << 24) & ULLONG_MAX) | ((y & 0xFFFF) << 24))
    return Launch("bitfield", 1, [n, 1, 1],
                  [buf("a", "u32", a), buf("b", "u32", b), buf("c", "u64", c),
                   buf("out", "u32", [0] * (3 * n)), buf("out64", "u64", [0] * n)],
                  ["out", "out64"], {"out": out, "out64": out64},
                  description="bit-field extract/insert with shifts and masks (32 and 64 bits)")


def byte_perm_ref(x: int, y: int, s: int) -> int:
    """CUDA __byte_perm: result byte k = byte (s >> 4k) & 7 of the 8-byte value y:x."""
    src = (u32(y) << 32) | u32(x)
    res = 0
    for k in range(4):
        sel = (s >> (4 * k)) & 7
        res |= ((src >> (8 * sel)) & 0xFF) << (8 * k)
    return res


@kernel
def byte_perm() -> Launch:
    r = Rng(111)
    n = 8
    a = [0x03020100, 0x80FF7F01] + r.bits(n - 2)
    b = [0x07060504, 0x12345678] + r.bits(n - 2)
    sel = [0x3210, 0x7654, 0x0123, 0x4444, 0x5140, 0xFFFF, 0x89AB, 0x7531]
    out = []
    for i in range(n):
        out += [byte_perm_ref(a[i], b[i], sel[i]), byte_perm_ref(a[i], 0, 0x0123),
                byte_perm_ref(a[i], b[i], 0x7531)]
    return Launch("byte_perm", 1, [n, 1, 1],
                  [buf("a", "u32", a), buf("b", "u32", b), buf("sel", "u32", sel),
                   buf("out", "u32", [0] * (3 * n))],
                  ["out"], {"out": out},
                  description="__byte_perm (prmt.b32; selector nibbles use their low 3 bits)")


@kernel
def funnel_shift() -> Launch:
    r = Rng(112)
    n = 10
    lo = [0x89ABCDEF, 0xFFFFFFFF, 1] + r.bits(n - 3)
    hi = [0x01234567, 0, 0x80000000] + r.bits(n - 3)
    sh = [0, 4, 31, 32, 33, 36, 63, 64, 100, UINT_MAX]
    out = []
    for i in range(n):
        wide = (hi[i] << 32) | lo[i]
        s = sh[i]
        w, c = s & 31, min(s, 32)
        out += [u32((wide << w) >> 32), u32(wide >> w), u32((wide << c) >> 32), u32(wide >> c),
                u32((lo[i] << w) | (lo[i] >> ((32 - w) & 31)))]
    return Launch("funnel_shift", 1, [n, 1, 1],
                  [buf("lo", "u32", lo), buf("hi", "u32", hi), buf("sh", "u32", sh),
                   buf("out", "u32", [0] * (5 * n))],
                  ["out"], {"out": out},
                  description="__funnelshift_l/_r (shift mod 32), _lc/_rc (clamped to 32), rotate idiom")


@kernel
def logic_ops() -> Launch:
    r = Rng(113)
    n = 12
    a = [0, UINT_MAX, 0x80000000, 5, 6] + r.bits(n - 5)
    b = [0, 0, 0x7FFFFFFF, 5, 0x80000001] + r.bits(n - 5)
    out = []
    for x, y in zip(a, b, strict=True):
        p, q, rr = x > y, (x & 1) != 0, s32(y) < 0
        out += [u32((x & y) ^ ~x), u32((x | y) & ~(x ^ y)), int((p and not q) or (rr != p)),
                x if (p ^ q) else y, u32(~y) if (not rr and q) else (x ^ 0xDEADBEEF)]
    return Launch("logic_ops", 1, [n, 1, 1],
                  [buf("a", "u32", a), buf("b", "u32", b), buf("out", "u32", [0] * (5 * n))],
                  ["out"], {"out": out},
                  description="and/or/xor/not on words and predicates")


@kernel
def shifts() -> Launch:
    r = Rng(114)
    n = 10
    a = [INT_MIN, -1, INT_MAX, 1, -12345, 0x40000000] + r.ints(n - 6, INT_MIN, INT_MAX)
    s = [31, 31, 1, 0, 4, 33, 63, 64, 0xFFFFFFFF, 17]
    out, uout, out64 = [], [], []
    for x, sv in zip(a, s, strict=True):
        k = sv & 31
        out += [asr(x, k), s32(x << k)]
        uout.append(lsr(x, k))
        w = s64(x * 1048576 - 12345)
        k64 = sv & 63
        out64.append(s64((w >> k64) + (u64(w) >> (63 - k64))))
    return Launch("shifts", 1, [n, 1, 1],
                  [buf("a", "i32", a), buf("s", "u32", s), buf("out", "i32", [0] * (2 * n)),
                   buf("uout", "u32", [0] * n), buf("out64", "i64", [0] * n)],
                  ["out", "uout", "out64"], {"out": out, "uout": uout, "out64": out64},
                  description="arithmetic/logical shifts with masked amounts, 32 and 64 bits")
