"""Reading and writing PTX operands: 32-bit words, predicates, 64-bit values as pairs, exact
sx/zx words or window words (see ``kinds``), symbols and special registers; the writers follow
the interpreter's rules for sub-word and mixed-width destinations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import M32, M64, SR32, _align, _bits, _signed
from qwengpu.codegen.lowering.kinds import PAIR, SX, ZX, _imm_kind
from qwengpu.isa.instr import FALSE, POISON, TRUE, Imm, P, R
from qwengpu.ptx.ir import Imm as PImm
from qwengpu.ptx.ir import Instr, Neg, Reg, Sink, Special, Sym
from qwengpu.simt.memory import GLOBAL_BASE

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


@dataclass
class V64:
    """A 64-bit operand: a pair (lo, hi), an exact sx/zx word, or a window word with a base."""

    kind: str  # pair | sx | zx | w
    lo: R | Imm
    hi: R | Imm | None = None
    base: int = 0
    const: int | None = None  # the exact value, when known


def imm32(cx: LowerCtx, op: PImm, t: str, mode: str = "ext") -> Imm:
    """An immediate read as PTX type ``t`` (as the interpreter's ``_imm_value``)."""
    import numpy as np

    from qwengpu.simt import fp32

    if t == "f32":
        if op.kind == "int":
            return Imm(int(fp32.f32_from_int(np.array([op.value], dtype=np.int64), "s64", "rn")[0]))
        if op.kind == "f32":
            return Imm(op.value)
        return Imm(int(fp32.f32_from_f64(np.array([op.value], dtype=np.uint64), "rn")[0]))
    if t == "pred":
        return Imm(1 if op.value else 0)
    T = _bits(t)
    if op.kind == "f32":
        v = op.value & M32
    elif op.kind == "f64":
        v = op.value
    else:
        v = op.value
    v &= (1 << T) - 1 if T < 64 else M64
    if T < 32 and mode == "ext" and _signed(t) and v >> (T - 1):
        v -= 1 << T
    return Imm(v & M32)


def fit(cx: LowerCtx, x: R | Imm, S: int, T: int, signed: bool, mode: str) -> R | Imm:
    """Low ``T`` bits of a canonical ``S``-bit register, extended as ``mode`` asks."""
    if T >= 32 or mode == "raw":
        return x
    if signed and mode == "ext":
        return sext(cx, x, T)
    if S <= T:
        return x
    return cx.op("and", x, Imm((1 << T) - 1))


def sext(cx: LowerCtx, x: R | Imm, bits: int) -> R | Imm:
    """Sign-extend the low ``bits`` bits of a word."""
    if isinstance(x, Imm):
        v = x.v & ((1 << bits) - 1)
        return Imm(v - (1 << bits) if v >> (bits - 1) else v)
    t = cx.op("shl", x, Imm(32 - bits))
    return cx.op("shr", t, Imm(32 - bits), sign="s")


def read32(cx: LowerCtx, op: object, t: str, ins: Instr, mode: str = "ext") -> R | Imm:
    """Operand ``op`` read as PTX type ``t`` (32 bits or fewer), like the interpreter's reader.

    ``mode``: ``ext`` sign/zero-extends sub-word values by the type's signedness, ``zext``
    zero-extends, ``raw`` leaves the bits above the type's width unspecified."""
    T = 32 if t == "pred" else _bits(t)
    if isinstance(op, Reg):
        decl = cx.decl(op, ins)
        if decl == "pred":
            return cx.sel(Imm(1), Imm(0), cx.regp[op.name])
        S = _bits(decl)
        if S == 64:
            v = read64(cx, op, decl, ins)
            if v.kind == "w":
                raise cx.fail(ins, "internal: truncating a window value")
            return fit(cx, v.lo, 32, T, _signed(t), mode)
        return fit(cx, cx.reg32[op.name], S, T, _signed(t), mode)
    if isinstance(op, PImm):
        return imm32(cx, op, t, "ext" if mode == "ext" else "zext")
    if isinstance(op, Special):
        return fit(cx, special(cx, op.name, ins), 32, T, _signed(t), mode)
    if isinstance(op, Sym):
        v = sym_value(cx, op.name, ins)
        return v.lo
    raise cx.fail(ins, f"unsupported operand {op}")


def readp(cx: LowerCtx, op: object, ins: Instr) -> P:
    """A predicate operand (``%p``, ``!%p``, an immediate, or an integer register read as bool)."""
    if isinstance(op, Neg):
        return readp(cx, op.inner, ins).inv()
    if isinstance(op, Reg):
        decl = cx.decl(op, ins)
        if decl == "pred":
            return cx.regp[op.name]
        x = read32(cx, op, decl if _bits(decl) <= 32 else "b32", ins, "zext")
        if _bits(decl) == 64:
            lo, hi = as_pair(cx, read64(cx, op, decl, ins), ins)
            p = cx.setp("ne", lo, Imm(0))
            return cx.setp("ne", hi, Imm(0), bop="or", c=p)
        return cx.setp("ne", x, Imm(0))
    if isinstance(op, PImm):
        return TRUE if op.value else FALSE
    raise cx.fail(ins, f"unsupported predicate operand {op}")


def special(cx: LowerCtx, name: str, ins: Instr) -> R | Imm:
    """A special register: machine ``s2r`` or a constant of the one-SM machine."""
    base = name.split(".")[0]
    if name in SR32:
        return cx.op("s2r", sr=name)
    if base == "warpsize":
        return Imm(32)
    if base == "nsmid":
        return Imm(1)
    if base in ("smid", "gridid") or base.startswith("envreg"):
        return Imm(0)
    if base in ("clock", "clock64", "clock_hi", "globaltimer", "globaltimer_lo", "globaltimer_hi"):
        return cx.op("s2r", sr="clock")
    if base in ("aggr_smem_size",):
        return cx.op("s2r", sr="total_smem_size")
    raise cx.fail(ins, f"unsupported special register %{name}")


def sym_value(cx: LowerCtx, name: str, ins: Instr) -> V64:
    """The address of a symbol as a 64-bit operand value."""
    lay = cx.layout
    if name in lay.shared_off:
        off = lay.shared_off[name]
    elif name in lay.dynamic_shared_syms:
        off = _align(lay.static_shared, 16)
    elif name in lay.local_off:
        off = lay.local_off[name]
    elif name in lay.param_off:
        off = lay.param_off[name]
    elif name in cx.gsyms:
        slot = bank_slot(cx, ("global", name))
        w = cx.op("ld", Imm(slot), space="param", size=4)
        return V64("w", w, base=GLOBAL_BASE)
    else:
        raise cx.fail(ins, f"unknown symbol {name}")
    return V64("w", Imm(off), base=0, const=off)


def bank_slot(cx: LowerCtx, key: tuple[str, object]) -> int:
    """Byte offset (in the parameter bank) of a launch-constant word."""
    if key not in cx.bank_slots:
        cx.bank_slots.append(key)
    return _align(cx.layout.param_size, 4) + 4 * cx.bank_slots.index(key)


def read64(cx: LowerCtx, op: object, t: str, ins: Instr) -> V64:
    """A 64-bit operand."""
    if isinstance(op, Reg):
        decl = cx.decl(op, ins)
        if decl == "pred":
            return V64("zx", cx.sel(Imm(1), Imm(0), cx.regp[op.name]))
        if _bits(decl) < 64:
            return V64("zx", cx.reg32[op.name])  # the interpreter zero-extends the storage
        k = cx.kinds.get(op.name, PAIR)
        lo, hi = cx.reg64[op.name]
        if k == PAIR:
            return V64("pair", lo, hi)
        if k[0] == "w":
            return V64("w", lo, base=k[1])
        return V64(k[0], lo)
    if isinstance(op, PImm):
        if op.kind == "f32" and t == "f64":
            raise cx.limit(ins, "f64 arithmetic")
        v = op.value & M64
        k = _imm_kind(v)
        if k == SX:
            return V64("sx", Imm(v), const=v)
        if k == ZX:
            return V64("zx", Imm(v), const=v)
        return V64("pair", Imm(v), Imm(v >> 32), const=v)
    if isinstance(op, Special):
        return V64("zx", special(cx, op.name, ins))
    if isinstance(op, Sym):
        return sym_value(cx, op.name, ins)
    raise cx.fail(ins, f"unsupported 64-bit operand {op}")


def as_pair(cx: LowerCtx, v: V64, ins: Instr) -> tuple[R | Imm, R | Imm]:
    """A 64-bit operand as a pair (a window value only when its value is a known constant)."""
    if v.kind == "pair":
        assert v.hi is not None
        return v.lo, v.hi
    if v.kind == "zx":
        return v.lo, Imm(0)
    if v.kind == "sx":
        if isinstance(v.lo, Imm):
            return v.lo, Imm(M32 if v.lo.v >> 31 else 0)
        return v.lo, cx.op("shr", v.lo, Imm(31), sign="s")
    if v.const is not None:
        full = (v.base + v.const) & M64
        return Imm(full), Imm(full >> 32)
    if v.kind == "w" and not v.base & M32:
        # a window word w stands for base + sx(w) (every window base has zero low bits, and POISON
        # maps to base - 2^31, which to_window maps back to POISON); e.g. a __constant__ table's
        # address that goes into integer arithmetic with a loaded index
        s = cx.op("shr", v.lo, Imm(31), sign="s")
        bh = (v.base >> 32) & M32
        return v.lo, (cx.op("add", s, Imm(bh)) if bh else s)
    raise cx.fail(ins, "internal: a window value used as a 64-bit integer")


def as_w(cx: LowerCtx, v: V64, ins: Instr) -> tuple[R | Imm, str, int]:
    """A 64-bit operand as a window-op input: (word, signedness, base)."""
    if v.kind in ("w", "sx"):
        return v.lo, "s", v.base
    if v.kind == "zx":
        return v.lo, "u", 0
    if v.const is not None:
        return Imm(v.const), "s", 0
    raise cx.fail(ins, "internal: a 64-bit pair used as a window value")


def to_window(cx: LowerCtx, v: V64, base: int, ins: Instr) -> R | Imm:
    """Any 64-bit value as a window word relative to ``base`` (POISON when out of the window)."""
    if v.kind == "w":
        if v.base == base:
            return v.lo
        if v.const is not None:
            return to_window(cx, V64("pair", *const_pair(v.base + v.const)), base, ins)
        raise cx.fail(ins, "internal: window bases differ")
    if v.kind == "sx" and base == 0:
        return v.lo
    if v.kind == "zx" and base == 0:
        return cx.op("addw", v.lo, Imm(0), sa="u", sb="s")
    lo, hi = as_pair(cx, v, ins)
    bh = (base >> 32) & M32
    t = cx.op("sub", hi, Imm(bh)) if bh else hi
    s = cx.op("shr", lo, Imm(31), sign="s")
    p = cx.setp("eq", t, s)
    return cx.sel(lo, Imm(POISON), p)


def const_pair(v: int) -> tuple[Imm, Imm]:
    """A 64-bit constant as immediates (lo, hi)."""
    v &= M64
    return Imm(v), Imm(v >> 32)


def write32(
    cx: LowerCtx, dop: object, t: str, compute: Callable[[R], object], ins: Instr, clean: bool = False
) -> None:
    """Store a computed value of PTX type ``t`` into ``dop`` (the interpreter's writer rules).

    ``compute(target)`` emits the instruction(s) writing ``target``; ``clean`` says the value
    already is the 32-bit extension of its low ``bits(t)`` bits by ``t``'s signedness."""
    if isinstance(dop, Sink):
        compute(cx.tmp())
        return
    if not isinstance(dop, Reg):
        raise cx.fail(ins, f"cannot write to {dop}")
    decl = cx.decl(dop, ins)
    T = 32 if t == "pred" else _bits(t)
    if decl == "pred":
        v = cx.tmp()
        compute(v)
        cx.setp_into(cx.regp[dop.name], "ne", v, Imm(0))
        return
    S = _bits(decl)
    if S == 64:
        v = cx.tmp()
        compute(v)
        if T < 32 and not clean:
            v2 = sext(cx, v, T) if _signed(t) else cx.op("and", v, Imm((1 << T) - 1))
        else:
            v2 = v
        if T == 64:
            raise cx.fail(ins, "internal: 64-bit value through write32")
        write64(cx, dop, V64("sx" if _signed(t) else "zx", v2), ins)
        return
    d = cx.reg32[dop.name]
    if S == 32:
        if T >= 32 or clean:
            compute(d)
            return
        v = cx.tmp()
        compute(v)
        if _signed(t):
            s = cx.op("shl", v, Imm(32 - T))
            cx.into(d, "shr", s, Imm(32 - T), sign="s")
        else:
            cx.into(d, "and", v, Imm((1 << T) - 1))
        return
    # 8/16-bit register: canonical zero-extended low S bits
    if T == S and clean and not _signed(t):
        compute(d)
        return
    v = cx.tmp()
    compute(v)
    if T < S and not clean:
        v = sext(cx, v, T) if _signed(t) else cx.op("and", v, Imm((1 << T) - 1))
    cx.into(d, "and", v, Imm((1 << S) - 1))


def write32v(cx: LowerCtx, dop: object, t: str, value: R | Imm, ins: Instr, clean: bool = False) -> None:
    """Write an already computed word (``write32`` with a move)."""
    write32(cx, dop, t, lambda d: cx.mov(d, value) if d != value else None, ins, clean)


def writep(cx: LowerCtx, dop: object, compute: Callable[[P], object], ins: Instr) -> None:
    """Write a predicate result (an integer destination gets 1 or 0)."""
    if isinstance(dop, Sink):
        compute(cx.ptmp())
        return
    if isinstance(dop, Reg) and cx.decl(dop, ins) == "pred":
        compute(cx.regp[dop.name])
        return
    p = cx.ptmp()
    compute(p)
    write32(cx, dop, "u32", lambda d: cx.into(d, "sel", Imm(1), Imm(0), p), ins)


def dest64(cx: LowerCtx, dop: object, ins: Instr) -> tuple[str, R, R | None]:
    """(kind, lo, hi) of a 64-bit destination register."""
    if not isinstance(dop, Reg):
        if isinstance(dop, Sink):
            return "pair", cx.tmp(), cx.tmp()
        raise cx.fail(ins, f"cannot write to {dop}")
    decl = cx.decl(dop, ins)
    if _bits(decl) != 64:
        raise cx.fail(ins, f"internal: {dop.name} is not a 64-bit register")
    k = cx.kinds.get(dop.name, PAIR)
    lo, hi = cx.reg64[dop.name]
    return (k[0] if k != PAIR else "pair"), lo, hi


def write64(cx: LowerCtx, dop: object, v: V64, ins: Instr) -> None:
    """Write a 64-bit value into a destination of any kind (narrower registers truncate)."""
    if isinstance(dop, Sink):
        return
    if isinstance(dop, Reg) and _bits(cx.decl(dop, ins)) < 64:
        # a 64-bit value into a narrower register: truncation
        lo, _ = as_pair(cx, v, ins) if v.kind != "w" else (v.lo, None)
        write32v(cx, dop, cx.decl(dop, ins), lo, ins)
        return
    kind, dlo, dhi = dest64(cx, dop, ins)
    if kind == "pair":
        assert dhi is not None
        lo, hi = as_pair(cx, v, ins)
        cx.pmove([(dlo, lo), (dhi, hi)])
        return
    if kind == "w":
        assert isinstance(dop, Reg)
        base = cx.kinds[dop.name][1]
        if v.kind == "zx":
            cx.into(dlo, "addw", v.lo, Imm(0), sa="u", sb="s")
            return
        if v.kind == "w" and v.base != base:
            raise cx.fail(ins, "internal: window base mismatch")
        cx.mov(dlo, v.lo)
        return
    if v.kind != kind and v.const is None:
        raise cx.fail(ins, f"internal: {v.kind} value into a {kind} register")
    cx.mov(dlo, v.lo)


def dpair(cx: LowerCtx, a: object, ins: Instr) -> tuple[R | Imm, R | Imm]:
    """An f64 operand as a (lo, hi) pair of registers or immediates."""
    return as_pair(cx, read64(cx, a, "f64", ins), ins)
