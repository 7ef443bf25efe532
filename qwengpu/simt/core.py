"""The SIMT core both oracles share: warps, min-PC scheduling, reconvergence, barriers, blocks.

Why one module: the PTX interpreter (``qwengpu.simt.interp``) and the machine-ISA simulator
(``qwengpu.isa.sim``) must schedule threads identically (the simulator reproduces the
interpreter's counts and bits), but they must stay independent in what an instruction *means*.
So this module owns only execution structure: per-lane PCs and liveness, the min-PC scheduler
that reconverges NVVM's unstructured control flow, ``bar.sync`` arrival and release (lanes parked
at a barrier keep their own PC while the rest of the warp runs on), the block loop over the
grid, special-register values, fault and step-limit messages. Each oracle subclasses
:class:`SimtCore`, builds its own instruction closures and keeps its own issue accounting (a
PTX issue is not a machine issue) in :meth:`SimtCore._run_uniform` and
:meth:`SimtCore._account_one`.

A closure is ``code[pc](w, m) -> (kind, arg)``; ``m`` is the active-lane mask, ``None`` for all
32 lanes (the common case). ``kind`` is one of :data:`NEXT`, :data:`JUMP` (to ``arg``),
:data:`DIVERGED`, :data:`EXIT`, :data:`BARRIER` or :data:`RET` (a jump whose lanes' bookkeeping
the closure already did; the machine's ``ret``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from qwengpu.errors import ExecutionError, PTXError
from qwengpu.simt.memory import GLOBAL_BASE, LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE, GlobalMemory

WARP = 32
DEFAULT_MAX_STEPS = 5_000_000
#: the fault message of PTX ``trap`` / ``brkpt``, the same on the interpreter, the ISA simulator and the model
TRAP_MESSAGE = "the kernel executed `trap` (__trap(), or a failed device assert)"
LANES = np.arange(WARP, dtype=np.uint32)
ALL = np.ones(WARP, dtype=bool)
ALL.flags.writeable = False  # a mask of None means "all 32 lanes active" (the common case)
NEXT, JUMP, DIVERGED, EXIT, BARRIER, RET = 0, 1, 2, 3, 4, 5
NOT_RUNNABLE = 1 << 40  # the candidate PC of a lane that cannot run (exited or waiting)


def as_lanes(x: object) -> np.ndarray:
    """``x`` as one value per lane (read-only use): itself when it already is (the hot path of every
    instruction), a fresh array for a scalar operand; ``np.broadcast_to`` cost several microseconds
    a call, a fifth of the simulators' time in the tests."""
    a = np.asarray(x)
    if a.shape == (WARP,):
        return a
    return np.full(WARP, a, dtype=a.dtype) if a.ndim == 0 else np.broadcast_to(a, (WARP,))
M32 = 0xFFFFFFFF


@dataclass
class BlockCounts:
    """The counters the core keeps; each oracle's stats add what it counts per issue."""

    blocks: int = 0
    warps: int = 0
    divergent_branches: int = 0
    barriers: int = 0


def shared_extent(static_shared: int, dynamic_shared: int, has_dynamic_syms: bool) -> int:
    """A block's shared-memory bytes: the dynamic part starts 16-aligned after the static
    variables when the kernel declares an extern array, else right after them."""
    dyn_off = (static_shared + 15) // 16 * 16
    size = dyn_off + dynamic_shared if has_dynamic_syms else static_shared
    return max(size, static_shared + dynamic_shared)


class Block:
    """Per-block memories: shared, the local memory of its threads, the machine's spill slots."""

    def __init__(
        self,
        ctaid: tuple[int, int, int],
        nthreads: int,
        shared_size: int,
        local_size: int,
        shared_init: list[tuple[int, bytes]],
        spill_size: int = 0,
    ) -> None:
        self.ctaid = ctaid
        self.shared = np.zeros((shared_size + 7) // 8 * 8, dtype=np.uint8)
        for off, data in shared_init:
            self.shared[off : off + len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.shared_size = shared_size
        self.local_size = local_size
        self.local = np.zeros(max(8, nthreads * local_size), dtype=np.uint8)
        self.spill = np.zeros(max(8, nthreads * spill_size), dtype=np.uint8)


class SimtWarp:
    """Scheduling state of one warp: per-lane PCs, liveness, barrier waits, special registers.

    ``conv`` is the common PC while all runnable lanes agree (then ``pcs`` is stale for them and
    ``cmask`` is the active mask), else -1; ``cand`` caches, while diverged, each lane's PC
    (:data:`NOT_RUNNABLE` for lanes that cannot run) and ``nrun`` the runnable lanes' count.
    Each oracle's warp adds its register file."""

    __slots__ = (
        "pcs",
        "live",
        "waiting",
        "conv",
        "cmask",
        "cand",
        "nrun",
        "special",
        "lbase",
        "thread",
        "block",
        "warp_id",
        "done",
        "nlanes",
    )

    def __init__(self, block: Block, warp_id: int, threads: np.ndarray) -> None:
        self.nlanes = len(threads)
        self.live = np.zeros(WARP, dtype=bool)
        self.live[: self.nlanes] = True
        self.waiting = np.zeros(WARP, dtype=bool)
        self.pcs = np.zeros(WARP, dtype=np.int64)
        self.conv = 0
        self.cmask = None if self.nlanes == WARP else self.live.copy()
        self.cand: np.ndarray | None = None
        self.nrun = self.nlanes
        self.thread = np.zeros(WARP, dtype=np.int64)  # linear thread index in block (padding lanes: 0)
        self.thread[: self.nlanes] = threads
        self.block = block
        self.warp_id = warp_id
        self.done = self.nlanes == 0
        self.special: dict[str, np.ndarray] = {}
        self.lbase = self.thread.astype(np.uint64) * np.uint64(block.local_size)


# ---------------------------------------------------------------------- control-flow primitives
def materialize(w: SimtWarp) -> None:
    """Write the converged PC back to the runnable lanes only: waiting lanes keep theirs."""
    if w.conv >= 0:
        w.pcs[w.live & ~w.waiting] = w.conv


def branch(w: SimtWarp, m: np.ndarray | None, taken: np.ndarray, pc: int, tpc: int) -> tuple[int, int]:
    """A conditional branch of the active lanes ``m``: uniform (NEXT or JUMP) or split (DIVERGED)."""
    act = ALL if m is None else m
    nt = int(taken.sum())
    if nt == 0:
        return (NEXT, 0)
    if nt == int(act.sum()):
        return (JUMP, tpc)
    materialize(w)
    w.pcs[act] = pc + 1
    w.pcs[taken] = tpc
    return (DIVERGED, 0)


def retire(w: SimtWarp, m: np.ndarray | None) -> tuple[int, int]:
    """The active lanes exit."""
    materialize(w)
    w.live &= ~(ALL if m is None else m)
    return (EXIT, 0)


def arrive(w: SimtWarp, act: np.ndarray, pc: int) -> tuple[int, int]:
    """The lanes ``act`` park at the barrier at ``pc``; they resume at ``pc + 1`` on its release."""
    materialize(w)
    w.pcs[act] = pc + 1
    w.waiting |= act
    w.conv = -1
    return (BARRIER, 0)


def reconverge(w: SimtWarp) -> None:
    """Recompute the converged state from the per-lane PCs of the runnable lanes."""
    w.cand = None
    run = w.live & ~w.waiting
    if not run.any():
        w.conv = -1
        return
    pcs = w.pcs[run]
    lo = pcs.min()
    w.conv = int(lo) if (pcs == lo).all() else -1
    w.cmask = None if (w.nlanes == WARP and run.all()) else run


def generic_space(a: np.ndarray) -> tuple[str, int]:
    """The state space a generic access goes to, decided by its first lane's address, and the
    window's base (0 for global): all lanes of one access must agree on the space."""
    first = int(a[0]) if len(a) else GLOBAL_BASE
    if SHARED_WINDOW <= first < SHARED_WINDOW + WINDOW_SIZE:
        return "shared", SHARED_WINDOW
    if LOCAL_WINDOW <= first < LOCAL_WINDOW + WINDOW_SIZE:
        return "local", LOCAL_WINDOW
    return "global", 0


def mask_word(m: np.ndarray | None) -> int:
    """The active mask as a 32-bit word (lane 0 in bit 0), for traces."""
    return 0xFFFFFFFF if m is None else int(np.packbits(m[::-1]).view(">u4")[0])


def shuffle_lanes(mode: str, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``shfl``'s source lane of every lane and whether it is in range (PTX ISA ``shfl.sync``):
    ``b`` the lane/offset operand, ``c`` the packed clamp and segment mask."""
    lane = LANES.astype(np.int64)
    bval = b.astype(np.int64) & 31
    cv = c.astype(np.int64)
    cval = cv & 31
    segmask = (cv >> 8) & 31
    max_lane = (lane & segmask) | (cval & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - bval
        ok = j >= max_lane
    elif mode == "down":
        j = lane + bval
        ok = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        ok = j <= max_lane
    else:
        j = min_lane | (bval & ~segmask)
        ok = j <= max_lane
    return np.where(ok, j, lane), ok


def warp_vote(mode: str, p: np.ndarray, act: np.ndarray) -> bool:
    """``vote.{all,any,uni}`` of the predicate ``p`` (already masked by ``act``) over the active lanes."""
    if mode == "all":
        return bool(p[act].all())
    if mode == "any":
        return bool(p.any())
    pv = p[act]
    return bool(pv.all() or not pv.any())


def special_value(
    name: str,
    t: np.ndarray,
    ctaid: tuple[int, int, int],
    ntid: tuple[int, int, int],
    nctaid: tuple[int, int, int],
    wid: int,
    nwarps: int,
    shared_size: int,
    static_shared: int,
) -> np.ndarray:
    """The 32 lanes' value of special register ``name`` (``tid.x``, ``laneid``, ...) as uint32.

    ``t`` is the lanes' linear thread index in the block. Where the hardware gives no reproducible
    value the model picks one: no cluster launch (every CTA is its own 1x1x1 cluster), one SM, one
    grid. ``%dynamic_smem_size`` counts from the end of the static variables, so the padding that
    aligns the dynamic part to 16 bytes is included (codegen/softmem.py and
    tests/machine/test_softmem.py model the same); ``%total_smem_size`` is static + dynamic."""
    bx, by, _ = ntid
    one = np.uint64(1)
    lane64 = LANES.astype(np.uint64)
    axes = {"x": 0, "y": 1, "z": 2}
    base, _, axis = name.partition(".")
    if base == "tid":
        v = {"x": t % bx, "y": (t // bx) % by, "z": t // (bx * by)}[axis]
    elif base in ("ntid", "ctaid", "nctaid", "clusterid", "nclusterid"):
        src = {"ntid": ntid, "ctaid": ctaid, "nctaid": nctaid, "clusterid": ctaid, "nclusterid": nctaid}[base]
        v = np.full(WARP, src[axes[axis]])
    elif base in ("cluster_ctaid", "cluster_ctarank", "is_explicit_cluster", "current_graph_exec"):
        v = np.zeros(WARP)  # rank 0 of an implicit cluster; not launched from a CUDA graph
    elif base in ("cluster_nctaid", "cluster_nctarank", "nsmid"):
        v = np.ones(WARP)
    elif base == "laneid":
        v = LANES
    elif base == "warpid":
        v = np.full(WARP, wid)
    elif base == "nwarpid":
        v = np.full(WARP, nwarps)
    elif base == "warpsize":
        v = np.full(WARP, WARP)
    elif base.startswith("lanemask_"):
        v = {
            "lanemask_eq": one << lane64,
            "lanemask_lt": (one << lane64) - one,
            "lanemask_le": (one << (lane64 + one)) - one,
            "lanemask_ge": ~((one << lane64) - one),
            "lanemask_gt": ~((one << (lane64 + one)) - one),
        }[base]
    elif base == "dynamic_smem_size":
        v = np.full(WARP, shared_size - static_shared)
    elif base == "total_smem_size":
        v = np.full(WARP, shared_size)
    elif base in ("smid", "gridid"):  # a single SM, a single grid
        v = np.zeros(WARP)
    else:  # pragma: no cover - each oracle refuses everything else before a launch
        raise PTXError(f"special register %{name} is not supported")
    return (np.asarray(v).astype(np.uint64) & np.uint64(M32)).astype(np.uint32)


# ---------------------------------------------------------------------- the core
class SimtCore:
    """Block loop, warp round-robin between barriers and the min-PC warp scheduler.

    A subclass sets ``code`` (one closure per pc), ``kernel_name``, ``max_steps``, ``stats``
    (with ``blocks``, ``warps``, ``barriers``, ``divergent_branches``), ``steps_left``,
    ``grid``, ``blockdim``, ``shared_size``, ``static_shared``, ``local_size`` and
    ``launch_specials`` (the special registers to give each warp at its start), and implements
    the hooks :meth:`_new_block`, :meth:`_new_warp`, :meth:`_run_uniform` and :meth:`_account_one`."""

    code: list[Callable]
    kernel_name: str
    max_steps: int
    steps_left: int
    stats: Any
    grid: tuple[int, int, int]
    blockdim: tuple[int, int, int]
    shared_size: int
    static_shared: int
    local_size: int
    launch_specials: list[str]
    gmem: GlobalMemory
    param_mem: np.ndarray
    param_size: int

    # ---- launch
    def launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        param_bytes: bytes,
        gmem: GlobalMemory,
        *,
        dynamic_shared: int = 0,
        progress: Callable[[Any], None] | None = None,
    ) -> Any:
        """Run the kernel over the grid; global memory is modified in place. Returns the stats;
        ``progress(stats)`` is called after every block."""
        self.gmem = gmem
        self.grid, self.blockdim = grid, block
        self._prepare(param_bytes, gmem, dynamic_shared)
        self.steps_left = self.max_steps
        self._run_grid(block[0] * block[1] * block[2], progress)
        return self.stats

    # ---- hooks
    def _prepare(self, param_bytes: bytes, gmem: GlobalMemory, dynamic_shared: int) -> None:
        """Lay out the launch (parameters, shared memory, module globals), build the code if it
        needs building and set fresh ``stats``."""
        raise NotImplementedError

    def _new_block(self, ctaid: tuple[int, int, int], nthreads: int) -> Block:
        raise NotImplementedError

    def _new_warp(self, blk: Block, wid: int, threads: np.ndarray) -> SimtWarp:
        raise NotImplementedError

    def _run_uniform(self, w: SimtWarp) -> int:
        """Issue from ``w.conv`` for the lanes ``w.cmask`` while control flow stays uniform;
        return the kind that ended the run (DIVERGED, EXIT or BARRIER)."""
        raise NotImplementedError

    def _account_one(self, w: SimtWarp, pc: int, m: np.ndarray) -> None:
        """Count (and trace) one issue of ``pc`` for the diverged lanes ``m``; raise at the step limit."""
        raise NotImplementedError

    def _landed(self, w: SimtWarp, pc: int, m: np.ndarray, kind: int) -> None:
        """After a diverged issue that went on to the next pc or jumped (the machine's PTX entries)."""

    def _release(self, warps: list[SimtWarp]) -> None:
        """Just before a barrier releases its block (the interpreter's ``bar.red``)."""

    def _param_ok(self, a: np.ndarray, size: int) -> np.ndarray:
        """Which kernel-parameter addresses ``a`` may be read ``size`` bytes wide."""
        return a + np.uint64(size) <= np.uint64(self.param_size)

    # ---- grid and block
    def _run_grid(self, nthreads: int, progress: Callable | None = None) -> None:
        """Run every block of ``self.grid`` in order (x fastest); ``stats.seconds`` as it goes."""
        grid = self.grid
        t0 = time.perf_counter()
        with np.errstate(all="ignore"):
            for bz in range(grid[2]):
                for by in range(grid[1]):
                    for bx in range(grid[0]):
                        self._run_block((bx, by, bz), nthreads)
                        if progress is not None:
                            self.stats.seconds = time.perf_counter() - t0
                            progress(self.stats)
        self.stats.seconds = time.perf_counter() - t0

    def _run_block(self, ctaid: tuple[int, int, int], nthreads: int) -> None:
        """The block's warps run round-robin until each exits or waits; a barrier releases when
        every live thread of the block has arrived."""
        blk = self._new_block(ctaid, nthreads)
        stats = self.stats
        stats.blocks += 1
        warps = []
        for wid in range((nthreads + WARP - 1) // WARP):
            threads = np.arange(wid * WARP, min(nthreads, (wid + 1) * WARP), dtype=np.int64)
            w = self._new_warp(blk, wid, threads)
            self._specials(w, ctaid, nthreads, wid)
            warps.append(w)
        stats.warps += len(warps)
        while True:
            progressed = False
            for w in warps:
                if not w.done and not (w.waiting[w.live].all() and w.live.any()):
                    self._run_warp(w)
                    progressed = True
            pending = [w for w in warps if not w.done]
            if not pending:
                return
            if all(w.waiting[w.live].all() for w in pending):
                stats.barriers += 1
                self._release(warps)
                for w in warps:
                    w.waiting[:] = False
                    reconverge(w)
            elif not progressed:
                raise ExecutionError("internal scheduler deadlock")  # pragma: no cover

    def _specials(self, w: SimtWarp, ctaid: tuple[int, int, int], nthreads: int, wid: int) -> None:
        """The special registers of a warp that the kernel reads at launch values."""
        nwarps = (nthreads + WARP - 1) // WARP
        for name in self.launch_specials:
            w.special[name] = special_value(
                name, w.thread, ctaid, self.blockdim, self.grid, wid, nwarps, self.shared_size,
                self.static_shared,
            )  # fmt: skip

    # ---- the warp scheduler
    def _run_warp(self, w: SimtWarp) -> None:
        """Issue instructions for one warp until it exits or all its live lanes wait at a barrier.

        Converged, the oracle's tight loop runs; diverged, the lanes with the smallest PC issue
        (min-PC scheduling) until all runnable lanes share one PC again."""
        code = self.code
        n = len(code)
        stats = self.stats
        full = w.nlanes == WARP
        while True:
            if w.conv >= 0:
                kind = self._run_uniform(w)
            else:
                cand = w.cand
                if cand is None:
                    run = w.live & ~w.waiting
                    w.nrun = int(np.count_nonzero(run))
                    if w.nrun == 0:
                        return
                    cand = w.cand = np.where(run, w.pcs, NOT_RUNNABLE)
                pc = int(cand.min())
                m = cand == pc
                if int(np.count_nonzero(m)) == w.nrun:
                    w.conv = pc
                    w.cmask = None if (full and w.nrun == WARP) else m
                    w.cand = None
                    continue
                if pc >= n:
                    raise self._past_end()
                self._account_one(w, pc, m)
                kind, arg = code[pc](w, m)
                if kind == NEXT:
                    w.pcs[m] = pc + 1
                    cand[m] = pc + 1
                    self._landed(w, pc, m, kind)
                    continue
                if kind == JUMP or kind == RET:
                    w.pcs[m] = arg
                    cand[m] = arg
                    if kind == JUMP:
                        self._landed(w, pc, m, kind)
                    continue
                w.cand = None
            if kind == DIVERGED:
                stats.divergent_branches += 1
                w.conv = -1
            elif kind == EXIT:
                if not w.live.any():
                    w.done = True
                    return
                reconverge(w)
            elif kind == BARRIER:
                reconverge(w)
                if not (w.live & ~w.waiting).any():
                    return

    # ---- memory
    def _access(
        self,
        w: SimtWarp,
        a: np.ndarray,
        lanes: np.ndarray,
        size: int,
        space: str,
        ins: Any,
        store: bool,
        poison: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The memory and byte indices of the active lanes' space-relative addresses ``a``
        (``lanes`` the active mask, ``a`` already taken at it), or the fault of the first lane
        whose access is out of bounds (``poison``: its address left the machine's 32-bit window),
        read-only or misaligned; ``ins`` is the PTX instruction the messages name."""
        if space in ("global", "const"):
            ok = self.gmem.check(a, size)
            mem, idx = self.gmem.arena, a - np.uint64(GLOBAL_BASE)
            if store and self.gmem.has_readonly and ok.all() and (poison is None or not poison.any()):
                for b in self.gmem.buffers:
                    if b.readonly and ((a >= b.start) & (a < b.start + b.size)).any():
                        lane = int(np.nonzero(lanes)[0][0])
                        raise self._fault(w, lane, ins, f"store to read-only memory '{b.name}'")
        elif space == "shared":
            ok = a + np.uint64(size) <= np.uint64(w.block.shared_size)
            mem, idx = w.block.shared, a
        elif space in ("local", "callparam"):
            ok = a + np.uint64(size) <= np.uint64(self.local_size)
            mem, idx = w.block.local, a + (w.lbase if lanes is ALL else w.lbase[lanes])
        elif space == "param":
            if store:
                raise PTXError(f"{ins.where()}: store to kernel parameter space: `{ins.text}`")
            ok = self._param_ok(a, size)
            mem, idx = self.param_mem, a
        else:  # pragma: no cover
            raise PTXError(f"{ins.where()}: unsupported state space {space}: `{ins.text}`")
        if poison is not None:
            ok = ok & ~poison
        aligned = (a & np.uint64(size - 1)) == 0 if size > 1 else ok
        if (ok & aligned).all():  # one reduction for bounds and alignment together
            return mem, idx
        if not ok.all():
            k = int(np.argmin(ok))
            lane = int(np.nonzero(lanes)[0][k])
            what = "store" if store else "load"
            if poison is not None and poison[k]:
                raise self._fault(
                    w,
                    lane,
                    ins,
                    f"out-of-bounds {space} {what} of {size} bytes: the address is "
                    "more than 2 GiB away from the machine's 32-bit address window",
                )
            bad = int(a[k])
            if space in ("global", "const"):
                where = f"address 0x{bad:x} ({self.gmem.describe(bad)})"
            else:
                limit = {"shared": w.block.shared_size, "param": self.param_size}.get(space, self.local_size)
                where = f"{space} offset {bad} (size {limit} bytes)"
            raise self._fault(w, lane, ins, f"out-of-bounds {space} {what} of {size} bytes at {where}")
        k = int(np.argmin(aligned))
        lane = int(np.nonzero(lanes)[0][k])
        raise self._fault(w, lane, ins, f"misaligned {size}-byte access at address 0x{int(a[k]):x}")

    # ---- messages
    def _past_end(self) -> ExecutionError:
        return ExecutionError(f"thread ran past the end of kernel {self.kernel_name} without `ret`")

    def _step_limit_error(self, w: SimtWarp, where: str, text: str) -> ExecutionError:
        """The step limit's message, naming the PTX instruction ``text`` at ``where``."""
        return ExecutionError(
            f"step limit reached: {self.max_steps} warp instructions executed without finishing "
            f"(last at {where}: `{text}`, block {w.block.ctaid}, warp {w.warp_id}); "
            "the kernel may loop forever — raise the limit with --max-steps"
        )

    def _fault(self, w: SimtWarp, lane: int, ins: Any, msg: str) -> ExecutionError:
        """A fault of one thread, named by thread and block index, warp and lane, and the PTX
        instruction ``ins`` (anything with ``text`` and ``where()``)."""
        t = int(w.thread[lane])
        bx, by, _ = self.blockdim
        tid = (t % bx, (t // bx) % by, t // (bx * by))
        return ExecutionError(
            f"{msg}\n  thread {tid} of block {w.block.ctaid} (warp {w.warp_id}, lane {lane})\n"
            f"  instruction `{ins.text}` at {ins.where()}"
        )
