"""Register allocation: virtual registers of a lowered program -> r0..r31 and p0..p7.

Why this way: the register file is per-lane state the model must carry in its recurrent memory,
so the machine has a fixed 32 general and 8 predicate registers per thread. Allocation is
classic: liveness over the machine CFG (unstructured, with per-lane branches — each lane runs a
sequential path, so per-thread liveness is exact), an interference graph, move coalescing
(register ``mov`` and predicate copies: ``plop.and d, a, T`` and soft.py's ``setp.eq.and d, 0, 0,
a``) and Chaitin-Briggs colouring, biased towards the colour of a move partner that could not
be coalesced (the move then vanishes too; plain colouring when the bias costs a colour).
Values that do not fit are spilled to a per-thread spill area; if even that fails, the program
is refused with a ``MachineLimitError`` naming the registers needed.

SIMT-specific rules:
* a guarded (predicated) definition does not kill: lanes whose guard is false keep the old value;
  nor does a one-lane row (the ``lane`` modifier: the other three lanes keep theirs);
* a register that ``shfl`` reads from other lanes is *pinned*: it shares its physical register
  with nothing, so an inactive or exited lane still holds that register's last value, exactly as
  in the interpreter (whose registers are never reused);
* a cross-lane op's destination never shares a register with its sources (4-lane passes);
* a register read before any write on some path is zeroed at entry (the interpreter zeroes all).

Subroutines (``call d, L`` / ``ret a``, emitted by ``soft.py`` for shared expansions): a routine is
what is reachable from a call target without following calls (a call continues at pc + 1, a
``ret`` ends it); its return sites are the instructions after its call sites. Liveness follows
``ret`` to every return site, so a value live across any call of a routine is live throughout the
routine's body and never shares a register with its temporaries; a call site itself uses the
routine's summary (what the body reads before writing, and what it writes on every path), not
the entry's liveness, so a value live after one call site does not leak back to the other call
sites (context-sensitive at calls, no unrealizable paths). Routines may call routines (callees
are summarized first); recursion is refused. Link registers (written by ``call``) are never
spilled or rematerialized.
"""

from __future__ import annotations

from dataclasses import replace

from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import FALSE, PT, TRUE, Imm, MInstr, P, R
from qwengpu.isa.limits import LIMITS
from qwengpu.isa.program import Program

CROSS_LANE = ("shfl", "shflp", "vote", "ballot")


# ---------------------------------------------------------------------------------------------
# program surgery that keeps branch targets, PTX weights and ranges right
# ---------------------------------------------------------------------------------------------
AFTER = -2  # an inserted instruction that runs after the previous old one (jumps to the next skip it)


def rebuild(prog: Program, items: list[tuple[int, MInstr]]) -> Program:
    """New program from ``items``: (old pc, instruction), or (-1, instruction) inserted before the
    next old instruction (every path into that instruction runs it), or (AFTER, instruction)
    inserted after the previous old one. An old pc that disappears maps to the next survivor."""
    n_old = len(prog.code)
    new_code: list[MInstr] = []
    first_new: dict[int, int] = {}  # old pc -> new pc where its group starts
    pending: list[int] = []
    for old, ins in items:
        if old == AFTER:
            new_code.append(ins)
            continue
        pending.append(len(new_code))
        new_code.append(ins)
        if old >= 0:
            first_new[old] = pending[0]
            pending = []
    mapping = [0] * (n_old + 1)
    nxt = len(new_code)
    for pc in range(n_old, -1, -1):
        if pc in first_new:
            nxt = first_new[pc]
        mapping[pc] = nxt
    out = []
    for ins in new_code:
        ins = replace(ins, m=dict(ins.m))
        if ins.target is not None:
            ins.target = mapping[ins.target]
        out.append(ins)
    ranges = [(mapping[a], mapping[b]) for a, b in prog.ptx_ranges]
    return replace(prog, code=out, ptx_ranges=ranges)


# ---------------------------------------------------------------------------------------------
# liveness
# ---------------------------------------------------------------------------------------------
def _regs(xs: tuple, cls: type) -> list[int]:
    return [x.n for x in xs if isinstance(x, cls) and not (cls is P and x.n == PT)]


def _local_successors(code: list[MInstr]) -> list[list[int]]:
    """Control flow within one routine (or the kernel): a ``call`` continues at pc + 1 (the
    routine returns there), a ``ret`` leaves (a guarded one also falls through)."""
    n = len(code)
    succ: list[list[int]] = []
    for pc, ins in enumerate(code):
        s: list[int] = []
        if ins.op == "bra":
            s.append(ins.target)  # type: ignore[arg-type]
            if ins.guard is not None and pc + 1 < n:
                s.append(pc + 1)
        elif ins.op in ("exit", "ret") and ins.guard is None:
            pass
        elif pc + 1 < n:
            s.append(pc + 1)
        succ.append(s)
    return succ


class CallGraph:
    """The subroutines of a program: ``body[t]`` the pcs of the routine entered at ``t`` (what is
    reachable from t without following calls), ``sites[t]`` its call pcs, ``rets[t]`` its ``ret``
    pcs, ``order`` the entries with callees before callers, ``ret_to[r]`` the return sites (pc + 1
    of every call site) of a ``ret`` at pc r."""

    def __init__(self, code: list[MInstr]) -> None:
        n = len(code)
        local = _local_successors(code)
        self.sites: dict[int, list[int]] = {}
        for pc, ins in enumerate(code):
            if ins.op == "call":
                self.sites.setdefault(ins.target, []).append(pc)  # type: ignore[arg-type]
        self.body: dict[int, list[int]] = {}
        self.rets: dict[int, list[int]] = {}
        callees: dict[int, set[int]] = {}
        self.ret_to: dict[int, list[int]] = {}
        for t in self.sites:
            seen = {t}
            todo = [t]
            while todo:
                pc = todo.pop()
                for q in local[pc]:
                    if q not in seen:
                        seen.add(q)
                        todo.append(q)
            body = sorted(x for x in seen if x < n)
            self.body[t] = body
            self.rets[t] = [pc for pc in body if code[pc].op == "ret"]
            callees[t] = {code[pc].target for pc in body if code[pc].op == "call"}  # type: ignore[misc]
            for r in self.rets[t]:
                self.ret_to.setdefault(r, []).extend(c + 1 for c in self.sites[t] if c + 1 < n)
        self.order: list[int] = []
        state: dict[int, int] = {}

        def visit(t: int, path: tuple[int, ...]) -> None:
            if state.get(t) == 2:
                return
            if state.get(t) == 1:
                raise ValueError(
                    f"recursive subroutine call (entries {path + (t,)}): routines may not recurse"
                )
            state[t] = 1
            for u in sorted(callees[t]):
                visit(u, path + (t,))
            state[t] = 2
            self.order.append(t)

        for t in sorted(self.sites):
            visit(t, ())


def successors(code: list[MInstr]) -> list[list[int]]:
    """The machine CFG: a ``call`` goes to its routine's entry (and pc + 1 when guarded), a ``ret``
    to every return site of its routine."""
    succ = _local_successors(code)
    if not any(ins.op in ("call", "ret") for ins in code):
        return succ
    cg = CallGraph(code)
    n = len(code)
    for pc, ins in enumerate(code):
        if ins.op == "call":
            succ[pc] = [ins.target, *([pc + 1] if ins.guard is not None and pc + 1 < n else [])]  # type: ignore[list-item]
        elif ins.op == "ret":
            succ[pc] = sorted(set(cg.ret_to.get(pc, [])) | set(succ[pc]))
    return succ


def use_def(ins: MInstr, cls: type) -> tuple[set[int], set[int], set[int]]:
    """(uses, killing defs, all defs) of one class of registers."""
    uses = set(_regs(ins.s, cls))
    if cls is P and ins.guard is not None and ins.guard.n != PT:
        uses.add(ins.guard.n)
    defs = set(_regs(ins.d, cls))
    if ins.op == "call":
        return uses, defs, defs  # the link: lanes that do not call never read their old one
    if not _partial(ins):
        return uses, defs, defs
    # a predicated (or one-lane) write keeps the other lanes' value: the old value flows through
    return uses | defs, set(), defs


def _partial(ins: MInstr) -> bool:
    """Whether ``ins`` writes only some lanes: a guard, or a one-lane row (``lane``)."""
    return ins.guard is not None or ins.mod("lane") is not None


def _lane_of(ins: MInstr) -> dict:
    """``{"lane": k}`` of a one-lane row (for the code that stands in for it), else ``{}``."""
    k = ins.mod("lane")
    return {} if k is None else {"lane": k}


def _same_guard(a: MInstr, b: MInstr) -> bool:
    """Whether ``b`` runs in exactly the lanes ``a`` writes: the same guard (predicate and sense; a
    one-lane row's guard may be none) and the same lane."""
    if a.mod("lane") != b.mod("lane"):
        return False
    ga, gb = a.guard, b.guard
    if ga is None or gb is None:
        return ga is gb and a.mod("lane") is not None
    return ga.n == gb.n and ga.neg == gb.neg


def _guarded_scans(code: list[MInstr], cls: type) -> dict[tuple[int, int], int]:
    """{(pc, register): end pc} for the guarded writes a covering may apply to (``_covered``).

    From a guarded write ``@g d = ...`` (not a ``call``), forward within its basic block: every
    read of ``d`` before an unguarded write of it must carry the same guard ``g`` (same predicate,
    same sense), ``g`` must not be rewritten in between, and a guarded rewrite of ``d`` must carry
    ``g`` too. The scan ends at an unguarded write of ``d`` (end = -1: nothing left to check), or
    at the block's end or ``g``'s rewrite (end = that pc: ``d`` must then be dead after it).
    Registers a cross-lane op reads are left out (other lanes read them whatever their guard)."""
    n = len(code)
    leaders: set[int] = set()
    for pc, ins in enumerate(code):
        if ins.op in ("bra", "call") and ins.target is not None:
            leaders.add(ins.target)  # type: ignore[arg-type]
        if ins.op == "call":
            leaders.add(pc + 1)
    cross = {v for ins in code if ins.op in CROSS_LANE for v in _regs(ins.s, cls)}
    stops = ("bra", "call", "ret", "exit", "bar", "trap")
    out: dict[tuple[int, int], int] = {}
    for pc, ins in enumerate(code):
        g = ins.guard
        if not _partial(ins) or g is not None and g.n == PT or ins.op == "call" or ins.op in CROSS_LANE:
            continue
        for d in _regs(ins.d, cls):
            if d in cross or (cls is P and g is not None and d == g.n):
                continue
            end: int | None = pc if ins.op in stops or pc + 1 in leaders or pc + 1 >= n else None
            q = pc + 1
            while end is None:
                x = code[q]
                reads = d in _regs(x.s, cls) or (cls is P and x.guard is not None and x.guard.n == d)
                if reads and not _same_guard(ins, x) or x.op == "call":
                    break
                if d in _regs(x.d, cls):
                    if not _partial(x):
                        end = -1
                        break
                    if not _same_guard(ins, x):
                        break
                rewrites_g = g is not None and g.n in _regs(x.d, P)
                if rewrites_g or x.op in stops or q + 1 in leaders or q + 1 >= n:
                    end = q
                    break
                q += 1
            if end is not None:
                out[(pc, d)] = end
    return out


def _covered(code: list[MInstr], cls: type, scans: dict[tuple[int, int], int], solve) -> dict[int, int]:
    """{pc: registers} of the guarded writes whose pass-through value no lane reads: the lanes
    whose guard is false keep the old value, but (``_guarded_scans``) every later read of the
    register in the block carries the same guard, and the register is dead where the block ends;
    by induction over such writes no lane ever reads the value it kept. Such a write is then a
    kill for liveness (the old value is not live into it), so a register written only under the
    guard it is read under is not zeroed at entry (an atomic's lane loop) and its live range is
    shorter. The greatest fixed point: start from every candidate, drop those whose register is
    live after the end of their scan, until none changes. ``solve(covered) -> (live_in, live_out)``."""
    cov: dict[int, int] = {}
    for (pc, d), _ in scans.items():
        cov[pc] = cov.get(pc, 0) | 1 << d
    while True:
        _, lo = solve(cov)
        new: dict[int, int] = {}
        for (pc, d), end in scans.items():
            if (cov.get(pc, 0) >> d) & 1 and (end < 0 or not (lo[end] >> d) & 1):
                new[pc] = new.get(pc, 0) | 1 << d
        if new == cov:
            return cov
        cov = new


def liveness(code: list[MInstr], cls: type) -> tuple[list[int], list[int]]:
    """live-in and live-out bitsets (Python ints) per pc (subroutines: see the module docstring);
    a guarded write that ``_covered`` proves no lane reads through counts as a kill."""
    use_b0 = []
    kill_b0 = []
    for ins in code:
        u, k, _ = use_def(ins, cls)
        use_b0.append(sum(1 << x for x in u))
        kill_b0.append(sum(1 << x for x in k))
    scans = _guarded_scans(code, cls)
    if not scans:
        return _liveness(code, use_b0, kill_b0)
    # what a covered write reads: its sources and (predicates) its guard, not its old value
    src_b = [sum(1 << x for x in _regs(ins.s, cls)) | (
        1 << ins.guard.n if cls is P and ins.guard is not None and ins.guard.n != PT else 0) for ins in code]

    def solve(cov: dict[int, int]) -> tuple[list[int], list[int]]:
        use_b = list(use_b0)
        kill_b = list(kill_b0)
        for pc, m in cov.items():
            use_b[pc] = (use_b[pc] & ~m) | (src_b[pc] & m)  # the old value no longer flows through
            kill_b[pc] |= m
        return _liveness(code, use_b, kill_b)

    return solve(_covered(code, cls, scans, solve))


def _liveness(code: list[MInstr], use_b: list[int], kill_b: list[int]) -> tuple[list[int], list[int]]:
    """Backward liveness of one register class from per-pc use and kill bitsets."""
    n = len(code)
    live_in = [0] * n
    live_out = [0] * n
    if not any(ins.op in ("call", "ret") for ins in code):
        _solve(code, list(range(n)), _local_successors(code), use_b, kill_b, {}, live_in, live_out)
        return live_in, live_out
    cg = CallGraph(code)
    local = _local_successors(code)
    summary: dict[int, tuple[int, int]] = {}  # entry -> (read before written, written on every path)
    full = (1 << max(1, max((x.bit_length() for x in (*use_b, *kill_b)), default=1))) - 1
    for t in cg.order:  # callees first
        body = cg.body[t]
        li = [0] * n
        lo = [0] * n
        _solve(code, body, local, use_b, kill_b, summary, li, lo)
        summary[t] = (li[t], _must_define(code, t, body, local, kill_b, summary, cg.rets[t], full))
    succ = [list(x) for x in local]
    for r, sites in cg.ret_to.items():
        succ[r] = sorted(set(succ[r]) | set(sites))
    _solve(code, list(range(n)), succ, use_b, kill_b, summary, live_in, live_out)
    return live_in, live_out


def _solve(
    code: list[MInstr],
    pcs: list[int],
    succ: list[list[int]],
    use_b: list[int],
    kill_b: list[int],
    summary: dict[int, tuple[int, int]],
    live_in: list[int],
    live_out: list[int],
) -> None:
    """Backward liveness over ``pcs`` (in place); a ``call`` to a summarized routine passes what
    is live after it through the routine, minus what the routine always writes, plus what it reads."""
    n = len(code)
    order = sorted(pcs, reverse=True)
    changed = True
    while changed:
        changed = False
        for pc in order:
            ins = code[pc]
            if ins.op == "call" and ins.target in summary:
                ue, md = summary[ins.target]  # type: ignore[index]
                after = live_in[pc + 1] if pc + 1 < n else 0
                out = ue | (after & ~md)
                if ins.guard is not None:
                    out |= after
            else:
                out = 0
                for s in succ[pc]:
                    out |= live_in[s]
            inn = use_b[pc] | (out & ~kill_b[pc])
            if out != live_out[pc] or inn != live_in[pc]:
                live_out[pc] = out
                live_in[pc] = inn
                changed = True


def _must_define(
    code: list[MInstr],
    entry: int,
    body: list[int],
    succ: list[list[int]],
    kill_b: list[int],
    summary: dict[int, tuple[int, int]],
    rets: list[int],
    full: int,
) -> int:
    """Registers a routine writes (unguarded) on every path from its entry to a ``ret``."""
    inside = set(body)
    preds: dict[int, list[int]] = {pc: [] for pc in body}
    for pc in body:
        for q in succ[pc]:
            if q in inside:
                preds[q].append(pc)
    dout = {pc: full for pc in body}
    changed = True
    while changed:
        changed = False
        for pc in body:
            inn = 0
            if pc != entry:
                inn = full
                for q in preds[pc]:
                    inn &= dout[q]
            out = inn | kill_b[pc]
            ins = code[pc]
            if ins.op == "call" and ins.guard is None and ins.target in summary:
                out |= summary[ins.target][1]  # type: ignore[index]
            if out != dout[pc]:
                dout[pc] = out
                changed = True
    md = full
    for r in rets:
        inn = 0
        if r != entry:
            inn = full
            for q in preds[r]:
                inn &= dout[q]
        md &= inn
    return md if rets else full


def _bits(x: int) -> list[int]:
    out = []
    while x:
        low = x & -x
        out.append(low.bit_length() - 1)
        x ^= low
    return out


# ---------------------------------------------------------------------------------------------
# colouring
# ---------------------------------------------------------------------------------------------
def _interference(code: list[MInstr], cls: type, nvirt: int, pinned: set[int]) -> tuple[list[set[int]], list]:
    _, live_out = liveness(code, cls)
    adj: list[set[int]] = [set() for _ in range(nvirt)]
    moves = []
    for pc, ins in enumerate(code):
        defs = _regs(ins.d, cls)
        if not defs:
            continue
        out = live_out[pc]
        skip = -1
        if cls is R and ins.op == "mov" and isinstance(ins.s[0], R) and ins.guard is None:
            skip = ins.s[0].n
            moves.append((ins.d[0].n, skip, pc))
        if cls is P and _pred_copy(ins) is not None:
            skip = _pred_copy(ins).n  # type: ignore[union-attr]
            moves.append((ins.d[0].n, skip, pc))
        live = _bits(out)
        for d in defs:
            for v in live:
                if v != d and v != skip:
                    adj[d].add(v)
                    adj[v].add(d)
        if ins.op in CROSS_LANE:
            for d in defs:
                for v in _regs(ins.s, cls):
                    if v != d:
                        adj[d].add(v)
                        adj[v].add(d)
    for p in pinned:
        for v in range(nvirt):
            if v != p:
                adj[p].add(v)
                adj[v].add(p)
    # the moves a branch jumps over to skip a call (a cold path's copies in and out of a shared
    # routine, ``softfloat._or_slow_path``) are coalesced last: a hot path's move comes first
    cold = _skipped_call_regions(code)
    return adj, [m for _, m in sorted(enumerate(moves), key=lambda im: (im[1][2] in cold, im[0]))]


def _skipped_call_regions(code: list[MInstr]) -> set[int]:
    """The pcs strictly between a guarded forward branch and its target when a ``call`` lies
    there: the path the branch skips (a slow path's routine call and its copies)."""
    out: set[int] = set()
    for pc, ins in enumerate(code):
        t = ins.target
        if ins.op == "bra" and ins.guard is not None and isinstance(t, int) and t > pc + 1:
            if any(code[q].op == "call" for q in range(pc + 1, t)):
                out.update(range(pc + 1, t))
    return out


def _pred_copy(ins: MInstr) -> P | None:
    """The predicate an unguarded predicate copy ``d = a`` copies (``plop.and d, a, T``, or the
    ``setp.eq.and d, 0, 0, a`` of soft.py's sequences), else None."""
    if ins.guard is not None or len(ins.d) != 1 or not isinstance(ins.d[0], P):
        return None
    if ins.op == "plop" and ins.m.get("bop") == "and" and ins.s[1] == TRUE:
        a = ins.s[0]
    elif (
        ins.op == "setp"
        and ins.m.get("bop") == "and"
        and ins.m.get("cmp") == "eq"
        and len(ins.s) == 3
        and ins.s[0] == Imm(0)
        and ins.s[1] == Imm(0)
    ):
        a = ins.s[2]
    else:
        return None
    return a if isinstance(a, P) and not a.neg and a.n != PT else None


def _color(
    adj: list[set[int]], nodes: list[int], k: int, partners: dict[int, set[int]] | None = None
) -> dict[int, int] | None:
    """Chaitin-Briggs simplify/select with optimistic colouring; None when some node gets no colour.
    ``partners``: move-related nodes that could not be coalesced; a node takes a free colour of
    an already coloured partner when there is one (biased colouring: the move then vanishes)."""
    deg = {v: len(adj[v] & set(nodes)) for v in nodes}
    remaining = set(nodes)
    stack = []
    while remaining:
        low = [v for v in remaining if deg[v] < k]
        v = min(low, key=lambda x: (deg[x], x)) if low else max(remaining, key=lambda x: (deg[x], -x))
        stack.append(v)
        remaining.discard(v)
        for u in adj[v]:
            if u in remaining:
                deg[u] -= 1
    color: dict[int, int] = {}
    for v in reversed(stack):
        used = {color[u] for u in adj[v] if u in color}
        pref = sorted({color[u] for u in (partners or {}).get(v, ()) if u in color} - used)
        c = pref[0] if pref else next((c for c in range(k) if c not in used), None)
        if c is None:
            return None
        color[v] = c
    return color


def _allocate_class(
    code: list[MInstr], cls: type, nvirt: int, k: int, pinned: set[int], coalesce: str
) -> tuple[dict[int, int] | None, int]:
    adj, moves = _interference(code, cls, nvirt, pinned if cls is R else set())
    used = set()
    for ins in code:
        used.update(_regs(ins.d, cls))
        used.update(_regs(ins.s, cls))
        if cls is P and ins.guard is not None:
            used.add(ins.guard.n)
    # coalescing: union-find over move-related, non-interfering pairs
    parent = list(range(nvirt))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    if coalesce != "none":
        for d, s, _ in moves:
            a, b = find(d), find(s)
            if a == b or b in adj[a] or a in pinned or b in pinned:
                continue
            if coalesce == "conservative":
                merged = adj[a] | adj[b]
                if sum(1 for u in merged if len(adj[u]) >= k) >= k:
                    continue
            parent[b] = a
            for u in adj[b]:
                adj[u].discard(b)
                adj[u].add(a)
                adj[a].add(u)
            adj[b] = set()
    nodes = sorted({find(v) for v in used})
    partners: dict[int, set[int]] = {}
    for d, s, _ in moves:
        a, b = find(d), find(s)
        if a != b and b not in adj[a]:
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
    color = _color(adj, nodes, k, partners) if partners else None
    if color is None:  # the bias can cost an optimistic colour: plain colouring then
        color = _color(adj, nodes, k)
    maxlive = _max_live(code, cls)
    if color is None:
        return None, maxlive
    return {v: color[find(v)] for v in used}, maxlive


def _max_live(code: list[MInstr], cls: type) -> int:
    live_in, live_out = liveness(code, cls)
    best = 0
    for pc in range(len(code)):
        best = max(best, bin(live_in[pc]).count("1"), bin(live_out[pc]).count("1"))
    return best


def _entry_reads(code: list[MInstr]) -> int:
    """The registers some lane may read before writing them (a bitset). A one-lane row (``lane``)
    writes only its lane, so plain liveness lets every other lane's old value flow through it and
    an atomic's turns (``ld r0`` in lane 0, ..., in lane 3) look read before written. Seen one lane
    at a time, a row of that lane is a whole write and a row of another lane touches nothing: a
    register read only after its lane's own row wrote it needs no zero at entry."""
    if not any(ins.mod("lane") is not None for ins in code):
        return liveness(code, R)[0][0]
    reads = 0
    for j in range(4):
        mine = [ins if ins.mod("lane") is None
                else replace(ins, m={k: v for k, v in ins.m.items() if k != "lane"}) if ins.mod("lane") == j
                else MInstr("mov", (), (), ptx=ins.ptx) for ins in code]
        reads |= liveness(mine, R)[0][0]
    return reads


def _zero_init(prog: Program) -> Program:
    """Zero the registers a lane may read before writing them (the interpreter zeroes all)."""
    items: list[tuple[int, MInstr]] = []
    if not prog.code:
        return prog
    li_p, _ = liveness(prog.code, P)
    for v in _bits(_entry_reads(prog.code)):
        items.append((-1, MInstr("mov", (R(v),), (Imm(0),), ptx=prog.code[0].ptx)))
    for v in _bits(li_p[0]):
        items.append((-1, MInstr("plop", (P(v),), (FALSE, TRUE), {"bop": "and"}, ptx=prog.code[0].ptx)))
    if not items:
        return prog
    items += list(enumerate(prog.code))
    return rebuild(prog, items)


# ---------------------------------------------------------------------------------------------
# rematerialization and spilling
# ---------------------------------------------------------------------------------------------
def _remat_def(ins: MInstr) -> bool:
    """A definition that can be recomputed anywhere: an immediate, a constant-bank word, a
    special register (per-thread constants)."""
    if _partial(ins):
        return False
    if ins.op == "mov" and isinstance(ins.s[0], Imm):
        return True
    if ins.op == "s2r" and ins.m.get("sr") != "clock":
        return True
    return ins.op == "ld" and ins.m.get("space") == "param" and isinstance(ins.s[0], Imm)


def _rename(ins: MInstr, old: int, new: int, srcs: bool, dsts: bool) -> MInstr:
    def f(x: object) -> object:
        return R(new) if isinstance(x, R) and x.n == old else x

    return replace(
        ins,
        d=tuple(f(x) for x in ins.d) if dsts else ins.d,
        s=tuple(f(x) for x in ins.s) if srcs else ins.s,
        m=dict(ins.m),
    )


def _split(prog: Program, v: int, remat: MInstr | None) -> Program:
    """Shorten v's live range to single instructions: recompute it before each use (remat), or
    keep it in a spill slot (store after each definition, load before each use)."""
    slot = prog.spill_words
    nr = prog.nregs
    items: list[tuple[int, MInstr]] = []
    for pc, ins in enumerate(prog.code):
        uses = any(isinstance(x, R) and x.n == v for x in ins.s) or (
            _partial(ins) and any(isinstance(x, R) and x.n == v for x in ins.d)
        )
        defs = any(isinstance(x, R) and x.n == v for x in ins.d)
        if remat is not None and defs:
            continue  # v's only definition: recomputed at each use instead
        cur = ins
        if uses:
            t = nr
            nr += 1
            if remat is not None:
                items.append((-1, replace(remat, d=(R(t),), m=dict(remat.m), ptx=ins.ptx)))
            else:
                items.append(
                    (
                        -1,
                        MInstr(
                            "ld",
                            (R(t),),
                            (Imm(0),),
                            {"space": "spill", "size": 4, "off": 4 * slot},
                            ptx=ins.ptx,
                        ),
                    )
                )
            cur = _rename(cur, v, t, True, _partial(ins))
            if defs and _partial(ins):
                items.append((pc, cur))
                items.append(
                    (
                        AFTER,
                        MInstr(
                            "st",
                            (),
                            (Imm(0), R(t)),
                            {"space": "spill", "size": 4, "off": 4 * slot, **_lane_of(ins)},
                            ins.guard,
                            ptx=ins.ptx,
                        ),
                    )
                )
                continue
        if defs:
            t = nr
            nr += 1
            cur = _rename(cur, v, t, False, True)
            items.append((pc, cur))
            items.append(
                (
                    AFTER,
                    MInstr(
                        "st",
                        (),
                        (Imm(0), R(t)),
                        {"space": "spill", "size": 4, "off": 4 * slot},
                        ins.guard,
                        ptx=ins.ptx,
                    ),
                )
            )
            continue
        items.append((pc, cur))
    out = rebuild(prog, items)
    return replace(out, nregs=nr, spill_words=slot + (remat is None))


def _split_pred(prog: Program, v: int) -> Program:
    """Keep predicate v in a general register as 0/1 (the machine has 8 predicates, 32 registers):
    after each definition ``sel r, 1, 0, t`` (guarded like the definition, so lanes that do not
    write keep r), before each use ``setp t', r, 0, ne``. Why not memory: a register costs one
    instruction per definition and use, and the GPR allocator may still spill it."""
    r = prog.nregs
    np_ = prog.npreds

    def ren(x: object, old: int, new: int) -> object:
        if isinstance(x, P) and x.n == old:
            return P(new, x.neg)
        return x

    items: list[tuple[int, MInstr]] = []
    for pc, ins in enumerate(prog.code):
        uses = any(isinstance(x, P) and x.n == v for x in ins.s) or (
            ins.guard is not None and ins.guard.n == v
        )
        defs = any(isinstance(x, P) and x.n == v for x in ins.d)
        cur = ins
        if uses:
            t = np_
            np_ += 1
            reload = MInstr("setp", (P(t),), (R(r), Imm(0)), {"cmp": "ne", "sign": "u"}, ptx=ins.ptx)
            items.append((-1, reload))
            g = ren(cur.guard, v, t) if cur.guard is not None else None
            cur = replace(cur, s=tuple(ren(x, v, t) for x in cur.s), guard=g, m=dict(cur.m))  # type: ignore[arg-type]
        if defs:
            t = np_
            np_ += 1
            cur = replace(cur, d=tuple(ren(x, v, t) for x in cur.d), m=dict(cur.m))
            items.append((pc, cur))
            items.append((AFTER, MInstr("sel", (R(r),), (Imm(1), Imm(0), P(t)), _lane_of(cur), cur.guard,
                                        ptx=ins.ptx)))
            continue
        items.append((pc, cur))
    out = rebuild(prog, items)
    return _zero_init(replace(out, nregs=r + 1, npreds=np_))


def _pred_victim(prog: Program, fresh: set[int]) -> int | None:
    """The predicate with the longest live range per use (not one a call or cross-lane op defines)."""
    _, lo = liveness(prog.code, P)
    span = [0] * prog.npreds
    for x in lo:
        for v in _bits(x):
            span[v] += 1
    nuse = [0] * prog.npreds
    bad: set[int] = set()
    for ins in prog.code:
        for x in (*ins.s, ins.guard):
            if isinstance(x, P) and x.n != PT:
                nuse[x.n] += 1
        if ins.op in ("call", "ret"):
            bad.update(x.n for x in (*ins.d, *ins.s) if isinstance(x, P))
    best = None
    for v in range(prog.npreds):
        if v in fresh or v in bad or span[v] < 3:
            continue
        score = span[v] / (nuse[v] + 1)
        if best is None or score > best[0]:
            best = (score, v)
    return None if best is None else best[1]


def _choose_victim(prog: Program, fresh: set[int]) -> tuple[int, MInstr | None] | None:
    """The register whose splitting frees the most: long live range, few uses; cheap remat first."""
    li, lo = liveness(prog.code, R)
    span = [0] * prog.nregs
    for x in lo:
        for v in _bits(x):
            span[v] += 1
    defs: dict[int, list[MInstr]] = {}
    nuse = [0] * prog.nregs
    for ins in prog.code:
        for x in ins.d:
            if isinstance(x, R):
                defs.setdefault(x.n, []).append(ins)
        for x in ins.s:
            if isinstance(x, R):
                nuse[x.n] += 1

    def remat_of(v: int, depth: int = 0) -> MInstr | None:
        d = defs.get(v, [])
        if len(d) != 1 or depth > 8:
            return None
        if _remat_def(d[0]):
            return d[0]
        if d[0].op == "mov" and d[0].guard is None and isinstance(d[0].s[0], R):  # look through copies
            return remat_of(d[0].s[0].n, depth + 1)
        return None

    best = None
    for v in range(prog.nregs):
        if v in fresh or v in prog.pinned or span[v] < 3 or v not in defs:
            continue
        if any(x.op == "call" for x in defs[v]):
            continue  # a link register: its spill store would run only after the routine returned
        d = defs[v]
        remat = remat_of(v)
        cost = nuse[v] if remat is not None else 2 * (nuse[v] + len(d))
        score = span[v] / (cost + 1) * (4 if remat is not None else 1)
        if best is None or score > best[0]:
            best = (score, v, remat)
    return None if best is None else (best[1], best[2])


# ---------------------------------------------------------------------------------------------
# cleanups before allocation
# ---------------------------------------------------------------------------------------------
KEEP = ("st", "atom", "trap", "bar", "exit", "bra", "call", "ret")  # effects beyond their destinations


def propagate_constants(prog: Program, rounds: int = 8) -> Program:
    """A register whose only definition is ``mov r, imm`` is replaced by the immediate at its uses
    (not as a shuffle's source: other lanes may read it before they wrote it), repeated while that
    makes new ones: a copy of a constant (``mov r8, r23`` after ``mov r23, 16``: PTX's ``mov
    %r8, %ntid.x`` once the launch pass made ntid an immediate) is a constant too, so a multiply by
    ``blockDim.x`` becomes a multiply by a number (a shift) instead of a general product."""
    for _ in range(rounds):
        out = _propagate_once(prog)
        if out is prog:
            return prog
        prog = out
    return prog


def _propagate_once(prog: Program) -> Program:
    """One round of :func:`propagate_constants`; ``prog`` itself when nothing changes."""
    defs: dict[int, list[MInstr]] = {}
    for ins in prog.code:
        for x in ins.d:
            if isinstance(x, R):
                defs.setdefault(x.n, []).append(ins)
    const: dict[int, Imm] = {}
    for v, ds in defs.items():
        d0 = ds[0]
        if (
            len(ds) == 1
            and d0.op == "mov"
            and d0.guard is None
            and isinstance(d0.s[0], Imm)
            and v not in prog.pinned
        ):
            const[v] = d0.s[0]
    if not const or not prog.code:
        return prog
    live_in, _ = liveness(prog.code, R)
    const = {v: c for v, c in const.items() if not (live_in[0] >> v) & 1}
    out = []
    changed = False
    for ins in prog.code:
        srcs = tuple(
            const[x.n] if isinstance(x, R) and x.n in const and not (ins.op == "shfl" and k == 0) else x
            for k, x in enumerate(ins.s)
        )
        changed |= srcs != ins.s
        out.append(replace(ins, s=srcs, m=dict(ins.m)) if srcs != ins.s else ins)
    return replace(prog, code=out) if changed else prog


def eliminate_dead_code(prog: Program) -> Program:
    """Drop instructions whose only effect is writing registers nobody reads (memory loads stay:
    they can fault, except constant-bank reads)."""
    while True:
        _, lo_r = liveness(prog.code, R)
        _, lo_p = liveness(prog.code, P)
        items: list[tuple[int, MInstr]] = []
        removed = False
        for pc, ins in enumerate(prog.code):
            bank = ins.op == "ld" and ins.m.get("space") == "param" and isinstance(ins.s[0], Imm)
            pure = ins.op not in KEEP and (ins.op != "ld" or bank)
            dead = all(
                not ((lo_r[pc] if isinstance(x, R) else lo_p[pc]) >> x.n) & 1
                and not (isinstance(x, R) and x.n in prog.pinned)  # other lanes may read it (shfl)
                for x in ins.d
            )
            if pure and ins.d and dead:
                removed = True
                continue
            items.append((pc, ins))
        if not removed:
            return prog
        prog = rebuild(prog, items)


def limit_immediates(prog: Program, max_imms: int) -> Program:
    """Materialize immediates beyond ``max_imms`` per instruction into registers (``mov``), for
    decoders with fewer immediate fields (the ISA itself allows one per operand)."""
    nr = prog.nregs
    items: list[tuple[int, MInstr]] = []
    for pc, ins in enumerate(prog.code):
        imms = [k for k, x in enumerate(ins.s) if isinstance(x, Imm)]
        if ins.op in ("ld", "st", "atom") and imms and imms[0] == 0:
            imms = imms[1:]  # an immediate address is the address field, not an operand
        srcs = list(ins.s)
        for k in imms[max_imms:] if len(imms) > max_imms else []:
            items.append((-1, MInstr("mov", (R(nr),), (srcs[k],), ptx=ins.ptx)))
            srcs[k] = R(nr)
            nr += 1
        items.append((pc, replace(ins, s=tuple(srcs), m=dict(ins.m)) if srcs != list(ins.s) else ins))
    return replace(rebuild(prog, items), nregs=nr)


def allocate(
    prog: Program,
    k_regs: int | None = None,
    k_preds: int | None = None,
    spill: bool = True,
    max_immediates: int | None = None,
) -> Program:
    """Allocate registers (rematerializing constants and spilling to per-thread slots when 32 do
    not suffice, unless ``spill`` is off); refuse with MachineLimitError when the kernel does not fit."""
    kr = LIMITS.registers if k_regs is None else k_regs
    kp = LIMITS.predicates if k_preds is None else k_preds
    prog = _zero_init(prog)
    prog = eliminate_dead_code(propagate_constants(prog))
    if max_immediates is not None:
        prog = limit_immediates(prog, max_immediates)
    rmap = pmap = None
    need_p = 0
    # too many live predicates: keep some in general registers as 0/1 (before the GPRs are coloured)
    pfresh: set[int] = set()
    while spill:
        if any(_allocate_class(prog.code, P, prog.npreds, kp, set(), mode)[0] is not None
               for mode in ("aggressive", "conservative", "none")):
            break
        v = _pred_victim(prog, pfresh)
        if v is None:
            break
        before = prog.npreds
        prog = _split_pred(prog, v)
        pfresh |= set(range(before, prog.npreds))
    need_r = _max_live(prog.code, R)
    fresh: set[int] = set()
    while True:
        for mode in ("aggressive", "conservative", "none"):
            rmap, _ = _allocate_class(prog.code, R, prog.nregs, kr, prog.pinned, mode)
            if rmap is not None:
                break
        if rmap is not None:
            break
        victim = _choose_victim(prog, fresh) if spill else None
        if victim is None or (victim[1] is None and prog.spill_words >= LIMITS.writable_words):
            raise MachineLimitError(
                f"kernel {prog.name} needs {max(need_r, kr + 1)} registers after allocation; the machine has "
                f"{kr} (at most {need_r} values are live at once; spilling did not make it fit)"
            )
        before = prog.nregs
        prog = _split(prog, victim[0], victim[1])
        fresh |= set(range(before, prog.nregs))
    code = prog.code
    for mode in ("aggressive", "conservative", "none"):
        pmap, need_p = _allocate_class(code, P, prog.npreds, kp, set(), mode)
        if pmap is not None:
            break
    if pmap is None:
        raise MachineLimitError(
            f"kernel {prog.name} needs {max(need_p, kp + 1)} predicate registers after allocation; "
            f"the machine has {kp}"
        )

    def mr(x: object) -> object:
        if isinstance(x, R):
            return R(rmap[x.n])  # type: ignore[index]
        if isinstance(x, P) and x.n != PT:
            return P(pmap[x.n], x.neg)  # type: ignore[index]
        return x

    items: list[tuple[int, MInstr]] = []
    for pc, ins in enumerate(code):
        new = MInstr(
            ins.op,
            tuple(mr(x) for x in ins.d),
            tuple(mr(x) for x in ins.s),
            dict(ins.m),
            mr(ins.guard) if ins.guard is not None else None,
            ins.target,
            ins.ptx,
        )  # type: ignore[arg-type]
        if new.op == "mov" and new.s[0] == new.d[0]:
            continue  # coalesced move
        if _pred_copy(new) is not None and _pred_copy(new) == new.d[0]:
            continue  # coalesced predicate copy
        items.append((pc, new))
    out = rebuild(prog, items)
    nregs = 1 + max((x.n for ins in out.code for x in (*ins.d, *ins.s) if isinstance(x, R)), default=-1)
    npreds = 1 + max(
        (x.n for ins in out.code for x in (*ins.d, *ins.s, ins.guard) if isinstance(x, P) and x.n != PT),
        default=-1,
    )
    pinned = {rmap[v] for v in prog.pinned if v in rmap}
    return replace(out, nregs=nregs, npreds=npreds, allocated=True, pinned=pinned)
