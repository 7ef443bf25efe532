"""Memory and atomic rules: ld/ldu/st with their address forms, atom and red."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import SPACES, _bits, _signed, _type_of
from qwengpu.codegen.lowering.kinds import PAIR
from qwengpu.codegen.lowering.operands import (
    V64,
    as_pair,
    bank_slot,
    dest64,
    read32,
    read64,
    sym_value,
    to_window,
    write32,
    write64,
)
from qwengpu.isa.instr import Imm, R
from qwengpu.ptx.ir import TYPE_SIZES, Addr, Instr, Reg, Sink, Sym, Vec
from qwengpu.simt.memory import GLOBAL_BASE

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def space_of(cx: LowerCtx, ins: Instr, a: Addr) -> str:
    """The state space of a memory instruction (a promoted call parameter is ``callparam``)."""
    for m in ins.mods:
        if m in SPACES:
            if m == "param" and isinstance(a.base, Sym) and a.base.name in cx.layout.local_off:
                return "callparam"
            return m
    return "generic"


def address(cx: LowerCtx, a: Addr, space: str, ins: Instr) -> tuple[R | Imm, str, int, int]:
    """(address word, amode, base, offset) for a memory operand."""
    off = a.offset
    if a.base is None:
        return Imm(0), "z", 0, off
    if isinstance(a.base, Sym):
        v = sym_value(cx, a.base.name, ins)
        if v.const is not None:
            return Imm(0), "z", 0, v.const + off
        return v.lo, "s", v.base, off
    decl = cx.decl(a.base, ins)
    if _bits(decl) < 64:
        return cx.reg32[a.base.name], "z", 0, off
    v = read64(cx, a.base, decl, ins)
    if v.kind == "w":
        return v.lo, "s", v.base, off
    if v.kind == "sx":
        return v.lo, "s", 0, off
    if v.kind == "zx":
        return v.lo, "z", 0, off
    if space == "generic":
        raise cx.limit(ins, "a generic memory access through a general 64-bit address")
    base = GLOBAL_BASE if space in ("global", "const") else 0
    return to_window(cx, v, base, ins), "s", base, off


def ptx_ld(cx: LowerCtx, ins: Instr) -> None:
    """ld/ldu: vectors, 64-bit as two words; a pointer parameter kept as a window comes from the
    launch-constant bank."""
    t = _type_of(ins)
    d, a = ins.operands
    if not isinstance(a, Addr):
        raise cx.fail(ins, "ld needs an address operand")
    if t == "pred":
        raise cx.fail(ins, "ld of .pred")
    space = space_of(cx, ins, a)
    size = TYPE_SIZES[t]
    if size > 8:
        raise cx.limit(ins, f"{size * 8}-bit memory access")
    dests = list(d.items) if isinstance(d, Vec) else [d]
    # a pointer parameter kept as a window value: one word from the launch-constant bank
    if (
        space == "param"
        and size == 8
        and len(dests) == 1
        and isinstance(d, Reg)
        and isinstance(a.base, Sym)
        and cx.kinds.get(d.name, PAIR)[0] == "w"
    ):
        slot = bank_slot(cx, ("window", (cx.layout.param_off[a.base.name] + a.offset, GLOBAL_BASE)))
        _, dlo, _ = dest64(cx, d, ins)
        cx.into(dlo, "ld", Imm(0), space="param", size=4, off=slot)
        return
    A, amode, base, off = address(cx, a, space, ins)
    sg = "s" if _signed(t) else "u"
    for k, x in enumerate(dests):
        o = off + k * size
        m = {"space": space, "amode": amode, "base": base}
        if size <= 4:
            write32(
                cx,
                x,
                t,
                lambda r, o=o, m=m: cx.into(r, "ld", A, size=size, sign=sg, off=o, **m),
                ins,
                clean=True,
            )
        else:
            lo = cx.op("ld", A, size=4, chk=8, off=o, **m)
            hi = cx.op("ld", A, size=4, off=o + 4, **m)
            if isinstance(x, Sink):
                continue
            write64(cx, x, V64("pair", lo, hi), ins)


def ptx_st(cx: LowerCtx, ins: Instr) -> None:
    """st: vectors, 64-bit as two words (the sources read before the address)."""
    t = _type_of(ins)
    a, s = ins.operands
    if not isinstance(a, Addr):
        raise cx.fail(ins, "st needs an address operand")
    space = space_of(cx, ins, a)
    size = TYPE_SIZES[t]
    if size > 8:
        raise cx.limit(ins, f"{size * 8}-bit memory access")
    srcs = list(s.items) if isinstance(s, Vec) else [s]
    vals = []
    for x in srcs:
        if size <= 4:
            vals.append((read32(cx, x, t, ins, "raw"),))
        else:
            vals.append(as_pair(cx, read64(cx, x, t, ins), ins))
    A, amode, base, off = address(cx, a, space, ins)
    m = {"space": space, "amode": amode, "base": base}
    for k, v in enumerate(vals):
        o = off + k * size
        if size <= 4:
            cx.emit("st", (), (A, v[0]), size=size, off=o, **m)
        else:
            cx.emit("st", (), (A, v[0]), size=4, chk=8, off=o, **m)
            cx.emit("st", (), (A, v[1]), size=4, off=o + 4, **m)


def ptx_atom(cx: LowerCtx, ins: Instr) -> None:
    """atom: see ``atomic``."""
    atomic(cx, ins, True)


def ptx_red(cx: LowerCtx, ins: Instr) -> None:
    """red: an atom whose result is dropped."""
    atomic(cx, ins, False)


def atomic(cx: LowerCtx, ins: Instr, returns: bool) -> None:
    """atom/red on 32-bit values as one machine ``atom``."""
    t = _type_of(ins)
    kind = next(
        (m for m in ins.mods if m in ("add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor")),
        None,
    )
    if kind is None:
        raise cx.fail(ins, "unsupported atomic operation")
    if _bits(t) != 32:
        raise cx.limit(ins, f"{_bits(t)}-bit atomics")
    if t == "f32" and kind not in ("add", "min", "max", "exch", "cas"):
        raise cx.fail(ins, f"unsupported atomic .{kind}.f32")
    ops = list(ins.operands)
    d = ops.pop(0) if returns else None
    a = ops.pop(0)
    if not isinstance(a, Addr):
        raise cx.fail(ins, "atomic needs an address operand")
    space = space_of(cx, ins, a)
    vb = read32(cx, ops[0], t, ins, "raw")
    vc = read32(cx, ops[1], t, ins, "raw") if len(ops) > 1 else Imm(0)
    A, amode, base, off = address(cx, a, space, ins)
    at = "f32" if t == "f32" else ("s32" if _signed(t) else ("u32" if t == "u32" else "b32"))

    def f(r: R) -> None:
        cx.emit("atom", (r,), (A, vb, vc), space=space, aop=kind, type=at, amode=amode, base=base, off=off)

    if d is None:
        f(cx.tmp())
    else:
        write32(cx, d, t, f, ins)
