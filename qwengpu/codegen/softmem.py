"""Lowering for the weights: memory spaces, atomics, sub-word stores, warp ops and 2-D/3-D launches.

The circuit in the weights (``circuit.py``) has ONE memory, ``gmem``: G 32-bit words (16,384 on the
2B shape, 2,048 on the test shape: ``MachineShape.gmem_words``), word
addressed (a 4-byte ``ld``/``st`` reads/writes the word containing ``address + off``), shared by
every thread of the launch; blocks run one after another, warps one at a time (a warp runs until
all its lanes wait at a barrier or exited). Its special registers are the linear thread index
in the block (``tid``), ``laneid``, ``warpid`` and the linear block index (``ctaid``). This module
lowers everything else of the machine ISA that touches memory, other lanes or the launch shape
onto that, as host-side sequences of ``soft.WEIGHT_OPS``:

* **shared memory** -> gmem words ``[shared_base, G)`` at the top of gmem (``shared_base = G - S``
  for S words, S <= 3G/4, so it always lies in [G/4, G); the launch's buffers and the
  machine's other regions must fit below it): the access becomes a global one
  with ``base = GLOBAL_BASE + 4 * shared_base + base``. Blocks run one after another, so one region
  serves all of them; the interpreter starts every block with zeroed shared memory plus the
  static initializers (``layout.shared_init``). The program therefore starts with a PROLOGUE in
  which warp 0 (which always runs first in a block, and runs until its first barrier or exit)
  clears the region and stores the initializer words; other warps branch over it. With one block
  the clearing is skipped (gmem beyond the launch's buffers starts zeroed), initializers are not.
* **local memory** (``.local`` arrays, ``callparam``) -> a per-thread region laid out *transposed*:
  word k of thread t is gmem word ``local_base + k * NT + t`` (NT = the block's thread count
  rounded up to a power of two), so an address is ``4 * tid + 4 * local_base + offset * NT``:
  two instructions (``s2r tid``, ``shl``) plus a shift for a register offset. Cleared per thread
  in the prologue when the launch has more than one block (the interpreter zeroes it per block).
* **allocator spills** -> the same transposed layout below the other regions: after allocation,
  when the program spills, it is re-allocated with 31 registers and ``r31 = 4 * tid`` is set at
  entry (the spill slot address is ``r31 + const``). Spill slots are always written before they
  are read (the allocator zero-initializes live-in values and stores them), so they need no
  clearing.
* **atomics** (``atom``/``red``: every aop, u32/s32/b32/f32): lane-serialised read-modify-write in
  the interpreter's lane order: iteration k (a count uniform over the warp) serves the lane whose
  ``laneid`` is k, which does its ld/op/st, then leaves the loop (the loop runs to the highest
  active lane; the uniform count costs one token per lane group, a per-lane one a token per lane).
  Each lane gets its own old value. f32 add emits ``fadd.rn.ftz`` (the interpreter's model),
  f32 min/max ``fmin/fmax``: the float expander (softfloat.py) expands them.
* **sub-word stores** (``st`` size 1/2, every space): the same loop around a read-modify-write of
  the containing word (the load keeps ``chk`` = size, so bounds and alignment are checked as for
  the original store), so lanes writing bytes of one word keep each other's bytes.
* **shfl / shflp**: the interpreter's ``shfl`` reads the source lane's register *whatever that
  lane is doing* (inactive, exited: its last value). Every register a ``shfl`` reads gets a
  SHADOW region (one word per thread slot of every warp, ``32 * nwarps`` words): after every
  definition of the register a store of the new value to the thread's word, with the
  definition's guard. ``shfl`` then computes the source lane (clamp/segment rules exactly as
  ``sim._shfl_lanes``) and loads the source lane's shadow word. Never-written shadows are zero,
  like never-written registers (cleared in the prologue for blocks after the first; padding
  lanes of a partial warp are never written). ``shflp`` is pure arithmetic.
* **vote any/all/uni, ballot**: over the ACTIVE lanes (those executing it with a true guard). A
  per-thread slot region (zero outside vote sequences) and a per-lane-group partial region:
  active lanes store their contribution (ballot: ``1 << laneid``; votes: counts packed as
  ``#a << 16 | #b``), every lane of a 4-lane group sums the group's 4 slots and stores the sum as
  the group's partial (groups with no active lane are never written: 0), every lane sums the
  warp's 8 partials, then the active lanes clear their slot and partial again. Inactive lanes'
  slots are 0, so they cannot count. Straight-line (all active lanes run it in lock step: a
  machine instruction is executed by all its lanes before the next one).
* **blocks of more than 64 threads** (``block_parts``): the machine holds 64 threads at once; a
  block of up to 1,024 threads of a kernel without block barriers runs as ``parts`` consecutive
  machine blocks of ``nthreads / parts`` threads (whole warps when the kernel uses warp
  operations or shared memory). The kernel's linear indices come from the machine's:
  ``ctaid = ctaid_m / parts``, ``tid = tid_m + (ctaid_m % parts) * threads`` (``_linear_index``);
  the per-thread regions below are sized and indexed by the machine's threads, since the parts
  run one after another. A block with ``bar.sync`` must fit 64 threads (refused by name).
* **2-D/3-D launches and launch constants**: the program is run as a 1-D launch of
  ``nthreads`` threads and ``nblocks`` blocks (the circuit's linear indices; x fastest, as the
  interpreter linearises). ``s2r tid.x`` of the expanded program is the linear thread index,
  ``s2r ctaid.x`` the linear block index; ``tid.{x,y,z}`` and ``ctaid.{x,y,z}`` of the kernel
  become divisions/remainders of them by launch constants (shifts for powers of two, multiply by
  a reciprocal checked exhaustively for the < 64 possible values otherwise), ``ntid``,
  ``nctaid``, ``nwarpid``, ``dynamic_smem_size``, ``total_smem_size`` become immediates,
  ``lanemask_*`` two instructions over ``laneid``.

All of this needs the launch (``MemPlan``): ``lower_for_weights(prog, grid, block, dynamic_shared)``
plans the memory, rewrites the specials and adds the prologue, runs ``soft.expand_for_weights``
with ``MemOptions(plan=...)`` (the expanders here read ``fr.opts.plan``), adds the shadow stores,
allocates and maps spills. Launch constants and other single-``mov`` constants are propagated
into their uses BEFORE the expansion (a multiply by ``ntid.x`` is a multiply by a constant).
Without a plan (plain ``soft.expand_for_weights``) only atomics and ``shflp`` are expanded (they
need no layout); shared/local accesses, sub-word stores and warp ops stay (the plain simulator
checks a sub-word store's bounds by bytes, the expanded store by words).

Costs (machine instructions; ``bench/weights_census.py`` for whole kernels): an atomic or a
sub-word store is 3 + (3 + op) per lane up to the highest active lane (add: 6/lane, ~195 for a
full warp; a byte store 7/lane); a shared access 0 extra, a local one 2 (4 at a register offset);
``shfl`` ~9 plus 3 per definition of its source; a vote/ballot ~35 (straight line).

Layout of gmem (words), top down: shared ``[G - S, G)``; local ``NT * local_words``;
one shadow region per shfl source (``32 * nwarps`` each); the vote slots (``32 * nwarps``) and
partials (``8 * nwarps``); the spill slots (``NT * spill_words``); the launch's buffers (the
arena) must end below all of that (``MemPlan.check_arena``, refused with a MachineLimitError
naming the sizes).

Checking: ``simulate_weights`` / ``run_weights`` run the result on the ISA simulator as the 1-D
launch the circuit runs, with global memory extended by a buffer over the machine's own regions,
so shared/local/shadow/vote memory persists across blocks exactly as gmem does in the weights
(the prologue's clearing is exercised) and stray accesses outside the regions still fault.

Deviations (faulty programs only; the weights do not detect memory faults): shared/local
accesses out of their bounds are not reported by the simulator of the expanded program (they land
in other regions); an atomic's fault is reported as a load; a misaligned 4-byte local access at a
register offset is not reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

# softfloat/softfloat64: imported for their registration (the launch pipeline below expands floats too)
from qwengpu.codegen import softcore, softfloat, softfloat64  # noqa: F401
from qwengpu.codegen.regalloc import AFTER, CROSS_LANE, rebuild
from qwengpu.codegen.rowfold import drop_identity_ops, fold_constant_rows
from qwengpu.codegen.softcore import EXPANDERS, Fresh, Options, Routine, Seq, call, expand_one, expander
from qwengpu.codegen.turns import STEP, Turns, first4, logical4, turns_pass
from qwengpu.codegen.turns import split as split_turns
from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import FALSE, LANE_OPS, PT, SR, TRUE, Imm, MInstr, P, R
from qwengpu.isa.limits import LIMITS, shared_words_for
from qwengpu.isa.program import Program, local_words_used
from qwengpu.simt.memory import GLOBAL_BASE

M32 = 0xFFFFFFFF
WARP = 32
MAPPED = ("shared", "local", "callparam")  # spaces this module maps into gmem
LAUNCH_SPECIALS = (
    "tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
    "nctaid.x", "nctaid.y", "nctaid.z", "nwarpid", "lanemask_eq", "lanemask_lt", "lanemask_le",
    "lanemask_ge", "lanemask_gt", "dynamic_smem_size", "total_smem_size",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the plan: where everything lives in gmem
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemPlan:
    """The launch and the gmem layout (words) of the machine's own regions for one program."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int
    gmem_words: int
    shared_bytes: int  # per block, as the interpreter sizes it (static + dynamic)
    static_shared: int
    shared_base: int  # first word of the shared region (gmem_words when there is none)
    shared_init: tuple[tuple[int, int], ...]  # (shared word, nonzero value)
    tstride: int  # NT: thread slots per transposed per-thread word (power of two >= nthreads)
    local_words: int
    local_base: int
    shadows: tuple[tuple[int, int], ...]  # (vreg read by shfl, region base); 32 * nwarps words each
    vote_base: int | None  # per-thread vote slots (32 * nwarps words)
    part_base: int | None  # per-lane-group partial sums (8 * nwarps words)
    low: int  # lowest word of the machine's regions (before spills)
    spill_words: int = 0
    spill_base: int | None = None
    parts: int = 1  # machine blocks per launch block (``block_parts``): one after another
    turns: Turns | None = None  # a block with barriers taken in turns (``codegen.turns``)

    @property
    def nthreads(self) -> int:
        """Threads per block of the launch (the kernel's ``ntid``)."""
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def nblocks(self) -> int:
        """Blocks of the launch (the kernel's ``nctaid``)."""
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads(self) -> int:
        """Threads per machine block (``NTHREADS``): the launch's block, or one part of it, or the
        machine threads that take a block's threads in turns."""
        return self.turns.m if self.turns is not None else self.nthreads // self.parts

    @property
    def lthreads(self) -> int:
        """The kernel's threads one machine block runs (``threads`` unless taken in turns)."""
        return self.nthreads // self.parts

    @property
    def mblocks(self) -> int:
        """Blocks the machine runs (``NBLOCKS``): every part of every block of the launch."""
        return self.nblocks * self.parts

    @property
    def nwarps(self) -> int:
        """Warps of a machine block (the per-warp regions are indexed by the machine's thread)."""
        return -(-self.threads // WARP)

    @property
    def wstride(self) -> int:
        return WARP * self.nwarps

    @property
    def shared_words(self) -> int:
        return (self.shared_bytes + 3) // 4

    @property
    def bottom(self) -> int:
        """Lowest gmem word the machine's own regions use (the arena must end at or below it)."""
        return self.low if self.spill_base is None else self.spill_base

    def shadow(self, vreg: int) -> int | None:
        return dict(self.shadows).get(vreg)

    def regions(self) -> list[tuple[str, int, int]]:
        """(name, first word, words) of every region, top down."""
        out = []
        if self.shared_words:
            out.append(("shared", self.shared_base, self.gmem_words - self.shared_base))
        if self.local_words:
            out.append(("local", self.local_base, self.local_words * self.tstride))
        for v, b in self.shadows:
            out.append((f"shfl shadow of %r{v}", b, self.wstride))
        if self.vote_base is not None:
            out.append(("vote slots", self.vote_base, self.wstride))
            out.append(("vote partials", self.part_base, self.wstride // 4))  # type: ignore[arg-type]
        if self.turns is not None:
            t = self.turns
            out.append(("turns", t.base, t.fixed_words))
            if t.save_words:
                out.append(("values saved at barriers", t.save_base, t.save_words * t.n))
        if self.spill_base is not None:
            out.append(("spill slots", self.spill_base, self.spill_words * self.tstride))
        return out

    def describe(self) -> str:
        return ", ".join(f"{n} {w} words at {b}" for n, b, w in self.regions()) or "none"

    def check_arena(self, arena_words: int) -> None:
        """Refuse a launch whose buffers overlap the machine's own regions."""
        if arena_words > self.bottom and not self.regions():  # nothing of its own: memory itself is short
            raise MachineLimitError(
                f"the launch's buffers need {arena_words} words of global memory; the machine in the "
                f"weights has {self.gmem_words}"
            )
        if arena_words > self.bottom:
            raise MachineLimitError(
                f"the launch's buffers need {arena_words} words of global memory, but the machine in "
                f"the weights keeps words {self.bottom}..{self.gmem_words - 1} for its own regions "
                f"({self.describe()}), leaving {self.bottom}"
            )


def shared_size(prog: Program, dynamic_shared: int) -> int:
    """Shared memory bytes per block exactly as the interpreter/simulator size it."""
    lay = prog.layout
    dyn_off = (lay.static_shared + 15) // 16 * 16
    size = dyn_off + dynamic_shared if lay.dynamic_shared_syms else lay.static_shared
    return max(size, lay.static_shared + dynamic_shared)


def shfl_sources(prog: Program) -> list[int]:
    """Virtual registers read by ``shfl`` from other lanes."""
    out: list[int] = []
    for ins in prog.code:
        if ins.op == "shfl" and isinstance(ins.s[0], R) and ins.s[0].n not in out:
            out.append(ins.s[0].n)
    return out


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


#: special registers that name a lane's place in its warp (with ``regalloc.CROSS_LANE``, the ops
#: that see other lanes: a warp using either must run in one part of a block)
_WARP_SPECIALS = frozenset({"laneid", "warpid", "lanemask_eq", "lanemask_lt", "lanemask_le", "lanemask_ge",
                            "lanemask_gt"})


def block_parts(prog: Program, nthreads: int, shared_words: int) -> int:
    """How many machine blocks of ``nthreads // parts`` threads run one launch block of
    ``nthreads`` (1 when it fits the machine's ``LIMITS.resident_threads``).

    Why parts: the machine holds 64 threads at once (their registers and scheduler rows are its
    state); blocks already run one after another. A larger block of a kernel that never waits at
    a block barrier can run as consecutive machine blocks (parts) with ``tid`` and ``ctaid``
    recomputed from the machine's indices (``_special``): no thread of one part waits for another,
    so running the parts in turn is one of the interleavings CUDA allows. A part holds whole warps
    (a multiple of 32 threads) when the kernel uses warp operations or shared memory (lanes of a
    warp may talk through either); otherwise any equal split. A kernel with ``bar.sync`` needs the
    whole block at once: refused, naming the limit."""
    cap = LIMITS.resident_threads
    if nthreads <= cap:
        return 1
    if nthreads > LIMITS.threads_per_block:
        raise MachineLimitError(
            f"the launch has {nthreads} threads per block; the machine runs at most "
            f"{LIMITS.threads_per_block} (CUDA's limit)"
        )
    if any(x.op == "bar" for x in prog.code):
        return 1  # one machine block whose threads take the block's in turns (``codegen.turns``)
    warp = shared_words > 0 or any(
        x.op in CROSS_LANE or (x.op == "s2r" and x.mod("sr") in _WARP_SPECIALS) for x in prog.code
    )
    for size in range(cap, 0, -1):
        if nthreads % size == 0 and (not warp or size % WARP == 0):
            return nthreads // size
    raise MachineLimitError(
        f"the launch has {nthreads} threads per block and kernel {prog.name} uses warp operations or "
        f"shared memory: the machine runs a block of more than {cap} threads in parts of whole warps, "
        f"and {nthreads} is not a multiple of {WARP}"
    )


def plan_memory(
    prog: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    dynamic_shared: int = 0,
    gmem_words: int | None = None,
) -> MemPlan:
    """Where shared, local, shadow and vote memory live in gmem for this program and launch (and
    in how many parts each block runs: ``block_parts``)."""
    if prog.allocated:
        raise ValueError("plan_memory works on virtual registers: call it before allocate()")
    top = gmem_words if gmem_words is not None else LIMITS.writable_words
    grid, block = tuple(int(x) for x in grid), tuple(int(x) for x in block)  # type: ignore[assignment]
    sbytes = shared_size(prog, dynamic_shared)
    swords = (sbytes + 3) // 4
    parts = block_parts(prog, block[0] * block[1] * block[2], swords)
    nthreads = block[0] * block[1] * block[2] // parts  # the kernel's threads per (part of a) block
    turns = None
    if nthreads > LIMITS.resident_threads:  # barriers: machine threads take the block's in turns
        m, v = split_turns(nthreads)
        turns = Turns(v=v, m=m, base=0)
    if grid[0] * grid[1] * grid[2] * parts > LIMITS.blocks_per_launch:
        each = f" ({parts} parts of {nthreads} threads each)" if parts > 1 else ""
        raise MachineLimitError(
            f"the launch has grid {grid}, block {block}: {grid[0] * grid[1] * grid[2] * parts} blocks for "
            f"the machine{each}; it runs at most {LIMITS.blocks_per_launch}"
        )
    smax = shared_words_for(top)
    if swords > smax:
        raise MachineLimitError(
            f"the launch needs {swords} words of shared memory per block; the machine in the weights "
            f"maps at most {smax} (global-memory words {top - smax}..{top - 1})"
        )
    cur = top - (swords + 3) // 4 * 4 if swords else top  # 16-byte aligned
    shared_base = cur
    init: dict[int, int] = {}
    for off, data in prog.layout.shared_init:
        for i, byte in enumerate(data):
            w, k = divmod(off + i, 4)
            init[w] = init.get(w, 0) | byte << (8 * k)
    nt = _pow2_at_least(nthreads)  # per-thread words: one per thread of the kernel's (part of a) block
    lwarps = -(-nthreads // WARP)
    nwarps = lwarps if turns is None else turns.m // WARP  # the machine's warps
    local_words = local_words_used(prog)
    cur -= local_words * nt
    local_base = cur
    shadows = []
    for v in shfl_sources(prog):
        cur -= WARP * lwarps
        shadows.append((v, cur))
    vote_base = part_base = None
    if any(x.op in ("vote", "ballot") for x in prog.code):
        cur -= WARP * nwarps
        vote_base = cur
        cur -= WARP * nwarps // 4
        part_base = cur
    if turns is not None:
        cur -= turns.fixed_words
        turns = replace(turns, base=cur)
    plan = MemPlan(
        grid=grid,  # type: ignore[arg-type]
        block=block,  # type: ignore[arg-type]
        dynamic_shared=dynamic_shared,
        gmem_words=top,
        shared_bytes=sbytes,
        static_shared=prog.layout.static_shared,
        shared_base=shared_base,
        shared_init=tuple(sorted((w, v) for w, v in init.items() if v)),
        tstride=nt,
        local_words=local_words,
        local_base=local_base,
        shadows=tuple(shadows),
        vote_base=vote_base,
        part_base=part_base,
        low=cur,
        parts=parts,
        turns=turns,
    )
    if cur < 0:
        raise MachineLimitError(
            f"kernel {prog.name} needs {top - cur} words of global memory for shared, local and warp "
            f"memory ({plan.describe()}); the machine in the weights has {top}"
        )
    return plan


@dataclass(frozen=True)
class MemOptions(Options):
    """``soft.Options`` with the launch's memory plan (read by the expanders of this module)."""

    plan: MemPlan | None = field(default=None, compare=False)


def _plan(fr: Fresh) -> MemPlan | None:
    return getattr(fr.opts, "plan", None)


# ---------------------------------------------------------------------------------------------
# addresses
# ---------------------------------------------------------------------------------------------
def _mem_mods(ins: MInstr) -> dict:
    return {k: ins.m[k] for k in ("space", "amode", "base", "off", "chk") if k in ins.m}


def _tid4(s: Seq) -> R:
    """4 * (the machine's linear thread index in its block)."""
    return s.op("shl", s.op("s2r", sr="tid.x"), Imm(2))


def _thread4(s: Seq, plan: MemPlan) -> R:
    """4 * (the kernel's thread in the machine block: the machine's, or, taken in turns, the one
    this turn plays), the index of every per-thread word."""
    return _tid4(s) if plan.turns is None else logical4(s, plan.turns)


def _map_address(s: Seq, ins: MInstr, plan: MemPlan) -> tuple[R | Imm, dict]:
    """(address operand, modifiers) of the global access standing for ``ins``'s shared/local one."""
    a = ins.s[0]
    space = ins.mod("space")
    size, chk = ins.mod("size") or 4, ins.mod("chk")
    c = ins.mod("base") + ins.mod("off")
    m = {"space": "global", "amode": ins.mod("amode"), "base": GLOBAL_BASE, "off": 0}
    if space == "shared":
        m.update(base=GLOBAL_BASE + 4 * plan.shared_base + ins.mod("base"), off=ins.mod("off"))
        if m["amode"] == "z" and c:
            # a 32-bit shared address wraps: [a + c] is (a + c) mod 2^32 (PTX). Read as s32, a gives
            # the same address for every in-bounds access (|c| < 2^31 - 4096; the region is far
            # below 2^31), where the zero-extension would leave the window for a base below zero
            m["amode"] = "s"
        if chk:
            m["chk"] = chk
        return a, m
    # local: word k of thread t at local_base + k * NT + t
    nt = plan.tstride
    sh = nt.bit_length() - 1
    t4 = _thread4(s, plan)
    m["amode"] = "z"
    if chk in (1, 2):
        m["chk"] = chk  # (chk 8 is dropped: the two words of an 8-byte access are not adjacent)
    if isinstance(a, Imm):
        o = (a.v + c) & M32 if ins.mod("amode") == "z" else (_s32(a.v) + c)
        m["off"] = 4 * plan.local_base + (o >> 2) * 4 * nt + (o & 3)
        return t4, m
    if size == 4 and chk not in (1, 2) and c % 4 == 0:  # an aligned word: (a + c) * NT
        x = s.op("shl", a, Imm(sh)) if sh else a
        m["off"] = 4 * plan.local_base + c * nt
        if c:  # (a + c) * NT wraps modulo 2^32 like the 32-bit local address (as for shared above)
            m["amode"] = "s"
    else:
        o = s.op("add", a, Imm(c)) if c else a
        hi = s.op("and", o, Imm(~3 & M32))
        if sh:
            hi = s.op("shl", hi, Imm(sh))
        x = s.op("or", hi, s.op("and", o, Imm(3)))
        m["off"] = 4 * plan.local_base
    return s.op("add", x, t4), m


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


# ---------------------------------------------------------------------------------------------
# loads and stores
# ---------------------------------------------------------------------------------------------
_soft_ld = EXPANDERS["ld"]


@expander("ld")
def _x_ld(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    plan = _plan(fr)
    if ins.mod("space") not in MAPPED or plan is None:
        return _soft_ld(ins, fr)
    s = Seq(fr)
    a, m = _map_address(s, ins, plan)
    m.update(size=ins.mod("size"), sign=ins.mod("sign"))
    s.emit("ld", ins.d, (a,), **m)
    return s.code


@expander("st")
def _x_st(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    plan = _plan(fr)
    space, size = ins.mod("space"), ins.mod("size")
    if size in (1, 2) and space in ("global", *MAPPED):  # (with a launch: the simulator's
        return _subword_store(ins, fr) if plan is not None else None  # bounds are then words)
    if space not in MAPPED or plan is None:
        return None
    s = Seq(fr)
    a, m = _map_address(s, ins, plan)
    m["size"] = size
    s.emit("st", (), (a, ins.s[1]), **m)
    return s.code


def _lane_loop(s: Seq, body: Callable[[P], None]) -> None:
    """Run ``body(p)`` once per lane in lane order: iteration k has p true on lane k only; a lane
    leaves the loop after its own iteration, so the loop ends after the highest active lane.

    The iteration count k is the same on every waiting lane, so its update is one USHORT token
    per lane group (a per-lane count down from ``laneid`` costs a SHORT token per lane).

    A warp of more than one lane group (``Options.group_loops``) runs one copy of the loop per
    group instead: copy g starts at k = 4g, and the lanes of the later groups branch past it to the
    next copy. Min-PC scheduling runs the lowest copy's lanes to the end of the sequence before a
    later copy's, so the lanes still take their turns in lane order, but group g no longer passes
    through the 4g iterations of the lanes before it (each of its passes a PASS, a predicate and a
    count token): a full warp's loop is 8 x 4 iterations instead of 4 + 8 + ... + 32 = 144, for
    7 x 8 more ROM rows (each copy's iteration is ``body`` and 4 rows).

    On a machine with one-lane rows (``Options.lane_rows``) a copy, which only its group runs,
    is no loop at all: four turns, lane 0's rows to lane 3's (``_lane_turn``)."""
    ngroups = _warp_groups(s)
    one_lane = s.fr.opts.lane_rows and _plan(s.fr) is not None and s.fr.opts.group_loops
    lane_reg: list[R] = []

    def lane() -> R:
        if not lane_reg:
            lane_reg.append(s.op("s2r", sr="laneid"))
        return lane_reg[0]

    if not one_lane or ngroups > 1:
        lane()
    turns = _shared_turns(s, body, lane, ngroups) if one_lane and ngroups > 1 else None
    end = s.label()

    def copy(g: int) -> None:
        if turns is not None:
            s.code.append(call(turns, (), ()))
        elif one_lane:
            for j in range(4):
                _lane_turn(s, body, j, lambda k=4 * g + j: (lane(), Imm(k)))
        else:
            k = s.op("mov", Imm(4 * g))
            top = s.label()
            s.place(top)
            p = s.setp("eq", lane(), k)
            body(p)
            s.into(k, "add", k, Imm(1))
            s.bra(top, p.inv())  # 3 instructions of bookkeeping per lane

    def copies(lo: int, hi: int) -> None:
        """The copies of groups lo..hi-1: group 0 split off first (the one lane of an ``if (tid ==
        0) atomicAdd`` passes one test, as before), the others by halves (a group passes about
        log2 of their tests instead of one per group before it). The lower part's rows come
        first, so min-PC still runs the groups' copies in group order."""
        if hi - lo == 1:
            copy(lo)
            return
        mid = lo + 1 if lo == 0 else (lo + hi) // 2
        upper = s.label()
        s.bra(upper, s.setp("ge", lane(), Imm(4 * mid)))
        copies(lo, mid)
        s.bra(end)
        s.place(upper)
        copies(mid, hi)

    copies(0, ngroups)
    s.place(end)


#: prompt tokens of a ROM row (ROMADDR and its chunks) and written tokens of a turns routine's call
#: (the call's PASS, the link's token, the ``ret``'s PASS), for ``_shared_turns``' choice
ROW_TOKENS, CALL_TOKENS = 12, 3


def _shared_turns(s: Seq, body: Callable[[P], None], lane: Callable[[], R], ngroups: int) -> Routine | None:
    """The four lanes' turns (``_lane_turn``) as one cold routine that every lane group's copy
    calls: the turns are the same rows for every group (a lane row names the lane's position in its
    group), and only the copy's own group runs its call, so min-PC scheduling still finishes one
    group's call before the next group's copy starts; the ROM holds the turns once instead of once
    per group (each copy: the branch past it, the call, the branch to the end). A call costs its
    group a PASS, the link's token and the ``ret``'s PASS. The rows read and write the expansion's
    own registers (a routine per lane loop: its name is unique).

    None (each copy keeps its turns) when the body has an op the weights do not run as a row (the
    test shape's float atomic: a softfloat add, with branches whose labels could not be placed once
    per copy if routines are inlined), or when the calls would cost more than the rows cost the
    prompt, counting each group of each warp of the launch once (an atomic in a loop runs more
    often; a launch of 2 blocks of 64 threads shares, one of 32 blocks of 256 does not)."""
    start = len(s.code)
    body(s.fr.p())  # a look at the body's rows before any expansion (then dropped)
    plain = all(x.op in LANE_OPS and (x.op not in ("fadd", "fsub") or s.fr.opts.native_fadd)
                for x in s.code[start:])
    del s.code[start:]
    if not plain:  # e.g. a softfloat add: its labels cannot be placed once per inlined copy
        return None
    pos: list[R] = []

    def position(j: int) -> tuple[R, Imm]:  # a turn that keeps its predicate: laneid % 4 == j
        if not pos:
            pos.append(s.op("and", lane(), Imm(3)))
        return pos[0], Imm(j)

    for j in range(4):
        _lane_turn(s, body, j, lambda j=j: position(j))
    rows = s.code[start:]
    del s.code[start:]
    plan = _plan(s.fr)  # (the caller's condition: there is one)
    saved = (ngroups - 1) * len(rows) - ngroups - 1  # the copies' turns, less the calls and the ret
    if ROW_TOKENS * saved <= CALL_TOKENS * ngroups * plan.nwarps * plan.mblocks:  # type: ignore[union-attr]
        return None

    def emit(rs: Seq, ps: tuple, qs: tuple) -> None:
        rs.code += [replace(x, m=dict(x.m)) for x in rows]

    return Routine(f"lane-turns#{s.fr.label()}", "", "", emit, cold=True)


def _lane_turn(s: Seq, body: Callable[[P], None], j: int, key: Callable[[], tuple[R, Imm]]) -> None:
    """Lane j's turn in a lane group's copy of a lane loop, as one-lane rows: ``body`` under a
    placeholder predicate, expanded to the weights' ops, then each row made a ``lane`` j row (its
    guard, or an ``and`` with the placeholder in a ``setp``, dropped). A body's rows are all that
    lane's work (an unguarded one computes a temporary of the turn: in the loop every waiting lane
    ran it, for nothing), so only lane j runs them: no predicate, count or branch per lane, and a
    temporary's result is one lane's tokens, not four. A turn the rows cannot express (a branch or
    call in the expansion, another guard, the placeholder read otherwise) keeps its predicate,
    computed before the expanded rows: ``x == k`` for ``(x, k) = key()`` (laneid and 4g + j)."""
    start = len(s.code)
    p = s.fr.p()
    body(p)
    code = [y for x in s.code[start:] for y in ([x] if x.op == "@label" else expand_one(x, s.fr, 1))]
    del s.code[start:]
    rows = _as_lane_rows(code, p, j)
    if rows is None:
        s.setp_into(p, "eq", *key())
        s.code += code
        return
    s.code += rows


def _as_lane_rows(code: list[MInstr], p: P, j: int) -> list[MInstr] | None:
    """``code`` (a lane's turn under predicate ``p``) as lane j rows, or None where it cannot be."""
    out = []
    for y in code:
        if y.op not in LANE_OPS:  # labels, branches, calls, anything the weights' rows do not run
            return None
        m, srcs, g = dict(y.m), y.s, y.guard
        if g is not None:
            if g != p:
                return None
            g = None
        if y.op == "setp" and m.get("bop") == "and" and len(srcs) == 3 and srcs[2] == p:
            del m["bop"]
            srcs = srcs[:2]
        if any(isinstance(x, P) and x.n == p.n for x in (*srcs, *y.d)):
            return None
        m["lane"] = j
        out.append(replace(y, s=srcs, m=m, guard=g))
    return out


def _warp_groups(s: Seq) -> int:
    """Lane groups of the loop copies ``_lane_loop`` emits: the groups of the launch's warps (one
    without a memory plan, or with ``Options.group_loops`` off)."""
    plan = _plan(s.fr)
    if plan is None or not s.fr.opts.group_loops:
        return 1
    return -(-min(WARP, plan.threads) // 4)


def _subword_store(ins: MInstr, fr: Fresh) -> list[MInstr]:
    """st.{1,2}: lane-serialised read-modify-write of the containing word."""
    s = Seq(fr)
    a, v = ins.s
    size = ins.mod("size")
    bits = 8 * size
    mask0 = (1 << bits) - 1
    mods = _mem_mods(ins)
    mods.pop("chk", None)
    c = ins.mod("base") + ins.mod("off")
    k = c & 3
    if isinstance(a, Imm):
        t = (a.v + k) & M32
        al: R | Imm = Imm(t & ~3)
        sh: R | Imm = Imm(8 * (t & 3))
    else:
        t_r = s.op("add", a, Imm(k)) if k else a
        al = s.op("and", t_r, Imm(~3 & M32))
        sh = s.op("and", s.op("shl", t_r, Imm(3)), Imm(24))
    if isinstance(sh, Imm):
        keep: R | Imm = Imm(~(mask0 << sh.v) & M32)
        vm: R | Imm = (
            Imm((v.v & mask0) << sh.v & M32)
            if isinstance(v, Imm)
            else s.op("shl", s.op("and", v, Imm(mask0)), sh)
        )
    else:
        keep = s.op("not", s.op("shl", Imm(mask0), sh))
        vm = s.op("shl", s.op("and", v, Imm(mask0)) if not isinstance(v, Imm) else Imm(v.v & mask0), sh)
    ld_mods = dict(mods, size=4, sign="u", chk=size)
    st_mods = dict(mods, size=4, off=ins.mod("off") - k)

    def body(p: P) -> None:
        w = s.op("ld", a, guard=p, **ld_mods)
        w2 = s.op("or", s.op("and", w, keep), vm)
        s.emit("st", (), (al, w2), p, **st_mods)

    _lane_loop(s, body)
    return s.code


# ---------------------------------------------------------------------------------------------
# atomics
# ---------------------------------------------------------------------------------------------
@expander("atom")
def _x_atom(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    space = ins.mod("space")
    if space not in ("global", *MAPPED):
        return None
    s = Seq(fr)
    a, b = ins.s[0], ins.s[1]
    c = ins.s[2] if len(ins.s) > 2 else Imm(0)
    aop, typ = ins.mod("aop"), ins.mod("type")
    mods = {k: ins.m[k] for k in ("space", "amode", "base", "off") if k in ins.m}
    old = fr.r()

    def body(p: P) -> None:
        s.emit("ld", (old,), (a,), p, size=4, sign="u", **mods)
        if aop == "exch":
            s.emit("st", (), (a, b), p, size=4, **mods)
            return
        if aop == "cas":
            q = s.setp("eq", old, b, "u", "and", p)
            s.emit("st", (), (a, c), q, size=4, **mods)
            return
        new = _atomic_op(s, aop, typ, old, b, p)
        s.emit("st", (), (a, new), p, size=4, **mods)

    _lane_loop(s, body)
    s.into(ins.d[0], "mov", old)
    return s.code


def _atomic_op(s: Seq, aop: str, typ: str, old: R, b: R | Imm, p: P) -> R:
    """The new value of an atomic (interpreter semantics, ``sim._atomic_function``), computed only
    on the lane whose turn it is (guard ``p``): the lanes still waiting in the loop would write
    results nobody reads, up to three tokens each (every group of the warp passes through every
    iteration until its own lanes' turn)."""
    if typ == "f32":
        if aop == "add":
            return s.op("fadd", old, b, rnd="rn", ftz=True, guard=p)
        if aop in ("min", "max"):
            return s.op("fmin" if aop == "min" else "fmax", old, b, ftz=False, guard=p)
    if aop in ("add", "and", "or", "xor"):
        return s.op(aop, old, b, guard=p)
    if aop in ("min", "max"):
        return s.op(aop, old, b, sign="s" if typ == "s32" else "u", guard=p)
    if aop == "inc":  # old >= b ? 0 : old + 1
        q = s.setp("ge", old, b, "u", guard=p)
        return s.op("sel", Imm(0), s.op("add", old, Imm(1), guard=p), q, guard=p)
    if aop == "dec":  # old == 0 || old > b ? b : old - 1
        q = s.setp("eq", old, Imm(0), guard=p)
        q = s.setp("gt", old, b, "u", "or", q, guard=p)
        return s.op("sel", b, s.op("sub", old, Imm(1), guard=p), q, guard=p)
    raise MachineLimitError(f"unsupported atomic {aop}.{typ}")


# ---------------------------------------------------------------------------------------------
# warp shuffles and votes
# ---------------------------------------------------------------------------------------------
def _shfl_source(s: Seq, mode: str, b: R | Imm, c: R | Imm, lane: R) -> tuple[R | Imm, P]:
    """(source lane j, in range) exactly as ``sim._shfl_lanes`` (lane = laneid)."""
    bv = Imm(b.v & 31) if isinstance(b, Imm) else s.op("and", b, Imm(31))
    if isinstance(c, Imm):
        cval, seg = c.v & 31, (c.v >> 8) & 31
        if seg == 0:
            maxl: R | Imm = Imm(cval)
            minl: R | Imm = Imm(0)
        else:
            minl = s.op("and", lane, Imm(seg))
            maxl = s.op("or", minl, Imm(cval & ~seg & 31)) if cval & ~seg & 31 else minl
        notseg: R | Imm = Imm(~seg & 31)
    else:
        cval_r = s.op("and", c, Imm(31))
        seg_r = s.op("and", s.op("shr", c, Imm(8)), Imm(31))
        minl = s.op("and", lane, seg_r)
        notseg = s.op("xor", seg_r, Imm(31))
        maxl = s.op("or", minl, s.op("and", cval_r, notseg))
    if mode == "up":
        j: R | Imm = s.op("sub", lane, bv)
        ok = s.setp("ge", j, maxl, "s")
    elif mode == "down":
        j = s.op("add", lane, bv)
        ok = s.setp("le", j, maxl, "s")
    elif mode == "bfly":
        j = s.op("xor", lane, bv)
        ok = s.setp("le", j, maxl, "s")
    else:  # idx
        if isinstance(bv, Imm) and isinstance(notseg, Imm):
            hi: R | Imm = Imm(bv.v & notseg.v)
        else:
            hi = s.op("and", bv, notseg)
        if isinstance(minl, Imm) and minl.v == 0:
            j = hi
        else:
            j = s.op("or", minl, hi)
        if isinstance(j, Imm):
            ok = (
                s.setp("le", j, maxl, "s")
                if not isinstance(maxl, Imm)
                else (TRUE if j.v <= maxl.v else FALSE)
            )
        else:
            ok = s.setp("le", j, maxl, "s")
    return j, ok


def _shfl_fixed(s: Seq, d: R, mode: str, b: int, c: int, off: int) -> bool:
    """A shuffle by constant operands over the whole warp (no segments; the usual ``__shfl_*_sync``
    of a full warp): the source word's address from the thread index in one or two rows, and a
    guarded pair of loads instead of the source lane's select (``_shfl_source``). Lane ``l`` of
    the warp is thread ``t`` with ``l = t & 31`` (the circuit's ``laneid`` is the thread index's
    low bits), so its warp's first thread is ``t & ~31``; ``down`` reads lane ``l + b`` where
    ``l + b <= c`` and its own word elsewhere (``up``: ``l - b`` where ``l - b >= c``), the same
    word as ``sim._shfl_lanes``. Returns False (nothing emitted) for a form it does not cover."""
    if mode in ("bfly", "idx") and c != 31:
        return False
    tid = s.op("s2r", sr="tid.x")

    def load(addr: R, at: int, guard: P | None = None) -> None:
        s.emit("ld", (d,), (addr,), guard=guard, size=4, sign="u", space="global", amode="z",
               base=GLOBAL_BASE, off=at)  # fmt: skip

    if mode == "bfly":  # l ^ b < 32: every lane in range; its warp's thread t ^ b
        load(s.op("shl", s.op("xor", tid, Imm(b)), Imm(2)), off)
        return True
    if mode == "idx":  # every lane reads lane b of its warp
        load(s.op("shl", s.op("and", tid, Imm(~31 & M32)), Imm(2)), off + 4 * b)
        return True
    t4 = s.op("shl", tid, Imm(2))
    # the lanes in range: l <= c - b (down), l >= c + b (up); their source is thread t + step
    cmp, bound, step = ("le", c - b, b) if mode == "down" else ("ge", c + b, -b)
    if (bound < 0) if cmp == "le" else (bound > 31):  # no lane in range: each reads its own word
        load(t4, off)
    elif (bound >= 31) if cmp == "le" else (bound <= 0):  # every lane in range
        load(t4, off + 4 * step)
    else:
        ok = s.setp(cmp, s.op("s2r", sr="laneid"), Imm(bound), "s")
        load(t4, off + 4 * step, guard=ok)
        load(t4, off, guard=P(ok.n, not ok.neg))
    return True


@expander("shfl")
def _x_shfl(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    plan = _plan(fr)
    if plan is None:
        return None
    s = Seq(fr)
    d = ins.d[0]
    a, b, c = ins.s
    if isinstance(a, Imm):
        s.into(d, "mov", a)
        return s.code
    base = plan.shadow(a.n)
    if base is None:
        raise MachineLimitError(f"shfl source %r{a.n} has no shadow region in the plan")
    if (plan.turns is None and isinstance(b, Imm) and isinstance(c, Imm) and not (c.v >> 8) & 31
            and _shfl_fixed(s, d, ins.mod("mode"), b.v & 31, c.v & 31, 4 * base)):
        return s.code
    lane = s.op("s2r", sr="laneid")
    j, ok = _shfl_source(s, ins.mod("mode"), b, c, lane)
    if ok.n == PT:
        src: R | Imm = j if not ok.neg else lane
    else:
        src = s.op("sel", j, lane, ok)
    if plan.turns is None:
        wb = s.op("sub", s.op("s2r", sr="tid.x"), lane)  # the warp's first thread
        addr = s.op("shl", s.op("add", wb, src), Imm(2))
    else:  # the logical warp's first thread, from this turn's thread
        wb4 = s.op("sub", logical4(s, plan.turns), s.op("shl", lane, Imm(2)))
        addr = s.op("add", wb4, s.op("shl", src, Imm(2)))
    s.emit("ld", (d,), (addr,), size=4, sign="u", space="global", amode="z",
           base=GLOBAL_BASE, off=4 * base)  # fmt: skip
    return s.code


@expander("shflp")
def _x_shflp(ins: MInstr, fr: Fresh) -> list[MInstr]:
    s = Seq(fr)
    b, c = ins.s
    lane = s.op("s2r", sr="laneid")
    _, ok = _shfl_source(s, ins.mod("mode"), b, c, lane)
    s.pcopy(ins.d[0], ok)
    return s.code


@expander("vote", "ballot")
def _x_vote(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    plan = _plan(fr)
    if plan is None:
        return None
    s = Seq(fr)
    pa = ins.s[0]
    vb, pb = 4 * plan.vote_base, 4 * plan.part_base  # type: ignore[operator]
    mode = ins.mod("vmode") if ins.op == "vote" else "ballot"
    lane = s.op("s2r", sr="laneid")
    tid = s.op("s2r", sr="tid.x")
    if mode == "ballot":
        vt: R | Imm = s.op("shl", Imm(1), lane)
        vf: R | Imm = Imm(0)
    else:  # hi16 / lo16 counts: any: #true/#active, all: #false/#active, uni: #true/#false
        vt, vf = {
            "any": (Imm(0x10001), Imm(1)),
            "all": (Imm(1), Imm(0x10001)),
            "uni": (Imm(0x10000), Imm(1)),
        }[mode]
    v = s.op("sel", vt, vf, pa)
    t4 = s.op("shl", tid, Imm(2))

    def st(addr: R, off: int, val: R | Imm) -> None:
        s.emit("st", (), (addr, val), size=4, space="global", amode="z", base=GLOBAL_BASE, off=off)

    def ld(addr: R, off: int) -> R:
        return s.op("ld", addr, size=4, sign="u", space="global", amode="z", base=GLOBAL_BASE, off=off)

    st(t4, vb, v)
    g4 = s.op("and", t4, Imm(~15 & M32))  # 4 * the group's first thread
    part = ld(g4, vb)
    for k in range(1, min(4, plan.threads)):
        part = s.op("add", part, ld(g4, vb + 4 * k))
    p4 = s.op("and", tid, Imm(~3 & M32))  # 4 * (absolute group index)
    st(p4, pb, part)
    w4 = s.op("and", tid, Imm(~31 & M32))  # 4 * the warp's first group
    acc = ld(w4, pb)
    for k in range(1, -(-min(WARP, plan.threads) // 4)):
        acc = s.op("add", acc, ld(w4, pb + 4 * k))
    st(t4, vb, Imm(0))
    st(p4, pb, Imm(0))
    d = ins.d[0]
    if mode == "ballot":
        s.into(d, "mov", acc)
    elif mode == "any":
        s.setp_into(d, "ge", acc, Imm(0x10000), "u")
    elif mode == "all":
        s.setp_into(d, "lt", acc, Imm(0x10000), "u")
    else:
        q = s.setp("eq", s.op("and", acc, Imm(0xFFFF)), Imm(0))
        s.setp_into(d, "lt", acc, Imm(0x10000), "u", "or", q)
    return s.code


# ---------------------------------------------------------------------------------------------
# program-level passes: launch specials + prologue (before expansion), shadows (after), spills
# ---------------------------------------------------------------------------------------------
def _udiv_const(s: Seq, x: R, d: int, maxv: int) -> R | Imm:
    """x // d for 0 <= x <= maxv (d a launch constant)."""
    if d == 1:
        return x
    if maxv < d:
        return Imm(0)
    if d & (d - 1) == 0:
        return s.op("shr", x, Imm(d.bit_length() - 1))
    for sh in range(1, 32):
        m = -(-(1 << sh) // d)
        if maxv * m < 1 << 32 and all((v * m) >> sh == v // d for v in range(maxv + 1)):
            return s.op("shr", s.op("mul", x, Imm(m)), Imm(sh))
    raise AssertionError(f"no reciprocal for {d}")  # pragma: no cover (maxv < 64)


def _umod_const(s: Seq, x: R | Imm, d: int, maxv: int) -> R | Imm:
    if isinstance(x, Imm):
        return Imm(x.v % d)
    if d == 1:
        return Imm(0)
    if maxv < d:
        return x
    if d & (d - 1) == 0:
        return s.op("and", x, Imm(d - 1))
    q = _udiv_const(s, x, d, maxv)
    return s.op("sub", x, s.op("mul", q, Imm(d)))


def _linear_index(s: Seq, base: str, plan: MemPlan) -> R:
    """The kernel's linear thread (``base`` tid) or block (ctaid) index from the machine's: the
    machine runs part p of launch block b as its block ``b * parts + p`` (``block_parts``), so
    ``ctaid = ctaid_m // parts`` and ``tid = tid_m + (ctaid_m % parts) * threads``."""
    if base == "tid" and plan.turns is not None:  # the thread this turn plays
        return s.op("shr", logical4(s, plan.turns), Imm(2))
    lin = s.op("s2r", sr=f"{base}.x")
    if plan.parts == 1:
        return lin
    cm = lin if base == "ctaid" else s.op("s2r", sr="ctaid.x")
    if base == "ctaid":
        q = _udiv_const(s, cm, plan.parts, plan.mblocks - 1)
        return q if isinstance(q, R) else s.op("mov", q)
    part = _umod_const(s, cm, plan.parts, plan.mblocks - 1)
    t = plan.threads
    off = s.op("shl", part, Imm(t.bit_length() - 1)) if t & (t - 1) == 0 else s.op("mul", part, Imm(t))
    return s.op("add", lin, off)


def _special(s: Seq, d: R, sr: str, plan: MemPlan) -> None:
    """d = the special register ``sr`` of the launch, from the circuit's linear indices."""
    bx, by, bz = plan.block
    gx, gy, gz = plan.grid
    base, _, axis = sr.partition(".")
    const: dict[str, int] = {
        "ntid.x": bx, "ntid.y": by, "ntid.z": bz, "nctaid.x": gx, "nctaid.y": gy, "nctaid.z": gz,
        "nwarpid": plan.nwarps if plan.turns is None else -(-plan.lthreads // WARP),
        "total_smem_size": plan.shared_bytes,
        "dynamic_smem_size": plan.shared_bytes - plan.static_shared,
    }  # fmt: skip
    if sr in const:
        s.into(d, "mov", Imm(const[sr]))
        return
    if base in ("tid", "ctaid"):
        dims, n = ((bx, by, bz), plan.nthreads) if base == "tid" else ((gx, gy, gz), plan.nblocks)
        if n == 1:  # one block (one thread): the index is 0, a constant the lowering folds
            s.into(d, "mov", Imm(0))
            return
        machine = plan.parts == 1 and (base == "ctaid" or plan.turns is None)
        if axis == "x" and dims[1] * dims[2] == 1 and machine:
            s.into(d, "s2r", sr=f"{base}.x")  # the linear index is the x index
            return
        lin = _linear_index(s, base, plan)  # linear in the 1-D launch of the kernel
        if axis == "x" and dims[1] * dims[2] == 1:
            s.into(d, "mov", lin)
            return
        maxv = n - 1
        if axis == "x":
            v = _umod_const(s, lin, dims[0], maxv)
        elif axis == "y":
            q = _udiv_const(s, lin, dims[0], maxv)
            v = _umod_const(s, q, dims[1], maxv // dims[0])
        else:
            v = _udiv_const(s, lin, dims[0] * dims[1], maxv)
        s.into(d, "mov", v)
        return
    lane = s.op("s2r", sr="laneid")
    if sr == "lanemask_eq":
        s.into(d, "shl", Imm(1), lane)
    elif sr in ("lanemask_lt", "lanemask_ge"):
        t = s.op("sub", s.op("shl", Imm(1), lane), Imm(1))
        s.into(d, "mov" if sr == "lanemask_lt" else "not", t)
    else:  # le, gt: (2 << lane) - 1 (lane 31: 0 - 1 = all ones)
        t = s.op("sub", s.op("shl", Imm(2), lane), Imm(1))
        s.into(d, "mov" if sr == "lanemask_le" else "not", t)


def _prologue(fr: Fresh, plan: MemPlan, ptx: int) -> list[MInstr]:
    """Per-block initialisation of the machine's regions (see the module docstring); a ``bra``
    with target 0 goes to the program's first instruction."""
    s = Seq(fr)
    fr.ptx = ptx
    if plan.mblocks > 1 and (plan.local_words or plan.shadows):  # each thread its own words
        t4 = _tid4(s) if plan.turns is None else first4(s, plan.turns)
        offs = [plan.local_base + k * plan.tstride for k in range(plan.local_words)]
        for w in offs + [b for _, b in plan.shadows]:
            for k in range(1 if plan.turns is None else plan.turns.v):  # (every turn's thread)
                s.emit("st", (), (t4, Imm(0)), size=4, space="global", amode="z", base=GLOBAL_BASE,
                       off=4 * w + STEP * k)
    clear = plan.shared_words and plan.mblocks > 1
    if clear or plan.shared_init:
        w = s.op("s2r", sr="warpid")
        s.emit("bra", guard=s.setp("ne", w, Imm(0)), target=0)  # warps 1.. skip; warp 0 runs first
        if clear:
            lane = s.op("s2r", sr="laneid")
            a4 = s.op("shl", lane, Imm(2))
            nl = min(WARP, plan.threads)
            nw = plan.shared_words
            for k in range(0, nw, nl):
                g = s.setp("lt", lane, Imm(nw - k)) if nw - k < nl else None
                s.emit("st", (), (a4, Imm(0)), g, size=4, space="shared", off=4 * k)
        for wd, v in plan.shared_init:
            s.emit("st", (), (Imm(4 * wd), Imm(v)), size=4, space="shared")
    return s.code


def _launch_pass(prog: Program, plan: MemPlan) -> tuple[Program, int]:
    """Launch specials -> sequences over the linear indices; the prologue before the first
    instruction (outside every PTX range: it is not a PTX instruction). Also returns the pc of the
    kernel's first instruction (after the prologue)."""
    fr = Fresh(prog)
    items: list[tuple[int, MInstr]] = []
    if prog.code:
        items += [(AFTER, x) for x in _prologue(fr, plan, prog.code[0].ptx)]
    entry = len(items)
    for pc, ins in enumerate(prog.code):
        if ins.op == "s2r" and ins.mod("sr") in LAUNCH_SPECIALS:
            fr.ptx = ins.ptx
            s = Seq(fr)
            d = ins.d[0]
            tmp = fr.r() if ins.guard is not None else d
            _special(s, tmp, ins.mod("sr"), plan)
            if ins.guard is not None:
                s.emit("mov", (d,), (tmp,), ins.guard)
            if len(s.code) == 1 and s.code[0].op == "s2r" and s.code[0].d == ins.d and ins.guard is None:
                items.append((pc, ins))
                continue
            items += [(-1, x) for x in s.code[:-1]]
            items.append((pc, s.code[-1]))
        else:
            items.append((pc, ins))
    out = rebuild(prog, items)
    return replace(out, nregs=fr.nr, npreds=fr.np), entry


def _shadow_pass(prog: Program, plan: MemPlan) -> Program:
    """After every definition of a shfl source register: store it to the thread's shadow word."""
    regs = dict(plan.shadows)
    if not regs:
        return prog
    nr = prog.nregs
    items: list[tuple[int, MInstr]] = []
    for pc, ins in enumerate(prog.code):
        items.append((pc, ins))
        for d in ins.d:
            if isinstance(d, R) and d.n in regs and ins.op not in ("call",):
                t, u = R(nr), R(nr + 1)
                nr += 2
                items += [
                    (AFTER, MInstr("s2r", (t,), (), {"sr": "tid.x"}, ptx=ins.ptx)),
                    (AFTER, MInstr("shl", (u,), (t, Imm(2)), ptx=ins.ptx)),
                ]
                if plan.turns is not None:  # the word of the thread this turn plays
                    lt = R(nr)
                    nr += 1
                    items.append((AFTER, MInstr("ld", (lt,), (u,), {
                        "space": "global", "size": 4, "sign": "u", "amode": "z", "base": GLOBAL_BASE,
                        "off": plan.turns.lt_off}, ptx=ins.ptx)))
                    u = lt
                items += [
                    (
                        AFTER,
                        MInstr(
                            "st",
                            (),
                            (u, d),
                            {
                                "space": "global",
                                "size": 4,
                                "amode": "z",
                                "base": GLOBAL_BASE,
                                "off": 4 * regs[d.n],
                            },
                            ins.guard,
                            ptx=ins.ptx,
                        ),
                    ),
                ]
    out = rebuild(prog, items)
    out = replace(out, nregs=nr, pinned=set(prog.pinned) - set(regs))
    # the stores' thread addresses are the shuffles' own (``_shfl_fixed``): one copy of each
    code, ranges = softcore.local_value_numbering(out.code, out.ptx_ranges, out.pinned)
    return replace(out, code=code, ptx_ranges=ranges)


FP = 31  # the register holding 4 * tid when the program spills


def _map_spills(prog: Program, plan: MemPlan) -> Program:
    """Spill slots -> the transposed per-thread spill region, addressed from r31 = 4 * tid."""
    nt = plan.tstride
    ptx = prog.code[0].ptx if prog.code else -1
    items: list[tuple[int, MInstr]] = [
        (AFTER, MInstr("s2r", (R(FP),), (), {"sr": "tid.x"}, ptx=ptx)),
        (AFTER, MInstr("shl", (R(FP),), (R(FP), Imm(2)), ptx=ptx)),
    ]
    for pc, ins in enumerate(prog.code):
        if ins.op in ("ld", "st") and ins.mod("space") == "spill":
            slot = ins.mod("off") // 4
            m = {"space": "global", "size": 4, "amode": "z", "base": GLOBAL_BASE,
                 "off": 4 * plan.spill_base + 4 * slot * nt}  # type: ignore[operator]  # fmt: skip
            if ins.op == "ld":
                m["sign"] = "u"
            ins = replace(ins, s=(R(FP), *ins.s[1:]), m=m)
        items.append((pc, ins))
    out = rebuild(prog, items)
    return replace(out, nregs=max(out.nregs, FP + 1))


def _const_plops(prog: Program) -> Program:
    """``plop`` with constant operands (the allocator's predicate zero-init) -> ``setp``."""
    code = []
    for ins in prog.code:
        if ins.op == "plop" and all(x.n == PT for x in ins.s):
            a, b = (not x.neg for x in ins.s)
            v = {"and": a and b, "or": a or b, "xor": a != b}[ins.mod("bop")]
            ins = MInstr("setp", ins.d, (Imm(0), Imm(0)), {"cmp": "eq" if v else "ne", "sign": "u"},
                         ins.guard, None, ins.ptx)  # fmt: skip
        code.append(ins)
    return replace(prog, code=code)


def expand_with_launch(
    prog: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    dynamic_shared: int = 0,
    *,
    options: Options | None = None,
    gmem_words: int | None = None,
) -> tuple[Program, MemPlan]:
    """Plan + launch specials + prologue + ``soft.expand_for_weights`` + shadow stores (virtual
    registers; allocate next, and map spills with ``finish_allocation``)."""
    from qwengpu.codegen.nonzero import drop_decided_zero_checks
    from qwengpu.codegen.regalloc import propagate_constants

    plan = plan_memory(prog, grid, block, dynamic_shared, gmem_words)
    # launch constants (ntid, nctaid ...) and other single-mov constants become immediates BEFORE
    # expanding, so the sequences see them (a multiply by ntid.x is a multiply by a constant)
    p, entry = _launch_pass(prog, plan)
    p = propagate_constants(p)
    if options is not None and options.decided_zero_checks:
        p = drop_decided_zero_checks(p, dict(options.param_words))
    if plan.turns is not None:  # barriers and exits taken in turns; the saved values below the rest
        p, t = turns_pass(p, plan.turns, entry, plan.low)
        low = t.save_base
        plan = replace(plan, turns=t, low=low)
        if low < 0:
            raise MachineLimitError(
                f"kernel {prog.name} needs {plan.gmem_words - low} words of global memory for shared, "
                f"local and warp memory and its threads' turns ({plan.describe()}); the machine in the "
                f"weights has {plan.gmem_words}"
            )
    base = options or Options()
    opts = MemOptions(**{f: getattr(base, f) for f in base.__dataclass_fields__ if f != "plan"}, plan=plan)
    p = softcore.expand_for_weights(p, options=opts)
    return _shadow_pass(p, plan), plan


def lower_for_weights(
    prog: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    dynamic_shared: int = 0,
    *,
    options: Options | None = None,
    k_regs: int | None = None,
    gmem_words: int | None = None,
    arena_words: int = 0,
) -> tuple[Program, MemPlan]:
    """A lowered program (virtual registers) -> the allocated program the weights run for this
    launch, and its memory plan (check the launch's arena with ``plan.check_arena(words)``).
    ``arena_words``: the words the launch's buffers take (spill slots get the rest).

    With ``options.native_mul`` a program that does not fit the registers is lowered again without
    the multiplier (a program without ``mul`` rows runs on a machine that has them): the multiplier
    shortens float sequences so much that the ROM holds them inline instead of as shared routines,
    and an inline-heavy kernel (external nbody_integrate: 111 values live at once) can outgrow the
    32 registers that the routines' calls kept it under. Before that, softfloat's fast path on the
    adders (``Options.fast_floats``, more values live at once) is dropped."""
    tries = [options]
    if options is not None and options.native_mul:
        if options.native_fadd and options.fast_floats:
            tries.append(replace(options, fast_floats=False))
        tries.append(replace(options, native_mul=False))
    for opts in tries[:-1]:
        try:
            return _lower_for_weights(prog, grid, block, dynamic_shared, options=opts, k_regs=k_regs,
                                      gmem_words=gmem_words, arena_words=arena_words)
        except MachineLimitError:
            pass
    return _lower_for_weights(prog, grid, block, dynamic_shared, options=tries[-1], k_regs=k_regs,
                              gmem_words=gmem_words, arena_words=arena_words)


def _lower_for_weights(
    prog: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    dynamic_shared: int = 0,
    *,
    options: Options | None = None,
    k_regs: int | None = None,
    gmem_words: int | None = None,
    arena_words: int = 0,
) -> tuple[Program, MemPlan]:
    from qwengpu.codegen.regalloc import allocate

    p, plan = expand_with_launch(prog, grid, block, dynamic_shared, options=options, gmem_words=gmem_words)
    if options is not None and options.drop_identity_rows:
        p = drop_identity_ops(fold_constant_rows(p))  # codegen.rowfold
    if options is not None and options.param_bank:
        from qwengpu.codegen.regalloc import propagate_constants

        p = fold_address_offsets(propagate_constants(fold_param_loads(p, options.param_bank)))
    if options is not None and options.special_operands:
        p = fold_special_reads(p)
    if options is not None and options.guard_short_skips:
        p = guard_short_skips(p)
    if options is not None and options.forward_own_words and plan.turns is None:
        p = forward_own_words(p, plan.threads)
    kr = k_regs if k_regs is not None else LIMITS.registers
    out = allocate(p, k_regs=kr)
    if out.spill_words:
        out = allocate(p, k_regs=min(kr, FP))
        need_words = out.spill_words * plan.tstride
        free = plan.low - arena_words
        if need_words > free:  # spilling never refuses for registers, only for memory
            mine = plan.describe()
            raise MachineLimitError(
                f"kernel {prog.name} needs {need_words} words of global memory for its spill slots "
                f"({out.spill_words} per thread x {plan.tstride} thread slots: more than 32 values live at "
                f"once); {max(0, free)} of the machine's {plan.gmem_words} words are left beside the "
                f"launch's buffers ({arena_words} words)" + ("" if mine == "none" else f" and {mine}")
                + " (fewer threads per block need fewer)"
            )
        plan = replace(plan, spill_words=out.spill_words, spill_base=plan.low - need_words)
        out = _map_spills(out, plan)
    out = expand_one_lane(_const_plops(out))
    if plan.mblocks == 1 and options is not None and options.guard_short_skips:
        out = drop_first_zeros(out)
    return out, plan


def _tid_affine(prog: Program) -> dict[int, tuple[int, int]]:
    """vreg -> (a, c): the register holds a * tid + c in every thread (tid: the machine's linear
    thread index), for registers whose one unguarded definition is ``s2r tid.x``, a copy, or an
    add, subtract, shift or multiply by immediates of such values (``%tid.x`` read as an operand
    counts as (1, 0)). Only small values (below 2^24 in magnitude): no word wraps."""
    from qwengpu.codegen.softcore import definitions

    defs = definitions(prog)
    out: dict[int, tuple[int, int]] = {}

    def val(x: object) -> tuple[int, int] | None:
        if isinstance(x, Imm):
            v = x.v - (1 << 32) if x.v >> 31 else x.v
            return (0, v)
        if isinstance(x, SR):
            return (1, 0) if x.name == "tid.x" else None
        return out.get(x.n) if isinstance(x, R) else None

    for _ in range(4):  # definitions come before their readers but for loops' back edges
        for n, ds in defs.items():
            ins = ds[0]
            if len(ds) != 1 or ins.guard is not None or n in out or ins.mod("lane") is not None:
                continue
            if ins.op == "s2r":
                v = (1, 0) if ins.mod("sr") == "tid.x" else None
            else:
                xs = [val(x) for x in ins.s]
                if any(x is None for x in xs):
                    continue
                op, k = ins.op, ins.s[1] if len(ins.s) > 1 else None
                v = None
                if op == "mov":
                    v = xs[0]
                elif op in ("add", "addw"):
                    v = (xs[0][0] + xs[1][0], xs[0][1] + xs[1][1])
                elif op in ("sub", "subw"):
                    v = (xs[0][0] - xs[1][0], xs[0][1] - xs[1][1])
                elif op == "shl" and isinstance(k, Imm) and k.v < 24:
                    v = (xs[0][0] << k.v, xs[0][1] << k.v)
                elif op in ("mul", "mulw") and (xs[0][0] == 0 or xs[1][0] == 0):
                    f, g = (xs[0][1], xs[1]) if xs[0][0] == 0 else (xs[1][1], xs[0])
                    v = (f * g[0], f * g[1])
            if v is not None and abs(v[0]) < 1 << 24 and abs(v[1]) < 1 << 24:
                out[n] = v
    return out


def forward_own_words(prog: Program, threads: int) -> Program:
    """``st [a], v`` then only barriers, then ``ld d, [a]`` of the same word -> ``mov d, v`` (the
    allocator then gives d and v one register and drops the copy), when no other thread of the
    block can write that word in between. Why: a thread that keeps its own element in shared memory
    across a barrier reloads what it stored (``scan_hillis_steele`` at every step: a pass and a
    full word a lane for each reload).

    Exact when: the two rows read the same address register and fields, with the same guard, and
    nothing but ``bar`` rows between them, none a branch target (every lane that loads ran the
    store just before, and v still holds what it stored); every store and atomic of the program
    addresses 4 tid + K_i (``_tid_affine``: each thread its own words) with K_i the load's K or at
    least 4 ``threads`` away from it and word aligned to it, so no other thread's store reaches the
    word (blocks run one after another; the machine's threads are the block's)."""
    code = prog.code
    aff = _tid_affine(prog)

    def where(ins: MInstr) -> int | None:  # K of an address 4 tid + K, else None
        a = ins.s[0] if ins.s else None
        v = aff.get(a.n) if isinstance(a, R) else (1, 0) if isinstance(a, SR) and a.name == "tid.x" else None
        if v is None or v[0] != 4 or ins.mod("space") not in ("global", None) or ins.mod("size") != 4:
            return None
        return (ins.mod("base") or 0) + (ins.mod("off") or 0) + v[1]

    stores = [ins for ins in code if ins.op in ("st", "atom")]
    ks = [where(x) for x in stores]
    if not stores or any(k is None for k in ks):
        return prog
    targets = {x.target for x in code if x.target is not None}
    new: dict[int, MInstr | None] = {}
    for i, st in enumerate(code):
        if st.op != "st" or st.mod("lane") is not None:
            continue
        j = i + 1
        while j < len(code) and code[j].op == "bar" and j not in targets:
            j += 1
        if j == i + 1 or j >= len(code) or j in targets:
            continue
        ld = code[j]
        same = {k: st.m.get(k) for k in ("space", "base", "off", "amode", "size")} == {
            k: ld.m.get(k) for k in ("space", "base", "off", "amode", "size")}
        if ld.op != "ld" or ld.s[:1] != st.s[:1] or not same or ld.guard != st.guard:
            continue
        k = where(st)
        if k is None or any(x != k and ((x - k) % 4 or abs(x - k) < 4 * threads)  # type: ignore[operator]
                            for x in ks):
            continue
        new[j] = MInstr("mov", ld.d, (st.s[1],), {}, ld.guard, None, ld.ptx)
    return _rewrite(prog, new)


def _rewrite(prog: Program, new: dict[int, MInstr | None]) -> Program:
    """``prog`` with the rows of ``new`` replaced (None: removed; branches to a removed row land on
    the next one, ``regalloc.rebuild``); ``prog`` itself when ``new`` is empty."""
    if not new:
        return prog
    return rebuild(prog, [(pc, new.get(pc, ins)) for pc, ins in enumerate(prog.code)
                          if not (pc in new and new[pc] is None)])


#: the most rows a skipped run may have to be guarded instead (:func:`guard_short_skips`)
SKIP_ROWS = 6
#: ops a guarded row runs as the branch would have (no control, no one-lane expansion)
_GUARDABLE = frozenset({"add", "sub", "and", "or", "xor", "shl", "shr", "min", "max", "mul", "mov", "not",
                        "popc", "clz", "brev", "setp", "sel", "addw", "subw", "mulw", "ld", "st", "fadd",
                        "fsub", "s2r"})  # fmt: skip


def guard_short_skips(prog: Program) -> Program:
    """``@p bra L`` over a short straight run of rows -> the run's rows guarded by ``!p`` and no
    branch. Why: the branch is a pass of every lane group that reaches it, and a group whose lanes
    split there pays a MASK token (and its lanes' passes stay apart until L); guarded rows run in
    one pass of the whole group, each lane writing (and its result costing tokens) only where the
    guard holds, as the lanes that fell through did. A group whose lanes all jump now passes the
    run's rows instead of the branch: the run is at most ``SKIP_ROWS`` rows and not inside a loop,
    the price of a bounds check's last group against one token saved in every other group (inside
    a loop, a reduction's ``if (tid < s)``, most groups skip on most trips: ``smem_reduce`` wrote
    16% more tokens by the cost model), and not on an equality (``if (tid == 0)``: most groups
    skip).

    The run: no branch, call, barrier or exit, no row already guarded or one-lane, none that
    writes ``p``, no branch from elsewhere into it; its ops have the weights' guard (loads and
    stores too: a guarded-off lane does not access memory)."""
    code = prog.code
    into: dict[int, int] = {}
    for x in code:
        if x.target is not None:
            into[x.target] = into.get(x.target, 0) + 1
    back_edges = [(y.target, q) for q, y in enumerate(code) if y.target is not None and y.target <= q]
    equalities = {d.n for y in code if y.op == "setp" and y.mod("cmp") in ("eq", "ne") for d in y.d}
    new: dict[int, MInstr | None] = {}
    for b, br in enumerate(code):
        g, lbl = br.guard, br.target
        if br.op != "bra" or g is None or g.n == PT or lbl is None or not b + 1 < lbl <= b + 1 + SKIP_ROWS:
            continue
        run = code[b + 1 : lbl]
        if any(x.op not in _GUARDABLE or x.guard is not None or x.mod("lane") is not None
               or g.n in [d.n for d in x.d if isinstance(d, P)] for x in run):
            continue
        if any(into.get(q) for q in range(b + 1, lbl)) or any(q in new for q in range(b, lbl)):
            continue
        if any(t <= b < q for t, q in back_edges):
            continue  # inside a loop: groups that all skip would pass the rows on every trip
        if g.n in equalities:
            continue  # ``if (tid == 0)``: most groups skip
        new[b] = None
        for q in range(b + 1, lbl):
            new[q] = replace(code[q], guard=g.inv(), m=dict(code[q].m))
    return _rewrite(prog, new)


def drop_first_zeros(prog: Program) -> Program:
    """For a launch of one machine block: an unguarded ``mov r, 0`` that is the first write of ``r``
    on every path and runs once per thread goes, since the machine's registers (and the
    simulator's) start at 0. Once: no branch from it or after it goes back to it or before it, and
    it lies in the kernel, not in a routine the kernel calls (routines sit below the kernel, so
    every path to it runs rows of smaller pcs only). First: no row of a smaller pc writes ``r``."""
    code = prog.code
    start = code[0].target if code and code[0].op == "bra" and code[0].guard is None else 0
    back = min((x.target for pc, x in enumerate(code) if x.op == "bra" and x.target is not None
                and x.target <= pc), default=len(code))
    written: set[int] = set()
    drop: set[int] = set()
    for pc, x in enumerate(code):
        if (start <= pc < back and x.op == "mov" and x.guard is None and x.mod("lane") is None
                and x.s == (Imm(0),) and x.d[0].n not in written):
            drop.add(pc)
        written.update(d.n for d in x.d if isinstance(d, R))
    if not drop:
        return prog
    return rebuild(prog, [(pc, x) for pc, x in enumerate(code) if pc not in drop])


def fold_param_loads(prog: Program, bank: bytes) -> Program:
    """Every ``ld.param`` of a word of the launch's parameter bank -> ``mov d, word``: exactly the ROM
    row ``runtime.engine.encode_program`` makes of it. Why here: ``regalloc.allocate`` propagates a
    single-definition ``mov`` of an immediate into its readers and drops the ``mov``, so a kernel's
    ``n`` or buffer window is read from its readers' ROM rows instead of costing a pass and a
    result per lane group. Nothing is computed from the word (values stay the model's)."""
    out: list[MInstr] = []
    changed = False
    for ins in prog.code:
        a = ins.s[0] if ins.s else None
        if ins.op == "ld" and ins.mod("space") == "param" and ins.mod("size") == 4 and isinstance(a, Imm):
            addr = (a.v + (ins.mod("base") or 0) + (ins.mod("off") or 0)) & 0xFFFFFFFF
            if addr + 4 <= len(bank):
                word = int.from_bytes(bank[addr : addr + 4], "little")
                out.append(MInstr("mov", ins.d, (Imm(word),), {}, ins.guard, None, ins.ptx))
                changed = True
                continue
        out.append(ins)
    return replace(prog, code=out) if changed else prog


_MEM_OPS = frozenset({"ld", "st"})
_BLOCK_END = frozenset({"bra", "ret", "exit", "trap", "call", "bar"})


def _signed(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


def fold_address_offsets(prog: Program) -> Program:
    """``addw r, c, x`` (a buffer's window plus an index: PTX's ``add.s64 %rd, %base, %off`` once
    the window is an immediate, ``fold_param_loads``) whose every reader is the address of a
    ``ld``/``st`` in the same straight run of rows -> those rows address ``x`` with ``c`` added to
    their ``off`` field, and the ``addw`` goes: no pass and no result (three chunks a lane) for it.

    Exact: a memory row's address is ``base + sext(a) + off`` (ISA ``amode`` s), the ``addw``'s
    ``sext(c) + sext(x)``; the reads come after the ``addw`` with no row between that writes ``x``
    or enters from elsewhere (no branch target, call or barrier), so they see the ``x`` it added.
    A poisoned ``x`` (outside the window) still faults at the row; a sum the window could not hold
    (the ``addw``'s poison) is an address far outside the machine's memory, which the simulator and
    ``engine.BoundsWatch`` report as out of bounds. The watch still sees every address: it forms
    each lane's from the register the model wrote and the row's ``off``."""
    code = prog.code
    targets = {x.target for x in code if x.target is not None}
    defs: dict[int, int] = {}
    for ins in code:
        for d in ins.d:
            if isinstance(d, R):
                defs[d.n] = defs.get(d.n, 0) + 1
    readers: dict[int, list[int]] = {}
    for pc, ins in enumerate(code):
        for x in ins.s:
            if isinstance(x, R):
                readers.setdefault(x.n, []).append(pc)
    new: dict[int, MInstr | None] = {}
    for pc, ins in enumerate(code):
        if ins.op != "addw" or ins.guard is not None or ins.mod("lane") is not None or not ins.d:
            continue
        d = ins.d[0]
        a, b = ins.s
        sa, sb = ins.mod("sa"), ins.mod("sb")
        if isinstance(a, R) and isinstance(b, Imm):
            a, b, sa, sb = b, a, sb, sa
        if not (isinstance(a, Imm) and isinstance(b, R) and sb == "s") or defs.get(d.n) != 1:
            continue
        c = _signed(a.v) if sa == "s" else a.v
        uses = readers.get(d.n, [])
        if not uses or any(q <= pc for q in uses) or {b.n, d.n} & prog.pinned:
            continue
        last = max(uses)
        if any(q in targets for q in range(pc + 1, last + 1)) or any(
                x.op in _BLOCK_END or b in x.d for x in code[pc + 1 : last]):
            continue
        ok = all(
            code[q].op in _MEM_OPS and code[q].s[0] == d and d not in code[q].s[1:] and q not in new
            and code[q].mod("amode") == "s" and code[q].mod("space") == "global" for q in uses)
        if not ok or b in code[last].d and code[last].op != "st":
            continue
        for q in uses:
            y = code[q]
            new[q] = replace(y, s=(b, *y.s[1:]), m={**y.m, "off": (y.mod("off") or 0) + c})
        new[pc] = None
    return _rewrite(prog, new)


#: the special registers a ROM row can read as its operand a (``circuit.SR_CODES``; engine._specials)
ROW_SPECIALS = frozenset({"tid.x", "laneid", "warpid", "ctaid.x"})
#: ops whose operand a the encoder reads through the row's ``a_sr`` select and the simulator
#: through ``MachineSim._src``; memory ops are not among them (``engine.BoundsWatch`` forms
#: addresses from registers the model wrote)
SR_READERS = frozenset({"add", "sub", "and", "or", "xor", "shl", "shr", "min", "max", "mul", "mov",
                        "not", "popc", "clz", "brev", "setp", "sel", "addw", "subw", "mulw"})  # fmt: skip
_SWAP = frozenset({"add", "and", "or", "xor", "min", "max", "mul"})
_SWAP_CMP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _as_operand_a(ins: MInstr, v: R, sr: SR) -> MInstr | None:
    """``ins`` reading ``sr`` where it read ``v``, when ``v`` is read once and can be (or be swapped
    into) operand a; else None."""
    if (ins.op not in SR_READERS or ins.mod("lane") is not None or any(isinstance(x, SR) for x in ins.s)
            or [x == v for x in ins.s].count(True) != 1):
        return None
    k = ins.s.index(v)
    if k == 0:
        return replace(ins, s=(sr, *ins.s[1:]), m=dict(ins.m))
    if k != 1:
        return None
    if ins.op in _SWAP:
        return replace(ins, s=(sr, ins.s[0], *ins.s[2:]), m=dict(ins.m))
    if ins.op == "setp" and ins.mod("cmp") in _SWAP_CMP:
        return replace(ins, s=(sr, ins.s[0], *ins.s[2:]), m={**ins.m, "cmp": _SWAP_CMP[ins.mod("cmp")]})
    if ins.op == "sel":  # p ? a : b == !p ? b : a
        return replace(ins, s=(sr, ins.s[0], ins.s[2].inv()), m=dict(ins.m))
    return None


def fold_special_reads(prog: Program) -> Program:
    """:func:`_fold_special_reads` until nothing changes (a folded copy ``mov r, %tid.x`` is an
    ``s2r`` again: PTX's ``mov.u32 %r1, %tid.x`` is an ``s2r`` and a copy)."""
    for _ in range(4):
        out = _fold_special_reads(prog)
        if out is prog:
            break
        prog = out
    return prog


def _fold_special_reads(prog: Program) -> Program:
    """An ``s2r`` of ``tid.x``, ``laneid``, ``warpid`` or ``ctaid.x`` whose register every reader can
    take as operand a -> those readers read the special register themselves (``SR``: the ROM row's
    ``a_sr`` field) and the ``s2r`` goes. Why: a thread index costs a pass and a result per lane
    group (four SHORTs, or twelve chunks past 255) where its readers could select it for free.
    Only single, unguarded definitions of registers no one reads before them; the value is the same
    wherever read (a thread's indices are constant within a block)."""
    from qwengpu.codegen.regalloc import liveness

    defs: dict[int, list[int]] = {}
    for pc, ins in enumerate(prog.code):
        for x in ins.d:
            if isinstance(x, R):
                defs.setdefault(x.n, []).append(pc)
    cands = {
        ins.d[0].n: SR(ins.m["sr"]) if ins.op == "s2r" else ins.s[0]
        for ins in prog.code
        if (ins.op == "s2r" and ins.m.get("sr") in ROW_SPECIALS
            or ins.op == "mov" and isinstance(ins.s[0], SR))
        and ins.guard is None and ins.mod("lane") is None and len(defs.get(ins.d[0].n, [])) == 1
        and ins.d[0].n not in prog.pinned
    }
    if not cands:
        return prog
    live_in0 = liveness(prog.code, R)[0][0]
    cands = {v: sr for v, sr in cands.items() if not (live_in0 >> v) & 1}
    new: dict[int, MInstr | None] = {}  # pc -> the rewritten reader, or None: the s2r goes
    for v, sr in cands.items():
        readers = [pc for pc, ins in enumerate(prog.code) if R(v) in ins.s]
        done = {pc: _as_operand_a(new.get(pc) or prog.code[pc], R(v), sr) for pc in readers}
        if readers and all(y is not None for y in done.values()):
            new.update(done)
            new[defs[v][0]] = None
    return _rewrite(prog, new)


def expand_one_lane(prog: Program) -> Program:
    """Every ``fmulf`` without a lane -> four rows, lanes 0-3 (the one-lane multiplier of
    ``circuit.float_multiplier`` computes one lane of a group per row). After register allocation,
    so the allocator sees one definition; the four rows are adjacent and each writes its lanes only
    (``codegen.liveness``: a lane row kills nothing), and a row reads only its own lane's operands,
    so a destination that is also a source is safe: the rows before it wrote other lanes."""
    if not any(ins.op == "fmulf" and ins.mod("lane") is None for ins in prog.code):
        return prog
    items: list[tuple[int, MInstr]] = []
    for pc, ins in enumerate(prog.code):
        if ins.op == "fmulf" and ins.mod("lane") is None:
            for k in range(4):
                items.append((pc if k == 0 else AFTER, replace(ins, m={**ins.m, "lane": k})))
        else:
            items.append((pc, ins))
    return rebuild(prog, items)


# ---------------------------------------------------------------------------------------------
# running it on the simulator exactly as the weights run it
# ---------------------------------------------------------------------------------------------
def _end(gmem: object, read_only: bool) -> int:
    """The gmem word after the last buffer below the read-only region (``read_only``: in it)."""
    ro = getattr(gmem, "ro_base", None)
    ends = [(b.start - GLOBAL_BASE + b.size + 3) // 4 for b in gmem.buffers  # type: ignore[attr-defined]
            if (ro is not None and b.start - GLOBAL_BASE >= ro) == read_only]
    return max(ends, default=0)


def buffers_end(gmem: object) -> int:
    """The gmem word after the launch's last buffer (what must fit below the machine's regions;
    the guard gap after it holds nothing). Buffers in the read-only words above do not count."""
    return _end(gmem, False)


def read_only_end(gmem: object) -> int:
    """The gmem word after the last buffer in the read-only words (0: none there)."""
    return _end(gmem, True)


def extend_gmem(gmem: object, plan: MemPlan) -> None:
    """Global memory of a bound launch extended to the machine's gmem: one buffer over the
    machine's own regions (so the simulator checks accesses against them, and they persist
    across blocks as gmem does in the weights). Refuses an arena that overlaps them."""
    import numpy as np

    from qwengpu.simt.memory import Buffer

    arena = gmem.arena  # type: ignore[attr-defined]
    plan.check_arena(buffers_end(gmem))
    total = 4 * plan.gmem_words
    if getattr(gmem, "ro_base", None) is not None:  # the read-only words above stay
        total = max(total, len(arena))
    new = np.zeros(total, dtype=np.uint8)
    n = min(len(arena), total)  # (beyond the last buffer: its zero guard gap)
    new[:n] = arena[:n]
    gmem.arena = new  # type: ignore[attr-defined]
    lo = plan.bottom
    if lo < plan.gmem_words:
        gmem.buffers.append(Buffer("(machine regions)", GLOBAL_BASE + 4 * lo, 4 * (plan.gmem_words - lo)))  # type: ignore[attr-defined]
    bufs = sorted(gmem.buffers, key=lambda b: b.start)  # type: ignore[attr-defined]
    gmem.buffers = bufs  # type: ignore[attr-defined]
    gmem._starts = np.array([b.start for b in bufs], dtype=np.uint64)  # type: ignore[attr-defined]
    # bounds at word granularity, as the weights' memory (a sub-word store rewrites its whole word;
    # its load still checks the original bytes)
    gmem._ends = np.array([b.start + (b.size + 3) // 4 * 4 for b in bufs], dtype=np.uint64)  # type: ignore[attr-defined]


def simulate_weights(
    module: object,
    spec: object,
    *,
    max_steps: int | None = None,
    options: Options | None = None,
    k_regs: int | None = None,
    transform: Callable[[Program], Program] | None = None,
    trace: Callable[[str], None] | None = None,
    gmem_words: int | None = None,
    fold_params: bool = True,
) -> tuple[dict, object, Program, MemPlan]:
    """Lower, ``lower_for_weights`` and run on the ISA simulator as the circuit runs it (a 1-D
    launch of the linear thread/block indices, gmem persisting across blocks): (outputs, stats,
    allocated program, plan). ``gmem_words``: the machine's global memory (None: the 2B
    machine's, ``LIMITS.writable_words``). ``fold_params``: give the lowering the launch's
    parameter bank (``Options.param_bank``), as the engine does; off: the loads stay."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.isa.sim import DEFAULT_MAX_STEPS, MachineSim, check_memory_limits, check_program_limits
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.simt.memory import place_module_globals
    from qwengpu.spec import bind, read_outputs

    fn = _find_kernel(module, spec.kernel)  # type: ignore[arg-type, attr-defined]
    prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])  # type: ignore[arg-type, attr-defined]
    check_memory_limits(prog)
    if transform is not None:
        prog = transform(prog)
    grid, block = tuple(spec.grid), tuple(spec.block)  # type: ignore[attr-defined]
    bound = bind(spec, inline_calls(module, fn))  # type: ignore[arg-type]
    # module variables before the machine's regions, as the engine
    # the launch's scalar parameters bound the values loaded from them, as in engine.prepare
    from qwengpu.isa.sim import param_bank

    bank = param_bank(prog, bound.param_bytes, place_module_globals(bound.gmem, prog.layout.global_vars))
    options = replace(options or Options(), param_words=bound.param_words,
                      param_bank=bank if fold_params else b"")
    out, plan = lower_for_weights(prog, grid, block, spec.shared_bytes, options=options, k_regs=k_regs,  # type: ignore[arg-type, attr-defined]
                                  gmem_words=gmem_words, arena_words=buffers_end(bound.gmem))
    check_program_limits(out)
    extend_gmem(bound.gmem, plan)
    sim = MachineSim(out, max_steps=max_steps or DEFAULT_MAX_STEPS, trace=trace)
    st = sim.launch((plan.mblocks, 1, 1), (plan.threads, 1, 1), bound.param_bytes, bound.gmem)
    return read_outputs(spec, bound.gmem), st, out, plan  # type: ignore[arg-type]


def run_weights(cu_path: str | Path, spec_path: str | Path | None = None, **kw: object):
    """``sim.run_machine_sim`` for the program the weights run (``simulate_weights``)."""
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file
    from qwengpu.isa.sim import MachineResult
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.spec import compare, default_spec_path, load_spec

    cu = Path(cu_path)
    spec = load_spec(spec_path if spec_path is not None else default_spec_path(cu))
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=f"{cu.name} (PTX)")
    t0 = time.perf_counter()
    outputs, st, prog, plan = simulate_weights(module, spec, **kw)  # type: ignore[arg-type]
    sd = st.as_dict()  # type: ignore[attr-defined]
    sd["seconds"] = round(time.perf_counter() - t0, 6)
    sd["plan"] = plan.describe()
    return MachineResult(spec.kernel, outputs, sd, compare(spec, outputs), prog, spec)


#: ops (besides ``soft.WEIGHT_OPS``) the engine encodes or another expander still owns
OTHER_OPS = frozenset({"bar", "trap", "call", "ret", "fadd", "fsub", "fmul", "ffma", "fmin", "fmax",
                       "fsetp", "i2f", "f2i", "frnd", "fdiv", "fsqrt", "fex2", "frsqrt"})  # fmt: skip

__all__ = [
    "MemPlan",
    "MemOptions",
    "plan_memory",
    "expand_with_launch",
    "lower_for_weights",
    "extend_gmem",
    "buffers_end",
    "simulate_weights",
    "run_weights",
    "shared_size",
    "shfl_sources",
    "OTHER_OPS",
]
