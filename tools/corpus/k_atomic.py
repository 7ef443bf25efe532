"""Atomics under contention. Only order-independent results are checked: integer sums, min/max,
bitwise ops, the same wrapping increment applied N times, and float sums that are exact."""

from __future__ import annotations

import numpy as np

from .ints import INT_MAX, INT_MIN, UINT_MAX, Rng, s32, u32
from .k_basic import exact_sum_f32
from .spec import Launch, Registry, buf, val

kernel = Registry()


@kernel
def atomic_add_contention() -> Launch:
    r = Rng(501)
    blocks, bs = 2, 64
    n = blocks * bs
    inp = r.ints(n, -10**6, 10**6)
    inp[0], inp[1] = INT_MAX, INT_MAX  # the sum wraps around
    counters0 = [7, -7, 1000]
    counters = [s32(counters0[0] + sum(inp)), s32(counters0[1] - sum(inp)), s32(counters0[2] + n)]
    old_sum = u32(sum(counters0[2] + k for k in range(n)))
    return Launch("atomic_add_contention", blocks, [bs, 1, 1],
                  [buf("in", "i32", inp), buf("counters", "i32", counters0), buf("old_sum", "u32", [0])],
                  ["counters", "old_sum"], {"counters": counters, "old_sum": [old_sum]},
                  description="128 threads atomicAdd/atomicSub one word each (wrapping); the returned "
                              "tickets are a permutation, so their sum is fixed")


@kernel
def atomic_minmax() -> Launch:
    r = Rng(502)
    blocks, bs = 2, 32
    inp = r.ints(blocks * bs, -10**9, 10**9)
    inp[10], inp[40] = INT_MIN, -1
    init = {"smax": 5, "smin": 5, "umax": 5, "umin": 0xFFFFFFF0}
    exp = {
        "smax": max([init["smax"]] + inp),
        "smin": min([init["smin"]] + inp),
        "umax": max([init["umax"]] + [u32(v) for v in inp]),
        "umin": min([init["umin"]] + [u32(v) for v in inp]),
    }
    return Launch("atomic_minmax", blocks, [bs, 1, 1],
                  [buf("in", "i32", inp), buf("smax", "i32", [init["smax"]]),
                   buf("smin", "i32", [init["smin"]]),
                   buf("umax", "u32", [init["umax"]]), buf("umin", "u32", [init["umin"]])],
                  ["smax", "smin", "umax", "umin"], {k: [v] for k, v in exp.items()},
                  description="atomicMax/atomicMin, signed and unsigned, from 64 threads")


@kernel
def atomic_inc_dec() -> Launch:
    blocks, bs = 2, 64
    n = blocks * bs
    limit = 10
    ctr0 = [3, 100, UINT_MAX - 20]
    a, b, c = ctr0
    for _ in range(n):
        a = 0 if a >= limit else a + 1
        b = limit if (b == 0 or b > limit) else b - 1
        c = 0 if c >= UINT_MAX else c + 1
    return Launch("atomic_inc_dec", blocks, [bs, 1, 1],
                  [buf("ctr", "u32", ctr0), val("limit", "u32", limit)],
                  ["ctr"], {"ctr": [a, b, c]},
                  description="128 x atomicInc (wraps to 0 past the limit) and atomicDec (wraps to the "
                              "limit); the same map applied N times, so order-independent")


@kernel
def atomic_cas() -> Launch:
    r = Rng(503)
    blocks, bs = 2, 32
    inp = r.bits(blocks * bs)
    prod = 3
    for v in inp:
        prod = u32(prod * v)
    return Launch("atomic_cas", blocks, [bs, 1, 1],
                  [buf("in", "u32", inp), buf("prod", "u32", [3]), buf("owner", "i32", [-1]),
                   buf("wins", "i32", [0])],
                  ["prod", "owner", "wins"], {"prod": [prod], "owner": [7], "wins": [1]},
                  description="atomicCAS retry loop for a wrapping product of 64 values; a CAS only one "
                              "thread can win")


@kernel
def atomic_exch() -> Launch:
    n = 32
    slots = [100 + i for i in range(n)]
    return Launch("atomic_exch", 1, [n, 1, 1],
                  [buf("flag", "i32", [0]), buf("winners", "i32", [0]), buf("slots", "i32", slots),
                   buf("old_vals", "i32", [0] * n)],
                  ["flag", "winners", "slots", "old_vals"],
                  {"flag": [1], "winners": [1], "slots": [3 * i + 1 for i in range(n)], "old_vals": slots},
                  description="atomicExch: 32 threads swap 1 into a flag, exactly one sees 0; "
                              "uncontended swaps return the old slot values")


@kernel
def histogram() -> Launch:
    r = Rng(504)
    blocks, bs, nbins = 2, 64, 8
    data = r.ints(blocks * bs, -50, 50)
    bins = [0] * nbins
    for v in data:
        b = v - nbins * int(v / nbins)  # C remainder
        if b < 0:
            b += nbins
        bins[b] += 1
    return Launch("histogram", blocks, [bs, 1, 1],
                  [buf("data", "i32", data), buf("bins", "i32", [0] * nbins), val("nbins", "i32", nbins)],
                  ["bins"], {"bins": bins},
                  description="global histogram: 128 threads atomicAdd into 8 bins (negative values wrap)")


@kernel
def atomic_float_add() -> Launch:
    r = Rng(505)
    blocks, bs = 2, 32
    n = blocks * bs
    inp = r.grid_floats(n, -128, 128, 0.125)
    acc0 = [np.float32(v) for v in (0.5, 0.0, 1.0, -1.0, 2.0)]
    acc = [exact_sum_f32([acc0[0]] + inp)]
    for lane in range(4):
        acc.append(exact_sum_f32([acc0[1 + lane]] + [np.float32(2 * float(inp[i])) for i in range(n)
                                                      if i & 3 == lane]))
    return Launch("atomic_float_add", blocks, [bs, 1, 1],
                  [buf("in", "f32", inp), buf("acc", "f32", acc0)], ["acc"], {"acc": acc},
                  description="float atomicAdd contention with multiples of 1/8: every partial sum is exact, "
                              "so the result is order-independent")


@kernel
def atomic_bitwise() -> Launch:
    r = Rng(506)
    n = 32
    inp = r.bits(n)
    acc0 = [UINT_MAX, 0x10000000, 0x12345678]
    a, o, x = acc0
    for v in inp:
        a &= v | 0x80000000
        o |= v & 0x0F0F0F0F
        x ^= v
    return Launch("atomic_bitwise", 1, [n, 1, 1],
                  [buf("in", "u32", inp), buf("acc", "u32", acc0)], ["acc"], {"acc": [a, o, x]},
                  description="atomicAnd / atomicOr / atomicXor from 32 threads on one word each")
