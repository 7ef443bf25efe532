"""Device functions on the machine: calls NVRTC does not inline, and recursion refused by name.

Why: ``.func`` calls are inlined for the machine (``ptx/inline.py``); a ``__noinline__``
function must still run on every engine, and a recursive one (which inlining cannot remove) must
be refused with a clear message naming the function, never crash or loop.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qwengpu.codegen.pipeline import run_machine_sim
from qwengpu.codegen.soft import run_for_weights
from qwengpu.codegen.softmem import run_weights
from qwengpu.cuda import COMPILE_OPTIONS, compile_file
from qwengpu.errors import QwenGPUError

K = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels"
RUNS = [run_machine_sim, run_for_weights, run_weights]


def test_noinline_function_is_a_real_call_in_ptx():
    assert "call.uni" in compile_file(K / "noinl.cu", options=COMPILE_OPTIONS)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("name", ["noinl", "devsq", "warpsz"])
def test_device_functions_and_warp_size(run, name):
    r = run(K / f"{name}.cu")
    assert r.passed, r.mismatches


@pytest.mark.parametrize("run", RUNS)
def test_recursion_is_refused_by_name(run):
    with pytest.raises(QwenGPUError, match=r"recursive call of fib \(fibk -> fib -> fib\)"):
        run(K / "fib.cu")
