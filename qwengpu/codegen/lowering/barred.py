"""``bar.red`` (``__syncthreads_count`` / ``_and`` / ``_or``) as plain PTX the machine runs.

Why: the machine's ``bar`` carries no value. A block-wide reduction becomes a shared counter: each
thread adds its vote with ``red.shared.add``, a barrier, every thread reads the count, a barrier,
thread (0,0,0) clears the counter, a barrier (so a later ``bar.red`` — the same one in a loop —
starts from zero; the machine's memory starts at zero). ``.popc`` returns the count of true
predicates, ``.and`` counts the false ones and returns "none", ``.or`` returns "some". The
interpreter keeps its own ``bar.red`` semantics: the two oracles stay independent.

The rewrite happens on the inlined kernel before lowering (one counter word, a ``.shared``
variable of its own, only in kernels that use ``bar.red``); the new instructions keep the original
instruction's PTX line and CUDA position, so any message points at the user's code.
"""

from __future__ import annotations

import dataclasses

from qwengpu.ptx.ir import Addr, Function, Imm, Instr, Neg, Reg, Special, Sym, Var

COUNTER = "__qwengpu_bar_red"
_REGS = {"%qbr_vote": "u32", "%qbr_count": "u32", "%qbr_tid": "u32", "%qbr_tmp": "u32", "%qbr_first": "pred"}


def expand_bar_red(fn: Function) -> Function:
    """``fn`` with every ``bar.red`` replaced by its shared-counter sequence (``fn`` itself if none)."""
    if not any(i.op in ("bar", "barrier") and "red" in i.mods for i in fn.body):
        return fn
    body: list[Instr] = []
    where: list[int] = []  # old index -> new index
    for ins in fn.body:
        where.append(len(body))
        if ins.op in ("bar", "barrier") and "red" in ins.mods:
            body += _sequence(ins)
        else:
            body.append(ins)
    labels = {name: where[i] if i < len(where) else len(body) for name, i in fn.labels.items()}
    regs = dict(fn.regs)
    for name, t in _REGS.items():
        regs.setdefault(name, t)
    var = Var(COUNTER, "shared", "b32", 4, align=4)
    return dataclasses.replace(fn, body=body, labels=labels, regs=regs, vars=[*fn.vars, var])


def _sequence(ins: Instr) -> list[Instr]:
    """The PTX instructions standing for one ``bar.red`` (see the module docstring)."""
    kind = next((m for m in ins.mods if m in ("popc", "and", "or")), None)
    if kind is None or len(ins.operands) < 3:
        return [ins]  # malformed: the lowering's own refusal names it
    d, *bar_ops, p = ins.operands
    neg = isinstance(p, Neg)
    pred = p.inner if isinstance(p, Neg) else p
    # the vote: 1 when the thread counts (popc, or: p true; and: p false)
    one, zero = Imm(1), Imm(0)
    counts_true = (kind != "and") != neg
    vote, count = Reg("%qbr_vote"), Reg("%qbr_count")
    tid, tmp, first = Reg("%qbr_tid"), Reg("%qbr_tmp"), Reg("%qbr_first")
    addr = Addr(Sym(COUNTER))
    bar = tuple(bar_ops)

    def mk(op: str, mods: tuple[str, ...], *operands, guard: Reg | None = None) -> Instr:
        return Instr(op, mods, tuple(operands), guard=guard, line=ins.line, loc=ins.loc, text=ins.text)

    seq = [
        mk("selp", ("u32",), vote, one if counts_true else zero, zero if counts_true else one, pred),
        mk("red", ("shared", "add", "u32"), addr, vote),
        mk("bar", ("sync",), *bar),
        mk("ld", ("shared", "u32"), count, addr),
        mk("bar", ("sync",), *bar),
        mk("mov", ("u32",), tid, Special("tid.x")),
        mk("mov", ("u32",), tmp, Special("tid.y")),
        mk("or", ("b32",), tid, tid, tmp),
        mk("mov", ("u32",), tmp, Special("tid.z")),
        mk("or", ("b32",), tid, tid, tmp),
        mk("setp", ("eq", "u32"), first, tid, zero),
        mk("st", ("shared", "u32"), addr, zero, guard=first),
        mk("bar", ("sync",), *bar),
    ]
    if kind == "popc":
        seq.append(mk("mov", ("u32",), d, count))
    elif kind == "and":
        seq.append(mk("setp", ("eq", "u32"), d, count, zero))
    else:
        seq.append(mk("setp", ("ne", "u32"), d, count, zero))
    return seq
