"""Byte dot products and sums of absolute differences: ``dp4a``, ``dp2a.{lo,hi}``, 32-bit ``sad``.

Why here: the interpreter runs them (sm_61+ integer dot products NVRTC emits for ``__dp4a`` /
``__dp2a_lo`` / ``__dp2a_hi``, and ``__sad``); the machine has no unit for them, so each becomes a
short sequence of machine ops — fields by constant shifts, products by ``mul`` (the multiplier where
the shape has one, a sequence otherwise), sums wrapping to 32 bits exactly as the PTX ISA says.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import _bits, _signed, _type_of
from qwengpu.codegen.lowering.operands import read32, write32v
from qwengpu.isa.instr import Imm, R

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx
    from qwengpu.ptx.ir import Instr


def _field(cx: LowerCtx, x: R | Imm, k: int, bits: int, signed: bool) -> R | Imm:
    """Field ``k`` of ``bits`` bits of a 32-bit word, sign- or zero-extended to 32 bits."""
    if isinstance(x, Imm):
        v = (x.v >> (k * bits)) & ((1 << bits) - 1)
        if signed and v >= 1 << (bits - 1):
            v -= 1 << bits
        return Imm(v & 0xFFFFFFFF)
    lead = 32 - bits * (k + 1)
    if not signed:
        sh = cx.op("shr", x, Imm(k * bits)) if k else x
        return sh if lead == 0 else cx.op("and", sh, Imm((1 << bits) - 1))
    up = cx.op("shl", x, Imm(lead)) if lead else x
    return cx.op("shr", up, Imm(32 - bits), sign="s")


def _dot(cx: LowerCtx, ins: Instr, n: int) -> None:
    types = [m for m in ins.mods if m in ("u32", "s32")]
    if len(types) != 2:
        raise cx.fail(ins, f"dp{n}a needs two operand types")
    sa, sb = (t == "s32" for t in types)
    hi = "hi" in ins.mods
    d, a, b, c = ins.operands
    va, vb = read32(cx, a, "u32", ins), read32(cx, b, "u32", ins)
    acc: R | Imm = read32(cx, c, "u32", ins)
    for k in range(n):
        fa = _field(cx, va, k, 8 if n == 4 else 16, sa)
        fb = _field(cx, vb, k if n == 4 else k + 2 * hi, 8, sb)
        acc = cx.op("add", acc, cx.op("mul", fa, fb))
    write32v(cx, d, "u32", acc, ins)


def ptx_dp4a(cx: LowerCtx, ins: Instr) -> None:
    """dp4a.{u32,s32}.{u32,s32} d, a, b, c: c + the four byte products (wrapping)."""
    _dot(cx, ins, 4)


def ptx_dp2a(cx: LowerCtx, ins: Instr) -> None:
    """dp2a.{lo,hi}.{u32,s32}.{u32,s32} d, a, b, c: c + two halfword x byte products (wrapping)."""
    _dot(cx, ins, 2)


def ptx_sad(cx: LowerCtx, ins: Instr) -> None:
    """sad.{u32,s32} d, a, b, c: c + |a - b| (the difference exact, the sum wrapping); other widths
    are a machine limit."""
    t = _type_of(ins)
    if _bits(t) != 32:
        raise cx.limit(ins, f"sad.{t}")
    d, a, b, c = ins.operands
    va, vb, vc = read32(cx, a, t, ins), read32(cx, b, t, ins), read32(cx, c, t, ins)
    sg = "s" if _signed(t) else "u"
    diff = cx.op("sub", cx.op("max", va, vb, sign=sg), cx.op("min", va, vb, sign=sg))
    write32v(cx, d, t, cx.op("add", vc, diff), ins)
