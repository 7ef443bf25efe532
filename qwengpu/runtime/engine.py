"""Run a CUDA kernel on the machine compiled into a stock Qwen3.5 model, token by token.

The host compiles and lowers the kernel, encodes the program and the initial global memory as
prompt tokens (``protocol.py``), and then only feeds back the model's own greedy argmax tokens;
the outputs are read from the DUMP chunks the model wrote. Launch constants (kernel parameters,
blockDim) are folded into the program as immediates: they are the constant bank, not results.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from qwengpu.codegen.liveness import dead_results
from qwengpu.errors import ExecutionError, MachineLimitError
from qwengpu.isa.instr import POISON, PT, SR, Imm, MInstr, R
from qwengpu.isa.instr import P as Pred
from qwengpu.machine import protocol as P
from qwengpu.machine.circuit import CMPS, LANE_ROW, NCHUNK, OP, ROM_CHUNKS, SR_CODES, MachineShape, pack_row
from qwengpu.model.configs import DEFAULT_SHAPE, shape_for, test_config  # noqa: F401 - re-exported
from qwengpu.simt.core import TRAP_MESSAGE
from qwengpu.simt.memory import GLOBAL_BASE, place_module_globals

M32 = 0xFFFFFFFF
_MODEL_CACHE: dict[tuple, tuple] = {}


def machine_config(shape: str | None = None):
    """The layer shape the standalone machine is compiled into, by name: ``2b`` (Qwen3.5-2B's layers,
    as every mount; the default) or ``test`` (small and fast, for tests); None: the default
    (``$QWENGPU_MACHINE_SHAPE``, else ``2b``: :mod:`qwengpu.shapes`)."""
    from qwengpu.model.machine_checkpoint import config_named

    return config_named(shape)


def machine_model(config=None, shape: MachineShape | None = None):
    """(circuit IO, stock model) for ``config`` (None: the default machine's, :func:`machine_config`):
    from the on-disk cache or built (and cached there,
    :func:`qwengpu.model.machine_checkpoint.load_or_build`), once per process."""
    from qwengpu.model.machine_checkpoint import load_or_build

    config = config if config is not None else machine_config()
    shape = shape if shape is not None else shape_for(config)
    key = (repr(config.to_dict()), shape)
    if key not in _MODEL_CACHE:

        def note(msg: str) -> None:  # building takes tens of seconds the first time: say so
            if msg.startswith(("compiling", "saving")):
                print(f"qwengpu: {msg} (first use of this compiler version; cached afterwards)",
                      file=sys.stderr, flush=True)

        _MODEL_CACHE[key] = load_or_build(config, shape, progress=note)
    return _MODEL_CACHE[key]


# ---------------------------------------------------------------------------------------------
# program -> ROM rows
# ---------------------------------------------------------------------------------------------
# ``a_sr`` codes past the special registers select the constant 0 as operand a (circuit.py)
_SR_ZERO = max(SR_CODES.values()) + 1


def _refuse(ins: MInstr, why: str) -> MachineLimitError:
    return MachineLimitError(f"the machine in the weights cannot run `{ins}` yet: {why}")


def _param_bank(prog, param_bytes: bytes, global_addr: dict[str, int] | None = None) -> bytes:
    """The kernel parameter bank with its launch-constant slots (``isa.sim.param_bank``, as
    ``MachineSim.launch`` builds it); a module variable without an address is refused by name."""
    from qwengpu.isa.sim import param_bank

    for kind, arg in prog.bank_slots:
        if kind != "window" and str(arg) not in (global_addr or {}):
            raise MachineLimitError(f"module global variable {arg} has no address in this launch")
    return param_bank(prog, param_bytes, global_addr or {})


def _specials(block: tuple[int, int, int], grid: tuple[int, int, int]) -> dict[str, int | str]:
    """Special registers of a 1-D launch: constants, or the ROM's ``a_sr`` code for per-thread ones."""
    nthreads = block[0] * block[1] * block[2]
    return {
        "tid.x": "tid",
        "laneid": "laneid",
        "warpid": "warpid",
        "ctaid.x": "ctaid",
        "tid.y": 0,
        "tid.z": 0,
        "ntid.x": block[0],
        "ntid.y": block[1],
        "ntid.z": block[2],
        "ctaid.y": 0,
        "ctaid.z": 0,
        "nctaid.x": grid[0],
        "nctaid.y": grid[1],
        "nctaid.z": grid[2],
        "nwarpid": (nthreads + 31) // 32,
    }


def encode_program(
    prog,
    bank: bytes,
    block: tuple[int, int, int],
    shape: MachineShape,
    grid: tuple[int, int, int] = (1, 1, 1),
) -> list[int]:
    """Every machine instruction as a ROM row; refuses what the slice cannot run (naming it)."""
    if len(prog.code) > shape.rom_rows:
        raise MachineLimitError(
            f"kernel {prog.name} needs {len(prog.code)} instructions; the ROM has {shape.rom_rows}"
        )
    specials = _specials(block, grid)
    rows = []
    # results no instruction reads again are not written back (the ROM row's ``nowb`` bit)
    dead = dead_results(prog.code)
    for pc, ins in enumerate(prog.code):
        f: dict[str, int] = {}
        op = ins.op
        srcs = list(ins.s)

        def reg_or_imm(x, which: str, f=f, ins=ins, op=op) -> None:
            if isinstance(x, R):
                f["r" + which] = x.n
            elif isinstance(x, SR) and which == "a" and x.name in specials:
                code = specials[x.name]  # a per-thread index from the row's a_sr, a constant as one
                if isinstance(code, str):
                    f["a_sr"] = SR_CODES[code]
                else:
                    reg_or_imm(Imm(code), "a")
            elif isinstance(x, Imm):
                if f.get("b_imm") or (which == "a" and f.get("a_imm")):
                    raise _refuse(ins, "three immediate operands")
                if which == "b" and f.get("a_imm"):
                    # the second immediate travels in the ``off`` field (free outside ld/st)
                    if op in ("ld", "st"):
                        raise _refuse(ins, "a store of an immediate to an immediate address")
                    f.update(b_imm=1, b_off=1, off=x.v & M32)
                    return
                f[which + "_imm"] = 1
                f["imm"] = x.v & M32
            else:
                raise _refuse(ins, f"operand {x}")

        if ins.guard is not None:
            if ins.guard.n == PT:
                if ins.guard.neg:
                    raise _refuse(ins, "guard !PT")
            else:
                f.update(gen=1, gneg=int(ins.guard.neg), gidx=ins.guard.n)
        if op in ("add", "sub", "and", "or", "xor", "shl", "addw", "subw"):
            f["op"] = OP[{"addw": "add", "subw": "sub"}.get(op, op)]
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op == "mulw":
            a, b = srcs
            if isinstance(a, Imm) and not (isinstance(b, Imm) and b.v and b.v & (b.v - 1) == 0):
                a, b = b, a  # the power of two as b (a folded parameter can make both immediates)
            if not (isinstance(b, Imm) and b.v and b.v & (b.v - 1) == 0):
                raise _refuse(ins, "window multiply by a non-power-of-two")
            f["op"] = OP["shl"]
            reg_or_imm(a, "a")
            reg_or_imm(Imm(b.v.bit_length() - 1), "b")
        elif op == "shr":
            f["op"] = OP["shrs" if ins.mod("sign") == "s" else "shr"]
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op in ("min", "max"):
            f.update(op=OP[op], csign=int(ins.mod("sign") == "s"))
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op == "mul":
            if not shape.multiplier:
                raise _refuse(ins, "this machine shape has no multiplier (MachineShape.multiplier)")
            f["op"] = OP["mul"]
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op in ("fadd", "fsub"):
            if not shape.fadd:
                raise _refuse(ins, "this machine shape has no float adder (MachineShape.fadd)")
            if ins.mod("rnd") != "rn" or ins.mod("sat"):
                raise _refuse(ins, "the float adder rounds to nearest (or to odd), without .sat")
            # cmp bit 0: b negated (fsub); bit 1: round to odd (circuit.float_adder)
            cmp = int(op == "fsub") | int(bool(ins.mod("odd"))) << 1
            f.update(op=OP["fadd"], csign=int(bool(ins.mod("ftz"))), cmp=cmp)
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op == "fmulf":
            if not shape.fmulf:
                raise _refuse(ins, "this machine shape has no one-lane float multiplier (MachineShape.fmulf)")
            if ins.mod("lane") is None:
                raise _refuse(ins, "an fmulf row names its lane (softmem.expand_one_lane)")
            # the lane rides in the target field (free outside branches: circuit.one_lane_guard)
            f.update(op=OP["fmulf"], target=int(ins.mod("lane")), cmp=int(bool(ins.mod("err"))))
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op == "frange":
            if not shape.fmulf:
                raise _refuse(ins, "this machine shape has no one-lane float multiplier (MachineShape.fmulf)")
            f.update(op=OP["frange"], csign=int(bool(ins.mod("ftz"))))
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
        elif op in ("mov", "not", "popc", "clz", "brev"):
            f["op"] = OP[op]
            reg_or_imm(srcs[0], "a")
        elif op == "sel":
            f["op"] = OP["sel"]
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
            _pred_c(f, srcs[2])
        elif op == "setp":
            if ins.mod("cmp") not in CMPS:
                raise _refuse(ins, f"comparison {ins.mod('cmp')}")
            f.update(op=OP["setp"], cmp=CMPS.index(ins.mod("cmp")), csign=int(ins.mod("sign") == "s"))
            reg_or_imm(srcs[0], "a")
            reg_or_imm(srcs[1], "b")
            bop = ins.mod("bop")
            if bop is not None:
                f["bop"] = (None, "and", "or", "xor").index(bop)
                _pred_c(f, srcs[2])
        elif op == "s2r":
            sr = ins.mod("sr")
            if sr not in specials:
                raise _refuse(ins, f"special register {sr}")
            f["op"] = OP["mov"]
            if isinstance(specials[sr], str):
                f["a_sr"] = SR_CODES[specials[sr]]  # type: ignore[index]
            else:
                reg_or_imm(Imm(int(specials[sr])), "a")  # type: ignore[arg-type]
        elif op in ("ld", "st"):
            space, size = ins.mod("space"), ins.mod("size")
            if size != 4:
                raise _refuse(ins, f"{size}-byte memory access")
            a = srcs[0]
            if space == "param" and op == "ld":
                if not isinstance(a, Imm):
                    raise _refuse(ins, "parameter load with a register address")
                addr = (a.v + ins.mod("base") + ins.mod("off")) & M32
                f["op"] = OP["mov"]
                reg_or_imm(Imm(int.from_bytes(bank[addr : addr + 4], "little")), "a")
            elif space == "global" or (space == "const" and op == "ld"):
                # shared/local/spill accesses are global ones by now (softmem.py); module __constant__
                # variables live in global memory after the spec's buffers (place_module_globals)
                off = ins.mod("base") + ins.mod("off") - GLOBAL_BASE
                f["op"] = OP[op]
                if isinstance(a, Imm):  # a constant address rides in ``off``; operand a reads 0
                    off += a.v
                    f["a_sr"] = _SR_ZERO
                else:
                    reg_or_imm(a, "a")
                f["off"] = off & M32
                if op == "st":
                    reg_or_imm(srcs[1], "b")
            else:
                raise _refuse(ins, f"{space} memory")
        elif op == "bra":
            f.update(op=OP["bra"], target=int(ins.target or 0))
        elif op == "exit":
            f["op"] = OP["exit"]
        elif op == "bar":
            f["op"] = OP["bar"]
        elif op == "trap":
            f["op"] = OP["trap"]
        elif op == "call":
            f.update(op=OP["call"], target=int(ins.target or 0))
        elif op == "ret":
            f["op"] = OP["ret"]
            reg_or_imm(srcs[0], "a")
        else:
            raise _refuse(ins, f"op {op}")
        if ins.mod("lane") is not None and op != "fmulf":
            f.update(_lane_row(ins, shape))
        if ins.d:
            dd = ins.d[0]
            f["dst"] = dd.n
            f["nowb"] = int(dead[pc])
        rows.append(pack_row(f))
    return rows


def _lane_row(ins: MInstr, shape: MachineShape) -> dict[str, int]:
    """The ROM fields of a one-lane row (``circuit.register_file``: the lane in the guard's fields,
    ``LANE_ROW``), or the refusal of what the machine cannot run."""
    if not shape.lane_rows:
        raise _refuse(ins, "this machine shape has no one-lane rows (MachineShape.lane_rows)")
    if ins.guard is not None or ins.op in ("bra", "call", "ret"):
        raise _refuse(ins, "a one-lane row carries no guard and is no branch")
    return {**LANE_ROW, "gidx": int(ins.mod("lane"))}


def _pred_c(f: dict[str, int], p) -> None:
    if not isinstance(p, Pred):
        raise MachineLimitError(f"predicate operand {p}")
    if p.n == PT:
        f.update(cpt=1, cneg=int(p.neg))
    else:
        f.update(cidx=p.n, cneg=int(p.neg))


# ---------------------------------------------------------------------------------------------
# the launch
# ---------------------------------------------------------------------------------------------
@dataclass
class ModelRun:
    """What ``run_machine`` returns (shaped like ``qwengpu.runner.RunResult``)."""

    kernel: str
    outputs: dict[str, np.ndarray]
    stats: dict
    prompt: list[int]
    trace: list[int]
    mismatches: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.mismatches


def prepare(cu_path: str | Path, spec_path: str | Path | None = None, shape: MachineShape = DEFAULT_SHAPE):
    """Compile, lower, check the slice's limits; (spec, program, prompt tokens, gmem, dump range)."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file
    from qwengpu.isa.sim import check_program_limits
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import bind, c_signature, check_against_kernel, default_spec_path, load_spec

    cu = Path(cu_path)
    spec = load_spec(spec_path if spec_path is not None else default_spec_path(cu))
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=f"{cu.name} (PTX)")
    fn = _find_kernel(module, spec.kernel)
    check_against_kernel(spec, fn, c_signature(cu.read_text(), spec.kernel))
    from qwengpu.codegen.softmem import buffers_end, extend_gmem, lower_for_weights, read_only_end
    from qwengpu.ptx.readonly import writable_first

    # multiplications, floats, shared/local memory, atomics, warp ops and 2-D/3-D launch indices
    # (whatever has a sequence of weight ops) become sequences here, for this launch (softmem.py);
    # the program then runs as the 1-D launch of linear thread/block indices the circuit runs
    grid, block = tuple(spec.grid), tuple(spec.block)
    from qwengpu.codegen.soft import ROM_BUDGET, Options
    from qwengpu.codegen.softcore import unit_options

    def placed(high: list[str]):
        # the words the launch's buffers and module variables take: spill slots get what is left
        first = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
        sized = bind(spec, inline_calls(module, fn), high, 4 * shape.gmem_words)
        # the launch's parameter bank (the ROM carries its words as immediates: Options.param_bank)
        globals_at = place_module_globals(sized.gmem, first.layout.global_vars)
        sized_bank = _param_bank(first, sized.param_bytes, globals_at)
        arena_words = buffers_end(sized.gmem)
        # the lowering aims for ROM_BUDGET rows (prompt tokens); it takes the whole ROM only when the
        # program does not fit that even with shared routines
        budget = min(shape.rom_rows, ROM_BUDGET)
        for _ in range(4):
            lowered = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
            prog, mem = lower_for_weights(
                lowered, grid, block, spec.shared_bytes,
                options=Options(budget=budget, **unit_options(shape), param_words=sized.param_words,
                                param_bank=sized_bank),
                gmem_words=shape.gmem_words, arena_words=arena_words,
            )
            if len(prog.code) <= shape.rom_rows:
                break
            # the launch's own code (special registers, prologue, spill and local-memory code) came
            # on top of what the expansion fitted into the budget: fit the expansion into less
            budget -= len(prog.code) - shape.rom_rows + 8
        check_program_limits(prog)
        # the machine's launch: a block of more than 64 threads runs as ``mem.parts`` machine blocks
        # (codegen.softmem.block_parts; the program recomputes tid and ctaid from the machine's)
        nthreads, nblocks = mem.threads, mem.mblocks
        if nthreads > shape.threads:
            raise MachineLimitError(
                f"the launch has {nthreads} threads per block; the machine has {shape.threads}"
            )
        if nblocks > shape.blocks:
            raise MachineLimitError(
                f"the launch has {nblocks} blocks; the machine runs at most {shape.blocks}")
        if prog.nregs > shape.nregs or prog.npreds > shape.npreds:
            raise MachineLimitError(
                f"kernel {prog.name} needs {prog.nregs} registers / {prog.npreds} predicates")
        bound = bind(spec, inline_calls(module, fn), high, 4 * shape.gmem_words)
        # module __constant__ / __device__ variables follow the spec's buffers (their initial values are
        # memory words of the prompt, like the buffers'), before the machine's own regions
        global_addr = place_module_globals(bound.gmem, prog.layout.global_vars)
        # the buffers must end below the machine's own regions (shared, local, spills, warp scratch)
        mem.check_arena(buffers_end(bound.gmem))
        bank = _param_bank(prog, bound.param_bytes, global_addr)
        rows = encode_program(prog, bank, block, shape, grid)  # type: ignore[arg-type]
        arena = bound.gmem.arena
        nwords = (len(arena) + 3) // 4
        ro_end = read_only_end(bound.gmem)
        ro_top = prog.rodata_low(shape.gmem_words + shape.ro_words)
        if ro_end > ro_top:
            raise MachineLimitError(
                f"the launch's read-only inputs end at word {ro_end}; the machine in the weights has "
                f"{shape.gmem_words} writable and {shape.ro_words} read-only words"
                + (f", of which the program's constant tables take "
                   f"{shape.gmem_words + shape.ro_words - ro_top}" if prog.rodata else ""))
        if not ro_end and nwords > shape.gmem_words:
            raise MachineLimitError(
                f"the launch needs {nwords} words of global memory (with guard gaps); the "
                f"machine in the weights has {shape.gmem_words}"
            )
        words = np.frombuffer(arena.tobytes().ljust(nwords * 4, b"\0"), dtype="<u4")
        prompt: list[int] = P.rom_load(rows, ROM_CHUNKS)
        rw = min(nwords, shape.gmem_words)
        nonzero = [(w, int(v)) for w, v in enumerate(words[:rw]) if v]
        ro_rows = [(w, [int(x) for x in words[w: w + 4]]) for w in range(rw, (ro_end + 3) // 4 * 4, 4)
                   if words[w: w + 4].any()]
        ro_rows += prog.rodata_rows()  # the program's constant tables, above the launch's inputs
        prompt += P.mem_load(nonzero, NCHUNK, ro_rows)
        outs = [b for b in bound.gmem.buffers if b.name in spec.outputs]
        if not outs:
            raise MachineLimitError("the launch names no output buffer to read back")
        lo = min((b.start - GLOBAL_BASE) // 4 for b in outs)
        hi = max((b.start - GLOBAL_BASE + b.size + 3) // 4 for b in outs)
        prompt += [P.ctl(P.NTHREADS, nthreads), *P.block_tokens(P.NBLOCKS, nblocks)]
        last = ro_rows[-1][0] if ro_rows else nonzero[-1][0] if nonzero else 0
        page = last >> P.ADDR_BITS  # the page latch after the loads
        prompt += [*P.dump_range(lo, hi - 1, page), P.ctl(P.BLOCK, 0)]
        # the buffer table of the whole machine memory (the launch's buffers and the machine's own
        # regions), which BoundsWatch checks the model's addresses against, as the ISA simulator does
        extend_gmem(bound.gmem, mem)
        bound.gmem.place_program_data(prog.rodata)
        return spec, prog, prompt, bound.gmem, (lo, hi)

    return writable_first(placed, spec, lambda: inline_calls(module, fn), bool(shape.ro_words))


def launch_shape(prompt: list[int], spec) -> tuple[int, int]:
    """(threads per machine block, machine blocks per launch block) of a prepared launch, read from
    its prompt's NTHREADS / NBLOCKS tokens (a block of more than 64 threads runs in parts)."""
    r = P.Reader()
    nth = nbl = 0
    for t in prompt:
        if t >> 14 == 3:
            tk = r.read(t)
            if tk.kind == "NTHREADS":
                nth = tk.a
            elif tk.kind == "NBLOCKS":
                nbl = tk.a
    nblocks = spec.grid[0] * spec.grid[1] * spec.grid[2]
    return nth, max(1, nbl // nblocks)


@torch.no_grad()
def generate(model, prompt: list[int], max_tokens: int, progress=None, on_token=None) -> list[int]:
    """Greedy, one token at a time with the model's cache (the recurrent path), until HALT.

    ``progress(tokens_written)`` is called after every token (the stock loop takes minutes)."""
    ids = torch.tensor([prompt])
    out = model(input_ids=ids, use_cache=True)
    cache = out.cache
    nxt = int(out.logits[0, -1].argmax())
    trace = [nxt]
    if on_token is not None:
        on_token(nxt)
    halt = P.ctl(P.HALT)
    while nxt != halt and len(trace) < max_tokens:
        o = model(input_ids=torch.tensor([[nxt]]), cache=cache, use_cache=True)
        cache = o.cache
        nxt = int(o.logits[0, -1].argmax())
        trace.append(nxt)
        if on_token is not None:
            on_token(nxt)
        if progress is not None:
            progress(len(trace))
    return trace


def trace_counts(trace: list[int]) -> dict[str, int]:
    """Warp instructions, lane-group passes, blocks and barrier releases the model wrote.

    A pass continues the current warp instruction when it names a later group of the same warp
    at the same pc (the scheduler only does that within one instruction); anything else starts
    a new warp instruction."""
    n = {"warp_instructions": 0, "passes": 0, "blocks": 0, "barriers": 0}
    last = None
    for tk in P.read_all(trace):
        if tk.kind == "PASS":
            g, pc = tk.b, tk.a
            if not (last and last[1] == pc and last[0] >> 3 == g >> 3 and g > last[0]):
                n["warp_instructions"] += 1
            last = (g, pc)
            n["passes"] += 1
        elif tk.kind in ("BLOCK", "BAR"):
            n["blocks" if tk.kind == "BLOCK" else "barriers"] += 1
            last = None
    return n


CENSUS_KINDS = ("pass", "mask", "bank", "result", "short", "store", "dump", "control")


def token_census(trace: list[int]) -> dict[str, int]:
    """The tokens the model wrote, by what they cost: ``pass`` (PASS: a lane-group pass starts),
    ``mask`` (MASK: which lanes of a pass run), ``bank`` (BANK: the ROM half of the next pass),
    ``result`` (DATA chunks and HIGH tokens of a result before the dump), ``short`` (SHORT /
    USHORT: a small result in one token), ``store`` (STORE: one lane's store), ``dump`` (DUMPADDR
    and its DATA chunks: the read-back), ``control`` (BLOCK, BAR, FAULT, HALT). Why: tokens are
    the cost users pay (every one a forward pass); this says where they go
    (``bench/token_census.py``)."""
    n = dict.fromkeys(CENSUS_KINDS, 0)
    dumping = False
    kinds = {"PASS": "pass", "MASK": "mask", "BANK": "bank", "SHORT": "short", "USHORT": "short",
             "HIGH": "result", "STORE": "store", "DUMPADDR": "dump", "PAGE": "dump"}
    for tk in P.read_all(trace):
        if tk.kind == "DUMPADDR":
            dumping = True
        if tk.kind == "DATA":
            n["dump" if dumping else "result"] += 1
        else:
            n[kinds.get(tk.kind, "control")] += 1
    return n


def fault_message(prog, trace: list[int], prompt: list[int]) -> str | None:
    """The interpreter-style message for a FAULT token the model wrote (None if it wrote none).

    The model names the lane; the instruction, lane group and block come from the PASS / BLOCK
    tokens it wrote before (the host only reads tokens): the machine's thread and block, which
    are the kernel's unless its blocks run in parts or in turns (``_kernel_fault``)."""
    toks = P.read_all(prompt[-1:] + trace)
    k = next((i for i, t in enumerate(toks) if t.kind == "FAULT"), None)
    if k is None:
        return None
    lane = toks[k].a
    ps = next(t for t in reversed(toks[:k]) if t.kind == "PASS")
    blk = next(t for t in reversed(toks[:k]) if t.kind == "BLOCK").a
    ins = prog.code[ps.a]
    ptx = prog.ptx[ins.ptx]
    code = ins.mod("code")
    what = {"limit": f"f64 arithmetic is beyond the machine ({ptx.op})",
            "trap": TRAP_MESSAGE}.get(code, f"integer division by zero ({ptx.op})")
    return (
        f"{what}\n  thread ({4 * ps.b + lane}, 0, 0) of block ({blk}, 0, 0) "
        f"(warp {ps.b >> 3}, lane {4 * (ps.b & 7) + lane})\n  instruction `{ptx.text}` at {ptx.where()}"
    )


def _kernel_fault(fault: str, how: str, cu_path, spec_path, interpret) -> str:
    """The message for a fault the model wrote. A block run in parts or in turns: the trace names
    the machine's thread and block, so the reference interpreter words it with the kernel's (as for
    an out-of-bounds access), the machine's kept beside it; should the interpreter find no fault (a
    defect), the machine's message says whose thread it names."""
    if not how:
        return fault
    exc = _interpreter_fault(cu_path, spec_path, interpret)
    if exc is not None:
        where = fault.split("\n  ")[1]  # "thread (t, 0, 0) of block (b, 0, 0) (warp w, lane l)"
        return f"{exc}\n  (the model's trace: the machine's {where}; {how})"
    return f"{fault}\n  (the machine's thread and block: {how}; --engine interp names the kernel's)"


class PassResults:
    """What the model wrote for one lane-group pass after its PASS/MASK token: per-lane result
    chunks, HIGH and SHORT values, a uniform value (chunks 12..14 or USHORT: every effective lane), the
    predicate chunk (4 values | 4 lane enables) and the lanes of its STORE tokens."""

    def __init__(self) -> None:
        self.vals: dict[int, int] = {}
        self.parts: dict[int, int] = {}
        self.uni: int | None = None
        self.upart = 0
        self.pchunk: int | None = None
        self.stores: list[int] = []

    def take(self, tk: P.Token) -> None:
        """Read one result token (DATA, HIGH, SHORT, USHORT or STORE) of the pass."""
        if tk.kind == "DATA":
            if tk.a < 12:
                lane, j = divmod(tk.a, 3)
                self.parts[lane] = self.parts.get(lane, 0) | (tk.b << (P.CHUNK * j))
                if j == 2:
                    self.vals[lane] = self.parts[lane] & M32
            elif tk.a < 15:
                self.upart |= tk.b << (P.CHUNK * (tk.a - 12))
                if tk.a == 14:
                    self.uni = self.upart & M32
            else:
                self.pchunk = tk.b
        elif tk.kind == "HIGH":  # the lane's chunk 0 came just before: bits 11..17 complete it
            self.vals[tk.a] = self.parts.get(tk.a, 0) & ((1 << P.CHUNK) - 1) | tk.b << P.CHUNK
        elif tk.kind == "SHORT":
            self.vals[tk.a >> 8] = tk.a & 255
        elif tk.kind == "USHORT":
            self.uni = tk.a
        elif tk.kind == "STORE":
            self.stores.append(tk.a)

    def values(self, lanes) -> dict[int, int]:
        """lane -> the value written for it, over ``lanes`` (the uniform value for the others)."""
        out = {}
        for x in lanes:
            v = self.vals.get(x, self.uni)
            if v is not None:
                out[x] = v
        return out


RESULT_KINDS = frozenset({"DATA", "HIGH", "SHORT", "USHORT", "STORE"})


class StickyMasks:
    """The active lanes of each pass, read from the tokens as the machine reads them: PASS f=1 runs
    every thread of its group; PASS f=0 runs the group's sticky mask, which the last MASK(g, m)
    token for that group set (the machine keeps the same table in its weights)."""

    def __init__(self) -> None:
        self.table: dict[int, int] = {}

    def take(self, tk: P.Token) -> None:
        """A MASK token: group ``(a >> 4) & 15`` now runs lanes ``a & 15`` on PASS f=0."""
        self.table[(tk.a >> 4) & 15] = tk.a & 15

    def lanes(self, tk: P.Token, nthreads: int) -> int:
        """The lane mask of PASS ``tk``."""
        g = tk.b
        if tk.full:
            return sum(1 << x for x in range(4) if 4 * g + x < nthreads)
        return self.table.get(g, 0)


class OutOfBounds(Exception):
    """The model's tokens show a memory pass whose address lies outside every buffer."""

    def __init__(self, block: int, thread: int, pc: int, address: int) -> None:
        super().__init__(f"block {block}, thread {thread}, pc {pc}: address 0x{address:x}")
        self.block, self.thread, self.pc, self.address = block, thread, pc, address


class BoundsWatch:
    """Checks, as the model writes them, the addresses of its memory passes (``on_token``).

    Why on the host: the weights' memory (``MachineShape.gmem_words``) is addressed by the low bits
    of an address, so an
    out-of-bounds access would silently land in another buffer or wrap. The host computes no
    result here: it keeps the register and predicate values *the model wrote* (result chunks,
    SHORT/USHORT, predicate chunks; registers start at 0 and persist across blocks, as in the
    weights), and at every ``ld``/``st``/``atom`` pass forms each effective lane's address from
    them (``base + ext(a) + off``, the ISA's rule) and looks it up in the launch's buffer table
    (``extend_gmem``: the buffers plus the machine's own regions, word granularity, as the ISA
    simulator checks). A miss raises :class:`OutOfBounds`; ``run_machine`` then words the fault.
    A dead result (``nowb``) is written neither in the weights nor here; no address reads it."""

    def __init__(self, prog, gmem, nthreads: int) -> None:
        self.prog, self.gmem, self.nthreads = prog, gmem, nthreads
        self.reader = P.Reader()
        self.regs: dict[tuple[int, int], int] = {}
        self.preds: dict[tuple[int, int], bool] = {}
        self.block, self.cur = 0, None
        self.masks = StickyMasks()
        self.checked = 0
        self.res = PassResults()

    def _guard(self, ins: MInstr, t: int) -> bool:
        g = ins.guard
        if g is None or g.n == PT:
            return not (g is not None and g.neg)
        return self.preds.get((t, g.n), False) != g.neg

    def _flush(self) -> None:
        cur, res = self.cur, self.res
        self.cur, self.res = None, PassResults()
        if cur is None or cur[1] >= len(self.prog.code):
            return
        g, pc, mask = cur
        ins = self.prog.code[pc]
        lanes = [x for x in range(4) if mask >> x & 1 and self._guard(ins, 4 * g + x)]
        if ins.op in ("ld", "st", "atom") and ins.mod("space") in ("global", "const"):
            self._check(ins, g, pc, res.stores if ins.op == "st" else lanes, ins.op != "ld")
        rd = next((d for d in ins.d if isinstance(d, R)), None)
        if rd is not None:
            for x, v in res.values(lanes).items():
                self.regs[(4 * g + x, rd.n)] = v
        pd = next((d for d in ins.d if isinstance(d, Pred)), None)
        if pd is not None and res.pchunk is not None:
            vals, en = res.pchunk & 15, res.pchunk >> 4 & 15
            for x in range(4):
                if en >> x & 1:
                    self.preds[(4 * g + x, pd.n)] = bool(vals >> x & 1)

    def _check(self, ins: MInstr, g: int, pc: int, lanes: list[int], store: bool = False) -> None:
        if not lanes:
            return
        a, base, off = ins.s[0], ins.mod("base") or 0, ins.mod("off") or 0
        size = ins.mod("chk") or ins.mod("size") or 4
        zext = ins.mod("amode") == "z"
        vals = [a.v if isinstance(a, Imm) else self.regs.get((4 * g + x, a.n), 0) for x in lanes]
        m64 = 0xFFFFFFFFFFFFFFFF
        addrs = [((v if zext or not v >> 31 else v - (1 << 32)) + base + off) & m64 for v in vals]
        ok = self.gmem.check(np.array(addrs, dtype=np.uint64), size)  # one lookup for the pass
        self.checked += len(lanes)
        for x, v, addr, good in zip(lanes, vals, addrs, ok, strict=True):
            if not good or (not zext and v == POISON):
                raise OutOfBounds(self.block, 4 * g + x, pc, addr)
        if store and self.gmem.has_readonly:
            for x, addr in zip(lanes, addrs, strict=True):
                buf = next((b for b in self.gmem.buffers
                            if b.readonly and b.start <= addr < b.start + b.size), None)
                if buf is not None:  # the weights would drop it: stop instead
                    raise ExecutionError(
                        f"block {self.block}, thread {4 * g + x}, pc {pc}: a store into '{buf.name}' "
                        f"(address 0x{addr:x}), which the machine holds read-only (an input the "
                        "read-only proof, ptx.readonly, found no store to: a defect of that proof)")

    def feed(self, token: int) -> None:
        tk = self.reader.read(token)
        kind = tk.kind
        if kind == "PASS":
            self._flush()
            self.cur = (tk.b, tk.a, self.masks.lanes(tk, self.nthreads))
        elif kind == "MASK":
            self._flush()
            self.masks.take(tk)
        elif kind in RESULT_KINDS:
            if self.cur is not None:
                self.res.take(tk)
        elif kind in ("BLOCK", "BAR", "DUMPADDR", "HALT", "FAULT"):
            self._flush()
            if kind == "BLOCK":
                self.block = tk.a


def _interpret(cu_path, spec_path) -> None:
    """The launch on the reference interpreter, for its fault message (thread, buffer, lines)."""
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.simt.interp import Interpreter, _find_kernel
    from qwengpu.spec import bind, default_spec_path, load_spec

    cu = Path(cu_path)
    spec = load_spec(spec_path if spec_path is not None else default_spec_path(cu))
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=f"{cu.name} (PTX)")
    interp = Interpreter(module, _find_kernel(module, spec.kernel).name)
    bound = bind(spec, interp.fn)
    interp.launch(spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes)


def _interpreter_fault(cu_path, spec_path, interpret) -> ExecutionError | None:
    """The reference interpreter's fault for the launch (None: it runs clean). ``interpret`` runs
    it (the runner passes its own: the runtime does not import the runner); ``None``:
    :func:`_interpret`."""
    try:
        (interpret or (lambda: _interpret(cu_path, spec_path)))()
    except ExecutionError as exc:
        return exc
    return None


def _out_of_bounds(oob: OutOfBounds, cu_path, spec_path, interpret, **kw) -> ModelRun:
    """The model's trace showed an out-of-bounds address: stop with the interpreter's message for
    the launch (thread, block, instruction, address and the nearest buffer). Should the interpreter
    find no fault (the watch misread a trace: a defect), the launch runs again without the watch.

    ``interpret`` runs the launch on the reference interpreter (the runner passes its own: the
    runtime does not import the runner, which sits above it); ``None``: :func:`_interpret`."""
    exc = _interpreter_fault(cu_path, spec_path, interpret)
    if exc is not None:
        raise ExecutionError(f"{exc}\n  (the model's trace: block {oob.block}, thread {oob.thread}, pc "
                             f"{oob.pc}, address 0x{oob.address:x})") from None
    print(f"qwengpu: warning: the bounds watch flagged {oob} but the interpreter finds no fault; "
          "running without the watch", file=sys.stderr)
    run = run_machine(cu_path, spec_path, check_bounds=False, **kw)
    run.stats["bounds_false_alarm"] = str(oob)
    return run


class TraceFormatter:
    """Readable lines for the tokens the model writes, one per lane-group pass (``--trace``).

    Only the tokens are read: a pass line (block, warp, group, pc, active mask, the instruction)
    is completed by the result chunks, predicate chunk or STORE tokens that follow it, and
    printed when the next step begins. Lane values are shown as the model wrote them."""

    def __init__(self, prog, nthreads: int, emit) -> None:
        self.prog, self.nthreads, self.emit = prog, nthreads, emit
        self.block, self.cur, self.res = 0, None, PassResults()
        self.reader = P.Reader()
        self.masks = StickyMasks()
        self.dead = dead_results(prog.code)  # the rows encode_program marked ``nowb``

    def _flush(self) -> None:
        cur, res = self.cur, self.res
        self.cur, self.res = None, PassResults()
        if cur is None:
            return
        g, pc, mask = cur
        ins = self.prog.code[pc] if pc < len(self.prog.code) else "?"
        what = ""
        vals = res.values([x for x in range(4) if mask >> x & 1])
        if vals:
            dst = ins.d[0] if getattr(ins, "d", None) else "?"
            what = f"  {dst} = [" + ", ".join(f"{vals[x]:#x}" if x in vals else "-" for x in range(4)) + "]"
        if res.pchunk is not None:
            pv, en = res.pchunk & 15, res.pchunk >> 4 & 15
            what += "  pred = [" + ", ".join(str(pv >> x & 1) if en >> x & 1 else "-" for x in range(4)) + "]"
        what += "".join(f"  store lane {x}" for x in res.stores)
        if pc < len(self.dead) and self.dead[pc]:
            what += f"  ({', '.join(str(d) for d in ins.d)} dead: not written)"
        self.emit(
            f"blk {self.block:2d} warp {g >> 3} group {g & 7} pc {pc:4d} mask {mask:04b}  {ins}{what}"
        )

    def feed(self, token: int) -> None:
        tk = self.reader.read(token)
        if tk.kind == "PASS":
            self._flush()
            self.cur = (tk.b, tk.a, self.masks.lanes(tk, self.nthreads))
        elif tk.kind == "MASK":
            self._flush()
            self.masks.take(tk)
        elif tk.kind in RESULT_KINDS:
            if self.cur is not None:
                self.res.take(tk)
        elif tk.kind in ("BLOCK", "BAR", "DUMPADDR", "HALT", "FAULT"):
            self._flush()
            if tk.kind == "BLOCK":
                self.block = tk.a
                self.emit(f"-- block {tk.a} starts")
            elif tk.kind == "BAR":
                self.emit("-- barrier released (every live thread of the block waits)")
            elif tk.kind == "FAULT":
                self.emit(f"-- FAULT: lane {tk.a} trapped")
            elif tk.kind == "DUMPADDR" and not getattr(self, "dumping", False):
                self.dumping = True
                self.emit("-- every thread exited; the model dumps the output words")


def decode_dump(trace: list[int], page: int = 0) -> dict[int, int]:
    """Words the model dumped: DUMPADDR(w) followed by its three chunks, or by USHORT(v) (v < 1024);
    w in the page of the last PAGE token (``page``: the latch's value where ``trace`` starts)."""
    words: dict[int, int] = {}
    addr, parts = None, []
    r = P.Reader()
    r.page = page
    for t in trace:
        tk = r.read(t)
        if tk.kind == "DUMPADDR":
            addr, parts = tk.a, []
        elif tk.kind == "USHORT" and addr is not None:
            words[addr] = tk.a
        elif tk.kind == "DATA" and addr is not None:
            if tk.a != len(parts):
                raise ExecutionError(f"malformed dump at word {addr}: {tk}")
            parts.append(tk.b)
            if len(parts) == NCHUNK:
                words[addr] = sum(p << (P.CHUNK * j) for j, p in enumerate(parts)) & M32
    return words


def run_machine(
    cu_path: str | Path,
    spec_path: str | Path | None = None,
    *,
    config=None,
    shape: MachineShape | None = None,
    max_tokens: int = 20000,
    model=None,
    runtime: str = "fast",
    progress=None,
    trace=None,
    check_bounds: bool = True,
    interpret=None,
    generate_fn=None,
) -> ModelRun:
    """Launch a kernel on the machine in the weights; outputs come from the model's DUMP tokens.

    ``interpret``: a callable running the launch on the reference interpreter, used only to word an
    out-of-bounds fault the bounds watch saw (the interpreter's message names thread and buffer).

    ``check_bounds``: watch the addresses of the model's memory passes (:class:`BoundsWatch`) and
    stop the launch at the first out-of-bounds one, reported as the interpreter reports it.

    ``progress(tokens_written, block)`` is called every 256 tokens with the index of the block
    the model runs (read from its BLOCK tokens): a long launch shows how far it is.

    ``runtime="stock"`` runs the stock ``transformers`` forward token by token; ``"fast"`` runs the
    same weights through :mod:`qwengpu.runtime.fast`, which tests prove token-for-token identical.

    ``generate_fn(prompt, max_tokens, on_token) -> trace`` replaces the model loop (the mounted
    model, :mod:`qwengpu.runtime.mounted`: its tokens mapped back to the machine's); ``model`` and
    ``runtime`` are then not used for the loop.
    """
    from qwengpu.spec import compare, read_outputs

    if config is None and shape is None:  # the default machine (``machine_config``): its shape
        config = machine_config()
    if shape is None:
        shape = shape_for(config)
    spec, prog, prompt, gmem, (lo, hi) = prepare(cu_path, spec_path, shape)
    if model is None and generate_fn is None:
        _, model = machine_model(config, shape)
    if runtime not in ("fast", "stock"):
        raise ValueError(f"unknown runtime {runtime!r} (fast or stock)")
    t0 = time.perf_counter()
    nthreads, parts = launch_shape(prompt, spec)  # the machine's threads per block (NTHREADS)
    fmt = TraceFormatter(prog, nthreads, trace) if trace else None
    if fmt is not None:
        fmt.feed(prompt[-1])
    watch = BoundsWatch(prog, gmem, nthreads) if check_bounds else None
    if watch is not None:
        watch.feed(prompt[-1])

    reader = P.Reader()  # the running block, for the progress callback (from the BLOCK tokens)
    now = {"tokens": 0, "block": 0}

    def seen(t: int) -> None:
        now["tokens"] += 1
        if watch is not None:
            watch.feed(t)
        if fmt is not None:
            fmt.feed(t)
        if progress is not None:
            if t >> 14 == 3:  # a control token: BLOCK among them
                tk = reader.read(t)
                if tk.kind == "BLOCK":
                    now["block"] = tk.a // parts  # the launch's block (a part's machine block)
            if now["tokens"] % 256 == 0:
                progress(now["tokens"], now["block"])

    try:
        if generate_fn is not None:
            tokens = generate_fn(prompt, max_tokens, seen)
        elif runtime == "fast":
            from qwengpu.runtime import run_trace_fast

            tokens = run_trace_fast(model, prompt, max_tokens, on_token=seen)
        else:
            tokens = generate(model, prompt, max_tokens, on_token=seen)
    except OutOfBounds as oob:
        return _out_of_bounds(oob, cu_path, spec_path, interpret, config=config, shape=shape,
                              max_tokens=max_tokens, model=model, runtime=runtime, progress=progress,
                              generate_fn=generate_fn,
                              trace=trace)
    trace = tokens
    seconds = time.perf_counter() - t0
    kernel_threads = int(np.prod(spec.block))
    how = (f"blocks of {kernel_threads} threads run as {parts} parts of {nthreads}" if parts > 1 else
           f"each of the machine's {nthreads} threads takes {kernel_threads // nthreads} of a block's "
           "threads in turns" if nthreads != kernel_threads else "")
    fault = fault_message(prog, trace, prompt)
    if fault:
        raise ExecutionError(_kernel_fault(fault, how, cu_path, spec_path, interpret))
    if trace[-1] != P.ctl(P.HALT):
        raise ExecutionError(
            f"step limit reached: the model wrote {max_tokens:,} tokens without halting (the kernel may "
            "loop forever — raise the limit with --max-steps)"
        )
    words = decode_dump(trace, lo >> P.ADDR_BITS)  # the prompt leaves the page latch at lo's page
    missing = [w for w in range(lo, hi) if w not in words]
    if missing:
        raise ExecutionError(f"the model's dump lacks words {missing[:8]}")
    arena = np.zeros_like(gmem.arena)
    view = arena[: len(arena) // 4 * 4].view("<u4")
    for w, v in words.items():
        if w < len(view):
            view[w] = v
    gmem.arena = arena
    outputs = read_outputs(spec, gmem)
    counts = trace_counts(prompt[-1:] + trace)
    stats = {
        "warp_instructions": counts["warp_instructions"],
        "passes": counts["passes"],
        "tokens": len(trace),
        "prompt_tokens": len(prompt),
        "machine_instructions": len(prog.code),
        "registers": prog.nregs,
        "spill_words": prog.spill_words,  # per thread, in global memory (more than 32 values live)
        "blocks": counts["blocks"],
        "barriers": counts["barriers"],
        "tokens_per_warp_instruction": round(len(trace) / max(1, counts["warp_instructions"]), 3),
        "seconds": round(seconds, 3),
        "runtime": runtime,
        "addresses_checked": watch.checked if watch is not None else None,
    }
    mism = compare(spec, outputs) if spec.expected else []
    return ModelRun(spec.kernel, outputs, stats, prompt, trace, mism)
