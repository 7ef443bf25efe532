"""Arithmetic rules (add, sub, mul, mad, div, rem, abs, neg, min, max): one rule per opcode,
dispatching on the type to the integer (32/64-bit), f32 or f64 sequence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import _bits, _signed, _type_of
from qwengpu.codegen.lowering.floats import dbin, dop_write, fbin, fmods
from qwengpu.codegen.lowering.floatseq import dminmax, flush
from qwengpu.codegen.lowering.int64 import (
    add64,
    cmp64,
    div_zero_check,
    mul64,
    mulhi64,
    neg64,
    sdivmod64,
    sub64,
    udivmod64,
)
from qwengpu.codegen.lowering.operands import (
    V64,
    as_pair,
    as_w,
    dest64,
    dpair,
    read32,
    read64,
    sext,
    write32,
    write32v,
    write64,
)
from qwengpu.isa.instr import TRUE, Imm, P, R
from qwengpu.ptx.ir import Instr, Sink

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def int_bin(cx: LowerCtx, ins: Instr, op: str, mode: str = "raw", **m: object) -> None:
    """A two-operand 32-bit integer op as one machine op (operands read in ``mode``)."""
    t = _type_of(ins)
    d, a, b = ins.operands
    va, vb = read32(cx, a, t, ins, mode), read32(cx, b, t, ins, mode)
    write32(cx, d, t, lambda r: cx.into(r, op, va, vb, **m), ins)


def ptx_add(cx: LowerCtx, ins: Instr) -> None:
    """add/addc: by type; carries (``.cc``, ``addc``) and saturation are their own forms."""
    addsub(cx, ins, "add")


def ptx_sub(cx: LowerCtx, ins: Instr) -> None:
    """sub/subc: by type; carries (``.cc``, ``subc``) and saturation are their own forms."""
    addsub(cx, ins, "sub")


def addsub(cx: LowerCtx, ins: Instr, op: str) -> None:
    """add/sub by form: f32 op, f64 pair op (sub as a + -b), carry, saturating, window word
    (``addw``/``subw``) or 64-bit pair, else a 32-bit word op."""
    t = _type_of(ins)
    if t == "f32":
        return fbin(cx, ins, "f" + op)
    if t == "f64":
        return dbin(cx, ins, "dadd", negate_b=op == "sub")
    if "cc" in ins.mods or ins.op in ("addc", "subc"):
        return carry(cx, ins, t, op)
    if "sat" in ins.mods:
        return addsub_sat(cx, ins, t, op)
    d, a, b = ins.operands
    if _bits(t) == 64:
        kind, _, _ = dest64(cx, d, ins) if not isinstance(d, Sink) else ("pair", None, None)
        va, vb = read64(cx, a, t, ins), read64(cx, b, t, ins)
        if kind != "pair":
            wa, sa, _ = as_w(cx, va, ins)
            wb, sb, _ = as_w(cx, vb, ins)
            _, dlo, _ = dest64(cx, d, ins)
            cx.into(dlo, op + "w", wa, wb, sa=sa, sb=sb)
            return
        pa, pb = as_pair(cx, va, ins), as_pair(cx, vb, ins)
        lo, hi = add64(cx, pa, pb) if op == "add" else sub64(cx, pa, pb)
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    int_bin(cx, ins, op)


def addsub_sat(cx: LowerCtx, ins: Instr, t: str, op: str) -> None:
    """add.sat/sub.sat.s32: the wrapped result, replaced by the limit on signed overflow."""
    if t != "s32":
        raise cx.fail(ins, f"unsupported saturating {op}.{t}")
    d, a, b = ins.operands
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    s = cx.op(op, va, vb)
    # overflow: the operands' signs agree (add) / differ (sub) and the result's sign differs
    x1 = cx.op("xor", s, va)
    x2 = cx.op("xor", va, vb) if op == "sub" else cx.op("not", cx.op("xor", va, vb))
    ovf = cx.setp("lt", cx.op("and", x1, x2), Imm(0), sign="s")
    lim = cx.op("xor", cx.op("shr", va, Imm(31), sign="s"), Imm(0x7FFFFFFF))
    write32(cx, d, t, lambda r: cx.into(r, "sel", lim, s, ovf), ins)


def carry(cx: LowerCtx, ins: Instr, t: str, op: str) -> None:
    """add.cc/addc/sub.cc/subc: the carry flag is a predicate (``%cc``)."""
    if _bits(t) != 32:
        raise cx.limit(ins, "64-bit extended-precision carry arithmetic")
    if "%cc" not in cx.regp:
        cx.regp["%cc"] = P(cx._newp())
    cc = cx.regp["%cc"]
    d, a, b = ins.operands
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    use_in = ins.op in ("addc", "subc")
    set_out = "cc" in ins.mods
    r = cx.op(op, va, vb)
    if op == "add":
        c1 = cx.setp("lt", r, vb) if set_out else None
        if use_in:
            r2 = cx.op("add", r, cx.sel(Imm(1), Imm(0), cc))
            c2 = cx.setp("lt", r2, r) if set_out else None
            r = r2
            if set_out:
                c1 = cx.plop("or", c1, c2)  # type: ignore[arg-type]
    else:
        c1 = cx.setp("lt", va, vb) if set_out else None
        if use_in:
            ci = cx.sel(Imm(1), Imm(0), cc)
            if set_out:
                c2 = cx.setp("lt", r, ci)
                c1 = cx.plop("or", c1, c2)  # type: ignore[arg-type]
            r = cx.op("sub", r, ci)
    write32v(cx, d, t, r, ins)
    if set_out:
        cx.emit("plop", (cc,), (c1, TRUE), bop="and")


def ptx_mul(cx: LowerCtx, ins: Instr) -> None:
    """mul: by type (f32, f64) and form (.wide, .hi, 64-bit pairs, 32-bit words)."""
    t = _type_of(ins)
    if t == "f32":
        return fbin(cx, ins, "fmul")
    if t == "f64":
        return dbin(cx, ins, "dmul")
    if "wide" in ins.mods:
        return mul_wide(cx, ins, t)
    if "hi" in ins.mods:
        return mul_hi(cx, ins, t)
    if _bits(t) == 64:
        d, a, b = ins.operands
        lo, hi = mul64(cx, pair_of(cx, a, t, ins), pair_of(cx, b, t, ins))
        return write64(cx, d, V64("pair", lo, hi), ins)
    int_bin(cx, ins, "mul")


def pair_of(cx: LowerCtx, a: object, t: str, ins: Instr) -> tuple[R | Imm, R | Imm]:
    """A 64-bit integer operand as a register pair."""
    return as_pair(cx, read64(cx, a, t, ins), ins)


def mul_wide(cx: LowerCtx, ins: Instr, t: str) -> None:
    """mul.wide.{s,u}{16,32}: a 32-bit product into a window word or a pair; 16-bit: one word."""
    d, a, b = ins.operands
    sg = "s" if _signed(t) else "u"
    if _bits(t) == 32:
        va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
        kind, dlo, dhi = dest64(cx, d, ins)
        if kind != "pair":
            cx.into(dlo, "mulw", va, vb, sa=sg, sb=sg)
            return
        lo = cx.op("mul", va, vb)
        hi = cx.op("mulhi", va, vb, sign=sg)
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    wt = {"s16": "s32", "u16": "u32"}[t]
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    write32(cx, d, wt, lambda r: cx.into(r, "mul", va, vb), ins)


def mul_hi(cx: LowerCtx, ins: Instr, t: str) -> None:
    """mul.hi: the high half of the double-width product (64-bit: limbs; 16-bit: a shift)."""
    d, a, b = ins.operands
    sg = "s" if _signed(t) else "u"
    if _bits(t) == 64:
        lo, hi = mulhi64(cx, pair_of(cx, a, t, ins), pair_of(cx, b, t, ins), _signed(t))
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    if _bits(t) == 32:
        return int_bin(cx, ins, "mulhi", sign=sg)
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    p = cx.op("mul", va, vb)
    write32(cx, d, t, lambda r: cx.into(r, "shr", p, Imm(16), sign=sg), ins)


def mul24(cx: LowerCtx, ins: Instr, a: object, b: object, t: str) -> R:
    """The 24-bit product (``.lo``: low 32 bits; ``.hi``: bits 16..47) of sign/zero-truncated operands."""
    sg = "s" if t == "s32" else "u"
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    if sg == "s":
        a24, b24 = sext(cx, va, 24), sext(cx, vb, 24)
    else:
        a24, b24 = cx.op("and", va, Imm(0xFFFFFF)), cx.op("and", vb, Imm(0xFFFFFF))
    lo = cx.op("mul", a24, b24)
    if "hi" not in ins.mods:
        return lo
    hi = cx.op("mulhi", a24, b24, sign=sg)
    return cx.op("or", cx.op("shl", hi, Imm(16)), cx.op("shr", lo, Imm(16)))


def ptx_mul24(cx: LowerCtx, ins: Instr) -> None:
    """mul24.{lo,hi}.{s32,u32}."""
    t = _type_of(ins)
    d, a, b = ins.operands
    v = mul24(cx, ins, a, b, t)
    write32v(cx, d, t, v, ins)


def ptx_mad24(cx: LowerCtx, ins: Instr) -> None:
    """mad24: the mul24 product plus the addend."""
    t = _type_of(ins)
    d, a, b, c = ins.operands
    v = mul24(cx, ins, a, b, t)
    vc = read32(cx, c, t, ins)
    write32(cx, d, t, lambda r: cx.into(r, "add", v, vc), ins)


def ptx_mad(cx: LowerCtx, ins: Instr) -> None:
    """mad/fma: by type (f32, f64) and form (.wide, .hi, 64-bit pairs, 32-bit words)."""
    t = _type_of(ins)
    if t == "f32":
        rnd, ftz, sat = fmods(cx, ins)
        d, a, b, c = ins.operands
        va, vb, vc = (read32(cx, x, "f32", ins) for x in (a, b, c))
        write32(cx, d, "f32", lambda r: cx.into(r, "ffma", va, vb, vc, rnd=rnd, ftz=ftz, sat=sat), ins)
        return
    if t == "f64":
        d, a, b, c = ins.operands
        pa, pb, pc = dpair(cx, a, ins), dpair(cx, b, ins), dpair(cx, c, ins)
        return dop_write(cx, ins, d, "dfma", pa, pb, pc, rnd=fmods(cx, ins)[0])
    d, a, b, c = ins.operands
    if "wide" in ins.mods:
        return mad_wide(cx, ins, t)
    if "hi" in ins.mods:
        return mad_hi(cx, ins, t)
    if _bits(t) == 64:
        pl = mul64(cx, pair_of(cx, a, t, ins), pair_of(cx, b, t, ins))
        rl, rh = add64(cx, pl, pair_of(cx, c, t, ins))
        write64(cx, d, V64("pair", rl, rh), ins)
        return
    va, vb, vc = (read32(cx, x, t, ins, "raw") for x in (a, b, c))
    write32(cx, d, t, lambda r: cx.into(r, "mad", va, vb, vc), ins)


def mad_wide(cx: LowerCtx, ins: Instr, t: str) -> None:
    """mad.wide: a window word (mulw + addw) when the destination is one, else pair arithmetic."""
    d, a, b, c = ins.operands
    sg = "s" if _signed(t) else "u"
    if _bits(t) == 32:
        va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
        wt = "s64" if sg == "s" else "u64"
        vc = read64(cx, c, wt, ins)
        kind, dlo, _ = dest64(cx, d, ins)
        if kind != "pair":
            m = cx.op("mulw", va, vb, sa=sg, sb=sg)
            wc, sc, _ = as_w(cx, vc, ins)
            cx.into(dlo, "addw", m, wc, sa="s", sb=sc)
            return
        lo = cx.op("mul", va, vb)
        hi = cx.op("mulhi", va, vb, sign=sg)
        rl, rh = add64(cx, (lo, hi), as_pair(cx, vc, ins))
        write64(cx, d, V64("pair", rl, rh), ins)
        return
    wt = {"s16": "s32", "u16": "u32"}[t]
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    vc = read32(cx, c, wt, ins)
    p = cx.op("mul", va, vb)
    write32(cx, d, wt, lambda r: cx.into(r, "add", p, vc), ins)


def mad_hi(cx: LowerCtx, ins: Instr, t: str) -> None:
    """mad.hi: the high half of the product plus the addend."""
    d, a, b, c = ins.operands
    sg = "s" if _signed(t) else "u"
    if "sat" in ins.mods:
        raise cx.fail(ins, "unsupported mad.hi.sat")
    if _bits(t) == 64:
        ph = mulhi64(cx, pair_of(cx, a, t, ins), pair_of(cx, b, t, ins), _signed(t))
        rl, rh = add64(cx, ph, pair_of(cx, c, t, ins))
        write64(cx, d, V64("pair", rl, rh), ins)
        return
    va, vb, vc = (read32(cx, x, t, ins) for x in (a, b, c))
    if _bits(t) == 32:
        h = cx.op("mulhi", va, vb, sign=sg)
    else:
        h = cx.op("shr", cx.op("mul", va, vb), Imm(16), sign=sg)
    write32(cx, d, t, lambda r: cx.into(r, "add", h, vc), ins)


def ptx_fma(cx: LowerCtx, ins: Instr) -> None:
    """fma: the same lowering as mad."""
    ptx_mad(cx, ins)


def ptx_div(cx: LowerCtx, ins: Instr) -> None:
    """div: f32 (``.approx`` as a reciprocal then a product; ``.full`` as rn), f64 pair op, integers
    with a division-by-zero trap."""
    t = _type_of(ins)
    rnd, ftz, _ = fmods(cx, ins)
    d, a, b = ins.operands
    if t == "f32":
        va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
        if "approx" in ins.mods:
            r = flush(cx, cx.op("fdiv", Imm(0x3F800000), vb, rnd="rn", ftz=ftz))
            write32(cx, d, t, lambda x: cx.into(x, "fmul", va, r, rnd="rn", ftz=ftz), ins)
            return
        if "full" in ins.mods:
            rnd = "rn"
        write32(cx, d, t, lambda x: cx.into(x, "fdiv", va, vb, rnd=rnd, ftz=ftz), ins)
        return
    if t == "f64":
        return dbin(cx, ins, "ddiv")
    intdiv(cx, ins, t, True)


def ptx_rem(cx: LowerCtx, ins: Instr) -> None:
    """rem: the integer remainder (division-by-zero trap)."""
    intdiv(cx, ins, _type_of(ins), False)


def intdiv(cx: LowerCtx, ins: Instr, t: str, quotient: bool) -> None:
    """Integer quotient or remainder: one ``idiv``/``irem``, or the 64-bit pair loop; traps on /0."""
    d, a, b = ins.operands
    if _bits(t) == 64:
        n = as_pair(cx, read64(cx, a, t, ins), ins)
        dv = as_pair(cx, read64(cx, b, t, ins), ins)
        div_zero_check(cx, dv[0], ins, t, dv[1])
        q, r = sdivmod64(cx, n, dv) if _signed(t) else udivmod64(cx, n, dv)
        res = q if quotient else r
        write64(cx, d, V64("pair", res[0], res[1]), ins)
        return
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    div_zero_check(cx, vb, ins, t)
    op, sign = "idiv" if quotient else "irem", "s" if _signed(t) else "u"
    write32(cx, d, t, lambda x: cx.into(x, op, va, vb, sign=sign), ins)


def ptx_abs(cx: LowerCtx, ins: Instr) -> None:
    """abs: floats clear the sign bit (f32 ftz flushes first); integers take max(x, -x)."""
    t = _type_of(ins)
    _, ftz, _ = fmods(cx, ins)
    d, a = ins.operands
    if t == "f32":
        va = read32(cx, a, t, ins)
        if ftz:
            va = flush(cx, va)
        write32(cx, d, t, lambda r: cx.into(r, "and", va, Imm(0x7FFFFFFF)), ins)
        return
    if t == "f64":
        lo, hi = as_pair(cx, read64(cx, a, t, ins), ins)
        write64(cx, d, V64("pair", lo, cx.op("and", hi, Imm(0x7FFFFFFF))), ins)
        return
    if _bits(t) == 64:
        x = as_pair(cx, read64(cx, a, t, ins), ins)
        nl, nh = neg64(cx, x)
        neg = cx.setp("lt", x[1], Imm(0), sign="s")
        write64(cx, d, V64("pair", cx.sel(nl, x[0], neg), cx.sel(nh, x[1], neg)), ins)
        return
    va = read32(cx, a, t, ins)
    n = cx.op("sub", Imm(0), va)
    write32(cx, d, t, lambda r: cx.into(r, "max", va, n, sign="s"), ins)


def ptx_neg(cx: LowerCtx, ins: Instr) -> None:
    """neg: floats flip the sign bit (f32 ftz flushes first); integers negate."""
    t = _type_of(ins)
    _, ftz, _ = fmods(cx, ins)
    d, a = ins.operands
    if t == "f32":
        va = read32(cx, a, t, ins)
        if ftz:
            va = flush(cx, va)
        write32(cx, d, t, lambda r: cx.into(r, "xor", va, Imm(0x80000000)), ins)
        return
    if t == "f64":
        lo, hi = as_pair(cx, read64(cx, a, t, ins), ins)
        write64(cx, d, V64("pair", lo, cx.op("xor", hi, Imm(0x80000000))), ins)
        return
    if _bits(t) == 64:
        lo, hi = neg64(cx, as_pair(cx, read64(cx, a, t, ins), ins))
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    va = read32(cx, a, t, ins, "raw")
    write32(cx, d, t, lambda r: cx.into(r, "sub", Imm(0), va), ins)


def minmax(cx: LowerCtx, ins: Instr, op: str) -> None:
    """min/max by type: f32 op, f64 bit sequence, 64-bit compare and select, else one op."""
    t = _type_of(ins)
    _, ftz, _ = fmods(cx, ins)
    d, a, b = ins.operands
    if t == "f32":
        va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
        write32(cx, d, t, lambda r: cx.into(r, "f" + op, va, vb, ftz=ftz), ins)
        return
    if t == "f64":
        lo, hi = dminmax(cx, dpair(cx, a, ins), dpair(cx, b, ins), op == "min")
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    sg = "s" if _signed(t) else "u"
    if _bits(t) == 64:
        pa, pb = as_pair(cx, read64(cx, a, t, ins), ins), as_pair(cx, read64(cx, b, t, ins), ins)
        p = cmp64(cx, "lt" if op == "min" else "gt", pa, pb, sg == "s")
        write64(cx, d, V64("pair", cx.sel(pa[0], pb[0], p), cx.sel(pa[1], pb[1], p)), ins)
        return
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    write32(cx, d, t, lambda r: cx.into(r, op, va, vb, sign=sg), ins, clean=True)


def ptx_min(cx: LowerCtx, ins: Instr) -> None:
    """min: see ``minmax``."""
    minmax(cx, ins, "min")


def ptx_max(cx: LowerCtx, ins: Instr) -> None:
    """max: see ``minmax``."""
    minmax(cx, ins, "max")
