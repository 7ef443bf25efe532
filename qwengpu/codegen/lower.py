"""Lowering: PTX IR (after ``.func`` inlining) -> a machine program over virtual registers.

Why a separate lowering: the machine's ops are only what is plausible as an exact 32-bit circuit
(``isa.py``); everything else becomes a SEQUENCE of those ops here: 64-bit integers as register
pairs, integer and float division, square roots, bit-field ops, byte permutes, 64-bit
conversions. Each PTX instruction becomes a contiguous sequence in program order, so the
per-lane-PC min-PC scheduling of the machine reconverges exactly where the interpreter's does
(see DESIGN.md, "Divergence").

Addresses. PTX computes 64-bit pointers; the machine keeps a value that is only ever used to form
addresses in ONE register, as a *window* value w meaning ``base + sext(w)``, where ``base`` is a
compile-time constant (the global arena's generic base, or 0 for a .shared/.local offset). The
window arithmetic ops (``addw``/``subw``/``mulw``) compute exactly while the value lies within
+-(2^31-1) of the base and otherwise give POISON (0x80000000), which every memory op reports as
an out-of-bounds access. A kind analysis (``analyze_kinds``) decides, for every 64-bit PTX
register, whether it is a window value (only address uses), an exact sign/zero-extended 32-bit
value, or a general 64-bit value held in a register pair.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from qwengpu.errors import MachineLimitError, PTXError
from qwengpu.isa.instr import FALSE, POISON, TRUE, Imm, MInstr, P, R, validate
from qwengpu.isa.program import Layout, Program
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.ir import (
    TYPE_SIZES,
    TYPES,
    Addr,
    Function,
    Instr,
    Label,
    Module,
    Neg,
    Pair,
    Reg,
    Sink,
    Special,
    Sym,
    Vec,
)
from qwengpu.ptx.ir import (
    Imm as PImm,
)
from qwengpu.simt.memory import GLOBAL_BASE, LOCAL_WINDOW, SHARED_WINDOW

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF
ROUNDING = ("rn", "rz", "rm", "rp")
INT_ROUNDING = ("rni", "rzi", "rmi", "rpi")
APPROX_ONLY = {"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"}
SPACES = ("global", "shared", "local", "const", "param")
SR32 = {
    "tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
    "nctaid.x", "nctaid.y", "nctaid.z", "laneid", "warpid", "nwarpid", "lanemask_eq", "lanemask_lt",
    "lanemask_le", "lanemask_ge", "lanemask_gt", "dynamic_smem_size", "total_smem_size",
}  # fmt: skip


def _bits(t: str) -> int:
    return TYPE_SIZES[t] * 8


def _signed(t: str) -> bool:
    return t.startswith("s")


def _type_of(ins: Instr) -> str:
    for m in reversed(ins.mods):
        if m in TYPES:
            return m
    raise PTXError(f"{ins.where()}: `{ins.text}` has no type")


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


# ---------------------------------------------------------------------------------------------
# layout: identical to the interpreter's, so addresses and fault messages agree bit for bit
# ---------------------------------------------------------------------------------------------
def compute_layout(module: Module, fn: Function) -> Layout:
    """The interpreter's layout algorithm (same order, same alignment)."""
    local_off: dict[str, int] = {}
    off = 0
    for v in fn.vars:
        if v.space in ("local", "param"):
            off = _align(off, max(v.align, 1))
            local_off[v.name] = off
            off += v.size
    local_size = _align(off, 8)
    shared_off: dict[str, int] = {}
    shared_init: list[tuple[int, bytes]] = []
    dyn: list[str] = []
    off = 0
    shared_vars = [v for v in fn.vars if v.space == "shared"] + [
        v for v in module.globals if v.space == "shared"
    ]
    for v in shared_vars:
        if v.extern or v.size == 0:
            dyn.append(v.name)
            continue
        off = _align(off, max(v.align, 1))
        shared_off[v.name] = off
        if v.init:
            shared_init.append((off, v.init))
        off += v.size
    static_shared = off
    param_off: dict[str, int] = {}
    off = 0
    for p in fn.params:
        off = _align(off, max(p.align, TYPE_SIZES[p.type] if p.size == TYPE_SIZES[p.type] else 1))
        param_off[p.name] = off
        off += p.size
    gvars = [v for v in module.globals if v.space in ("global", "const")]
    return Layout(local_off, local_size, shared_off, shared_init, static_shared, dyn, param_off, off, gvars)


# ---------------------------------------------------------------------------------------------
# kinds of 64-bit registers
# ---------------------------------------------------------------------------------------------
PAIR: tuple = ("pair",)
SX: tuple = ("sx",)
ZX: tuple = ("zx",)


def W(base: int) -> tuple:
    return ("w", base)


def _kjoin(a: tuple | None, b: tuple | None) -> tuple | None:
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
    return k[1] if k[0] == "w" else 0


def _imm_kind(v: int) -> tuple:
    v &= M64
    sv = v - (1 << 64) if v >> 63 else v
    if -(2**31) <= sv < 2**31:
        return SX
    if 0 <= v < 2**32:
        return ZX
    return PAIR


def _is64(fn: Function, op: object) -> bool:
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
        op, mods, ops = ins.op, ins.mods, ins.operands
        k = self._k
        if (
            op == "ld"
            and "param" in mods
            and isinstance(ops[1], Addr)
            and isinstance(ops[1].base, Sym)
            and ops[1].base.name in self.ptrs
            and ops[1].offset == 0
            and not isinstance(ops[0], Vec)
        ):
            return W(GLOBAL_BASE)
        if op == "mov":
            if isinstance(ops[1], Vec) or isinstance(ops[0], Vec):
                return PAIR
            if isinstance(ops[1], Special):
                return PAIR
            return k(ops[1], kinds)
        if op == "cvta":
            src = k(ops[1], kinds)
            if src is None or src == PAIR:
                return src
            space = next((m for m in mods if m in ("global", "shared", "local", "const", "param")), None)
            win = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space or "", 0)
            if win == 0:
                return src
            b = _kbase(src)
            nb = b - win if "to" in mods else b + win
            return W(nb) if nb in (0, GLOBAL_BASE, SHARED_WINDOW, LOCAL_WINDOW) else PAIR
        if op == "cvt":
            types = [m for m in mods if m in TYPES]
            if len(types) != 2 or "sat" in mods:
                return PAIR
            dt, st = types
            if st in ("f32", "f64", "f16", "bf16") or dt in ("f64",):
                return PAIR
            if _bits(st) == 64:
                return k(ops[1], kinds)
            return SX if _signed(st) else ZX
        if op == "mul" and "wide" in mods and _type_of(ins) in ("s32", "u32"):
            return W(0)
        if op == "mad" and "wide" in mods and _type_of(ins) in ("s32", "u32"):
            kc = k(ops[3], kinds)
            if kc is None or kc == PAIR:
                return kc
            return W(_kbase(kc))
        if op in ("add", "sub") and "cc" not in mods and _type_of(ins) in ("s64", "u64", "b64"):
            ka, kb = k(ops[1], kinds), k(ops[2], kinds)
            if ka is None or kb is None:
                return None if PAIR not in (ka, kb) else PAIR
            if PAIR in (ka, kb):
                return PAIR
            ba, bb = _kbase(ka), _kbase(kb)
            if op == "add":
                if ba and bb:
                    return PAIR
                return W(ba or bb)
            if bb == 0:
                return W(ba)
            if ba == bb:
                return W(0)
            return PAIR
        if (
            op == "shl"
            and _type_of(ins) in ("b64", "u64", "s64")
            and isinstance(ops[2], PImm)
            and 0 <= ops[2].value <= 30
        ):
            ka = k(ops[1], kinds)
            if ka is None or ka == PAIR:
                return ka
            return W(0) if _kbase(ka) == 0 else PAIR
        if (
            op in ("and", "or", "xor")
            and _type_of(ins) in ("b64", "u64", "s64")
            and isinstance(ops[2], PImm)
            and 0 <= ops[2].value < 2**31
        ):
            ka = k(ops[1], kinds)
            if op == "and" and ka in (SX, ZX):
                return ZX
            if ka in (SX, ZX, W(0)):
                return W(0)  # e.g. p[i ^ 1]: a byte offset combined with a small mask
            return None if ka is None else PAIR
        if op == "selp":
            return _kjoin(k(ops[1], kinds), k(ops[2], kinds))
        return PAIR

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


# ---------------------------------------------------------------------------------------------
# 64-bit operand values during lowering
# ---------------------------------------------------------------------------------------------
@dataclass
class V64:
    """A 64-bit operand: a pair (lo, hi), an exact sx/zx word, or a window word with a base."""

    kind: str  # pair | sx | zx | w
    lo: R | Imm
    hi: R | Imm | None = None
    base: int = 0
    const: int | None = None  # the exact value, when known


class Lowerer:
    """Turns one (inlined) kernel into a machine program over virtual registers."""

    def __init__(self, module: Module, kernel: str, pointer_params: Sequence[bool] | None = None) -> None:
        from qwengpu.simt.interp import _find_kernel

        fn0 = _find_kernel(module, kernel)
        self.module = module
        self.fn = inline_calls(module, fn0)
        self.layout = compute_layout(module, self.fn)
        self.gsyms = {v.name for v in self.layout.global_vars}
        if pointer_params is None:
            ptrs = {
                p.name
                for p in self.fn.params
                if p.type in ("u64", "b64", "s64") and (p.is_ptr_hint or self._used_as_pointer(p.name))
            }
        else:
            ptrs = {p.name for p, isp in zip(self.fn.params, pointer_params, strict=False) if isp}
        self.ptrs = ptrs
        self._promote_call_params()
        self.kinds = KindAnalysis(self.fn, ptrs, self.layout, self.gsyms).run()
        self.nr = 0
        self.np = 0
        self.temps_r: set[int] = set()
        self.temps_p: set[int] = set()
        self.reg32: dict[str, R] = {}
        self.regp: dict[str, P] = {}
        self.reg64: dict[str, tuple[R, R | None]] = {}
        for name, t in self.fn.regs.items():
            if t == "pred":
                self.regp[name] = P(self._newp())
            elif _bits(t) == 64:
                k = self.kinds.get(name, PAIR)
                lo = R(self._newr())
                self.reg64[name] = (lo, R(self._newr()) if k == PAIR else None)
            else:
                self.reg32[name] = R(self._newr())
        self.code: list[MInstr] = []
        self.nlabels = 0
        self.ptx_label: dict[str, int] = {lb: self._label() for lb in self.fn.labels}
        self.bank_slots: list[tuple[str, object]] = []
        self.pinned: set[int] = set()
        self.cur_ptx = -1

    # ---- setup helpers
    def _used_as_pointer(self, pname: str) -> bool:
        regs = set()
        for ins in self.fn.body:
            if (
                ins.op == "ld"
                and "param" in ins.mods
                and isinstance(ins.operands[1], Addr)
                and isinstance(ins.operands[1].base, Sym)
                and ins.operands[1].base.name == pname
            ):
                if isinstance(ins.operands[0], Reg):
                    regs.add(ins.operands[0].name)
        for ins in self.fn.body:
            if ins.op == "cvta" and isinstance(ins.operands[1], Reg) and ins.operands[1].name in regs:
                return True
            for o in ins.operands:
                if isinstance(o, Addr) and isinstance(o.base, Reg) and o.base.name in regs:
                    return True
        return False

    def _promote_call_params(self) -> None:
        """Per-thread call-parameter variables accessed only whole, at offset 0, become registers."""
        fn = self.fn
        cands = {v.name: v for v in fn.vars if v.space == "param" and v.size in (4, 8)}
        sizes: dict[str, set[int]] = {n: set() for n in cands}
        bad: set[str] = set()
        for ins in fn.body:
            for o in ins.operands:
                for x in o.items if isinstance(o, Vec) else (o,):
                    if isinstance(x, Sym) and x.name in cands:
                        bad.add(x.name)  # address taken
                    if not (isinstance(x, Addr) and isinstance(x.base, Sym) and x.base.name in cands):
                        continue
                    nme = x.base.name
                    val = ins.operands[1] if ins.op == "st" else ins.operands[0]
                    if ins.op not in ("ld", "st") or x.offset != 0 or isinstance(val, Vec):
                        bad.add(nme)
                        continue
                    sizes[nme].add(TYPE_SIZES[_type_of(ins)])
        promoted = {n for n in cands if n not in bad and sizes[n] == {cands[n].size}}
        if not promoted:
            return
        body = []
        for ins in fn.body:
            if ins.op in ("ld", "st"):
                a = ins.operands[0] if ins.op == "st" else ins.operands[1]
                if isinstance(a, Addr) and isinstance(a.base, Sym) and a.base.name in promoted:
                    reg = Reg(f"%cp:{a.base.name}")
                    t = _type_of(ins)
                    bt = f"b{_bits(t)}" if t not in ("f32", "f64") else t
                    fn.regs.setdefault(reg.name, f"b{cands[a.base.name].size * 8}")
                    if ins.op == "st":
                        body.append(replace(ins, op="mov", mods=(bt,), operands=(reg, ins.operands[1])))
                    else:
                        body.append(replace(ins, op="mov", mods=(bt,), operands=(ins.operands[0], reg)))
                    continue
            body.append(ins)
        fn.body[:] = body

    def _newr(self) -> int:
        self.nr += 1
        return self.nr - 1

    def _newp(self) -> int:
        self.np += 1
        return self.np - 1

    def _label(self) -> int:
        self.nlabels += 1
        return self.nlabels - 1

    # ---- emitting
    def tmp(self) -> R:
        r = R(self._newr())
        self.temps_r.add(r.n)
        return r

    def ptmp(self) -> P:
        p = P(self._newp())
        self.temps_p.add(p.n)
        return p

    def emit(
        self,
        op: str,
        d: tuple = (),
        s: tuple = (),
        guard: P | None = None,
        target: int | None = None,
        **m: object,
    ) -> MInstr:
        ins = MInstr(op, tuple(d), tuple(s), {k: v for k, v in m.items()}, guard, target, self.cur_ptx)
        self.code.append(ins)
        return ins

    def op(self, op: str, *s: object, **m: object) -> R:
        d = self.tmp()
        self.emit(op, (d,), s, **m)
        return d

    def into(self, d: R, op: str, *s: object, guard: P | None = None, **m: object) -> R:
        self.emit(op, (d,), s, guard=guard, **m)
        return d

    def setp(
        self,
        cmp: str,
        a: object,
        b: object,
        sign: str = "u",
        bop: str | None = None,
        c: P | None = None,
        guard: P | None = None,
    ) -> P:
        p = self.ptmp()
        self.setp_into(p, cmp, a, b, sign, bop, c, guard)
        return p

    def setp_into(
        self,
        p: P,
        cmp: str,
        a: object,
        b: object,
        sign: str = "u",
        bop: str | None = None,
        c: P | None = None,
        guard: P | None = None,
    ) -> P:
        m: dict[str, object] = {"cmp": cmp, "sign": sign}
        s: tuple = (a, b)
        if bop is not None:
            m["bop"] = bop
            s = (a, b, c)
        self.emit("setp", (p,), s, guard=guard, **m)
        return p

    def sel(self, a: object, b: object, p: P) -> R:
        return self.op("sel", a, b, p)

    def place(self, lbl: int) -> None:
        self.code.append(MInstr("@label", target=lbl, ptx=self.cur_ptx))

    def bra(self, lbl: int, guard: P | None = None) -> None:
        self.emit("bra", guard=guard, target=lbl)

    def mov(self, d: R, a: object) -> None:
        if d != a:
            self.emit("mov", (d,), (a,))

    def plop(self, bop: str, a: P, b: P) -> P:
        p = self.ptmp()
        self.emit("plop", (p,), (a, b), bop=bop)
        return p

    # ---- f64 machine ops on register pairs (lo, hi)
    def dpair(self, a: object, ins: Instr) -> tuple[R | Imm, R | Imm]:
        """An f64 operand as a (lo, hi) pair of registers or immediates."""
        return self.as_pair(self.read64(a, "f64", ins), ins)

    def dop(self, op: str, *pairs: tuple, **m: object) -> tuple[R, R]:
        """(lo, hi) of the pair-valued machine op ``op`` over the source pairs."""
        lo, hi = self.tmp(), self.tmp()
        self.emit(op, (lo, hi), tuple(x for pr in pairs for x in pr), **m)
        return lo, hi

    def _dop(self, ins: Instr, d: object, op: str, *pairs: tuple, **m: object) -> None:
        lo, hi = self.dop(op, *pairs, **m)
        self.write64(d, V64("pair", lo, hi), ins)

    def _dbin(self, ins: Instr, op: str, negate_b: bool = False) -> None:
        """add/sub/mul/div.rnd.f64 as one pair op (sub: a + (-b), exact in IEEE, zeros included)."""
        d, a, b = ins.operands
        pb = self.dpair(b, ins)
        if negate_b:
            h = pb[1]
            pb = (pb[0], Imm(h.v ^ 0x80000000) if isinstance(h, Imm) else self.op("xor", h, Imm(0x80000000)))
        self._dop(ins, d, op, self.dpair(a, ins), pb, rnd=self._fmods(ins)[0])

    def dkey(self, x: tuple) -> tuple[R | Imm, R | Imm]:
        """A signed 64-bit order key of an f64 (x >= +0: its bits; else -(|x|)), so -0 = +0."""
        lo, hi = x
        mh = self.op("and", hi, Imm(0x7FFFFFFF))
        nl, nh = self.neg64((lo, mh))
        neg = self.setp("lt", hi, Imm(0), sign="s")
        return self.sel(nl, lo, neg), self.sel(nh, mh, neg)

    def dnan(self, x: tuple) -> P:
        lo, hi = x
        mh = self.op("and", hi, Imm(0x7FFFFFFF))
        p = self.setp("ne", lo, Imm(0))
        p = self.setp("eq", mh, Imm(0x7FF00000), bop="and", c=p)
        return self.setp("gt", mh, Imm(0x7FF00000), bop="or", c=p)

    def dminmax(self, a: tuple, b: tuple, is_min: bool) -> tuple[R, R]:
        """min/max.f64 on the bits (the result is an operand): a NaN operand is ignored (two:
        the canonical NaN), -0 < +0 (two zeros: min = a | b, max = a & b)."""
        ka, kb = self.dkey(a), self.dkey(b)
        pick_a = self.cmp64("lt" if is_min else "gt", ka, kb, True)
        lo, hi = self.sel(a[0], b[0], pick_a), self.sel(a[1], b[1], pick_a)
        zo = "or" if is_min else "and"
        zl, zh = self.op(zo, a[0], b[0]), self.op(zo, a[1], b[1])
        both0 = self.setp("eq", self.op("or", self.op("or", a[0], b[0]),
                                        self.op("and", self.op("or", a[1], b[1]), Imm(0x7FFFFFFF))), Imm(0))
        lo, hi = self.sel(zl, lo, both0), self.sel(zh, hi, both0)
        na, nb = self.dnan(a), self.dnan(b)
        lo, hi = self.sel(b[0], lo, na), self.sel(b[1], hi, na)
        lo, hi = self.sel(a[0], lo, nb), self.sel(a[1], hi, nb)
        both = self.plop("and", na, nb)
        return self.sel(Imm(M32), lo, both), self.sel(Imm(0x7FFFFFFF), hi, both)

    def drnd(self, x: tuple, irnd: str) -> tuple[R, R]:
        """cvt.irnd.f64.f64 on the bits: clear the fraction bits below the binary point and add
        one unit at the point when the mode rounds away from the truncation (carries run into the
        exponent, as IEEE's encoding allows); |x| < 1 gives +-0 or +-1; NaN -> canonical."""
        lo, hi = x
        sg = self.op("and", hi, Imm(0x80000000))
        e = self.op("shr", self.op("and", hi, Imm(0x7FFFFFFF)), Imm(20))
        nf = self.op("sub", Imm(1075), e)  # fraction bits below the point (<= 0: integral)
        k = self.op("min", self.op("max", nf, Imm(0), sign="s"), Imm(52), sign="s")
        ml, mh = self.sub64(self.shl64((Imm(1), Imm(0)), k), (Imm(1), Imm(0)))  # the fraction mask
        rl, rh = self.op("and", lo, ml), self.op("and", hi, mh)  # the fraction bits
        tl, th = self.op("and", lo, self.op("not", ml)), self.op("and", hi, self.op("not", mh))
        nz = self.setp("ne", self.op("or", rl, rh), Imm(0))
        if irnd == "rzi":
            up = FALSE
        elif irnd == "rni":
            hl, hh = self.shr64((ml, mh), Imm(1), False)
            hl, hh = self.add64((hl, hh), (Imm(1), Imm(0)))  # half a unit
            gt = self.cmp64("gt", (rl, rh), (hl, hh), False)
            eq = self.cmp64("eq", (rl, rh), (hl, hh), False)
            ul, uh = self.add64((ml, mh), (Imm(1), Imm(0)))  # one unit
            odd = self.setp("ne", self.op("or", self.op("and", lo, ul), self.op("and", hi, uh)), Imm(0))
            up = self.plop("or", gt, self.plop("and", eq, odd))
        else:
            up = self.setp("ne" if irnd == "rmi" else "eq", sg, Imm(0), bop="and", c=nz)
        ul, uh = self.add64((ml, mh), (Imm(1), Imm(0)))
        al, ah = self.add64((tl, th), (ul, uh))
        ol, oh = self.sel(al, tl, up), self.sel(ah, th, up)
        # |x| < 1 (e < 1023): 0 or 1 with the sign of x
        one_up: P
        if irnd == "rzi":
            one_up = FALSE
        elif irnd == "rni":  # > 0.5 rounds to 1 (0.5 is a tie to the even 0)
            mag = (lo, self.op("and", hi, Imm(0x7FFFFFFF)))
            one_up = self.cmp64("gt", mag, (Imm(0), Imm(0x3FE00000)), False)
        else:
            nzx = self.setp("ne", self.op("or", lo, self.op("and", hi, Imm(0x7FFFFFFF))), Imm(0))
            one_up = self.setp("ne" if irnd == "rmi" else "eq", sg, Imm(0), bop="and", c=nzx)
        small_hi = self.sel(self.op("or", sg, Imm(0x3FF00000)), sg, one_up)
        small = self.setp("lt", e, Imm(1023))
        ol, oh = self.sel(Imm(0), ol, small), self.sel(small_hi, oh, small)
        big = self.setp("ge", e, Imm(1075))  # integral, inf or NaN: unchanged
        ol, oh = self.sel(lo, ol, big), self.sel(hi, oh, big)
        nan = self.dnan(x)
        return self.sel(Imm(M32), ol, nan), self.sel(Imm(0x7FFFFFFF), oh, nan)

    def f64_trap(self, ins: Instr) -> None:
        """An f64 instruction the machine has no sequence for: lowered to a trap that reports a
        machine limit if a lane ever executes it (e.g. sinf's Payne-Hanek path for huge arguments),
        so kernels that never reach it still run."""
        self.emit("trap", code="limit")

    def fail(self, ins: Instr, msg: str) -> PTXError:
        return PTXError(f"{ins.where()}: {msg}: `{ins.text}`")

    def limit(self, ins: Instr, what: str) -> MachineLimitError:
        return MachineLimitError(f"{ins.where()}: {what} is beyond the machine: `{ins.text}`")

    # =========================================================================================
    # operands
    # =========================================================================================
    def decl(self, op: Reg, ins: Instr) -> str:
        t = self.fn.regs.get(op.name)
        if t is None:
            raise self.fail(ins, f"undeclared register {op.name}")
        return t

    def imm32(self, op: PImm, t: str, mode: str = "ext") -> Imm:
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

    def _fit(self, x: R | Imm, S: int, T: int, signed: bool, mode: str) -> R | Imm:
        """Low ``T`` bits of a canonical ``S``-bit register, extended as ``mode`` asks."""
        if T >= 32 or mode == "raw":
            return x
        if signed and mode == "ext":
            return self.sext(x, T)
        if S <= T:
            return x
        return self.op("and", x, Imm((1 << T) - 1))

    def sext(self, x: R | Imm, bits: int) -> R | Imm:
        if isinstance(x, Imm):
            v = x.v & ((1 << bits) - 1)
            return Imm(v - (1 << bits) if v >> (bits - 1) else v)
        t = self.op("shl", x, Imm(32 - bits))
        return self.op("shr", t, Imm(32 - bits), sign="s")

    def read32(self, op: object, t: str, ins: Instr, mode: str = "ext") -> R | Imm:
        """Operand ``op`` read as PTX type ``t`` (32 bits or fewer), like the interpreter's reader.

        ``mode``: ``ext`` sign/zero-extends sub-word values by the type's signedness, ``zext``
        zero-extends, ``raw`` leaves the bits above the type's width unspecified."""
        T = 32 if t == "pred" else _bits(t)
        if isinstance(op, Reg):
            decl = self.decl(op, ins)
            if decl == "pred":
                return self.sel(Imm(1), Imm(0), self.regp[op.name])
            S = _bits(decl)
            if S == 64:
                v = self.read64(op, decl, ins)
                if v.kind == "w":
                    raise self.fail(ins, "internal: truncating a window value")
                return self._fit(v.lo, 32, T, _signed(t), mode)
            return self._fit(self.reg32[op.name], S, T, _signed(t), mode)
        if isinstance(op, PImm):
            return self.imm32(op, t, "ext" if mode == "ext" else "zext")
        if isinstance(op, Special):
            return self._fit(self.special(op.name, ins), 32, T, _signed(t), mode)
        if isinstance(op, Sym):
            v = self.sym_value(op.name, ins)
            return v.lo
        raise self.fail(ins, f"unsupported operand {op}")

    def readp(self, op: object, ins: Instr) -> P:
        """A predicate operand (``%p``, ``!%p``, an immediate, or an integer register read as bool)."""
        if isinstance(op, Neg):
            return self.readp(op.inner, ins).inv()
        if isinstance(op, Reg):
            decl = self.decl(op, ins)
            if decl == "pred":
                return self.regp[op.name]
            x = self.read32(op, decl if _bits(decl) <= 32 else "b32", ins, "zext")
            if _bits(decl) == 64:
                lo, hi = self.as_pair(self.read64(op, decl, ins), ins)
                p = self.setp("ne", lo, Imm(0))
                return self.setp("ne", hi, Imm(0), bop="or", c=p)
            return self.setp("ne", x, Imm(0))
        if isinstance(op, PImm):
            return TRUE if op.value else FALSE
        raise self.fail(ins, f"unsupported predicate operand {op}")

    def special(self, name: str, ins: Instr) -> R | Imm:
        base = name.split(".")[0]
        if name in SR32:
            return self.op("s2r", sr=name)
        if base == "warpsize":
            return Imm(32)
        if base == "nsmid":
            return Imm(1)
        if base in ("smid", "gridid") or base.startswith("envreg"):
            return Imm(0)
        if base in ("clock", "clock64", "clock_hi", "globaltimer", "globaltimer_lo", "globaltimer_hi"):
            return self.op("s2r", sr="clock")
        if base in ("aggr_smem_size",):
            return self.op("s2r", sr="total_smem_size")
        raise self.fail(ins, f"unsupported special register %{name}")

    def sym_value(self, name: str, ins: Instr) -> V64:
        """The address of a symbol as a 64-bit operand value."""
        lay = self.layout
        if name in lay.shared_off:
            off = lay.shared_off[name]
        elif name in lay.dynamic_shared_syms:
            off = _align(lay.static_shared, 16)
        elif name in lay.local_off:
            off = lay.local_off[name]
        elif name in lay.param_off:
            off = lay.param_off[name]
        elif name in self.gsyms:
            slot = self.bank_slot(("global", name))
            w = self.op("ld", Imm(slot), space="param", size=4)
            return V64("w", w, base=GLOBAL_BASE)
        else:
            raise self.fail(ins, f"unknown symbol {name}")
        return V64("w", Imm(off), base=0, const=off)

    def bank_slot(self, key: tuple[str, object]) -> int:
        """Byte offset (in the parameter bank) of a launch-constant word."""
        if key not in self.bank_slots:
            self.bank_slots.append(key)
        return _align(self.layout.param_size, 4) + 4 * self.bank_slots.index(key)

    def read64(self, op: object, t: str, ins: Instr) -> V64:
        """A 64-bit operand."""
        if isinstance(op, Reg):
            decl = self.decl(op, ins)
            if decl == "pred":
                return V64("zx", self.sel(Imm(1), Imm(0), self.regp[op.name]))
            if _bits(decl) < 64:
                return V64("zx", self.reg32[op.name])  # the interpreter zero-extends the storage
            k = self.kinds.get(op.name, PAIR)
            lo, hi = self.reg64[op.name]
            if k == PAIR:
                return V64("pair", lo, hi)
            if k[0] == "w":
                return V64("w", lo, base=k[1])
            return V64(k[0], lo)
        if isinstance(op, PImm):
            if op.kind == "f32" and t == "f64":
                raise self.limit(ins, "f64 arithmetic")
            v = op.value & M64
            k = _imm_kind(v)
            if k == SX:
                return V64("sx", Imm(v), const=v)
            if k == ZX:
                return V64("zx", Imm(v), const=v)
            return V64("pair", Imm(v), Imm(v >> 32), const=v)
        if isinstance(op, Special):
            return V64("zx", self.special(op.name, ins))
        if isinstance(op, Sym):
            return self.sym_value(op.name, ins)
        raise self.fail(ins, f"unsupported 64-bit operand {op}")

    def as_pair(self, v: V64, ins: Instr) -> tuple[R | Imm, R | Imm]:
        if v.kind == "pair":
            assert v.hi is not None
            return v.lo, v.hi
        if v.kind == "zx":
            return v.lo, Imm(0)
        if v.kind == "sx":
            if isinstance(v.lo, Imm):
                return v.lo, Imm(M32 if v.lo.v >> 31 else 0)
            return v.lo, self.op("shr", v.lo, Imm(31), sign="s")
        if v.const is not None:
            full = (v.base + v.const) & M64
            return Imm(full), Imm(full >> 32)
        raise self.fail(ins, "internal: a window value used as a 64-bit integer")

    def as_w(self, v: V64, ins: Instr) -> tuple[R | Imm, str, int]:
        """A 64-bit operand as a window-op input: (word, signedness, base)."""
        if v.kind in ("w", "sx"):
            return v.lo, "s", v.base
        if v.kind == "zx":
            return v.lo, "u", 0
        if v.const is not None:
            return Imm(v.const), "s", 0
        raise self.fail(ins, "internal: a 64-bit pair used as a window value")

    def to_window(self, v: V64, base: int, ins: Instr) -> R | Imm:
        """Any 64-bit value as a window word relative to ``base`` (POISON when out of the window)."""
        if v.kind == "w":
            if v.base == base:
                return v.lo
            if v.const is not None:
                return self.to_window(V64("pair", *self._const_pair(v.base + v.const)), base, ins)
            raise self.fail(ins, "internal: window bases differ")
        if v.kind == "sx" and base == 0:
            return v.lo
        if v.kind == "zx" and base == 0:
            return self.op("addw", v.lo, Imm(0), sa="u", sb="s")
        lo, hi = self.as_pair(v, ins)
        bh = (base >> 32) & M32
        t = self.op("sub", hi, Imm(bh)) if bh else hi
        s = self.op("shr", lo, Imm(31), sign="s")
        p = self.setp("eq", t, s)
        return self.sel(lo, Imm(POISON), p)

    @staticmethod
    def _const_pair(v: int) -> tuple[Imm, Imm]:
        v &= M64
        return Imm(v), Imm(v >> 32)

    # ---- writes
    def write32(
        self, dop: object, t: str, compute: Callable[[R], object], ins: Instr, clean: bool = False
    ) -> None:
        """Store a computed value of PTX type ``t`` into ``dop`` (the interpreter's writer rules).

        ``compute(target)`` emits the instruction(s) writing ``target``; ``clean`` says the value
        already is the 32-bit extension of its low ``bits(t)`` bits by ``t``'s signedness."""
        if isinstance(dop, Sink):
            compute(self.tmp())
            return
        if not isinstance(dop, Reg):
            raise self.fail(ins, f"cannot write to {dop}")
        decl = self.decl(dop, ins)
        T = 32 if t == "pred" else _bits(t)
        if decl == "pred":
            v = self.tmp()
            compute(v)
            self.setp_into(self.regp[dop.name], "ne", v, Imm(0))
            return
        S = _bits(decl)
        if S == 64:
            v = self.tmp()
            compute(v)
            if T < 32 and not clean:
                v2 = self.sext(v, T) if _signed(t) else self.op("and", v, Imm((1 << T) - 1))
            else:
                v2 = v
            if T == 64:
                raise self.fail(ins, "internal: 64-bit value through write32")
            self.write64(dop, V64("sx" if _signed(t) else "zx", v2), ins)
            return
        d = self.reg32[dop.name]
        if S == 32:
            if T >= 32 or clean:
                compute(d)
                return
            v = self.tmp()
            compute(v)
            if _signed(t):
                s = self.op("shl", v, Imm(32 - T))
                self.into(d, "shr", s, Imm(32 - T), sign="s")
            else:
                self.into(d, "and", v, Imm((1 << T) - 1))
            return
        # 8/16-bit register: canonical zero-extended low S bits
        if T == S and clean and not _signed(t):
            compute(d)
            return
        v = self.tmp()
        compute(v)
        if T < S and not clean:
            v = self.sext(v, T) if _signed(t) else self.op("and", v, Imm((1 << T) - 1))
        self.into(d, "and", v, Imm((1 << S) - 1))

    def write32v(self, dop: object, t: str, value: R | Imm, ins: Instr, clean: bool = False) -> None:
        self.write32(dop, t, lambda d: self.mov(d, value) if d != value else None, ins, clean)

    def writep(self, dop: object, compute: Callable[[P], object], ins: Instr) -> None:
        if isinstance(dop, Sink):
            compute(self.ptmp())
            return
        if isinstance(dop, Reg) and self.decl(dop, ins) == "pred":
            compute(self.regp[dop.name])
            return
        p = self.ptmp()
        compute(p)
        self.write32(dop, "u32", lambda d: self.into(d, "sel", Imm(1), Imm(0), p), ins)

    def dest64(self, dop: object, ins: Instr) -> tuple[str, R, R | None]:
        """(kind, lo, hi) of a 64-bit destination register."""
        if not isinstance(dop, Reg):
            if isinstance(dop, Sink):
                return "pair", self.tmp(), self.tmp()
            raise self.fail(ins, f"cannot write to {dop}")
        decl = self.decl(dop, ins)
        if _bits(decl) != 64:
            raise self.fail(ins, f"internal: {dop.name} is not a 64-bit register")
        k = self.kinds.get(dop.name, PAIR)
        lo, hi = self.reg64[dop.name]
        return (k[0] if k != PAIR else "pair"), lo, hi

    def write64(self, dop: object, v: V64, ins: Instr) -> None:
        if isinstance(dop, Sink):
            return
        if isinstance(dop, Reg) and _bits(self.decl(dop, ins)) < 64:
            # a 64-bit value into a narrower register: truncation
            lo, _ = self.as_pair(v, ins) if v.kind != "w" else (v.lo, None)
            self.write32v(dop, self.decl(dop, ins), lo, ins)
            return
        kind, dlo, dhi = self.dest64(dop, ins)
        if kind == "pair":
            assert dhi is not None
            lo, hi = self.as_pair(v, ins)
            self.pmove([(dlo, lo), (dhi, hi)])
            return
        if kind == "w":
            assert isinstance(dop, Reg)
            base = self.kinds[dop.name][1]
            if v.kind == "zx":
                self.into(dlo, "addw", v.lo, Imm(0), sa="u", sb="s")
                return
            if v.kind == "w" and v.base != base:
                raise self.fail(ins, "internal: window base mismatch")
            self.mov(dlo, v.lo)
            return
        if v.kind != kind and v.const is None:
            raise self.fail(ins, f"internal: {v.kind} value into a {kind} register")
        self.mov(dlo, v.lo)

    def pmove(self, moves: list[tuple[R, R | Imm]]) -> None:
        """Parallel move: every source is read before any destination is written."""
        moves = [(d, s) for d, s in moves if d != s]
        dsts = {d for d, _ in moves}
        fixed = []
        for d, s in moves:
            if isinstance(s, R) and s in dsts:
                t = self.tmp()
                self.mov(t, s)
                fixed.append((d, t))
            else:
                fixed.append((d, s))
        for d, s in fixed:
            self.mov(d, s)

    # =========================================================================================
    # integer sequences (32-bit words, 64-bit pairs)
    # =========================================================================================
    def div_zero_check(self, d: R | Imm, ins: Instr, t: str, hi: R | Imm | None = None) -> None:
        if isinstance(d, Imm) and (hi is None or isinstance(hi, Imm)):
            if d.v == 0 and (hi is None or hi.v == 0):
                p = TRUE
            else:
                return
        else:
            p = self.setp("eq", d, Imm(0))
            if hi is not None:
                p = self.setp("eq", hi, Imm(0), bop="and", c=p)
        self.emit("trap", guard=p, code="divzero")

    def add64(self, a: tuple, b: tuple) -> tuple[R | Imm, R | Imm]:
        (alo, ahi), (blo, bhi) = a, b
        if isinstance(blo, Imm) and blo.v == 0:
            return alo, (ahi if isinstance(bhi, Imm) and bhi.v == 0 else self.op("add", ahi, bhi))
        lo = self.op("add", alo, blo)
        c = self.setp("lt", lo, blo)
        hi = self.op("add", ahi, bhi)
        self.into(hi, "add", hi, Imm(1), guard=c)
        return lo, hi

    def sub64(self, a: tuple, b: tuple) -> tuple[R | Imm, R | Imm]:
        (alo, ahi), (blo, bhi) = a, b
        lo = self.op("sub", alo, blo)
        c = self.setp("lt", alo, blo)
        hi = self.op("sub", ahi, bhi)
        self.into(hi, "sub", hi, Imm(1), guard=c)
        return lo, hi

    def mul64(self, a: tuple, b: tuple) -> tuple[R, R]:
        (alo, ahi), (blo, bhi) = a, b
        lo = self.op("mul", alo, blo)
        h = self.op("mulhi", alo, blo, sign="u")
        if not (isinstance(bhi, Imm) and bhi.v == 0):
            h = self.op("add", h, self.op("mul", alo, bhi))
        if not (isinstance(ahi, Imm) and ahi.v == 0):
            h = self.op("add", h, self.op("mul", ahi, blo))
        return lo, h

    def _addc(self, acc: R, x: R | Imm, carry: R) -> None:
        """acc += x, carry += carry-out."""
        self.into(acc, "add", acc, x)
        c = self.setp("lt", acc, x)
        self.into(carry, "add", carry, Imm(1), guard=c)

    def mulhi64(self, a: tuple, b: tuple, signed: bool) -> tuple[R, R]:
        """High 64 bits of the 128-bit product (32-bit limbs; signed = unsigned minus corrections)."""
        (a0, a1), (b0, b1) = a, b
        p00h = self.op("mulhi", a0, b0, sign="u")
        p01l, p01h = self.op("mul", a0, b1), self.op("mulhi", a0, b1, sign="u")
        p10l, p10h = self.op("mul", a1, b0), self.op("mulhi", a1, b0, sign="u")
        p11l, p11h = self.op("mul", a1, b1), self.op("mulhi", a1, b1, sign="u")
        w1, c1 = self.tmp(), self.tmp()
        self.mov(w1, p00h)
        self.mov(c1, Imm(0))
        self._addc(w1, p01l, c1)
        self._addc(w1, p10l, c1)
        w2, c2 = self.tmp(), self.tmp()
        self.mov(w2, p01h)
        self.mov(c2, Imm(0))
        self._addc(w2, p10h, c2)
        self._addc(w2, p11l, c2)
        self._addc(w2, c1, c2)
        w3 = self.op("add", p11h, c2)
        lo, hi = w2, w3
        if signed:
            pa = self.setp("lt", a1, Imm(0), sign="s")
            pb = self.setp("lt", b1, Imm(0), sign="s")
            z = Imm(0)
            lo2, hi2 = self.sub64((lo, hi), (self.sel(b0, z, pa), self.sel(b1, z, pa)))
            lo, hi = self.sub64((lo2, hi2), (self.sel(a0, z, pb), self.sel(a1, z, pb)))  # type: ignore[assignment]
        return lo, hi  # type: ignore[return-value]

    def shl64(self, a: tuple, n: R | Imm) -> tuple[R | Imm, R | Imm]:
        alo, ahi = a
        if isinstance(n, Imm):
            k = n.v
            if k >= 64:
                return Imm(0), Imm(0)
            if k == 0:
                return alo, ahi
            if k >= 32:
                return Imm(0), self.op("shl", alo, Imm(k - 32))
            return self.op("shl", alo, Imm(k)), self.op(
                "or", self.op("shl", ahi, Imm(k)), self.op("shr", alo, Imm(32 - k))
            )
        lo = self.op("shl", alo, n)
        h = self.op("shl", ahi, n)
        h = self.op("or", h, self.op("shr", alo, self.op("sub", Imm(32), n)))
        h = self.op("or", h, self.op("shl", alo, self.op("sub", n, Imm(32))))
        return lo, h

    def shr64(self, a: tuple, n: R | Imm, signed: bool) -> tuple[R | Imm, R | Imm]:
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
                return self.op("shr", ahi, Imm(k - 32), sign=sg), (
                    self.op("shr", ahi, Imm(31), sign="s") if signed else Imm(0)
                )
            return self.op("or", self.op("shr", alo, Imm(k)), self.op("shl", ahi, Imm(32 - k))), self.op(
                "shr", ahi, Imm(k), sign=sg
            )
        if signed:
            n = self.op("min", n, Imm(63), sign="u")
        hi = self.op("shr", ahi, n, sign=sg)
        lo = self.op("or", self.op("shr", alo, n), self.op("shl", ahi, self.op("sub", Imm(32), n)))
        if signed:
            big = self.op("shr", ahi, self.op("sub", n, Imm(32)), sign="s")
            lo = self.sel(lo, big, self.setp("lt", n, Imm(32)))
        else:
            lo = self.op("or", lo, self.op("shr", ahi, self.op("sub", n, Imm(32))))
        return lo, hi

    def cmp64(self, cmp: str, a: tuple, b: tuple, signed: bool) -> P:
        (alo, ahi), (blo, bhi) = a, b
        if cmp == "eq":
            p = self.setp("eq", alo, blo)
            return self.setp("eq", ahi, bhi, bop="and", c=p)
        if cmp == "ne":
            p = self.setp("ne", alo, blo)
            return self.setp("ne", ahi, bhi, bop="or", c=p)
        p = self.setp(cmp, alo, blo)
        p = self.setp("eq", ahi, bhi, bop="and", c=p)
        strict = {"lt": "lt", "le": "lt", "gt": "gt", "ge": "gt"}[cmp]
        return self.setp(strict, ahi, bhi, sign="s" if signed else "u", bop="or", c=p)

    def clz64(self, a: tuple) -> R:
        lo, hi = a
        c1 = self.op("clz", hi)
        c2 = self.op("add", self.op("clz", lo), Imm(32))
        return self.sel(c2, c1, self.setp("eq", hi, Imm(0)))

    def udivmod64(self, n: tuple, d: tuple) -> tuple[tuple[R, R], tuple[R, R]]:
        """Unsigned 64-bit quotient and remainder (d != 0), one quotient bit per iteration."""
        (nlo, nhi), (dlo, dhi) = n, d
        qlo, qhi, rlo, rhi = self.tmp(), self.tmp(), self.tmp(), self.tmp()
        self.mov(qlo, Imm(0))
        self.mov(qhi, Imm(0))
        self.mov(rlo, nlo)
        self.mov(rhi, nhi)
        done, loop = self._label(), self._label()
        self.bra(done, self.cmp64("lt", (nlo, nhi), (dlo, dhi), False))
        k = self.op("sub", self.clz64((dlo, dhi)), self.clz64((nlo, nhi)))
        ddl, ddh = self.shl64((dlo, dhi), k)
        ddlo, ddhi = self.tmp(), self.tmp()
        self.mov(ddlo, ddl)
        self.mov(ddhi, ddh)
        self.place(loop)
        p = self.cmp64("ge", (rlo, rhi), (ddlo, ddhi), False)
        b = self.setp("lt", rlo, ddlo)
        self.into(rlo, "sub", rlo, ddlo, guard=p)
        self.into(rhi, "sub", rhi, ddhi, guard=p)
        self.into(rhi, "sub", rhi, Imm(1), guard=self.plop("and", p, b))
        self.into(qhi, "or", self.op("shl", qhi, Imm(1)), self.op("shr", qlo, Imm(31)))
        self.into(qlo, "shl", qlo, Imm(1))
        self.into(qlo, "or", qlo, Imm(1), guard=p)
        self.into(ddlo, "or", self.op("shr", ddlo, Imm(1)), self.op("shl", ddhi, Imm(31)))
        self.into(ddhi, "shr", ddhi, Imm(1))
        self.into(k, "sub", k, Imm(1))
        self.bra(loop, self.setp("ge", k, Imm(0), sign="s"))
        self.place(done)
        return (qlo, qhi), (rlo, rhi)

    def neg64(self, a: tuple) -> tuple[R | Imm, R | Imm]:
        return self.sub64((Imm(0), Imm(0)), a)

    def sdivmod64(self, n: tuple, d: tuple) -> tuple[tuple, tuple]:
        def absv(x: tuple) -> tuple[tuple, P]:
            neg = self.setp("lt", x[1], Imm(0), sign="s")
            nl, nh = self.neg64(x)
            return (self.sel(nl, x[0], neg), self.sel(nh, x[1], neg)), neg

        an, pn = absv(n)
        ad, pd = absv(d)
        q, r = self.udivmod64(an, ad)
        pq = self.plop("xor", pn, pd)
        ql, qh = self.neg64(q)
        rl, rh = self.neg64(r)
        return (self.sel(ql, q[0], pq), self.sel(qh, q[1], pq)), (
            self.sel(rl, r[0], pn),
            self.sel(rh, r[1], pn),
        )

    # =========================================================================================
    # driver
    # =========================================================================================
    SIDE_EFFECTS = ("ld", "st", "atom", "trap", "bar", "exit", "vote", "ballot", "shfl", "shflp")

    def lower(self) -> Program:
        fn = self.fn
        by_index: dict[int, list[str]] = {}
        for lb, idx in fn.labels.items():
            by_index.setdefault(idx, []).append(lb)
        starts: list[int] = []
        approx = []
        for i, ins in enumerate(fn.body):
            self.cur_ptx = i
            for lb in by_index.get(i, ()):
                self.place(self.ptx_label[lb])
            start = len(self.code)
            starts.append(start)
            handler = getattr(self, f"_l_{ins.op}", None)
            if handler is None:
                raise PTXError(f"{ins.where()}: unsupported PTX instruction `{ins.form}`: `{ins.text}`")
            if ins.op in APPROX_ONLY or "approx" in ins.mods:
                approx.append(ins.form)
            if ins.guard is not None and ins.op != "bra":
                g = self.readp(Neg(ins.guard) if ins.guard_neg else ins.guard, ins)
                handler(ins)
                self.apply_guard(start, g)
            else:
                handler(ins)
        self.cur_ptx = len(fn.body)
        for lb in by_index.get(len(fn.body), ()):
            self.place(self.ptx_label[lb])
        starts.append(len(self.code))
        return self.layout_code(starts, sorted(set(approx)))

    def _is_temp(self, x: object) -> bool:
        if isinstance(x, R):
            return x.n in self.temps_r
        if isinstance(x, P):
            return x.n in self.temps_p
        return False

    def apply_guard(self, start: int, g: P) -> None:
        """Predicate a lowered sequence: branch around it when it has internal control flow,
        else guard every instruction with a visible effect (temporaries are computed freely)."""
        seq = self.code[start:]
        if not any(x.op != "@label" for x in seq):
            return
        if any(x.op in ("bra", "@label") for x in seq):
            end = self._label()
            self.code.insert(start, MInstr("bra", guard=g.inv(), target=end, ptx=self.cur_ptx))
            self.place(end)
            return
        needs = [x for x in seq if x.op in self.SIDE_EFFECTS or any(not self._is_temp(d) for d in x.d)]
        writes_g = any(isinstance(d, P) and d.n == g.n for x in seq for d in x.d)
        out: list[MInstr] = []
        gg = g
        if writes_g and len(needs) > 1:
            t = self.ptmp()
            out.append(MInstr("plop", (t,), (g, TRUE), {"bop": "and"}, ptx=self.cur_ptx))
            gg = t
        ids = {id(x) for x in needs}
        for x in seq:
            if id(x) in ids:
                if x.guard is None:
                    x.guard = gg
                else:
                    c = self.ptmp()
                    out.append(MInstr("plop", (c,), (x.guard, gg), {"bop": "and"}, ptx=self.cur_ptx))
                    x.guard = c
            out.append(x)
        self.code[start:] = out

    def layout_code(self, starts: list[int], approx: list[str]) -> Program:
        final: list[MInstr] = []
        label_pc: dict[int, int] = {}
        pc_of = []
        for x in self.code:
            pc_of.append(len(final))
            if x.op == "@label":
                label_pc[x.target] = len(final)  # type: ignore[index]
            else:
                final.append(x)
        pc_of.append(len(final))
        for x in final:
            if x.target is not None:
                x.target = label_pc[x.target]
        ranges = [(pc_of[starts[i]], pc_of[starts[i + 1]]) for i in range(len(self.fn.body))]
        for x in final:
            validate(x)
        return Program(
            self.fn.name,
            final,
            list(self.fn.body),
            self.layout,
            list(self.bank_slots),
            self.nr,
            self.np,
            allocated=False,
            pinned=set(self.pinned),
            kinds=dict(self.kinds),
            ptx_ranges=ranges,
            ptx_labels=dict(self.fn.labels),
            uses_approx=approx,
        )

    # =========================================================================================
    # control flow and no-ops
    # =========================================================================================
    def _l_bra(self, ins: Instr) -> None:
        tgt = ins.operands[0]
        if not isinstance(tgt, Label) or tgt.name not in self.ptx_label:
            raise self.fail(ins, "indirect branch is not supported")
        g = None
        if ins.guard is not None:
            g = self.readp(Neg(ins.guard) if ins.guard_neg else ins.guard, ins)
        self.bra(self.ptx_label[tgt.name], g)

    def _l_ret(self, ins: Instr) -> None:
        self.emit("exit")

    _l_exit = _l_ret

    def _l_bar(self, ins: Instr) -> None:
        if "red" in ins.mods:
            # the machine's ``bar`` carries no value: lowering it as a plain barrier would leave the
            # result register unwritten (silently wrong), so refuse it by name
            raise self.limit(ins, "`bar.red` (__syncthreads_count / __syncthreads_and / __syncthreads_or)")
        if "warp" in ins.mods or "arrive" in ins.mods:
            return
        self.emit("bar")

    _l_barrier = _l_bar

    def _nop(self, ins: Instr) -> None:
        return None

    _l_membar = _l_fence = _l_prefetch = _l_prefetchu = _l_pmevent = _l_nanosleep = _nop

    # =========================================================================================
    # moves
    # =========================================================================================
    def _l_mov(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a = ins.operands
        if isinstance(a, Vec):  # pack
            parts = a.items
            width = _bits(t) // len(parts)
            pt = {8: "b8", 16: "b16", 32: "b32"}[width]
            vals = [self.read32(x, pt, ins, "zext") for x in parts]
            words = []
            per = 32 // width
            for w0 in range(0, len(vals), per):
                acc: R | Imm = vals[w0]
                for k in range(1, min(per, len(vals) - w0)):
                    acc = self.op("or", acc, self.op("shl", vals[w0 + k], Imm(k * width)))
                words.append(acc)
            if _bits(t) == 64:
                self.write64(d, V64("pair", words[0], words[1]), ins)
            else:
                self.write32v(d, t, words[0], ins)
            return
        if isinstance(d, Vec):  # unpack
            parts = d.items
            width = _bits(t) // len(parts)
            pt = {8: "b8", 16: "b16", 32: "b32"}[width]
            if _bits(t) == 64:
                lo, hi = self.as_pair(self.read64(a, t, ins), ins)
                words = [lo, hi]
            else:
                words = [self.read32(a, t, ins, "raw")]
            per = 32 // width
            for k, x in enumerate(parts):
                w = words[k // per]
                sh = (k % per) * width
                v = self.op("shr", w, Imm(sh)) if sh else w
                if width < 32:
                    v = self.op("and", v, Imm((1 << width) - 1))
                self.write32v(x, pt, v, ins, clean=True)
            return
        if t == "pred":
            src = self.readp(a, ins)
            self.writep(d, lambda p: self.emit("plop", (p,), (src, TRUE), bop="and"), ins)
            return
        if _bits(t) == 64:
            self.write64(d, self.read64(a, t, ins), ins)
            return
        v = self.read32(a, t, ins, "ext")
        self.write32v(d, t, v, ins, clean=True)

    # =========================================================================================
    # integer and float arithmetic
    # =========================================================================================
    def _fmods(self, ins: Instr) -> tuple[str, bool, bool]:
        rnd = next((m for m in ins.mods if m in ROUNDING), None)
        return rnd or "rn", "ftz" in ins.mods, "sat" in ins.mods

    def _fbin(self, ins: Instr, op: str) -> None:
        rnd, ftz, sat = self._fmods(ins)
        d, a, b = ins.operands
        va, vb = self.read32(a, "f32", ins), self.read32(b, "f32", ins)
        self.write32(d, "f32", lambda r: self.into(r, op, va, vb, rnd=rnd, ftz=ftz, sat=sat), ins)

    def _int_bin(self, ins: Instr, op: str, mode: str = "raw", **m: object) -> None:
        t = _type_of(ins)
        d, a, b = ins.operands
        va, vb = self.read32(a, t, ins, mode), self.read32(b, t, ins, mode)
        self.write32(d, t, lambda r: self.into(r, op, va, vb, **m), ins)

    def _l_add(self, ins: Instr) -> None:
        self._addsub(ins, "add")

    def _l_sub(self, ins: Instr) -> None:
        self._addsub(ins, "sub")

    _l_addc = _l_add
    _l_subc = _l_sub

    def _addsub(self, ins: Instr, op: str) -> None:
        t = _type_of(ins)
        if t == "f32":
            return self._fbin(ins, "f" + op)
        if t == "f64":
            return self._dbin(ins, "dadd", negate_b=op == "sub")
        if "cc" in ins.mods or ins.op in ("addc", "subc"):
            return self._carry(ins, t, op)
        if "sat" in ins.mods:
            return self._addsub_sat(ins, t, op)
        d, a, b = ins.operands
        if _bits(t) == 64:
            kind, _, _ = self.dest64(d, ins) if not isinstance(d, Sink) else ("pair", None, None)
            va, vb = self.read64(a, t, ins), self.read64(b, t, ins)
            if kind != "pair":
                wa, sa, _ = self.as_w(va, ins)
                wb, sb, _ = self.as_w(vb, ins)
                _, dlo, _ = self.dest64(d, ins)
                self.into(dlo, op + "w", wa, wb, sa=sa, sb=sb)
                return
            pa, pb = self.as_pair(va, ins), self.as_pair(vb, ins)
            lo, hi = self.add64(pa, pb) if op == "add" else self.sub64(pa, pb)
            self.write64(d, V64("pair", lo, hi), ins)
            return
        self._int_bin(ins, op)

    def _addsub_sat(self, ins: Instr, t: str, op: str) -> None:
        if t != "s32":
            raise self.fail(ins, f"unsupported saturating {op}.{t}")
        d, a, b = ins.operands
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        s = self.op(op, va, vb)
        # overflow: the operands' signs agree (add) / differ (sub) and the result's sign differs
        x1 = self.op("xor", s, va)
        x2 = self.op("xor", va, vb) if op == "sub" else self.op("not", self.op("xor", va, vb))
        ovf = self.setp("lt", self.op("and", x1, x2), Imm(0), sign="s")
        lim = self.op("xor", self.op("shr", va, Imm(31), sign="s"), Imm(0x7FFFFFFF))
        self.write32(d, t, lambda r: self.into(r, "sel", lim, s, ovf), ins)

    def _carry(self, ins: Instr, t: str, op: str) -> None:
        """add.cc/addc/sub.cc/subc: the carry flag is a predicate (``%cc``)."""
        if _bits(t) != 32:
            raise self.limit(ins, "64-bit extended-precision carry arithmetic")
        if "%cc" not in self.regp:
            self.regp["%cc"] = P(self._newp())
        cc = self.regp["%cc"]
        d, a, b = ins.operands
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        use_in = ins.op in ("addc", "subc")
        set_out = "cc" in ins.mods
        r = self.op(op, va, vb)
        if op == "add":
            c1 = self.setp("lt", r, vb) if set_out else None
            if use_in:
                r2 = self.op("add", r, self.sel(Imm(1), Imm(0), cc))
                c2 = self.setp("lt", r2, r) if set_out else None
                r = r2
                if set_out:
                    c1 = self.plop("or", c1, c2)  # type: ignore[arg-type]
        else:
            c1 = self.setp("lt", va, vb) if set_out else None
            if use_in:
                ci = self.sel(Imm(1), Imm(0), cc)
                if set_out:
                    c2 = self.setp("lt", r, ci)
                    c1 = self.plop("or", c1, c2)  # type: ignore[arg-type]
                r = self.op("sub", r, ci)
        self.write32v(d, t, r, ins)
        if set_out:
            self.emit("plop", (cc,), (c1, TRUE), bop="and")

    def _l_mul(self, ins: Instr) -> None:
        t = _type_of(ins)
        rnd, ftz, sat = self._fmods(ins)
        if t == "f32":
            return self._fbin(ins, "fmul")
        if t == "f64":
            return self._dbin(ins, "dmul")
        d, a, b = ins.operands
        sg = "s" if _signed(t) else "u"
        if "wide" in ins.mods:
            if _bits(t) == 32:
                va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
                kind, dlo, dhi = self.dest64(d, ins)
                if kind != "pair":
                    self.into(dlo, "mulw", va, vb, sa=sg, sb=sg)
                    return
                lo = self.op("mul", va, vb)
                hi = self.op("mulhi", va, vb, sign=sg)
                self.write64(d, V64("pair", lo, hi), ins)
                return
            wt = {"s16": "s32", "u16": "u32"}[t]
            va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
            self.write32(d, wt, lambda r: self.into(r, "mul", va, vb), ins)
            return
        if "hi" in ins.mods:
            if _bits(t) == 64:
                lo, hi = self.mulhi64(
                    self.as_pair(self.read64(a, t, ins), ins),
                    self.as_pair(self.read64(b, t, ins), ins),
                    _signed(t),
                )
                self.write64(d, V64("pair", lo, hi), ins)
                return
            if _bits(t) == 32:
                return self._int_bin(ins, "mulhi", sign=sg)
            va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
            p = self.op("mul", va, vb)
            self.write32(d, t, lambda r: self.into(r, "shr", p, Imm(16), sign=sg), ins)
            return
        if _bits(t) == 64:
            lo, hi = self.mul64(
                self.as_pair(self.read64(a, t, ins), ins), self.as_pair(self.read64(b, t, ins), ins)
            )
            self.write64(d, V64("pair", lo, hi), ins)
            return
        self._int_bin(ins, "mul")

    def _mul24(self, ins: Instr, a: object, b: object, t: str) -> R:
        sg = "s" if t == "s32" else "u"
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        if sg == "s":
            a24, b24 = self.sext(va, 24), self.sext(vb, 24)
        else:
            a24, b24 = self.op("and", va, Imm(0xFFFFFF)), self.op("and", vb, Imm(0xFFFFFF))
        lo = self.op("mul", a24, b24)
        if "hi" not in ins.mods:
            return lo
        hi = self.op("mulhi", a24, b24, sign=sg)
        return self.op("or", self.op("shl", hi, Imm(16)), self.op("shr", lo, Imm(16)))

    def _l_mul24(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a, b = ins.operands
        v = self._mul24(ins, a, b, t)
        self.write32v(d, t, v, ins)

    def _l_mad24(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a, b, c = ins.operands
        v = self._mul24(ins, a, b, t)
        vc = self.read32(c, t, ins)
        self.write32(d, t, lambda r: self.into(r, "add", v, vc), ins)

    def _l_mad(self, ins: Instr) -> None:
        t = _type_of(ins)
        rnd, ftz, sat = self._fmods(ins)
        if t == "f32":
            d, a, b, c = ins.operands
            va, vb, vc = (self.read32(x, "f32", ins) for x in (a, b, c))
            self.write32(d, "f32", lambda r: self.into(r, "ffma", va, vb, vc, rnd=rnd, ftz=ftz, sat=sat), ins)
            return
        if t == "f64":
            d, a, b, c = ins.operands
            pa, pb, pc = self.dpair(a, ins), self.dpair(b, ins), self.dpair(c, ins)
            return self._dop(ins, d, "dfma", pa, pb, pc, rnd=rnd)
        d, a, b, c = ins.operands
        sg = "s" if _signed(t) else "u"
        if "wide" in ins.mods:
            if _bits(t) == 32:
                va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
                wt = "s64" if sg == "s" else "u64"
                vc = self.read64(c, wt, ins)
                kind, dlo, _ = self.dest64(d, ins)
                if kind != "pair":
                    m = self.op("mulw", va, vb, sa=sg, sb=sg)
                    wc, sc, _ = self.as_w(vc, ins)
                    self.into(dlo, "addw", m, wc, sa="s", sb=sc)
                    return
                lo = self.op("mul", va, vb)
                hi = self.op("mulhi", va, vb, sign=sg)
                rl, rh = self.add64((lo, hi), self.as_pair(vc, ins))
                self.write64(d, V64("pair", rl, rh), ins)
                return
            wt = {"s16": "s32", "u16": "u32"}[t]
            va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
            vc = self.read32(c, wt, ins)
            p = self.op("mul", va, vb)
            self.write32(d, wt, lambda r: self.into(r, "add", p, vc), ins)
            return
        if "hi" in ins.mods:
            if "sat" in ins.mods:
                raise self.fail(ins, "unsupported mad.hi.sat")
            if _bits(t) == 64:
                ph = self.mulhi64(
                    self.as_pair(self.read64(a, t, ins), ins),
                    self.as_pair(self.read64(b, t, ins), ins),
                    _signed(t),
                )
                rl, rh = self.add64(ph, self.as_pair(self.read64(c, t, ins), ins))
                self.write64(d, V64("pair", rl, rh), ins)
                return
            va, vb, vc = (self.read32(x, t, ins) for x in (a, b, c))
            if _bits(t) == 32:
                h = self.op("mulhi", va, vb, sign=sg)
            else:
                h = self.op("shr", self.op("mul", va, vb), Imm(16), sign=sg)
            self.write32(d, t, lambda r: self.into(r, "add", h, vc), ins)
            return
        if _bits(t) == 64:
            pl = self.mul64(
                self.as_pair(self.read64(a, t, ins), ins), self.as_pair(self.read64(b, t, ins), ins)
            )
            rl, rh = self.add64(pl, self.as_pair(self.read64(c, t, ins), ins))
            self.write64(d, V64("pair", rl, rh), ins)
            return
        va, vb, vc = (self.read32(x, t, ins, "raw") for x in (a, b, c))
        self.write32(d, t, lambda r: self.into(r, "mad", va, vb, vc), ins)

    def _l_fma(self, ins: Instr) -> None:
        self._l_mad(ins)

    def _l_div(self, ins: Instr) -> None:
        t = _type_of(ins)
        rnd, ftz, _ = self._fmods(ins)
        d, a, b = ins.operands
        if t == "f32":
            va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
            if "approx" in ins.mods:
                r = self.flush(self.op("fdiv", Imm(0x3F800000), vb, rnd="rn", ftz=ftz))
                self.write32(d, t, lambda x: self.into(x, "fmul", va, r, rnd="rn", ftz=ftz), ins)
                return
            if "full" in ins.mods:
                rnd = "rn"
            self.write32(d, t, lambda x: self.into(x, "fdiv", va, vb, rnd=rnd, ftz=ftz), ins)
            return
        if t == "f64":
            return self._dbin(ins, "ddiv")
        self._intdiv(ins, t, True)

    def _l_rem(self, ins: Instr) -> None:
        self._intdiv(ins, _type_of(ins), False)

    def _intdiv(self, ins: Instr, t: str, quotient: bool) -> None:
        d, a, b = ins.operands
        if _bits(t) == 64:
            n = self.as_pair(self.read64(a, t, ins), ins)
            dv = self.as_pair(self.read64(b, t, ins), ins)
            self.div_zero_check(dv[0], ins, t, dv[1])
            q, r = self.sdivmod64(n, dv) if _signed(t) else self.udivmod64(n, dv)
            res = q if quotient else r
            self.write64(d, V64("pair", res[0], res[1]), ins)
            return
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        self.div_zero_check(vb, ins, t)
        op, sign = "idiv" if quotient else "irem", "s" if _signed(t) else "u"
        self.write32(d, t, lambda x: self.into(x, op, va, vb, sign=sign), ins)

    def _l_abs(self, ins: Instr) -> None:
        t = _type_of(ins)
        _, ftz, _ = self._fmods(ins)
        d, a = ins.operands
        if t == "f32":
            va = self.read32(a, t, ins)
            if ftz:
                va = self.flush(va)
            self.write32(d, t, lambda r: self.into(r, "and", va, Imm(0x7FFFFFFF)), ins)
            return
        if t == "f64":
            lo, hi = self.as_pair(self.read64(a, t, ins), ins)
            self.write64(d, V64("pair", lo, self.op("and", hi, Imm(0x7FFFFFFF))), ins)
            return
        if _bits(t) == 64:
            x = self.as_pair(self.read64(a, t, ins), ins)
            nl, nh = self.neg64(x)
            neg = self.setp("lt", x[1], Imm(0), sign="s")
            self.write64(d, V64("pair", self.sel(nl, x[0], neg), self.sel(nh, x[1], neg)), ins)
            return
        va = self.read32(a, t, ins)
        n = self.op("sub", Imm(0), va)
        self.write32(d, t, lambda r: self.into(r, "max", va, n, sign="s"), ins)

    def _l_neg(self, ins: Instr) -> None:
        t = _type_of(ins)
        _, ftz, _ = self._fmods(ins)
        d, a = ins.operands
        if t == "f32":
            va = self.read32(a, t, ins)
            if ftz:
                va = self.flush(va)
            self.write32(d, t, lambda r: self.into(r, "xor", va, Imm(0x80000000)), ins)
            return
        if t == "f64":
            lo, hi = self.as_pair(self.read64(a, t, ins), ins)
            self.write64(d, V64("pair", lo, self.op("xor", hi, Imm(0x80000000))), ins)
            return
        if _bits(t) == 64:
            lo, hi = self.neg64(self.as_pair(self.read64(a, t, ins), ins))
            self.write64(d, V64("pair", lo, hi), ins)
            return
        va = self.read32(a, t, ins, "raw")
        self.write32(d, t, lambda r: self.into(r, "sub", Imm(0), va), ins)

    def _minmax(self, ins: Instr, op: str) -> None:
        t = _type_of(ins)
        _, ftz, _ = self._fmods(ins)
        d, a, b = ins.operands
        if t == "f32":
            va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
            self.write32(d, t, lambda r: self.into(r, "f" + op, va, vb, ftz=ftz), ins)
            return
        if t == "f64":
            lo, hi = self.dminmax(self.dpair(a, ins), self.dpair(b, ins), op == "min")
            self.write64(d, V64("pair", lo, hi), ins)
            return
        sg = "s" if _signed(t) else "u"
        if _bits(t) == 64:
            pa, pb = self.as_pair(self.read64(a, t, ins), ins), self.as_pair(self.read64(b, t, ins), ins)
            p = self.cmp64("lt" if op == "min" else "gt", pa, pb, sg == "s")
            self.write64(d, V64("pair", self.sel(pa[0], pb[0], p), self.sel(pa[1], pb[1], p)), ins)
            return
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        self.write32(d, t, lambda r: self.into(r, op, va, vb, sign=sg), ins, clean=True)

    def _l_min(self, ins: Instr) -> None:
        self._minmax(ins, "min")

    def _l_max(self, ins: Instr) -> None:
        self._minmax(ins, "max")

    def _l_copysign(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a, b = ins.operands
        if t == "f64":
            al, ah = self.as_pair(self.read64(a, t, ins), ins)
            bl, bh = self.as_pair(self.read64(b, t, ins), ins)
            hi = self.op("or", self.op("and", bh, Imm(0x7FFFFFFF)), self.op("and", ah, Imm(0x80000000)))
            self.write64(d, V64("pair", bl, hi), ins)
            return
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        m = self.op("and", vb, Imm(0x7FFFFFFF))
        s = self.op("and", va, Imm(0x80000000))
        self.write32(d, t, lambda r: self.into(r, "or", m, s), ins)

    def _unary_f32(self, ins: Instr, op: str, *pre: Imm, rounded: bool = True) -> None:
        """A one-operand f32 instruction as the machine op ``op`` (sources ``pre`` + the operand);
        ``.approx`` forms are modelled correctly rounded (rn); f64 forms trap."""
        t = _type_of(ins)
        rnd, ftz, _ = self._fmods(ins)
        if t != "f32":
            return self.f64_trap(ins)
        m = {"rnd": "rn" if "approx" in ins.mods else rnd, "ftz": ftz} if rounded else {"ftz": ftz}
        d, a = ins.operands
        va = self.read32(a, t, ins)
        self.write32(d, t, lambda x: self.into(x, op, *pre, va, **m), ins)
        return None

    def _l_sqrt(self, ins: Instr) -> None:
        if _type_of(ins) == "f64" and "approx" not in ins.mods:
            d, a = ins.operands
            return self._dop(ins, d, "dsqrt", self.dpair(a, ins), rnd=self._fmods(ins)[0])
        return self._unary_f32(ins, "fsqrt")

    def _l_rcp(self, ins: Instr) -> None:
        if _type_of(ins) == "f64" and "approx" not in ins.mods:
            d, a = ins.operands
            one = (Imm(0), Imm(0x3FF00000))
            return self._dop(ins, d, "ddiv", one, self.dpair(a, ins), rnd=self._fmods(ins)[0])
        return self._unary_f32(ins, "fdiv", Imm(0x3F800000))

    def _l_ex2(self, ins: Instr) -> None:
        """ex2.approx{.ftz}.f32: the machine op ``fex2`` (rn(2^x), like the interpreter's model)."""
        self._unary_f32(ins, "fex2", rounded=False)

    def _approx_limit(self, ins: Instr) -> None:
        raise self.limit(ins, f"the approximate instruction `{ins.form}` (no exact machine sequence yet)")

    _l_lg2 = _l_sin = _l_cos = _l_tanh = _approx_limit

    def _l_rsqrt(self, ins: Instr) -> None:
        t = _type_of(ins)
        _, ftz, _ = self._fmods(ins)
        if t != "f32":
            return self.f64_trap(ins)
        d, a = ins.operands
        self.write32v(d, t, self.frsqrt(self.read32(a, t, ins), ftz), ins)
        return None

    def _l_testp(self, ins: Instr) -> None:
        t = _type_of(ins)
        kind = ins.mods[0]
        if t != "f32":
            return self.f64_trap(ins)
        d, a = ins.operands
        va = self.read32(a, t, ins)
        mag = self.op("and", va, Imm(0x7FFFFFFF))
        inf = Imm(0x7F800000)

        def f(p: P) -> None:
            if kind in ("finite", "infinite", "number", "notanumber"):
                cmp = {"finite": "lt", "infinite": "eq", "number": "le", "notanumber": "gt"}[kind]
                self.setp_into(p, cmp, mag, inf)
            elif kind == "normal":
                e = self.op("and", va, inf)
                q = self.setp("ne", e, Imm(0))
                self.setp_into(p, "lt", mag, inf, bop="and", c=q)
            elif kind == "subnormal":
                e = self.op("and", va, inf)
                q = self.setp("eq", e, Imm(0))
                self.setp_into(p, "ne", mag, Imm(0), bop="and", c=q)
            else:
                raise self.fail(ins, f"unknown testp .{kind}")

        self.writep(d, f, ins)

    # =========================================================================================
    # bit operations
    # =========================================================================================
    def _logic(self, ins: Instr, op: str) -> None:
        t = _type_of(ins)
        d, a, b = ins.operands
        if t == "pred":
            pa, pb = self.readp(a, ins), self.readp(b, ins)
            self.writep(d, lambda p: self.emit("plop", (p,), (pa, pb), bop=op), ins)
            return
        if _bits(t) == 64:
            va, vb = self.read64(a, t, ins), self.read64(b, t, ins)
            kind = self.dest64(d, ins)[0] if isinstance(d, Reg) else "pair"
            if kind == "zx" and op == "and" and va.kind in ("sx", "zx"):
                _, dlo, _ = self.dest64(d, ins)
                self.into(dlo, "and", va.lo, vb.lo)
                return
            if kind == "w":  # a window offset with a small non-negative mask: stays in the window
                _, dlo, _ = self.dest64(d, ins)
                w = self.to_window(va, 0, ins)
                r = self.op(op, w, vb.lo)
                self.into(dlo, "sel", Imm(POISON), r, self.setp("eq", w, Imm(POISON)))
                return
            (al, ah), (bl, bh) = self.as_pair(va, ins), self.as_pair(vb, ins)
            self.write64(d, V64("pair", self.op(op, al, bl), self.op(op, ah, bh)), ins)
            return
        self._int_bin(ins, op)

    def _l_and(self, ins: Instr) -> None:
        self._logic(ins, "and")

    def _l_or(self, ins: Instr) -> None:
        self._logic(ins, "or")

    def _l_xor(self, ins: Instr) -> None:
        self._logic(ins, "xor")

    def _l_not(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a = ins.operands
        if t == "pred":
            pa = self.readp(a, ins)
            self.writep(d, lambda p: self.emit("plop", (p,), (pa.inv(), TRUE), bop="and"), ins)
            return
        if _bits(t) == 64:
            al, ah = self.as_pair(self.read64(a, t, ins), ins)
            self.write64(d, V64("pair", self.op("not", al), self.op("not", ah)), ins)
            return
        va = self.read32(a, t, ins, "raw")
        self.write32(d, t, lambda r: self.into(r, "not", va), ins)

    def _l_cnot(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a = ins.operands
        if _bits(t) == 64:
            al, ah = self.as_pair(self.read64(a, t, ins), ins)
            p = self.cmp64("eq", (al, ah), (Imm(0), Imm(0)), False)
            self.write64(d, V64("zx", self.sel(Imm(1), Imm(0), p)), ins)
            return
        va = self.read32(a, t, ins, "zext")
        p = self.setp("eq", va, Imm(0))
        self.write32(d, t, lambda r: self.into(r, "sel", Imm(1), Imm(0), p), ins)

    def _l_lop3(self, ins: Instr) -> None:
        d, a, b, c, lut = ins.operands
        if not isinstance(lut, PImm):
            raise self.fail(ins, "lop3 needs an immediate truth table")
        va, vb, vc = (self.read32(x, "b32", ins) for x in (a, b, c))
        table = lut.value & 0xFF
        if table in (0, 0xFF):
            self.write32v(d, "b32", Imm(M32 if table else 0), ins)
            return

        # Shannon expansion on a: f = (a & f1(b, c)) | (~a & f0(b, c))
        def two(tab: int) -> R | Imm:  # 4-entry truth table over (b, c): bit k = f(b=k>>1, c=k&1)
            terms: list[R | Imm] = []
            for k in range(4):
                if (tab >> k) & 1:
                    tb = vb if k & 2 else self.op("not", vb)
                    tc = vc if k & 1 else self.op("not", vc)
                    terms.append(self.op("and", tb, tc))
            if not terms:
                return Imm(0)
            acc = terms[0]
            for x in terms[1:]:
                acc = self.op("or", acc, x)
            return acc

        f1 = two(table >> 4)
        f0 = two(table & 0xF)
        hi = self.op("and", va, f1)
        lo = self.op("and", self.op("not", va), f0)
        self.write32(d, "b32", lambda r: self.into(r, "or", hi, lo), ins)

    def _shift(self, ins: Instr, left: bool) -> None:
        t = _type_of(ins)
        d, a, b = ins.operands
        vb = self.read32(b, "u32", ins)
        if _bits(t) == 64:
            va = self.read64(a, t, ins)
            kind = self.dest64(d, ins)[0] if isinstance(d, Reg) else "pair"
            if left and kind == "w":
                wa, sa, _ = self.as_w(va, ins)
                _, dlo, _ = self.dest64(d, ins)
                assert isinstance(vb, Imm)
                self.into(dlo, "mulw", wa, Imm(1 << vb.v), sa=sa, sb="s")
                return
            pa = self.as_pair(va, ins)
            lo, hi = self.shl64(pa, vb) if left else self.shr64(pa, vb, _signed(t))
            self.write64(d, V64("pair", lo, hi), ins)
            return
        if left:
            va = self.read32(a, t, ins, "raw")
            self.write32(d, t, lambda r: self.into(r, "shl", va, vb), ins)
        else:
            va = self.read32(a, t, ins, "ext")
            sg = "s" if _signed(t) else "u"
            self.write32(d, t, lambda r: self.into(r, "shr", va, vb, sign=sg), ins, clean=True)

    def _l_shl(self, ins: Instr) -> None:
        self._shift(ins, True)

    def _l_shr(self, ins: Instr) -> None:
        self._shift(ins, False)

    def _l_shf(self, ins: Instr) -> None:
        left = "l" in ins.mods
        wrap = "wrap" in ins.mods
        d, a, b, c = ins.operands
        va, vb, vc = self.read32(a, "b32", ins), self.read32(b, "b32", ins), self.read32(c, "u32", ins)
        n = self.op("and", vc, Imm(31)) if wrap else self.op("min", vc, Imm(32), sign="u")
        # 64-bit value b:a; left -> high word of (b:a) << n, right -> low word of (b:a) >> n
        m = self.op("sub", Imm(32), n)
        if left:
            hi = self.op("or", self.op("shl", vb, n), self.op("shr", va, m))
        else:
            hi = self.op("or", self.op("shr", va, n), self.op("shl", vb, m))
        self.write32v(d, "b32", hi, ins)

    def _unary_bits(self, ins: Instr, op: str) -> None:
        t = _type_of(ins)
        d, a = ins.operands
        if _bits(t) == 64:
            al, ah = self.as_pair(self.read64(a, t, ins), ins)
            if op == "popc":
                v = self.op("add", self.op("popc", al), self.op("popc", ah))
            elif op == "clz":
                v = self.clz64((al, ah))
            else:  # brev
                self.write64(d, V64("pair", self.op("brev", ah), self.op("brev", al)), ins)
                return
            self.write32v(d, "u32", v, ins)
            return
        va = self.read32(a, t, ins, "zext")
        if _bits(t) != 32:
            raise self.fail(ins, f"unsupported {op}.{t}")
        out_t = t if op == "brev" else "u32"
        self.write32(d, out_t, lambda r: self.into(r, op, va), ins)

    def _l_popc(self, ins: Instr) -> None:
        self._unary_bits(ins, "popc")

    def _l_clz(self, ins: Instr) -> None:
        self._unary_bits(ins, "clz")

    def _l_brev(self, ins: Instr) -> None:
        self._unary_bits(ins, "brev")

    def _l_bfind(self, ins: Instr) -> None:
        t = _type_of(ins)
        sa = "shiftamt" in ins.mods
        d, a = ins.operands
        if _bits(t) == 64:
            al, ah = self.as_pair(self.read64(a, t, ins), ins)
            if _signed(t):
                s = self.op("shr", ah, Imm(31), sign="s")
                al, ah = self.op("xor", al, s), self.op("xor", ah, s)
            c = self.clz64((al, ah))
            width = 63
        else:
            va = self.read32(a, t, ins)
            if _signed(t):
                va = self.op("xor", va, self.op("shr", va, Imm(31), sign="s"))
            c = self.op("clz", va)
            width = 31
        if sa:
            none = self.setp("eq", c, Imm(width + 1))
            v = self.sel(Imm(M32), c, none)
        else:
            v = self.op("sub", Imm(width), c)  # -1 (0xFFFFFFFF) when there is no set bit
        self.write32v(d, "u32", v, ins)

    def bfe32(self, x: R | Imm, pos: R | Imm, ln: R | Imm, signed: bool) -> R:
        p = self.op("and", pos, Imm(0xFF))
        n = self.op("and", ln, Imm(0xFF))
        sh = self.op("shr", x, p)
        if not signed:
            mask = self.op("sub", self.op("shl", Imm(1), n), Imm(1))  # n >= 32 -> all ones
            return self.op("and", sh, mask)
        avail = self.op("max", self.op("sub", Imm(32), p), Imm(0), sign="s")
        cnt = self.op("min", n, avail, sign="u")
        mask = self.op("sub", self.op("shl", Imm(1), cnt), Imm(1))
        r = self.op("and", sh, mask)
        top = self.op("min", self.op("sub", self.op("add", p, n), Imm(1)), Imm(31), sign="u")
        sb = self.op("and", self.op("shr", x, top), Imm(1))
        fill = self.op("and", self.op("not", mask), self.op("sub", Imm(0), sb))
        r = self.op("or", r, fill)
        return self.sel(Imm(0), r, self.setp("eq", n, Imm(0)))

    def _l_bfe(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a, b, c = ins.operands
        if _bits(t) != 32:
            raise self.limit(ins, "64-bit bfe")
        va = self.read32(a, t, ins)
        vb, vc = self.read32(b, "u32", ins), self.read32(c, "u32", ins)
        v = self.bfe32(va, vb, vc, _signed(t))
        self.write32v(d, t, v, ins)

    def _l_bfi(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a, b, c, e = ins.operands
        vc, ve = self.read32(c, "u32", ins), self.read32(e, "u32", ins)
        if _bits(t) == 64:
            if not (isinstance(vc, Imm) and isinstance(ve, Imm)):
                raise self.limit(ins, "64-bit bfi with a register position or length")
            pos, ln = vc.v & 0xFF, ve.v & 0xFF
            n = max(0, min(ln, 64 - pos))
            mask = ((1 << n) - 1) << pos if pos < 64 else 0
            pa = self.as_pair(self.read64(a, t, ins), ins)
            pb = self.as_pair(self.read64(b, t, ins), ins)
            sl, sh = self.shl64(pa, Imm(pos)) if pos < 64 else (Imm(0), Imm(0))
            words = []
            for k, (x, y) in enumerate(((sl, pb[0]), (sh, pb[1]))):
                mk = (mask >> (32 * k)) & M32
                if mk == 0:
                    words.append(y)
                elif mk == M32:
                    words.append(x)
                else:
                    words.append(self.op("or", self.op("and", x, Imm(mk)), self.op("and", y, Imm(~mk & M32))))
            self.write64(d, V64("pair", words[0], words[1]), ins)
            return
        va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
        p = self.op("and", vc, Imm(0xFF))
        n = self.op("and", ve, Imm(0xFF))
        avail = self.op("max", self.op("sub", Imm(32), p), Imm(0), sign="s")
        cnt = self.op("min", n, avail, sign="u")
        mask = self.op("shl", self.op("sub", self.op("shl", Imm(1), cnt), Imm(1)), p)
        ins_bits = self.op("and", self.op("shl", va, p), mask)
        keep = self.op("and", vb, self.op("not", mask))
        self.write32(d, t, lambda r: self.into(r, "or", ins_bits, keep), ins)

    def _l_prmt(self, ins: Instr) -> None:
        mode = next((x for x in ins.mods if x in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
        d, a, b, c = ins.operands
        va, vb, vc = (self.read32(x, "b32", ins) for x in (a, b, c))

        def src_byte(idx: R | Imm) -> R | Imm:
            """Byte number idx (0-7) of the 8-byte value b:a."""
            if isinstance(idx, Imm):
                k = idx.v & 7
                w = va if k < 4 else vb
                sh = 8 * (k & 3)
                v = self.op("shr", w, Imm(sh)) if sh else w
                return self.op("and", v, Imm(0xFF))
            w = self.sel(vb, va, self.setp("ne", self.op("and", idx, Imm(4)), Imm(0)))
            sh = self.op("shl", self.op("and", idx, Imm(3)), Imm(3))
            return self.op("and", self.op("shr", w, sh), Imm(0xFF))

        acc: R | Imm = Imm(0)
        for i in range(4):
            if mode is None:
                if isinstance(vc, Imm):
                    sel = (vc.v >> (4 * i)) & 0xF
                    byte = src_byte(Imm(sel & 7))
                    if sel & 8:
                        byte = self.op("shr", self.op("shl", byte, Imm(24)), Imm(31), sign="s")
                        byte = self.op("and", byte, Imm(0xFF))
                else:
                    sel_r = self.op("and", self.op("shr", vc, Imm(4 * i)), Imm(0xF))
                    byte = src_byte(self.op("and", sel_r, Imm(7)))
                    rep = self.op(
                        "and", self.op("shr", self.op("shl", byte, Imm(24)), Imm(31), sign="s"), Imm(0xFF)
                    )
                    byte = self.sel(rep, byte, self.setp("ne", self.op("and", sel_r, Imm(8)), Imm(0)))
            else:
                n = self.op("and", vc, Imm(3))
                if mode == "f4e":
                    idx = self.op("and", self.op("add", n, Imm(i)), Imm(7))
                elif mode == "b4e":
                    idx = self.op("and", self.op("sub", n, Imm(i)), Imm(7))
                elif mode == "rc8":
                    idx = n
                elif mode == "ecl":
                    idx = self.op("max", n, Imm(i), sign="u")
                elif mode == "ecr":
                    idx = self.op("min", n, Imm(i), sign="u")
                else:  # rc16
                    odd = self.setp("ne", self.op("and", n, Imm(1)), Imm(0))
                    idx = self.sel(Imm(2 + (i & 1)), Imm(i & 1), odd)
                byte = src_byte(idx)
            sh_b = self.op("shl", byte, Imm(8 * i)) if i else byte
            acc = sh_b if i == 0 else self.op("or", acc, sh_b)
        self.write32v(d, "b32", acc, ins)

    # =========================================================================================
    # comparisons and selects
    # =========================================================================================
    def _int_cmp(self, cmp: str, t: str) -> tuple[str, str]:
        unsigned = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
        if cmp in unsigned:
            return unsigned[cmp], "u"
        if cmp not in ("eq", "ne", "lt", "le", "gt", "ge"):
            raise PTXError(f"unsupported integer comparison .{cmp}")
        return cmp, "s" if _signed(t) else "u"

    def compare(
        self,
        cmp: str,
        t: str,
        a: object,
        b: object,
        ins: Instr,
        ftz: bool,
        bop: str | None = None,
        c: P | None = None,
        into: P | None = None,
    ) -> P:
        """(a cmp b) [bop c] as a predicate (written into ``into`` when given)."""
        p = into if into is not None else self.ptmp()
        m: dict[str, object] = {} if bop is None else {"bop": bop}
        extra: tuple = () if bop is None else (c,)
        if t == "f32":
            va, vb = self.read32(a, t, ins), self.read32(b, t, ins)
            self.emit("fsetp", (p,), (va, vb, *extra), cmp=cmp, ftz=ftz, **m)
            return p
        if t == "f64":
            self.emit("dsetp", (p,), (*self.dpair(a, ins), *self.dpair(b, ins), *extra), cmp=cmp, **m)
            return p
        cc, sg = self._int_cmp(cmp, t)
        if _bits(t) == 64:
            va, vb = self.read64(a, t, ins), self.read64(b, t, ins)
            kinds = {va.kind if va.const is None else "c", vb.kind if vb.const is None else "c"}
            if kinds <= {"sx", "c"} and all(v.kind == "sx" for v in (va, vb)):
                self.emit("setp", (p,), (va.lo, vb.lo, *extra), cmp=cc, sign=sg, **m)
                return p
            if kinds <= {"zx", "c"} and all(v.kind == "zx" for v in (va, vb)):
                self.emit("setp", (p,), (va.lo, vb.lo, *extra), cmp=cc, sign="u", **m)
                return p
            r = self.cmp64(cc, self.as_pair(va, ins), self.as_pair(vb, ins), sg == "s")
            if bop is None:
                self.emit("plop", (p,), (r, TRUE), bop="and")
            else:
                self.emit("plop", (p,), (r, c), bop=bop)
            return p
        mode = "zext" if cc in ("eq", "ne") or sg == "u" else "ext"
        va, vb = self.read32(a, t, ins, mode), self.read32(b, t, ins, mode)
        self.emit("setp", (p,), (va, vb, *extra), cmp=cc, sign=sg, **m)
        return p

    def _l_setp(self, ins: Instr) -> None:
        t = _type_of(ins)
        cmp = ins.mods[0]
        bop = next((x for x in ins.mods[1:] if x in ("and", "or", "xor")), None)
        ftz = "ftz" in ins.mods
        d = ins.operands[0]
        a, b = ins.operands[1], ins.operands[2]
        c = self.readp(ins.operands[3], ins) if len(ins.operands) > 3 else None
        if bop is not None and c is None:
            raise self.fail(ins, "setp with a boolean operation needs a predicate operand")
        if isinstance(d, Pair):
            r = self.compare(cmp, t, a, b, ins, ftz)
            cc = c if c is not None else TRUE
            bb = bop or "and"
            self.writep(d.first, lambda p: self.emit("plop", (p,), (r, cc), bop=bb), ins)
            self.writep(d.second, lambda p: self.emit("plop", (p,), (r.inv(), cc), bop=bb), ins)
            return
        self.writep(d, lambda p: self.compare(cmp, t, a, b, ins, ftz, bop, c, into=p), ins)

    def _l_set(self, ins: Instr) -> None:
        cmp = ins.mods[0]
        types = [m for m in ins.mods if m in TYPES]
        dt, st = types[0], types[-1]
        d, a, b = ins.operands[:3]
        r = self.compare(cmp, st, a, b, ins, False)
        true = Imm(0x3F800000) if dt == "f32" else Imm(M32)
        self.write32(d, dt, lambda x: self.into(x, "sel", true, Imm(0), r), ins)

    def _l_selp(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a, b, c = ins.operands
        p = self.readp(c, ins)
        if _bits(t) == 64:
            va, vb = self.read64(a, t, ins), self.read64(b, t, ins)
            kind = self.dest64(d, ins)[0] if isinstance(d, Reg) else "pair"
            if kind == "pair":
                (al, ah), (bl, bh) = self.as_pair(va, ins), self.as_pair(vb, ins)
                self.write64(d, V64("pair", self.sel(al, bl, p), self.sel(ah, bh, p)), ins)
                return
            _, dlo, _ = self.dest64(d, ins)
            if kind == "w":
                assert isinstance(d, Reg)
                base = self.kinds[d.name][1]
                wa, wb = self.to_window(va, base, ins), self.to_window(vb, base, ins)
            else:
                wa, wb = va.lo, vb.lo
            self.into(dlo, "sel", wa, wb, p)
            return
        va, vb = self.read32(a, t, ins, "ext"), self.read32(b, t, ins, "ext")
        self.write32(d, t, lambda r: self.into(r, "sel", va, vb, p), ins, clean=True)

    def _l_slct(self, ins: Instr) -> None:
        types = [m for m in ins.mods if m in TYPES]
        dt, ct = types[0], types[-1]
        d, a, b, c = ins.operands
        ftz = "ftz" in ins.mods
        if ct == "f32":
            p = self.compare("ge", "f32", c, PImm(0, "f32"), ins, ftz)
        else:
            p = self.setp("ge", self.read32(c, ct, ins), Imm(0), sign="s")
        if _bits(dt) == 64:
            (al, ah), (bl, bh) = (
                self.as_pair(self.read64(a, dt, ins), ins),
                self.as_pair(self.read64(b, dt, ins), ins),
            )
            self.write64(d, V64("pair", self.sel(al, bl, p), self.sel(ah, bh, p)), ins)
            return
        va, vb = self.read32(a, dt, ins, "ext"), self.read32(b, dt, ins, "ext")
        self.write32(d, dt, lambda r: self.into(r, "sel", va, vb, p), ins, clean=True)

    # =========================================================================================
    # conversions
    # =========================================================================================
    def _l_cvt(self, ins: Instr) -> None:
        types = [m for m in ins.mods if m in TYPES]
        if len(types) != 2:
            raise self.fail(ins, "cvt needs a destination and a source type")
        dt, st = types
        rnd = next((m for m in ins.mods if m in ROUNDING or m in INT_ROUNDING), None)
        ftz = "ftz" in ins.mods
        sat = "sat" in ins.mods
        d, a = ins.operands
        if dt in ("f16", "bf16") or st in ("f16", "bf16"):
            raise self.limit(ins, "half-precision conversion")
        if dt == "f64" or st == "f64":
            return self._cvt_f64(ins, d, a, dt, st, rnd, ftz, sat)
        norm = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}
        if dt == "f32" and st == "f32":
            va = self.read32(a, "f32", ins)
            if rnd in INT_ROUNDING:
                self.write32(d, "f32", lambda r: self.into(r, "frnd", va, irnd=rnd, ftz=ftz), ins)
            elif sat:
                self.write32(d, "f32", lambda r: self.into(r, "frnd", va, ftz=ftz, sat=True), ins)
            elif ftz:
                self.write32(d, "f32", lambda r: self.into(r, "frnd", va, ftz=True), ins)
            else:
                self.write32v(d, "f32", va, ins)
            return
        if dt == "f32":  # from an integer
            sname = norm.get(st, st)
            r0 = rnd if rnd in ROUNDING else "rn"
            if _bits(sname) == 64:
                v = self.i2f64(self.as_pair(self.read64(a, st, ins), ins), _signed(sname), r0)
            else:
                va = self.read32(a, sname, ins, "ext")
                v = self.op("i2f", va, sign="s" if _signed(sname) else "u", rnd=r0)
            if sat:
                v = self.op("frnd", v, sat=True)
            self.write32v(d, "f32", v, ins)
            return
        if st == "f32":  # to an integer
            dname = norm.get(dt, dt)
            r = rnd if rnd in INT_ROUNDING else "rzi"
            va = self.read32(a, "f32", ins)
            if _bits(dname) == 64:
                lo, hi = self.f2i64(va, _signed(dname), r, ftz)
                self.write64(d, V64("pair", lo, hi), ins)
                return
            sg = "s" if _signed(dname) else "u"
            v = self.op("f2i", va, sign=sg, irnd=r, ftz=ftz)
            if _bits(dname) < 32:
                lo_, hi_ = (
                    (-(1 << (_bits(dname) - 1)), (1 << (_bits(dname) - 1)) - 1)
                    if sg == "s"
                    else (0, (1 << _bits(dname)) - 1)
                )
                if sg == "s":
                    v = self.op("min", self.op("max", v, Imm(lo_), sign="s"), Imm(hi_), sign="s")
                else:
                    v = self.op("min", v, Imm(hi_), sign="u")
            self.write32v(d, dt, v, ins, clean=True)
            return
        # integer -> integer
        dn, sn = norm.get(dt, dt), norm.get(st, st)
        if sat:
            return self._cvt_sat(ins, d, a, dt, st, dn, sn)
        if _bits(dt) == 64:
            if _bits(st) == 64:
                self.write64(d, self.read64(a, st, ins), ins)
                return
            va = self.read32(a, st, ins, "ext")
            self.write64(d, V64("sx" if _signed(sn) else "zx", va), ins)
            return
        if _bits(st) == 64:
            v = self.read64(a, st, ins)
            lo = self.as_pair(v, ins)[0]
            self.write32v(d, dt, lo, ins)
            return
        va = self.read32(a, st, ins, "ext")
        self.write32v(d, dt, va, ins)

    def _cvt_sat(self, ins: Instr, d: object, a: object, dt: str, st: str, dn: str, sn: str) -> None:
        bits_d = _bits(dn)
        lo = -(1 << (bits_d - 1)) if _signed(dn) else 0
        hi = (1 << (bits_d - 1)) - 1 if _signed(dn) else (1 << bits_d) - 1
        if _bits(sn) == 64 or bits_d == 64:
            raise self.limit(ins, "saturating 64-bit integer conversion")
        va = self.read32(a, st, ins, "ext")
        v: R | Imm = va
        if _signed(sn):
            if lo > -(2**31):
                v = self.op("max", v, Imm(lo), sign="s")
            if hi < 2**31 - 1:
                v = self.op("min", v, Imm(hi), sign="s")
        elif hi < M32:
            v = self.op("min", v, Imm(hi), sign="u")
        self.write32v(d, dt, v, ins)

    def _l_cvta(self, ins: Instr) -> None:
        t = _type_of(ins)
        to = "to" in ins.mods
        space = next((m for m in ins.mods if m in ("global", "shared", "local", "const", "param")), None)
        win = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space or "", 0)
        d, a = ins.operands
        if _bits(t) != 64:
            self.write32v(d, t, self.read32(a, t, ins, "raw"), ins)
            return
        v = self.read64(a, t, ins)
        kind = self.dest64(d, ins)[0] if isinstance(d, Reg) else "pair"
        if kind == "w":
            assert isinstance(d, Reg)
            base = self.kinds[d.name][1]
            _, dlo, _ = self.dest64(d, ins)
            src_base = base + win if to else base - win
            if v.kind == "w" and v.base == src_base:
                self.mov(dlo, v.lo)
            else:
                self.mov(dlo, self.to_window(v, src_base, ins))
            return
        if win == 0:
            self.write64(d, v, ins)
            return
        lo, hi = self.as_pair(v, ins)
        wh = (win >> 32) & M32
        self.write64(d, V64("pair", lo, self.op("sub" if to else "add", hi, Imm(wh))), ins)

    # =========================================================================================
    # memory
    # =========================================================================================
    def _space_of(self, ins: Instr, a: Addr) -> str:
        for m in ins.mods:
            if m in SPACES:
                if m == "param" and isinstance(a.base, Sym) and a.base.name in self.layout.local_off:
                    return "callparam"
                return m
        return "generic"

    def address(self, a: Addr, space: str, ins: Instr) -> tuple[R | Imm, str, int, int]:
        """(address word, amode, base, offset) for a memory operand."""
        off = a.offset
        if a.base is None:
            return Imm(0), "z", 0, off
        if isinstance(a.base, Sym):
            v = self.sym_value(a.base.name, ins)
            if v.const is not None:
                return Imm(0), "z", 0, v.const + off
            return v.lo, "s", v.base, off
        decl = self.decl(a.base, ins)
        if _bits(decl) < 64:
            return self.reg32[a.base.name], "z", 0, off
        v = self.read64(a.base, decl, ins)
        if v.kind == "w":
            return v.lo, "s", v.base, off
        if v.kind == "sx":
            return v.lo, "s", 0, off
        if v.kind == "zx":
            return v.lo, "z", 0, off
        if space == "generic":
            raise self.limit(ins, "a generic memory access through a general 64-bit address")
        base = GLOBAL_BASE if space in ("global", "const") else 0
        return self.to_window(v, base, ins), "s", base, off

    def _l_ld(self, ins: Instr) -> None:
        t = _type_of(ins)
        d, a = ins.operands
        if not isinstance(a, Addr):
            raise self.fail(ins, "ld needs an address operand")
        if t == "pred":
            raise self.fail(ins, "ld of .pred")
        space = self._space_of(ins, a)
        size = TYPE_SIZES[t]
        if size > 8:
            raise self.limit(ins, f"{size * 8}-bit memory access")
        dests = list(d.items) if isinstance(d, Vec) else [d]
        # a pointer parameter kept as a window value: one word from the launch-constant bank
        if (
            space == "param"
            and size == 8
            and len(dests) == 1
            and isinstance(d, Reg)
            and isinstance(a.base, Sym)
            and self.kinds.get(d.name, PAIR)[0] == "w"
        ):
            slot = self.bank_slot(("window", (self.layout.param_off[a.base.name] + a.offset, GLOBAL_BASE)))
            _, dlo, _ = self.dest64(d, ins)
            self.into(dlo, "ld", Imm(0), space="param", size=4, off=slot)
            return
        A, amode, base, off = self.address(a, space, ins)
        sg = "s" if _signed(t) else "u"
        for k, x in enumerate(dests):
            o = off + k * size
            m = {"space": space, "amode": amode, "base": base}
            if size <= 4:
                self.write32(
                    x,
                    t,
                    lambda r, o=o, m=m: self.into(r, "ld", A, size=size, sign=sg, off=o, **m),
                    ins,
                    clean=True,
                )
            else:
                lo = self.op("ld", A, size=4, chk=8, off=o, **m)
                hi = self.op("ld", A, size=4, off=o + 4, **m)
                if isinstance(x, Sink):
                    continue
                self.write64(x, V64("pair", lo, hi), ins)

    _l_ldu = _l_ld

    def _l_st(self, ins: Instr) -> None:
        t = _type_of(ins)
        a, s = ins.operands
        if not isinstance(a, Addr):
            raise self.fail(ins, "st needs an address operand")
        space = self._space_of(ins, a)
        size = TYPE_SIZES[t]
        if size > 8:
            raise self.limit(ins, f"{size * 8}-bit memory access")
        srcs = list(s.items) if isinstance(s, Vec) else [s]
        vals = []
        for x in srcs:
            if size <= 4:
                vals.append((self.read32(x, t, ins, "raw"),))
            else:
                vals.append(self.as_pair(self.read64(x, t, ins), ins))
        A, amode, base, off = self.address(a, space, ins)
        m = {"space": space, "amode": amode, "base": base}
        for k, v in enumerate(vals):
            o = off + k * size
            if size <= 4:
                self.emit("st", (), (A, v[0]), size=size, off=o, **m)
            else:
                self.emit("st", (), (A, v[0]), size=4, chk=8, off=o, **m)
                self.emit("st", (), (A, v[1]), size=4, off=o + 4, **m)

    def _l_atom(self, ins: Instr) -> None:
        self._atomic(ins, True)

    def _l_red(self, ins: Instr) -> None:
        self._atomic(ins, False)

    def _atomic(self, ins: Instr, returns: bool) -> None:
        t = _type_of(ins)
        kind = next(
            (
                m
                for m in ins.mods
                if m in ("add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor")
            ),
            None,
        )
        if kind is None:
            raise self.fail(ins, "unsupported atomic operation")
        if _bits(t) != 32:
            raise self.limit(ins, f"{_bits(t)}-bit atomics")
        if t == "f32" and kind not in ("add", "min", "max", "exch", "cas"):
            raise self.fail(ins, f"unsupported atomic .{kind}.f32")
        ops = list(ins.operands)
        d = ops.pop(0) if returns else None
        a = ops.pop(0)
        if not isinstance(a, Addr):
            raise self.fail(ins, "atomic needs an address operand")
        space = self._space_of(ins, a)
        vb = self.read32(ops[0], t, ins, "raw")
        vc = self.read32(ops[1], t, ins, "raw") if len(ops) > 1 else Imm(0)
        A, amode, base, off = self.address(a, space, ins)
        at = "f32" if t == "f32" else ("s32" if _signed(t) else ("u32" if t == "u32" else "b32"))

        def f(r: R) -> None:
            self.emit(
                "atom", (r,), (A, vb, vc), space=space, aop=kind, type=at, amode=amode, base=base, off=off
            )

        if d is None:
            f(self.tmp())
        else:
            self.write32(d, t, f, ins)

    # =========================================================================================
    # warp-level operations
    # =========================================================================================
    def _l_shfl(self, ins: Instr) -> None:
        mode = next((m for m in ins.mods if m in ("up", "down", "bfly", "idx")), None)
        if mode is None:
            raise self.fail(ins, "shfl needs a mode")
        d, a, b, c = ins.operands[:4]
        dp = None
        if isinstance(d, Pair):
            d, dp = d.first, d.second
        va = self.read32(a, "b32", ins, "raw")
        if isinstance(a, Reg) and isinstance(va, R) and va == self.reg32.get(a.name):
            self.pinned.add(va.n)  # other lanes' copies of this register are read: keep it exclusive
        vb, vc = self.read32(b, "u32", ins), self.read32(c, "u32", ins)

        def f(r: R) -> None:
            if r in (va, vb, vc):  # a cross-lane op's destination must differ from its sources
                t = self.tmp()
                self.into(t, "shfl", va, vb, vc, mode=mode)
                self.mov(r, t)
            else:
                self.into(r, "shfl", va, vb, vc, mode=mode)

        self.write32(d, "b32", f, ins)
        if dp is not None:
            self.writep(dp, lambda p: self.emit("shflp", (p,), (vb, vc), mode=mode), ins)

    def _l_vote(self, ins: Instr) -> None:
        mode = next((m for m in ins.mods if m in ("all", "any", "uni", "ballot")), None)
        if mode is None:
            raise self.fail(ins, "vote needs a mode")
        d, a = ins.operands[:2]
        pa = self.readp(a, ins)
        if mode == "ballot":
            self.write32(d, "b32", lambda r: self.into(r, "ballot", pa), ins)
            return

        def f(p: P) -> None:
            if p.n == pa.n:
                t = self.ptmp()
                self.emit("vote", (t,), (pa,), vmode=mode)
                self.emit("plop", (p,), (t, TRUE), bop="and")
            else:
                self.emit("vote", (p,), (pa,), vmode=mode)

        self.writep(d, f, ins)

    def _l_activemask(self, ins: Instr) -> None:
        self.write32(ins.operands[0], "b32", lambda r: self.into(r, "ballot", TRUE), ins)

    # =========================================================================================
    # float sequences: exact integer algorithms on the IEEE fields
    # =========================================================================================
    def flush(self, x: R | Imm) -> R:
        """ftz: a subnormal becomes a zero of the same sign (NaN payloads kept)."""
        return self.op("frnd", x, ftz=True)

    def unpack_norm(self, mag: R | Imm) -> tuple[R, R]:
        """(m, e) with m in [2^23, 2^24) and value = m * 2^(e - 150) for a positive finite float's
        magnitude bits (subnormals normalized: e may drop below 1); garbage for zero/inf/NaN."""
        e = self.op("shr", mag, Imm(23))
        m = self.op("and", mag, Imm(0x7FFFFF))
        self.into(m, "or", m, Imm(0x800000), guard=self.setp("ne", e, Imm(0)))
        e1 = self.op("max", e, Imm(1), sign="u")
        k = self.op("sub", self.op("clz", m), Imm(8))
        self.into(m, "shl", m, k)
        self.into(e1, "sub", e1, k)
        return m, e1

    def round_pack(self, sgn: R | Imm, be: R, m: R, F: int, sticky: R | Imm, rnd: str, ftz: bool) -> R:
        """Round ``m * 2^(be - 127 - F)`` (m in [2^F, 2^(F+1)), ``sticky`` nonzero when nonzero bits
        lie below m) to a float32 in mode ``rnd``: subnormals, overflow per mode, ftz, sign."""
        d = self.op("max", self.op("sub", Imm(1), be), Imm(0), sign="s")
        sh = self.op("min", self.op("add", d, Imm(F - 23)), Imm(F + 2), sign="u")
        kept = self.op("shr", m, sh)
        mask = self.op("sub", self.op("shl", Imm(1), sh), Imm(1))
        rest = self.op("and", m, mask)
        up: P | None = None
        if rnd == "rn":
            half = self.op("shl", Imm(1), self.op("sub", sh, Imm(1)))
            t = self.op("or", self.op("and", kept, Imm(1)), sticky)
            pt = self.setp("ne", t, Imm(0))
            pt = self.setp("eq", rest, half, bop="and", c=pt)
            up = self.setp("gt", rest, half, bop="or", c=pt)
        elif rnd in ("rp", "rm"):
            t = self.op("or", rest, sticky)
            pu = self.setp("ne", t, Imm(0))
            up = self.setp("eq" if rnd == "rp" else "ne", sgn, Imm(0), bop="and", c=pu)
        if up is not None:
            self.into(kept, "add", kept, Imm(1), guard=up)
        be1 = self.op("min", self.op("max", be, Imm(1), sign="s"), Imm(255), sign="s")
        packed = self.op("add", self.op("shl", self.op("sub", be1, Imm(1)), Imm(23)), kept)
        ovf = self.setp("ge", packed, Imm(0x7F800000))
        if rnd == "rn":
            ov: R | Imm = Imm(0x7F800000)
        elif rnd == "rz":
            ov = Imm(0x7F7FFFFF)
        else:
            neg = self.setp("ne", sgn, Imm(0))
            big, small = Imm(0x7F800000), Imm(0x7F7FFFFF)
            ov = self.sel(small, big, neg) if rnd == "rp" else self.sel(big, small, neg)
        packed = self.sel(ov, packed, ovf)
        if ftz:
            packed = self.sel(Imm(0), packed, self.setp("lt", packed, Imm(0x800000)))
        return self.op("or", packed, sgn)

    def frsqrt(self, a: R | Imm, ftz: bool) -> R:
        """rsqrt.approx{.ftz}.f32 as the interpreter models it: 1/sqrt(a) correctly rounded (rn).

        m * 2^u with u even; Y = floor(2^38 / sqrt(m)) from a Newton estimate refined with an
        exact-product residual, then checked exactly: Y^2 m <= 2^76 < (Y+1)^2 m, computed modulo
        2^64 (2^76 vanishes there and the remainder is far below 2^63), corrected by loops."""
        if ftz:
            a = self.flush(a)
        aa = self.op("and", a, Imm(0x7FFFFFFF))
        m, e = self.unpack_norm(aa)
        self.into(m, "max", m, Imm(0x800000), sign="u")
        u = self.op("sub", e, Imm(150))
        odd = self.setp("ne", self.op("and", u, Imm(1)), Imm(0))
        self.into(m, "shl", m, Imm(1), guard=odd)
        self.into(u, "sub", u, Imm(1), guard=odd)
        x = self.op("i2f", m, sign="u", rnd="rn")  # exact
        hx = self.op("fmul", x, Imm(0xBF000000))
        y = self.op("sub", Imm(0x5F3759DF), self.op("shr", x, Imm(1)))
        for _ in range(3):
            y = self.op("fmul", y, self.op("ffma", hx, self.op("fmul", y, y), Imm(0x3FC00000)))
        hi = self.op("fmul", x, y)
        lo = self.op("ffma", x, y, self.op("xor", hi, Imm(0x80000000)))
        e1 = self.op("ffma", self.op("xor", hi, Imm(0x80000000)), y, Imm(0x3F800000))
        ee = self.op("ffma", self.op("xor", lo, Imm(0x80000000)), y, e1)  # 1 - x*y^2, nearly exact
        yf = self.op("fmul", y, Imm(0x52800000))  # y * 2^38
        big_y = self.op("f2i", yf, sign="u", irnd="rni")
        c = self.op("f2i", self.op("fmul", self.op("fmul", yf, ee), Imm(0x3F000000)), sign="s", irnd="rni")
        yy = self.tmp()
        self.into(yy, "add", big_y, c)
        rl, rh = self.tmp(), self.tmp()

        def remainder() -> None:  # (rl, rh) = 2^76 - yy^2 m  (mod 2^64, signed)
            s0, s1 = self.op("mul", yy, yy), self.op("mulhi", yy, yy, sign="u")
            pl = self.op("mul", s0, m)
            ph = self.op("add", self.op("mulhi", s0, m, sign="u"), self.op("mul", s1, m))
            nl, nh = self.neg64((pl, ph))
            self.mov(rl, nl)
            self.mov(rh, nh)

        remainder()
        l1, l2, done = self._label(), self._label(), self._label()
        self.place(l1)
        p = self.setp("lt", rh, Imm(0), sign="s")
        self.bra(l2, p.inv())
        self.into(yy, "sub", yy, Imm(1))
        remainder()
        self.bra(l1)
        self.place(l2)
        t = self.op("add", self.op("add", yy, yy), Imm(1))
        tl, th = self.op("mul", t, m), self.op("mulhi", t, m, sign="u")
        p2 = self.cmp64("ge", (rl, rh), (tl, th), True)
        self.bra(done, p2.inv())
        self.into(yy, "add", yy, Imm(1))
        remainder()
        self.bra(l2)
        self.place(done)
        sticky = self.op("or", rl, rh)
        big = self.setp("ge", yy, Imm(1 << 26))
        self.into(sticky, "or", sticky, self.op("and", yy, Imm(1)), guard=big)
        self.into(yy, "shr", yy, Imm(1), guard=big)
        be = self.op("sub", Imm(114), self.op("shr", u, Imm(1), sign="s"))
        self.into(be, "add", be, Imm(1), guard=big)
        res = self.round_pack(Imm(0), be, yy, 25, sticky, "rn", ftz)
        neg = self.setp("lt", a, Imm(0), sign="s")
        nan = self.setp("ne", aa, Imm(0), bop="and", c=neg)
        nan = self.setp("gt", aa, Imm(0x7F800000), bop="or", c=nan)
        res = self.sel(Imm(0), res, self.setp("eq", aa, Imm(0x7F800000)))
        res = self.sel(
            self.op("or", self.op("and", a, Imm(0x80000000)), Imm(0x7F800000)),
            res,
            self.setp("eq", aa, Imm(0)),
        )
        return self.sel(Imm(0x7FFFFFFF), res, nan)

    def i2f64(self, x: tuple, signed: bool, rnd: str) -> R:
        """cvt.rnd.f32.{s64,u64}: correctly rounded."""
        lo, hi = x
        s: R | Imm = Imm(0)
        if signed:
            s = self.op("and", hi, Imm(0x80000000))
            neg = self.setp("lt", hi, Imm(0), sign="s")
            nl, nh = self.neg64((lo, hi))
            lo, hi = self.sel(nl, lo, neg), self.sel(nh, hi, neg)
        c = self.clz64((lo, hi))
        sl, sh = self.shl64((lo, hi), c)
        m = self.op("shr", sh, Imm(1))
        sticky = self.op("or", self.op("and", sh, Imm(1)), sl)
        be = self.op("sub", Imm(127 + 63), c)
        res = self.round_pack(s, be, m, 30, sticky, rnd, False)
        return self.sel(Imm(0), res, self.setp("eq", c, Imm(64)))

    def f2i64(self, x: R | Imm, signed: bool, irnd: str, ftz: bool) -> tuple[R, R]:
        """cvt.irnd{.ftz}.{s64,u64}.f32: rounded, saturating, NaN -> 0."""
        sg = "s" if signed else "u"
        small = self.op("f2i", x, sign=sg, irnd=irnd, ftz=ftz)
        small_hi = self.op("shr", small, Imm(31), sign="s") if signed else Imm(0)
        e = self.op("and", self.op("shr", x, Imm(23)), Imm(0xFF))
        m = self.op("or", self.op("and", x, Imm(0x7FFFFF)), Imm(0x800000))
        bl, bh = self.shl64((m, Imm(0)), self.op("sub", e, Imm(150)))
        negx = self.setp("lt", x, Imm(0), sign="s")
        if signed:
            nl, nh = self.neg64((bl, bh))
            bl, bh = self.sel(nl, bl, negx), self.sel(nh, bh, negx)
            sat_lo = self.sel(Imm(0), Imm(M32), negx)
            sat_hi = self.sel(Imm(0x80000000), Imm(0x7FFFFFFF), negx)
            psat = self.setp("ge", e, Imm(190))
            big = self.setp("ge", e, Imm(158))
        else:
            bl, bh = self.sel(Imm(0), bl, negx), self.sel(Imm(0), bh, negx)
            sat_lo = self.sel(Imm(0), Imm(M32), negx)
            sat_hi = sat_lo
            psat = self.setp("ge", e, Imm(191))
            big = self.setp("ge", e, Imm(159))
        bl, bh = self.sel(sat_lo, bl, psat), self.sel(sat_hi, bh, psat)
        pnan = self.setp("gt", self.op("and", x, Imm(0x7FFFFFFF)), Imm(0x7F800000))
        bl, bh = self.sel(Imm(0), bl, pnan), self.sel(Imm(0), bh, pnan)
        return self.sel(bl, small, big), self.sel(bh, small_hi, big)

    # =========================================================================================
    # f64 sequences (the subset sinf/cosf's Payne-Hanek reduction needs; the rest traps)
    # =========================================================================================
    def mul64x64(self, a: tuple, b: tuple) -> tuple[R, R, R, R]:
        """The full 128-bit product of two unsigned 64-bit pairs, as four words (low first)."""
        (a0, a1), (b0, b1) = a, b
        w0 = self.op("mul", a0, b0)
        w1, c1 = self.tmp(), self.tmp()
        self.mov(w1, self.op("mulhi", a0, b0, sign="u"))
        self.mov(c1, Imm(0))
        self._addc(w1, self.op("mul", a0, b1), c1)
        self._addc(w1, self.op("mul", a1, b0), c1)
        w2, c2 = self.tmp(), self.tmp()
        self.mov(w2, self.op("mulhi", a0, b1, sign="u"))
        self.mov(c2, Imm(0))
        self._addc(w2, self.op("mulhi", a1, b0, sign="u"), c2)
        self._addc(w2, self.op("mul", a1, b1), c2)
        self._addc(w2, c1, c2)
        w3 = self.op("add", self.op("mulhi", a1, b1, sign="u"), c2)
        return w0, w1, w2, w3

    def round_pack64(self, sgn: R | Imm, be: R, m: tuple, sticky: R | Imm, rnd: str) -> tuple[R, R]:
        """Round ``m * 2^(be - 1023 - 63)`` (m a pair with its leading bit at 63, ``sticky``
        nonzero when nonzero bits lie below it) to a float64 in mode ``rnd`` (subnormals,
        overflow per mode); the sign word ``sgn`` is 0 or 0x80000000."""
        d = self.op("max", self.op("sub", Imm(1), be), Imm(0), sign="s")
        sh = self.op("min", self.op("add", d, Imm(11)), Imm(65), sign="u")
        kl, kh = self.shr64(m, sh, False)
        sh1 = self.op("sub", sh, Imm(1))
        rb = self.op("and", self.shr64(m, sh1, False)[0], Imm(1))
        ml, mh = self.sub64(self.shl64((Imm(1), Imm(0)), sh1), (Imm(1), Imm(0)))
        low = self.op("or", self.op("and", m[0], ml), self.op("and", m[1], mh))
        low = self.op("or", low, sticky)
        kept_l, kept_h = self.tmp(), self.tmp()
        self.mov(kept_l, kl)
        self.mov(kept_h, kh)
        up: P | None = None
        if rnd == "rn":
            t = self.op("or", low, self.op("and", kept_l, Imm(1)))
            up = self.setp("ne", t, Imm(0))
            up = self.setp("ne", rb, Imm(0), bop="and", c=up)
        elif rnd in ("rp", "rm"):
            t = self.op("or", low, rb)
            up = self.setp("ne", t, Imm(0))
            up = self.setp("eq" if rnd == "rp" else "ne", sgn, Imm(0), bop="and", c=up)
        if up is not None:
            self.into(kept_l, "add", kept_l, Imm(1), guard=up)
            c = self.setp("eq", kept_l, Imm(0), bop="and", c=up)
            self.into(kept_h, "add", kept_h, Imm(1), guard=c)
        be1 = self.op("min", self.op("max", be, Imm(1), sign="s"), Imm(2047), sign="s")
        hi = self.op("add", kept_h, self.op("shl", self.op("sub", be1, Imm(1)), Imm(20)))
        ovf = self.setp("ge", hi, Imm(0x7FF00000))
        if rnd == "rn":
            oh, ol = Imm(0x7FF00000), Imm(0)
        elif rnd == "rz":
            oh, ol = Imm(0x7FEFFFFF), Imm(M32)
        else:
            neg = self.setp("ne", sgn, Imm(0))
            to_inf = neg if rnd == "rm" else neg.inv()
            oh = self.sel(Imm(0x7FF00000), Imm(0x7FEFFFFF), to_inf)
            ol = self.sel(Imm(0), Imm(M32), to_inf)
        lo = self.sel(ol, kept_l, ovf)
        hi = self.sel(oh, hi, ovf)
        return lo, self.op("or", hi, sgn)

    def unpack64(self, lo: R | Imm, hi: R | Imm) -> tuple[tuple[R, R], R, dict[str, P]]:
        """A float64's significand normalized to bit 52, its biased exponent (below 1 for
        subnormals), and class predicates (nan, inf, zero)."""
        mag = self.op("and", hi, Imm(0x7FFFFFFF))
        e = self.op("shr", mag, Imm(20))
        mh = self.op("and", hi, Imm(0xFFFFF))
        self.into(mh, "or", mh, Imm(0x100000), guard=self.setp("ne", e, Imm(0)))
        e1 = self.op("max", e, Imm(1), sign="u")
        k = self.op("sub", self.clz64((lo, mh)), Imm(11))
        nl, nh = self.shl64((lo, mh), k)
        self.into(e1, "sub", e1, k)
        pz = self.setp("eq", lo, Imm(0))
        inf = self.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz)
        zero = self.setp("eq", mag, Imm(0), bop="and", c=pz)
        nan = self.plop(
            "or",
            self.setp("gt", mag, Imm(0x7FF00000)),
            self.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz.inv()),
        )
        return (nl, nh), e1, {"nan": nan, "inf": inf, "zero": zero}  # type: ignore[return-value]

    def dmul(self, a: tuple, b: tuple, rnd: str = "rn") -> tuple[R, R]:
        """mul.rnd.f64, correctly rounded (canonical NaN): the exact 106-bit product of the
        significands, rounded once (softfloat64.py's ``dmul`` expansion for the weights)."""
        sgn = self.op("and", self.op("xor", a[1], b[1]), Imm(0x80000000))
        ma, ea, ca = self.unpack64(*a)
        mb, eb, cb = self.unpack64(*b)
        w0, w1, w2, w3 = self.mul64x64(ma, mb)
        p105 = self.setp("ne", self.op("and", w3, Imm(0x200)), Imm(0))

        def window(k: int) -> tuple[R, R, R]:
            lo = self.op("or", self.op("shr", w1, Imm(k - 32)), self.op("shl", w2, Imm(64 - k)))
            hi = self.op("or", self.op("shr", w2, Imm(k - 32)), self.op("shl", w3, Imm(64 - k)))
            st = self.op("or", w0, self.op("and", w1, Imm((1 << (k - 32)) - 1)))
            return lo, hi, st

        l41, h41, s41 = window(41)
        l42, h42, s42 = window(42)
        m = (self.sel(l42, l41, p105), self.sel(h42, h41, p105))
        sticky = self.sel(s42, s41, p105)
        be = self.op("sub", self.op("add", ea, eb), Imm(1023))
        self.into(be, "add", be, Imm(1), guard=p105)
        lo, hi = self.round_pack64(sgn, be, m, sticky, rnd)
        nan = self.plop("or", ca["nan"], cb["nan"])
        nan = self.plop("or", nan, self.plop("and", ca["inf"], cb["zero"]))
        nan = self.plop("or", nan, self.plop("and", ca["zero"], cb["inf"]))
        inf = self.plop("or", ca["inf"], cb["inf"])
        zero = self.plop("or", ca["zero"], cb["zero"])
        lo = self.sel(Imm(0), lo, self.plop("or", inf, zero))
        hi = self.sel(self.op("or", sgn, Imm(0x7FF00000)), hi, inf)
        hi = self.sel(sgn, hi, zero)
        return self.sel(Imm(M32), lo, nan), self.sel(Imm(0x7FFFFFFF), hi, nan)

    def i2d(self, x: tuple, signed: bool, rnd: str) -> tuple[R, R]:
        """cvt.rnd.f64.{s64,u64}: correctly rounded."""
        lo, hi = x
        sgn: R | Imm = Imm(0)
        if signed:
            sgn = self.op("and", hi, Imm(0x80000000))
            neg = self.setp("lt", hi, Imm(0), sign="s")
            nl, nh = self.neg64((lo, hi))
            lo, hi = self.sel(nl, lo, neg), self.sel(nh, hi, neg)
        c = self.clz64((lo, hi))
        m = self.shl64((lo, hi), c)
        be = self.op("sub", Imm(1023 + 63), c)
        rl, rh = self.round_pack64(sgn, be, m, Imm(0), rnd)
        z = self.setp("eq", c, Imm(64))
        return self.sel(Imm(0), rl, z), self.sel(Imm(0), rh, z)

    def d2f(self, x: tuple, rnd: str, ftz: bool) -> R:
        """cvt.rnd{.ftz}.f32.f64: correctly rounded (canonical NaN)."""
        lo, hi = x
        sgn = self.op("and", hi, Imm(0x80000000))
        mag = self.op("and", hi, Imm(0x7FFFFFFF))
        e = self.op("shr", mag, Imm(20))
        # 1.f as a 31-bit integer (leading bit 30) and the 22 lowest fraction bits as sticky
        m = self.op(
            "or",
            self.op(
                "or", self.op("shl", self.op("and", hi, Imm(0xFFFFF)), Imm(10)), self.op("shr", lo, Imm(22))
            ),
            Imm(0x40000000),
        )
        sticky = self.op("and", lo, Imm(0x3FFFFF))
        be = self.op("sub", e, Imm(1023 - 127))
        sub = self.setp(
            "eq", e, Imm(0)
        )  # f64 subnormal: far below f32's range, only its sign and stickiness count
        be = self.sel(Imm(-2000), be, sub)
        res = self.round_pack(sgn, be, m, 30, sticky, rnd, ftz)
        pz = self.setp("eq", lo, Imm(0))
        zero = self.setp("eq", mag, Imm(0), bop="and", c=pz)
        inf = self.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz)
        nan = self.plop(
            "or",
            self.setp("gt", mag, Imm(0x7FF00000)),
            self.setp("eq", mag, Imm(0x7FF00000), bop="and", c=pz.inv()),
        )
        res = self.sel(sgn, res, zero)
        res = self.sel(self.op("or", sgn, Imm(0x7F800000)), res, inf)
        return self.sel(Imm(0x7FFFFFFF), res, nan)

    def f2d(self, x: R | Imm, ftz: bool) -> tuple[R, R]:
        """cvt{.ftz}.f64.f32: exact (canonical NaN)."""
        if ftz:
            x = self.flush(x)
        sgn = self.op("and", x, Imm(0x80000000))
        mag = self.op("and", x, Imm(0x7FFFFFFF))
        m, e = self.unpack_norm(mag)  # m in [2^23, 2^24) with its leading bit at 23
        hi = self.op(
            "or",
            self.op("shl", self.op("add", e, Imm(1023 - 127 - 1)), Imm(20)),
            self.op("shr", self.op("and", m, Imm(0x7FFFFF)), Imm(3)),
        )
        hi = self.op("add", hi, Imm(1 << 20))
        lo = self.op("shl", m, Imm(29))
        zero = self.setp("eq", mag, Imm(0))
        inf = self.setp("eq", mag, Imm(0x7F800000))
        nan = self.setp("gt", mag, Imm(0x7F800000))
        hi = self.sel(Imm(0x7FF00000), hi, inf)
        hi, lo = self.sel(Imm(0), hi, zero), self.sel(Imm(0), lo, self.plop("or", zero, inf))
        hi = self.op("or", hi, sgn)
        return self.sel(Imm(M32), lo, nan), self.sel(Imm(0x7FFFFFFF), hi, nan)

    def _cvt_f64(
        self, ins: Instr, d: object, a: object, dt: str, st: str, rnd: str | None, ftz: bool, sat: bool
    ) -> None:
        """Conversions from/to f64 as the pair ops i2d, d2f, f2d, d2i, d2l (the weights expand them,
        softfloat64.py); f64 -> f64 rounding to integral is a bit sequence (``drnd``)."""
        norm = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}
        r0 = rnd if rnd in ROUNDING else "rn"
        if dt == "f64" and st not in ("f32", "f64"):
            sname = norm.get(st, st)
            if _bits(sname) == 64:
                x = self.as_pair(self.read64(a, st, ins), ins)
            else:
                v = self.read32(a, sname, ins, "ext")
                x = self.as_pair(V64("sx" if _signed(sname) else "zx", v), ins)
            self._dop(ins, d, "i2d", x, sign="s" if _signed(sname) else "u", rnd=r0)
            return
        if dt == "f32" and st == "f64":
            v = self.tmp()
            self.emit("d2f", (v,), self.dpair(a, ins), rnd=r0, ftz=ftz)
            if sat:
                v = self.op("frnd", v, sat=True)
            self.write32v(d, "f32", v, ins)
            return
        if dt == "f64" and st == "f32":
            lo, hi = self.tmp(), self.tmp()
            self.emit("f2d", (lo, hi), (self.read32(a, "f32", ins),), ftz=ftz)
            self.write64(d, V64("pair", lo, hi), ins)
            return
        if dt == "f64" and st == "f64":
            x = self.dpair(a, ins)
            if rnd in INT_ROUNDING:
                lo, hi = self.drnd(x, rnd)
                self.write64(d, V64("pair", lo, hi), ins)
            else:
                self.write64(d, V64("pair", *x), ins)
            return
        if st == "f64" and dt not in ("f16", "bf16", "f32"):
            dname = norm.get(dt, dt)
            ir = rnd if rnd in INT_ROUNDING else "rzi"
            sg = "s" if _signed(dname) else "u"
            if _bits(dname) == 64:
                self._dop(ins, d, "d2l", self.dpair(a, ins), sign=sg, irnd=ir)
                return
            v = self.tmp()
            self.emit("d2i", (v,), self.dpair(a, ins), sign=sg, irnd=ir)
            if _bits(dname) < 32:  # saturate further to the sub-word range (s32 saturation first is the same)
                n = _bits(dname)
                lo_, hi_ = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if sg == "s" else (0, (1 << n) - 1)
                v = self.op("min", self.op("max", v, Imm(lo_), sign=sg), Imm(hi_), sign=sg)
            self.write32v(d, dt, v, ins)
            return
        self.f64_trap(ins)


# ---------------------------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------------------------
def lower_kernel(module: Module, kernel: str, pointer_params: Sequence[bool] | None = None) -> Program:
    """Lower a kernel of a parsed PTX module to a machine program over virtual registers."""
    return Lowerer(module, kernel, pointer_params).lower()
