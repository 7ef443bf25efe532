"""Lanes waiting at a barrier keep their PC while the other lanes of their warp branch apart, return
or reach a barrier, on the ISA simulator and on the weights' program (sim.py used to materialize the
converged PC into every lane, so parked lanes resumed at the wrong instruction).  Expected values
come from the kernels' meaning; the interpreter must agree bit for bit."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
from machine_helpers import HEADER, run_interp

from qwengpu.codegen.pipeline import simulate
from qwengpu.codegen.soft import Options, simulate_for_weights
from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

_ENTRY = """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.lt.u32 %p1, %r1, 2;
    @%p1 bra WORK;
    bar.sync 0;
    add.u32 %r2, %r2, 100;
    bra.uni DONE;
WORK:
    setp.eq.u32 %p2, %r1, 0;
"""

# lanes 2, 3 wait at the first barrier; lanes 0 and 1 branch apart, then meet at a second barrier
BRANCH = (
    _ENTRY
    + """
    @%p2 bra W0;
    add.u32 %r2, %r2, 10;
W0:
    add.u32 %r2, %r2, 1;
    bar.sync 0;
DONE:
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
)

# lanes 2, 3 wait; lane 0 stores and returns early, lane 1 alone reaches the second barrier
RETURN = (
    _ENTRY
    + """
    @%p2 bra EARLY;
    add.u32 %r2, %r2, 10;
    bar.sync 0;
    bra.uni DONE;
EARLY:
    mov.u32 %r3, 7;
    st.global.u32 [%rd3], %r3;
    ret;
DONE:
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
)

# lanes 2, 3 wait; lanes 0 and 1 each reach a barrier of their own branch (a barrier splits them)
TWO_BARRIERS = (
    _ENTRY
    + """
    @%p2 bra B0;
    add.u32 %r2, %r2, 20;
    bar.sync 0;
    add.u32 %r2, %r2, 3;
    bra.uni DONE;
B0:
    add.u32 %r2, %r2, 5;
    bar.sync 0;
    add.u32 %r2, %r2, 1000;
DONE:
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
)

# lanes 2, 3 wait; lanes 0 and 1 branch apart and multiply (on the weights, with routines forced, each
# multiplication is a call of a shared routine: call/ret while lanes wait)
CALLS = (
    _ENTRY
    + """
    @%p2 bra C0;
    add.u32 %r2, %r2, 6;
    mul.lo.u32 %r2, %r2, %r1;
    bar.sync 0;
    bra.uni DONE;
C0:
    add.u32 %r3, %r1, 9;
    mul.lo.u32 %r2, %r3, %r3;
    bar.sync 0;
DONE:
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
)

CASES = {
    "branch": (BRANCH, [1, 11, 100, 100]),
    "return": (RETURN, [7, 10, 100, 100]),
    "two_barriers": (TWO_BARRIERS, [1005, 23, 100, 100]),
    "calls": (CALLS, [81, 6, 100, 100]),
}

SPEC = {
    "kernel": "k",
    "grid": 1,
    "block": 4,
    "args": [{"name": "out", "type": "u32*", "size": 4}],
    "outputs": ["out"],
}


def _module(ptx: str) -> Any:
    return parse_ptx(HEADER + ptx)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("engine", ["interp", "sim", "weights", "routines"])
def test_waiting_lanes_keep_their_pc(case: str, engine: str) -> None:
    ptx, want = CASES[case]
    module, spec = _module(ptx), parse_spec(SPEC)
    if engine == "interp":
        out = run_interp(module, spec)
    elif engine == "sim":
        out, _, _ = simulate(module, spec)
    elif engine == "weights":
        out, _, _ = simulate_for_weights(module, spec)
    else:  # every routable expansion a call, every repeated window outlined
        forced = Options(routines="always", outline="always")
        out, _, prog = simulate_for_weights(module, spec, options=forced)
        if case == "calls":
            assert any(x.op == "call" for x in prog.code)
    assert np.asarray(out["out"]).tolist() == want


# ------------------------------------------------------------------------------------------------
# bar.red (__syncthreads_count / _and / _or): the machine's barrier carries no value, so the
# lowering rewrites it as a shared counter (codegen/lowering/barred.py); expected values from the
# intrinsics' meaning (plain Python), the interpreter keeping its own bar.red
# ------------------------------------------------------------------------------------------------

BAR_RED_CU = """extern "C" __global__ void k(const int* x, int* out) {
    int v = x[threadIdx.x];
    int n = __syncthreads_count(v > 0);
    int a = __syncthreads_and(v > 0);
    int o = __syncthreads_or(v > 5);
    out[threadIdx.x] = n * 100 + a * 10 + o;
}
"""
BAR_RED_X = [1, -2, 3, 0, 7, 4, -1, 2]
BAR_RED_SPEC = {
    "kernel": "k",
    "grid": 1,
    "block": 8,
    "args": [
        {"name": "x", "type": "i32*", "data": BAR_RED_X},
        {"name": "out", "type": "i32*", "size": 8},
    ],
    "outputs": ["out"],
}


@functools.cache
def _bar_red_module() -> Any:
    """Compiled once (NVRTC is the slow part); the interpreter and simulators only read it."""
    from qwengpu.cuda import compile_cuda

    ptx = compile_cuda(BAR_RED_CU, filename="bar_red.cu", options=("--generate-line-info",))
    assert "bar.red.popc" in ptx
    return parse_ptx(ptx, source_name="bar_red.cu")


def test_bar_red_on_the_interpreter() -> None:
    n = sum(v > 0 for v in BAR_RED_X)
    a = int(all(v > 0 for v in BAR_RED_X))
    o = int(any(v > 5 for v in BAR_RED_X))
    out = run_interp(_bar_red_module(), parse_spec(BAR_RED_SPEC))
    assert np.asarray(out["out"]).tolist() == [n * 100 + a * 10 + o] * 8 == [501] * 8


@pytest.mark.parametrize("engine", ["sim", "weights"])
def test_bar_red_on_the_machine(engine: str) -> None:
    module, spec = _bar_red_module(), parse_spec(BAR_RED_SPEC)
    out = (simulate if engine == "sim" else simulate_for_weights)(module, spec)[0]
    assert np.asarray(out["out"]).tolist() == [501] * 8


VOTES_CU = """extern "C" __global__ void votes(const int* x, int* out, int rounds)
{
    int t = threadIdx.x;
    int b = blockIdx.x;
    int acc = 0;
    for (int r = 0; r < rounds; r++) {  // the same bar.red again: the counter must restart at 0
        int v = x[(b * blockDim.x + t + r) % 64];
        acc += __syncthreads_count(v > r * 10);
        acc += 1000 * __syncthreads_and(v >= 0);
        acc += 100000 * __syncthreads_or(v == r);
    }
    out[b * blockDim.x + t] = acc;
}
"""


def _votes(grid: int, block: int, rounds: int, seed: int) -> tuple[dict, list[int]]:
    """A spec and the expected outputs: 2 blocks, 2 warps (the second partial), several rounds."""
    import random

    rng = random.Random(seed)
    x = [rng.randint(-3, 40) for _ in range(64)]
    x[10] = 1
    want = []
    for b in range(grid):
        acc = 0
        for r in range(rounds):
            vs = [x[(b * block + t + r) % 64] for t in range(block)]
            acc += sum(v > r * 10 for v in vs)
            acc += 1000 * all(v >= 0 for v in vs) + 100000 * any(v == r for v in vs)
        want += [acc] * block
    spec = {"kernel": "votes", "grid": grid, "block": block,
            "args": [{"name": "x", "type": "i32*", "data": x},
                     {"name": "out", "type": "i32*", "size": grid * block},
                     {"name": "rounds", "type": "i32", "value": rounds}],
            "outputs": ["out"]}
    return spec, want


@pytest.mark.parametrize("engine", ["interp", "sim", "weights"])
def test_bar_red_in_a_loop_over_blocks_and_warps(engine: str) -> None:
    from qwengpu.cuda import compile_cuda

    module = parse_ptx(compile_cuda(VOTES_CU, filename="votes.cu"), source_name="votes.cu")
    raw, want = _votes(2, 40, 3, seed=5)
    spec = parse_spec(raw)
    if engine == "interp":
        out = run_interp(module, spec)
    else:
        out = (simulate if engine == "sim" else simulate_for_weights)(module, spec)[0]
    assert np.asarray(out["out"]).tolist() == want


@pytest.mark.slow  # 13 s; bar.red on the simulators stays in the default run, and blocks with barriers
# inside the model in test_machine_weights.py
def test_bar_red_inside_the_model(tmp_path) -> None:
    """The shared-counter sequence written by the model itself (8 threads, one block)."""
    import json

    pytest.importorskip("transformers")
    from qwengpu.runtime.engine import run_machine

    cu, js = tmp_path / "k.cu", tmp_path / "k.json"
    cu.write_text(BAR_RED_CU)
    js.write_text(json.dumps(BAR_RED_SPEC | {"expected": {"out": [501] * 8}}))
    run = run_machine(cu, js, max_tokens=100_000)
    assert run.passed and np.asarray(run.outputs["out"]).tolist() == [501] * 8
