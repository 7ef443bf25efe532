"""Integer and bit operations with PTX semantics, vectorized over the lanes of a warp.

Everything here works on numpy arrays of the instruction type (wrap-around arithmetic is
numpy's native behaviour on arrays). Operations that are rare in real kernels and awkward to
vectorize (``bfe``, ``bfi``, ``prmt``) run per lane in Python: correctness first.
"""

from __future__ import annotations

import numpy as np

DTYPES: dict[str, type] = {
    "u8": np.uint8, "s8": np.int8, "b8": np.uint8,
    "u16": np.uint16, "s16": np.int16, "b16": np.uint16, "f16": np.uint16, "bf16": np.uint16,
    "u32": np.uint32, "s32": np.int32, "b32": np.uint32, "f32": np.uint32,
    "u64": np.uint64, "s64": np.int64, "b64": np.uint64, "f64": np.uint64,
    "pred": np.bool_,
}  # fmt: skip
SIGNED = {"s8", "s16", "s32", "s64"}
BITS = {t: np.dtype(d).itemsize * 8 for t, d in DTYPES.items() if t != "pred"}
UNSIGNED_OF = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SIGNED_OF = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def as_unsigned(x: np.ndarray) -> np.ndarray:
    """Reinterpret an integer array as unsigned of the same width."""
    return x.view(UNSIGNED_OF[x.dtype.itemsize * 8]) if x.dtype.kind == "i" else x


def shl(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """``shl``: shift amounts greater than the width give 0 (PTX clamps, C would be UB)."""
    b = np.asarray(b).astype(np.uint32)
    big = b >= width
    s = np.where(big, 0, b).astype(a.dtype)
    return np.where(big, a.dtype.type(0), a << s)


def shr(a: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """``shr``: arithmetic for signed types (fill with the sign), logical for unsigned."""
    b = np.asarray(b).astype(np.uint32)
    big = b >= width
    if a.dtype.kind == "i":
        s = np.minimum(b, width - 1).astype(a.dtype)
        return a >> s
    s = np.where(big, 0, b).astype(a.dtype)
    return np.where(big, a.dtype.type(0), a >> s)


def mulhi(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High half of the full product, same width and signedness as the inputs."""
    w = a.dtype.itemsize * 8
    if w <= 32:
        wide = np.int64 if a.dtype.kind == "i" else np.uint64
        p = a.astype(wide) * b.astype(wide)
        return (p >> np.uint64(w) if wide is np.uint64 else p >> w).astype(a.dtype)
    ua, ub = as_unsigned(a).astype(np.uint64), as_unsigned(b).astype(np.uint64)
    hi = umulhi64(ua, ub)
    if a.dtype.kind == "i":
        hi = hi - np.where(a < 0, ub, np.uint64(0)) - np.where(b < 0, ua, np.uint64(0))
        return hi.view(np.int64)
    return hi


def umulhi64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of an unsigned 64x64 product, via 32-bit limbs."""
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a_lo, a_hi = a & m32, a >> s32
    b_lo, b_hi = b & m32, b >> s32
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    hh = a_hi * b_hi
    mid = (ll >> s32) + (lh & m32) + (hl & m32)
    return hh + (lh >> s32) + (hl >> s32) + (mid >> s32)


def mulwide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Full product of two 16/32-bit values in double width."""
    w = a.dtype.itemsize * 8
    dt = SIGNED_OF[2 * w] if a.dtype.kind == "i" else UNSIGNED_OF[2 * w]
    return a.astype(dt) * b.astype(dt)


def div_trunc(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Truncating quotient and remainder (C semantics); b must have no zeros."""
    if a.dtype.kind == "u":
        return a // b, a % b
    w = a.dtype.itemsize * 8
    if w < 64:
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        q = np.abs(a64) // np.abs(b64)
        q = np.where((a64 < 0) != (b64 < 0), -q, q)
        r = a64 - q * b64
        return q.astype(a.dtype), r.astype(a.dtype)
    # 64-bit: via Python ints (rare); INT64_MIN / -1 wraps like the hardware
    qs, rs = [], []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        q = abs(x) // abs(y)
        q = -q if (x < 0) != (y < 0) else q
        r = x - q * y
        qs.append(((q + 2**63) % 2**64) - 2**63)
        rs.append(r)
    return np.array(qs, dtype=np.int64), np.array(rs, dtype=np.int64)


def popc(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(as_unsigned(a)).astype(np.uint32)


def clz(a: np.ndarray) -> np.ndarray:
    w = a.dtype.itemsize * 8
    return (w - bit_length(as_unsigned(a))).astype(np.uint32)


def bit_length(u: np.ndarray) -> np.ndarray:
    """Number of significant bits of unsigned values (0 for 0), exact for 64-bit values."""
    u = u.astype(np.uint64)
    hi = (u >> np.uint64(32)).astype(np.float64)
    lo = (u & np.uint64(0xFFFFFFFF)).astype(np.float64)
    _, e_hi = np.frexp(hi)
    _, e_lo = np.frexp(lo)
    return np.where(hi > 0, e_hi + 32, e_lo).astype(np.int64)


def bfind(a: np.ndarray, shiftamt: bool) -> np.ndarray:
    """Position of the most significant non-sign bit; 0xFFFFFFFF when there is none."""
    w = a.dtype.itemsize * 8
    u = as_unsigned(a)
    if a.dtype.kind == "i":
        u = np.where(a < 0, ~u, u)
    pos = bit_length(u) - 1
    none = pos < 0
    if shiftamt:
        pos = (w - 1) - pos
    return np.where(none, np.uint32(0xFFFFFFFF), pos.astype(np.int64).astype(np.uint32))


def brev(a: np.ndarray) -> np.ndarray:
    w = a.dtype.itemsize * 8
    u = as_unsigned(a).astype(np.uint64)
    out = np.zeros_like(u)
    for i in range(w):
        out |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(w - 1 - i)
    return out.astype(UNSIGNED_OF[w]).view(a.dtype)


def bfe(a: np.ndarray, pos: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """Bit-field extract (``bfe``): sign-extends for signed types; length 0 gives 0."""
    w = a.dtype.itemsize * 8
    signed = a.dtype.kind == "i"
    av = as_unsigned(a).tolist()
    pv = (np.broadcast_to(pos, a.shape).astype(np.uint32) & 0xFF).tolist()
    lv = (np.broadcast_to(ln, a.shape).astype(np.uint32) & 0xFF).tolist()
    out = []
    for x, p, n in zip(av, pv, lv, strict=True):
        if n == 0:
            out.append(0)
            continue
        sbit = (x >> min(p + n - 1, w - 1)) & 1 if signed else 0
        d = 0
        for i in range(w):
            bit = (x >> (p + i)) & 1 if (i < n and p + i <= w - 1) else sbit
            d |= bit << i
        out.append(d)
    return np.array(out, dtype=UNSIGNED_OF[w]).view(a.dtype)


def bfi(a: np.ndarray, b: np.ndarray, pos: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """Bit-field insert (``bfi``): the low ``len`` bits of a into b at ``pos``."""
    w = b.dtype.itemsize * 8
    av = as_unsigned(np.broadcast_to(a, b.shape)).tolist()
    bv = as_unsigned(b).tolist()
    pv = (np.broadcast_to(pos, b.shape).astype(np.uint32) & 0xFF).tolist()
    lv = (np.broadcast_to(ln, b.shape).astype(np.uint32) & 0xFF).tolist()
    out = []
    for x, y, p, n in zip(av, bv, pv, lv, strict=True):
        f = y
        for i in range(n):
            if p + i > w - 1:
                break
            bit = (x >> i) & 1
            f = (f & ~(1 << (p + i))) | (bit << (p + i))
        out.append(f)
    return np.array(out, dtype=UNSIGNED_OF[w]).view(b.dtype)


def prmt(a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: str | None) -> np.ndarray:
    """Byte permute (``prmt.b32``), generic mode and the f4e/b4e/rc8/ecl/ecr/rc16 modes."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    av = np.broadcast_to(a, shape).astype(np.uint32).tolist()
    bv = np.broadcast_to(b, shape).astype(np.uint32).tolist()
    cv = np.broadcast_to(c, shape).astype(np.uint32).tolist()
    out = []
    for x, y, s in zip(av, bv, cv, strict=True):
        src = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
        r = 0
        if mode is None:
            for i in range(4):
                sel = (s >> (4 * i)) & 0xF
                byte = src[sel & 7]
                if sel & 8:
                    byte = 0xFF if byte & 0x80 else 0
                r |= byte << (8 * i)
        else:
            n = s & 3
            idx = {
                "f4e": [n, n + 1, n + 2, n + 3],
                "b4e": [n, (n - 1) % 8, (n - 2) % 8, (n - 3) % 8],
                "rc8": [n, n, n, n],
                "ecl": [max(i, n) for i in range(4)],
                "ecr": [min(i, n) for i in range(4)],
                "rc16": [2, 3, 2, 3] if n & 1 else [0, 1, 0, 1],
            }[mode]
            for i in range(4):
                r |= src[idx[i]] << (8 * i)
        out.append(r)
    return np.array(out, dtype=np.uint32)


def shf(a: np.ndarray, b: np.ndarray, c: np.ndarray, left: bool, wrap: bool) -> np.ndarray:
    """Funnel shift of the 64-bit value b:a (``shf.l``/``shf.r``, ``.wrap`` or ``.clamp``)."""
    c = np.asarray(c).astype(np.uint32)
    n = (c & np.uint32(31)) if wrap else np.minimum(c, np.uint32(32))
    n = n.astype(np.uint64)
    x = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(np.uint64)
    if left:
        # upper 32 bits of x << n (n <= 32 keeps everything needed in 64 bits after a 32-bit pre-shift)
        r = (x << n) >> np.uint64(32)
        r = np.where(n == 32, np.asarray(a).astype(np.uint64), r)
    else:
        r = x >> n
        r = np.where(n == 32, np.asarray(b).astype(np.uint64), r)
    return (r & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def lop3(a: np.ndarray, b: np.ndarray, c: np.ndarray, lut: int) -> np.ndarray:
    """Arbitrary 3-input logic function given by an 8-bit truth table."""
    r = np.zeros(np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c)), dtype=np.uint32)
    a, b, c = (np.asarray(x).astype(np.uint32) for x in (a, b, c))
    for k in range(8):
        if (lut >> k) & 1:
            ta = a if k & 4 else ~a
            tb = b if k & 2 else ~b
            tc = c if k & 1 else ~c
            r |= ta & tb & tc
    return r
