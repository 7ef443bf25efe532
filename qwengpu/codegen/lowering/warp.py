"""Warp-level rules: shfl, vote, activemask, match."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.operands import read32, readp, write32, writep
from qwengpu.isa.instr import TRUE, Imm, P, R
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


def ptx_match(cx: LowerCtx, ins: Instr) -> None:
    """match.{any,all}.sync.b32 (b64 is a machine limit), as the interpreter defines them over the
    active member lanes.

    ``any``: one loop trip per distinct value among the members (at most 32): the lowest member
    not yet matched broadcasts its value (``shfl.idx``), every lane compares, and the ballot of the
    equal members is the result of every lane holding that value. ``all``: one such trip; the
    members all matched or the result is 0. The loop count is warp-uniform (ballots)."""
    mode = next((m for m in ins.mods if m in ("any", "all")), None)
    if mode is None:
        raise cx.fail(ins, "match needs .any or .all")
    if "b64" in ins.mods:
        raise cx.limit(ins, "64-bit match")
    d, a, b = ins.operands[:3]
    dp = None
    if isinstance(d, Pair):
        d, dp = d.first, d.second
    va = read32(cx, a, "b32", ins, "raw")
    if isinstance(a, Reg) and isinstance(va, R) and va == cx.reg32.get(a.name):
        cx.pinned.add(va.n)  # other lanes read this register: keep it exclusive
    vb = read32(cx, b, "u32", ins)
    lane = cx.op("s2r", sr="laneid")
    own = cx.op("and", cx.op("shr", vb, lane), Imm(1))
    members = cx.op("ballot", cx.setp("ne", own, Imm(0)))
    clamp = Imm(0x1F)

    def equal_to_lowest(pending: R) -> tuple[R, P]:
        """(the ballot of the members equal to the lowest pending member's value, this lane equal)."""
        k = cx.op("clz", cx.op("brev", pending))  # 32 when none is pending: lane 0 (masked off below)
        x = cx.op("shfl", va, k, clamp, mode="idx")
        eq = cx.setp("eq", va, x)
        return cx.op("and", cx.op("ballot", eq), members), eq

    if mode == "all":
        m, _ = equal_to_lowest(members)
        uni = cx.setp("eq", m, members)
        write32(cx, d, "b32", lambda r: cx.into(r, "sel", members, Imm(0), uni), ins)
        if dp is not None:
            writep(cx, dp, lambda p: cx.emit("plop", (p,), (uni, TRUE), bop="and"), ins)
        return
    out, pending = cx.tmp(), cx.tmp()
    cx.mov(out, Imm(0))
    cx.mov(pending, members)
    top, done = cx._label(), cx._label()
    cx.place(top)
    cx.bra(done, cx.setp("eq", pending, Imm(0)))
    m, eq = equal_to_lowest(pending)
    cx.into(out, "sel", m, out, eq)
    cx.into(pending, "and", pending, cx.op("not", m))
    cx.bra(top)
    cx.place(done)
    write32(cx, d, "b32", lambda r: cx.mov(r, out), ins)


_REDUX_IDENTITY = {"add": 0, "and": 0xFFFFFFFF, "or": 0, "xor": 0}


def ptx_redux(cx: LowerCtx, ins: Instr) -> None:
    """redux.sync.{add,min,max,and,or,xor}.{u32,s32,b32}: one warp-uniform loop trip per active
    member lane, lowest first: ``shfl.idx`` brings its value, the accumulator folds it in (adds
    wrap; min/max by the type's signedness), as the interpreter reduces over the active members."""
    kind = next((m for m in ins.mods if m in ("add", "min", "max", "and", "or", "xor")), None)
    t = next((m for m in ins.mods if m in ("u32", "s32", "b32")), None)
    if kind is None or t is None:
        raise cx.fail(ins, "unsupported redux form")
    d, a, b = ins.operands[:3]
    va = read32(cx, a, t, ins, "raw")
    if isinstance(a, Reg) and isinstance(va, R) and va == cx.reg32.get(a.name):
        cx.pinned.add(va.n)  # other lanes read this register: keep it exclusive
    vb = read32(cx, b, "u32", ins)
    lane = cx.op("s2r", sr="laneid")
    own = cx.op("and", cx.op("shr", vb, lane), Imm(1))
    pending = cx.op("ballot", cx.setp("ne", own, Imm(0)))
    sign = "s" if t == "s32" else "u"
    first = cx.op("shfl", va, cx.op("clz", cx.op("brev", pending)), Imm(0x1F), mode="idx")
    acc = cx.tmp()
    if kind in ("min", "max"):  # the first member's value starts the fold (no identity needed)
        cx.mov(acc, first)
    else:
        cx.into(acc, kind, Imm(_REDUX_IDENTITY[kind]), first)
    cx.into(pending, "and", pending, cx.op("sub", pending, Imm(1)))
    top, done = cx._label(), cx._label()
    cx.place(top)
    cx.bra(done, cx.setp("eq", pending, Imm(0)))
    x = cx.op("shfl", va, cx.op("clz", cx.op("brev", pending)), Imm(0x1F), mode="idx")
    if kind in ("min", "max"):
        cx.into(acc, kind, acc, x, sign=sign)
    else:
        cx.into(acc, kind, acc, x)
    cx.into(pending, "and", pending, cx.op("sub", pending, Imm(1)))
    cx.bra(top)
    cx.place(done)
    write32(cx, d, t, lambda r: cx.mov(r, acc), ins)


def ptx_elect(cx: LowerCtx, ins: Instr) -> None:
    """elect.sync d|p, membermask (sm_90): the lowest active member lane is the leader; every lane
    gets its index (0 when there is no member), the leader the predicate."""
    d, b = ins.operands[:2]
    dp = None
    if isinstance(d, Pair):
        d, dp = d.first, d.second
    vb = read32(cx, b, "u32", ins)
    lane = cx.op("s2r", sr="laneid")
    own = cx.op("and", cx.op("shr", vb, lane), Imm(1))
    members = cx.op("ballot", cx.setp("ne", own, Imm(0)))
    leader = cx.sel(Imm(0), cx.op("clz", cx.op("brev", members)), cx.setp("eq", members, Imm(0)))
    write32(cx, d, "u32", lambda r: cx.mov(r, leader), ins)
    if dp is not None:
        writep(cx, dp, lambda p: cx.setp_into(p, "eq", lane, leader), ins)
