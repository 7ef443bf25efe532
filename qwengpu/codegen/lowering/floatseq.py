"""Float sequences: exact integer algorithms on the IEEE fields (rounding, packing,
64-bit integer <-> f32 conversions, f64 min/max/rint on the bits); several are shared with
``softfloat64`` through ``lower.Lowerer``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import M32
from qwengpu.codegen.lowering.int64 import add64, clz64, cmp64, mul64x64, neg64, shl64, shr64, sub64
from qwengpu.isa.instr import FALSE, Imm, P, R

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def flush(cx: LowerCtx, x: R | Imm) -> R:
    """ftz: a subnormal becomes a zero of the same sign (NaN payloads kept)."""
    return cx.op("frnd", x, ftz=True)


def unpack_norm(cx: LowerCtx, mag: R | Imm) -> tuple[R, R]:
    """(m, e) with m in [2^23, 2^24) and value = m * 2^(e - 150) for a positive finite float's
    magnitude bits (subnormals normalized: e may drop below 1); garbage for zero/inf/NaN."""
    e = cx.op("shr", mag, Imm(23))
    m = cx.op("and", mag, Imm(0x7FFFFF))
    cx.into(m, "or", m, Imm(0x800000), guard=cx.setp("ne", e, Imm(0)))
    e1 = cx.op("max", e, Imm(1), sign="u")
    k = cx.op("sub", cx.op("clz", m), Imm(8))
    cx.into(m, "shl", m, k)
    cx.into(e1, "sub", e1, k)
    return m, e1


def round_pack(cx: LowerCtx, sgn: R | Imm, be: R, m: R, F: int, sticky: R | Imm, rnd: str, ftz: bool) -> R:
    """Round ``m * 2^(be - 127 - F)`` (m in [2^F, 2^(F+1)), ``sticky`` nonzero when nonzero bits
    lie below m) to a float32 in mode ``rnd``: subnormals, overflow per mode, ftz, sign."""
    d = cx.op("max", cx.op("sub", Imm(1), be), Imm(0), sign="s")
    sh = cx.op("min", cx.op("add", d, Imm(F - 23)), Imm(F + 2), sign="u")
    kept = cx.op("shr", m, sh)
    mask = cx.op("sub", cx.op("shl", Imm(1), sh), Imm(1))
    rest = cx.op("and", m, mask)
    up: P | None = None
    if rnd == "rn":
        half = cx.op("shl", Imm(1), cx.op("sub", sh, Imm(1)))
        t = cx.op("or", cx.op("and", kept, Imm(1)), sticky)
        pt = cx.setp("ne", t, Imm(0))
        pt = cx.setp("eq", rest, half, bop="and", c=pt)
        up = cx.setp("gt", rest, half, bop="or", c=pt)
    elif rnd in ("rp", "rm"):
        t = cx.op("or", rest, sticky)
        pu = cx.setp("ne", t, Imm(0))
        up = cx.setp("eq" if rnd == "rp" else "ne", sgn, Imm(0), bop="and", c=pu)
    if up is not None:
        cx.into(kept, "add", kept, Imm(1), guard=up)
    be1 = cx.op("min", cx.op("max", be, Imm(1), sign="s"), Imm(255), sign="s")
    packed = cx.op("add", cx.op("shl", cx.op("sub", be1, Imm(1)), Imm(23)), kept)
    ovf = cx.setp("ge", packed, Imm(0x7F800000))
    if rnd == "rn":
        ov: R | Imm = Imm(0x7F800000)
    elif rnd == "rz":
        ov = Imm(0x7F7FFFFF)
    else:
        neg = cx.setp("ne", sgn, Imm(0))
        big, small = Imm(0x7F800000), Imm(0x7F7FFFFF)
        ov = cx.sel(small, big, neg) if rnd == "rp" else cx.sel(big, small, neg)
    packed = cx.sel(ov, packed, ovf)
    if ftz:
        packed = cx.sel(Imm(0), packed, cx.setp("lt", packed, Imm(0x800000)))
    return cx.op("or", packed, sgn)


def i2f64(cx: LowerCtx, x: tuple, signed: bool, rnd: str) -> R:
    """cvt.rnd.f32.{s64,u64}: correctly rounded."""
    lo, hi = x
    s: R | Imm = Imm(0)
    if signed:
        s = cx.op("and", hi, Imm(0x80000000))
        neg = cx.setp("lt", hi, Imm(0), sign="s")
        nl, nh = neg64(cx, (lo, hi))
        lo, hi = cx.sel(nl, lo, neg), cx.sel(nh, hi, neg)
    c = clz64(cx, (lo, hi))
    sl, sh = shl64(cx, (lo, hi), c)
    m = cx.op("shr", sh, Imm(1))
    sticky = cx.op("or", cx.op("and", sh, Imm(1)), sl)
    be = cx.op("sub", Imm(127 + 63), c)
    res = round_pack(cx, s, be, m, 30, sticky, rnd, False)
    return cx.sel(Imm(0), res, cx.setp("eq", c, Imm(64)))


def f2i64(cx: LowerCtx, x: R | Imm, signed: bool, irnd: str, ftz: bool) -> tuple[R, R]:
    """cvt.irnd{.ftz}.{s64,u64}.f32: rounded, saturating, NaN -> 1 << 63 (PTX ISA 9.0)."""
    sg = "s" if signed else "u"
    small = cx.op("f2i", x, sign=sg, irnd=irnd, ftz=ftz)
    small_hi = cx.op("shr", small, Imm(31), sign="s") if signed else Imm(0)
    e = cx.op("and", cx.op("shr", x, Imm(23)), Imm(0xFF))
    m = cx.op("or", cx.op("and", x, Imm(0x7FFFFF)), Imm(0x800000))
    bl, bh = shl64(cx, (m, Imm(0)), cx.op("sub", e, Imm(150)))
    negx = cx.setp("lt", x, Imm(0), sign="s")
    if signed:
        nl, nh = neg64(cx, (bl, bh))
        bl, bh = cx.sel(nl, bl, negx), cx.sel(nh, bh, negx)
        sat_lo = cx.sel(Imm(0), Imm(M32), negx)
        sat_hi = cx.sel(Imm(0x80000000), Imm(0x7FFFFFFF), negx)
        psat = cx.setp("ge", e, Imm(190))
        big = cx.setp("ge", e, Imm(158))
    else:
        bl, bh = cx.sel(Imm(0), bl, negx), cx.sel(Imm(0), bh, negx)
        sat_lo = cx.sel(Imm(0), Imm(M32), negx)
        sat_hi = sat_lo
        psat = cx.setp("ge", e, Imm(191))
        big = cx.setp("ge", e, Imm(159))
    bl, bh = cx.sel(sat_lo, bl, psat), cx.sel(sat_hi, bh, psat)
    pnan = cx.setp("gt", cx.op("and", x, Imm(0x7FFFFFFF)), Imm(0x7F800000))
    bl, bh = cx.sel(Imm(0), bl, pnan), cx.sel(Imm(0x80000000), bh, pnan)
    return cx.sel(bl, small, big), cx.sel(bh, small_hi, big)


def dop(cx: LowerCtx, op: str, *pairs: tuple, **m: object) -> tuple[R, R]:
    """(lo, hi) of the pair-valued machine op ``op`` over the source pairs."""
    lo, hi = cx.tmp(), cx.tmp()
    cx.emit(op, (lo, hi), tuple(x for pr in pairs for x in pr), **m)
    return lo, hi


def dkey(cx: LowerCtx, x: tuple) -> tuple[R | Imm, R | Imm]:
    """A signed 64-bit order key of an f64 (x >= +0: its bits; else -(|x|)), so -0 = +0."""
    lo, hi = x
    mh = cx.op("and", hi, Imm(0x7FFFFFFF))
    nl, nh = neg64(cx, (lo, mh))
    neg = cx.setp("lt", hi, Imm(0), sign="s")
    return cx.sel(nl, lo, neg), cx.sel(nh, mh, neg)


def dnan(cx: LowerCtx, x: tuple) -> P:
    """Is the f64 pair a NaN?"""
    lo, hi = x
    mh = cx.op("and", hi, Imm(0x7FFFFFFF))
    p = cx.setp("ne", lo, Imm(0))
    p = cx.setp("eq", mh, Imm(0x7FF00000), bop="and", c=p)
    return cx.setp("gt", mh, Imm(0x7FF00000), bop="or", c=p)


def dminmax(cx: LowerCtx, a: tuple, b: tuple, is_min: bool) -> tuple[R, R]:
    """min/max.f64 on the bits (the result is an operand): a NaN operand is ignored (two:
    the canonical NaN), -0 < +0 (two zeros: min = a | b, max = a & b)."""
    ka, kb = dkey(cx, a), dkey(cx, b)
    pick_a = cmp64(cx, "lt" if is_min else "gt", ka, kb, True)
    lo, hi = cx.sel(a[0], b[0], pick_a), cx.sel(a[1], b[1], pick_a)
    zo = "or" if is_min else "and"
    zl, zh = cx.op(zo, a[0], b[0]), cx.op(zo, a[1], b[1])
    both0 = cx.setp(
        "eq",
        cx.op("or", cx.op("or", a[0], b[0]), cx.op("and", cx.op("or", a[1], b[1]), Imm(0x7FFFFFFF))),
        Imm(0),
    )
    lo, hi = cx.sel(zl, lo, both0), cx.sel(zh, hi, both0)
    na, nb = dnan(cx, a), dnan(cx, b)
    lo, hi = cx.sel(b[0], lo, na), cx.sel(b[1], hi, na)
    lo, hi = cx.sel(a[0], lo, nb), cx.sel(a[1], hi, nb)
    both = cx.plop("and", na, nb)
    return cx.sel(Imm(M32), lo, both), cx.sel(Imm(0x7FFFFFFF), hi, both)


def drnd(cx: LowerCtx, x: tuple, irnd: str) -> tuple[R, R]:
    """cvt.irnd.f64.f64 on the bits: clear the fraction bits below the binary point and add
    one unit at the point when the mode rounds away from the truncation (carries run into the
    exponent, as IEEE's encoding allows); |x| < 1 gives +-0 or +-1; NaN -> canonical."""
    lo, hi = x
    sg = cx.op("and", hi, Imm(0x80000000))
    e = cx.op("shr", cx.op("and", hi, Imm(0x7FFFFFFF)), Imm(20))
    nf = cx.op("sub", Imm(1075), e)  # fraction bits below the point (<= 0: integral)
    k = cx.op("min", cx.op("max", nf, Imm(0), sign="s"), Imm(52), sign="s")
    ml, mh = sub64(cx, shl64(cx, (Imm(1), Imm(0)), k), (Imm(1), Imm(0)))  # the fraction mask
    rl, rh = cx.op("and", lo, ml), cx.op("and", hi, mh)  # the fraction bits
    tl, th = cx.op("and", lo, cx.op("not", ml)), cx.op("and", hi, cx.op("not", mh))
    nz = cx.setp("ne", cx.op("or", rl, rh), Imm(0))
    if irnd == "rzi":
        up = FALSE
    elif irnd == "rni":
        hl, hh = shr64(cx, (ml, mh), Imm(1), False)
        hl, hh = add64(cx, (hl, hh), (Imm(1), Imm(0)))  # half a unit
        gt = cmp64(cx, "gt", (rl, rh), (hl, hh), False)
        eq = cmp64(cx, "eq", (rl, rh), (hl, hh), False)
        ul, uh = add64(cx, (ml, mh), (Imm(1), Imm(0)))  # one unit
        odd = cx.setp("ne", cx.op("or", cx.op("and", lo, ul), cx.op("and", hi, uh)), Imm(0))
        up = cx.plop("or", gt, cx.plop("and", eq, odd))
    else:
        up = cx.setp("ne" if irnd == "rmi" else "eq", sg, Imm(0), bop="and", c=nz)
    ul, uh = add64(cx, (ml, mh), (Imm(1), Imm(0)))
    al, ah = add64(cx, (tl, th), (ul, uh))
    ol, oh = cx.sel(al, tl, up), cx.sel(ah, th, up)
    # |x| < 1 (e < 1023): 0 or 1 with the sign of x
    one_up: P
    if irnd == "rzi":
        one_up = FALSE
    elif irnd == "rni":  # > 0.5 rounds to 1 (0.5 is a tie to the even 0)
        mag = (lo, cx.op("and", hi, Imm(0x7FFFFFFF)))
        one_up = cmp64(cx, "gt", mag, (Imm(0), Imm(0x3FE00000)), False)
    else:
        nzx = cx.setp("ne", cx.op("or", lo, cx.op("and", hi, Imm(0x7FFFFFFF))), Imm(0))
        one_up = cx.setp("ne" if irnd == "rmi" else "eq", sg, Imm(0), bop="and", c=nzx)
    small_hi = cx.sel(cx.op("or", sg, Imm(0x3FF00000)), sg, one_up)
    small = cx.setp("lt", e, Imm(1023))
    ol, oh = cx.sel(Imm(0), ol, small), cx.sel(small_hi, oh, small)
    big = cx.setp("ge", e, Imm(1075))  # integral, inf or NaN: unchanged
    ol, oh = cx.sel(lo, ol, big), cx.sel(hi, oh, big)
    nan = dnan(cx, x)
    return cx.sel(Imm(M32), ol, nan), cx.sel(Imm(0x7FFFFFFF), oh, nan)


def round_pack64(cx: LowerCtx, sgn: R | Imm, be: R, m: tuple, sticky: R | Imm, rnd: str) -> tuple[R, R]:
    """Round ``m * 2^(be - 1023 - 63)`` (m a pair with its leading bit at 63, ``sticky``
    nonzero when nonzero bits lie below it) to a float64 in mode ``rnd`` (subnormals,
    overflow per mode); the sign word ``sgn`` is 0 or 0x80000000."""
    d = cx.op("max", cx.op("sub", Imm(1), be), Imm(0), sign="s")
    sh = cx.op("min", cx.op("add", d, Imm(11)), Imm(65), sign="u")
    kl, kh = shr64(cx, m, sh, False)
    sh1 = cx.op("sub", sh, Imm(1))
    rb = cx.op("and", shr64(cx, m, sh1, False)[0], Imm(1))
    ml, mh = sub64(cx, shl64(cx, (Imm(1), Imm(0)), sh1), (Imm(1), Imm(0)))
    low = cx.op("or", cx.op("and", m[0], ml), cx.op("and", m[1], mh))
    low = cx.op("or", low, sticky)
    kept_l, kept_h = cx.tmp(), cx.tmp()
    cx.mov(kept_l, kl)
    cx.mov(kept_h, kh)
    up: P | None = None
    if rnd == "rn":
        t = cx.op("or", low, cx.op("and", kept_l, Imm(1)))
        up = cx.setp("ne", t, Imm(0))
        up = cx.setp("ne", rb, Imm(0), bop="and", c=up)
    elif rnd in ("rp", "rm"):
        t = cx.op("or", low, rb)
        up = cx.setp("ne", t, Imm(0))
        up = cx.setp("eq" if rnd == "rp" else "ne", sgn, Imm(0), bop="and", c=up)
    if up is not None:
        cx.into(kept_l, "add", kept_l, Imm(1), guard=up)
        c = cx.setp("eq", kept_l, Imm(0), bop="and", c=up)
        cx.into(kept_h, "add", kept_h, Imm(1), guard=c)
    be1 = cx.op("min", cx.op("max", be, Imm(1), sign="s"), Imm(2047), sign="s")
    hi = cx.op("add", kept_h, cx.op("shl", cx.op("sub", be1, Imm(1)), Imm(20)))
    ovf = cx.setp("ge", hi, Imm(0x7FF00000))
    if rnd == "rn":
        oh, ol = Imm(0x7FF00000), Imm(0)
    elif rnd == "rz":
        oh, ol = Imm(0x7FEFFFFF), Imm(M32)
    else:
        neg = cx.setp("ne", sgn, Imm(0))
        to_inf = neg if rnd == "rm" else neg.inv()
        oh = cx.sel(Imm(0x7FF00000), Imm(0x7FEFFFFF), to_inf)
        ol = cx.sel(Imm(0), Imm(M32), to_inf)
    lo = cx.sel(ol, kept_l, ovf)
    hi = cx.sel(oh, hi, ovf)
    return lo, cx.op("or", hi, sgn)


def unpack64(cx: LowerCtx, lo: R | Imm, hi: R | Imm) -> tuple[tuple[R, R], R, dict[str, P]]:
    """A float64's significand normalized to bit 52, its biased exponent (below 1 for
    subnormals), and class predicates (nan, inf, zero)."""
    mag = cx.op("and", hi, Imm(0x7FFFFFFF))
    e = cx.op("shr", mag, Imm(20))
    mh = cx.op("and", hi, Imm(0xFFFFF))
    cx.into(mh, "or", mh, Imm(0x100000), guard=cx.setp("ne", e, Imm(0)))
    e1 = cx.op("max", e, Imm(1), sign="u")
    k = cx.op("sub", clz64(cx, (lo, mh)), Imm(11))
    nl, nh = shl64(cx, (lo, mh), k)
    cx.into(e1, "sub", e1, k)
    pz = cx.setp("eq", lo, Imm(0))
    inf = cx.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz)
    zero = cx.setp("eq", mag, Imm(0), bop="and", c=pz)
    nan = cx.plop(
        "or",
        cx.setp("gt", mag, Imm(0x7FF00000)),
        cx.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz.inv()),
    )
    return (nl, nh), e1, {"nan": nan, "inf": inf, "zero": zero}  # type: ignore[return-value]


def dmul(cx: LowerCtx, a: tuple, b: tuple, rnd: str = "rn") -> tuple[R, R]:
    """mul.rnd.f64, correctly rounded (canonical NaN): the exact 106-bit product of the
    significands, rounded once (softfloat64.py's ``dmul`` expansion for the weights)."""
    sgn = cx.op("and", cx.op("xor", a[1], b[1]), Imm(0x80000000))
    ma, ea, ca = unpack64(cx, *a)
    mb, eb, cb = unpack64(cx, *b)
    w0, w1, w2, w3 = mul64x64(cx, ma, mb)
    p105 = cx.setp("ne", cx.op("and", w3, Imm(0x200)), Imm(0))

    def window(k: int) -> tuple[R, R, R]:
        lo = cx.op("or", cx.op("shr", w1, Imm(k - 32)), cx.op("shl", w2, Imm(64 - k)))
        hi = cx.op("or", cx.op("shr", w2, Imm(k - 32)), cx.op("shl", w3, Imm(64 - k)))
        st = cx.op("or", w0, cx.op("and", w1, Imm((1 << (k - 32)) - 1)))
        return lo, hi, st

    l41, h41, s41 = window(41)
    l42, h42, s42 = window(42)
    m = (cx.sel(l42, l41, p105), cx.sel(h42, h41, p105))
    sticky = cx.sel(s42, s41, p105)
    be = cx.op("sub", cx.op("add", ea, eb), Imm(1023))
    cx.into(be, "add", be, Imm(1), guard=p105)
    lo, hi = round_pack64(cx, sgn, be, m, sticky, rnd)
    nan = cx.plop("or", ca["nan"], cb["nan"])
    nan = cx.plop("or", nan, cx.plop("and", ca["inf"], cb["zero"]))
    nan = cx.plop("or", nan, cx.plop("and", ca["zero"], cb["inf"]))
    inf = cx.plop("or", ca["inf"], cb["inf"])
    zero = cx.plop("or", ca["zero"], cb["zero"])
    lo = cx.sel(Imm(0), lo, cx.plop("or", inf, zero))
    hi = cx.sel(cx.op("or", sgn, Imm(0x7FF00000)), hi, inf)
    hi = cx.sel(sgn, hi, zero)
    return cx.sel(Imm(M32), lo, nan), cx.sel(Imm(0x7FFFFFFF), hi, nan)


def i2d(cx: LowerCtx, x: tuple, signed: bool, rnd: str) -> tuple[R, R]:
    """cvt.rnd.f64.{s64,u64}: correctly rounded."""
    lo, hi = x
    sgn: R | Imm = Imm(0)
    if signed:
        sgn = cx.op("and", hi, Imm(0x80000000))
        neg = cx.setp("lt", hi, Imm(0), sign="s")
        nl, nh = neg64(cx, (lo, hi))
        lo, hi = cx.sel(nl, lo, neg), cx.sel(nh, hi, neg)
    c = clz64(cx, (lo, hi))
    m = shl64(cx, (lo, hi), c)
    be = cx.op("sub", Imm(1023 + 63), c)
    rl, rh = round_pack64(cx, sgn, be, m, Imm(0), rnd)
    z = cx.setp("eq", c, Imm(64))
    return cx.sel(Imm(0), rl, z), cx.sel(Imm(0), rh, z)


def d2f(cx: LowerCtx, x: tuple, rnd: str, ftz: bool) -> R:
    """cvt.rnd{.ftz}.f32.f64: correctly rounded (canonical NaN)."""
    lo, hi = x
    sgn = cx.op("and", hi, Imm(0x80000000))
    mag = cx.op("and", hi, Imm(0x7FFFFFFF))
    e = cx.op("shr", mag, Imm(20))
    # 1.f as a 31-bit integer (leading bit 30) and the 22 lowest fraction bits as sticky
    m = cx.op(
        "or",
        cx.op("or", cx.op("shl", cx.op("and", hi, Imm(0xFFFFF)), Imm(10)), cx.op("shr", lo, Imm(22))),
        Imm(0x40000000),
    )
    sticky = cx.op("and", lo, Imm(0x3FFFFF))
    be = cx.op("sub", e, Imm(1023 - 127))
    sub = cx.setp("eq", e, Imm(0))  # f64 subnormal: far below f32's range, only its sign and stickiness count
    be = cx.sel(Imm(-2000), be, sub)
    res = round_pack(cx, sgn, be, m, 30, sticky, rnd, ftz)
    pz = cx.setp("eq", lo, Imm(0))
    zero = cx.setp("eq", mag, Imm(0), bop="and", c=pz)
    inf = cx.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz)
    nan = cx.plop(
        "or",
        cx.setp("gt", mag, Imm(0x7FF00000)),
        cx.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz.inv()),
    )
    res = cx.sel(sgn, res, zero)
    res = cx.sel(cx.op("or", sgn, Imm(0x7F800000)), res, inf)
    return cx.sel(Imm(0x7FFFFFFF), res, nan)


def f2d(cx: LowerCtx, x: R | Imm, ftz: bool) -> tuple[R, R]:
    """cvt{.ftz}.f64.f32: exact (canonical NaN)."""
    if ftz:
        x = flush(cx, x)
    sgn = cx.op("and", x, Imm(0x80000000))
    mag = cx.op("and", x, Imm(0x7FFFFFFF))
    m, e = unpack_norm(cx, mag)  # m in [2^23, 2^24) with its leading bit at 23
    hi = cx.op(
        "or",
        cx.op("shl", cx.op("add", e, Imm(1023 - 127 - 1)), Imm(20)),
        cx.op("shr", cx.op("and", m, Imm(0x7FFFFF)), Imm(3)),
    )
    hi = cx.op("add", hi, Imm(1 << 20))
    lo = cx.op("shl", m, Imm(29))
    zero = cx.setp("eq", mag, Imm(0))
    inf = cx.setp("eq", mag, Imm(0x7F800000))
    nan = cx.setp("gt", mag, Imm(0x7F800000))
    hi = cx.sel(Imm(0x7FF00000), hi, inf)
    hi, lo = cx.sel(Imm(0), hi, zero), cx.sel(Imm(0), lo, cx.plop("or", zero, inf))
    hi = cx.op("or", hi, sgn)
    return cx.sel(Imm(M32), lo, nan), cx.sel(Imm(0x7FFFFFFF), hi, nan)
