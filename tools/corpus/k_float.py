"""Float32 arithmetic: special values, ties, fused multiply-add, division, square roots, directed
rounding, conversions, comparisons. Every expected value comes from ``f32`` (exact rationals)."""

from __future__ import annotations

import numpy as np

from . import f32 as F
from .ints import INT_MAX, INT_MIN, LLONG_MAX, LLONG_MIN, UINT_MAX, Rng, u32
from .spec import Launch, Registry, buf

kernel = Registry()

H = F.from_bits
MODES = ("rn", "rz", "rd", "ru")

# named values
MIN_SUB = H(0x00000001)        # 2^-149
MIN_NORMAL = H(0x00800000)     # 2^-126
MAX_SUB = H(0x007FFFFF)
ONE_ULP_UP = H(0x3F800001)     # 1 + 2^-23
BELOW_ONE = H(0x3F7FFFFF)      # 1 - 2^-24
QNAN_PAYLOAD = H(0x7FC00001)   # quiet NaN with a payload
NEG_QNAN = H(0xFFC00000)
SNAN = H(0x7F800001)           # signalling NaN
INF = F.inf(False)
NINF = F.inf(True)
NZERO = F.zero(True)
PZERO = F.zero(False)
MAX = F.FLT_MAX


def f(*xs) -> list[np.float32]:
    return [np.float32(x) if not isinstance(x, np.floating) else x for x in xs]


def double_rounded_fma(x, y, z) -> np.float32:
    """What an fma emulated in float64 would give (x*y is exact in double; the sum rounds twice)."""
    with np.errstate(all="ignore"):
        return np.float32(np.float64(x) * np.float64(y) + np.float64(z))


@kernel
def float_specials() -> Launch:
    pairs = [
        (PZERO, NZERO), (NZERO, NZERO), (NZERO, PZERO), (PZERO, PZERO),
        (MIN_SUB, MIN_SUB), (MIN_SUB, NZERO), (MAX_SUB, MIN_SUB), (MIN_NORMAL, F.neg(MIN_SUB)),
        (MAX, MAX), (MAX, F.neg(MAX)), (MAX, np.float32(2.0)), (MAX, H(0x73000000)),   # + 2^103 (tie)
        (INF, INF), (INF, NINF), (INF, np.float32(1.0)), (NINF, NZERO),
        (PZERO, INF), (QNAN_PAYLOAD, np.float32(1.0)), (np.float32(2.0), NEG_QNAN), (SNAN, INF),
        (np.float32(1e-30), np.float32(1e-30)), (np.float32(-3.0), np.float32(1e-20)),
        (H(0x00400000), np.float32(2.0)), (np.float32(0.1), np.float32(0.2)),
    ]
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    out = []
    for x, y in pairs:
        out += [F.add(x, y), F.sub(x, y), F.mul(x, y), F.sub(y, x)]
    n = len(pairs)
    return Launch("float_specials", 1, [n, 1, 1],
                  [buf("a", "f32", a), buf("b", "f32", b), buf("out", "f32", [0] * (4 * n))],
                  ["out"], {"out": out},
                  description="x+y, x-y, x*y, y-x on signed zeros, subnormals, FLT_MAX, inf, NaN payloads "
                              "(results NaN are canonical 0x7fffffff)")


@kernel
def add_ties() -> Launch:
    e24 = H(0x33800000)  # 2^-24: half an ulp of 1
    pairs = [
        (np.float32(1.0), e24),                      # tie -> 1 (even)
        (ONE_ULP_UP, e24),                           # tie -> 1 + 2^-22 (even)
        (np.float32(-1.0), F.neg(e24)),
        (H(0x3F800003), F.neg(e24)),                 # tie between ...2 and ...3 -> ...2
        (np.float32(16777216.0), np.float32(1.0)),   # 2^24 + 1: tie -> 2^24
        (np.float32(16777218.0), np.float32(1.0)),   # tie -> 2^24 + 4
        (np.float32(16777216.0), np.float32(3.0)),   # 2^24 + 3: tie -> 2^24 + 4
        (np.float32(1.0), H(0x33800001)),            # just above the tie -> up
        (np.float32(1.0), H(0x337FFFFF)),            # just below -> 1
        (np.float32(1.0), np.float32(-e24)),         # 1 - 2^-24 exactly representable
        (np.float32(1.0), H(0xB3000000)),            # 1 - 2^-25: tie -> 1
        (H(0x4B7FFFFF), np.float32(0.5)),            # 16777215.5 -> tie -> 16777216
        (H(0x4B7FFFFF), np.float32(1.5)),            # 16777216.5 -> 16777216 (ulp 2)
        (np.float32(0.1), np.float32(0.2)),
        (np.float32(1e8), np.float32(-99999992.0)),  # exact small difference
        (MIN_NORMAL, F.neg(MAX_SUB)),                # result min subnormal
        (np.float32(3.0), np.float32(-3.0)),         # exact zero: +0
        (np.float32(-0.0), np.float32(0.0)),
    ]
    r = Rng(201)
    for _ in range(14):
        x = r.floats(1, -1e4, 1e4)[0]
        pairs.append((x, r.floats(1, -1, 1)[0]))
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    n = len(pairs)
    return Launch("add_ties", 1, [n, 1, 1],
                  [buf("a", "f32", a), buf("b", "f32", b), buf("sum", "f32", [0] * n),
                   buf("diff", "f32", [0] * n)],
                  ["sum", "diff"],
                  {"sum": [F.add(x, y) for x, y in pairs], "diff": [F.sub(x, y) for x, y in pairs]},
                  description="round-to-nearest-even on exact ties and near-ties of + and -")


@kernel
def mul_ties() -> Launch:
    pairs = [
        (ONE_ULP_UP, np.float32(1.5)),               # 1.5 + 1.5 ulp: tie -> even
        (H(0x3F800003), np.float32(1.5)),            # 1.5 + 4.5 ulp: tie -> even
        (ONE_ULP_UP, ONE_ULP_UP),                    # 1 + 2^-22 + 2^-46
        (BELOW_ONE, BELOW_ONE),
        (H(0x1A000000), H(0x1A000000)),              # 2^-75 * 2^-75 = 2^-150: tie -> +0
        (H(0x1A400000), H(0x1A000000)),              # 1.5 * 2^-150 -> 2^-149
        (H(0x9A000000), H(0x1A000000)),              # -2^-150 -> -0
        (MIN_NORMAL, np.float32(0.5)),               # exact subnormal
        (ONE_ULP_UP, H(0x00400000)),                 # inexact subnormal
        (np.float32(1.5), MIN_SUB),                  # 1.5 ulp: tie -> 2 ulp
        (np.float32(2.5), MIN_SUB),                  # 2.5 ulp: tie -> 2 ulp
        (H(0x7F000000), np.float32(2.0)),            # 2^127 * 2 = inf
        (MAX, ONE_ULP_UP),                           # overflow
        (MAX, BELOW_ONE),                            # no overflow
        (np.float32(-0.0), np.float32(5.0)),
        (np.float32(0.1), np.float32(10.0)),
    ]
    r = Rng(202)
    for _ in range(16):
        pairs.append((r.floats(1, -100, 100)[0], r.floats(1, -100, 100)[0]))
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    n = len(pairs)
    return Launch("mul_ties", 1, [n, 1, 1],
                  [buf("a", "f32", a), buf("b", "f32", b), buf("out", "f32", [0] * n)],
                  ["out"], {"out": [F.mul(x, y) for x, y in pairs]},
                  description="a * b: ties to even, gradual underflow, overflow to inf")


# (x, y, z) found by search: the float64-emulated fma double-rounds to the wrong float32
DOUBLE_ROUNDING_FMA = [
    (0x3F7FFFFE, 0xB3800001, 0x3F800005),
    (0x3F7FFFFE, 0x33800001, 0xBF800007),
    (0x3F800001, 0xB37FFFFE, 0xBF800007),
    (0x3F800001, 0xB37FFFFE, 0xBF800003),
    (0x3F800001, 0xB37FFFFE, 0x3F800007),
    (0x3F7FFFFE, 0xB3800001, 0x3F800001),
    (0x3F800001, 0x337FFFFE, 0x3F800007),
    (0x3F800001, 0x337FFFFE, 0xBF800007),
]


@kernel
def fma_ties() -> Launch:
    triples = [tuple(H(v) for v in t) for t in DOUBLE_ROUNDING_FMA]
    for x, y, z in triples:
        assert F.bits(F.fma(x, y, z)) != F.bits(double_rounded_fma(x, y, z))
    third = np.float32(1.0) / np.float32(3.0)
    triples += [
        (third, np.float32(3.0), np.float32(-1.0)),               # the rounding error of 1/3
        (np.float32(0.1), np.float32(10.0), np.float32(-1.0)),
        (np.float32(2.0), np.float32(3.0), np.float32(-6.0)),     # exact zero: +0
        (np.float32(-2.0), np.float32(3.0), np.float32(6.0)),     # +0
        (np.float32(-0.0), np.float32(3.0), np.float32(-0.0)),    # -0 + -0 = -0
        (np.float32(0.0), np.float32(-3.0), np.float32(0.0)),     # -0 + +0 = +0
        (H(0x1F800000), H(0x1F800000), np.float32(0.0)),          # 2^-64 * 2^-64 = 2^-128: subnormal
        (H(0x1F800001), H(0x20000000), F.neg(H(0x00400000))),     # cancellation into subnormals
        (H(0x7F000000), np.float32(2.0), F.neg(MAX)),             # product 2^128 overflows, sum does not
        (MAX, np.float32(2.0), F.neg(MAX)),                       # overflow even after the sum
        (INF, np.float32(0.0), np.float32(1.0)),                  # NaN
        (INF, np.float32(1.0), NINF),                             # NaN
        (np.float32(1.0), QNAN_PAYLOAD, np.float32(1.0)),         # NaN -> canonical
        (np.float32(1.0), np.float32(1.0), INF),
        (np.float32(1.5), np.float32(1.5), H(0x33800000)),        # 2.25 + 2^-24
    ]
    r = Rng(203)
    for _ in range(9):
        x, y, z = r.floats(3, -8, 8)
        triples.append((x, y, z))
    n = len(triples)
    return Launch("fma_ties", 1, [n, 1, 1],
                  [buf("a", "f32", [t[0] for t in triples]), buf("b", "f32", [t[1] for t in triples]),
                   buf("c", "f32", [t[2] for t in triples]), buf("out", "f32", [0] * n)],
                  ["out"], {"out": [F.fma(*t) for t in triples]},
                  description="fmaf rounds once (first 8 rows double-round wrongly through float64), "
                              "signed zeros, subnormals, overflow, NaN")


@kernel
def div_rn() -> Launch:
    pairs = [
        (np.float32(1.0), np.float32(3.0)), (np.float32(2.0), np.float32(3.0)),
        (np.float32(-1.0), np.float32(10.0)), (np.float32(22.0), np.float32(7.0)),
        (H(0x00000003), np.float32(2.0)),          # 1.5 ulp of the subnormal grid: tie -> 2 ulp
        (MIN_SUB, np.float32(2.0)),                # tie -> +0
        (F.neg(MIN_SUB), np.float32(2.0)),         # -> -0
        (H(0x00000005), np.float32(-2.0)),         # -2.5 ulp: tie -> -2 ulp
        (np.float32(1.0), MAX),                    # subnormal quotient
        (MAX, np.float32(0.5)),                    # overflow
        (np.float32(1.0), np.float32(0.0)), (np.float32(-1.0), np.float32(0.0)),
        (np.float32(1.0), NZERO), (np.float32(0.0), np.float32(0.0)),
        (INF, INF), (INF, np.float32(-2.0)), (np.float32(5.0), NINF), (NZERO, np.float32(5.0)),
        (QNAN_PAYLOAD, np.float32(1.0)), (MIN_NORMAL, MAX_SUB),
    ]
    r = Rng(204)
    for _ in range(12):
        pairs.append((r.floats(1, -1000, 1000)[0], r.floats(1, 0.01, 100)[0]))
    n = len(pairs)
    return Launch("div_rn", 1, [n, 1, 1],
                  [buf("a", "f32", [p[0] for p in pairs]), buf("b", "f32", [p[1] for p in pairs]),
                   buf("out", "f32", [0] * n)],
                  ["out"], {"out": [F.div(x, y) for x, y in pairs]},
                  description="a / b is div.rn.f32: correctly rounded, subnormal ties, x/0, 0/0, inf/inf")


@kernel
def sqrt_rn() -> Launch:
    xs = f(4.0, 2.0, 0.25, 3.0, 10.0, 1e-40, 0.0, -0.0, -1.0, 16777215.0, 0.5) + [
        INF, NINF, MIN_SUB, H(0x00000004), MAX, MIN_NORMAL, BELOW_ONE, ONE_ULP_UP, QNAN_PAYLOAD,
        MAX_SUB, H(0x7E800000)]
    r = Rng(205)
    xs += r.floats(10, 0, 1000)
    n = len(xs)
    directed = []
    for x in xs:
        directed += [F.sqrt(x, "rz"), F.sqrt(x, "rd"), F.sqrt(x, "ru")]
    return Launch("sqrt_rn", 1, [n, 1, 1],
                  [buf("a", "f32", xs), buf("root", "f32", [0] * n), buf("directed", "f32", [0] * (3 * n)),
                   buf("recip", "f32", [0] * n)],
                  ["root", "directed", "recip"],
                  {"root": [F.sqrt(x) for x in xs], "directed": directed, "recip": [F.rcp(x) for x in xs]},
                  description="sqrtf = sqrt.rn.f32, __fsqrt_rz/rd/ru, 1.0f/x = rcp.rn.f32: exact squares, "
                              "subnormals, -0, inf, negatives -> NaN")


def _directed_pairs(seed: int) -> list[tuple]:
    pairs = [
        (np.float32(1.0), H(0x33800000)),            # 1 + 2^-24: tie
        (np.float32(1.0), H(0xB3800000)),            # 1 - 2^-24: exact
        (np.float32(-1.0), H(0xB3000000)),           # -(1 + 2^-25)
        (np.float32(3.0), np.float32(-3.0)),         # exact zero: -0 when rounding down
        (np.float32(-0.0), np.float32(0.0)),
        (np.float32(-0.0), np.float32(-0.0)),
        (MAX, MAX),                                  # overflow: MAX or inf by mode
        (F.neg(MAX), F.neg(MAX)),
        (MIN_SUB, np.float32(0.5)),                  # products below the smallest subnormal
        (F.neg(MIN_SUB), np.float32(0.75)),
        (np.float32(0.1), np.float32(3.0)),
        (np.float32(-0.1), np.float32(3.0)),
        (INF, np.float32(-2.0)),
        (np.float32(1e-45), np.float32(-1e-45)),
    ]
    r = Rng(seed)
    for _ in range(10):
        pairs.append((r.floats(1, -50, 50)[0], r.floats(1, -50, 50)[0]))
    return pairs


@kernel
def rounding_add_mul() -> Launch:
    pairs = _directed_pairs(206)
    out = []
    for x, y in pairs:
        out += [F.add(x, y, m) for m in MODES] + [F.mul(x, y, m) for m in MODES]
    n = len(pairs)
    return Launch("rounding_add_mul", 1, [n, 1, 1],
                  [buf("a", "f32", [p[0] for p in pairs]), buf("b", "f32", [p[1] for p in pairs]),
                   buf("out", "f32", [0] * (8 * n))],
                  ["out"], {"out": out},
                  description="__fadd_rn/rz/rd/ru and __fmul_rn/rz/rd/ru (add.rz.f32, mul.rm.f32, ...)")


@kernel
def rounding_fma() -> Launch:
    triples = [
        (np.float32(1.0), np.float32(1.0), H(0x33800000)),
        (np.float32(3.0), np.float32(1.0), np.float32(-3.0)),    # exact zero: -0 in rd
        (np.float32(-0.0), np.float32(1.0), np.float32(0.0)),
        (np.float32(0.1), np.float32(10.0), np.float32(-1.0)),
        (np.float32(-0.1), np.float32(10.0), np.float32(1.0)),
        (MAX, np.float32(2.0), np.float32(0.0)),                 # overflow by mode
        (F.neg(MAX), np.float32(2.0), np.float32(0.0)),
        (MIN_SUB, np.float32(0.5), np.float32(0.0)),             # 2^-150
        (MIN_SUB, np.float32(-0.5), np.float32(0.0)),
        (np.float32(1.0), np.float32(1.0), F.neg(H(0x00000001))),
        (ONE_ULP_UP, ONE_ULP_UP, np.float32(-1.0)),
        (np.float32(1.0), np.float32(1.0), np.float32(1e-45)),
        (np.float32(-1.0), np.float32(1.0), np.float32(-1e-45)),
        (INF, np.float32(1.0), np.float32(5.0)),
    ]
    r = Rng(207)
    for _ in range(10):
        triples.append(tuple(r.floats(3, -20, 20)))
    out = []
    for x, y, z in triples:
        out += [F.fma(x, y, z, m) for m in MODES] + [F.sub(x, z, m) for m in MODES]
    n = len(triples)
    return Launch("rounding_fma", 1, [n, 1, 1],
                  [buf("a", "f32", [t[0] for t in triples]), buf("b", "f32", [t[1] for t in triples]),
                   buf("c", "f32", [t[2] for t in triples]), buf("out", "f32", [0] * (8 * n))],
                  ["out"], {"out": out},
                  description="__fmaf_rn/rz/rd/ru and __fsub_rn/rz/rd/ru: single rounding in each mode, "
                              "signed zeros, overflow")


@kernel
def rounding_div_rcp() -> Launch:
    pairs = [
        (np.float32(1.0), np.float32(3.0)), (np.float32(-1.0), np.float32(3.0)),
        (np.float32(2.0), np.float32(-7.0)), (np.float32(1.0), np.float32(1.0)),
        (np.float32(1.0), MAX), (MAX, np.float32(0.5)), (F.neg(MAX), np.float32(0.5)),
        (MIN_SUB, np.float32(2.0)), (F.neg(MIN_SUB), np.float32(3.0)),
        (np.float32(1.0), np.float32(0.0)), (np.float32(0.0), np.float32(-5.0)),
        (np.float32(1.0), MIN_SUB), (np.float32(7.0), INF), (np.float32(10.0), np.float32(0.1)),
    ]
    r = Rng(208)
    for _ in range(10):
        pairs.append((r.floats(1, -100, 100)[0], r.floats(1, 0.5, 50)[0]))
    out = []
    for x, y in pairs:
        out += [F.div(x, y, m) for m in MODES] + [F.rcp(y, m) for m in MODES]
    n = len(pairs)
    return Launch("rounding_div_rcp", 1, [n, 1, 1],
                  [buf("a", "f32", [p[0] for p in pairs]), buf("b", "f32", [p[1] for p in pairs]),
                   buf("out", "f32", [0] * (8 * n))],
                  ["out"], {"out": out},
                  description="__fdiv_rn/rz/rd/ru and __frcp_rn/rz/rd/ru (div.rz.f32, rcp.rm.f32, ...)")


@kernel
def round_to_int() -> Launch:
    xs = f(0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.7, -3.7, 0.3, -0.3, 0.0, -0.0, 8388609.0, -8388609.0,
           1e30, -1e30, 4194303.5, -4194302.5, 1.0, -1.0) + [
        H(0x3EFFFFFF), H(0xBEFFFFFF), H(0x3F000001), INF, NINF, MIN_SUB, F.neg(MIN_SUB), BELOW_ONE,
        H(0x4B000000), H(0x4AFFFFFF), H(0xCAFFFFFF), H(0x3FC00000)]
    out = []
    for x in xs:
        out += [F.round_to_integral(x, "rni"), F.round_to_integral(x, "rmi"),
                F.round_to_integral(x, "rpi"), F.round_to_integral(x, "rzi"), F.roundf(x)]
    n = len(xs)
    return Launch("round_to_int", 1, [n, 1, 1],
                  [buf("a", "f32", xs), buf("out", "f32", [0] * (5 * n))],
                  ["out"], {"out": out},
                  description="rintf (ties to even), floorf, ceilf, truncf, roundf (ties away; "
                              "0.49999997 -> 0); zero results keep the sign")


@kernel
def float_to_int() -> Launch:
    xs = f(2.5, -2.5, 3.5, -1.5, 0.5, -0.5, 1e10, -1e10, 2147483520.0, 2147483648.0, -2147483648.0,
           -2147483904.0, 4294967040.0, 4294967296.0, 1e19, -9.223372036854775808e18,
           9.223372036854775808e18, 0.99999994, -0.99999994, 123456.789, -0.0) + [
        INF, NINF, QNAN_PAYLOAD, F.nan(), NEG_QNAN, MIN_SUB, np.float32(16777217.0)]
    si, ui, sl = [], [], []
    for x in xs:
        si += [F.to_int(x, "rni"), F.to_int(x, "rzi"), F.to_int(x, "rmi"), F.to_int(x, "rpi"),
               F.to_int(x, "rzi")]
        ui += [F.to_int(x, "rzi", 32, False), F.to_int(x, "rni", 32, False)]
        sl.append(F.to_int(x, "rzi", 64, True))
    assert si[5 * 6 + 1] == INT_MAX and si[5 * 7 + 1] == INT_MIN and sl[14] == LLONG_MAX
    assert sl[15] == LLONG_MIN and ui[2 * 3] == 0 and ui[2 * 13] == UINT_MAX
    n = len(xs)
    return Launch("float_to_int", 1, [n, 1, 1],
                  [buf("a", "f32", xs), buf("si", "i32", [0] * (5 * n)), buf("ui", "u32", [0] * (2 * n)),
                   buf("sl", "i64", [0] * n)],
                  ["si", "ui", "sl"], {"si": si, "ui": ui, "sl": sl},
                  description="float->int conversions saturate (1e10 -> INT_MAX, -1.5 -> 0u), NaN -> 0 "
                              "(to 64 bits: LLONG_MIN); "
                              "__float2int_rn/rz/rd/ru, (int)x, __float2uint_rz/rn, __float2ll_rz")


@kernel
def int_to_float() -> Launch:
    xs = [0, 1, -1, 16777217, 16777219, -16777217, 33554435, INT_MAX, INT_MIN, 2147483520, -2147483585,
          123456789, -123456789, 0x40000081, 7, -7]
    r = Rng(210)
    xs += r.ints(8, INT_MIN, INT_MAX)
    out = []
    for x in xs:
        out += [F.from_int(x, "rn"), F.from_int(u32(x), "rn"), F.from_int(u32(x), "rz"),
                F.from_int(x, "rd"), F.from_int(x, "ru")]
    n = len(xs)
    return Launch("int_to_float", 1, [n, 1, 1],
                  [buf("a", "i32", xs), buf("out", "f32", [0] * (5 * n))],
                  ["out"], {"out": out},
                  description="(float)int and (float)unsigned round to nearest even (2^24+1 -> 2^24); "
                              "__uint2float_rz, __int2float_rd/ru")


@kernel
def saturate() -> Launch:
    xs = f(-1.0, 0.0, 0.5, 1.0, 1.5, 0.99999994, 1.0000001, -1e-45, 1e-45, 1e30, -1e30) + [
        INF, NINF, QNAN_PAYLOAD, F.nan(), NEG_QNAN]
    n = len(xs)
    return Launch("saturate", 1, [n, 1, 1],
                  [buf("a", "f32", xs), buf("out", "f32", [0] * n)],
                  ["out"], {"out": [F.saturate(x) for x in xs]},
                  description="__saturatef = cvt.sat.f32.f32: clamp to [0, 1], NaN -> +0")


@kernel
def minmax_abs() -> Launch:
    pairs = [
        (np.float32(1.0), np.float32(2.0)), (np.float32(-1.0), np.float32(-2.0)),
        (np.float32(-0.0), np.float32(0.0)), (np.float32(0.0), np.float32(-0.0)),
        (QNAN_PAYLOAD, np.float32(3.0)), (np.float32(3.0), NEG_QNAN), (H(0xFFC00123), np.float32(-4.0)),
        (INF, np.float32(5.0)), (NINF, np.float32(5.0)), (MIN_SUB, F.neg(MIN_SUB)),
        (np.float32(-7.5), INF), (F.nan(), np.float32(0.0)),
    ]
    others = [
        (np.float32(-3.0), np.float32(2.0)), (np.float32(3.0), np.float32(-2.0)),
        (np.float32(-0.0), np.float32(1.0)), (np.float32(0.0), np.float32(-0.0)),
        (NINF, np.float32(1.0)), (INF, np.float32(-1.0)), (F.neg(MIN_SUB), np.float32(0.0)),
        (MAX, NZERO), (np.float32(-1e-30), np.float32(-5.0)), (np.float32(2.5), NINF),
        (np.float32(0.0), np.float32(0.0)), (np.float32(-8.0), np.float32(-8.0)),
    ]
    out = []
    for (x, y), (c, d) in zip(pairs, others, strict=True):
        out += [F.fmin(x, y), F.fmax(x, y), F.fabs(c), F.neg(d), F.copysign(c, d)]
    n = len(pairs)
    return Launch("minmax_abs", 1, [n, 1, 1],
                  [buf("a", "f32", [p[0] for p in pairs]), buf("b", "f32", [p[1] for p in pairs]),
                   buf("c", "f32", [p[0] for p in others]), buf("d", "f32", [p[1] for p in others]),
                   buf("out", "f32", [0] * (5 * n))],
                  ["out"], {"out": out},
                  description="fminf/fmaxf (one NaN operand is ignored, -0 < +0), fabsf, -x, copysignf "
                              "(no NaN reaches abs/neg/copysign)")


# bit k of the mask <-> setp op; bit 11 is isnan(x), then ordered !=, both numbers, unordered-or-==
FCOMPARE_BITS = ["eq", "neu", "lt", "le", "gt", "ge", "geu", "gtu", "leu", "ltu", "neu"]
FCOMPARE_HIGH = {12: "ne", 13: "num", 14: "equ"}


@kernel
def fcompare() -> Launch:
    pairs = [
        (np.float32(1.0), np.float32(2.0)), (np.float32(2.0), np.float32(1.0)),
        (np.float32(1.0), np.float32(1.0)), (np.float32(-0.0), np.float32(0.0)),
        (QNAN_PAYLOAD, np.float32(1.0)), (np.float32(1.0), F.nan()), (F.nan(), F.nan()),
        (INF, INF), (NINF, INF), (MIN_SUB, np.float32(0.0)), (SNAN, SNAN), (NINF, NEG_QNAN),
        (np.float32(-1.0), np.float32(-1.0)), (MAX, INF), (np.float32(0.1), np.float32(0.1)),
        (np.float32(-5.0), np.float32(3.0)),
    ]
    masks = []
    for x, y in pairs:
        m = 0
        for bit, op in enumerate(FCOMPARE_BITS):
            if F.compare(op, x, y):
                m |= 1 << bit
        if F.is_nan(x):
            m |= 1 << 11
        for bit, op in FCOMPARE_HIGH.items():
            if F.compare(op, x, y):
                m |= 1 << bit
        masks.append(m)
    n = len(pairs)
    return Launch("fcompare", 1, [n, 1, 1],
                  [buf("a", "f32", [p[0] for p in pairs]), buf("b", "f32", [p[1] for p in pairs]),
                   buf("out", "u32", [0] * n)],
                  ["out"], {"out": masks},
                  description="all ordered and unordered float comparisons as a bit mask (setp eq/ne/lt/le/"
                              "gt/ge, neu/ltu/leu/gtu/geu, nan/num), NaN pairs included")
