"""The code generator's front door: CUDA or parsed PTX -> lowered, allocated machine program ->
the machine-ISA simulator, in one call each.

Why here and not in ``qwengpu.isa.sim``: the ISA layer (the simulator, the limits) must not import
the code generator; these conveniences need both, so they live on the code generator's side.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from qwengpu.codegen.lower import lower_kernel
from qwengpu.codegen.regalloc import allocate as regalloc
from qwengpu.cuda import COMPILE_OPTIONS, compile_file
from qwengpu.isa.program import Program
from qwengpu.isa.sim import (
    DEFAULT_MAX_STEPS,
    MachineResult,
    MachineSim,
    SimStats,
    check_launch_limits,
    check_memory_limits,
    check_program_limits,
)
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.parser import parse_ptx
from qwengpu.ptx.readonly import read_only_args
from qwengpu.simt.interp import _find_kernel
from qwengpu.spec import (
    bind,
    c_signature,
    check_against_kernel,
    compare,
    default_spec_path,
    load_spec,
    read_outputs,
)


def compile_machine(
    cu_path: str | Path, kernel: str, pointer_params: list[bool] | None = None, allocate: bool = True
) -> Program:
    """CUDA file -> allocated machine program (cached PTX)."""
    cu = Path(cu_path)
    ptx = compile_file(cu, options=COMPILE_OPTIONS)
    module = parse_ptx(ptx, source_name=f"{cu.name} (PTX)")
    prog = lower_kernel(module, kernel, pointer_params)
    if allocate:
        prog = regalloc(prog)
    check_program_limits(prog)
    return prog


def simulate(
    module: object,
    spec: object,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    allocate: bool = True,
    trace: Callable[[str], None] | None = None,
) -> tuple[dict[str, np.ndarray], SimStats, Program]:
    """Lower, allocate and run the spec's kernel of a parsed PTX module; (outputs, stats, program)."""
    fn = _find_kernel(module, spec.kernel)  # type: ignore[arg-type, attr-defined]
    prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])  # type: ignore[arg-type, attr-defined]
    check_memory_limits(prog)
    if allocate:
        prog = regalloc(prog)
    check_program_limits(prog)
    bound = bind(spec, inline_calls(module, fn))  # type: ignore[arg-type]
    check_launch_limits(prog, spec.grid, spec.block, bound.gmem, spec.shared_bytes,  # type: ignore[attr-defined]
                        read_only_args(spec, inline_calls(module, fn)))  # type: ignore[arg-type]
    sim = MachineSim(prog, max_steps=max_steps, trace=trace)
    st = sim.launch(
        spec.grid,
        spec.block,
        bound.param_bytes,
        bound.gmem,  # type: ignore[attr-defined]
        dynamic_shared=spec.shared_bytes,
    )  # type: ignore[attr-defined]
    return read_outputs(spec, bound.gmem), st, prog  # type: ignore[arg-type]


def run_machine_sim(
    cu_path: str | Path,
    spec_path: str | Path | None = None,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    allocate: bool = True,
    trace: Callable[[str], None] | None = None,
) -> MachineResult:
    """Compile a CUDA file, then lower, allocate and simulate the spec's kernel on the machine.

    Shaped like ``qwengpu.runner.run_kernel``: outputs (name -> numpy array) and a stats dict with
    ``warp_instructions``, ``passes``, ``machine_instructions`` (program size) and ``registers``."""
    cu = Path(cu_path)
    spec = load_spec(spec_path if spec_path is not None else default_spec_path(cu))
    source = cu.read_text()
    ptx = compile_file(cu, options=COMPILE_OPTIONS)
    module = parse_ptx(ptx, source_name=f"{cu.name} (PTX)")
    fn = _find_kernel(module, spec.kernel)
    check_against_kernel(spec, fn, c_signature(source, spec.kernel))
    t0 = time.perf_counter()
    outputs, st, prog = simulate(module, spec, max_steps=max_steps, allocate=allocate, trace=trace)
    sd = st.as_dict()
    sd["seconds"] = round(time.perf_counter() - t0, 6)
    return MachineResult(spec.kernel, outputs, sd, compare(spec, outputs), prog, spec)


def expansion_rows(runs: list[tuple[Program, SimStats]]) -> list[tuple[str, int, int, int, int, float]]:
    """Per PTX form: (form, occurrences, min/median/max static machine instructions, dynamic machine
    warp instructions per PTX-level issue) over the given runs — the "circuit vs sequence" data."""
    static: dict[str, list[int]] = {}
    dyn: dict[str, list[int]] = {}
    for prog, st in runs:
        for i, ins in enumerate(prog.ptx):
            a, b = prog.ptx_ranges[i]
            static.setdefault(ins.form, []).append(b - a)
            d = dyn.setdefault(ins.form, [0, 0])
            if st.issues_by_ptx:
                d[0] += st.machine_by_ptx[i]
                d[1] += st.issues_by_ptx[i]
    rows = []
    for form in sorted(static):
        xs = sorted(static[form])
        m, n = dyn[form]
        rows.append((form, len(xs), xs[0], xs[len(xs) // 2], xs[-1], round(m / n, 2) if n else float("nan")))
    return rows


__all__ = ["compile_machine", "simulate", "run_machine_sim", "expansion_rows", "MachineResult"]
