"""64-bit integer sequences on register pairs (lo, hi): add, sub, multiply, shifts, compares,
clz, division; shared with ``softfloat64`` (which borrows them through ``lower.Lowerer``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.isa.instr import TRUE, Imm, P, R
from qwengpu.ptx.ir import Instr

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def div_zero_check(cx: LowerCtx, d: R | Imm, ins: Instr, t: str, hi: R | Imm | None = None) -> None:
    """A trap when the divisor is zero (nothing for a nonzero constant)."""
    if isinstance(d, Imm) and (hi is None or isinstance(hi, Imm)):
        if d.v == 0 and (hi is None or hi.v == 0):
            p = TRUE
        else:
            return
    else:
        p = cx.setp("eq", d, Imm(0))
        if hi is not None:
            p = cx.setp("eq", hi, Imm(0), bop="and", c=p)
    cx.emit("trap", guard=p, code="divzero")


def add64(cx: LowerCtx, a: tuple, b: tuple) -> tuple[R | Imm, R | Imm]:
    """Pair addition (the carry from the low words' wrap)."""
    (alo, ahi), (blo, bhi) = a, b
    if isinstance(blo, Imm) and blo.v == 0:
        return alo, (ahi if isinstance(bhi, Imm) and bhi.v == 0 else cx.op("add", ahi, bhi))
    lo = cx.op("add", alo, blo)
    c = cx.setp("lt", lo, blo)
    hi = cx.op("add", ahi, bhi)
    cx.into(hi, "add", hi, Imm(1), guard=c)
    return lo, hi


def sub64(cx: LowerCtx, a: tuple, b: tuple) -> tuple[R | Imm, R | Imm]:
    """Pair subtraction (the borrow when a's low word is below b's)."""
    (alo, ahi), (blo, bhi) = a, b
    lo = cx.op("sub", alo, blo)
    c = cx.setp("lt", alo, blo)
    hi = cx.op("sub", ahi, bhi)
    cx.into(hi, "sub", hi, Imm(1), guard=c)
    return lo, hi


def mul64(cx: LowerCtx, a: tuple, b: tuple) -> tuple[R, R]:
    """The low 64 bits of a pair product (three word products)."""
    (alo, ahi), (blo, bhi) = a, b
    lo = cx.op("mul", alo, blo)
    h = cx.op("mulhi", alo, blo, sign="u")
    if not (isinstance(bhi, Imm) and bhi.v == 0):
        h = cx.op("add", h, cx.op("mul", alo, bhi))
    if not (isinstance(ahi, Imm) and ahi.v == 0):
        h = cx.op("add", h, cx.op("mul", ahi, blo))
    return lo, h


def addc(cx: LowerCtx, acc: R, x: R | Imm, carry: R) -> None:
    """acc += x, carry += carry-out."""
    cx.into(acc, "add", acc, x)
    c = cx.setp("lt", acc, x)
    cx.into(carry, "add", carry, Imm(1), guard=c)


def mulhi64(cx: LowerCtx, a: tuple, b: tuple, signed: bool) -> tuple[R, R]:
    """High 64 bits of the 128-bit product (32-bit limbs; signed = unsigned minus corrections)."""
    (a0, a1), (b0, b1) = a, b
    p00h = cx.op("mulhi", a0, b0, sign="u")
    p01l, p01h = cx.op("mul", a0, b1), cx.op("mulhi", a0, b1, sign="u")
    p10l, p10h = cx.op("mul", a1, b0), cx.op("mulhi", a1, b0, sign="u")
    p11l, p11h = cx.op("mul", a1, b1), cx.op("mulhi", a1, b1, sign="u")
    w1, c1 = cx.tmp(), cx.tmp()
    cx.mov(w1, p00h)
    cx.mov(c1, Imm(0))
    addc(cx, w1, p01l, c1)
    addc(cx, w1, p10l, c1)
    w2, c2 = cx.tmp(), cx.tmp()
    cx.mov(w2, p01h)
    cx.mov(c2, Imm(0))
    addc(cx, w2, p10h, c2)
    addc(cx, w2, p11l, c2)
    addc(cx, w2, c1, c2)
    w3 = cx.op("add", p11h, c2)
    lo, hi = w2, w3
    if signed:
        pa = cx.setp("lt", a1, Imm(0), sign="s")
        pb = cx.setp("lt", b1, Imm(0), sign="s")
        z = Imm(0)
        lo2, hi2 = sub64(cx, (lo, hi), (cx.sel(b0, z, pa), cx.sel(b1, z, pa)))
        lo, hi = sub64(cx, (lo2, hi2), (cx.sel(a0, z, pb), cx.sel(a1, z, pb)))  # type: ignore[assignment]
    return lo, hi  # type: ignore[return-value]


def shl64(cx: LowerCtx, a: tuple, n: R | Imm) -> tuple[R | Imm, R | Imm]:
    """Pair shift left by a constant or a register count."""
    alo, ahi = a
    if isinstance(n, Imm):
        k = n.v
        if k >= 64:
            return Imm(0), Imm(0)
        if k == 0:
            return alo, ahi
        if k >= 32:
            return Imm(0), cx.op("shl", alo, Imm(k - 32))
        return cx.op("shl", alo, Imm(k)), cx.op(
            "or", cx.op("shl", ahi, Imm(k)), cx.op("shr", alo, Imm(32 - k))
        )
    lo = cx.op("shl", alo, n)
    h = cx.op("shl", ahi, n)
    h = cx.op("or", h, cx.op("shr", alo, cx.op("sub", Imm(32), n)))
    h = cx.op("or", h, cx.op("shl", alo, cx.op("sub", n, Imm(32))))
    return lo, h


def shr64(cx: LowerCtx, a: tuple, n: R | Imm, signed: bool) -> tuple[R | Imm, R | Imm]:
    """Pair shift right (logical or arithmetic) by a constant or a register count."""
    alo, ahi = a
    sg = "s" if signed else "u"
    if isinstance(n, Imm):
        k = n.v
        if k >= 64:
            k = 63 if signed else 64
        if k == 64:
            return Imm(0), Imm(0)
        if k == 0:
            return alo, ahi
        if k >= 32:
            return cx.op("shr", ahi, Imm(k - 32), sign=sg), (
                cx.op("shr", ahi, Imm(31), sign="s") if signed else Imm(0)
            )
        return cx.op("or", cx.op("shr", alo, Imm(k)), cx.op("shl", ahi, Imm(32 - k))), cx.op(
            "shr", ahi, Imm(k), sign=sg
        )
    if signed:
        n = cx.op("min", n, Imm(63), sign="u")
    hi = cx.op("shr", ahi, n, sign=sg)
    lo = cx.op("or", cx.op("shr", alo, n), cx.op("shl", ahi, cx.op("sub", Imm(32), n)))
    if signed:
        big = cx.op("shr", ahi, cx.op("sub", n, Imm(32)), sign="s")
        lo = cx.sel(lo, big, cx.setp("lt", n, Imm(32)))
    else:
        lo = cx.op("or", lo, cx.op("shr", ahi, cx.op("sub", n, Imm(32))))
    return lo, hi


def cmp64(cx: LowerCtx, cmp: str, a: tuple, b: tuple, signed: bool) -> P:
    """A 64-bit comparison of pairs as a predicate."""
    (alo, ahi), (blo, bhi) = a, b
    if cmp == "eq":
        p = cx.setp("eq", alo, blo)
        return cx.setp("eq", ahi, bhi, bop="and", c=p)
    if cmp == "ne":
        p = cx.setp("ne", alo, blo)
        return cx.setp("ne", ahi, bhi, bop="or", c=p)
    p = cx.setp(cmp, alo, blo)
    p = cx.setp("eq", ahi, bhi, bop="and", c=p)
    strict = {"lt": "lt", "le": "lt", "gt": "gt", "ge": "gt"}[cmp]
    return cx.setp(strict, ahi, bhi, sign="s" if signed else "u", bop="or", c=p)


def clz64(cx: LowerCtx, a: tuple) -> R:
    """Leading zeros of a pair."""
    lo, hi = a
    c1 = cx.op("clz", hi)
    c2 = cx.op("add", cx.op("clz", lo), Imm(32))
    return cx.sel(c2, c1, cx.setp("eq", hi, Imm(0)))


def udivmod64(cx: LowerCtx, n: tuple, d: tuple) -> tuple[tuple[R, R], tuple[R, R]]:
    """Unsigned 64-bit quotient and remainder (d != 0), one quotient bit per iteration."""
    (nlo, nhi), (dlo, dhi) = n, d
    qlo, qhi, rlo, rhi = cx.tmp(), cx.tmp(), cx.tmp(), cx.tmp()
    cx.mov(qlo, Imm(0))
    cx.mov(qhi, Imm(0))
    cx.mov(rlo, nlo)
    cx.mov(rhi, nhi)
    done, loop = cx._label(), cx._label()
    cx.bra(done, cmp64(cx, "lt", (nlo, nhi), (dlo, dhi), False))
    k = cx.op("sub", clz64(cx, (dlo, dhi)), clz64(cx, (nlo, nhi)))
    ddl, ddh = shl64(cx, (dlo, dhi), k)
    ddlo, ddhi = cx.tmp(), cx.tmp()
    cx.mov(ddlo, ddl)
    cx.mov(ddhi, ddh)
    cx.place(loop)
    p = cmp64(cx, "ge", (rlo, rhi), (ddlo, ddhi), False)
    b = cx.setp("lt", rlo, ddlo)
    cx.into(rlo, "sub", rlo, ddlo, guard=p)
    cx.into(rhi, "sub", rhi, ddhi, guard=p)
    cx.into(rhi, "sub", rhi, Imm(1), guard=cx.plop("and", p, b))
    cx.into(qhi, "or", cx.op("shl", qhi, Imm(1)), cx.op("shr", qlo, Imm(31)))
    cx.into(qlo, "shl", qlo, Imm(1))
    cx.into(qlo, "or", qlo, Imm(1), guard=p)
    cx.into(ddlo, "or", cx.op("shr", ddlo, Imm(1)), cx.op("shl", ddhi, Imm(31)))
    cx.into(ddhi, "shr", ddhi, Imm(1))
    cx.into(k, "sub", k, Imm(1))
    cx.bra(loop, cx.setp("ge", k, Imm(0), sign="s"))
    cx.place(done)
    return (qlo, qhi), (rlo, rhi)


def neg64(cx: LowerCtx, a: tuple) -> tuple[R | Imm, R | Imm]:
    """Pair negation."""
    return sub64(cx, (Imm(0), Imm(0)), a)


def sdivmod64(cx: LowerCtx, n: tuple, d: tuple) -> tuple[tuple, tuple]:
    """Signed 64-bit quotient and remainder from the unsigned ones (truncating division)."""

    def absv(x: tuple) -> tuple[tuple, P]:
        neg = cx.setp("lt", x[1], Imm(0), sign="s")
        nl, nh = neg64(cx, x)
        return (cx.sel(nl, x[0], neg), cx.sel(nh, x[1], neg)), neg

    an, pn = absv(n)
    ad, pd = absv(d)
    q, r = udivmod64(cx, an, ad)
    pq = cx.plop("xor", pn, pd)
    ql, qh = neg64(cx, q)
    rl, rh = neg64(cx, r)
    return (cx.sel(ql, q[0], pq), cx.sel(qh, q[1], pq)), (
        cx.sel(rl, r[0], pn),
        cx.sel(rh, r[1], pn),
    )


def mul64x64(cx: LowerCtx, a: tuple, b: tuple) -> tuple[R, R, R, R]:
    """The full 128-bit product of two unsigned 64-bit pairs, as four words (low first)."""
    (a0, a1), (b0, b1) = a, b
    w0 = cx.op("mul", a0, b0)
    w1, c1 = cx.tmp(), cx.tmp()
    cx.mov(w1, cx.op("mulhi", a0, b0, sign="u"))
    cx.mov(c1, Imm(0))
    addc(cx, w1, cx.op("mul", a0, b1), c1)
    addc(cx, w1, cx.op("mul", a1, b0), c1)
    w2, c2 = cx.tmp(), cx.tmp()
    cx.mov(w2, cx.op("mulhi", a0, b1, sign="u"))
    cx.mov(c2, Imm(0))
    addc(cx, w2, cx.op("mulhi", a1, b0, sign="u"), c2)
    addc(cx, w2, cx.op("mul", a1, b1), c2)
    addc(cx, w2, c1, c2)
    w3 = cx.op("add", cx.op("mulhi", a1, b1, sign="u"), c2)
    return w0, w1, w2, w3
