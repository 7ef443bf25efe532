"""The lowering context: the state every rule shares (fresh registers, PTX register maps, kinds,
the emitted code, labels, the launch-constant bank) and the small emitting primitives.

Why a context object instead of one big class: each PTX form is lowered by a short function
``(cx, ins) -> None`` in a family module (see ``table.RULES``); they all emit through this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from qwengpu.codegen.lowering.barred import expand_bar_red
from qwengpu.codegen.lowering.common import _bits, _type_of
from qwengpu.codegen.lowering.kinds import PAIR, KindAnalysis
from qwengpu.codegen.lowering.layout import compute_layout
from qwengpu.errors import MachineLimitError, PTXError
from qwengpu.isa.instr import Imm, MInstr, P, R
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.ir import TYPE_SIZES, Addr, Function, Instr, Module, Reg, Sym, Vec


def used_as_pointer(fn: Function, pname: str) -> bool:
    """Is the parameter loaded into a register that is then used as an address?"""
    regs = set()
    for ins in fn.body:
        if (
            ins.op == "ld"
            and "param" in ins.mods
            and isinstance(ins.operands[1], Addr)
            and isinstance(ins.operands[1].base, Sym)
            and ins.operands[1].base.name == pname
        ):
            if isinstance(ins.operands[0], Reg):
                regs.add(ins.operands[0].name)
    for ins in fn.body:
        if ins.op == "cvta" and isinstance(ins.operands[1], Reg) and ins.operands[1].name in regs:
            return True
        for o in ins.operands:
            if isinstance(o, Addr) and isinstance(o.base, Reg) and o.base.name in regs:
                return True
    return False


def promote_call_params(fn: Function) -> None:
    """Per-thread call-parameter variables accessed only whole, at offset 0, become registers."""
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


class LowerCtx:
    """Turns one (inlined) kernel into a machine program over virtual registers: the shared state."""

    def __init__(self, module: Module, kernel: str, pointer_params: Sequence[bool] | None = None) -> None:
        from qwengpu.simt.interp import _find_kernel

        fn0 = _find_kernel(module, kernel)
        self.module = module
        self.fn = expand_bar_red(inline_calls(module, fn0))  # bar.red: a shared counter (barred.py)
        self.layout = compute_layout(module, self.fn)
        self.gsyms = {v.name for v in self.layout.global_vars}
        if pointer_params is None:
            ptrs = {
                p.name
                for p in self.fn.params
                if p.type in ("u64", "b64", "s64") and (p.is_ptr_hint or used_as_pointer(self.fn, p.name))
            }
        else:
            ptrs = {p.name for p, isp in zip(self.fn.params, pointer_params, strict=False) if isp}
        self.ptrs = ptrs
        promote_call_params(self.fn)
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

    def _newr(self) -> int:
        """A fresh virtual register number."""
        self.nr += 1
        return self.nr - 1

    def _newp(self) -> int:
        """A fresh virtual predicate number."""
        self.np += 1
        return self.np - 1

    def _label(self) -> int:
        """A fresh machine label."""
        self.nlabels += 1
        return self.nlabels - 1

    def tmp(self) -> R:
        """A fresh temporary register (guarded sequences compute temporaries unguarded)."""
        r = R(self._newr())
        self.temps_r.add(r.n)
        return r

    def ptmp(self) -> P:
        """A fresh temporary predicate."""
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
        """Append one machine instruction, tagged with the PTX instruction being lowered."""
        ins = MInstr(op, tuple(d), tuple(s), {k: v for k, v in m.items()}, guard, target, self.cur_ptx)
        self.code.append(ins)
        return ins

    def op(self, op: str, *s: object, **m: object) -> R:
        """``op`` into a fresh temporary, returned."""
        d = self.tmp()
        self.emit(op, (d,), s, **m)
        return d

    def into(self, d: R, op: str, *s: object, guard: P | None = None, **m: object) -> R:
        """``op`` into ``d``, returned."""
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
        """(a cmp b) [bop c] into a fresh predicate."""
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
        """(a cmp b) [bop c] into ``p``."""
        m: dict[str, object] = {"cmp": cmp, "sign": sign}
        s: tuple = (a, b)
        if bop is not None:
            m["bop"] = bop
            s = (a, b, c)
        self.emit("setp", (p,), s, guard=guard, **m)
        return p

    def sel(self, a: object, b: object, p: P) -> R:
        """a if p else b, in a fresh temporary."""
        return self.op("sel", a, b, p)

    def place(self, lbl: int) -> None:
        """Place label ``lbl`` here."""
        self.code.append(MInstr("@label", target=lbl, ptx=self.cur_ptx))

    def bra(self, lbl: int, guard: P | None = None) -> None:
        """Branch to ``lbl`` (under ``guard``)."""
        self.emit("bra", guard=guard, target=lbl)

    def mov(self, d: R, a: object) -> None:
        """A move, omitted when ``d`` already is ``a``."""
        if d != a:
            self.emit("mov", (d,), (a,))

    def plop(self, bop: str, a: P, b: P) -> P:
        """a bop b on predicates, into a fresh predicate."""
        p = self.ptmp()
        self.emit("plop", (p,), (a, b), bop=bop)
        return p

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

    def fail(self, ins: Instr, msg: str) -> PTXError:
        """The PTXError for ``ins`` (unsupported or malformed PTX)."""
        return PTXError(f"{ins.where()}: {msg}: `{ins.text}`")

    def limit(self, ins: Instr, what: str) -> MachineLimitError:
        """The MachineLimitError for ``ins`` (valid PTX beyond what the machine does)."""
        return MachineLimitError(f"{ins.where()}: {what} is beyond the machine: `{ins.text}`")

    def decl(self, op: Reg, ins: Instr) -> str:
        """The declared type of a PTX register."""
        t = self.fn.regs.get(op.name)
        if t is None:
            raise self.fail(ins, f"undeclared register {op.name}")
        return t
