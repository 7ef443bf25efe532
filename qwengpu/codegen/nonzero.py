"""What a test on every path already decides about a division's operands, used before expansion.

Why: C code tests a divisor before it divides (``while (y != 0) { t = x % y; ... }``, ``if (x)
... a / x``) and a dividend's sign before it takes a remainder (``if (n < 2) continue; ... n %
d``), and the lowering still puts ``setp.eq p, y, 0; @p trap.divzero`` before every
``idiv``/``irem``; the division's sequence then clamps the divisor (``max.u d, y, 1``) so that a
lane with ``y == 0`` still ends, and a signed one takes both magnitudes (three rows each) and
gives the result its sign (two rows). On the machine each of those rows is a pass of every lane
group that runs it (Euclid's loop: 3 of its 19 rows an iteration). Where every path to the
division has already ruled out ``y == 0``, or a negative operand, in this lane, those rows do
nothing.

How: a forward data-flow over the pre-expansion program, per lane (a lane's registers change only
on its own path, so the scalar control-flow graph is the lane's: divergence and reconvergence
change which lanes run a row, not what a lane has seen). The facts: registers known nonzero or
known non-negative (as s32), and predicates known to mean ``r cmp K`` (an unguarded ``setp``
against a constant, no ``bop``). A branch, ``exit`` or ``trap`` guarded by such a predicate tells
the lanes on each of its edges which way the test went (the lanes that pass a ``@p trap`` have
``p`` false). ``mov``, ``or``, ``and``, shifts and ``min``/``max`` carry what they can; any other
write, a call, or a guarded write that may keep an unknown old value clears it; a join keeps what
every edge knows. Then a ``trap.divzero`` whose guard says ``r == 0`` for an ``r`` known nonzero
is dropped (with its ``setp`` when nothing else reads it), and an ``idiv``/``irem`` gets the
modifiers ``nz`` (divisor nonzero: ``softcore._x_idiv`` skips the clamp), ``nna`` / ``nnb``
(dividend / divisor non-negative: no magnitude rows for it, no sign rows for a remainder of a
non-negative dividend). Nothing is computed from a value on the host: rows are only removed where
their effect is nil for every lane that reaches them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from qwengpu.codegen.softcore import param_word
from qwengpu.isa.instr import PT, Imm, MInstr, P, R
from qwengpu.isa.program import Program

#: what a predicate means: (register, comparison, sign, constant): ``p == (r cmp K)``
Meaning = tuple[int, str, str, int]
#: a state: (registers known nonzero, registers known non-negative as s32, predicate meanings)
State = tuple[frozenset[int], frozenset[int], dict[int, Meaning]]
EMPTY: State = (frozenset(), frozenset(), {})
_NEGATE = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
_MIRROR = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}


def _nonzero_src(x: object, nz: frozenset[int]) -> bool:
    return (isinstance(x, Imm) and x.v != 0) or (isinstance(x, R) and x.n in nz)


def _nonneg_src(x: object, nn: frozenset[int]) -> bool:
    return (isinstance(x, Imm) and not x.v >> 31) or (isinstance(x, R) and x.n in nn)


def _written(ins: MInstr, nz: frozenset[int], nn: frozenset[int],
             params: Mapping[int, int] | None = None) -> tuple[bool, bool]:
    """(nonzero, non-negative): what is known of the value ``ins`` writes; ``params``: the
    launch's scalar parameter words by byte offset (a ``ld.param`` of one is its word)."""
    op, xs = ins.op, ins.s
    word = param_word(ins, params)
    if word is not None:
        return word != 0, not word >> 31
    if op == "mov":
        return _nonzero_src(xs[0], nz), _nonneg_src(xs[0], nn)
    if op == "or":
        return any(_nonzero_src(x, nz) for x in xs), all(_nonneg_src(x, nn) for x in xs)
    if op == "and":
        return False, any(_nonneg_src(x, nn) for x in xs)
    if op == "shr" and ins.mod("sign") != "s":
        return False, isinstance(xs[1], Imm) and 1 <= xs[1].v < 32 or _nonneg_src(xs[0], nn)
    if op == "shr":
        return False, _nonneg_src(xs[0], nn)
    if op in ("max", "min") and len(xs) == 2:
        if ins.mod("sign") == "u":  # unsigned: max >= each operand, min <= each
            if op == "max":
                return any(_nonzero_src(x, nz) for x in xs), all(_nonneg_src(x, nn) for x in xs)
            return all(_nonzero_src(x, nz) for x in xs), any(_nonneg_src(x, nn) for x in xs)
        return False, (any if op == "max" else all)(_nonneg_src(x, nn) for x in xs)
    return False, False


def _transfer(ins: MInstr, st: State, params: Mapping[int, int] | None = None) -> State:
    """The facts after ``ins`` on its fall-through (before any edge refinement)."""
    nz, nn, pm = st
    if ins.op in ("call", "ret"):
        return EMPTY
    guarded = ins.guard is not None and ins.guard.n != PT
    new_nz, new_nn, new_pm = set(nz), set(nn), dict(pm)
    w_nz, w_nn = _written(ins, nz, nn, params)
    for d in ins.d:
        if isinstance(d, R):
            # a guarded write leaves the old value in some lanes: a fact must hold for both
            keep_nz = w_nz and (not guarded or d.n in nz)
            keep_nn = w_nn and (not guarded or d.n in nn)
            new_nz.discard(d.n)
            new_nn.discard(d.n)
            for p, m in list(new_pm.items()):
                if m[0] == d.n:
                    del new_pm[p]
            if keep_nz:
                new_nz.add(d.n)
            if keep_nn:
                new_nn.add(d.n)
        elif isinstance(d, P):
            new_pm.pop(d.n, None)
    if (ins.op == "setp" and not guarded and ins.mod("bop") is None and ins.d and isinstance(ins.d[0], P)
            and ins.mod("cmp") in _NEGATE):
        a, b = ins.s[0], ins.s[1]
        cmp, sign = ins.mod("cmp"), ins.mod("sign")
        if isinstance(a, R) and isinstance(b, Imm):
            new_pm[ins.d[0].n] = (a.n, cmp, sign, b.v)
        elif isinstance(b, R) and isinstance(a, Imm):
            new_pm[ins.d[0].n] = (b.n, _MIRROR[cmp], sign, a.v)
    return frozenset(new_nz), frozenset(new_nn), new_pm


def implied(cmp: str, sign: str, k: int) -> tuple[bool, bool]:
    """(nonzero, non-negative as s32) for every r with ``r cmp k`` (``sign``: s or u)."""
    if cmp == "eq":
        return k != 0, not k >> 31
    if cmp == "ne":
        return k == 0, False
    if sign == "s":
        v = k - (k >> 31 << 32)  # k as s32
        lower = {"ge": v, "gt": v + 1}.get(cmp)  # r >= lower
        upper = {"le": v, "lt": v - 1}.get(cmp)  # r <= upper
        if lower is not None:
            return lower >= 1, lower >= 0
        return upper is not None and upper <= -1, False
    lower = {"ge": k, "gt": k + 1}.get(cmp)
    upper = {"le": k, "lt": k - 1}.get(cmp)
    if lower is not None:
        return lower >= 1, False
    return False, upper is not None and upper < (1 << 31)


def _refine(st: State, guard: P, taken: bool) -> State:
    """``st`` on the edge where ``guard`` evaluated to ``taken``."""
    nz, nn, pm = st
    if guard.n not in pm:
        return st
    r, cmp, sign, k = pm[guard.n]
    p_value = taken != guard.neg  # the predicate register's own value on this edge
    z, n = implied(cmp if p_value else _NEGATE[cmp], sign, k)
    if not (z or n):
        return st
    return (nz | {r}) if z else nz, (nn | {r}) if n else nn, pm


def _edges(code: list[MInstr], pc: int, st: State) -> list[tuple[int, State]]:
    """(successor pc, facts on that edge) of row ``pc`` given the facts after it."""
    ins = code[pc]
    guard = ins.guard if ins.guard is not None and ins.guard.n != PT else None
    nxt = pc + 1
    if ins.op == "bra":
        if guard is None:
            return [(ins.target, st)]  # type: ignore[list-item]
        return [(ins.target, _refine(st, guard, True)), (nxt, _refine(st, guard, False))]  # type: ignore[list-item]
    if ins.op in ("exit", "trap", "ret"):
        return [] if guard is None else [(nxt, _refine(st, guard, False))]
    if ins.op == "call":  # the routine and the return point start from nothing known
        return [(ins.target, EMPTY), (nxt, EMPTY)]  # type: ignore[list-item]
    return [(nxt, st)]


def _meet(a: State, b: State) -> State:
    pm = {p: v for p, v in a[2].items() if b[2].get(p) == v}
    return a[0] & b[0], a[1] & b[1], pm


def known_facts(prog: Program, params: Mapping[int, int] | None = None) -> list[State | None]:
    """The facts holding before each row (None: no path reaches it); ``params``: the launch's
    scalar parameter words (``Options.param_words``), whose loads are known."""
    code = prog.code
    before: list[State | None] = [None] * (len(code) + 1)
    if not code:
        return before
    before[0] = EMPTY
    work = [0]
    while work:
        pc = work.pop()
        st = before[pc]
        if st is None or pc >= len(code):
            continue
        for succ, est in _edges(code, pc, _transfer(code[pc], st, params)):
            old = before[succ]
            new = est if old is None else _meet(old, est)
            if old is None or new != old:
                before[succ] = new
                work.append(succ)
    return before


def _never_true(prev: MInstr | None, g: P) -> bool:
    """Whether the guard ``g`` is false in every lane after ``prev``: ``prev`` an unguarded
    ``setp.eq``/``ne`` of two immediates (a constant divisor tested against zero) that writes it."""
    if (prev is None or prev.op != "setp" or prev.guard is not None or prev.mod("bop") is not None
            or not prev.d or prev.d[0] != P(g.n) or prev.mod("cmp") not in ("eq", "ne")
            or not all(isinstance(x, Imm) for x in prev.s[:2])):
        return False
    a, b = prev.s[0].v, prev.s[1].v  # type: ignore[union-attr]
    value = (a == b) == (prev.mod("cmp") == "eq")
    return value == g.neg


def drop_decided_zero_checks(prog: Program, params: Mapping[int, int] | None = None) -> Program:
    """``prog`` without the ``trap.divzero`` rows that cannot fire (and their dead ``setp``), and
    with ``nz`` on the divisions whose divisor is known nonzero; ``prog`` itself when none.
    ``params``: the launch's scalar parameter words (a divisor loaded from a nonzero one is known
    nonzero on every path after its load)."""
    from qwengpu.codegen.regalloc import rebuild

    code = prog.code
    facts = known_facts(prog, params)
    targets = {ins.target for ins in code if ins.op in ("bra", "call")}
    drop: set[int] = set()
    marks: dict[int, MInstr] = {}
    for pc, ins in enumerate(code):
        st = facts[pc]
        if st is None:
            continue
        nz, nn, pm = st
        g = ins.guard
        if (ins.op == "trap" and ins.mod("code") == "divzero" and g is not None and pc not in targets
                and _never_true(code[pc - 1] if pc else None, g)):
            drop.add(pc)  # a constant divisor (an immediate) tested against zero just before
        elif ins.op == "trap" and ins.mod("code") == "divzero" and g is not None and g.n in pm:
            r, cmp, _, k = pm[g.n]
            fires_on_zero = k == 0 and cmp == ("ne" if g.neg else "eq")
            if r in nz and fires_on_zero:  # fires when r == 0, which no lane here has
                drop.add(pc)
        if ins.op in ("idiv", "irem") and len(ins.s) > 1:
            a, b = ins.s[0], ins.s[1]
            new = {k: True for k, ok in (("nz", _nonzero_src(b, nz)), ("nna", _nonneg_src(a, nn)),
                                        ("nnb", _nonneg_src(b, nn))) if ok}
            if new:
                marks[pc] = replace(ins, m={**ins.m, **new})
    if not drop and not marks:
        return prog
    dropped_preds = {code[pc].guard.n for pc in drop}  # type: ignore[union-attr]
    still_read = {x.n for pc, ins in enumerate(code) if pc not in drop
                  for x in (*ins.s, ins.guard) if isinstance(x, P)}
    for pc, ins in enumerate(code):
        if (ins.op == "setp" and ins.d and isinstance(ins.d[0], P) and ins.d[0].n in dropped_preds
                and ins.d[0].n not in still_read and ins.guard is None):
            drop.add(pc)
    return rebuild(prog, [(pc, marks.get(pc, ins)) for pc, ins in enumerate(code) if pc not in drop])
