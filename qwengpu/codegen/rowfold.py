"""Rows the code generator can decide from the program's own constants: identities (``add d, x,
0``) become copies the allocator drops, ops and comparisons of immediates fold, and rows guarded by
a constant predicate run unguarded or go (``docs/machine-in-weights.md`` 9.29).

Why a module of its own: these are generic rewrites of an expanded program (virtual registers),
not memory lowering; ``softmem._lower_for_weights`` runs them after the expansion and before the
launch's parameter words become immediates (``softmem.fold_param_loads``), so no launch value is
ever folded into a row (9.25). Values are the simulator's (``softfloat._fold``, ``_cmp``)."""

from __future__ import annotations

from dataclasses import replace

from qwengpu.codegen.regalloc import rebuild
from qwengpu.isa.instr import FALSE, PT, Imm, MInstr, P, R
from qwengpu.isa.program import Program

M32 = 0xFFFFFFFF

#: ops whose immediate 0 (or 1 for ``mul``) operand leaves the other: (op, the operand positions
#: that may hold it, the identity's value)
_IDENTITY = {"add": ((0, 1), 0), "or": ((0, 1), 0), "xor": ((0, 1), 0), "sub": ((1,), 0),
             "shl": ((1,), 0), "shr": ((1,), 0), "mul": ((0, 1), 1)}


def drop_identity_ops(prog: Program) -> Program:
    """``add d, x, 0`` (``or``/``xor`` with 0, ``sub``/``shl``/``shr`` by 0, ``mul`` by 1) -> ``mov d,
    x``, which the allocator then gives one register with x and drops where it can. Why: the
    expansions add a region's base to an address even where that base is 0 (shared memory at offset
    0: ``scan_hillis_steele``'s ``add r0, 0, r0``), a pass and a full word a lane for nothing.
    Only the program's own immediates: this runs before the launch's parameter words become
    immediates (``fold_param_loads``), so no launch value decides a row away. The window ops
    (``addw``...) keep their rows: their zero-extending forms are not the identity."""
    code = []
    changed = False
    for ins in prog.code:
        rule = _IDENTITY.get(ins.op)
        if rule is not None and len(ins.s) == 2 and len(ins.d) == 1 and isinstance(ins.d[0], R):
            pos, unit = rule
            for k in pos:
                y = ins.s[k]
                if isinstance(y, Imm) and y.v == unit:
                    ins = MInstr("mov", ins.d, (ins.s[1 - k],), {}, ins.guard, None, ins.ptx)
                    changed = True
                    break
        code.append(ins)
    return replace(prog, code=code) if changed else prog


#: integer ops ``softfloat._fold`` computes as the simulator does
_FOLDABLE = frozenset({"mov", "add", "sub", "and", "or", "xor", "not", "shl", "shr", "min", "max", "clz",
                       "mul"})


def fold_constant_rows(prog: Program) -> Program:
    """Rows whose operands are all immediates of the program (launch constants such as
    ``blockDim.x`` among them, substituted before the expansion: ``shr r, 64, 1`` of a reduction's
    first stride) -> ``mov`` of their value; a ``setp`` of two immediates -> its constant, and a
    row guarded by a predicate whose one definition is such a constant runs unguarded or goes
    (``@p bra`` over nothing: a pass of every group for a branch never taken). Repeated with
    ``regalloc.propagate_constants`` until nothing changes. Only the program's own immediates: it
    runs before the launch's parameter words become immediates (``fold_param_loads``), so no
    launch value is folded. Values as the simulator computes them (``softfloat._fold``, ``_cmp``)."""
    from qwengpu.codegen.regalloc import liveness, propagate_constants
    from qwengpu.codegen.softfloat import _cmp, _fold, _s32

    for _ in range(8):
        prog = propagate_constants(prog)
        code = list(prog.code)
        changed = False
        pconst: dict[int, bool] = {}
        pdefs: dict[int, int] = {}
        for ins in code:
            for d in ins.d:
                if isinstance(d, P):
                    pdefs[d.n] = pdefs.get(d.n, 0) + 1
        for pc, ins in enumerate(code):
            if ins.guard is not None or not ins.s or not all(isinstance(x, Imm) for x in ins.s):
                continue
            xs = [x.v & M32 for x in ins.s]  # type: ignore[union-attr]
            if ins.op in _FOLDABLE and ins.op != "mov" and len(ins.d) == 1 and isinstance(ins.d[0], R):
                v = _fold(ins.op, xs, ins.m)
                if v is not None:
                    code[pc] = MInstr("mov", ins.d, (Imm(v),), {}, None, None, ins.ptx)
                    changed = True
            elif ins.op == "setp" and len(xs) == 2 and ins.mod("bop") is None and len(ins.d) == 1:
                d = ins.d[0]
                if isinstance(d, P) and pdefs.get(d.n) == 1 and d.n != PT:
                    a, b = (_s32(xs[0]), _s32(xs[1])) if ins.mod("sign") == "s" else (xs[0], xs[1])
                    pconst[d.n] = _cmp(ins.mod("cmp"), a, b)
        if pconst:
            live_in, _ = liveness(code, P)
            pconst = {n: v for n, v in pconst.items() if not (live_in[0] >> n) & 1}
        changed |= _fold_in_blocks(code, prog.pinned)
        new: dict[int, MInstr | None] = {}
        for pc, ins in enumerate(code):
            g = ins.guard
            if g == FALSE:  # never runs (``_fold_in_blocks``)
                new[pc] = None
                continue
            if g is None or g.n not in pconst:
                continue
            if pconst[g.n] != g.neg:  # always true: the row runs unguarded
                new[pc] = replace(ins, guard=None, m=dict(ins.m))
            else:  # never true: the row goes
                new[pc] = None
        if new:
            changed = True
        prog = replace(prog, code=code)
        if new:
            prog = rebuild(prog, [(pc, new.get(pc, ins)) for pc, ins in enumerate(prog.code)
                                  if not (pc in new and new[pc] is None)])
        if not changed:
            return prog
    return prog


def _fold_in_blocks(code: list[MInstr], pinned: set[int]) -> bool:
    """:func:`fold_constant_rows` within straight runs of rows (no branch target, call or barrier
    inside): after an unguarded ``mov r, imm`` the run knows r (a register with several
    definitions too: a loop's first value), so a row whose operands are then all known folds to a
    ``mov`` and a ``setp`` to a constant; a row guarded by that constant then runs unguarded, or,
    never true (``@p bra`` out of a loop that runs at least once), gets the guard ``FALSE`` for
    :func:`fold_constant_rows` to remove. Edits ``code`` in place; True when it changed a row."""
    from qwengpu.codegen.softfloat import _cmp, _fold, _s32

    starts = {x.target for x in code if x.target is not None}
    regs: dict[int, int] = {}
    preds: dict[int, bool] = {}
    changed = False
    for pc, ins in enumerate(code):
        if pc in starts:
            regs.clear()
            preds.clear()
        known = [x.v & M32 if isinstance(x, Imm) else regs.get(x.n) if isinstance(x, R) and x.n not in pinned
                 else None for x in ins.s]
        g = ins.guard
        gv = None if g is None or g.n not in preds else preds[g.n] != g.neg
        if gv is True:
            ins = replace(ins, guard=None, m=dict(ins.m))
            code[pc], changed = ins, True
        elif gv is False and ins.op != "bar":
            code[pc], changed = replace(ins, guard=FALSE, m=dict(ins.m)), True
            continue  # writes nothing
        if ins.op == "sel" and ins.guard is None and isinstance(ins.s[2], P) and ins.s[2].n in preds:
            c = ins.s[2]
            pick = ins.s[0] if preds[c.n] != c.neg else ins.s[1]
            ins = MInstr("mov", ins.d, (pick,), {}, None, None, ins.ptx)
            code[pc], changed = ins, True
            known = [ins.s[0].v & M32 if isinstance(ins.s[0], Imm) else None]
        if ins.guard is None and ins.s and all(v is not None for v in known) and ins.op != "shfl":
            d = ins.d[0] if len(ins.d) == 1 else None
            if ins.op in _FOLDABLE and ins.op != "mov" and isinstance(d, R):
                v = _fold(ins.op, known, ins.m)  # type: ignore[arg-type]
                if v is not None:
                    ins = MInstr("mov", ins.d, (Imm(v),), {}, None, None, ins.ptx)
                    code[pc], changed = ins, True
            elif ins.op == "setp" and ins.mod("bop") is None and isinstance(d, P) and len(known) == 2:
                a, b = known
                if ins.mod("sign") == "s":
                    a, b = _s32(a), _s32(b)  # type: ignore[arg-type]
                v = _cmp(ins.mod("cmp"), a, b)
                for dv in ins.d:
                    preds[dv.n] = v
                continue
        for dv in ins.d:  # what the row writes is unknown now, unless it is a constant's mov
            if isinstance(dv, R):
                regs.pop(dv.n, None)
                if ins.op == "mov" and ins.guard is None and isinstance(ins.s[0], Imm):
                    regs[dv.n] = ins.s[0].v & M32
            elif isinstance(dv, P):
                preds.pop(dv.n, None)
        if ins.op in ("bra", "call", "ret", "bar", "exit", "trap"):
            regs.clear()
            preds.clear()
    return changed


__all__ = ["drop_identity_ops", "fold_constant_rows"]
