"""The mov rule: plain moves, vector pack/unpack, predicates and 64-bit values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import _bits, _type_of
from qwengpu.codegen.lowering.operands import V64, as_pair, read32, read64, readp, write32v, write64, writep
from qwengpu.isa.instr import TRUE, Imm, R
from qwengpu.ptx.ir import Instr, Vec

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def ptx_mov(cx: LowerCtx, ins: Instr) -> None:
    """mov: vector pack/unpack through words, predicates, 64-bit values, words."""
    t = _type_of(ins)
    d, a = ins.operands
    if isinstance(a, Vec):
        return mov_pack(cx, ins, t, d, a)
    if isinstance(d, Vec):
        return mov_unpack(cx, ins, t, d, a)
    if t == "pred":
        src = readp(cx, a, ins)
        writep(cx, d, lambda p: cx.emit("plop", (p,), (src, TRUE), bop="and"), ins)
        return
    if _bits(t) == 64:
        write64(cx, d, read64(cx, a, t, ins), ins)
        return
    v = read32(cx, a, t, ins, "ext")
    write32v(cx, d, t, v, ins, clean=True)


def mov_pack(cx: LowerCtx, ins: Instr, t: str, d: object, a: Vec) -> None:
    """mov.b{32,64} d, {a, b, ...}: the parts shifted into place, low part first."""
    parts = a.items
    width = _bits(t) // len(parts)
    pt = {8: "b8", 16: "b16", 32: "b32"}[width]
    vals = [read32(cx, x, pt, ins, "zext") for x in parts]
    words = []
    per = 32 // width
    for w0 in range(0, len(vals), per):
        acc: R | Imm = vals[w0]
        for k in range(1, min(per, len(vals) - w0)):
            acc = cx.op("or", acc, cx.op("shl", vals[w0 + k], Imm(k * width)))
        words.append(acc)
    if _bits(t) == 64:
        write64(cx, d, V64("pair", words[0], words[1]), ins)
    else:
        write32v(cx, d, t, words[0], ins)


def mov_unpack(cx: LowerCtx, ins: Instr, t: str, d: Vec, a: object) -> None:
    """mov.b{32,64} {a, b, ...}, s: each part shifted out of its word and masked."""
    parts = d.items
    width = _bits(t) // len(parts)
    pt = {8: "b8", 16: "b16", 32: "b32"}[width]
    if _bits(t) == 64:
        lo, hi = as_pair(cx, read64(cx, a, t, ins), ins)
        words = [lo, hi]
    else:
        words = [read32(cx, a, t, ins, "raw")]
    per = 32 // width
    for k, x in enumerate(parts):
        w = words[k // per]
        sh = (k % per) * width
        v = cx.op("shr", w, Imm(sh)) if sh else w
        if width < 32:
            v = cx.op("and", v, Imm((1 << width) - 1))
        write32v(cx, x, pt, v, ins, clean=True)
