"""Float rules and helpers: f32 forms as single machine ops, f64 forms as pair ops, the forms
with no exact machine sequence as limits or traps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import ROUNDING, _type_of
from qwengpu.codegen.lowering.floatseq import dop
from qwengpu.codegen.lowering.operands import (
    V64,
    as_pair,
    dpair,
    read32,
    read64,
    write32,
    write64,
    writep,
)
from qwengpu.isa.instr import Imm, P
from qwengpu.ptx.ir import Instr

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def fmods(cx: LowerCtx, ins: Instr) -> tuple[str, bool, bool]:
    """(rounding mode, ftz, sat) of a float instruction."""
    rnd = next((m for m in ins.mods if m in ROUNDING), None)
    return rnd or "rn", "ftz" in ins.mods, "sat" in ins.mods


def fbin(cx: LowerCtx, ins: Instr, op: str) -> None:
    """A two-operand f32 instruction as the machine op ``op``."""
    rnd, ftz, sat = fmods(cx, ins)
    d, a, b = ins.operands
    va, vb = read32(cx, a, "f32", ins), read32(cx, b, "f32", ins)
    write32(cx, d, "f32", lambda r: cx.into(r, op, va, vb, rnd=rnd, ftz=ftz, sat=sat), ins)


def dop_write(cx: LowerCtx, ins: Instr, d: object, op: str, *pairs: tuple, **m: object) -> None:
    """The pair op ``op`` over the source pairs, written to the 64-bit destination ``d``."""
    lo, hi = dop(cx, op, *pairs, **m)
    write64(cx, d, V64("pair", lo, hi), ins)


def dbin(cx: LowerCtx, ins: Instr, op: str, negate_b: bool = False) -> None:
    """add/sub/mul/div.rnd.f64 as one pair op (sub: a + (-b), exact in IEEE, zeros included)."""
    d, a, b = ins.operands
    pb = dpair(cx, b, ins)
    if negate_b:
        h = pb[1]
        pb = (pb[0], Imm(h.v ^ 0x80000000) if isinstance(h, Imm) else cx.op("xor", h, Imm(0x80000000)))
    dop_write(cx, ins, d, op, dpair(cx, a, ins), pb, rnd=fmods(cx, ins)[0])


def f64_trap(cx: LowerCtx, ins: Instr) -> None:
    """An f64 instruction the machine has no sequence for: lowered to a trap that reports a
    machine limit if a lane ever executes it (e.g. sinf's Payne-Hanek path for huge arguments),
    so kernels that never reach it still run."""
    cx.emit("trap", code="limit")


def ptx_copysign(cx: LowerCtx, ins: Instr) -> None:
    """copysign: the magnitude of b with the sign of a."""
    t = _type_of(ins)
    d, a, b = ins.operands
    if t == "f64":
        al, ah = as_pair(cx, read64(cx, a, t, ins), ins)
        bl, bh = as_pair(cx, read64(cx, b, t, ins), ins)
        hi = cx.op("or", cx.op("and", bh, Imm(0x7FFFFFFF)), cx.op("and", ah, Imm(0x80000000)))
        write64(cx, d, V64("pair", bl, hi), ins)
        return
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    m = cx.op("and", vb, Imm(0x7FFFFFFF))
    s = cx.op("and", va, Imm(0x80000000))
    write32(cx, d, t, lambda r: cx.into(r, "or", m, s), ins)


def unary_f32(cx: LowerCtx, ins: Instr, op: str, *pre: Imm, rounded: bool = True) -> None:
    """A one-operand f32 instruction as the machine op ``op`` (sources ``pre`` + the operand);
    ``.approx`` forms are modelled correctly rounded (rn); f64 forms trap."""
    t = _type_of(ins)
    rnd, ftz, _ = fmods(cx, ins)
    if t != "f32":
        return f64_trap(cx, ins)
    m = {"rnd": "rn" if "approx" in ins.mods else rnd, "ftz": ftz} if rounded else {"ftz": ftz}
    d, a = ins.operands
    va = read32(cx, a, t, ins)
    write32(cx, d, t, lambda x: cx.into(x, op, *pre, va, **m), ins)
    return None


def ptx_sqrt(cx: LowerCtx, ins: Instr) -> None:
    """sqrt: f64 (not approx) as ``dsqrt``; f32 as ``fsqrt``."""
    if _type_of(ins) == "f64" and "approx" not in ins.mods:
        d, a = ins.operands
        return dop_write(cx, ins, d, "dsqrt", dpair(cx, a, ins), rnd=fmods(cx, ins)[0])
    return unary_f32(cx, ins, "fsqrt")


def ptx_rcp(cx: LowerCtx, ins: Instr) -> None:
    """rcp: f64 (not approx) as 1/x with ``ddiv``; f32 as ``fdiv`` of 1."""
    if _type_of(ins) == "f64" and "approx" not in ins.mods:
        d, a = ins.operands
        one = (Imm(0), Imm(0x3FF00000))
        return dop_write(cx, ins, d, "ddiv", one, dpair(cx, a, ins), rnd=fmods(cx, ins)[0])
    return unary_f32(cx, ins, "fdiv", Imm(0x3F800000))


def ptx_ex2(cx: LowerCtx, ins: Instr) -> None:
    """ex2.approx{.ftz}.f32: the machine op ``fex2`` (rn(2^x), like the interpreter's model)."""
    unary_f32(cx, ins, "fex2", rounded=False)


def approx_limit(cx: LowerCtx, ins: Instr) -> None:
    """lg2/sin/cos/tanh.approx: no exact machine sequence yet, so a machine limit."""
    raise cx.limit(ins, f"the approximate instruction `{ins.form}` (no exact machine sequence yet)")


def ptx_rsqrt(cx: LowerCtx, ins: Instr) -> None:
    """rsqrt.approx.f32: the machine op ``frsqrt`` (rn(1/sqrt(a)), the interpreter's model; the
    weights expand it: ``softfloat.expand_frsqrt``); f64 traps."""
    unary_f32(cx, ins, "frsqrt", rounded=False)


def ptx_testp(cx: LowerCtx, ins: Instr) -> None:
    """testp.{finite,infinite,number,notanumber,normal,subnormal}.f32 on the bits."""
    t = _type_of(ins)
    kind = ins.mods[0]
    if t != "f32":
        return f64_trap(cx, ins)
    d, a = ins.operands
    va = read32(cx, a, t, ins)
    mag = cx.op("and", va, Imm(0x7FFFFFFF))
    inf = Imm(0x7F800000)

    def f(p: P) -> None:
        if kind in ("finite", "infinite", "number", "notanumber"):
            cmp = {"finite": "lt", "infinite": "eq", "number": "le", "notanumber": "gt"}[kind]
            cx.setp_into(p, cmp, mag, inf)
        elif kind == "normal":
            e = cx.op("and", va, inf)
            q = cx.setp("ne", e, Imm(0))
            cx.setp_into(p, "lt", mag, inf, bop="and", c=q)
        elif kind == "subnormal":
            e = cx.op("and", va, inf)
            q = cx.setp("eq", e, Imm(0))
            cx.setp_into(p, "ne", mag, Imm(0), bop="and", c=q)
        else:
            raise cx.fail(ins, f"unknown testp .{kind}")

    writep(cx, d, f, ins)
