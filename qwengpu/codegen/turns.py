"""Blocks of more than 64 threads that wait at block barriers: each machine thread takes V of the
block's threads in turn.

Why: the machine holds 64 threads at once (their registers and scheduler rows are its state). A
block without barriers runs as parts, machine blocks one after another (``softmem.block_parts``);
a block that waits at ``bar.sync`` cannot, since every thread must reach the barrier before any
passes it. So a block of N = M * V threads (N a multiple of 32; M = 64, or 32 when N / 32 is odd)
runs as ONE machine block of M threads, and machine thread t plays V *logical* threads, one after
another between barriers:

* logical warp ``j * V + k`` is machine warp j in turn k, so the logical thread of machine thread
  t in turn k is ``((t >> 5) * V + k) << 5 | (t & 31)``. Its 4 x index (the address unit of every
  per-thread word) is kept in a per-machine-thread word, ``LT4``; the kernel's ``tid`` and
  ``warpid`` are read from it (``softmem._linear_index``), as are the addresses of its local
  memory and its shuffle shadows (``softmem._thread4``).
* a barrier becomes: store the registers and predicates live after it (exact liveness,
  ``regalloc.liveness``) and the barrier's number to the logical thread's own words, then go to
  the SWITCH; resuming there (the switch jumps to the barrier's RESUME code) loads them back. An
  ``exit`` marks the logical thread done and goes to the switch.
* the SWITCH (at the end of the program) moves to the next turn: a fresh thread starts at the
  kernel's first instruction (registers it reads before writing zeroed: never-written registers
  read 0), a waiting one resumes at its barrier, a done one is skipped. After the last turn the
  machine thread waits at the machine's barrier (``bar``) and starts again at turn 0, or exits when
  all its logical threads are done.

Exactness (the same bits as the interpreter, atomics included): the interpreter runs the warps of
a block round-robin, each until all its live lanes wait at a barrier or have exited, in warp
order. Here machine warp 0 runs its turns 0..V-1 (logical warps 0..V-1) each until every lane has
reached the switch, then machine warp 1 (logical warps V..2V-1), and so on: the same warps in the
same order between the same barriers. The switch lies above every kernel instruction, so the
machine's min-PC scheduling runs every lane still in turn k before any lane leaves it: lanes of
a warp change turns together (the same reconvergence the interpreter's min-PC scheduler gives at
the barrier). Within a turn the program is the kernel's own code in its own order.

Cost: per barrier and logical thread, a store and a load per live value plus ~12 instructions of
switch; memory: 3 words per machine thread and (1 + live values) words per logical thread
(``Turns.words``), below the machine's other regions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from qwengpu.codegen.regalloc import liveness
from qwengpu.codegen.softcore import Fresh, Seq
from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import PT, Imm, MInstr, P, R
from qwengpu.isa.program import Program
from qwengpu.simt.memory import GLOBAL_BASE

WARP = 32
DONE = 0xFFFFFFFF  # a logical thread's resume word once it exited (0: not started, i + 1: barrier i)
STEP = 4 * WARP  # LT4 from one turn to the next (the next logical warp's thread)


@dataclass(frozen=True)
class Turns:
    """Where a block taken in turns keeps its bookkeeping (gmem words)."""

    v: int  # logical threads per machine thread (turns)
    m: int  # machine threads per block (32 or 64)
    base: int  # LT4[m], LIM4[m], ALIVE[m], then RESUME[n] (one per logical thread)
    save_base: int = 0  # saved values: word s of logical thread u at save_base + s * n + u
    save_words: int = 0  # values saved per logical thread (the most live at any barrier)

    @property
    def n(self) -> int:
        """Logical threads per block."""
        return self.m * self.v

    @property
    def fixed_words(self) -> int:
        return 3 * self.m + self.n

    @property
    def lt_off(self) -> int:
        return 4 * self.base

    @property
    def lim_off(self) -> int:
        return 4 * (self.base + self.m)

    @property
    def alive_off(self) -> int:
        return 4 * (self.base + 2 * self.m)

    @property
    def res_off(self) -> int:
        return 4 * (self.base + 3 * self.m)

    def save_off(self, s: int) -> int:
        return 4 * (self.save_base + s * self.n)


def split(nthreads: int) -> tuple[int, int]:
    """(machine threads M, turns V) of a block of ``nthreads`` (> 64) that waits at barriers."""
    if nthreads % WARP:
        raise MachineLimitError(
            f"the launch has {nthreads} threads per block and its kernel waits at block barriers: the "
            f"machine holds 64 threads at once and runs a larger block as whole warps taking turns, "
            f"so it needs a multiple of {WARP} threads"
        )
    w = nthreads // WARP
    m = 2 if w % 2 == 0 else 1
    return WARP * m, w // m


def _ld(s: Seq, addr: R, off: int, d: R | None = None) -> R:
    m = {"size": 4, "sign": "u", "space": "global", "amode": "z", "base": GLOBAL_BASE, "off": off}
    if d is None:
        return s.op("ld", addr, **m)
    return s.into(d, "ld", addr, **m)


def _st(s: Seq, addr: R, off: int, val: R | Imm) -> None:
    s.emit("st", (), (addr, val), size=4, space="global", amode="z", base=GLOBAL_BASE, off=off)


def machine4(s: Seq) -> R:
    """4 x the machine's thread index."""
    return s.op("shl", s.op("s2r", sr="tid.x"), Imm(2))


def logical4(s: Seq, t: Turns) -> R:
    """4 x the logical thread index (the thread the machine thread plays in this turn)."""
    return _ld(s, machine4(s), t.lt_off)


def first4(s: Seq, t: Turns) -> R:
    """4 x the logical thread index of turn 0 (then + 128 per turn)."""
    tid = s.op("s2r", sr="tid.x")
    hi = s.op("shr", tid, Imm(5))
    hi = s.op("shl", hi, Imm(t.v.bit_length() - 1)) if t.v & (t.v - 1) == 0 else s.op("mul", hi, Imm(t.v))
    b = s.op("or", s.op("shl", hi, Imm(5)), s.op("and", tid, Imm(WARP - 1)))
    return s.op("shl", b, Imm(2))


def _bits(x: int) -> list[int]:
    return [i for i in range(x.bit_length()) if (x >> i) & 1]


#: integer ops a value may be recomputed with after a barrier instead of saved
_ALU = frozenset({"mov", "add", "sub", "shl", "shr", "and", "or", "xor", "not"})
_SPECIALS = frozenset({"tid.x", "ctaid.x", "laneid"})  # the machine's: the same in every turn
REMAT_MAX = 6  # instructions at most in one value's chain (copies not counted)


def _recipes(code: list[MInstr], t: Turns, live_in: int) -> dict[int, list[MInstr]]:
    """{register: the instructions that recompute it} for registers defined once, unguarded, by a
    short chain of integer ops over constants, the machine's special registers, parameter-bank
    words and the turn's own thread word (``LT4``): their value is the same wherever they are
    live, in every turn of the same logical thread, so after a barrier they are recomputed
    instead of saved (the thread index, parameters, addresses derived from them)."""
    defs: dict[int, list[MInstr]] = {}
    for ins in code:
        for d in ins.d:
            if isinstance(d, R):
                defs.setdefault(d.n, []).append(ins)
    out: dict[int, list[MInstr] | None] = {}

    def leaf(ins: MInstr) -> bool:
        if ins.op == "s2r":
            return ins.mod("sr") in _SPECIALS
        if ins.op != "ld":
            return False
        if ins.mod("space") == "param":
            return all(isinstance(x, Imm) for x in ins.s)
        return ins.mod("space") == "global" and ins.mod("base") == GLOBAL_BASE and ins.mod("off") == t.lt_off

    def recipe(r: int, depth: int) -> list[MInstr] | None:
        if r in out:
            return out[r]
        out[r] = None  # (a cycle: not recomputable)
        ds = defs.get(r, [])
        if len(ds) != 1 or (live_in >> r) & 1 or depth > REMAT_MAX:
            return None
        ins = ds[0]
        if ins.guard is not None or len(ins.d) != 1 or any(isinstance(x, P) for x in ins.s):
            return None
        if not (ins.op in _ALU or leaf(ins)):
            return None
        if ins.op == "mov" and isinstance(ins.s[0], R):  # a copy: the source's chain, into r
            sub = recipe(ins.s[0].n, depth)
            if sub is None:
                return None
            out[r] = sub[:-1] + [replace(sub[-1], d=(R(r),))]
            return out[r]
        chain: list[MInstr] = []
        for x in ins.s:
            if isinstance(x, R):
                sub = recipe(x.n, depth + 1)
                if sub is None:
                    return None
                chain += [c for c in sub if c not in chain]
        chain.append(ins)
        if len(chain) > REMAT_MAX:
            return None
        out[r] = chain
        return chain

    res: dict[int, list[MInstr]] = {}
    for r in defs:
        c = recipe(r, 0)
        if c is not None:
            res[r] = c
    return res


def _recompute(s: Seq, fr: Fresh, regs: list[int], remat: dict[int, list[MInstr]], t: Turns,
               lt: R) -> None:
    """Recompute ``regs`` (each into itself) from their chains, sharing what the chains share;
    the turn's thread word is ``lt``, already loaded."""
    have: dict[int, R] = {}
    want = set(regs)

    def value(c: MInstr, dst: int) -> None:
        if c.op == "ld" and c.mod("space") == "global":  # the turn's thread word (LT4)
            have[dst] = lt
            return
        src = []
        for x in c.s:
            if isinstance(x, R):
                if x.n not in have:
                    value(next(i for i in chain if i.d[0].n == x.n), x.n)
                src.append(have[x.n])
            else:
                src.append(x)
        d = R(dst) if dst in want else fr.r()
        s.emit(c.op, (d,), tuple(src), None, **dict(c.m))
        have[dst] = d

    for r in regs:
        chain = remat[r]
        if r not in have:
            value(chain[-1], r)
        elif have[r] != R(r):
            s.emit("mov", (R(r),), (have[r],))
            have[r] = R(r)


class _Builder:
    """The new code of :func:`turns_pass`: instructions, branches to named labels, label pcs."""

    def __init__(self, prog: Program, t: Turns) -> None:
        self.t = t
        self.fr = Fresh(prog)
        self.code: list[MInstr] = []
        self.labels: dict[str, int] = {}  # name -> new pc
        self.fix: list[tuple[int, str]] = []  # (new pc of a branch, label name)

    def add(self, s: Seq, ptx: int = -1) -> None:
        self.code += [replace(ins, ptx=ptx) for ins in s.code]

    def bra(self, name: str, guard: P | None = None) -> None:
        self.fix.append((len(self.code), name))
        self.code.append(MInstr("bra", guard=guard, target=-1))

    def place(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def copy(self, ins: MInstr, target: str | None) -> None:
        self.code.append(replace(ins, m=dict(ins.m)))
        if target is not None:
            self.fix.append((len(self.code) - 1, target))

    def setup(self) -> None:
        """Every machine thread: its logical threads not started, turn -1, all alive."""
        t, s = self.t, Seq(self.fr)
        a, b4 = machine4(s), first4(s, self.t)
        for k in range(t.v):
            _st(s, b4, t.res_off + STEP * k, Imm(0))
        _st(s, a, t.lim_off, s.op("add", b4, Imm(STEP * t.v)))
        _st(s, a, t.lt_off, s.op("sub", b4, Imm(STEP)))
        _st(s, a, t.alive_off, Imm(t.v))
        self.add(s)
        self.bra("switch")

    def barrier(self, pc: int, ins: MInstr, i: int, regs: list[int], preds: list[int], again: list[int],
                remat: dict[int, list[MInstr]]) -> None:
        """Barrier ``i``: save, to the switch; its resume code: restore and recompute."""
        t = self.t
        if ins.guard is not None and ins.guard.n != PT:  # lanes whose guard is false pass it
            self.bra(f"after{pc}", ins.guard.inv())
        s = Seq(self.fr)
        lt = logical4(s, t)
        _st(s, lt, t.res_off, Imm(i + 1))
        for k, r in enumerate(regs):
            _st(s, lt, t.save_off(k), R(r))
        for k, p in enumerate(preds):
            _st(s, lt, t.save_off(len(regs) + k), s.sel(Imm(1), Imm(0), P(p)))
        self.add(s, ins.ptx)
        self.bra("switch")
        self.place(f"resume{i}")
        s = Seq(self.fr)
        lt = logical4(s, t)
        for k, r in enumerate(regs):
            _ld(s, lt, t.save_off(k), R(r))
        for k, p in enumerate(preds):
            s.setp_into(P(p), "ne", _ld(s, lt, t.save_off(len(regs) + k)), Imm(0))
        _recompute(s, self.fr, again, remat, t, lt)
        self.add(s, ins.ptx)
        self.place(f"after{pc}")

    def exit(self, pc: int, ins: MInstr) -> None:
        """The logical thread is done: marked, one fewer alive, to the switch."""
        t = self.t
        if ins.guard is not None and ins.guard.n != PT:
            self.bra(f"after{pc}", ins.guard.inv())
        s = Seq(self.fr)
        a = machine4(s)
        _st(s, _ld(s, a, t.lt_off), t.res_off, Imm(DONE))
        _st(s, a, t.alive_off, s.op("sub", _ld(s, a, t.alive_off), Imm(1)))
        self.add(s, ins.ptx)
        self.bra("switch")
        self.place(f"after{pc}")

    def switch(self, nbars: int, fresh_r: list[int], fresh_p: list[int]) -> None:
        """The next turn: a fresh thread (``fresh_r``/``fresh_p``, what it reads before writing,
        zeroed), a barrier's resume, or a done thread skipped; after the last turn the machine's
        barrier and turn 0 again, or the exit when every logical thread is done."""
        t = self.t
        self.place("switch")
        s = Seq(self.fr)
        a = machine4(s)
        lt = s.op("add", _ld(s, a, t.lt_off), Imm(STEP))
        _st(s, a, t.lt_off, lt)
        last = s.setp("ge", lt, _ld(s, a, t.lim_off))
        self.add(s)
        self.bra("phase", last)
        s = Seq(self.fr)
        res = _ld(s, lt, t.res_off)
        p0 = s.setp("eq", res, Imm(0))
        self.add(s)
        self.bra("fresh", p0)
        for i in range(nbars):
            s = Seq(self.fr)
            pi = s.setp("eq", res, Imm(i + 1))
            self.add(s)
            self.bra(f"resume{i}", pi)
        self.bra("switch")  # done: the next turn
        self.place("fresh")
        s = Seq(self.fr)
        for r in fresh_r:
            s.emit("mov", (R(r),), (Imm(0),))
        for p in fresh_p:
            s.setp_into(P(p), "ne", Imm(0), Imm(0))
        self.add(s)
        self.bra("entry")
        self.place("phase")
        s = Seq(self.fr)
        a2 = machine4(s)
        s.emit("exit", guard=s.setp("eq", _ld(s, a2, t.alive_off), Imm(0)))
        _st(s, a2, t.lt_off, s.op("sub", _ld(s, a2, t.lim_off), Imm(STEP * (t.v + 1))))
        s.emit("bar")
        self.add(s)
        self.bra("switch")


def turns_pass(prog: Program, t: Turns, entry: int, low: int) -> tuple[Program, Turns]:
    """The program with barriers and exits taken in turns (module docstring). ``entry``: the pc of
    the kernel's first instruction (after the launch prologue, which runs once per machine
    thread); ``low``: the lowest gmem word of the machine's regions so far (the saved values go
    below it). Works on virtual registers, before expansion. Returns the program and ``t`` with
    the saved values placed (``save_base`` may be negative: the caller refuses the launch)."""
    code = prog.code
    if any(x.op in ("call", "ret") for x in code):  # (routines come later, in the expansion)
        raise ValueError("turns_pass runs before routines exist")
    li_r, lo_r = liveness(code, R)
    li_p, lo_p = liveness(code, P)
    bars = [pc for pc, x in enumerate(code) if x.op == "bar" and pc >= entry]
    remat = _recipes(code, t, li_r[entry])
    saved = {pc: ([r for r in _bits(lo_r[pc]) if r not in remat], [b for b in _bits(lo_p[pc]) if b != PT])
             for pc in bars}
    nsave = max((len(r) + len(p) for r, p in saved.values()), default=0)
    t = replace(t, save_words=nsave, save_base=low - nsave * t.n)
    b = _Builder(prog, t)
    old2new = [0] * (len(code) + 1)
    for pc, ins in enumerate(code):
        old2new[pc] = len(b.code)
        if pc == entry:  # the prologue's branch lands here: every machine thread sets its turns up
            b.setup()
            b.place("entry")
        if pc < entry:  # the launch prologue (its branch to the kernel now runs the set-up)
            b.copy(ins, None if ins.target is None else f"old{ins.target}")
        elif ins.op == "bar":
            again = [r for r in _bits(lo_r[pc]) if r in remat]
            b.barrier(pc, ins, bars.index(pc), *saved[pc], again, remat)
        elif ins.op == "exit":
            b.exit(pc, ins)
        elif ins.op == "s2r" and ins.mod("sr") == "warpid":  # the kernel's warp: the logical one
            s = Seq(b.fr)
            s.into(ins.d[0], "shr", logical4(s, t), Imm(7), guard=ins.guard)
            b.add(s, ins.ptx)
        else:
            tgt = None if ins.target is None else "entry" if ins.target == entry else f"old{ins.target}"
            b.copy(ins, tgt)
    old2new[len(code)] = len(b.code)
    b.switch(len(bars), _bits(li_r[entry]), [p for p in _bits(li_p[entry]) if p != PT])
    new = b.code
    for at, name in b.fix:
        tgt = old2new[int(name[3:])] if name.startswith("old") else b.labels[name]
        new[at] = replace(new[at], target=tgt)
    ranges = [(old2new[x], old2new[y]) for x, y in prog.ptx_ranges]
    return replace(prog, code=new, nregs=b.fr.nr, npreds=b.fr.np, ptx_ranges=ranges), t
