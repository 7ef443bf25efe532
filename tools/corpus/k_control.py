"""Control flow: divergence, early returns, data-dependent loops, calls, local arrays."""

from __future__ import annotations

import numpy as np

from . import f32 as F
from .ints import Rng, s32, u32
from .spec import Launch, Registry, buf, val

kernel = Registry()


@kernel
def branch_nested() -> Launch:
    r = Rng(301)
    n = 32
    inp = r.ints(n, -50, 50)
    inp[1], inp[3], inp[4], inp[6] = 7, 7, 10, 11
    out = []
    for i, v in enumerate(inp):
        if i % 2 == 0:
            rr = v * 2 if v > 10 else v - 100
        elif v < 0:
            rr = -v
        elif v == 7:
            rr = 777
        else:
            rr = v ^ i
        out.append(rr + i)
    return Launch("branch_nested", 1, [n, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * n)], ["out"], {"out": out},
                  description="nested if/else divergence on parity and data, reconverging "
                              "before a common tail")


@kernel
def switch_case() -> Launch:
    r = Rng(302)
    n = 32
    inp = list(range(-8, 8)) + r.ints(n - 16, -1000, 1000)
    out = []
    for v in inp:
        k = v & 7
        if k == 0:
            rr = 10
        elif k in (1, 2):
            rr = (v * 3 if k == 1 else 0) + 5
        elif k == 5:
            rr = -v
        elif k == 6:
            rr = v >> 1
        else:
            rr = v + 1000
        out.append(s32(rr))
    return Launch("switch_case", 1, [n, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * n)], ["out"], {"out": out},
                  description="switch with fall-through and default: many divergent paths in one warp")


@kernel
def early_return() -> Launch:
    xs = [np.float32(v) for v in (1.0, -2.0, 0.0, 150.0, 100.0, 3.5, -0.0, 1e-45, 99.99999, -1e-45,
                                  7.0, 200.0, 0.25, -100.0)]
    xs.append(F.from_bits(0x7FC01234))  # NaN: passes every test and reaches the multiply
    xs.append(np.float32(42.0))
    n = 14  # threads 14 and 15 return at once
    out = [np.float32(9.0)] * 16
    xs[13], xs[14] = xs[14], xs[13]  # put the NaN inside the active range
    exp = list(out)
    for i in range(n):
        x = xs[i]
        if F.compare("lt", x, np.float32(0.0)):
            exp[i] = np.float32(-1.0)
            continue
        y = np.float32(100.0) if F.compare("gt", x, np.float32(100.0)) else x
        if F.compare("eq", y, np.float32(0.0)):
            continue
        exp[i] = F.mul(y, np.float32(0.5))
    return Launch("early_return", 1, [16, 1, 1],
                  [buf("in", "f32", xs), buf("out", "f32", out), val("n", "i32", n)],
                  ["out"], {"out": exp},
                  description="per-thread early returns and a select: threads >= n leave at once, negatives "
                              "write -1, zeros (+-0) write nothing, others min(x, 100) * 0.5")


@kernel
def loop_break() -> Launch:
    r = Rng(303)
    t, row_len = 8, 8
    data = r.ints(t * row_len, -20, 40)
    threshold = r.ints(t, 0, 45)
    threshold[0] = 100  # never found
    found, skipped = [], []
    for k in range(t):
        idx, skip = -1, 0
        for j in range(row_len):
            v = data[k * row_len + j]
            if v < 0:
                skip += 1
                continue
            if v > threshold[k]:
                idx = j
                break
        found.append(idx)
        skipped.append(skip)
    return Launch("loop_break", 1, [t, 1, 1],
                  [buf("data", "i32", data), buf("threshold", "i32", threshold),
                   buf("found", "i32", [0] * t), buf("skipped", "i32", [0] * t),
                   val("row_len", "i32", row_len)],
                  ["found", "skipped"], {"found": found, "skipped": skipped},
                  description="data-dependent loop with continue and break: first element > "
                              "threshold per row")


@kernel
def collatz() -> Launch:
    start = [1, 2, 3, 6, 7, 9, 27, 97, 171, 31, 41, 47, 54, 55, 62, 63,
             73, 71, 82, 91, 25, 5, 8, 16, 100, 99, 15, 11, 19, 37, 43, 64]
    steps = []
    for x in start:
        n = 0
        while x != 1:
            x = u32(3 * x + 1) if x & 1 else x >> 1
            n += 1
        steps.append(n)
    return Launch("collatz", 2, [16, 1, 1],
                  [buf("start", "u32", start), buf("steps", "u32", [0] * len(start))],
                  ["steps"], {"steps": steps},
                  description="Collatz step counts: a data-dependent while loop (0 to 124 trips) per thread")


@kernel
def gcd() -> Launch:
    r = Rng(304)
    a = [0, 5, 0, 12, 17, 1071, 0xFFFFFFFF, 65536, 100000, 46368] + r.ints(6, 1, 100000)
    b = [5, 0, 0, 18, 5, 462, 0xFFFFFFFE, 4096, 300007, 28657] + r.ints(6, 1, 100000)
    n = len(a)
    g, lcm = [], []
    for x0, y0 in zip(a, b, strict=True):
        x, y = x0, y0
        while y != 0:
            x, y = y, x % y
        g.append(x)
        lcm.append(0 if x == 0 else u32((x0 // x) * y0))
    return Launch("gcd", 1, [n, 1, 1],
                  [buf("a", "u32", a), buf("b", "u32", b), buf("g", "u32", [0] * n),
                   buf("l", "u32", [0] * n)],
                  ["g", "l"], {"g": g, "l": lcm},
                  description="Euclid's gcd with unsigned % in a data-dependent loop; lcm = a/g*b mod 2^32")


@kernel
def prime_count() -> Launch:
    lo = [-5, 0, 1, 2, 14, 89, 100, 113, 500, 887, 1000, 1320, 1500, 1900, 1987, 2000]
    count, largest = [], []
    for base in lo:
        c = big = 0
        for n in range(base, base + 16):
            if n < 2:
                continue
            if all(n % d for d in range(2, int(n ** 0.5) + 1)):
                c += 1
                big = n
        count.append(c)
        largest.append(big)
    t = len(lo)
    return Launch("prime_count", 1, [t, 1, 1],
                  [buf("lo", "i32", lo), buf("count", "i32", [0] * t), buf("largest", "i32", [0] * t)],
                  ["count", "largest"], {"count": count, "largest": largest},
                  description="nested loops with continue and break: primes in [lo, lo+16) by trial division")


@kernel
def device_call() -> Launch:
    r = Rng(305)
    n = 16
    inp = [0, 1, -1, 2, -2, 499, -500] + r.ints(n - 7, -500, 500)

    def poly(x: int, k: int) -> int:
        acc = 1
        for j in range(k):
            acc = acc * x + j
        return acc

    out = [s32(poly(v, 3)) if v & 1 else s32(poly(v + 1, 2) - 1) for v in inp]
    return Launch("device_call", 1, [n, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * n)], ["out"], {"out": out},
                  description="a __noinline__ device function (.func + call) from both sides of a branch")


@kernel
def local_hist() -> Launch:
    r = Rng(306)
    t, n = 8, 6
    inp = r.ints(t * n, -40, 40)
    out = []
    for k in range(t):
        h = [j - k for j in range(8)]
        for j in range(n):
            v = inp[k * n + j]
            h[v & 7] += v
        best = 0
        for j in range(1, 8):
            if h[j] > h[best]:
                best = j
        out.append(s32(best * 1000 + h[best]))
    return Launch("local_hist", 1, [t, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * t), val("n", "i32", n)],
                  ["out"], {"out": out},
                  description="per-thread local array h[8] indexed by data (ld.local/st.local via %SPL)")


@kernel
def horner_nounroll() -> Launch:
    r = Rng(307)
    degree = 7
    coef = r.floats(degree + 1, -2, 2)
    xs = r.floats(14, -1.5, 1.5) + [np.float32(1.0), np.float32(-1.0)]
    ys = []
    for x in xs:
        acc = coef[degree]
        for k in range(degree - 1, -1, -1):
            acc = F.fma(acc, x, coef[k])
        ys.append(acc)
    n = len(xs)
    return Launch("horner_nounroll", 1, [n, 1, 1],
                  [buf("coef", "f32", coef), buf("x", "f32", xs), buf("y", "f32", [0] * n),
                   val("degree", "i32", degree)],
                  ["y"], {"y": ys},
                  description="Horner's rule in a rolled loop (#pragma unroll 1): acc = fma(acc, x, c[k])")
