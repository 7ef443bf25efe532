"""The lowering driver: walks the inlined kernel, dispatches every instruction to its rule in
``table.RULES``, predicates guarded sequences and lays out the final program.

Each PTX instruction becomes a contiguous sequence in program order, so the per-lane-PC min-PC
scheduling of the machine reconverges exactly where the interpreter's does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import APPROX_ONLY
from qwengpu.codegen.lowering.operands import readp
from qwengpu.codegen.lowering.table import RULES
from qwengpu.errors import PTXError
from qwengpu.isa.instr import TRUE, MInstr, P, R, validate
from qwengpu.isa.program import Program
from qwengpu.ptx.ir import Neg

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


SIDE_EFFECTS = ("ld", "st", "atom", "trap", "bar", "exit", "vote", "ballot", "shfl", "shflp")


def lower(cx: LowerCtx) -> Program:
    """The machine program of the context's kernel: every instruction through its rule."""
    fn = cx.fn
    by_index: dict[int, list[str]] = {}
    for lb, idx in fn.labels.items():
        by_index.setdefault(idx, []).append(lb)
    starts: list[int] = []
    approx = []
    for i, ins in enumerate(fn.body):
        cx.cur_ptx = i
        for lb in by_index.get(i, ()):
            cx.place(cx.ptx_label[lb])
        start = len(cx.code)
        starts.append(start)
        handler = RULES.get(ins.op)
        if handler is None:
            raise PTXError(f"{ins.where()}: unsupported PTX instruction `{ins.form}`: `{ins.text}`")
        if ins.op in APPROX_ONLY or "approx" in ins.mods:
            approx.append(ins.form)
        if ins.guard is not None and ins.op != "bra":
            g = readp(cx, Neg(ins.guard) if ins.guard_neg else ins.guard, ins)
            handler(cx, ins)
            apply_guard(cx, start, g)
        else:
            handler(cx, ins)
    cx.cur_ptx = len(fn.body)
    for lb in by_index.get(len(fn.body), ()):
        cx.place(cx.ptx_label[lb])
    starts.append(len(cx.code))
    return layout_code(cx, starts, sorted(set(approx)))


def is_temp(cx: LowerCtx, x: object) -> bool:
    """Is ``x`` a temporary of the lowering (not a PTX register)?"""
    if isinstance(x, R):
        return x.n in cx.temps_r
    if isinstance(x, P):
        return x.n in cx.temps_p
    return False


def apply_guard(cx: LowerCtx, start: int, g: P) -> None:
    """Predicate a lowered sequence: branch around it when it has internal control flow,
    else guard every instruction with a visible effect (temporaries are computed freely)."""
    seq = cx.code[start:]
    if not any(x.op != "@label" for x in seq):
        return
    if any(x.op in ("bra", "@label") for x in seq):
        end = cx._label()
        cx.code.insert(start, MInstr("bra", guard=g.inv(), target=end, ptx=cx.cur_ptx))
        cx.place(end)
        return
    needs = [x for x in seq if x.op in SIDE_EFFECTS or any(not is_temp(cx, d) for d in x.d)]
    writes_g = any(isinstance(d, P) and d.n == g.n for x in seq for d in x.d)
    out: list[MInstr] = []
    gg = g
    if writes_g and len(needs) > 1:
        t = cx.ptmp()
        out.append(MInstr("plop", (t,), (g, TRUE), {"bop": "and"}, ptx=cx.cur_ptx))
        gg = t
    ids = {id(x) for x in needs}
    for x in seq:
        if id(x) in ids:
            if x.guard is None:
                x.guard = gg
            else:
                c = cx.ptmp()
                out.append(MInstr("plop", (c,), (x.guard, gg), {"bop": "and"}, ptx=cx.cur_ptx))
                x.guard = c
        out.append(x)
    cx.code[start:] = out


def layout_code(cx: LowerCtx, starts: list[int], approx: list[str]) -> Program:
    """Resolve labels to program counters and package the program with its PTX ranges."""
    final: list[MInstr] = []
    label_pc: dict[int, int] = {}
    pc_of = []
    for x in cx.code:
        pc_of.append(len(final))
        if x.op == "@label":
            label_pc[x.target] = len(final)  # type: ignore[index]
        else:
            final.append(x)
    pc_of.append(len(final))
    for x in final:
        if x.target is not None:
            x.target = label_pc[x.target]
    ranges = [(pc_of[starts[i]], pc_of[starts[i + 1]]) for i in range(len(cx.fn.body))]
    for x in final:
        validate(x)
    return Program(
        cx.fn.name,
        final,
        list(cx.fn.body),
        cx.layout,
        list(cx.bank_slots),
        cx.nr,
        cx.np,
        allocated=False,
        pinned=set(cx.pinned),
        kinds=dict(cx.kinds),
        ptx_ranges=ranges,
        ptx_labels=dict(cx.fn.labels),
        uses_approx=approx,
    )
