"""Warp-level primitives: shuffles (down/up/xor/idx with PTX clamping and widths), votes, __syncwarp."""

from __future__ import annotations

from collections.abc import Sequence

from . import f32 as F
from .ints import Rng, popc, s32
from .spec import Launch, Registry, buf

kernel = Registry()

WARP = 32


def shfl(values: Sequence, mode: str, b, width: int = 32) -> list:
    """PTX shfl.sync.{up,down,bfly,idx}.b32 over one full warp, with the ``c`` operand CUDA's
    __shfl_*_sync(mask, v, b, width) passes: ((32 - width) << 8) | (0 for up, 0x1f otherwise).
    ``b`` is one value or one per lane. A lane whose source is out of its segment reads itself."""
    cval = 0 if mode == "up" else 0x1F
    seg = (32 - width) & 0x1F  # c[12:8]
    out = []
    for lane in range(WARP):
        bv = (b[lane] if isinstance(b, (list, tuple)) else b) & 0x1F
        max_lane = (lane & seg) | (cval & ~seg & 0x1F)
        min_lane = lane & seg
        if mode == "up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == "down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bv
            ok = j <= max_lane
        elif mode == "idx":
            j = min_lane | (bv & ~seg & 0x1F)
            ok = j <= max_lane
        else:
            raise ValueError(mode)
        out.append(values[j] if ok else values[lane])
    return out


@kernel
def shfl_reduce() -> Launch:
    r = Rng(601)
    inp = r.floats(WARP, -10, 10)
    v = list(inp)
    for offset in (16, 8, 4, 2, 1):
        other = shfl(v, "down", offset)
        v = [F.add(v[k], other[k]) for k in range(WARP)]
    return Launch("shfl_reduce", 1, [WARP, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * WARP)], ["out"], {"out": v},
                  description="__shfl_down_sync float sum (offsets 16..1); every lane's value is written, "
                              "lanes whose source is past lane 31 add their own value")


@kernel
def shfl_broadcast() -> Launch:
    r = Rng(602)
    inp = r.ints(WARP, -10**6, 10**6)
    src = [37] + r.ints(WARP - 1, 0, 40)
    a = shfl(inp, "idx", src[0])
    b = shfl(inp, "idx", [lane + 5 for lane in range(WARP)])
    c = shfl(inp, "idx", src, width=8)
    out = []
    for lane in range(WARP):
        out += [a[lane], b[lane], c[lane]]
    return Launch("shfl_broadcast", 1, [WARP, 1, 1],
                  [buf("in", "i32", inp), buf("src", "i32", src), buf("out", "i32", [0] * (3 * WARP))],
                  ["out"], {"out": out},
                  description="__shfl_sync: broadcast from lane src[0] mod 32, rotate by 5, and per-lane "
                              "sources within width-8 segments (source taken mod 8)")


@kernel
def shfl_scan_up() -> Launch:
    r = Rng(603)
    inp = r.ints(WARP, -1000, 1000)
    raw = shfl(inp, "up", 3)
    v = list(inp)
    offset = 1
    while offset < WARP:
        n = shfl(v, "up", offset)
        v = [s32(v[k] + n[k]) if k >= offset else v[k] for k in range(WARP)]
        offset *= 2
    return Launch("shfl_scan_up", 1, [WARP, 1, 1],
                  [buf("in", "i32", inp), buf("scan", "i32", [0] * WARP), buf("raw", "i32", [0] * WARP)],
                  ["scan", "raw"], {"scan": v, "raw": raw},
                  description="inclusive warp scan with __shfl_up_sync; raw up-by-3 (lanes 0-2 "
                              "read themselves)")


@kernel
def shfl_xor_butterfly() -> Launch:
    r = Rng(604)
    inp = r.floats(WARP, -100, 100)
    s = list(inp)
    m = list(inp)
    for mask in (16, 8, 4, 2, 1):
        so = shfl(s, "bfly", mask)
        mo = shfl(m, "bfly", mask)
        s = [F.add(s[k], so[k]) for k in range(WARP)]
        m = [F.fmax(m[k], mo[k]) for k in range(WARP)]
    sw = shfl(inp, "bfly", 2, width=4)
    return Launch("shfl_xor_butterfly", 1, [WARP, 1, 1],
                  [buf("in", "f32", inp), buf("sum", "f32", [0] * WARP), buf("mx", "f32", [0] * WARP),
                   buf("sw", "f32", [0] * WARP)],
                  ["sum", "mx", "sw"], {"sum": s, "mx": m, "sw": sw},
                  description="__shfl_xor_sync butterfly all-reduce (float sum and fmaxf) and a width-4 xor")


@kernel
def vote() -> Launch:
    r = Rng(605)
    w0 = r.ints(WARP, -50, 150)
    w0 = [v if v != 0 else 1 for v in w0]
    w0[3] = 101
    w1 = r.ints(WARP, -100, 100)
    w1[9] = 0
    w1 = [min(v, 100) for v in w1]
    inp = w0 + w1
    ballot, any_, all_, odd, rank = [], [], [], [], []
    for w in range(2):
        vals = inp[w * WARP:(w + 1) * WARP]
        b = sum(1 << k for k in range(WARP) if vals[k] > 0)
        ballot.append(b)
        any_.append(int(any(v > 100 for v in vals)))
        all_.append(int(all(v != 0 for v in vals)))
        odd.append(sum(1 << k for k in range(1, WARP, 2) if vals[k] < 0))
        rank += [popc(b & ((1 << k) - 1)) for k in range(WARP)]
    assert any_ == [1, 0] and all_ == [1, 0]
    return Launch("vote", 1, [2 * WARP, 1, 1],
                  [buf("in", "i32", inp), buf("ballot", "u32", [0, 0]), buf("any", "i32", [0, 0]),
                   buf("all", "i32", [0, 0]), buf("odd_ballot", "u32", [0, 0]),
                   buf("rank", "i32", [0] * (2 * WARP))],
                  ["ballot", "any", "all", "odd_ballot", "rank"],
                  {"ballot": ballot, "any": any_, "all": all_, "odd_ballot": odd, "rank": rank},
                  description="__ballot_sync/__any_sync/__all_sync over 2 warps, a ballot in a divergent "
                              "branch (mask = odd lanes), popc ranks")


@kernel
def syncwarp_exchange() -> Launch:
    r = Rng(606)
    inp = r.ints(WARP, -10**6, 10**6)
    s = [2 * v for v in inp]
    s = [s[(k + 1) & 31] + s[(k + 31) & 31] for k in range(WARP)]
    out = [s32(s[31 - k] - k) for k in range(WARP)]
    return Launch("syncwarp_exchange", 1, [WARP, 1, 1],
                  [buf("in", "i32", inp), buf("out", "i32", [0] * WARP)], ["out"], {"out": out},
                  description="__syncwarp between shared-memory writes and reads of neighbouring lanes")


@kernel
def warp_reduce_2warps() -> Launch:
    r = Rng(607)
    blocks, bs = 2, 64
    inp = r.floats(blocks * bs, -10, 10)
    out, partials = [], []
    for b in range(blocks):
        sums = []
        for w in range(2):
            v = list(inp[b * bs + w * WARP: b * bs + (w + 1) * WARP])
            for offset in (16, 8, 4, 2, 1):
                other = shfl(v, "down", offset)
                v = [F.add(v[k], other[k]) for k in range(WARP)]
            sums.append(v[0])
        partials += sums
        out.append(F.add(sums[0], sums[1]))
    return Launch("warp_reduce_2warps", blocks, [bs, 1, 1],
                  [buf("in", "f32", inp), buf("out", "f32", [0] * blocks),
                   buf("partials", "f32", [0] * (2 * blocks))],
                  ["out", "partials"], {"out": out, "partials": partials},
                  description="shuffle reduction per warp, warp sums through shared memory and "
                              "__syncthreads, 2 blocks x 64 threads")


