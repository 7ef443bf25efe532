"""Kinds of 64-bit registers: how the machine holds each one.

Addresses. PTX computes 64-bit pointers; the machine keeps a value that is only ever used to form
addresses in ONE register, as a *window* value w meaning ``base + sext(w)``, where ``base`` is a
compile-time constant (the global arena's generic base, or 0 for a .shared/.local offset). The
window arithmetic ops (``addw``/``subw``/``mulw``) compute exactly while the value lies within
+-(2^31-1) of the base and otherwise give POISON (0x80000000), which every memory op reports as
an out-of-bounds access. A kind analysis (``analyze_kinds``) decides, for every 64-bit PTX
register, whether it is a window value (only address uses), an exact sign/zero-extended 32-bit
value, or a general 64-bit value held in a register pair."""

from __future__ import annotations

from qwengpu.codegen.lowering.common import M64, _bits, _signed, _type_of
from qwengpu.isa.program import Layout
from qwengpu.ptx.ir import TYPES, Addr, Function, Instr, Pair, Reg, Special, Sym, Vec
from qwengpu.ptx.ir import Imm as PImm
from qwengpu.simt.memory import GLOBAL_BASE, LOCAL_WINDOW, SHARED_WINDOW

PAIR: tuple = ("pair",)
SX: tuple = ("sx",)
ZX: tuple = ("zx",)


def W(base: int) -> tuple:
    """The kind of a window value over ``base``."""
    return ("w", base)


def _kjoin(a: tuple | None, b: tuple | None) -> tuple | None:
    """The join of two definitions' kinds (None: not yet known)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if a == PAIR or b == PAIR:
        return PAIR
    ka, kb = a[0], b[0]
    if ka in ("sx", "zx") and kb in ("sx", "zx"):
        return W(0)
    if ka in ("sx", "zx") and b == W(0) or kb in ("sx", "zx") and a == W(0):
        return W(0)
    return PAIR


def _kbase(k: tuple) -> int:
    """The base of a kind (0 for sx/zx words)."""
    return k[1] if k[0] == "w" else 0


def _imm_kind(v: int) -> tuple:
    """The kind an integer immediate fits: sx, zx or a pair."""
    v &= M64
    sv = v - (1 << 64) if v >> 63 else v
    if -(2**31) <= sv < 2**31:
        return SX
    if 0 <= v < 2**32:
        return ZX
    return PAIR


def _is64(fn: Function, op: object) -> bool:
    """Is the operand a 64-bit (non-predicate) register?"""
    return (
        isinstance(op, Reg)
        and op.name in fn.regs
        and fn.regs[op.name] != "pred"
        and _bits(fn.regs[op.name]) == 64
    )


class KindAnalysis:
    """Decide, for each 64-bit PTX register, how the machine holds it (see the module docstring).

    Forward: the kind a definition produces from its operands' kinds (joined over all definitions
    of a register, to a fixed point). Backward: a window value may only be used to form addresses;
    any other use demotes it (and whatever flows into it) to a register pair. Repeat until stable.
    """

    W_FORMS = ("mov", "cvta", "add", "sub", "shl", "mul", "mad", "selp", "and", "or", "xor")

    def __init__(self, fn: Function, pointer_params: set[str], layout: Layout, global_syms: set[str]) -> None:
        self.fn = fn
        self.ptrs = pointer_params
        self.layout = layout
        self.gsyms = global_syms

    def _k(self, op: object, kinds: dict[str, tuple | None]) -> tuple | None:
        if isinstance(op, Reg):
            k = kinds.get(op.name)
            return k
        if isinstance(op, PImm):
            return _imm_kind(op.value) if op.kind == "int" else PAIR
        if isinstance(op, Sym):
            return W(GLOBAL_BASE) if op.name in self.gsyms else W(0)
        return PAIR

    def def_kind(self, ins: Instr, kinds: dict[str, tuple | None]) -> tuple | None:
        """The kind a definition by ``ins`` produces (its rule in ``DEF_KIND``; else a pair)."""
        rule = DEF_KIND.get(ins.op)
        return PAIR if rule is None else rule(self, ins, kinds)

    def _defs(self, ins: Instr) -> list[str]:
        out = []
        if not ins.operands or ins.op in ("st", "bra", "red", "bar", "ret", "exit"):
            return out
        d = ins.operands[0]
        if isinstance(d, Reg):
            out.append(d.name)
        elif isinstance(d, Pair):
            out += [x.name for x in (d.first, d.second) if isinstance(x, Reg)]
        elif isinstance(d, Vec):
            out += [x.name for x in d.items if isinstance(x, Reg)]
        return out

    def _w_use_ok(self, ins: Instr, pos: int, kinds: dict[str, tuple | None]) -> bool:
        """May operand ``pos`` of ``ins`` be a window value?"""
        op = ins.op
        opnd = ins.operands[pos]
        if isinstance(opnd, Addr):
            return op in ("ld", "ldu", "st", "atom", "red", "prefetch", "prefetchu")
        if op not in self.W_FORMS or pos == 0:
            return False
        d = ins.operands[0]
        if not (isinstance(d, Reg) and _is64(self.fn, d)):
            return False
        kd = kinds.get(d.name)
        if kd is None or kd[0] != "w":
            return False
        if op == "mad":
            return pos == 3
        if op == "mul":
            return False
        return True

    def run(self) -> dict[str, tuple]:
        fn = self.fn
        regs64 = [r for r in fn.regs if fn.regs[r] != "pred" and _bits(fn.regs[r]) == 64]
        forced: set[str] = {r for r in regs64 if fn.regs[r] == "f64"}
        while True:
            kinds: dict[str, tuple | None] = {r: (PAIR if r in forced else None) for r in regs64}
            changed = True
            while changed:
                changed = False
                for ins in fn.body:
                    for d in self._defs(ins):
                        if d not in kinds or d in forced:
                            continue
                        if isinstance(ins.operands[0], (Vec, Pair)):
                            nk = PAIR
                        else:
                            nk = self.def_kind(ins, kinds)
                        j = _kjoin(kinds[d], nk)
                        if j != kinds[d]:
                            kinds[d] = j
                            changed = True
            final = {r: (k if k is not None else PAIR) for r, k in kinds.items()}
            demote = set()
            for ins in fn.body:
                for pos, opnd in enumerate(ins.operands):
                    names = []
                    if isinstance(opnd, Reg):
                        names = [opnd.name]
                    elif isinstance(opnd, Addr) and isinstance(opnd.base, Reg):
                        names = [opnd.base.name]
                    elif isinstance(opnd, Vec):
                        names = [x.name for x in opnd.items if isinstance(x, Reg)]
                    for nme in names:
                        if nme not in final or final[nme][0] != "w":
                            continue
                        if pos == 0 and ins.op not in ("st", "red", "atom") and not isinstance(opnd, Addr):
                            continue  # a definition, not a use
                        if isinstance(opnd, Vec) or not self._w_use_ok(ins, pos, final):
                            demote.add(nme)
                if ins.guard is not None and ins.guard.name in final and final[ins.guard.name][0] == "w":
                    demote.add(ins.guard.name)
            new = demote - forced
            if not new:
                return final
            forced |= new


KindMap = dict[str, "tuple | None"]


def _def_ld(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """A pointer parameter loaded whole: a window value over the global arena."""
    ops = ins.operands
    if (
        "param" in ins.mods
        and isinstance(ops[1], Addr)
        and isinstance(ops[1].base, Sym)
        and ops[1].base.name in an.ptrs
        and ops[1].offset == 0
        and not isinstance(ops[0], Vec)
    ):
        return W(GLOBAL_BASE)
    return PAIR


def _def_mov(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """A move keeps the source's kind (vectors and special registers: pairs)."""
    ops = ins.operands
    if isinstance(ops[1], Vec) or isinstance(ops[0], Vec):
        return PAIR
    if isinstance(ops[1], Special):
        return PAIR
    return an._k(ops[1], kinds)


def _def_cvta(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """A window value moves between the generic and a shared/local window by that window's base."""
    mods = ins.mods
    src = an._k(ins.operands[1], kinds)
    if src is None or src == PAIR:
        return src
    space = next((m for m in mods if m in ("global", "shared", "local", "const", "param")), None)
    win = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space or "", 0)
    if win == 0:
        return src
    b = _kbase(src)
    nb = b - win if "to" in mods else b + win
    return W(nb) if nb in (0, GLOBAL_BASE, SHARED_WINDOW, LOCAL_WINDOW) else PAIR


def _def_cvt(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """An integer widened from 32 bits or fewer is an exact sx/zx word."""
    mods = ins.mods
    types = [m for m in mods if m in TYPES]
    if len(types) != 2 or "sat" in mods:
        return PAIR
    dt, st = types
    if st in ("f32", "f64", "f16", "bf16") or dt in ("f64",):
        return PAIR
    if _bits(st) == 64:
        return an._k(ins.operands[1], kinds)
    return SX if _signed(st) else ZX


def _def_mul(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """mul.wide.{s32,u32}: an exact window offset."""
    if "wide" in ins.mods and _type_of(ins) in ("s32", "u32"):
        return W(0)
    return PAIR


def _def_mad(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """mad.wide.{s32,u32}: the addend's window plus an offset."""
    if "wide" in ins.mods and _type_of(ins) in ("s32", "u32"):
        kc = an._k(ins.operands[3], kinds)
        if kc is None or kc == PAIR:
            return kc
        return W(_kbase(kc))
    return PAIR


def _def_addsub(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """Window plus offset stays a window; the difference of two same-base windows is an offset."""
    if not ("cc" not in ins.mods and _type_of(ins) in ("s64", "u64", "b64")):
        return PAIR
    ops = ins.operands
    ka, kb = an._k(ops[1], kinds), an._k(ops[2], kinds)
    if ka is None or kb is None:
        return None if PAIR not in (ka, kb) else PAIR
    if PAIR in (ka, kb):
        return PAIR
    ba, bb = _kbase(ka), _kbase(kb)
    if ins.op == "add":
        if ba and bb:
            return PAIR
        return W(ba or bb)
    if bb == 0:
        return W(ba)
    if ba == bb:
        return W(0)
    return PAIR


def _def_shl(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """An offset shifted left by a small constant (a scaled index) stays an offset."""
    ops = ins.operands
    if not (_type_of(ins) in ("b64", "u64", "s64") and isinstance(ops[2], PImm) and 0 <= ops[2].value <= 30):
        return PAIR
    ka = an._k(ops[1], kinds)
    if ka is None or ka == PAIR:
        return ka
    return W(0) if _kbase(ka) == 0 else PAIR


def _def_logic(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """and/or/xor with a small non-negative constant: an offset stays an offset (and of sx/zx: zx)."""
    ops = ins.operands
    if not (
        _type_of(ins) in ("b64", "u64", "s64") and isinstance(ops[2], PImm) and 0 <= ops[2].value < 2**31
    ):
        return PAIR
    ka = an._k(ops[1], kinds)
    if ins.op == "and" and ka in (SX, ZX):
        return ZX
    if ka in (SX, ZX, W(0)):
        return W(0)  # e.g. p[i ^ 1]: a byte offset combined with a small mask
    return None if ka is None else PAIR


def _def_selp(an: KindAnalysis, ins: Instr, kinds: KindMap) -> tuple | None:
    """selp: the join of both sides."""
    return _kjoin(an._k(ins.operands[1], kinds), an._k(ins.operands[2], kinds))


# the kind each opcode's definition produces; any other definition is a general pair
DEF_KIND = {
    "ld": _def_ld,
    "mov": _def_mov,
    "cvta": _def_cvta,
    "cvt": _def_cvt,
    "mul": _def_mul,
    "mad": _def_mad,
    "add": _def_addsub,
    "sub": _def_addsub,
    "shl": _def_shl,
    "and": _def_logic,
    "or": _def_logic,
    "xor": _def_logic,
    "selp": _def_selp,
}
