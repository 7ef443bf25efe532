"""One launch, start to finish: CUDA -> PTX -> engine -> outputs, shared by ``run`` and ``check``.

Engines: ``interp`` (the reference SIMT interpreter) and ``machine`` (the GPU compiled into a
stock Qwen3.5 model; so far a first slice that refuses, with a ``MachineLimitError`` naming the
reason, what it cannot run) and ``model`` (the machine mounted in front of a Qwen3.5: a checkpoint
``qwengpu build`` wrote, ``model_dir``; :mod:`qwengpu.runtime.mounted`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from qwengpu.cuda import COMPILE_OPTIONS, DEFAULT_ARCH, compile_file
from qwengpu.errors import LaunchSpecError, MachineLimitError, QwenGPUError, UsageError
from qwengpu.ptx.parser import parse_ptx
from qwengpu.shapes import resolve_shape_name
from qwengpu.simt.interp import DEFAULT_MAX_STEPS, Interpreter, Stats, _find_kernel
from qwengpu.spec import (
    LaunchSpec,
    bind,
    c_signature,
    check_against_kernel,
    compare,
    default_spec_path,
    load_spec,
    outputs_json,
    read_outputs,
)

ENGINES = ("interp", "machine", "model")


@dataclass(frozen=True)
class LaunchProgress:
    """How far a launch on a model engine is (``run_kernel``'s ``progress`` gets one every 256
    tokens; the interpreter's progress is its :class:`Stats`): tokens written, seconds since the
    launch stage began, the block running (0-based) and the launch's block count."""

    tokens: int
    seconds: float
    block: int
    blocks: int


@dataclass
class RunResult:
    """What a launch produced."""

    kernel: str
    engine: str
    spec: LaunchSpec
    outputs: dict[str, np.ndarray]
    stats: dict
    mismatches: list[str] = field(default_factory=list)
    approximate: list[str] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        return bool(self.spec.expected)

    @property
    def passed(self) -> bool:
        return self.checked and not self.mismatches

    def as_json(self) -> dict:
        d = {
            "kernel": self.kernel,
            "engine": self.engine,
            "outputs": outputs_json(self.spec, self.outputs),
            "stats": self.stats,
        }
        if self.checked:
            d["check"] = {
                "passed": self.passed,
                "mismatches": self.mismatches,
                "tolerance_ulp": self.spec.tolerance_ulp,
            }
        if self.approximate:
            d["approximate"] = self.approximate
        return d


def run_kernel(
    cu_path: str | Path,
    spec_path: str | Path | None = None,
    *,
    engine: str = "interp",
    arch: str = DEFAULT_ARCH,
    use_nvcc: bool = False,
    max_steps: int = DEFAULT_MAX_STEPS,
    trace: Callable[[str], None] | None = None,
    progress: Callable[[Stats | LaunchProgress], None] | None = None,
    model_dir: str | None = None,
    runtime: str = "fast",
    replay: bool = False,
    device: str | None = None,
    dtype: str | None = None,
    shape: str | None = None,
    stage: Callable[[str], None] | None = None,
    machine_fit: bool = False,
) -> RunResult:
    """Compile, validate the spec against the kernel, launch on ``engine``, read outputs back.

    ``shape`` (machine engine; the interpreter's ``machine_fit``): the layer shape the machine is
    compiled into, ``2b`` (Qwen3.5-2B's layers, as every mount) or ``test`` (small, for fast tests);
    None: the default (``$QWENGPU_MACHINE_SHAPE``, else ``2b``; :mod:`qwengpu.shapes`).

    ``replay`` (machine engine): also feed the finished trace back in one teacher-forced prefill
    on the chunked path and check every position's argmax (``stats["chunked_replay"]``).

    ``stage(name)`` hears each stage as it starts (``compile``, ``load ...``, ``launch``): the
    ``progress`` counts and their rate are measured from the start of the launch stage, never
    across a model load: the interpreter passes its :class:`Stats`, a model engine a
    :class:`LaunchProgress` (tokens written, the block running). ``device``/``dtype`` (None: cpu,
    float32) place the model engine's forward; the interpreter refuses them (:class:`UsageError`)
    rather than ignore them.

    ``machine_fit`` (interpreter): also lower the kernel for the machine in the weights and put,
    in ``stats["machine_limit"]``, why the machine would refuse this launch (None: it fits)."""
    cu = Path(cu_path)
    if engine not in ENGINES:
        raise QwenGPUError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    shape = resolve_shape_name(shape)
    if engine == "interp" and (device not in (None, "cpu") or dtype not in (None, "float32")):
        refuse_device_dtype(device, dtype)
    if not cu.is_file():
        what = "is a folder, not a CUDA file" if cu.is_dir() else "does not exist"
        raise QwenGPUError(f"no kernel source: {cu} {what}")
    if spec_path is None:
        spec_path = default_spec_path(cu)
        if not Path(spec_path).exists():
            raise LaunchSpecError(f"no launch spec: {spec_path} does not exist (pass --launch SPEC.json)")
    spec = load_spec(spec_path)
    source = cu.read_text()
    if stage is not None:
        stage("compile")
    ptx = compile_file(cu, arch=arch, use_nvcc=use_nvcc, options=COMPILE_OPTIONS)
    module = parse_ptx(ptx, source_name=f"{cu.name} (PTX)")
    fn = _find_kernel(module, spec.kernel)
    check_against_kernel(spec, fn, c_signature(source, spec.kernel))
    if engine == "model":
        if replay:
            raise QwenGPUError("--replay needs --engine machine (it replays the trace the model wrote)")
        return _run_on_model(cu, Path(spec_path), spec, model_dir, runtime, device or "cpu",
                             dtype or "float32", progress, trace, max_steps, stage)
    if engine == "machine":
        return _run_on_machine(cu, Path(spec_path), spec, runtime, progress, trace, max_steps, replay, shape,
                               stage, (module, fn))
    if replay:
        raise QwenGPUError("--replay needs --engine machine (it replays the trace the model wrote)")
    if stage is not None:
        stage("launch")
    t0 = time.perf_counter()
    interp = Interpreter(module, fn.name, max_steps=max_steps, trace=trace)
    bound = bind(spec, interp.fn)
    stats = interp.launch(
        spec.grid,
        spec.block,
        bound.param_bytes,
        bound.gmem,
        dynamic_shared=spec.shared_bytes,
        progress=progress,
    )
    outputs = read_outputs(spec, bound.gmem)
    sd = stats.as_dict()
    sd["seconds"] = round(time.perf_counter() - t0, 6)
    sd["warp_instructions_per_second"] = round(stats.warp_instructions / max(sd["seconds"], 1e-9))
    if machine_fit:
        if stage is not None:
            stage("check the machine's limits")
        reason = machine_limit_reason(module, fn, spec, _machine_shape(shape))
        sd["machine_limit"] = reason.splitlines()[0] if reason else None
    result = RunResult(spec.kernel, engine, spec, outputs, sd, approximate=interp.uses_approx)
    result.mismatches = compare(spec, outputs)
    return result


def refuse_device_dtype(device: str | None, dtype: str | None) -> None:
    """The interpreter has no device or dtype to choose: asking for one is a usage error, not a
    setting silently ignored (the CLI refuses any explicit --device/--dtype; the API the values
    that would mean something else than the interpreter's CPU and exact 32-bit arithmetic)."""
    given = " and ".join(f"--{k} {v}" for k, v in (("device", device), ("dtype", dtype)) if v is not None)
    raise UsageError(f"{given}: the interpreter runs on the CPU in exact 32-bit arithmetic and takes "
                     "neither --device nor --dtype (they place the model engines' forward pass)")


def _machine_shape(name: str):
    """The :class:`MachineShape` of the named machine (``configs.shape_named``: the shape from its
    layer sizes, without importing torch or transformers for the interpreter's note)."""
    from qwengpu.model.configs import shape_named  # light: no torch, no transformers

    return shape_named(name)


def machine_limit_reason(module, fn, spec: LaunchSpec, shape=None) -> str | None:
    """Why the machine in the weights (``shape``: a ``MachineShape``; None: the test shape's) would
    refuse this launch,
    or None when it fits: the same lowering and limit checks as the machine engine's ``prepare``,
    without a model (tens of milliseconds; None without the ``model`` extra). Why: the interpreter
    runs launches the machine refuses; a user trying a kernel on it should hear before switching
    engines."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.soft import ROM_BUDGET, Options
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.codegen.softmem import buffers_end, lower_for_weights, read_only_end
    from qwengpu.isa.sim import check_program_limits, param_bank
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.ptx.readonly import writable_first
    from qwengpu.simt.memory import place_module_globals

    if shape is None:
        from qwengpu.machine.shape import MachineShape

        shape = MachineShape()
    opts = unit_options(shape)
    grid, block = tuple(spec.grid), tuple(spec.block)
    def refusal(high: list[str]) -> str | None:
        # (threads per block and blocks: plan_memory, in lower_for_weights, checks them with the
        # block's parts, as engine.prepare)
        lowered = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
        sized = bind(spec, inline_calls(module, fn), high, 4 * shape.gmem_words)  # spill slots get the rest
        globals_at = place_module_globals(sized.gmem, lowered.layout.global_vars)
        bank = param_bank(lowered, sized.param_bytes, globals_at)  # as engine.prepare
        budget = min(shape.rom_rows, ROM_BUDGET)  # as engine.prepare
        for _ in range(4):
            prog, mem = lower_for_weights(lowered, grid, block, spec.shared_bytes,  # type: ignore[arg-type]
                                          options=Options(budget=budget, **opts,
                                                          param_words=sized.param_words, param_bank=bank),
                                          gmem_words=shape.gmem_words, arena_words=buffers_end(sized.gmem))
            if len(prog.code) <= shape.rom_rows:
                break
            budget -= len(prog.code) - shape.rom_rows + 8
        check_program_limits(prog)
        if len(prog.code) > shape.rom_rows:
            return (f"kernel {prog.name} needs {len(prog.code)} machine instructions; the machine holds "
                    f"{shape.rom_rows}")
        if prog.nregs > shape.nregs or prog.npreds > shape.npreds:
            return (f"kernel {prog.name} needs {prog.nregs} registers / {prog.npreds} predicates; "
                    f"the machine has {shape.nregs} / {shape.npreds}")
        bound = bind(spec, inline_calls(module, fn), high, 4 * shape.gmem_words)
        place_module_globals(bound.gmem, prog.layout.global_vars)
        mem.check_arena(buffers_end(bound.gmem))
        ro_end = read_only_end(bound.gmem)
        ro_top = prog.rodata_low(shape.gmem_words + shape.ro_words)
        if ro_end > ro_top:
            return (f"the launch's read-only inputs end at word {ro_end}; the machine has "
                    f"{shape.gmem_words} writable and {shape.ro_words} read-only words"
                    + (f", of which the program's constant tables take "
                       f"{shape.gmem_words + shape.ro_words - ro_top}" if prog.rodata else ""))
        nwords = (len(bound.gmem.arena) + 3) // 4
        if not high and nwords > shape.gmem_words:
            raise MachineLimitError(f"the launch needs {nwords} words of global memory (with guard gaps); "
                                    f"the machine has {shape.gmem_words}")
        return None

    try:
        return writable_first(refusal, spec, lambda: inline_calls(module, fn), bool(shape.ro_words))
    except MachineLimitError as exc:
        return str(exc)
    except QwenGPUError:  # e.g. an instruction the lowering refuses: the machine engine says which
        return None
    return None


def _run_on_machine(
    cu: Path, spec_path: Path, spec: LaunchSpec, runtime: str, progress=None, trace=None, max_steps=None,
    replay: bool = False,
    shape: str | None = None,
    stage: Callable[[str], None] | None = None,
    kernel=None,
) -> RunResult:
    """The machine compiled into a stock Qwen3.5 model: every result comes from its argmax tokens.

    ``kernel`` (parsed module, function): a launch beyond the machine's limits is refused from it
    before the model is loaded (seconds, not a multi-GB load first)."""
    from qwengpu.model.configs import shape_for
    from qwengpu.runtime import engine as machine_engine
    from qwengpu.runtime.engine import machine_config, run_machine

    config = machine_config(shape)
    if kernel is not None:
        reason = machine_limit_reason(*kernel, spec, shape_for(config))
        if reason:
            raise MachineLimitError(reason)

    t0 = time.perf_counter()
    if stage is not None:
        stage(f"load the machine model ({shape} shape)")
    model, generate_fn = None, None  # loaded once per process; not part of the rate
    if runtime == "fast" and not replay:  # the lean cache entry (~0.8 GB on the 2B shape)
        from qwengpu.runtime.cached import fast_generate, machine_fast

        generate_fn = fast_generate(machine_fast(config))
    else:  # the stock checkpoint (the dense cache entry, built on demand)
        _, model = machine_engine.machine_model(config)
    if stage is not None:
        stage("launch")
    t_start = time.perf_counter()

    nblocks = int(np.prod(spec.grid))

    def tokens(n: int, block: int) -> None:  # the stock loop is slow: report tokens written and tokens/s
        if progress is not None:
            progress(LaunchProgress(n, time.perf_counter() - t_start, block, nblocks))

    # the model writes about 2-12 tokens per lane-group pass; the step limit bounds the tokens
    max_tokens = min(40 * (max_steps or 50_000), 2_000_000)
    run = run_machine(
        cu,
        spec_path,
        runtime=runtime,
        progress=tokens if progress else None,
        trace=trace,
        max_tokens=max_tokens,
        interpret=lambda: run_kernel(cu, spec_path),
        config=config,
        model=model,
        generate_fn=generate_fn,
    )
    stats = dict(run.stats)
    if replay:
        from qwengpu.runtime.chunked import replay as chunked_replay
        from qwengpu.runtime.engine import machine_model

        rep = chunked_replay(machine_model(config)[1], run.prompt, run.trace)
        bad = rep["first_mismatch"]
        stats["chunked_replay"] = "equal" if rep["equal"] else f"differs at trace token {bad}"
        stats["replay_tokens_per_second"] = round(rep["tokens"] / max(rep["seconds"], 1e-9), 1)
        if not rep["equal"]:
            from qwengpu.errors import ExecutionError

            raise ExecutionError(
                f"the chunked-path replay differs from the trace the model wrote at trace token {bad} of "
                f"{len(run.trace)} (the compiled model is not exact on this launch)"
            )
    stats["seconds_total"] = round(time.perf_counter() - t0, 3)
    result = RunResult(spec.kernel, "machine", spec, run.outputs, stats)
    result.mismatches = compare(spec, run.outputs)
    return result


def _run_on_model(
    cu: Path, spec_path: Path, spec: LaunchSpec, model_dir: str | None, runtime: str, device: str,
    dtype: str, progress=None, trace=None, max_steps=None, stage: Callable[[str], None] | None = None,
) -> RunResult:
    """The machine mounted in front of a Qwen3.5 (``qwengpu build``): a launch is its own sequence,
    every result read from the model's argmax tokens (mapped back from the mount's ids)."""
    if not model_dir:
        raise QwenGPUError("--engine model needs --model DIR (a mounted checkpoint that `qwengpu build` "
                           "wrote)")
    from qwengpu.runtime.mounted import mounted_model

    t0 = time.perf_counter()
    if stage is not None:
        stage(f"load the mount {model_dir}")
    mm = mounted_model(model_dir, runtime=runtime, device=device, dtype=dtype)
    if stage is not None:
        stage("launch")
    t_start = time.perf_counter()

    nblocks = int(np.prod(spec.grid))

    def tokens(n: int, block: int) -> None:
        if progress is not None:
            progress(LaunchProgress(n, time.perf_counter() - t_start, block, nblocks))

    run = mm.launch(cu, spec_path, progress=tokens if progress else None, trace=trace,
                    max_tokens=min(40 * (max_steps or 50_000), 2_000_000),
                    interpret=lambda: run_kernel(cu, spec_path))
    stats = dict(run.stats)
    stats["load_seconds"] = round(mm.load_seconds, 3)
    stats["seconds_total"] = round(time.perf_counter() - t0, 3)
    result = RunResult(spec.kernel, "model", spec, run.outputs, stats)
    result.mismatches = compare(spec, run.outputs)
    return result


def corpus(dirpath: str | Path) -> list[tuple[Path, Path]]:
    """Every ``NAME.cu`` in a folder that has a ``NAME.json`` beside it, sorted by name."""
    d = Path(dirpath)
    if not d.is_dir():
        raise QwenGPUError(f"not a directory: {d}")
    return [
        (cu, cu.with_suffix(".json")) for cu in sorted(d.glob("*.cu")) if cu.with_suffix(".json").exists()
    ]
