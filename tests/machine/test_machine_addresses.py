"""32-bit address wrap on the machine side (PTX ISA, "Addresses as Operands").

Why: ``.shared``/``.local``/``.param`` addresses are 32 bits wide, so ``[reg+imm]`` is computed
modulo 2^32. NVRTC strength-reduces ``temp[m - tx + 1][tx + 1]`` into a shared base register
below zero plus a positive immediate offset; the machine (simulator, and the weights' program in
which shared memory is a region of global memory) must wrap exactly like the interpreter.
Expected values come from the kernel's meaning (NumPy, in the spec), not from an engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from machine_helpers import HEADER, assert_same, both

from qwengpu.codegen.pipeline import run_machine_sim
from qwengpu.codegen.soft import run_for_weights
from qwengpu.codegen.softmem import run_weights
from qwengpu.cuda import COMPILE_OPTIONS, compile_file

K = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels"


def test_nvrtc_forms_a_shared_base_below_zero():
    """The test kernel really has the shape: a shared access ``[%r+imm]`` with imm > 0."""
    ptx = compile_file(K / "nw.cu", options=COMPILE_OPTIONS)
    offs = [ln for ln in ptx.splitlines() if "ld.shared" in ln and "+" in ln and "+-" not in ln]
    assert offs, "expected ld.shared [%r+imm] in NVRTC's output"


@pytest.mark.parametrize("run", [run_machine_sim, run_for_weights, run_weights])
def test_needleman_wunsch_tile_wraps(run):
    r = run(K / "nw.cu")
    assert r.passed, r.mismatches


PTX_WRAP = """
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b8 buf[16];
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, buf;
    mov.u32 %r2, 42;
    st.shared.u32 [%r1+4], %r2;
    add.s32 %r3, %r1, -16;
    ld.shared.u32 %r4, [%r3+20];
    st.global.u32 [%rd2], %r4;
    ret;
}
"""


@pytest.mark.parametrize("weights", [False, True])
def test_shared_register_below_zero_plus_offset(weights):
    """[0xFFFFFFF0 + 20] in .shared is offset 4 (mod 2^32): the interpreter and the machine read 42."""
    spec = {"kernel": "k", "grid": 1, "block": 1, "args": [{"name": "out", "type": "u32*", "size": 1}],
            "outputs": ["out"]}
    ref, got, _, _ = both(PTX_WRAP, spec)
    assert not isinstance(ref, str), ref
    assert int(ref["out"][0]) == 42
    assert_same(ref, got)
    if weights:  # the weights' program: shared memory is a region of global memory
        from qwengpu.codegen.softmem import simulate_weights
        from qwengpu.ptx.parser import parse_ptx
        from qwengpu.spec import parse_spec

        out, _, _, _ = simulate_weights(parse_ptx(HEADER + PTX_WRAP), parse_spec(spec))
        assert int(out["out"][0]) == 42
