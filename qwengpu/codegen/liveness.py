"""Dead results of a register-allocated machine program: which writes no later instruction reads.

Why: every machine instruction that writes a register or predicate makes the model emit the value
as tokens (SHORT / USHORT, three chunks per lane, uniform chunks, the predicate chunk) so the early
layers can commit it; when no instruction can read the value before it is overwritten or the thread
exits, those tokens are wasted. ``runtime.engine.encode_program`` sets the ROM row's ``nowb`` bit
for such an instruction and the circuit then emits no result for it (``machine.circuit.emit``).

Exactness: calling a live value dead corrupts the run, so the analysis is exact-conservative:

* per thread: registers and predicates are per lane, and no machine instruction the weights run
  reads another lane's registers (shuffles, votes and reductions are lowered through shadow memory
  before ``encode_program``: ``codegen/softmem.py``, ``lowering/warp.py``); a program that still
  holds a cross-lane op (``regalloc.CROSS_LANE``) gets no dead result at all;
* branches (guarded ones fall through too), ``call``/``ret`` routines shared by call sites
  (``regalloc.CallGraph``: a ``ret`` returns to every call site's pc + 1; a call site uses the
  routine's summary: what it reads before writing, what it writes on every path), the link
  register (written by ``call``, read by ``ret``);
* a guarded write does not kill (lanes whose guard is false keep the old value), and the old value
  is live into it exactly when the register is live after it; nor does a one-lane row (a
  ``lane`` modifier: ``fmulf``'s four rows, an atomic's turns; the other lanes keep theirs);
* ``exit``: the machine's registers persist across blocks (the next block's thread runs on the
  same register file rows, from pc 0), so what is live into pc 0 is live at every ``exit`` (and
  after the last instruction); ``trap`` and ``bar`` fall through like any instruction;
* the host reads no register value except through instructions: ``engine.BoundsWatch`` forms
  ld/st addresses from the registers those instructions read (live by their own read).
"""

from __future__ import annotations

from qwengpu.codegen.regalloc import CROSS_LANE, CallGraph, _local_successors, _must_define, _regs, _solve
from qwengpu.isa.instr import PT, MInstr, P, R


def _use_kill(ins: MInstr, cls: type) -> tuple[int, int]:
    """(uses, kills) bitsets of one class: a guarded write kills nothing and reads nothing extra
    (regalloc's ``use_def`` counts it as a use, which allocation needs but liveness does not)."""
    uses = set(_regs(ins.s, cls))
    if cls is P and ins.guard is not None and ins.guard.n != PT:
        uses.add(ins.guard.n)
    defs = set(_regs(ins.d, cls))
    # ``call``: the link is written by the calling lanes only; lanes that do not call never read
    # their old link (links are written only by calls and read only by ``ret``), as in regalloc
    partial = ins.guard is not None or ins.mod("lane") is not None
    kills = defs if (not partial or ins.op == "call") else set()
    return sum(1 << u for u in uses), sum(1 << k for k in kills)


def live_out(code: list[MInstr], cls: type) -> list[int]:
    """Per pc, the registers (``R``) or predicates (``P``) of class ``cls`` that some later
    instruction may read (a bitset), with calls, shared routines and block restarts followed."""
    n = len(code)
    if not n:
        return []
    ub_kb = [_use_kill(ins, cls) for ins in code]
    use_b = [u for u, _ in ub_kb]
    kill_b = [k for _, k in ub_kb]
    restart = 0
    local = _local_successors(code)
    # the instructions where a thread stops (the next block starts it again at pc 0)
    ends = [pc for pc, ins in enumerate(code) if ins.op == "exit" or pc == n - 1]
    while True:
        ub = list(use_b)
        for pc in ends:
            ub[pc] |= restart
        li, lo = [0] * n, [0] * n
        if any(ins.op in ("call", "ret") for ins in code):
            cg = CallGraph(code)
            summary: dict[int, tuple[int, int]] = {}
            full = (1 << max(1, max((x.bit_length() for x in (*ub, *kill_b)), default=1))) - 1
            for t in cg.order:  # callees first
                bli, blo = [0] * n, [0] * n
                _solve(code, cg.body[t], local, ub, kill_b, summary, bli, blo)
                md = _must_define(code, t, cg.body[t], local, kill_b, summary, cg.rets[t], full)
                summary[t] = (bli[t], md)
            succ = [list(x) for x in local]
            for r, sites in cg.ret_to.items():
                succ[r] = sorted(set(succ[r]) | set(sites))
            _solve(code, list(range(n)), succ, ub, kill_b, summary, li, lo)
        else:
            _solve(code, list(range(n)), local, ub, kill_b, {}, li, lo)
        if li[0] | restart == restart:
            break
        restart |= li[0]
    # an ``exit`` (or the last instruction) hands what pc 0 reads to the next block
    for pc in ends:
        lo[pc] |= restart
    return lo


def dead_results(code: list[MInstr]) -> list[bool]:
    """Per pc: the instruction writes a register or predicate and no instruction can read any of its
    destinations afterwards (on any path of any thread, in this block or a later one)."""
    if any(ins.op in CROSS_LANE for ins in code):
        return [False] * len(code)
    lo_r, lo_p = live_out(code, R), live_out(code, P)
    out = []
    for pc, ins in enumerate(code):
        dsts = [x for x in ins.d if isinstance(x, (R, P)) and not (isinstance(x, P) and x.n == PT)]
        dead = bool(dsts) and len(dsts) == len(ins.d) and all(
            not ((lo_r[pc] if isinstance(x, R) else lo_p[pc]) >> x.n) & 1 for x in dsts
        )
        out.append(dead)
    return out
