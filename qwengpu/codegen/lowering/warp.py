"""Warp-level rules: shfl, vote, activemask."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.operands import read32, readp, write32, writep
from qwengpu.isa.instr import TRUE, P, R
from qwengpu.ptx.ir import Instr, Pair, Reg

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def ptx_shfl(cx: LowerCtx, ins: Instr) -> None:
    """shfl.sync: the source register is pinned (other lanes read it); an optional predicate."""
    mode = next((m for m in ins.mods if m in ("up", "down", "bfly", "idx")), None)
    if mode is None:
        raise cx.fail(ins, "shfl needs a mode")
    d, a, b, c = ins.operands[:4]
    dp = None
    if isinstance(d, Pair):
        d, dp = d.first, d.second
    va = read32(cx, a, "b32", ins, "raw")
    if isinstance(a, Reg) and isinstance(va, R) and va == cx.reg32.get(a.name):
        cx.pinned.add(va.n)  # other lanes' copies of this register are read: keep it exclusive
    vb, vc = read32(cx, b, "u32", ins), read32(cx, c, "u32", ins)

    def f(r: R) -> None:
        if r in (va, vb, vc):  # a cross-lane op's destination must differ from its sources
            t = cx.tmp()
            cx.into(t, "shfl", va, vb, vc, mode=mode)
            cx.mov(r, t)
        else:
            cx.into(r, "shfl", va, vb, vc, mode=mode)

    write32(cx, d, "b32", f, ins)
    if dp is not None:
        writep(cx, dp, lambda p: cx.emit("shflp", (p,), (vb, vc), mode=mode), ins)


def ptx_vote(cx: LowerCtx, ins: Instr) -> None:
    """vote.{all,any,uni,ballot}."""
    mode = next((m for m in ins.mods if m in ("all", "any", "uni", "ballot")), None)
    if mode is None:
        raise cx.fail(ins, "vote needs a mode")
    d, a = ins.operands[:2]
    pa = readp(cx, a, ins)
    if mode == "ballot":
        write32(cx, d, "b32", lambda r: cx.into(r, "ballot", pa), ins)
        return

    def f(p: P) -> None:
        if p.n == pa.n:
            t = cx.ptmp()
            cx.emit("vote", (t,), (pa,), vmode=mode)
            cx.emit("plop", (p,), (t, TRUE), bop="and")
        else:
            cx.emit("vote", (p,), (pa,), vmode=mode)

    writep(cx, d, f, ins)


def ptx_activemask(cx: LowerCtx, ins: Instr) -> None:
    """activemask: the ballot of TRUE."""
    write32(cx, ins.operands[0], "b32", lambda r: cx.into(r, "ballot", TRUE), ins)
