"""The reference SIMT interpreter: the bit-exact oracle every other engine is checked against.

Hardware model: 32-thread warps; a warp issues one instruction at a time for the lanes whose
per-lane PC is the smallest among its runnable lanes (min-PC scheduling), which reconverges
NVVM's unstructured control flow at immediate post-dominators for the layouts NVVM emits.
Warps of a block run round-robin between ``bar.sync`` barriers; blocks run one after another.
Lanes parked at a barrier keep their own PC while the rest of the warp runs on and diverges.
Each PTX instruction is turned once into a Python closure over numpy arrays of 32 lanes. The
scheduling, barriers and block loop are ``qwengpu.simt.core``'s (shared with the machine-ISA
simulator); this module gives PTX instructions their meaning.

Where the hardware gives no reproducible value the model picks a documented one or refuses:
``%clock*``/``%globaltimer*`` count the warp instructions issued so far; ``%smid`` is 0 of one SM;
every CTA is its own 1x1x1 cluster; ``%pm*``, ``%envreg*``, ``%reserved_smem_*`` and
``%aggr_smem_size`` are refused by name. ``cp.async`` copies at issue time (an allowed execution:
its bytes are only defined after the wait); ``bar.red`` reduces at the barrier's release; device ``printf``
writes each lane's text, in lane order, to the ``printf`` callback (stderr by default).
Addresses follow the PTX ISA's widths: ``.shared``/``.local``/``.param`` are 32-bit, so
``[reg+imm]`` wraps there; global and generic addresses are 64-bit.
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from qwengpu.errors import ExecutionError, PTXError
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.ir import (
    TYPE_SIZES,
    TYPES,
    Addr,
    Function,
    Imm,
    Instr,
    Label,
    Module,
    Neg,
    Pair,
    Reg,
    Sink,
    Special,
    Sym,
    Vec,
)
from qwengpu.simt import fp32
from qwengpu.simt import ops as iops
from qwengpu.simt.core import (
    ALL,
    DEFAULT_MAX_STEPS,
    JUMP,
    LANES,
    NEXT,
    TRAP_MESSAGE,
    WARP,
    Block,
    BlockCounts,
    SimtCore,
    SimtWarp,
    arrive,
    as_lanes,
    branch,
    generic_space,
    mask_word,
    retire,
    shared_extent,
    shuffle_lanes,
    warp_vote,
)
from qwengpu.simt.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE, GlobalMemory

ROUNDING = {"rn", "rz", "rm", "rp"}
INT_ROUNDING = {"rni", "rzi", "rmi", "rpi"}
APPROX_OPS = {"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"}


@dataclass
class Stats(BlockCounts):
    """What a launch did."""

    warp_instructions: int = 0
    thread_instructions: int = 0
    approximate: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {
            "warp_instructions": self.warp_instructions,
            "thread_instructions": self.thread_instructions,
            "blocks": self.blocks,
            "warps": self.warps,
            "divergent_branches": self.divergent_branches,
            "barriers": self.barriers,
            "approximate_instructions": sorted(set(self.approximate)),
            "seconds": round(self.seconds, 6),
        }


class Warp(SimtWarp):
    """A PTX warp: the scheduling state of :class:`SimtWarp`, one array per declared register."""

    __slots__ = ("R", "cc", "red")

    def __init__(self, nregs_dtypes: list[type], block: Block, warp_id: int, threads: np.ndarray) -> None:
        super().__init__(block, warp_id, threads)
        self.R = [np.zeros(WARP, dtype=d) for d in nregs_dtypes]
        self.cc = np.zeros(WARP, dtype=np.uint64)
        self.red: list[tuple] = []  # bar.red contributions waiting for the barrier's release


def _type_of(ins: Instr) -> str:
    for m in reversed(ins.mods):
        if m in TYPES:
            return m
    raise PTXError(f"{ins.where()}: `{ins.text}` has no type")


class Interpreter(SimtCore):
    """Runs one kernel of a parsed module. Build once, launch many times.

    Scheduling, barriers and the block loop are :class:`SimtCore`'s; this class gives PTX
    instructions their meaning (one closure each) and counts PTX issues."""

    def __init__(
        self,
        module: Module,
        kernel: str,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        trace: Callable[[str], None] | None = None,
        printf: Callable[[str], None] | None = None,
    ) -> None:
        fn = _find_kernel(module, kernel)
        self.module = module
        self.fn: Function = inline_calls(module, fn)
        self.kernel_name = self.fn.name
        self.max_steps = max_steps
        self.trace = trace
        self.printf = printf if printf is not None else sys.stderr.write  # device printf output
        self.reg_index: dict[str, int] = {}
        self.reg_dtypes: list[type] = []
        for name, t in self.fn.regs.items():
            self.reg_index[name] = len(self.reg_dtypes)
            self.reg_dtypes.append(_storage_dtype(t))
        # static layout of per-thread (.local + call .param) and per-block (.shared) variables
        self.local_off: dict[str, int] = {}
        off = 0
        for v in self.fn.vars:
            if v.space in ("local", "param"):
                off = _align(off, max(v.align, 1))
                self.local_off[v.name] = off
                off += v.size
        self.local_size = _align(off, 8)
        self.shared_off: dict[str, int] = {}
        self.shared_init: list[tuple[int, bytes]] = []
        off = 0
        shared_vars = [v for v in self.fn.vars if v.space == "shared"]
        shared_vars += [v for v in module.globals if v.space == "shared"]
        self.dynamic_shared_syms = []
        for v in shared_vars:
            if v.extern or v.size == 0:
                self.dynamic_shared_syms.append(v)
                continue
            off = _align(off, max(v.align, 1))
            self.shared_off[v.name] = off
            if v.init:
                self.shared_init.append((off, v.init))
            off += v.size
        self.static_shared = off
        self.param_off: dict[str, int] = {}
        off = 0
        for p in self.fn.params:
            off = _align(off, max(p.align, TYPE_SIZES[p.type] if p.size == TYPE_SIZES[p.type] else 1))
            self.param_off[p.name] = off
            off += p.size
        self.param_size = off
        self.used_specials = sorted(
            {o.name for i in self.fn.body for o in i.operands if isinstance(o, Special)}
        )
        # the counters (%clock, ...) are read live; the rest are set once per warp
        self.launch_specials = [n for n in self.used_specials if n.partition(".")[0] not in COUNTER_SPECIALS]
        self.uses_approx = sorted({i.form for i in self.fn.body if i.op in APPROX_OPS or "approx" in i.mods})
        for ins in self.fn.body:  # reject unsupported instructions before any launch
            _check_supported(ins)

    # ------------------------------------------------------------------ launch
    def _prepare(self, param_bytes: bytes, gmem: GlobalMemory, dynamic_shared: int) -> None:
        self.param_mem = np.zeros(_align(max(len(param_bytes), 8), 8), dtype=np.uint8)
        self.param_mem[: len(param_bytes)] = np.frombuffer(param_bytes, dtype=np.uint8)
        dyn_off = _align(self.static_shared, 16)
        self.shared_off_all = dict(self.shared_off)
        for v in self.dynamic_shared_syms:
            self.shared_off_all[v.name] = dyn_off
        self.shared_size = shared_extent(self.static_shared, dynamic_shared, bool(self.dynamic_shared_syms))
        self.dynamic_shared = dynamic_shared
        self.global_addr: dict[str, int] = {}
        for v in self.module.globals:
            if v.space in ("global", "const"):
                self.global_addr[v.name] = gmem.alloc(
                    v.name, v.init or b"", size=v.size, readonly=v.space == "const"
                )
        if self.module.globals:
            gmem.finalize()
        key = (tuple(sorted(self.global_addr.items())), tuple(sorted(self.shared_off_all.items())))
        if getattr(self, "_code_key", None) != key:  # closures depend only on symbol addresses
            self.stats = Stats()
            self.code = [self._build(ins, pc) for pc, ins in enumerate(self.fn.body)]
            self._code_key = key
        self.stats = Stats(approximate=list(self.uses_approx))

    def _new_block(self, ctaid: tuple[int, int, int], nthreads: int) -> Block:
        return Block(ctaid, nthreads, self.shared_size, self.local_size, self.shared_init)

    def _new_warp(self, blk: Block, wid: int, threads: np.ndarray) -> Warp:
        return Warp(self.reg_dtypes, blk, wid, threads)

    def _release(self, warps: list[Warp]) -> None:  # type: ignore[override]
        """``bar.red``: every arrived thread's predicate, reduced over the block, to each of them."""
        entries = [e for w in warps for e in w.red]
        if not entries:
            return
        kinds = {e[0] for e in entries}
        if len(kinds) > 1:
            raise ExecutionError(
                f"threads of one block met at barriers that reduce differently: {sorted(kinds)}"
            )
        kind = kinds.pop()
        preds = np.concatenate([p[act] for _, _, act, p in entries])
        if kind == "popc":
            val = np.full(WARP, int(np.count_nonzero(preds)), dtype=np.uint32)
        else:
            val = np.full(WARP, bool(preds.all()) if kind == "and" else bool(preds.any()))
        for w in warps:
            for _, wr, act, _ in w.red:
                wr(w, val, None if act is ALL or act.all() else act)
            w.red = []

    def _step_limit(self, w: Warp, pc: int) -> ExecutionError:
        ins = self.fn.body[pc]
        return self._step_limit_error(w, ins.where(), ins.text)

    def _run_uniform(self, w: Warp) -> int:  # type: ignore[override]
        """The converged tight loop. Its issues are counted into ``stats`` when it ends, so the
        counter specials (``%clock``) read the count as of the run's start."""
        code = self.code
        n = len(code)
        stats = self.stats
        trace = self.trace
        pc = w.conv
        m = w.cmask
        width = WARP if m is None else int(m.sum())
        issued = 0
        try:
            while True:
                if pc >= n:
                    raise self._past_end()
                if issued >= self.steps_left:
                    raise self._step_limit(w, pc)
                issued += 1
                if trace is not None:
                    self._trace(w, pc, m)
                w.conv = pc
                kind, arg = code[pc](w, m)
                if kind == NEXT:
                    pc += 1
                elif kind == JUMP:
                    pc = arg
                else:
                    return kind
        finally:
            self.steps_left -= issued
            stats.warp_instructions += issued
            stats.thread_instructions += issued * width

    def _account_one(self, w: Warp, pc: int, m: np.ndarray) -> None:  # type: ignore[override]
        if self.steps_left <= 0:
            raise self._step_limit(w, pc)
        self.steps_left -= 1
        self.stats.warp_instructions += 1
        self.stats.thread_instructions += int(np.count_nonzero(m))
        if self.trace is not None:
            self._trace(w, pc, m)

    def _trace(self, w: Warp, pc: int, m: np.ndarray | None) -> None:
        text = self.fn.body[pc].text
        self.trace(f"blk{w.block.ctaid} w{w.warp_id} pc={pc:4d} mask={mask_word(m):08x}  {text}")

    # ------------------------------------------------------------------ building closures
    def _fail(self, ins: Instr, msg: str) -> PTXError:
        return PTXError(f"{ins.where()}: {msg}: `{ins.text}`")

    def _reader(self, op, t: str, ins: Instr):
        """A function w -> lane values of operand ``op`` read as PTX type ``t``."""
        td = iops.DTYPES[t]
        if isinstance(op, Reg):
            if op.name not in self.reg_index:
                raise self._fail(ins, f"undeclared register {op.name}")
            i = self.reg_index[op.name]
            sd = self.reg_dtypes[i]
            if sd is td:
                return lambda w: w.R[i]
            if t == "pred" or sd is np.bool_:
                return lambda w: w.R[i].astype(td)
            if np.dtype(sd).itemsize == np.dtype(td).itemsize:
                return lambda w: w.R[i].view(td)
            return lambda w: w.R[i].astype(td)
        if isinstance(op, Neg):
            inner = self._reader(op.inner, "pred", ins)
            return lambda w: ~inner(w)
        if isinstance(op, Imm):
            val = _imm_value(op, t)
            return lambda w: val
        if isinstance(op, Special):
            name = op.name
            if name in COUNTER_SPECIALS:
                # no real clock exists here: a monotone count (warp instructions issued so far); the
                # _hi halves are 0 (the count stays below 2^32), the 64-bit forms the whole count
                hi = name.endswith("_hi")
                return lambda w: np.full(
                    WARP, 0 if hi else self.stats.warp_instructions, dtype=np.uint64
                ).astype(td)
            _check_special(name, ins)
            return lambda w: w.special[name].astype(td) if w.special[name].dtype != td else w.special[name]
        if isinstance(op, Sym):
            addr = self._symbol_address(op.name, ins)
            val = np.array(addr & ((1 << (8 * np.dtype(td).itemsize)) - 1), dtype=np.uint64).astype(td)[()]
            return lambda w: val
        raise self._fail(ins, f"unsupported operand {op}")

    def _symbol_address(self, name: str, ins: Instr) -> int:
        if name in self.shared_off_all:
            return self.shared_off_all[name]
        if name in self.local_off:
            return self.local_off[name]
        if name in self.param_off:
            return self.param_off[name]
        if name in self.global_addr:
            return self.global_addr[name]
        raise self._fail(ins, f"unknown symbol {name}")

    def _writer(self, op, t: str, ins: Instr):
        """A function (w, values, mask) storing values of PTX type ``t`` into operand ``op``."""
        if isinstance(op, Sink):
            return lambda w, v, m: None
        if not isinstance(op, Reg):
            raise self._fail(ins, f"cannot write to {op}")
        if op.name not in self.reg_index:
            raise self._fail(ins, f"undeclared register {op.name}")
        i = self.reg_index[op.name]
        sd = self.reg_dtypes[i]
        td = iops.DTYPES[t]
        same = sd is td
        view = (not same) and np.dtype(sd).itemsize == np.dtype(td).itemsize and sd is not np.bool_

        def write(w, v, m):
            if type(v) is not np.ndarray:
                v = np.full(WARP, v)
            elif v.shape != (WARP,):
                v = np.array(as_lanes(v))
            if v.dtype != sd:
                v = v.view(sd) if view and v.dtype == td else v.astype(sd)
            if m is None:
                w.R[i] = v if v.flags.writeable else v.copy()
            else:
                w.R[i] = np.where(m, v, w.R[i])

        return write

    def _guarded(self, ins: Instr, fn):
        """Wrap a closure with the instruction's guard predicate."""
        if ins.guard is None:
            return fn
        g = self._reader(ins.guard, "pred", ins)
        neg = ins.guard_neg

        def guarded(w, m):
            p = g(w)
            if neg:
                p = ~p
            mm = p if m is None else (m & p)
            if m is None and p.all():
                return fn(w, None)
            if not mm.any():
                return (NEXT, 0)
            return fn(w, mm)

        return guarded

    def _build(self, ins: Instr, pc: int):
        op = ins.op
        builder = getattr(self, f"_op_{op}", None)
        if builder is None:
            raise self._fail(ins, f"unsupported PTX instruction `{ins.form}`")
        if op == "bra":
            return builder(ins, pc)
        return self._guarded(ins, builder(ins, pc))

    # ---- control flow
    def _op_bra(self, ins: Instr, pc: int):
        target = ins.operands[0]
        if not isinstance(target, Label):
            raise self._fail(ins, "indirect branch is not supported")
        tpc = self.fn.labels[target.name]
        if ins.guard is None:
            return lambda w, m: (JUMP, tpc)
        g = self._reader(ins.guard, "pred", ins)
        neg = ins.guard_neg

        def bra(w, m):
            p = g(w)
            if neg:
                p = ~p
            return branch(w, m, p if m is None else (m & p), pc, tpc)

        return bra

    def _op_ret(self, ins: Instr, pc: int):
        return retire

    _op_exit = _op_ret

    def _op_bar(self, ins: Instr, pc: int):
        if "warp" in ins.mods:  # bar.warp.sync: lanes already converge under min-PC scheduling
            return lambda w, m: (NEXT, 0)
        if "arrive" in ins.mods:
            return lambda w, m: (NEXT, 0)

        red = next((k for k in ("popc", "and", "or") if "red" in ins.mods and k in ins.mods), None)
        if "red" in ins.mods and red is None:
            raise self._fail(ins, "unsupported barrier reduction")
        if red is not None:  # bar.red.popc.u32 d, a{, b}, {!}c / bar.red.{and,or}.pred p, a{, b}, {!}c
            rp = self._reader(ins.operands[-1], "pred", ins)
            wr = self._writer(ins.operands[0], "u32" if red == "popc" else "pred", ins)

        def bar(w, m):
            act = ALL if m is None else m
            if red is not None:  # the result is written when the barrier releases (_release)
                w.red.append((red, wr, act.copy(), as_lanes(rp(w)) & act))
            return arrive(w, act, pc)

        return bar

    _op_barrier = _op_bar

    def _nop(self, ins: Instr, pc: int):
        return lambda w, m: (NEXT, 0)

    _op_membar = _op_fence = _op_prefetch = _op_prefetchu = _op_pmevent = _op_nanosleep = _nop

    # ---- moves
    def _op_mov(self, ins: Instr, pc: int):
        t = _type_of(ins)
        d, a = ins.operands
        if isinstance(a, Vec):  # pack: mov.b64 d, {lo, hi}
            parts = a.items
            width = TYPE_SIZES[t] * 8 // len(parts)
            pt = {8: "b8", 16: "b16", 32: "b32"}[width]
            readers = [self._reader(p, pt, ins) for p in parts]
            wr = self._writer(d, t, ins)
            td = iops.DTYPES[t]

            def pack(w, m):
                acc = np.zeros(WARP, dtype=np.uint64)
                for k, r in enumerate(readers):
                    acc |= np.asarray(r(w)).astype(np.uint64) << np.uint64(k * width)
                wr(w, acc.astype(iops.UNSIGNED_OF[TYPE_SIZES[t] * 8]).view(td), m)
                return (NEXT, 0)

            return pack
        if isinstance(d, Vec):  # unpack: mov.b64 {lo, hi}, d
            parts = d.items
            width = TYPE_SIZES[t] * 8 // len(parts)
            pt = {8: "b8", 16: "b16", 32: "b32"}[width]
            rd = self._reader(a, t, ins)
            writers = [self._writer(p, pt, ins) for p in parts]
            mask = np.uint64((1 << width) - 1)

            def unpack(w, m):
                v = np.asarray(rd(w)).astype(np.uint64)
                for k, wr in enumerate(writers):
                    wr(w, ((v >> np.uint64(k * width)) & mask).astype(iops.UNSIGNED_OF[width]), m)
                return (NEXT, 0)

            return unpack
        rd = self._reader(a, t, ins)
        wr = self._writer(d, t, ins)

        def mov(w, m):
            wr(w, rd(w), m)
            return (NEXT, 0)

        return mov

    def _simple(self, ins: Instr, t: str, f, nsrc: int | None = None, dtype_out: str | None = None):
        ops = ins.operands
        d, srcs = ops[0], ops[1:]
        if nsrc is not None and len(srcs) != nsrc:
            raise self._fail(ins, f"expected {nsrc} source operands")
        rds = [self._reader(s, t, ins) for s in srcs]
        wr = self._writer(d, dtype_out or t, ins)
        if len(rds) == 1:
            r0 = rds[0]

            def un(w, m):
                wr(w, f(r0(w)), m)
                return (NEXT, 0)

            return un
        if len(rds) == 2:
            r0, r1 = rds

            def bi(w, m):
                wr(w, f(r0(w), r1(w)), m)
                return (NEXT, 0)

            return bi

        def nary(w, m):
            wr(w, f(*[r(w) for r in rds]), m)
            return (NEXT, 0)

        return nary

    # ---- integer and float arithmetic
    def _op_add(self, ins: Instr, pc: int):
        return self._addsub(ins, +1)

    def _op_sub(self, ins: Instr, pc: int):
        return self._addsub(ins, -1)

    def _addsub(self, ins: Instr, sign: int):
        t = _type_of(ins)
        rnd, ftz, sat = _fmods(ins)
        if t == "f32":
            f = fp32.add if sign > 0 else fp32.sub
            return self._simple(ins, t, lambda a, b: f(a, b, rnd, ftz, sat), 2)
        if t == "f64":
            f = fp32.add64 if sign > 0 else fp32.sub64
            return self._simple(ins, t, lambda a, b: f(a, b, rnd), 2)
        if "cc" in ins.mods or ins.op in ("addc", "subc"):
            return self._carry(ins, t, sign)
        if sat:  # add.sat.s32 clamps
            lo, hi = -(2**31), 2**31 - 1

            def satf(a, b):
                r = a.astype(np.int64) + sign * np.asarray(b).astype(np.int64)
                return np.clip(r, lo, hi).astype(np.int32)

            return self._simple(ins, t, satf, 2)
        if sign > 0:
            return self._simple(ins, t, lambda a, b: a + b, 2)
        return self._simple(ins, t, lambda a, b: a - b, 2)

    def _carry(self, ins: Instr, t: str, sign: int):
        """add.cc/addc/sub.cc/subc: extended-precision arithmetic through a per-lane carry flag."""
        width = TYPE_SIZES[t] * 8
        d, a, b = ins.operands
        ra, rb = self._reader(a, t, ins), self._reader(b, t, ins)
        wr = self._writer(d, t, ins)
        use_in = ins.op in ("addc", "subc")
        set_out = "cc" in ins.mods
        mask = (1 << width) - 1

        def carry(w, m):
            xs = iops.as_unsigned(as_lanes(ra(w))).tolist()
            ys = iops.as_unsigned(as_lanes(rb(w))).tolist()
            cs = w.cc.tolist() if use_in else [0] * WARP
            full = [x + y + c if sign > 0 else x - y - c for x, y, c in zip(xs, ys, cs, strict=True)]
            res = np.array([v & mask for v in full], dtype=iops.UNSIGNED_OF[width]).view(iops.DTYPES[t])
            wr(w, res, m)
            if set_out:
                cout = np.array([(v >> width) & 1 if sign > 0 else int(v < 0) for v in full], dtype=np.uint64)
                w.cc = cout if m is None else np.where(m, cout, w.cc)
            return (NEXT, 0)

        return carry

    _op_addc = _op_add
    _op_subc = _op_sub

    def _op_mul(self, ins: Instr, pc: int):
        t = _type_of(ins)
        rnd, ftz, sat = _fmods(ins)
        if t == "f32":
            return self._simple(ins, t, lambda a, b: fp32.mul(a, b, rnd, ftz, sat), 2)
        if t == "f64":
            return self._simple(ins, t, lambda a, b: fp32.mul64(a, b, rnd), 2)
        if "wide" in ins.mods:
            wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[t]
            return self._simple(ins, t, iops.mulwide, 2, dtype_out=wide)
        if "hi" in ins.mods:
            return self._simple(ins, t, iops.mulhi, 2)
        return self._simple(ins, t, lambda a, b: a * b, 2)

    def _op_mul24(self, ins: Instr, pc: int):
        return self._op_mad24(ins, pc)

    def _op_mad24(self, ins: Instr, pc: int):
        """mul24/mad24: the low 24 bits of each operand (sign-extended for .s32) give a 48-bit
        product; .lo keeps bits 31..0, .hi bits 47..16; mad24 then adds c (wrapping)."""
        t = _type_of(ins)
        hi = "hi" in ins.mods
        signed = t == "s32"

        def low24(x) -> np.ndarray:
            v = np.asarray(x).astype(np.int64) & 0xFFFFFF
            return np.where(v >= 1 << 23, v - (1 << 24), v) if signed else v

        def f(a, b, c=None):
            p = low24(a) * low24(b)
            r = (p >> 16) if hi else p
            if c is not None:
                r = r + np.asarray(c).astype(np.int64)
            return (r & 0xFFFFFFFF).astype(np.uint32).view(iops.DTYPES[t])

        return self._simple(ins, t, f, 3 if ins.op == "mad24" else 2)

    def _op_mad(self, ins: Instr, pc: int):
        t = _type_of(ins)
        rnd, ftz, sat = _fmods(ins)
        if t == "f32":
            return self._simple(ins, t, lambda a, b, c: fp32.fma(a, b, c, rnd, ftz, sat), 3)
        if t == "f64":
            return self._simple(ins, t, lambda a, b, c: fp32.fma64(a, b, c, rnd), 3)
        d, a, b, c = ins.operands
        if "wide" in ins.mods:
            wide = {"s16": "s32", "u16": "u32", "s32": "s64", "u32": "u64"}[t]
            ra, rb = self._reader(a, t, ins), self._reader(b, t, ins)
            rc = self._reader(c, wide, ins)
            wr = self._writer(d, wide, ins)

            def madw(w, m):
                wr(w, iops.mulwide(np.asarray(ra(w)), np.asarray(rb(w))) + rc(w), m)
                return (NEXT, 0)

            return madw
        hi = "hi" in ins.mods
        if hi and sat:  # mad.hi.sat.s32

            def f(a, b, c):
                r = iops.mulhi(a, b).astype(np.int64) + np.asarray(c).astype(np.int64)
                return np.clip(r, -(2**31), 2**31 - 1).astype(np.int32)

            return self._simple(ins, t, f, 3)
        if hi:
            return self._simple(ins, t, lambda a, b, c: iops.mulhi(a, np.asarray(b, dtype=a.dtype)) + c, 3)
        return self._simple(ins, t, lambda a, b, c: a * b + c, 3)

    def _op_fma(self, ins: Instr, pc: int):
        return self._op_mad(ins, pc)

    def _op_div(self, ins: Instr, pc: int):
        t = _type_of(ins)
        rnd, ftz, sat = _fmods(ins)
        if t == "f32":
            if "approx" in ins.mods:
                return self._simple(ins, t, lambda a, b: fp32.div_approx(a, b, ftz), 2)
            if "full" in ins.mods:
                return self._simple(ins, t, lambda a, b: fp32.div_full(a, b, ftz), 2)
            return self._simple(ins, t, lambda a, b: fp32.div(a, b, rnd or "rn", ftz), 2)
        if t == "f64":
            return self._simple(ins, t, lambda a, b: fp32.div64(a, b, rnd), 2)
        return self._intdiv(ins, t, quotient=True)

    def _op_rem(self, ins: Instr, pc: int):
        return self._intdiv(ins, _type_of(ins), quotient=False)

    def _intdiv(self, ins: Instr, t: str, quotient: bool):
        d, a, b = ins.operands
        ra, rb = self._reader(a, t, ins), self._reader(b, t, ins)
        wr = self._writer(d, t, ins)

        def div(w, m):
            x = np.asarray(ra(w))
            y = as_lanes(rb(w))
            act = ALL if m is None else m
            bad = act & (y == 0)
            if bad.any():
                lane = int(np.argmax(bad))
                raise self._fault(w, lane, ins, f"integer division by zero ({ins.op}.{t})")
            ys = np.where(y == 0, y.dtype.type(1), y)
            q, r = iops.div_trunc(x, ys)
            wr(w, q if quotient else r, m)
            return (NEXT, 0)

        return div

    def _op_abs(self, ins: Instr, pc: int):
        t = _type_of(ins)
        _, ftz, _ = _fmods(ins)
        if t == "f32":
            return self._simple(ins, t, lambda a: fp32.abs(a, ftz), 1)
        if t == "f64":
            return self._simple(ins, t, fp32.abs64, 1)
        return self._simple(ins, t, lambda a: np.where(a < 0, -a, a), 1)

    def _op_neg(self, ins: Instr, pc: int):
        t = _type_of(ins)
        _, ftz, _ = _fmods(ins)
        if t == "f32":
            return self._simple(ins, t, lambda a: fp32.neg(a, ftz), 1)
        if t == "f64":
            return self._simple(ins, t, fp32.neg64, 1)
        return self._simple(ins, t, lambda a: -a, 1)

    def _minmax(self, ins: Instr, is_min: bool):
        t = _type_of(ins)
        _, ftz, _ = _fmods(ins)
        if t == "f32":
            f = fp32.min if is_min else fp32.max
            return self._simple(ins, t, lambda a, b: f(a, b, ftz), 2)
        if t == "f64":
            return self._simple(ins, t, fp32.min64 if is_min else fp32.max64, 2)
        return self._simple(ins, t, np.minimum if is_min else np.maximum, 2)

    def _op_min(self, ins: Instr, pc: int):
        return self._minmax(ins, True)

    def _op_max(self, ins: Instr, pc: int):
        return self._minmax(ins, False)

    def _op_copysign(self, ins: Instr, pc: int):
        t = _type_of(ins)
        if t == "f64":
            sign = np.uint64(1 << 63)
            return self._simple(ins, t, lambda a, b: (b & ~sign) | (a & sign), 2)
        return self._simple(ins, t, fp32.copysign, 2)

    def _fp_unary(self, ins: Instr, name: str):
        t = _type_of(ins)
        rnd, ftz, _ = _fmods(ins)
        approx = "approx" in ins.mods
        if t == "f64":
            if name == "sqrt":
                return self._simple(ins, t, lambda a: fp32.sqrt64(a, rnd), 1)
            if name == "rcp" and not approx:
                return self._simple(ins, t, lambda a: fp32.rcp64(a, rnd), 1)
            raise self._fail(ins, f"unsupported f64 instruction `{ins.form}`")
        if approx or name in APPROX_OPS:
            f = getattr(fp32, f"{name}_approx")
            if name == "tanh":
                return self._simple(ins, t, lambda a: f(a), 1)
            return self._simple(ins, t, lambda a: f(a, ftz), 1)
        f = getattr(fp32, name)
        return self._simple(ins, t, lambda a: f(a, rnd or "rn", ftz), 1)

    def _op_sqrt(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "sqrt")

    def _op_rcp(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "rcp")

    def _op_rsqrt(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "rsqrt")

    def _op_ex2(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "ex2")

    def _op_lg2(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "lg2")

    def _op_sin(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "sin")

    def _op_cos(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "cos")

    def _op_tanh(self, ins: Instr, pc: int):
        return self._fp_unary(ins, "tanh")

    def _op_testp(self, ins: Instr, pc: int):
        t = _type_of(ins)
        kind = ins.mods[0]
        if t != "f32":
            raise self._fail(ins, "testp supports .f32 only")
        return self._simple(ins, t, lambda a: fp32.testp(kind, a), 1, dtype_out="pred")

    # ---- bit operations
    def _op_and(self, ins: Instr, pc: int):
        return self._simple(ins, _type_of(ins), lambda a, b: a & b, 2)

    def _op_or(self, ins: Instr, pc: int):
        return self._simple(ins, _type_of(ins), lambda a, b: a | b, 2)

    def _op_xor(self, ins: Instr, pc: int):
        return self._simple(ins, _type_of(ins), lambda a, b: a ^ b, 2)

    def _op_not(self, ins: Instr, pc: int):
        return self._simple(ins, _type_of(ins), lambda a: ~a, 1)

    def _op_cnot(self, ins: Instr, pc: int):
        t = _type_of(ins)
        return self._simple(ins, t, lambda a: (a == 0).astype(iops.DTYPES[t]), 1)

    def _op_lop3(self, ins: Instr, pc: int):
        d, a, b, c, lut = ins.operands
        if not isinstance(lut, Imm):
            raise self._fail(ins, "lop3 needs an immediate truth table")
        ra, rb, rc = (self._reader(x, "b32", ins) for x in (a, b, c))
        wr = self._writer(d, "b32", ins)
        table = lut.value & 0xFF

        def f(w, m):
            wr(w, iops.lop3(ra(w), rb(w), rc(w), table), m)
            return (NEXT, 0)

        return f

    def _shift_op(self, ins: Instr, left: bool):
        t = _type_of(ins)
        d, a, b = ins.operands
        ra = self._reader(a, t, ins)
        rb = self._reader(b, "u32", ins)
        wr = self._writer(d, t, ins)
        width = TYPE_SIZES[t] * 8
        f = iops.shl if left else iops.shr

        def sh(w, m):
            x = ra(w)
            if np.ndim(x) == 0:
                x = np.full(WARP, x)
            wr(w, f(x, rb(w), width), m)
            return (NEXT, 0)

        return sh

    def _op_shl(self, ins: Instr, pc: int):
        return self._shift_op(ins, True)

    def _op_shr(self, ins: Instr, pc: int):
        return self._shift_op(ins, False)

    def _op_shf(self, ins: Instr, pc: int):
        left = "l" in ins.mods
        wrap = "wrap" in ins.mods
        d, a, b, c = ins.operands
        ra, rb, rc = self._reader(a, "b32", ins), self._reader(b, "b32", ins), self._reader(c, "u32", ins)
        wr = self._writer(d, "b32", ins)

        def f(w, m):
            wr(w, iops.shf(ra(w), rb(w), as_lanes(rc(w)), left, wrap), m)
            return (NEXT, 0)

        return f

    def _op_popc(self, ins: Instr, pc: int):
        t = _type_of(ins)
        return self._simple(ins, t, lambda a: iops.popc(as_lanes(a)), 1, dtype_out="u32")

    def _op_clz(self, ins: Instr, pc: int):
        t = _type_of(ins)
        return self._simple(ins, t, lambda a: iops.clz(as_lanes(a)), 1, dtype_out="u32")

    def _op_brev(self, ins: Instr, pc: int):
        t = _type_of(ins)
        return self._simple(ins, t, lambda a: iops.brev(as_lanes(a)), 1)

    def _op_bfind(self, ins: Instr, pc: int):
        t = _type_of(ins)
        sa = "shiftamt" in ins.mods
        return self._simple(ins, t, lambda a: iops.bfind(as_lanes(a), sa), 1, dtype_out="u32")

    def _op_bfe(self, ins: Instr, pc: int):
        t = _type_of(ins)
        d, a, b, c = ins.operands
        ra = self._reader(a, t, ins)
        rb, rc = self._reader(b, "u32", ins), self._reader(c, "u32", ins)
        wr = self._writer(d, t, ins)

        def f(w, m):
            wr(w, iops.bfe(as_lanes(ra(w)), rb(w), rc(w)), m)
            return (NEXT, 0)

        return f

    def _op_bfi(self, ins: Instr, pc: int):
        t = _type_of(ins)
        d, a, b, c, e = ins.operands
        ra, rb = self._reader(a, t, ins), self._reader(b, t, ins)
        rc, re_ = self._reader(c, "u32", ins), self._reader(e, "u32", ins)
        wr = self._writer(d, t, ins)

        def f(w, m):
            wr(w, iops.bfi(ra(w), as_lanes(rb(w)), rc(w), re_(w)), m)
            return (NEXT, 0)

        return f

    def _op_prmt(self, ins: Instr, pc: int):
        mode = next((x for x in ins.mods if x in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
        d, a, b, c = ins.operands
        ra, rb, rc = (self._reader(x, "b32", ins) for x in (a, b, c))
        wr = self._writer(d, "b32", ins)

        def f(w, m):
            wr(w, iops.prmt(ra(w), rb(w), as_lanes(rc(w)), mode), m)
            return (NEXT, 0)

        return f

    # ---- comparisons and selects
    def _op_setp(self, ins: Instr, pc: int):
        t = _type_of(ins)
        cmp = ins.mods[0]
        boolop = next((x for x in ins.mods[1:] if x in ("and", "or", "xor")), None)
        _, ftz, _ = _fmods(ins)
        d = ins.operands[0]
        a, b = ins.operands[1], ins.operands[2]
        c = ins.operands[3] if len(ins.operands) > 3 else None
        ra, rb = self._reader(a, t, ins), self._reader(b, t, ins)
        rc = self._reader(c, "pred", ins) if c is not None else None
        if isinstance(d, Pair):
            wp, wq = self._writer(d.first, "pred", ins), self._writer(d.second, "pred", ins)
        else:
            wp, wq = self._writer(d, "pred", ins), None
        if t == "f32":

            def cmpf(x, y):
                return fp32.setp(cmp, x, y, ftz)
        elif t == "f64":

            def cmpf(x, y):
                return fp32.setp64(cmp, x, y)
        else:
            cmpf = _int_compare(cmp, t, ins, self)

        def setp(w, m):
            r = cmpf(ra(w), rb(w))
            if type(r) is not np.ndarray:
                r = np.full(WARP, r)
            q = ~r
            if rc is not None:
                cv = rc(w)
                r = _boolop(boolop, r, cv)
                q = _boolop(boolop, q, cv)
            wp(w, r, m)
            if wq is not None:
                wq(w, q, m)
            return (NEXT, 0)

        return setp

    def _op_set(self, ins: Instr, pc: int):
        # set.CmpOp.dtype.stype d, a, b: d = all-ones (or 1.0f) when true
        cmp = ins.mods[0]
        types = [m for m in ins.mods if m in TYPES]
        dt, st = types[0], types[-1]
        d, a, b = ins.operands[:3]
        ra, rb = self._reader(a, st, ins), self._reader(b, st, ins)
        wr = self._writer(d, dt, ins)
        if st == "f32":

            def cmpf(x, y):
                return fp32.setp(cmp, x, y, False)
        else:
            cmpf = _int_compare(cmp, st, ins, self)
        true = np.uint32(0x3F800000) if dt == "f32" else np.uint32(0xFFFFFFFF)

        def f(w, m):
            r = as_lanes(cmpf(ra(w), rb(w)))
            wr(w, np.where(r, true, np.uint32(0)).view(iops.DTYPES[dt]), m)
            return (NEXT, 0)

        return f

    def _op_selp(self, ins: Instr, pc: int):
        t = _type_of(ins)
        d, a, b, c = ins.operands
        ra, rb, rc = self._reader(a, t, ins), self._reader(b, t, ins), self._reader(c, "pred", ins)
        wr = self._writer(d, t, ins)

        def selp(w, m):
            wr(w, np.where(rc(w), ra(w), rb(w)).astype(iops.DTYPES[t]), m)
            return (NEXT, 0)

        return selp

    def _op_slct(self, ins: Instr, pc: int):
        types = [m for m in ins.mods if m in TYPES]
        dt, ct = types[0], types[-1]
        d, a, b, c = ins.operands
        ra, rb, rc = self._reader(a, dt, ins), self._reader(b, dt, ins), self._reader(c, ct, ins)
        wr = self._writer(d, dt, ins)
        ftz = "ftz" in ins.mods

        def slct(w, m):
            cv = rc(w)
            if ct == "f32":
                cond = fp32.setp("ge", cv, np.zeros(WARP, dtype=np.uint32), ftz)
            else:
                cond = np.asarray(cv) >= 0
            wr(w, np.where(cond, ra(w), rb(w)).astype(iops.DTYPES[dt]), m)
            return (NEXT, 0)

        return slct

    # ---- conversions
    def _op_cvt(self, ins: Instr, pc: int):
        types = [m for m in ins.mods if m in TYPES]
        if len(types) != 2:
            raise self._fail(ins, "cvt needs a destination and a source type")
        dt, st = types
        rnd = next((m for m in ins.mods if m in ROUNDING | INT_ROUNDING), None)
        ftz = "ftz" in ins.mods
        sat = "sat" in ins.mods
        d, a = ins.operands
        ra = self._reader(a, st, ins)
        wr = self._writer(d, dt, ins)
        f = _cvt_function(dt, st, rnd, ftz, sat, ins, self)

        def cvt(w, m):
            wr(w, f(as_lanes(ra(w))), m)
            return (NEXT, 0)

        return cvt

    def _op_cvta(self, ins: Instr, pc: int):
        t = _type_of(ins)
        to = "to" in ins.mods
        space = next((m for m in ins.mods if m in ("global", "shared", "local", "const", "param")), None)
        if space == "param":  # kernel parameters live in their own small space, with no generic window here
            raise self._fail(ins, "generic addressing of kernel parameters (cvta.param) is not supported")
        # .global and .const (our constant variables sit in the global arena): generic == space address
        window = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space, 0)
        d, a = ins.operands
        ra = self._reader(a, t, ins)
        wr = self._writer(d, t, ins)
        td = iops.DTYPES[t]
        win = np.uint64(window)

        top = np.uint64(window + WINDOW_SIZE)

        def cvta(w, m):
            v = np.asarray(ra(w)).astype(np.uint64)
            if to:
                # PTX: undefined unless the generic address lies in the space's window; the oracle
                # reports it instead of inventing an address that might land in bounds
                v = as_lanes(v)
                act = ALL if m is None else m
                bad = act & ((v < win) | (v >= top))
                if bad.any():
                    lane = int(np.argmax(bad))
                    raise self._fault(
                        w,
                        lane,
                        ins,
                        f"cvta.to.{space} of generic address 0x{int(v[lane]):x}, "
                        f"which is not a {space} address",
                    )
                v = v - win
            else:
                v = v + win
            wr(w, v.astype(td), m)
            return (NEXT, 0)

        if window == 0:

            def cvta_id(w, m):
                wr(w, ra(w), m)
                return (NEXT, 0)

            return cvta_id
        return cvta

    # ---- memory
    @staticmethod
    def _address_mask(space: str) -> np.uint64:
        """The address width of a state space, as a mask.

        PTX ISA ("Addresses as Operands"): addresses are zero-extended to the state space's width
        and truncated when the register is wider. ``.shared``, ``.local`` and ``.param`` windows
        are 32-bit, so ``[reg+imm]`` wraps modulo 2^32 there: NVRTC may strength-reduce
        ``temp[m - tx + 1][tx + 1]`` into a 32-bit base below zero plus a positive offset.
        Global, constant and generic addresses are 64-bit (``.address_size 64``).
        """
        return np.uint64(0xFFFFFFFF if space in ("shared", "local", "callparam", "param") else (1 << 64) - 1)

    def _address(self, op: Addr, ins: Instr, space: str = "generic"):
        """A function w -> uint64 addresses (space-relative) of an Addr operand.

        The offset is sign-extended and added modulo the space's address width; a 32-bit
        register is zero-extended first, a 64-bit one truncated in a 32-bit space."""
        amask = self._address_mask(space)
        off = np.uint64(op.offset & 0xFFFFFFFFFFFFFFFF)
        if op.base is None:
            const = np.full(WARP, off & amask, dtype=np.uint64)
            return lambda w: const
        if isinstance(op.base, Sym):
            base = np.uint64(self._symbol_address(op.base.name, ins))
            const = np.full(WARP, (base + off) & amask, dtype=np.uint64)
            return lambda w: const
        i = self.reg_index.get(op.base.name)
        if i is None:
            raise self._fail(ins, f"undeclared register {op.base.name}")
        full = amask == np.uint64((1 << 64) - 1)
        if self.reg_dtypes[i] is np.uint64:
            if op.offset == 0 and full:
                return lambda w: w.R[i]
            if full:
                return lambda w: w.R[i] + off
            return lambda w: (w.R[i] + off) & amask
        if self.reg_dtypes[i] is np.bool_:
            raise self._fail(ins, f"predicate register {op.base.name} used as an address")
        if full:
            return lambda w: w.R[i].astype(np.uint64) + off
        return lambda w: (w.R[i].astype(np.uint64) + off) & amask

    def _space_of(self, ins: Instr, op: Addr) -> str:
        for m in ins.mods:
            if m in ("global", "shared", "local", "const", "param"):
                if m == "param" and isinstance(op.base, Sym) and op.base.name in self.local_off:
                    return "callparam"
                return m
        return "generic"

    def _resolve(
        self, w: Warp, addr: np.ndarray, lanes: np.ndarray, size: int, space: str, ins: Instr, store: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Map addresses of active lanes to (memory array, byte index); raise on a bad access."""
        a = addr if lanes is ALL else addr[lanes]
        if space == "generic":
            # decide per access from the window; all lanes of one access must agree on the space
            space, win = generic_space(a)
            if win:
                inside = (a >= np.uint64(win)) & (a < np.uint64(win + WINDOW_SIZE))
            else:
                inside = ~(
                    ((a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + WINDOW_SIZE)))
                    | ((a >= np.uint64(LOCAL_WINDOW)) & (a < np.uint64(LOCAL_WINDOW + WINDOW_SIZE)))
                )
            if not inside.all():
                k = int(np.argmin(inside))
                lane = int(np.nonzero(lanes)[0][k])
                raise self._fault(
                    w,
                    lane,
                    ins,
                    f"generic {'store' if store else 'load'} whose lanes point into different state spaces "
                    f"(lane {int(np.nonzero(lanes)[0][0])}: {space}, lane {lane}: 0x{int(a[k]):x}) is not "
                    "supported",
                )
            if win:
                a = a - np.uint64(win)
        return self._access(w, a, lanes, size, space, ins, store)

    def _op_ld(self, ins: Instr, pc: int):
        t = _type_of(ins)
        d, a = ins.operands
        if not isinstance(a, Addr):
            raise self._fail(ins, "ld needs an address operand")
        space = self._space_of(ins, a)
        size = TYPE_SIZES[t]
        dests = list(d.items) if isinstance(d, Vec) else [d]
        writers = [self._writer(x, t, ins) for x in dests]
        addr = self._address(a, ins, space)
        amask = self._address_mask(space)
        dt = iops.DTYPES[t]
        if t == "pred":
            raise self._fail(ins, "ld of .pred")

        def ld(w, m):
            lanes = ALL if m is None else m
            base = addr(w)
            for k, wr in enumerate(writers):
                ad = (base + np.uint64(k * size)) & amask if k else base
                mem, idx = self._resolve(w, ad, lanes, size, space, ins, False)
                got = mem.view(dt)[(idx // np.uint64(size)).astype(np.int64)]
                if lanes is ALL:
                    vals = got
                else:
                    vals = np.zeros(WARP, dtype=dt)
                    vals[lanes] = got
                wr(w, vals, m)
            return (NEXT, 0)

        return ld

    _op_ldu = _op_ld

    def _op_st(self, ins: Instr, pc: int):
        t = _type_of(ins)
        a, s = ins.operands
        if not isinstance(a, Addr):
            raise self._fail(ins, "st needs an address operand")
        space = self._space_of(ins, a)
        size = TYPE_SIZES[t]
        srcs = list(s.items) if isinstance(s, Vec) else [s]
        readers = [self._reader(x, t, ins) for x in srcs]
        addr = self._address(a, ins, space)
        amask = self._address_mask(space)
        dt = iops.DTYPES[t]

        def st(w, m):
            lanes = ALL if m is None else m
            base = addr(w)
            for k, rd in enumerate(readers):
                ad = (base + np.uint64(k * size)) & amask if k else base
                mem, idx = self._resolve(w, ad, lanes, size, space, ins, True)
                v = as_lanes(rd(w)).astype(dt)
                mem.view(dt)[(idx // np.uint64(size)).astype(np.int64)] = v if lanes is ALL else v[lanes]
            return (NEXT, 0)

        return st

    def _op_atom(self, ins: Instr, pc: int):
        return self._atomic(ins, returns=True)

    def _op_red(self, ins: Instr, pc: int):
        return self._atomic(ins, returns=False)

    def _atomic(self, ins: Instr, returns: bool):
        t = _type_of(ins)
        kind = next(
            (
                m
                for m in ins.mods
                if m in ("add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor")
            ),
            None,
        )
        if kind is None:
            raise self._fail(ins, "unsupported atomic operation")
        ops = list(ins.operands)
        d = ops.pop(0) if returns else None
        a = ops.pop(0)
        if not isinstance(a, Addr):
            raise self._fail(ins, "atomic needs an address operand")
        space = self._space_of(ins, a)
        size = TYPE_SIZES[t]
        rb = self._reader(ops[0], t, ins)
        rc = self._reader(ops[1], t, ins) if len(ops) > 1 else None
        wr = self._writer(d, t, ins) if d is not None else None
        addr = self._address(a, ins, space)
        dt = iops.DTYPES[t]
        f = _atomic_function(kind, t, ins, self)

        def atom(w, m):
            lanes = ALL if m is None else m
            mem, idx = self._resolve(w, addr(w), lanes, size, space, ins, True)
            view = mem.view(dt)
            bv = as_lanes(rb(w))[lanes]
            cv = as_lanes(rc(w))[lanes] if rc is not None else None
            old = np.zeros(WARP, dtype=dt)
            olds = []
            for k, j in enumerate((idx // np.uint64(size)).astype(np.int64).tolist()):
                o = view[j]
                olds.append(o)
                view[j] = f(o, bv[k], cv[k] if cv is not None else None)
            old[lanes] = np.array(olds, dtype=dt)
            if wr is not None:
                wr(w, old, m)
            return (NEXT, 0)

        return atom

    # ---- warp-level operations
    def _op_shfl(self, ins: Instr, pc: int):
        mode = next((m for m in ins.mods if m in ("up", "down", "bfly", "idx")), None)
        if mode is None:
            raise self._fail(ins, "shfl needs a mode")
        d, a, b, c = ins.operands[:4]
        dp = None
        if isinstance(d, Pair):
            d, dp = d.first, d.second
        ra, rb, rc = self._reader(a, "b32", ins), self._reader(b, "u32", ins), self._reader(c, "u32", ins)
        wr = self._writer(d, "b32", ins)
        wp = self._writer(dp, "pred", ins) if dp is not None else None

        def shfl(w, m):
            src = as_lanes(ra(w))
            j, ok = shuffle_lanes(mode, as_lanes(rb(w)), as_lanes(rc(w)))
            wr(w, src[j], m)
            if wp is not None:
                wp(w, ok, m)
            return (NEXT, 0)

        return shfl

    def _op_vote(self, ins: Instr, pc: int):
        mode = next((m for m in ins.mods if m in ("all", "any", "uni", "ballot")), None)
        d, a = ins.operands[:2]
        ra = self._reader(a, "pred", ins)
        wr = self._writer(d, "b32" if mode == "ballot" else "pred", ins)
        weights = np.uint64(1) << LANES.astype(np.uint64)

        def vote(w, m):
            act = ALL if m is None else m
            p = as_lanes(ra(w)) & act
            if mode == "ballot":
                v = np.uint32(int((weights * p).sum()))
                wr(w, np.full(WARP, v, dtype=np.uint32), m)
            else:
                wr(w, np.full(WARP, warp_vote(mode, p, act)), m)
            return (NEXT, 0)

        return vote

    def _op_match(self, ins: Instr, pc: int):
        """``match.any.sync.b32 d, a, mask`` / ``match.all.sync.b32 d{|p}, a, mask`` over the active lanes."""
        mode = next((m for m in ins.mods if m in ("any", "all")), None)
        if mode is None:
            raise self._fail(ins, "match needs .any or .all")
        t = _type_of(ins)
        d, a, b = ins.operands[:3]
        dp = None
        if isinstance(d, Pair):
            d, dp = d.first, d.second
        ra, rb = self._reader(a, t, ins), self._reader(b, "u32", ins)
        wr = self._writer(d, "b32", ins)
        wp = self._writer(dp, "pred", ins) if dp is not None else None
        weights = np.uint64(1) << LANES.astype(np.uint64)

        def match(w, m):
            act = ALL if m is None else m
            members = act & (
                (as_lanes(rb(w)).astype(np.uint64) >> LANES.astype(np.uint64)) & 1 != 0
            )
            v = as_lanes(ra(w))
            same = (v[:, None] == v[None, :]) & members[None, :]  # same[i, j]: lane j matches lane i
            if mode == "any":
                out = (same.astype(np.uint64) * weights[None, :]).sum(axis=1).astype(np.uint32)
                wr(w, out, m)
                return (NEXT, 0)
            vals = v[members]
            uni = bool(len(vals) == 0 or (vals == vals[0]).all())
            mask = np.uint32(int((weights * members).sum())) if uni else np.uint32(0)
            wr(w, np.full(WARP, mask, dtype=np.uint32), m)
            if wp is not None:
                wp(w, np.full(WARP, uni), m)
            return (NEXT, 0)

        return match

    def _op_isspacep(self, ins: Instr, pc: int):
        """``isspacep.space p, a``: does the generic address ``a`` lie in that state space's window?"""
        space = next((m for m in ins.mods if m in ("global", "shared", "local", "const", "param")), None)
        if space is None:
            raise self._fail(ins, "isspacep needs a state space")
        if space == "param":
            raise self._fail(
                ins, "isspacep.param is not supported (kernel parameters have no generic window here)"
            )
        d, a = ins.operands
        ra = self._reader(a, "u64", ins)
        wr = self._writer(d, "pred", ins)

        def isspacep(w, m):
            v = as_lanes(ra(w))
            sh = (v >= np.uint64(SHARED_WINDOW)) & (v < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
            lo = (v >= np.uint64(LOCAL_WINDOW)) & (v < np.uint64(LOCAL_WINDOW + WINDOW_SIZE))
            const = np.zeros(WARP, dtype=bool)
            for buf in self.gmem.buffers:
                if buf.readonly:
                    const |= (v >= np.uint64(buf.start)) & (v < np.uint64(buf.start + buf.size))
            r = {"shared": sh, "local": lo, "const": const, "global": ~(sh | lo | const)}[space]
            wr(w, r, m)
            return (NEXT, 0)

        return isspacep

    def _op_sad(self, ins: Instr, pc: int):
        """``sad.type d, a, b, c``: d = c + |a - b| (the difference taken exactly, the sum wrapping)."""
        t = _type_of(ins)
        ut = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}[TYPE_SIZES[t]]
        udt = iops.DTYPES[ut]

        def sad(a, b, c):
            a, b = as_lanes(a), as_lanes(b)
            ua, ub = a.astype(udt), b.astype(udt)  # same bits; unsigned subtraction wraps exactly
            diff = np.where(a < b, ub - ua, ua - ub)
            return (diff + as_lanes(c).astype(udt)).astype(iops.DTYPES[t])

        return self._simple(ins, t, sad, 3)

    def _op_redux(self, ins: Instr, pc: int):
        """``redux.sync.op.type d, a, membermask``: one reduction over the active member lanes (sm_80)."""
        kind = next((m for m in ins.mods if m in ("add", "min", "max", "and", "or", "xor")), None)
        t = _type_of(ins)
        if kind is None or t not in ("u32", "s32", "b32"):
            raise self._fail(ins, "unsupported redux form")
        d, a, b = ins.operands[:3]
        ra, rb = self._reader(a, t, ins), self._reader(b, "u32", ins)
        wr = self._writer(d, t, ins)
        dt = iops.DTYPES[t]

        def redux(w, m):
            act = ALL if m is None else m
            members = act & (
                ((as_lanes(rb(w)).astype(np.uint64) >> LANES.astype(np.uint64)) & 1) != 0
            )
            v = as_lanes(ra(w))[members].astype(np.int64)
            if kind == "add":
                r = int(v.sum()) & 0xFFFFFFFF
            elif kind in ("min", "max"):
                r = (int(v.min()) if kind == "min" else int(v.max())) & 0xFFFFFFFF
            else:
                r = 0 if kind != "and" else 0xFFFFFFFF
                for x in v.tolist():
                    r = (r & x) if kind == "and" else (r | x) if kind == "or" else (r ^ x)
                r &= 0xFFFFFFFF
            wr(w, np.full(WARP, np.uint32(r)).view(dt) if dt != np.uint32 else np.full(WARP, np.uint32(r)), m)
            return (NEXT, 0)

        return redux

    def _op_dp4a(self, ins: Instr, pc: int):
        return self._dot_bytes(ins, 4)

    def _op_dp2a(self, ins: Instr, pc: int):
        return self._dot_bytes(ins, 2)

    def _dot_bytes(self, ins: Instr, n: int):
        """``dp4a.atype.btype d, a, b, c`` (four byte products) and ``dp2a.{lo,hi}`` (two halfword x byte
        products): exact integer dot products plus c, wrapping to 32 bits."""
        types = [m for m in ins.mods if m in ("u32", "s32")]
        if len(types) != 2:
            raise self._fail(ins, f"dp{n}a needs two operand types")
        sa, sb = (x == "s32" for x in types)
        hi = "hi" in ins.mods
        d, a, b, c = ins.operands
        ra, rb, rc = (self._reader(x, "u32", ins) for x in (a, b, c))
        wr = self._writer(d, "u32", ins)

        def field(v: np.ndarray, k: int, bits: int, signed: bool) -> np.ndarray:
            x = (v.astype(np.int64) >> (k * bits)) & ((1 << bits) - 1)
            return np.where(x >= (1 << (bits - 1)), x - (1 << bits), x) if signed else x

        def dot(w, m):
            av, bv = as_lanes(ra(w)), as_lanes(rb(w))
            acc = as_lanes(rc(w)).astype(np.int64)  # c is read as s32 when either is signed
            if sa or sb:
                acc = np.where(acc >= 1 << 31, acc - (1 << 32), acc)
            if n == 4:
                for k in range(4):
                    acc = acc + field(av, k, 8, sa) * field(bv, k, 8, sb)
            else:
                for k in range(2):
                    acc = acc + field(av, k, 16, sa) * field(bv, k + 2 * hi, 8, sb)
            wr(w, (acc & 0xFFFFFFFF).astype(np.uint32), m)
            return (NEXT, 0)

        return dot

    def _op_fns(self, ins: Instr, pc: int):
        """``fns.b32 d, mask, base, offset``: the position of the n-th set bit from ``base`` (the PTX ISA's
        loop; 0xffffffff when there is none)."""
        d, a, b, c = ins.operands
        ra, rb, rc = self._reader(a, "u32", ins), self._reader(b, "u32", ins), self._reader(c, "s32", ins)
        wr = self._writer(d, "u32", ins)

        def fns_one(mask: int, base: int, off: int) -> int:
            if off == 0:
                return base if base < 32 and (mask >> base) & 1 else 0xFFFFFFFF
            step = 1 if off > 0 else -1
            need = abs(off)
            pos = base
            while 0 <= pos < 32:
                if (mask >> pos) & 1:
                    need -= 1
                    if need == 0:
                        return pos
                pos += step
            return 0xFFFFFFFF

        def fns(w, m):
            av, bv, cv = (as_lanes(r(w)).tolist() for r in (ra, rb, rc))
            wr(
                w,
                np.array([fns_one(x, y, z) for x, y, z in zip(av, bv, cv, strict=True)], dtype=np.uint32),
                m,
            )
            return (NEXT, 0)

        return fns

    def _op_elect(self, ins: Instr, pc: int):
        """``elect.sync d|p, membermask``: the lowest active member lane is the leader (sm_90)."""
        d, b = ins.operands[:2]
        dp = None
        if isinstance(d, Pair):
            d, dp = d.first, d.second
        rb = self._reader(b, "u32", ins)
        wr = self._writer(d, "u32", ins)
        wp = self._writer(dp, "pred", ins) if dp is not None else None

        def elect(w, m):
            act = ALL if m is None else m
            members = act & (
                ((as_lanes(rb(w)).astype(np.uint64) >> LANES.astype(np.uint64)) & 1) != 0
            )
            leader = int(np.argmax(members)) if members.any() else 0
            wr(w, np.full(WARP, leader, dtype=np.uint32), m)
            if wp is not None:
                wp(w, LANES == leader, m)
            return (NEXT, 0)

        return elect

    # a single launch: no grid depends on this one, and it depends on none (programmatic dependent launch)
    _op_griddepcontrol = _nop

    def _op_cp(self, ins: Instr, pc: int):
        """``cp.async.{ca,cg}.shared.global [dst], [src], cp-size{, src-size | , ignore-src}`` (sm_80).

        Modelled as a copy at issue time: the PTX ISA makes the bytes visible in shared memory only
        after ``cp.async.wait_group``/``wait_all``, so reading them earlier is a race and copying
        early is one of the allowed executions. Bytes past ``src-size`` are zero; commit and wait
        are then no-ops. The bulk (TMA) and mbarrier forms are refused."""
        if "async" not in ins.mods or any(m.startswith(("bulk", "mbarrier")) for m in ins.mods):
            raise self._fail(
                ins, f"unsupported copy `{ins.form}` (only cp.async shared <- global is modelled)"
            )
        if any(m in ("commit_group", "wait_group", "wait_all") for m in ins.mods):
            return lambda w, m: (NEXT, 0)
        ops = ins.operands
        if (
            len(ops) < 3
            or not isinstance(ops[0], Addr)
            or not isinstance(ops[1], Addr)
            or not isinstance(ops[2], Imm)
        ):
            raise self._fail(ins, "cp.async needs [dst], [src], cp-size")
        size = ops[2].value
        daddr, saddr = self._address(ops[0], ins, "shared"), self._address(ops[1], ins, "global")
        rsrc = rign = None
        if len(ops) > 3 and not isinstance(ops[3], Sym):  # a trailing cache-policy operand is a register
            extra = ops[3]
            is_pred = isinstance(extra, Neg) or (
                isinstance(extra, Reg) and self.fn.regs.get(extra.name) == "pred"
            )
            if is_pred:
                rign = self._reader(extra, "pred", ins)
            else:
                rsrc = self._reader(extra, "u32", ins)

        def cp(w, m):
            lanes = ALL if m is None else m
            full = np.full(WARP, size, dtype=np.int64)
            n = full if rsrc is None else np.minimum(as_lanes(rsrc(w)).astype(np.int64), size)
            if rign is not None:
                n = np.where(as_lanes(rign(w)), 0, full)
            s, d = saddr(w), daddr(w)
            data = np.zeros((WARP, size), dtype=np.uint8)
            for k in range(size):
                rd = lanes & (n > k)
                if rd.any():
                    mem, idx = self._resolve(w, s + np.uint64(k), rd, 1, "global", ins, False)
                    data[rd, k] = mem[idx.astype(np.int64)]
            mem, idx = self._resolve(w, d, lanes, size, "shared", ins, True)
            rows = data if lanes is ALL else data[lanes]
            for k in range(size):
                mem[(idx + np.uint64(k)).astype(np.int64)] = rows[:, k]
            return (NEXT, 0)

        return cp

    def _op_vprintf(self, ins: Instr, pc: int):
        """Device ``printf`` (``vprintf(format, args)``, made one instruction by the inliner): each
        active lane, in lane order, formats its arguments (the vprintf buffer: each argument
        aligned to its size, floats promoted to double) and writes the text to ``self.printf``.
        The result is the number of arguments, as CUDA's printf returns."""
        ret, fmt_op, args_op = ins.operands
        if not all(isinstance(o, Sym) and o.name in self.local_off for o in (fmt_op, args_op)):
            raise self._fail(ins, "vprintf needs its two call parameters")
        fa, aa = (self._address(Addr(o, 0), ins, "callparam") for o in (fmt_op, args_op))
        ra = self._address(Addr(ret, 0), ins, "callparam") if isinstance(ret, Sym) else None

        def vprintf(w, m):
            lanes = ALL if m is None else m
            mem, fi = self._resolve(w, fa(w), lanes, 8, "callparam", ins, False)
            fmts = mem.view(np.uint64)[(fi // np.uint64(8)).astype(np.int64)]
            mem, ai = self._resolve(w, aa(w), lanes, 8, "callparam", ins, False)
            argps = mem.view(np.uint64)[(ai // np.uint64(8)).astype(np.int64)]
            counts = []
            for k, lane in enumerate(np.nonzero(lanes)[0].tolist()):
                text, n = self._format_printf(w, lane, int(fmts[k]), int(argps[k]), ins)
                counts.append(n)
                self.printf(text)
            if ra is not None:  # the result (the number of arguments) goes to the call's retval
                mem, ri = self._resolve(w, ra(w), lanes, 4, "callparam", ins, True)
                mem.view(np.int32)[(ri // np.uint64(4)).astype(np.int64)] = np.array(counts, dtype=np.int32)
            return (NEXT, 0)

        return vprintf

    def _read_bytes(self, w: Warp, lane: int, addr: int, n: int, ins: Instr) -> bytes:
        """``n`` bytes at a generic address, as lane ``lane`` sees them (bounds-checked)."""
        one = np.zeros(WARP, dtype=bool)
        one[lane] = True
        out = bytearray()
        for k in range(n):
            a = np.full(WARP, (addr + k) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
            mem, idx = self._resolve(w, a, one, 1, "generic", ins, False)
            out.append(int(mem[int(idx[0])]))
        return bytes(out)

    def _read_cstring(self, w: Warp, lane: int, addr: int, ins: Instr, limit: int = 4096) -> str:
        out = bytearray()
        while len(out) < limit:
            b = self._read_bytes(w, lane, addr + len(out), 1, ins)[0]
            if b == 0:
                break
            out.append(b)
        return out.decode("utf-8", errors="replace")

    _PRINTF_SPEC = re.compile(
        r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcspn%])"
    )

    def _format_printf(self, w: Warp, lane: int, fmt_addr: int, args: int, ins: Instr) -> tuple[str, int]:
        if fmt_addr == 0:
            return "", -1
        fmt = self._read_cstring(w, lane, fmt_addr, ins)
        off = 0
        count = 0

        def take(size: int, kind: str):
            nonlocal off
            off = (off + size - 1) // size * size
            raw = self._read_bytes(w, lane, args + off, size, ins)
            off += size
            code = {("i", 4): "<i", ("u", 4): "<I", ("i", 8): "<q", ("u", 8): "<Q", ("f", 8): "<d"}[
                kind, size
            ]
            return struct.unpack(code, raw)[0]

        out: list[str] = []
        pos = 0
        for mt in self._PRINTF_SPEC.finditer(fmt):
            out.append(fmt[pos : mt.start()])
            pos = mt.end()
            flags, width, prec, length, conv = mt.groups()
            if conv == "%":
                out.append("%")
                continue
            if conv == "n":
                raise self._fail(ins, "printf %n is not supported")
            if width == "*":
                width, count = str(take(4, "i")), count + 1
            if prec == "*":
                prec, count = str(take(4, "i")), count + 1
            spec = "%" + flags + (width or "") + (f".{prec}" if prec is not None else "")
            wide = length in ("l", "ll", "j", "z", "t")
            count += 1
            if conv in "di":
                out.append((spec + "d") % take(8 if wide else 4, "i"))
            elif conv in "ouxX":
                v = take(8 if wide else 4, "u")
                if length == "h":
                    v &= 0xFFFF
                elif length == "hh":
                    v &= 0xFF
                out.append((spec + ("d" if conv == "u" else conv)) % v)
            elif conv in "eEfFgG":
                out.append((spec + conv) % take(8, "f"))
            elif conv in "aA":
                h = float(take(8, "f")).hex()
                out.append(h.upper() if conv == "A" else h)
            elif conv == "c":
                out.append((spec + "c") % (take(4, "u") & 0xFF))
            elif conv == "s":
                p = take(8, "u")
                out.append((spec + "s") % ("(null)" if p == 0 else self._read_cstring(w, lane, p, ins)))
            else:  # p
                out.append(f"0x{take(8, 'u'):x}")
        out.append(fmt[pos:])
        return "".join(out), count

    def _op_trap(self, ins: Instr, pc: int):
        def trap(w, m):
            lane = 0 if m is None else int(np.argmax(m))
            raise self._fault(w, lane, ins, TRAP_MESSAGE)

        return trap

    _op_brkpt = _op_trap

    def _op_activemask(self, ins: Instr, pc: int):
        wr = self._writer(ins.operands[0], "b32", ins)
        weights = np.uint64(1) << LANES.astype(np.uint64)

        def am(w, m):
            act = ALL if m is None else m
            wr(w, np.full(WARP, np.uint32(int((weights * act).sum())), dtype=np.uint32), m)
            return (NEXT, 0)

        return am


# ---------------------------------------------------------------------- helpers
def _find_kernel(module: Module, name: str) -> Function:
    kernels = module.kernels
    if name in kernels:
        return kernels[name]
    matches = [k for k in kernels.values() if k.plain_name == name]
    if len(matches) == 1:
        return matches[0]
    avail = ", ".join(sorted(k.plain_name for k in kernels.values())) or "none"
    if len(matches) > 1:
        raise PTXError(f"kernel name {name!r} is ambiguous (overloads): {[k.name for k in matches]}")
    raise PTXError(f"no kernel named {name!r} in the PTX (kernels: {avail})")


def _storage_dtype(t: str) -> type:
    if t == "pred":
        return np.bool_
    return iops.UNSIGNED_OF[TYPE_SIZES[t] * 8]


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


def _fmods(ins: Instr) -> tuple[str | None, bool, bool]:
    rnd = next((m for m in ins.mods if m in ROUNDING), None)
    return rnd or "rn", "ftz" in ins.mods, "sat" in ins.mods


def _imm_value(op: Imm, t: str):
    td = iops.DTYPES[t]
    if t == "pred":
        return np.bool_(op.value != 0)
    if op.kind == "int":
        if t == "f32":
            return fp32.f32_from_int(np.array([op.value], dtype=np.int64), "s64", "rn")[0]
        if t == "f64":
            return fp32.f64_from_int(np.array([op.value], dtype=np.int64), "s64", "rn")[0]
        width = TYPE_SIZES[t] * 8
        return np.array(op.value & ((1 << width) - 1), dtype=iops.UNSIGNED_OF[width]).view(td)[()]
    if op.kind == "f32":
        if t == "f64":
            return fp32.f64_from_f32(np.array([op.value], dtype=np.uint32))[0]
        return (
            np.array(op.value & 0xFFFFFFFF, dtype=np.uint32).view(td)[()]
            if TYPE_SIZES[t] == 4
            else np.array(op.value, dtype=np.uint64).astype(td)[()]
        )
    # f64 literal
    if t == "f32":
        return fp32.f32_from_f64(np.array([op.value], dtype=np.uint64), "rn")[0]
    return (
        np.array(op.value, dtype=np.uint64).view(td)[()]
        if TYPE_SIZES[t] == 8
        else np.array(op.value, dtype=np.uint64).astype(td)[()]
    )


def _int_compare(cmp: str, t: str, ins: Instr, interp: Interpreter):
    unsigned = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
    if cmp in unsigned:
        base = unsigned[cmp]

        def uf(x, y):
            return _cmp(
                base,
                iops.as_unsigned(np.asarray(x)),
                iops.as_unsigned(np.asarray(y, dtype=np.asarray(x).dtype)),
            )

        return uf
    if cmp not in ("eq", "ne", "lt", "le", "gt", "ge"):
        raise interp._fail(ins, f"unsupported integer comparison .{cmp}")
    return lambda x, y: _cmp(cmp, x, y)


def _cmp(cmp: str, x, y):
    if cmp == "eq":
        return x == y
    if cmp == "ne":
        return x != y
    if cmp == "lt":
        return x < y
    if cmp == "le":
        return x <= y
    if cmp == "gt":
        return x > y
    return x >= y


def _boolop(op: str | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op == "and":
        return a & b
    if op == "or":
        return a | b
    if op == "xor":
        return a ^ b
    return a


def _cvt_function(dt: str, st: str, rnd: str | None, ftz: bool, sat: bool, ins: Instr, interp: Interpreter):
    fl = {"f32", "f64"}
    ints = {"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "b8", "b16", "b32", "b64"}
    norm = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}
    if dt in ("f16", "bf16") or st in ("f16", "bf16"):
        raise interp._fail(ins, f"unsupported conversion cvt .{dt}.{st} (half precision)")
    if dt == "f32" and st == "f32":
        if rnd in INT_ROUNDING:
            return lambda a: fp32.round_f32(a, rnd, ftz)
        if sat:
            return lambda a: fp32.sat_f32(a, ftz)
        if ftz:
            return _flush_subnormal
        return lambda a: a
    if dt == "f64" and st == "f64":
        if rnd in INT_ROUNDING:
            return lambda a: fp32.round_f64(a, rnd)
        return lambda a: a
    if dt == "f32" and st == "f64":
        return lambda a: _maybe_sat(fp32.f32_from_f64(a, rnd or "rn", ftz), sat)
    if dt == "f64" and st == "f32":
        return lambda a: fp32.f64_from_f32(a, ftz)
    if dt in fl and st in ints:
        sname = norm.get(st, st)
        if dt == "f32":
            return lambda a: _maybe_sat(fp32.f32_from_int(a, sname, rnd or "rn"), sat)
        return lambda a: fp32.f64_from_int(a, sname, rnd or "rn")
    if dt in ints and st in fl:
        dname = norm.get(dt, dt)
        r = rnd if rnd in INT_ROUNDING else "rzi"
        if st == "f32":
            if ftz:
                return lambda a: fp32.int_from_f32(_flush_subnormal(a), dname, r).astype(iops.DTYPES[dt])
            return lambda a: fp32.int_from_f32(a, dname, r).astype(iops.DTYPES[dt])
        return lambda a: fp32.int_from_f64(a, dname, r).astype(iops.DTYPES[dt])
    if dt in ints and st in ints:
        tdt = iops.DTYPES[dt]
        if sat:
            dn, sn = norm.get(dt, dt), norm.get(st, st)
            lo, hi = _int_range(dn)

            def satc(a):
                v = a.astype(np.int64) if sn != "u64" else a
                if sn == "u64":
                    v = np.minimum(a, np.uint64(hi)).astype(np.int64) if hi < 2**63 else a
                    return np.asarray(v).astype(tdt)
                return np.clip(v, lo, min(hi, 2**63 - 1)).astype(tdt)

            return satc
        return lambda a: a.astype(tdt)
    raise interp._fail(ins, f"unsupported conversion cvt.{dt}.{st}")


def _flush_subnormal(a: np.ndarray) -> np.ndarray:
    """Subnormal float32 bit patterns become zero of the same sign (``.ftz``)."""
    sub = ((a & np.uint32(0x7F800000)) == 0) & ((a & np.uint32(0x007FFFFF)) != 0)
    return np.where(sub, a & np.uint32(0x80000000), a).astype(np.uint32)


def _maybe_sat(x: np.ndarray, sat: bool) -> np.ndarray:
    return fp32.sat_f32(x) if sat else x


def _int_range(t: str) -> tuple[int, int]:
    bits = TYPE_SIZES[t] * 8
    if t.startswith("s"):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def _atomic_function(kind: str, t: str, ins: Instr, interp: Interpreter):
    dt = iops.DTYPES[t]
    if t == "f32":
        if kind == "add":

            def addf(o, b, c):
                return fp32.add(np.array([o], dtype=np.uint32), np.array([b], dtype=np.uint32), "rn", True)[0]

            return addf
        if kind in ("min", "max"):
            f = fp32.min if kind == "min" else fp32.max

            def mm(o, b, c):
                return f(np.array([o], dtype=np.uint32), np.array([b], dtype=np.uint32), False)[0]

            return mm
        if kind == "exch":
            return lambda o, b, c: b
        if kind == "cas":
            return lambda o, b, c: c if o == b else o
        raise interp._fail(ins, f"unsupported atomic .{kind}.f32")
    if t == "f64":
        if kind == "add":
            return lambda o, b, c: fp32.add64(np.array([o], dtype=np.uint64), np.array([b], dtype=np.uint64))[
                0
            ]
        if kind == "exch":
            return lambda o, b, c: b
        if kind == "cas":
            return lambda o, b, c: c if o == b else o
        raise interp._fail(ins, f"unsupported atomic .{kind}.f64")
    if kind == "add":
        return lambda o, b, c: dt(o + b)
    if kind == "min":
        return lambda o, b, c: min(o, b)
    if kind == "max":
        return lambda o, b, c: max(o, b)
    if kind == "inc":
        return lambda o, b, c: dt(0) if o >= b else dt(o + dt(1))
    if kind == "dec":
        return lambda o, b, c: b if (o == 0 or o > b) else dt(o - dt(1))
    if kind == "cas":
        return lambda o, b, c: c if o == b else o
    if kind == "exch":
        return lambda o, b, c: b
    if kind == "and":
        return lambda o, b, c: o & b
    if kind == "or":
        return lambda o, b, c: o | b
    if kind == "xor":
        return lambda o, b, c: o ^ b
    raise interp._fail(ins, f"unsupported atomic .{kind}")


SUPPORTED_OPS = {name[4:] for name in dir(Interpreter) if name.startswith("_op_")}
# special registers (PTX ISA "Special Registers") the interpreter gives values; the rest are refused
COUNTER_SPECIALS = {"clock", "clock64", "clock_hi", "globaltimer", "globaltimer_lo", "globaltimer_hi"}
SUPPORTED_SPECIALS = COUNTER_SPECIALS | {
    "tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid", "smid", "nsmid", "gridid",
    "lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "warpsize",
    "dynamic_smem_size", "total_smem_size", "is_explicit_cluster", "clusterid",
    "nclusterid", "cluster_ctaid", "cluster_nctaid", "cluster_ctarank", "cluster_nctarank",
    "current_graph_exec",
}  # fmt: skip
_UNSUPPORTED_SPECIAL_WHY = {
    "pm": "a performance-monitoring counter",
    "envreg": "a driver-defined environment register",
    "reserved_smem": "shared memory reserved by the driver",
    "aggr_smem": "it includes shared memory reserved by the driver",
}


def _check_special(name: str, ins: Instr) -> None:
    """Refuse, by name, a special register whose value the hardware model cannot give."""
    base, _, axis = name.partition(".")
    if base in SUPPORTED_SPECIALS:
        return
    why = next((v for k, v in _UNSUPPORTED_SPECIAL_WHY.items() if base.startswith(k)), "not modelled")
    raise PTXError(f"{ins.where()}: special register %{name} is not supported ({why}): `{ins.text}`")


def _check_supported(ins: Instr) -> None:
    if ins.op == "call":
        return
    if ins.op not in SUPPORTED_OPS:
        raise PTXError(f"{ins.where()}: unsupported PTX instruction `{ins.form}`: `{ins.text}`")
    for op in ins.operands:
        if isinstance(op, Special):
            _check_special(op.name, ins)
