"""HeCBench kernels (zjin-lcf/HeCBench) and two small hash sources: expected outputs from each
kernel's meaning (exact Python integers with explicit wraparound; float32 rounded as the PTX does)."""

from __future__ import annotations

import numpy as np
from corpus import f32 as F
from corpus.ints import Rng, popc, s32, u32, u64
from corpus.spec import Launch, Registry, buf, val

kernel = Registry()
M64 = (1 << 64) - 1


# ---------------------------------------------------------------------------------------------
# popcount


def _popcount_launch(
    name: str, kernel_name: str, seed: int, n: int, threads: int, blocks: int, max_bits: int = 64
) -> Launch:
    r = Rng(seed)
    data = []
    for _ in range(n):
        k = r.int(0, max_bits)
        positions = r.shuffle(list(range(64)))[:k]
        data.append(sum(1 << p for p in positions))
    data[0] = 0
    data[1] = M64
    return Launch(
        kernel_name,
        blocks,
        [threads, 1, 1],
        [buf("data", "u64", data), buf("r", "i32", [-1] * n), val("length", "i32", n)],
        ["r"],
        {"r": [popc(x) for x in data]},
        description=f"{name}: population count of 64-bit words",
    )


@kernel
def popcount_pc1() -> Launch:
    return _popcount_launch("SWAR bit counting with shifts", "pc1", 5001, 20, 16, 2)


@kernel
def popcount_pc2() -> Launch:
    return _popcount_launch("SWAR bit counting with a multiply by 0x0101..01", "pc2", 5002, 20, 16, 2)


@kernel
def popcount_pc3() -> Launch:
    launch = _popcount_launch("x &= x - 1 per set bit (Kernighan)", "pc3", 5003, 12, 16, 1, max_bits=16)
    d = launch.arg("data").data
    d[1] = (1 << 63) | 1  # replace the all-ones word: the loop runs once per set bit
    launch.expected["r"] = [popc(x) for x in d]
    return launch


# ---------------------------------------------------------------------------------------------
# binary search (size_t indices)


def _bsearch_data(seed: int, n: int, nz: int) -> tuple[list[np.float32], list[np.float32]]:
    r = Rng(seed)
    a = sorted(set(r.ints(n * 3, -500, 500)))[:n]
    while len(a) < n:
        a.append(a[-1] + 1)
    a = [np.float32(v) for v in sorted(a)]
    z = [np.float32(v + 0.5) for v in r.ints(nz - 6, -520, 520)]
    z += [a[0], a[-1], a[n // 2], np.float32(-1000), np.float32(1000), F.sub(a[3], np.float32(0.25))]
    return a, z


@kernel
def bsearch_bs() -> Launch:
    n, nz = 16, 20
    a, z = _bsearch_data(5004, n, nz)
    res = []
    for key in z:
        low, high = 0, n
        while high - low > 1:
            mid = low + (high - low) // 2
            if float(key) < float(a[mid]):
                high = mid
            else:
                low = mid
        res.append(low)
    return Launch(
        "kernel_BS_float",
        2,
        [16, 1, 1],
        [
            buf("acc_a", "f32", a),
            buf("acc_z", "f32", z),
            buf("acc_r", "u64", [M64] * nz),
            val("zSize", "u64", nz),
            val("n", "u64", n),
        ],
        ["acc_r"],
        {"acc_r": res},
        description="lower-bound binary search of 20 float keys in 16 sorted floats (size_t indices)",
    )


@kernel
def bsearch_bs2() -> Launch:
    n, nz = 12, 20
    a, z = _bsearch_data(5005, n, nz)
    nbits = n.bit_length()
    res = []
    for key in z:
        k = 1 << (nbits - 1)
        idx = k if float(a[k]) <= float(key) else 0
        k >>= 1
        while k:
            rr = idx | k
            if rr < n and float(key) >= float(a[rr]):
                idx = rr
            k >>= 1
        res.append(idx)
    return Launch(
        "kernel_BS2_float",
        2,
        [16, 1, 1],
        [
            buf("acc_a", "f32", a),
            buf("acc_z", "f32", z),
            buf("acc_r", "u64", [M64] * nz),
            val("zSize", "u64", nz),
            val("n", "u64", n),
        ],
        ["acc_r"],
        {"acc_r": res},
        description="bitwise binary search (set bits from the top) of 20 keys in 12 sorted floats",
    )


# ---------------------------------------------------------------------------------------------
# point in polygon


@kernel
def pnpoly_opt() -> Launch:
    r = Rng(5006)
    n = 40
    verts = [(0.0, 0.0), (4.0, -1.0), (6.0, 2.0), (3.5, 2.0), (5.0, 5.0), (-1.0, 3.0)]  # edge 2-3 horizontal
    vx = [np.float32(x) for x, _ in verts]
    vy = [np.float32(y) for _, y in verts]
    pts = r.floats(2 * n, -1.5, 6.5)
    pts[0], pts[1] = np.float32(2.0), np.float32(1.0)  # inside
    pts[2], pts[3] = np.float32(3.0), np.float32(2.0)  # on the horizontal edge's line
    bitmap = [-1] * n
    for i in range(n):
        px, py = pts[2 * i], pts[2 * i + 1]
        c = 0
        k = len(verts) - 1
        for j in range(len(verts)):
            slope = F.div(F.sub(vx[k], vx[j]), F.sub(vy[k], vy[j]))
            between = (float(vy[j]) > float(py)) != (float(vy[k]) > float(py))
            # PTX: fma.rn.f32 slope * (p.y - vj.y) + vj.x
            if between and float(px) < float(F.fma(slope, F.sub(py, vy[j]), vx[j])):
                c = 1 - c
            k = j
        bitmap[i] = c
    flat_v = [c for xy in zip(vx, vy, strict=True) for c in xy]
    return Launch(
        "pnpoly_opt_2",
        2,
        [16, 1, 1],
        [
            buf("bitmap", "i32", [-1] * n),
            buf("point", "f32", pts),
            buf("vertex", "f32", flat_v),
            val("n", "i32", n),
        ],
        ["bitmap"],
        {"bitmap": bitmap},
        description="crossing-number point-in-polygon test of 40 points, 2 per thread (template tile 2)",
    )


# ---------------------------------------------------------------------------------------------
# hashes


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int) -> tuple[int, int]:
    """MurmurHash3_x64_128 as Austin Appleby's reference defines it."""
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
    h1 = h2 = seed
    nblocks = len(data) // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        k1 = (_rotl64((k1 * c1) & M64, 31) * c2) & M64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & M64
        h1 = (h1 * 5 + 0x52DCE729) & M64
        k2 = (_rotl64((k2 * c2) & M64, 33) * c1) & M64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & M64
        h2 = (h2 * 5 + 0x38495AB5) & M64
    tail = data[16 * nblocks :]
    k1 = int.from_bytes(tail[:8], "little") if tail else 0
    k2 = int.from_bytes(tail[8:16], "little") if len(tail) > 8 else 0
    if len(tail) > 8:
        h2 ^= (_rotl64((k2 * c2) & M64, 33) * c1) & M64
    if tail:
        h1 ^= (_rotl64((k1 * c1) & M64, 31) * c2) & M64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    h1, h2 = _fmix64(h1), _fmix64(h2)
    h1 = (h1 + h2) & M64
    h2 = (h2 + h1) & M64
    return h1, h2


@kernel
def murmurhash3_x64_128() -> Launch:
    r = Rng(5007)
    lengths = [0, 1, 7, 8, 9, 15, 16, 17]
    keys = [bytes(r.bits(n, 8)) for n in lengths]
    offsets, blob = [], b""
    for k in keys:
        offsets.append(len(blob))
        blob += k
    blob += bytes((-len(blob)) % 4)
    out = []
    for i, k in enumerate(keys):
        out += list(murmur3_x64_128(k, i))
    n = len(keys)
    return Launch(
        "MurmurHash3_x64_128_kernel",
        1,
        [8, 1, 1],
        [
            buf("d_keys", "u8", list(blob)),
            buf("d_length", "u32", offsets),
            buf("length", "u32", lengths),
            buf("d_out", "u64", [0] * (2 * n)),
            val("numKeys", "u32", n),
        ],
        ["d_out"],
        {"d_out": out},
        description="MurmurHash3 x64 128-bit of 8 keys (every tail length class), seed = key index",
    )


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & 0xFFFFFFFF


def jenkins_hashword(words: list[int], length: int, initval: int) -> int:
    """The kernel's hash: lookup3-style mix over 12-byte blocks, masked tail, final()."""
    a = b = c = u32(0xDEADBEEF + length + initval)
    k = 0
    while length > 12:
        a, b, c = u32(a + words[k]), u32(b + words[k + 1]), u32(c + words[k + 2])
        a = u32(a - c)
        a ^= _rot(c, 4)
        c = u32(c + b)
        b = u32(b - a)
        b ^= _rot(a, 6)
        a = u32(a + c)
        c = u32(c - b)
        c ^= _rot(b, 8)
        b = u32(b + a)
        a = u32(a - c)
        a ^= _rot(c, 16)
        c = u32(c + b)
        b = u32(b - a)
        b ^= _rot(a, 19)
        a = u32(a + c)
        c = u32(c - b)
        c ^= _rot(b, 4)
        b = u32(b + a)
        length -= 12
        k += 3
    k0, k1, k2 = words[k], words[k + 1], words[k + 2]
    if length == 0:
        return c
    masks = {1: 0xFF, 2: 0xFFFF, 3: 0xFFFFFF, 0: 0xFFFFFFFF}
    if length >= 9:
        c = u32(c + (k2 & masks[length - 8 if length < 12 else 0]))
        b, a = u32(b + k1), u32(a + k0)
    elif length >= 5:
        b = u32(b + (k1 & masks[length - 4 if length < 8 else 0]))
        a = u32(a + k0)
    else:
        a = u32(a + (k0 & masks[length if length < 4 else 0]))
    c ^= b
    c = u32(c - _rot(b, 14))
    a ^= c
    a = u32(a - _rot(c, 11))
    b ^= a
    b = u32(b - _rot(a, 25))
    c ^= b
    c = u32(c - _rot(b, 16))
    a ^= c
    a = u32(a - _rot(c, 4))
    b ^= a
    b = u32(b - _rot(a, 14))
    c ^= b
    c = u32(c - _rot(b, 24))
    return c


@kernel
def jenkins_hash() -> Launch:
    r = Rng(5008)
    lengths = [0, 5, 12, 13, 27, 60]
    n, threads = len(lengths), 8
    initvals = r.bits(n)
    keys = []
    for length in lengths:
        data = bytes(r.bits(length, 8)) + bytes(64 - length)  # bytes past the key are zero
        keys += [int.from_bytes(data[4 * w : 4 * w + 4], "little") for w in range(16)]
    out = [jenkins_hashword(keys[16 * i : 16 * i + 16], lengths[i], initvals[i]) for i in range(n)]
    return Launch(
        "jk3_hash_kernel",
        1,
        [threads, 1, 1],
        [
            buf("lengths", "u32", lengths),
            buf("initvals", "u32", initvals),
            buf("keys", "u32", keys),
            buf("out", "u32", [0] * n),
            val("N", "i32", n),
        ],
        ["out"],
        {"out": out},
        description="Bob Jenkins' lookup3-style hash of 6 keys (0..60 bytes), one per thread",
    )


def _murmur32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & 0xFFFFFFFF
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def kiss_u32_stream(seed: int, count: int) -> list[int]:
    """KISS (Marsaglia) with the HeCBench seeding: 8 rounds of MurmurHash3's 32-bit finalizer."""
    w = seed if seed else 4294967295
    for _ in range(8):
        x = _murmur32(w)
        y = _murmur32(x)
        z = _murmur32(y)
        w = _murmur32(z)
    out = []
    for _ in range(count):
        x = u32(69069 * x + 12345)
        y ^= (y << 13) & 0xFFFFFFFF
        y ^= y >> 17
        y ^= (y << 5) & 0xFFFFFFFF
        t = 698769069 * z + w
        w = t >> 32
        z = t & 0xFFFFFFFF
        out.append(u32(x + y + z))
    return out


@kernel
def kiss_rng() -> Launch:
    n, threads, seed = 40, 16, 42
    out = [0] * n
    for tid in range(threads):
        stream = kiss_u32_stream(_murmur32(u32(seed + tid)), len(range(tid, n, threads)))
        for k, i in enumerate(range(tid, n, threads)):
            out[i] = stream[k]
    return Launch(
        "kiss_u32",
        1,
        [threads, 1, 1],
        [buf("out", "u32", [0] * n), val("n", "u64", n), val("seed", "u32", seed)],
        ["out"],
        {"out": out},
        description="KISS random numbers (LCG + xorshift + multiply-with-carry), murmur-seeded per thread",
    )


def fnv1a_64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & M64
    return h


@kernel
def fnv1a64_hash() -> Launch:
    r = Rng(5009)
    lengths = [0, 1, 2, 3, 5, 8, 11, 16, 20, 23]
    keys = [bytes(r.bits(n, 8)) for n in lengths]
    keys[1] = b"\x80"  # a byte >= 0x80 read through the original's (signed) char pointer
    offsets, blob = [], b""
    for k in keys:
        offsets.append(len(blob))
        blob += k
    blob += bytes((-len(blob)) % 4)
    n = len(keys)
    return Launch(
        "fnv1a64_kernel",
        1,
        [16, 1, 1],
        [
            buf("keys", "u8", list(blob)),
            buf("offsets", "u32", offsets),
            buf("lengths", "u32", lengths),
            buf("out", "u64", [0] * n),
            val("numKeys", "i32", n),
        ],
        ["out"],
        {"out": [fnv1a_64(k) for k in keys]},
        description="FNV-1a 64-bit hash of 10 byte strings",
    )


# ---------------------------------------------------------------------------------------------
# Mandelbrot


@kernel
def mandelbrot() -> Launch:
    rows, cols, max_it = 4, 3, 6
    four = np.float32(4.0)
    out = []
    for i in range(rows):
        for j in range(cols):
            # ScaleRow/ScaleCol: -1.5f + i * (2.0f / rows): div.rn.f32, then fma.rn.f32 in the PTX
            cr = F.fma(F.div(np.float32(2.0), F.from_int(rows)), F.from_int(i), np.float32(-1.5))
            ci = F.fma(F.div(np.float32(2.0), F.from_int(cols)), F.from_int(j), np.float32(-1.0))
            zr, zi = np.float32(0.0), np.float32(0.0)
            count = 0
            for _ in range(max_it):
                rr, ii = F.mul(zr, zr), F.mul(zi, zi)
                if float(F.add(rr, ii)) >= float(four):
                    break
                # PTX: (r*r - im*im) + c.real, rounded separately; 2*r*im + c.imag as fma(r + r, im, c.imag)
                zr, zi = F.add(F.sub(rr, ii), cr), F.fma(F.add(zr, zr), zi, ci)
                count += 1
            out.append(count)
    return Launch(
        "mandel",
        [1, 2, 1],
        [4, 2, 1],
        [
            buf("b", "i32", [-1] * (rows * cols)),
            buf("p", "i32", [rows, cols, max_it]),
            val("rows", "i32", rows),
            val("cols", "i32", cols),
        ],
        ["b"],
        {"b": out},
        description="Mandelbrot escape counts of a 4 x 3 image (6 iterations), 2-D grid",
    )


# ---------------------------------------------------------------------------------------------
# magic-number division


def _fastdiv(d: int) -> tuple[int, int, int]:
    """int_fastdiv::update_magic_numbers (Hacker's Delight 10-1) in exact integers: (M, s, n_add_sign)."""
    if d in (1, -1):
        return 0, -1, d
    two31 = 0x80000000
    ad = u32(-d) if d < 0 else (1 if d == 0 else d)
    t = two31 + (u32(d) >> 31)
    anc = t - 1 - t % ad
    p = 31
    q1, r1 = two31 // anc, two31 - (two31 // anc) * anc
    q2, r2 = two31 // ad, two31 - (two31 // ad) * ad
    while True:
        p += 1
        q1, r1 = 2 * q1, 2 * r1
        if r1 >= anc:
            q1, r1 = q1 + 1, r1 - anc
        q2, r2 = 2 * q2, 2 * r2
        if r2 >= ad:
            q2, r2 = q2 + 1, r2 - ad
        q1, r1, q2, r2 = u32(q1), u32(r1), u32(q2), u32(r2)
        delta = u32(ad - r2)
        if not (q1 < delta or (q1 == delta and r1 == 0)):
            break
    m = s32(q2 + 1)
    if d < 0:
        m = s32(-m)
    sign = 1 if (d > 0 and m < 0) else (-1 if (d < 0 and m > 0) else 0)
    return m, p - 32, sign


def _fast_quotient(n: int, d: int) -> int:
    m, s, sign = _fastdiv(d)
    q = s32(u64(m * n) >> 32)
    q = s32(q + n * sign)
    if s >= 0:
        q >>= s
        q = s32(q + (u32(q) >> 31))
    return q


@kernel
def idivide_check() -> Launch:
    d, blocks, bs = -7, 1, 16
    errors = []
    for x in range(blocks * bs):
        for n in (x, -x):
            truth = abs(n) // abs(d) * (1 if (n < 0) == (d < 0) else -1)
            if truth != _fast_quotient(n, d):
                errors.append((n, truth, _fast_quotient(n, d)))
    assert not errors, errors  # Hacker's Delight's magic numbers are exact for every 32-bit dividend
    return Launch(
        "check",
        blocks,
        [bs, 1, 1],
        [val("d", "i32", d), buf("results", "i32", [0] * 4)],
        ["results"],
        {"results": [0, 0, 0, 0]},
        description="magic-number division by -7 checked against '/' for 0..15 and their negatives",
    )


def kiss_u64_stream(seed: int, count: int) -> list[int]:
    """KISS, 64-bit variant (LCG, xorshift 13/17/43, carry add), seeded by MurmurHash3's 64-bit finalizer."""
    w = seed if seed else 4294967295
    for _ in range(8):
        x = _fmix64(w)
        y = _fmix64(x)
        z = _fmix64(y)
        w = _fmix64(z)
    out = []
    for _ in range(count):
        x = (6906969069 * x + 1234567) & M64
        y ^= (y << 13) & M64
        y ^= y >> 17
        y ^= (y << 43) & M64
        t = ((z << 58) + w) & M64
        w = z >> 6
        z = (z + t) & M64
        w = (w + (1 if z < t else 0)) & M64
        out.append((x + y + z) & M64)
    return out


@kernel
def kiss_rng_u64() -> Launch:
    n, threads, seed = 10, 4, 42
    out = [0] * n
    for tid in range(threads):
        idx = list(range(tid, n, threads))
        for k, v in zip(idx, kiss_u64_stream(_murmur32(u32(seed + tid)), len(idx)), strict=True):
            out[k] = v
    return Launch(
        "kiss_u64",
        1,
        [threads, 1, 1],
        [buf("out", "u64", [0] * n), val("n", "u64", n), val("seed", "u32", seed)],
        ["out"],
        {"out": out},
        description="64-bit KISS random numbers (64-bit murmur seeding, xorshift 13/17/43, carry add)",
    )


# ---------------------------------------------------------------------------------------------
# number-theoretic transform over p = 2^64 - 2^32 + 1

P_NTT = (1 << 64) - (1 << 32) + 1


def _add_modp(x: int, y: int) -> int:
    """_add_modP as written: a wrapped sum folds 2^64 = 2^32 - 1 (mod p) back in, then one subtraction."""
    ret = (x + y) & M64
    if ret < x:
        ret = (ret + 0xFFFFFFFF) & M64
    if ret >= P_NTT:
        ret -= P_NTT
    return ret


def _sub_modp(x: int, y: int) -> int:
    """_sub_modP as written: a wrapped difference takes 2^32 - 1 back out."""
    ret = (x - y) & M64
    if ret > x:
        ret = (ret - 0xFFFFFFFF) & M64
    return ret


M32 = 0xFFFFFFFF


def _uint96_modp(x: list[int]) -> None:
    """_uint96_modP as written, word by word (uint32 wraparound, int borrow flags)."""
    s = x[1] + x[2]
    b = 1 if s > M32 else 0
    x[1] = s & M32
    if x[0] < x[2]:
        if x[1] < 1:
            x[1] = (x[1] - 1) & M32
            b -= 1
    x[0] = (x[0] - x[2]) & M32
    if b == 1:
        s = x[0] + M32
        if s > M32:
            x[1] = (x[1] + 1) & M32
        x[0] = s & M32


def _uint128_modp(x: list[int]) -> None:
    _uint96_modp(x)
    b = 0
    if x[0] < x[3]:
        if x[1] < 1:
            x[1] = (x[1] - 1) & M32
            b = -1
    x[0] = (x[0] - x[3]) & M32
    if b == -1:
        if x[0] < M32:
            x[1] = (x[1] - 1) & M32
        x[0] = (x[0] - M32) & M32


def _uint160_modp(x: list[int]) -> None:
    _uint128_modp(x)
    b = -1 if x[1] < x[4] else 0
    x[1] = (x[1] - x[4]) & M32
    if b == -1:
        if x[0] < M32:
            x[1] = (x[1] - 1) & M32
        x[0] = (x[0] - M32) & M32


def _ls_modp(tx: int, sh: int) -> int:
    """_ls_modP(x, l) as written for the shifts ntt8 uses (24: 3 words, 48: 4 words, 72: 5 words).

    Its word reductions skip a borrow (x[0] < x[2] with x[1] >= 1 in _uint96_modP, and the like), so
    the result is not always x * 2^l mod p; the expected values follow the code as written."""
    b = [0] * 7
    if sh < 32:
        b[2], b[1], b[0] = (tx >> (64 - sh)) & M32, (tx >> (32 - sh)) & M32, (tx << sh) & M32
        _uint96_modp(b)
    elif sh < 64:
        b[3], b[2], b[1] = (tx >> (96 - sh)) & M32, (tx >> (64 - sh)) & M32, (tx << (sh - 32)) & M32
        _uint128_modp(b)
    else:
        b[4], b[3], b[2] = (tx >> (128 - sh)) & M32, (tx >> (96 - sh)) & M32, (tx << (sh - 64)) & M32
        _uint160_modp(b)
    v = b[0] | (b[1] << 32)
    if v > P_NTT:
        v -= P_NTT
    return v


def ntt8_model(x: list[int]) -> list[int]:
    """ntt8() step by step with the helpers above."""
    s = [0] * 8
    s[0], s[1] = _add_modp(x[0], x[4]), _sub_modp(x[0], x[4])
    s[2], s[3] = _add_modp(x[2], x[6]), _sub_modp(x[2], x[6])
    s[4], s[5] = _add_modp(x[1], x[5]), _sub_modp(x[1], x[5])
    s[6], s[7] = _add_modp(x[3], x[7]), _sub_modp(x[3], x[7])
    y = [0] * 8
    y[0], y[2] = _add_modp(s[0], s[2]), _sub_modp(s[0], s[2])
    t = _ls_modp(s[3], 48)
    y[1], y[3] = _add_modp(s[1], t), _sub_modp(s[1], t)
    y[4], y[6] = _add_modp(s[4], s[6]), _sub_modp(s[4], s[6])
    t = _ls_modp(s[7], 48)
    y[5], y[7] = _add_modp(s[5], t), _sub_modp(s[5], t)
    s[0], s[4] = _add_modp(y[0], y[4]), _sub_modp(y[0], y[4])
    t = _ls_modp(y[5], 24)
    s[1], s[5] = _add_modp(y[1], t), _sub_modp(y[1], t)
    t = _ls_modp(y[6], 48)
    s[2], s[6] = _add_modp(y[2], t), _sub_modp(y[2], t)
    t = _ls_modp(y[7], 72)
    s[3], s[7] = _add_modp(y[3], t), _sub_modp(y[3], t)
    return s


@kernel
def ntt8() -> Launch:
    r = Rng(5010)
    n = 4
    src = [r.int(1, P_NTT - 1) for _ in range(8 * n)]
    src[0:8] = [1, 0, 0, 0, 0, 0, 0, 0]  # an impulse: every output 1
    src[8:16] = [P_NTT - 1] * 8  # the largest residues
    dst = []
    w = pow(2, 24, P_NTT)  # 2^24 is a primitive 8th root of unity mod p (2^96 = -1)
    for t in range(n):
        x = src[8 * t : 8 * t + 8]
        y = ntt8_model(x)
        dft = [sum(x[j] * pow(w, j * k, P_NTT) for j in range(8)) % P_NTT for k in range(8)]
        if t < 2:  # the impulse and the all-(p-1) inputs meet no skipped borrow: the DFT mod p exactly
            assert [v % P_NTT for v in y] == dft, "ntt8 is the 8-point DFT mod p, in natural order"
        dst += y
    return Launch(
        "ntt8_kernel",
        1,
        [n, 1, 1],
        [buf("src", "u64", src), buf("dst", "u64", [0] * (8 * n)), val("n", "i32", n)],
        ["dst"],
        {"dst": dst},
        description="8-point number-theoretic transforms mod 2^64 - 2^32 + 1 (64-bit modular add/sub/shift)",
    )
