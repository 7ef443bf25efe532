"""Address forms of every state space against the PTX ISA's rules ("Addresses as Operands"):
offsets are signed and added modulo the space's address width — 32 bits for .shared, .local and
.param (a 64-bit register is truncated there), 64 bits for global and generic addresses."""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.errors import ExecutionError

from .conftest import run_ptx

HEADER = ".version 8.0\n.target sm_75\n.address_size 64\n"

FORMS_BODY = r"""
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)
{
    .reg .b32 %r<20>;
    .reg .b64 %rd<20>;
    .shared .align 4 .b8 sm[64];
    .local .align 4 .b8 lc[16];
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    // .shared, 32-bit register below zero plus an offset: wraps to sm+4
    mov.u32 %r1, sm;
    add.s32 %r2, %r1, -8;
    st.shared.u32 [%r2+12], 111;
    // .shared, the same base zero-extended into a 64-bit register: truncated to 32 bits, sm+8
    cvt.u64.u32 %rd2, %r2;
    st.shared.u32 [%rd2+16], 222;
    // .shared, [var+imm] and an absolute [imm] (sm is at offset 0)
    st.shared.u32 [sm+12], 333;
    ld.shared.u32 %r3, [12];
    // .local, 32-bit register below zero plus an offset
    mov.u32 %r5, lc;
    add.s32 %r6, %r5, -4;
    st.local.u32 [%r6+8], 444;
    ld.local.u32 %r7, [lc+4];
    // generic: cvta of a shared address, 64-bit arithmetic with a negative offset
    cvt.u64.u32 %rd3, %r1;
    cvta.shared.u64 %rd4, %rd3;
    add.s64 %rd5, %rd4, -4;
    ld.u32 %r8, [%rd5+8];
    // generic round trip: cvta.to.shared of a generic shared address
    cvta.to.shared.u64 %rd6, %rd4;
    ld.shared.u32 %r9, [%rd6+8];
    // .param: [param+imm] reads the second parameter
    ld.param.u32 %r10, [k_param_0+8];
    // .global: 64-bit register plus a negative offset
    add.s64 %rd7, %rd1, 16;
    ld.global.u32 %r11, [%rd7+-12];
    ld.shared.u32 %r12, [sm+4];
    ld.shared.u32 %r13, [sm+8];
    st.global.u32 [%rd1], %r12;
    st.global.u32 [%rd1+4], %r13;
    st.global.u32 [%rd1+8], %r3;
    st.global.u32 [%rd1+12], %r7;
    st.global.u32 [%rd1+16], %r8;
    st.global.u32 [%rd1+20], %r9;
    st.global.u32 [%rd1+24], %r10;
    st.global.u32 [%rd1+28], %r11;
    ret;
}
"""
FORMS = HEADER + FORMS_BODY


def _spec(n: int = 8) -> dict:
    return {
        "kernel": "k",
        "grid": 1,
        "block": 1,
        "args": [
            {"name": "out", "type": "u32*", "data": [7, 9, 0, 0, 0, 0, 0, 0][:n]},
            {"name": "n", "type": "u32", "value": 77},
        ],
        "outputs": ["out"],
    }


def test_every_address_form():
    out = run_ptx(FORMS, _spec())["out"]
    # sm+4 (wrapped 32-bit), sm+8 (truncated 64-bit), sm+12, lc+4, generic sm+4, cvta round trip sm+8,
    # the u32 parameter, out[1] read through a negative offset
    assert out.tolist() == [111, 222, 333, 444, 111, 222, 77, 9]


def _fault_kernel(body: str, regs: str = ".reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n.reg .pred %p<2>;") -> str:
    return HEADER + (
        ".visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)\n{\n"
        f"{regs}\n.shared .align 4 .b8 sm[64];\n"
        "ld.param.u64 %rd1, [k_param_0];\ncvta.to.global.u64 %rd1, %rd1;\n"
        f"{body}\nret;\n}}\n"
    )


def test_global_negative_offset_is_out_of_bounds_not_wrapped():
    ptx = _fault_kernel("ld.global.u32 %r1, [%rd1+-4];\nst.global.u32 [%rd1], %r1;")
    with pytest.raises(ExecutionError, match=r"out-of-bounds global load.*before buffer 'out'"):
        run_ptx(ptx, _spec())


def test_shared_wrap_past_the_end_is_out_of_bounds():
    # 0xFFFFFFF8 + 80 wraps to 72: past the 64-byte array
    ptx = _fault_kernel("mov.u32 %r1, sm;\nadd.s32 %r2, %r1, -8;\nst.shared.u32 [%r2+80], 1;")
    with pytest.raises(ExecutionError, match="out-of-bounds shared store of 4 bytes at shared offset 72"):
        run_ptx(ptx, _spec())


def test_cvta_to_shared_of_a_global_address_is_reported():
    ptx = _fault_kernel("cvta.to.shared.u64 %rd2, %rd1;\nld.shared.u32 %r1, [%rd2];")
    with pytest.raises(ExecutionError, match="cvta.to.shared of generic address 0x[0-9a-f]+, which is not"):
        run_ptx(ptx, _spec())


def test_generic_access_mixing_spaces_is_reported():
    # lane 0 points into shared memory, lane 1 into global memory, through one generic load
    body = (
        "mov.u32 %r1, %tid.x;\nsetp.eq.u32 %p1, %r1, 0;\nmov.u64 %rd2, sm;\ncvta.shared.u64 %rd3, %rd2;\n"
        "selp.b64 %rd4, %rd3, %rd1, %p1;\nld.u32 %r2, [%rd4];\nst.global.u32 [%rd1], %r2;"
    )
    spec = _spec()
    spec["block"] = 2
    with pytest.raises(ExecutionError, match="lanes point into different state spaces"):
        run_ptx(_fault_kernel(body), spec)


NW = r"""
// Rodinia's Needleman-Wunsch block: NVRTC strength-reduces temp[m - tx + 1][tx + 1] into a 32-bit
// shared base below zero plus an immediate offset, and unrolls the anti-diagonal loops so that
// lanes wait at one barrier while the others still run the loop body.
#define B 16
#define MAX2(a, b) ((a) > (b) ? (a) : (b))
#define MAXIMUM(a, b, c) MAX2(MAX2(a, b), c)
extern "C" __global__ void nw(const int* ref, int* mat, int penalty) {
  __shared__ int temp[B + 1][B + 1];
  __shared__ int rs[B][B];
  int tx = threadIdx.x;
  for (int ty = 0; ty < B; ty++) rs[ty][tx] = ref[ty * B + tx];
  temp[tx + 1][0] = mat[(tx + 1) * (B + 1)];
  if (tx == 0) temp[0][0] = mat[0];
  temp[0][tx + 1] = mat[tx + 1];
  __syncthreads();
  for (int m = 0; m < B; m++) {
    if (tx <= m) {
      int x = tx + 1, y = m - tx + 1;
      temp[y][x] = MAXIMUM(temp[y - 1][x - 1] + rs[y - 1][x - 1], temp[y][x - 1] - penalty,
                           temp[y - 1][x] - penalty);
    }
    __syncthreads();
  }
  for (int m = B - 2; m >= 0; m--) {
    if (tx <= m) {
      int x = tx + B - m, y = B - tx;
      temp[y][x] = MAXIMUM(temp[y - 1][x - 1] + rs[y - 1][x - 1], temp[y][x - 1] - penalty,
                           temp[y - 1][x] - penalty);
    }
    __syncthreads();
  }
  for (int ty = 0; ty < B; ty++) mat[(ty + 1) * (B + 1) + tx + 1] = temp[ty + 1][tx + 1];
}
"""


@pytest.mark.parametrize("options", [("--generate-line-info",), ("-G",), ("--use_fast_math",)])
def test_needleman_wunsch_block(compile_run, options):
    b, pen = 16, 3
    rng = np.random.default_rng(5)
    ref = rng.integers(-6, 7, size=b * b).tolist()
    w = b + 1
    mat = [0] * (w * w)
    for i in range(w):
        mat[i] = mat[i * w] = -i * pen
    want = list(mat)
    for i in range(1, w):
        for j in range(1, w):
            want[i * w + j] = max(
                want[(i - 1) * w + j - 1] + ref[(i - 1) * b + j - 1],
                want[i * w + j - 1] - pen,
                want[(i - 1) * w + j] - pen,
            )
    spec = {
        "kernel": "nw",
        "grid": 1,
        "block": b,
        "args": [
            {"name": "ref", "type": "i32*", "data": ref},
            {"name": "mat", "type": "i32*", "data": mat},
            {"name": "penalty", "type": "i32", "value": pen},
        ],
        "outputs": ["mat"],
    }
    assert compile_run(NW, spec, options=options)["mat"].tolist() == want


CONST = (
    HEADER
    + r"""
.const .align 4 .b8 tab[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u64 %rd2, tab;
    ld.const.u32 %r1, [%rd2+12];
    ld.const.u32 %r2, [tab+4];
    cvta.const.u64 %rd3, %rd2;
    ld.u32 %r3, [%rd3+8];
    st.global.u32 [%rd1], %r1;
    st.global.u32 [%rd1+4], %r2;
    st.global.u32 [%rd1+8], %r3;
    ret;
}
"""
)


def test_const_space_direct_and_generic():
    assert run_ptx(CONST, _spec())["out"].tolist()[:3] == [4, 2, 3]


def test_cvta_param_is_refused():
    from qwengpu.errors import PTXError

    ptx = _fault_kernel("mov.u64 %rd2, k_param_1;\ncvta.param.u64 %rd3, %rd2;\nld.u32 %r1, [%rd3];")
    with pytest.raises(PTXError, match=r"cvta.param\) is not supported"):
        run_ptx(ptx, _spec())
