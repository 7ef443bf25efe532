"""Dead results are not written back: the ROM row's ``nowb`` bit (``codegen.liveness``), inside the
model. A load whose value nothing reads (kept: loads can fault) is followed by no result token,
the live load beside it still writes its value, and the outputs stay bit-exact; without the bit
the same launch writes exactly those result tokens more."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from qwengpu.machine import protocol as P
from qwengpu.runtime import engine
from qwengpu.runtime.engine import machine_model, run_machine

pytestmark = pytest.mark.slow

SRC = r"""
extern "C" __global__ void deadld(const int* a, int* out, int n) {
    int i = threadIdx.x;
    int t;
    // a load whose value nothing reads: the machine keeps it (loads can fault), its result is dead
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(t) : "l"(a + 5 - i));
    if (i < n) out[i] = (a[i] ^ 0x5a5) + i;
}
"""
A = [7, 300, 70000, 1 << 20, 5, 6]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    d = tmp_path_factory.mktemp("dead")
    (d / "deadld.cu").write_text(SRC)
    spec = {"kernel": "deadld", "grid": 1, "block": 6,
            "args": [{"name": "a", "type": "i32*", "data": A},
                     {"name": "out", "type": "i32*", "data": [0] * 6},
                     {"name": "n", "type": "i32", "value": 5}],
            "outputs": ["out"],
            # expected values from Python, not from the machine
            "expected": {"out": [((a ^ 0x5A5) + i) if i < 5 else 0 for i, a in enumerate(A)]}}
    (d / "deadld.json").write_text(json.dumps(spec))
    return d / "deadld.cu"


@pytest.fixture(scope="module")
def machine():
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return machine_model()


def _passes(prog, trace: list[int]) -> list[tuple[int, list[str]]]:
    """(pc, kinds of the tokens after its PASS / MASK up to the next pass) per executing pass."""
    out: list[tuple[int, list[str]]] = []
    for tk in P.read_all(trace):
        if tk.kind == "PASS":
            out.append((tk.a, []))
        elif out and tk.kind != "MASK":
            out[-1][1].append(tk.kind)
    return out


def test_dead_load_writes_no_result(machine, kernel):
    _, prog, *_ = engine.prepare(kernel)
    dead = engine.dead_results(prog.code)
    lds = [pc for pc, ins in enumerate(prog.code) if ins.op == "ld" and ins.mod("space") == "global"]
    dead_ld = [pc for pc in lds if dead[pc]]
    live_ld = [pc for pc in lds if not dead[pc]]
    assert len(dead_ld) == 1 and len(live_ld) == 1, [str(prog.code[pc]) for pc in lds]
    run = run_machine(kernel, model=machine[1])
    assert run.passed, run.mismatches
    assert np.asarray(run.outputs["out"]).view(np.uint32).tolist()[:5] == [
        ((a ^ 0x5A5) + i) & 0xFFFFFFFF for i, a in enumerate(A[:5])]
    passes = _passes(prog, run.trace)
    after_dead = [k for pc, k in passes if pc == dead_ld[0]]
    after_live = [k for pc, k in passes if pc == live_ld[0]]
    assert after_dead and all(not ({"DATA", "SHORT", "USHORT"} & set(k)) for k in after_dead), after_dead
    assert after_live and all({"DATA", "SHORT", "USHORT"} & set(k) for k in after_live), after_live

    # without the bit (every result written, as before) the launch writes those tokens more
    real = engine.dead_results
    try:
        engine.dead_results = lambda code: [False] * len(code)  # type: ignore[assignment]
        full = run_machine(kernel, model=machine[1])
    finally:
        engine.dead_results = real  # type: ignore[assignment]
    assert full.passed
    extra = [k for pc, k in _passes(prog, full.trace) if pc == dead_ld[0]]
    n_extra = sum(sum(x in ("DATA", "SHORT", "USHORT") for x in k) for k in extra)
    assert n_extra > 0 and len(full.trace) - len(run.trace) == n_extra
