"""Exact reference simulator of the machine: runs a lowered program on a model of its datapath.

Why: the compiled transformer must reproduce this simulator token for token, and this simulator
must reproduce the interpreter bit for bit; it is the bridge between the two oracles.

Datapath model: a warp of 32 threads issues one machine instruction at a time (per-lane PCs,
min-PC scheduling, barriers and the block loop: ``qwengpu.simt.core``, the interpreter's own
scheduler; this module gives only the machine instructions their meaning); the 4-lane datapath executes it in
up to 8 passes of 4 lanes, skipping lane groups with no active thread. Lanes are independent
within a pass; cross-lane ops (``shfl``, ``vote``, ``ballot``) read the other lanes' registers,
and the lowering guarantees their destination is not one of their sources, so executing them
pass by pass gives the same result as reading the whole warp first. Atomics are applied lane by
lane in lane order. Float semantics come from ``qwengpu.simt.fp32`` (the interpreter's own
functions); fault messages are the interpreter's, naming the PTX instruction each machine
instruction came from.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from qwengpu.errors import ExecutionError, MachineLimitError, PTXError
from qwengpu.isa import f64
from qwengpu.isa.instr import POISON, PT, SR, Imm, MInstr, P, R
from qwengpu.isa.limits import LIMITS, need
from qwengpu.isa.program import Program, local_words_used
from qwengpu.ptx.ir import TYPES, Instr
from qwengpu.simt import core, fp32
from qwengpu.simt import ops as iops
from qwengpu.simt.core import (
    ALL,
    DEFAULT_MAX_STEPS,
    DIVERGED,
    JUMP,
    LANES,
    M32,
    NEXT,
    RET,
    TRAP_MESSAGE,
    WARP,
    Block,
    as_lanes,
)
from qwengpu.simt.memory import GLOBAL_BASE, GlobalMemory

U32 = np.uint32
#: state spaces whose addresses are 32 bits wide (computed modulo 2^32)
ADDR32_SPACES = ("shared", "local", "callparam", "param")


@dataclass
class SimStats(core.BlockCounts):
    """What a launch did on the machine."""

    warp_instructions: int = 0  # machine warp instructions issued
    passes: int = 0  # 4-lane datapath passes
    lane_instructions: int = 0  # machine instructions summed over active lanes
    ptx_warp_instructions: int = 0  # PTX-level issues (what the interpreter counts)
    machine_instructions: int = 0  # program size
    registers: int = 0
    predicates: int = 0
    atomic_lanes: int = 0
    seconds: float = 0.0
    machine_by_ptx: list[int] = field(default_factory=list)  # machine warp issues per PTX instruction
    issues_by_ptx: list[int] = field(default_factory=list)  # PTX-level issues per PTX instruction

    def as_dict(self) -> dict:
        d = {
            k: getattr(self, k)
            for k in (
                "warp_instructions",
                "passes",
                "lane_instructions",
                "ptx_warp_instructions",
                "machine_instructions",
                "registers",
                "predicates",
                "blocks",
                "warps",
                "divergent_branches",
                "barriers",
                "atomic_lanes",
            )
        }
        d["passes_per_warp_instruction"] = round(self.passes / max(self.warp_instructions, 1), 4)
        d["seconds"] = round(self.seconds, 6)
        return d


class Warp(core.SimtWarp):
    """A machine warp: the scheduling state of :class:`core.SimtWarp`, register file and predicates,
    and each lane's PTX entry (for counting PTX-level issues)."""

    __slots__ = ("R", "Pr", "entry")

    def __init__(self, nregs: int, npreds: int, block: Block, warp_id: int, threads: np.ndarray) -> None:
        super().__init__(block, warp_id, threads)
        self.R = np.zeros((max(nregs, 1), WARP), dtype=np.uint32)
        self.Pr = np.zeros((max(npreds, 1), WARP), dtype=bool)
        self.entry = np.zeros(WARP, dtype=np.int64)  # PTX index each lane last arrived at


def _type_of(ins: Instr) -> str:
    for m in reversed(ins.mods):
        if m in TYPES:
            return m
    return "b32"


_BOPS = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}  # setp/plop's predicate combine
_DT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
_SDT = {1: np.int8, 2: np.int16, 4: np.int32}


#: the special registers the machine gives launch values (``s2r``); ``clock`` is read at issue time
MACHINE_SPECIALS = {"tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "dynamic_smem_size",
                    "total_smem_size"}  # fmt: skip


def _machine_special(name: str) -> bool:
    base = name.partition(".")[0]
    return base in MACHINE_SPECIALS or base.startswith("lanemask_")


def _one_lane(f: Callable, k: int) -> Callable:
    """A one-lane row (``lane`` k): only the threads at position k of their lane group run it, the
    others see a guarded-off row (the weights: ``circuit.one_lane_guard``)."""
    mine = (np.arange(WARP) % 4) == k

    def one_lane(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
        mm = mine if m is None else (m & mine)
        if not mm.any():
            return (NEXT, 0)
        return f(w, mm)

    return one_lane


def _window(d: int) -> int:
    """A signed offset as a window word (POISON when out of the window)."""
    if -(2**31 - 1) <= d <= 2**31 - 1:
        return d & M32
    return POISON


def param_bank(prog: Program, param_bytes: bytes, global_addr: Mapping[str, int]) -> bytes:
    """The kernel parameter bank of a launch: the parameter bytes, then the program's launch-constant
    slots (``Program.bank_slots``: a pointer parameter or a module variable's address as a window
    word). One builder for the simulator, the ROM encoder (``runtime.engine``) and the lowering's
    parameter fold (``Options.param_bank``), so the three read the same words."""
    start = (prog.layout.param_size + 3) // 4 * 4
    bank = bytearray(param_bytes) + bytes(max(0, start - len(param_bytes)))
    bank = bank[:start]
    for kind, arg in prog.bank_slots:
        if kind == "window":
            off, base = arg  # type: ignore[misc]
            v = int.from_bytes(bytes(param_bytes[off : off + 8]).ljust(8, b"\0"), "little")
            bank += _window(v - base).to_bytes(4, "little")
        else:
            bank += _window(global_addr[str(arg)] - GLOBAL_BASE).to_bytes(4, "little")
    return bytes(bank)


class MachineSim(core.SimtCore):
    """Runs one machine program. Build once, launch many times.

    Scheduling, barriers and the block loop are :class:`core.SimtCore`'s; this class gives machine
    instructions their meaning and counts machine issues, passes and PTX-level issues."""

    def __init__(
        self, prog: Program, *, max_steps: int = DEFAULT_MAX_STEPS, trace: Callable[[str], None] | None = None
    ) -> None:
        self.prog = prog
        self.max_steps = max_steps
        self.trace = trace
        self._ptx_tables()
        lay = prog.layout
        self.local_size = lay.local_size
        self.kernel_name = prog.name
        self.used_specials = sorted({x.m["sr"] for x in prog.code if x.op == "s2r"}
                                    | {y.name for x in prog.code for y in x.s if isinstance(y, SR)})
        self.launch_specials = [n for n in self.used_specials if _machine_special(n)]
        self.is_warp_op = [x.op in ("shfl", "shflp", "vote", "ballot") for x in prog.code]

    def _ptx_tables(self) -> None:
        """Tables for counting PTX-level warp instructions exactly as the interpreter does.

        A lane's *entry* is the PTX index at which it last arrived at a sequence start (by falling
        through or by a branch); issuing the first instruction of PTX instruction k's sequence to
        lanes whose smallest entry is e counts k - e + 1 PTX issues (the instructions e..k-1 have
        empty sequences: the interpreter issues them one by one, the machine not at all)."""
        prog = self.prog
        n = len(prog.code)
        self.kstart = [-1] * (n + 1)
        for i, (a, b) in enumerate(prog.ptx_ranges):
            if a < b:
                self.kstart[a] = i
        self.fall_entry: list[int | None] = [None] * n
        self.jump_entry: list[int | None] = [None] * n
        # pcs inside no PTX range (subroutine bodies, the branch over them, what the allocator puts
        # before that): their issues are attributed to the lanes' entry (the calling PTX instruction)
        self.in_range = [False] * n
        for a, b in prog.ptx_ranges:
            for pc in range(a, min(b, n)):
                self.in_range[pc] = True
        for pc, ins in enumerate(prog.code):
            own = ins.ptx
            start, end = prog.ptx_ranges[own] if 0 <= own < len(prog.ptx_ranges) else (-1, -1)
            if not start <= pc < end:
                continue  # a routine's instruction carries a caller's ptx index but is not in its range
            if pc + 1 == end:
                self.fall_entry[pc] = own + 1
            if ins.op == "bra":
                src = prog.ptx[own] if 0 <= own < len(prog.ptx) else None
                lab = None
                if src is not None and src.op == "bra" and src.operands:
                    lab = prog.ptx_labels.get(getattr(src.operands[0], "name", ""))
                if lab is not None:
                    self.jump_entry[pc] = lab
                elif ins.target == end:
                    self.jump_entry[pc] = own + 1
        self.breaks = [x.op in ("bra", "exit", "bar", "trap", "call", "ret") for x in prog.code]
        # a lane returning to pc t continues after the call at t - 1: its entry is that call's fall entry
        self.ret_entry = np.array([-1] + [-1 if f is None else f for f in self.fall_entry], dtype=np.int64)

    # ------------------------------------------------------------------ launch
    def _prepare(self, param_bytes: bytes, gmem: GlobalMemory, dynamic_shared: int) -> None:
        lay = self.prog.layout
        self.static_shared = lay.static_shared
        dyn = bool(lay.dynamic_shared_syms)
        self.shared_size = core.shared_extent(lay.static_shared, dynamic_shared, dyn)
        self.global_addr: dict[str, int] = {}
        placed = {b.name: b.start for b in gmem.buffers}  # the weights' launch places them itself
        fresh = False
        for v in lay.global_vars:
            if v.name in placed:
                self.global_addr[v.name] = placed[v.name]
                continue
            fresh = True
            self.global_addr[v.name] = gmem.alloc(
                v.name, v.init or b"", size=v.size, readonly=v.space == "const"
            )
        if fresh:
            gmem.finalize()
        if self.prog.rodata:  # the constant tables the program's sequences read (Program.rodata)
            gmem.place_program_data(self.prog.rodata)
        self.param_size = lay.param_size
        self.bank_start = (lay.param_size + 3) // 4 * 4
        bank = param_bank(self.prog, param_bytes, self.global_addr)
        self.bank_end = len(bank)
        self.param_mem = np.zeros(max(8, (len(bank) + 7) // 8 * 8), dtype=np.uint8)
        self.param_mem[: len(bank)] = np.frombuffer(bytes(bank), dtype=np.uint8)
        self.code = [self._build(ins, pc) for pc, ins in enumerate(self.prog.code)]
        self.stats = SimStats(
            machine_instructions=len(self.prog.code),
            registers=self.prog.nregs,
            predicates=self.prog.npreds,
            machine_by_ptx=[0] * len(self.prog.ptx),
            issues_by_ptx=[0] * len(self.prog.ptx),
        )
        self.code_ptx = [x.ptx for x in self.prog.code]


    def _new_block(self, ctaid: tuple[int, int, int], nthreads: int) -> Block:
        spill = 4 * self.prog.spill_words
        return Block(ctaid, nthreads, self.shared_size, self.local_size, self.prog.layout.shared_init, spill)

    def _new_warp(self, blk: Block, wid: int, threads: np.ndarray) -> Warp:
        return Warp(self.prog.nregs, self.prog.npreds, blk, wid, threads)

    def _ptx(self, pc: int) -> Instr:
        return self.prog.ptx[self.prog.code[pc].ptx]

    def _step_limit(self, w: Warp, index: int) -> ExecutionError:
        ins = self.prog.ptx[index]
        return self._step_limit_error(w, ins.where(), ins.text)

    @staticmethod
    def _groups(m: np.ndarray | None, nlanes: int) -> int:
        if m is None:
            return 8
        return int(m.reshape(8, 4).any(axis=1).sum())

    def _issue(self, w: Warp, pc: int, m: np.ndarray | None, e: int) -> int:
        """Account one machine warp instruction; returns the lanes' entry after it."""
        st = self.stats
        k = self.kstart[pc]
        if k >= 0:
            cnt = max(1, k - e + 1)
            if self.steps_left < cnt:
                raise self._step_limit(w, min(k, e + self.steps_left))
            self.steps_left -= cnt
            st.ptx_warp_instructions += cnt
            st.issues_by_ptx[k] += 1
            e = k
        st.warp_instructions += 1
        if self.in_range[pc]:
            st.machine_by_ptx[self.code_ptx[pc]] += 1
        elif st.machine_by_ptx:
            st.machine_by_ptx[min(e, len(st.machine_by_ptx) - 1)] += 1
        st.passes += self._groups(m, w.nlanes)
        st.lane_instructions += WARP if m is None else int(m.sum())
        if self.trace is not None:
            text = self.prog.code[pc]
            self.trace(f"blk{w.block.ctaid} w{w.warp_id} pc={pc:5d} mask={core.mask_word(m):08x}  {text}")
        return e

    def _run_uniform(self, w: Warp) -> int:  # type: ignore[override]
        """The converged tight loop; the lanes' PTX entry rides along in ``e`` and is stored
        into ``w.entry`` before every instruction that may end the run."""
        code = self.code
        n = len(code)
        fall, jump, breaks = self.fall_entry, self.jump_entry, self.breaks
        pc = w.conv
        m = w.cmask
        e = int(w.entry.min()) if m is None else int(w.entry[m].min())
        while True:
            if pc >= n:
                raise self._past_end()
            e = self._issue(w, pc, m, e)
            w.conv = pc
            if breaks[pc]:
                if m is None:
                    w.entry[:] = e
                else:
                    w.entry[m] = e
            kind, arg = code[pc](w, m)
            if kind == NEXT:
                if fall[pc] is not None:
                    e = fall[pc]  # type: ignore[assignment]
                pc += 1
            elif kind == JUMP:
                if jump[pc] is not None:
                    e = jump[pc]  # type: ignore[assignment]
                pc = arg
            elif kind == RET:
                e = int(w.entry.min()) if m is None else int(w.entry[m].min())
                pc = arg
            else:
                return kind

    def _account_one(self, w: Warp, pc: int, m: np.ndarray) -> None:  # type: ignore[override]
        w.entry[m] = self._issue(w, pc, m, int(w.entry[m].min()))

    def _landed(self, w: Warp, pc: int, m: np.ndarray, kind: int) -> None:  # type: ignore[override]
        e = self.fall_entry[pc] if kind == NEXT else self.jump_entry[pc]
        if e is not None:
            w.entry[m] = e

    # ------------------------------------------------------------------ building closures
    def _src(self, x: object) -> Callable:
        """A function w -> lane values (uint32 array or scalar) of a register/immediate operand."""
        if isinstance(x, R):
            i = x.n
            return lambda w: w.R[i]
        if isinstance(x, Imm):
            v = U32(x.v)
            return lambda w: v
        if isinstance(x, SR):  # a special register as operand a (``softmem.fold_special_reads``)
            name = x.name
            return lambda w: w.special[name]
        raise ValueError(f"bad operand {x}")

    def _psrc(self, x: P) -> Callable:
        if x.n == PT:
            v = not x.neg
            arr = np.full(WARP, v)
            arr.flags.writeable = False
            return lambda w: arr
        i = x.n
        if x.neg:
            return lambda w: ~w.Pr[i]
        return lambda w: w.Pr[i]

    def _dst(self, x: R) -> Callable:
        i = x.n

        def write(w: Warp, v: object, m: np.ndarray | None) -> None:
            v = as_lanes(np.asarray(v, dtype=np.uint32))
            if m is None:
                w.R[i] = v
            else:
                w.R[i] = np.where(m, v, w.R[i])

        return write

    def _pdst(self, x: P) -> Callable:
        i = x.n

        def write(w: Warp, v: object, m: np.ndarray | None) -> None:
            v = as_lanes(np.asarray(v, dtype=bool))
            if m is None:
                w.Pr[i] = v
            else:
                w.Pr[i] = np.where(m, v, w.Pr[i])

        return write

    def _build(self, ins: MInstr, pc: int) -> Callable:
        builder = getattr(self, f"_op_{ins.op}", None)
        if builder is None:
            raise PTXError(f"machine op {ins.op!r} has no simulator")
        f = builder(ins, pc)
        k = ins.mod("lane")
        if k is not None:
            f = _one_lane(f, k)
        if ins.op in ("bra", "call", "ret") or ins.guard is None:
            return f
        g = self._psrc(ins.guard)

        def guarded(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            p = g(w)
            if m is None and p.all():
                return f(w, None)
            mm = p if m is None else (m & p)
            if not mm.any():
                return (NEXT, 0)
            return f(w, mm)

        return guarded

    def _alu(self, ins: MInstr, fn: Callable) -> Callable:
        srcs = [self._src(x) for x in ins.s]
        wr = self._dst(ins.d[0])
        if len(srcs) == 1:
            s0 = srcs[0]

            def un(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
                wr(w, fn(s0(w)), m)
                return (NEXT, 0)

            return un
        if len(srcs) == 2:
            s0, s1 = srcs

            def bi(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
                wr(w, fn(s0(w), s1(w)), m)
                return (NEXT, 0)

            return bi
        s0, s1, s2 = srcs

        def tri(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            wr(w, fn(s0(w), s1(w), s2(w)), m)
            return (NEXT, 0)

        return tri

    # ---- integer ALU
    def _op_mov(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a: a)

    def _op_add(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b: a + b)

    def _op_sub(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b: a - b)

    def _op_mul(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b: a * b)

    def _op_mad(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b, c: a * b + c)

    def _op_mulhi(self, ins: MInstr, pc: int) -> Callable:
        if ins.mod("sign") == "s":

            def f(a, b):
                p = np.asarray(a).view(np.int32).astype(np.int64) * np.asarray(b).view(np.int32).astype(
                    np.int64
                )
                return (p >> 32).astype(np.uint32)
        else:

            def f(a, b):
                p = np.asarray(a).astype(np.uint64) * np.asarray(b).astype(np.uint64)
                return (p >> np.uint64(32)).astype(np.uint32)

        return self._alu(ins, f)

    def _op_and(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b: a & b)

    def _op_or(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b: a | b)

    def _op_xor(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a, b: a ^ b)

    def _op_not(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a: ~np.asarray(a, dtype=np.uint32))

    def _op_shl(self, ins: MInstr, pc: int) -> Callable:
        def f(a, b):
            b = np.asarray(b, dtype=np.uint32)
            return np.where(b >= 32, U32(0), np.asarray(a, dtype=np.uint32) << np.minimum(b, U32(31)))

        return self._alu(ins, f)

    def _op_shr(self, ins: MInstr, pc: int) -> Callable:
        if ins.mod("sign") == "s":

            def f(a, b):
                s = np.minimum(np.asarray(b, dtype=np.uint32), U32(31)).astype(np.int32)
                return (np.asarray(a, dtype=np.uint32).view(np.int32) >> s).view(np.uint32)
        else:

            def f(a, b):
                b = np.asarray(b, dtype=np.uint32)
                return np.where(b >= 32, U32(0), np.asarray(a, dtype=np.uint32) >> np.minimum(b, U32(31)))

        return self._alu(ins, f)

    def _minmax(self, ins: MInstr, fn: Callable) -> Callable:
        if ins.mod("sign") == "s":

            def f(a, b):
                return fn(
                    np.asarray(a, dtype=np.uint32).view(np.int32),
                    np.asarray(b, dtype=np.uint32).view(np.int32),
                ).view(np.uint32)
        else:

            def f(a, b):
                return fn(np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32))

        return self._alu(ins, f)

    def _op_idiv(self, ins: MInstr, pc: int) -> Callable:
        return self._divmod(ins, 0)

    def _op_irem(self, ins: MInstr, pc: int) -> Callable:
        return self._divmod(ins, 1)

    def _divmod(self, ins: MInstr, which: int) -> Callable:
        """C division (the interpreter's ``div_trunc``); lanes with b == 0 compute a / 1 (the
        lowering traps before any active lane divides by zero)."""
        dt = np.int32 if ins.mod("sign") == "s" else np.uint32

        def f(a, b):
            x = as_lanes(np.asarray(a, dtype=np.uint32)).view(dt)
            y = as_lanes(np.asarray(b, dtype=np.uint32)).view(dt)
            y = np.where(y == 0, dt(1), y).astype(dt)
            return iops.div_trunc(x, y)[which].astype(dt).view(np.uint32)

        return self._alu(ins, f)

    def _op_min(self, ins: MInstr, pc: int) -> Callable:
        return self._minmax(ins, np.minimum)

    def _op_max(self, ins: MInstr, pc: int) -> Callable:
        return self._minmax(ins, np.maximum)

    def _op_popc(self, ins: MInstr, pc: int) -> Callable:
        return self._alu(ins, lambda a: np.bitwise_count(np.asarray(a, dtype=np.uint32)).astype(np.uint32))

    def _op_clz(self, ins: MInstr, pc: int) -> Callable:
        def f(a):
            a = np.asarray(a, dtype=np.uint32)
            _, e = np.frexp(a.astype(np.float64))
            return (32 - np.where(a == 0, 0, e)).astype(np.uint32)

        return self._alu(ins, f)

    def _op_brev(self, ins: MInstr, pc: int) -> Callable:
        def f(a):
            u = np.asarray(a, dtype=np.uint32).astype(np.uint64)
            out = np.zeros_like(u)
            for i in range(32):
                out |= ((u >> np.uint64(i)) & np.uint64(1)) << np.uint64(31 - i)
            return out.astype(np.uint32)

        return self._alu(ins, f)

    def _op_sel(self, ins: MInstr, pc: int) -> Callable:
        a, b = self._src(ins.s[0]), self._src(ins.s[1])
        p = self._psrc(ins.s[2])
        wr = self._dst(ins.d[0])

        def sel(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            wr(w, np.where(p(w), a(w), b(w)), m)
            return (NEXT, 0)

        return sel

    @staticmethod
    def _cmp(cmp: str, x, y):
        return {
            "eq": np.equal,
            "ne": np.not_equal,
            "lt": np.less,
            "le": np.less_equal,
            "gt": np.greater,
            "ge": np.greater_equal,
        }[cmp](x, y)

    @staticmethod
    def _bop(bop: str | None, r, c):
        f = _BOPS.get(bop)  # type: ignore[arg-type]
        return r if f is None else f(r, c)

    def _op_setp(self, ins: MInstr, pc: int) -> Callable:
        a, b = self._src(ins.s[0]), self._src(ins.s[1])
        c = self._psrc(ins.s[2]) if len(ins.s) > 2 else None
        wr = self._pdst(ins.d[0])
        cmp, bop = ins.mod("cmp"), ins.mod("bop")
        signed = ins.mod("sign") == "s"

        def setp(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            x, y = np.asarray(a(w), dtype=np.uint32), np.asarray(b(w), dtype=np.uint32)
            if signed:
                x, y = x.view(np.int32), y.view(np.int32)
            r = as_lanes(self._cmp(cmp, x, y))
            if c is not None:
                r = self._bop(bop, r, c(w))
            wr(w, r, m)
            return (NEXT, 0)

        return setp

    def _wop(self, ins: MInstr, fn: Callable) -> Callable:
        sa, sb = ins.mod("sa"), ins.mod("sb")

        def val(x, s):
            x = as_lanes(np.asarray(x, dtype=np.uint32))
            if s == "s":
                return x.view(np.int32).astype(np.int64), x == U32(POISON)
            return x.astype(np.int64), np.zeros(WARP, dtype=bool)

        def f(a, b):
            x, px = val(a, sa)
            y, py = val(b, sb)
            r = fn(x, y)
            bad = px | py | (r < -(2**31 - 1)) | (r > 2**31 - 1)
            return np.where(bad, U32(POISON), (r & M32).astype(np.uint32))

        return self._alu(ins, f)

    def _op_addw(self, ins: MInstr, pc: int) -> Callable:
        return self._wop(ins, lambda x, y: x + y)

    def _op_subw(self, ins: MInstr, pc: int) -> Callable:
        return self._wop(ins, lambda x, y: x - y)

    def _op_mulw(self, ins: MInstr, pc: int) -> Callable:
        return self._wop(ins, lambda x, y: x * y)

    def _op_s2r(self, ins: MInstr, pc: int) -> Callable:
        name = ins.m["sr"]
        wr = self._dst(ins.d[0])
        if name == "clock":

            def clk(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
                wr(w, U32(self.stats.ptx_warp_instructions & M32), m)
                return (NEXT, 0)

            return clk

        def s2r(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            wr(w, w.special[name], m)
            return (NEXT, 0)

        return s2r

    # ---- float unit
    def _fop(self, ins: MInstr, fn: Callable) -> Callable:
        rnd, ftz, sat = ins.mod("rnd"), ins.mod("ftz"), ins.mod("sat")
        return self._alu(
            ins,
            lambda *xs: fn(
                *[as_lanes(np.asarray(x, dtype=np.uint32)) for x in xs], rnd, ftz, sat
            ),
        )

    def _op_fadd(self, ins: MInstr, pc: int) -> Callable:
        if ins.mod("odd"):  # the weights' adder rounding to odd (a machine mode, not PTX)
            return self._fop(ins, lambda a, b, rnd, ftz, sat: fp32.add_odd(a, b, ftz))
        return self._fop(ins, fp32.add)

    def _op_fsub(self, ins: MInstr, pc: int) -> Callable:
        if ins.mod("odd"):  # the weights' adder: b's sign flipped, then rounding to odd
            return self._fop(ins, lambda a, b, rnd, ftz, sat: fp32.add_odd(a, b ^ np.uint32(0x80000000), ftz))
        return self._fop(ins, fp32.sub)

    def _op_fmul(self, ins: MInstr, pc: int) -> Callable:
        return self._fop(ins, fp32.mul)

    def _op_fmulf(self, ins: MInstr, pc: int) -> Callable:
        """The weights' one-lane multiplier: lane k writes only the threads at position k of their
        lane group (a guard the row carries in the weights: ``circuit.one_lane_guard``)."""
        fn = fp32.mul_fast_err if ins.mod("err") else fp32.mul_fast

        def prod(a: object, b: object) -> np.ndarray:
            return fn(as_lanes(np.asarray(a, dtype=np.uint32)),
                      as_lanes(np.asarray(b, dtype=np.uint32)))

        return self._alu(ins, prod)  # its lane: ``_build``, as for every one-lane row

    def _op_frange(self, ins: MInstr, pc: int) -> Callable:
        a, b = self._src(ins.s[0]), self._src(ins.s[1])
        wr, ftz = self._pdst(ins.d[0]), bool(ins.mod("ftz"))

        def frange(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            x = as_lanes(np.asarray(a(w), dtype=np.uint32))
            y = as_lanes(np.asarray(b(w), dtype=np.uint32))
            wr(w, fp32.mul_fast_ok(x, y, ftz), m)
            return (NEXT, 0)

        return frange

    def _op_ffma(self, ins: MInstr, pc: int) -> Callable:
        return self._fop(ins, fp32.fma)

    def _op_fmin(self, ins: MInstr, pc: int) -> Callable:
        ftz = ins.mod("ftz")
        return self._alu(
            ins, lambda a, b: fp32.min(as_lanes(a), as_lanes(b), ftz)
        )

    def _op_fmax(self, ins: MInstr, pc: int) -> Callable:
        ftz = ins.mod("ftz")
        return self._alu(
            ins, lambda a, b: fp32.max(as_lanes(a), as_lanes(b), ftz)
        )

    def _op_fsetp(self, ins: MInstr, pc: int) -> Callable:
        a, b = self._src(ins.s[0]), self._src(ins.s[1])
        c = self._psrc(ins.s[2]) if len(ins.s) > 2 else None
        wr = self._pdst(ins.d[0])
        cmp, bop, ftz = ins.mod("cmp"), ins.mod("bop"), ins.mod("ftz")

        def fsetp(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            r = as_lanes(
                fp32.setp(cmp, np.broadcast_to(a(w), (WARP,)), np.broadcast_to(b(w), (WARP,)), ftz))
            if c is not None:
                r = self._bop(bop, r, c(w))
            wr(w, r, m)
            return (NEXT, 0)

        return fsetp

    def _op_i2f(self, ins: MInstr, pc: int) -> Callable:
        src = "s32" if ins.mod("sign") == "s" else "u32"
        rnd = ins.mod("rnd")
        return self._alu(
            ins,
            lambda a: fp32.f32_from_int(
                as_lanes(np.asarray(a, dtype=np.uint32)).view(
                    np.int32 if src == "s32" else np.uint32
                ),
                src,
                rnd,
            ),
        )

    def _op_f2i(self, ins: MInstr, pc: int) -> Callable:
        dst = "s32" if ins.mod("sign") == "s" else "u32"
        irnd, ftz = ins.mod("irnd"), ins.mod("ftz")

        def f(a):
            a = as_lanes(np.asarray(a, dtype=np.uint32))
            if ftz:
                a = _flush_subnormal(a)
            return fp32.int_from_f32(a, dst, irnd).astype(np.int64).astype(np.uint32)

        return self._alu(ins, f)

    def _op_frnd(self, ins: MInstr, pc: int) -> Callable:
        irnd, ftz, sat = ins.mod("irnd"), ins.mod("ftz"), ins.mod("sat")

        def f(a):
            a = as_lanes(np.asarray(a, dtype=np.uint32))
            if irnd is not None:
                return fp32.round_f32(a, irnd, ftz)
            if sat:
                return fp32.sat_f32(a, ftz)
            if ftz:
                return _flush_subnormal(a)
            return a

        return self._alu(ins, f)

    def _op_fdiv(self, ins: MInstr, pc: int) -> Callable:
        rnd, ftz = ins.mod("rnd"), ins.mod("ftz")
        return self._alu(
            ins, lambda a, b: fp32.div(as_lanes(a), as_lanes(b), rnd, ftz)
        )

    def _op_fsqrt(self, ins: MInstr, pc: int) -> Callable:
        rnd, ftz = ins.mod("rnd"), ins.mod("ftz")
        return self._alu(ins, lambda a: fp32.sqrt(as_lanes(a), rnd, ftz))

    def _op_fex2(self, ins: MInstr, pc: int) -> Callable:
        ftz = ins.mod("ftz")
        return self._alu(ins, lambda a: fp32.ex2_approx(as_lanes(a), ftz))

    def _op_frsqrt(self, ins: MInstr, pc: int) -> Callable:
        ftz = ins.mod("ftz")
        return self._alu(ins, lambda a: fp32.rsqrt_approx(as_lanes(a), ftz))

    # ---- float64 unit: exact rationals per lane (``qwengpu.isa.f64``, not the interpreter's code)
    def _d64(self, ins: MInstr, fn: Callable, words: str) -> Callable:
        """An f64 op on register pairs: ``words`` says how the sources group into values ("2" a
        pair, "1" a word); ``fn`` maps the lane's source values (Python ints) to its result (a
        pair value, a word, or a bool for a predicate destination). All sources are read before
        any destination is written (destinations may alias sources)."""
        groups: list[tuple[int, int]] = []
        k = 0
        for g in words:
            groups.append((k, int(g)))
            k += int(g)
        srcs = [self._src(x) for x in ins.s[:k]]
        pred = isinstance(ins.d[0], P)
        wrs = [self._pdst(x) if isinstance(x, P) else self._dst(x) for x in ins.d]
        extra = self._psrc(ins.s[k]) if len(ins.s) > k else None

        def run(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            vals = [as_lanes(np.asarray(f(w), dtype=np.uint32)) for f in srcs[:k]]
            lanes = range(WARP) if m is None else np.nonzero(m)[0]
            out = np.zeros(WARP, dtype=bool if pred else np.uint64)
            for ln in lanes:
                args = []
                for st, n in groups:
                    v = int(vals[st][ln])
                    if n == 2:
                        v |= int(vals[st + 1][ln]) << 32
                    args.append(v)
                out[ln] = fn(*args)
            if pred:
                if extra is not None:
                    out = self._bop(ins.mod("bop"), out, extra(w))
                wrs[0](w, out, m)
            elif len(wrs) == 1:
                wrs[0](w, (out & np.uint64(M32)).astype(np.uint32), m)
            else:
                wrs[0](w, (out & np.uint64(M32)).astype(np.uint32), m)
                wrs[1](w, (out >> np.uint64(32)).astype(np.uint32), m)
            return (NEXT, 0)

        return run

    def _op_dadd(self, ins: MInstr, pc: int) -> Callable:
        rnd = ins.mod("rnd")
        return self._d64(ins, lambda a, b: f64.add(a, b, rnd), "22")

    def _op_dmul(self, ins: MInstr, pc: int) -> Callable:
        rnd = ins.mod("rnd")
        return self._d64(ins, lambda a, b: f64.mul(a, b, rnd), "22")

    def _op_dfma(self, ins: MInstr, pc: int) -> Callable:
        rnd = ins.mod("rnd")
        return self._d64(ins, lambda a, b, c: f64.fma(a, b, c, rnd), "222")

    def _op_ddiv(self, ins: MInstr, pc: int) -> Callable:
        rnd = ins.mod("rnd")
        return self._d64(ins, lambda a, b: f64.div(a, b, rnd), "22")

    def _op_dsqrt(self, ins: MInstr, pc: int) -> Callable:
        rnd = ins.mod("rnd")
        return self._d64(ins, lambda a: f64.sqrt(a, rnd), "2")

    def _op_dsetp(self, ins: MInstr, pc: int) -> Callable:
        cmp = ins.mod("cmp")
        return self._d64(ins, lambda a, b: f64.setp(cmp, a, b), "22")

    def _op_d2f(self, ins: MInstr, pc: int) -> Callable:
        rnd, ftz = ins.mod("rnd"), ins.mod("ftz")
        return self._d64(ins, lambda a: f64.to_f32(a, rnd, ftz), "2")

    def _op_f2d(self, ins: MInstr, pc: int) -> Callable:
        ftz = ins.mod("ftz")
        return self._d64(ins, lambda a: f64.from_f32(a, ftz), "1")

    def _op_i2d(self, ins: MInstr, pc: int) -> Callable:
        rnd, signed = ins.mod("rnd"), ins.mod("sign") == "s"
        return self._d64(
            ins, lambda a: f64.from_int(a - (1 << 64) if signed and a >> 63 else a, rnd), "2"
        )

    def _op_d2i(self, ins: MInstr, pc: int) -> Callable:
        irnd, signed = ins.mod("irnd") or "rzi", ins.mod("sign") == "s"
        return self._d64(ins, lambda a: f64.to_int(a, irnd, signed, 32), "2")

    def _op_d2l(self, ins: MInstr, pc: int) -> Callable:
        irnd, signed = ins.mod("irnd") or "rzi", ins.mod("sign") == "s"
        return self._d64(ins, lambda a: f64.to_int(a, irnd, signed, 64), "2")

    # ---- memory
    def _addresses(self, ins: MInstr) -> Callable:
        """w -> (uint64 generic/space addresses of all lanes, poison mask)."""
        a = self._src(ins.s[0])
        base = np.uint64(ins.mod("base") & 0xFFFFFFFFFFFFFFFF)
        off = ins.mod("off")
        # PTX ISA, "Addresses as Operands": .shared/.local/.param addresses are 32 bits wide, so
        # [reg+imm] wraps modulo 2^32 there (NVRTC forms a shared base below zero plus a positive
        # offset); global and generic addresses are 64-bit (the interpreter's _address_mask)
        amask = np.uint64(M32 if ins.mod("space") in ADDR32_SPACES else (1 << 64) - 1)
        if ins.mod("amode") == "z":
            k = np.uint64((ins.mod("base") + off) & 0xFFFFFFFFFFFFFFFF)

            def zaddr(w: Warp):
                v = as_lanes(np.asarray(a(w), dtype=np.uint32)).astype(np.uint64) + k
                return v & amask, None

            return zaddr
        k = np.uint64(off & 0xFFFFFFFFFFFFFFFF)

        def saddr(w: Warp):
            x = as_lanes(np.asarray(a(w), dtype=np.uint32))
            v = x.view(np.int32).astype(np.int64).astype(np.uint64) + base + k
            return v & amask, x == U32(POISON)

        return saddr

    def _resolve(
        self,
        w: Warp,
        addr: np.ndarray,
        poison: np.ndarray | None,
        lanes: np.ndarray,
        size: int,
        space: str,
        ins: MInstr,
        store: bool,
        chk: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Map the active lanes' addresses to (memory, byte index); raise the interpreter's fault."""
        ptx = self.prog.ptx[ins.ptx]
        csize = chk or size
        a = addr if lanes is ALL else addr[lanes]
        if space == "spill":  # the allocator's private per-thread slots: never out of bounds
            sb = np.uint64(4 * self.prog.spill_words)
            return w.block.spill, a + (
                w.thread.astype(np.uint64) * sb if lanes is ALL else w.thread[lanes].astype(np.uint64) * sb
            )
        pz = None if poison is None else (poison if lanes is ALL else poison[lanes])
        if space == "generic":
            space, win = core.generic_space(a)
            if win:
                a = a - np.uint64(win)
        return self._access(w, a, lanes, csize, space, ptx, store, pz)

    def _param_ok(self, a: np.ndarray, size: int) -> np.ndarray:
        """The kernel's parameters, or the bank's launch constants behind them."""
        return (a + np.uint64(size) <= np.uint64(self.param_size)) | (
            (a >= np.uint64(self.bank_start)) & (a + np.uint64(size) <= np.uint64(self.bank_end))
        )

    def _op_ld(self, ins: MInstr, pc: int) -> Callable:
        addr = self._addresses(ins)
        size, space, chk = ins.mod("size"), ins.mod("space"), ins.mod("chk")
        dt = (_SDT if ins.mod("sign") == "s" else _DT)[size]
        wr = self._dst(ins.d[0])

        def ld(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            lanes = ALL if m is None else m
            ad, pz = addr(w)
            mem, idx = self._resolve(w, ad, pz, lanes, size, space, ins, False, chk)
            ii = idx.astype(np.int64)
            if 0 < chk < size:  # a sub-word access checked as such, loaded as its aligned word
                ii = ii & ~np.int64(3)
            raw = np.zeros(len(ii), dtype=np.uint32)
            for k in range(size):
                raw |= mem[ii + k].astype(np.uint32) << U32(8 * k)
            got = raw.astype(_DT[size]).view(dt).astype(np.int64).astype(np.uint32)
            if lanes is ALL:
                vals = got
            else:
                vals = np.zeros(WARP, dtype=np.uint32)
                vals[lanes] = got
            wr(w, vals, m)
            return (NEXT, 0)

        return ld

    def _op_st(self, ins: MInstr, pc: int) -> Callable:
        addr = self._addresses(ins)
        val = self._src(ins.s[1])
        size, space, chk = ins.mod("size"), ins.mod("space"), ins.mod("chk")

        def st(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            lanes = ALL if m is None else m
            ad, pz = addr(w)
            mem, idx = self._resolve(w, ad, pz, lanes, size, space, ins, True, chk)
            v = as_lanes(np.asarray(val(w), dtype=np.uint32))
            v = v if lanes is ALL else v[lanes]
            ii = idx.astype(np.int64)
            for k in range(size):  # lane order: a later lane's write wins, as in the interpreter
                mem[ii + k] = ((v >> U32(8 * k)) & U32(0xFF)).astype(np.uint8)
            return (NEXT, 0)

        return st

    def _op_atom(self, ins: MInstr, pc: int) -> Callable:
        addr = self._addresses(ins)
        b = self._src(ins.s[1])
        c = self._src(ins.s[2]) if len(ins.s) > 2 else (lambda w: U32(0))
        space, aop, typ = ins.mod("space"), ins.mod("aop"), ins.mod("type")
        wr = self._dst(ins.d[0])
        f = _atomic_function(aop, typ)

        def atom(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            lanes = ALL if m is None else m
            ad, pz = addr(w)
            mem, idx = self._resolve(w, ad, pz, lanes, 4, space, ins, True)
            view = mem.view(np.uint32)
            bv = as_lanes(np.asarray(b(w), dtype=np.uint32))[lanes]
            cv = as_lanes(np.asarray(c(w), dtype=np.uint32))[lanes]
            old = np.zeros(WARP, dtype=np.uint32)
            olds = []
            for k, j in enumerate((idx // np.uint64(4)).astype(np.int64).tolist()):
                o = int(view[j])
                olds.append(o)
                view[j] = f(o, int(bv[k]), int(cv[k]))
            self.stats.atomic_lanes += len(olds)
            old[lanes] = np.array(olds, dtype=np.uint32)
            wr(w, old, m)
            return (NEXT, 0)

        return atom

    # ---- warp
    def _op_shfl(self, ins: MInstr, pc: int) -> Callable:
        a, b, c = (self._src(x) for x in ins.s)
        wr = self._dst(ins.d[0])
        mode = ins.mod("mode")

        def shfl(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            src = as_lanes(np.asarray(a(w), dtype=np.uint32))
            j, _ = core.shuffle_lanes(
                mode,
                as_lanes(np.asarray(b(w), dtype=np.uint32)),
                as_lanes(np.asarray(c(w), dtype=np.uint32)),
            )
            wr(w, src[j], m)
            return (NEXT, 0)

        return shfl

    def _op_shflp(self, ins: MInstr, pc: int) -> Callable:
        b, c = (self._src(x) for x in ins.s)
        wr = self._pdst(ins.d[0])
        mode = ins.mod("mode")

        def shflp(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            _, ok = core.shuffle_lanes(
                mode,
                as_lanes(np.asarray(b(w), dtype=np.uint32)),
                as_lanes(np.asarray(c(w), dtype=np.uint32)),
            )
            wr(w, ok, m)
            return (NEXT, 0)

        return shflp

    def _op_vote(self, ins: MInstr, pc: int) -> Callable:
        a = self._psrc(ins.s[0])
        wr = self._pdst(ins.d[0])
        mode = ins.mod("vmode")

        def vote(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            act = ALL if m is None else m
            p = as_lanes(a(w)) & act
            wr(w, np.full(WARP, core.warp_vote(mode, p, act)), m)
            return (NEXT, 0)

        return vote

    def _op_ballot(self, ins: MInstr, pc: int) -> Callable:
        a = self._psrc(ins.s[0])
        wr = self._dst(ins.d[0])
        weights = np.uint64(1) << LANES.astype(np.uint64)

        def ballot(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            act = ALL if m is None else m
            p = as_lanes(a(w)) & act
            wr(w, np.full(WARP, U32(int((weights * p).sum()) & M32)), m)
            return (NEXT, 0)

        return ballot

    def _op_plop(self, ins: MInstr, pc: int) -> Callable:
        a, b = self._psrc(ins.s[0]), self._psrc(ins.s[1])
        wr = self._pdst(ins.d[0])
        bop = ins.mod("bop")

        def plop(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            wr(w, self._bop(bop, a(w), b(w)), m)
            return (NEXT, 0)

        return plop

    # ---- control
    def _op_bra(self, ins: MInstr, pc: int) -> Callable:
        tpc = ins.target
        fe, je = self.fall_entry[pc], self.jump_entry[pc]
        if ins.guard is None:
            return lambda w, m: (JUMP, tpc)
        g = self._psrc(ins.guard)

        def bra(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            p = g(w)
            taken = p if m is None else (m & p)
            r = core.branch(w, m, taken, pc, tpc)
            if r[0] == DIVERGED:
                if fe is not None:
                    w.entry[ALL if m is None else m] = fe
                if je is not None:
                    w.entry[taken] = je
            return r

        return bra

    def _op_call(self, ins: MInstr, pc: int) -> Callable:
        """Like ``bra`` (guarded: lanes split), and every lane that jumps writes pc + 1 into d."""
        tpc = ins.target
        fe = self.fall_entry[pc]
        wr = self._dst(ins.d[0])
        link = U32(pc + 1)
        g = None if ins.guard is None else self._psrc(ins.guard)

        def call(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            if g is None:
                wr(w, link, m)
                return (JUMP, tpc)
            p = g(w)
            taken = p if m is None else (m & p)
            if not taken.any():
                return (NEXT, 0)
            wr(w, link, taken)
            r = core.branch(w, m, taken, pc, tpc)
            if r[0] == DIVERGED and fe is not None:
                w.entry[(ALL if m is None else m) & ~taken] = fe
            return r

        return call

    def _op_ret(self, ins: MInstr, pc: int) -> Callable:
        """Every active lane jumps to the pc in its register a (lanes may go to different pcs: the
        warp splits and min-PC scheduling reconverges it, as for ``bra``); a lane's PTX entry
        becomes the fall entry of the call it returns behind."""
        src = self._src(ins.s[0])
        fe = self.fall_entry[pc]
        n = len(self.prog.code)
        rent = self.ret_entry
        g = None if ins.guard is None else self._psrc(ins.guard)

        def ret(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            act = ALL if m is None else m
            taken = act if g is None else (act & g(w))
            if not taken.any():
                return (NEXT, 0)
            tgt = np.minimum(as_lanes(src(w)).astype(np.int64), n)
            ent = rent[tgt]
            upd = taken & (ent >= 0)
            w.entry[upd] = ent[upd]
            t0 = int(tgt[taken][0])
            stay = act & ~taken
            if not stay.any() and (tgt[taken] == t0).all():
                return (RET, t0)
            core.materialize(w)
            w.pcs[stay] = pc + 1
            if fe is not None:
                w.entry[stay] = fe
            w.pcs[taken] = tgt[taken]
            return (DIVERGED, 0)

        return ret

    def _op_exit(self, ins: MInstr, pc: int) -> Callable:
        return core.retire

    def _op_bar(self, ins: MInstr, pc: int) -> Callable:
        fe = self.fall_entry[pc]

        def bar(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            act = ALL if m is None else m
            if fe is not None:
                w.entry[act] = fe
            return core.arrive(w, act, pc)

        return bar

    def _op_trap(self, ins: MInstr, pc: int) -> Callable:
        ptx = self.prog.ptx[ins.ptx]
        if ins.mod("code") == "limit":

            def limit(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
                raise MachineLimitError(
                    f"{ptx.where()}: f64 arithmetic is beyond the machine (`{ptx.form}` "
                    f"reached at run time in block {w.block.ctaid}): `{ptx.text}`"
                )

            return limit
        what = (TRAP_MESSAGE if ins.mod("code") == "trap"
                else f"integer division by zero ({ptx.op}.{_type_of(ptx)})")

        def trap(w: Warp, m: np.ndarray | None) -> tuple[int, int]:
            act = ALL if m is None else m
            lane = int(np.argmax(act))
            raise self._fault(w, lane, ptx, what)

        return trap


def _flush_subnormal(a: np.ndarray) -> np.ndarray:
    sub = ((a & U32(0x7F800000)) == 0) & ((a & U32(0x007FFFFF)) != 0)
    return np.where(sub, a & U32(0x80000000), a).astype(np.uint32)


def _s32(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


#: the word-wide read-modify-write functions (old, b, c) -> new word, whatever the type
_WORD_ATOMICS: dict[str, Callable[[int, int, int], int]] = {
    "add": lambda o, b, c: (o + b) & M32,
    "inc": lambda o, b, c: 0 if o >= b else (o + 1) & M32,
    "dec": lambda o, b, c: b if (o == 0 or o > b) else o - 1,
    "cas": lambda o, b, c: c if o == b else o,
    "exch": lambda o, b, c: b,
    "and": lambda o, b, c: o & b,
    "or": lambda o, b, c: o | b,
    "xor": lambda o, b, c: o ^ b,
}


def _atomic_function(aop: str, typ: str) -> Callable[[int, int, int], int]:
    """old, b, c (32-bit patterns) -> new value, with the interpreter's semantics."""
    if typ == "f32":
        if aop == "add":
            return lambda o, b, c: int(
                fp32.add(np.array([o], dtype=np.uint32), np.array([b], dtype=np.uint32), "rn", True)[0]
            )
        if aop in ("min", "max"):
            f = fp32.min if aop == "min" else fp32.max
            return lambda o, b, c: int(
                f(np.array([o], dtype=np.uint32), np.array([b], dtype=np.uint32), False)[0]
            )
    if aop in ("min", "max"):
        pick = min if aop == "min" else max
        if typ == "s32":
            return lambda o, b, c: pick(_s32(o), _s32(b)) & M32
        return lambda o, b, c: pick(o, b)
    if aop in _WORD_ATOMICS:
        return _WORD_ATOMICS[aop]
    raise ValueError(f"unsupported atomic {aop}.{typ}")


# ---------------------------------------------------------------------------------------------
# limits and the result of a run (the one-call entry points are qwengpu.codegen.pipeline's)
# ---------------------------------------------------------------------------------------------
def check_program_limits(prog: Program) -> None:
    """Refuse a program the machine cannot hold."""
    need(f"kernel {prog.name}", len(prog.code), LIMITS.program, "machine instructions of program")
    check_memory_limits(prog)
    if prog.allocated:
        need(f"kernel {prog.name}", prog.nregs, LIMITS.registers, "registers after allocation")
        need(f"kernel {prog.name}", prog.npreds, LIMITS.predicates, "predicate registers after allocation")


def check_memory_limits(prog: Program) -> None:
    """Refuse a program whose per-thread local memory or parameter bank does not fit."""
    words = local_words_used(prog)
    need(f"kernel {prog.name}", words, LIMITS.local_words, "words of local memory per thread")
    bank = ((prog.layout.param_size + 3) // 4) + len(prog.bank_slots)
    need(f"kernel {prog.name}", bank, LIMITS.param_words, "words of parameters and launch constants")


def check_launch_limits(
    prog: Program,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    gmem: GlobalMemory,
    dynamic_shared: int,
    read_only: Sequence[str] = (),
) -> None:
    """Refuse a launch the machine cannot run. ``read_only``: buffers no store reaches
    (``ptx.readonly``): they count against the global words, not the writable ones."""
    nthreads = block[0] * block[1] * block[2]
    # this simulator runs the launch as it is (no parts: codegen.softmem.block_parts splits larger
    # blocks for the weights), so a block must fit the threads the machine holds at once
    need("the launch", nthreads, LIMITS.resident_threads, "threads per block")
    need("the launch", grid[0] * grid[1] * grid[2], LIMITS.blocks_per_launch, "blocks")
    words = sum((b.size + 3) // 4 for b in gmem.buffers)
    words += sum((v.size + 3) // 4 for v in prog.layout.global_vars)
    need("the launch", words, LIMITS.global_words, "words of global memory")
    ro = sum((b.size + 3) // 4 for b in gmem.buffers if b.name in read_only)
    need("the launch", words - ro, LIMITS.writable_words, "words of global memory it may store to")
    shared = prog.layout.static_shared + dynamic_shared
    if prog.layout.dynamic_shared_syms:
        shared = (prog.layout.static_shared + 15) // 16 * 16 + dynamic_shared
    need("the launch", (shared + 3) // 4, LIMITS.shared_words, "words of shared memory per block")


@dataclass
class MachineResult:
    """What ``qwengpu.codegen.pipeline.run_machine_sim`` returns (shaped like ``RunResult`` of
    ``qwengpu.runner``)."""

    kernel: str
    outputs: dict[str, np.ndarray]
    stats: dict
    mismatches: list[str]
    program: Program
    spec: object = None

    @property
    def passed(self) -> bool:
        return not self.mismatches


__all__ = [
    "MachineSim",
    "SimStats",
    "MachineResult",
    "MachineLimitError",
    "check_program_limits",
    "check_memory_limits",
    "check_launch_limits",
]
