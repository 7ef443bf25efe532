"""The PTX front end: parsing NVRTC output, the IR, error messages with line numbers."""

from __future__ import annotations

import pytest

from qwengpu.cuda import compile_cuda
from qwengpu.errors import CompileError, PTXError
from qwengpu.ptx.inline import inline_calls
from qwengpu.ptx.ir import Addr, Imm, Pair, Reg, Special, Sym, Vec, demangle_identifier
from qwengpu.ptx.parser import parse_operand, parse_ptx

SRC = r"""
__device__ __noinline__ int sq(int x) { return x * x + 1; }
extern "C" __global__ void k(int* out, int n) {
  __shared__ float sm[64];
  extern __shared__ int dyn[];
  int loc[8];
  for (int i = 0; i < 8; i++) loc[i] = i * n;
  int t = threadIdx.x;
  sm[t] = t; dyn[t] = t;
  __syncthreads();
  int v = __shfl_down_sync(0xffffffff, t, 1);
  out[t] = sq(loc[t & 7]) + (int)sm[(t + 1) & 63] + dyn[t] + v;
}
"""


def test_parse_nvrtc_output_with_calls_locals_shared_and_loc():
    ptx = compile_cuda(SRC, filename="k.cu", options=("--generate-line-info",))
    m = parse_ptx(ptx)
    assert m.version and m.target == "sm_75" and m.address_size == 64
    k = m.kernels["k"]
    assert [p.type for p in k.params] == ["u64", "u32"]
    spaces = {v.space for v in k.vars}
    assert {"local", "shared", "param"} <= spaces
    assert any(v.extern and v.space == "shared" for v in m.globals)  # dynamic shared memory
    forms = {i.form for i in k.body}
    assert "shfl.sync.down.b32" in forms and "bar.sync" in forms and "call.uni" in forms
    shfl = next(i for i in k.body if i.op == "shfl")
    assert isinstance(shfl.operands[0], Pair)
    st = next(i for i in k.body if i.form == "st.local.v4.u32")
    assert isinstance(st.operands[1], Vec) and len(st.operands[1].items) == 4
    assert all(i.loc is not None for i in k.body)  # .loc gives CUDA lines
    flat = inline_calls(m, k)
    assert not any(i.op == "call" for i in flat.body)
    assert any("@_Z2sqi" in r for r in flat.regs)


def test_operands():
    assert parse_operand("%r12") == Reg("%r12")
    assert parse_operand("%tid.x") == Special("tid.x")
    assert parse_operand("0f3F800000") == Imm(0x3F800000, "f32")
    assert parse_operand("0d3FF0000000000000") == Imm(0x3FF0000000000000, "f64")
    assert parse_operand("-1") == Imm(-1)
    assert parse_operand("0xFFFFFFFF") == Imm(0xFFFFFFFF)
    assert parse_operand("[%rd1+-8]") == Addr(Reg("%rd1"), -8)
    assert parse_operand("[k_param_0]") == Addr(Sym("k_param_0"), 0)
    assert parse_operand("[sm+12]") == Addr(Sym("sm"), 12)


def test_demangle():
    assert demangle_identifier("_Z6squarePfi") == "square"
    assert demangle_identifier("dot") == "dot"
    assert demangle_identifier("_ZN2ns3fooEv") == "foo"


def test_bad_ptx_names_line():
    ptx = (
        ".version 9.5\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n"
        "\tfrobnicate.b32 %r1;\n\tret;\n}\n"
    )
    with pytest.raises(PTXError, match="PTX line 6"):
        from qwengpu.simt.interp import Interpreter

        Interpreter(parse_ptx(ptx), "k")


def test_unknown_label_and_garbage():
    ptx = ".version 9.5\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n\tbra.uni $nowhere;\n}\n"
    with pytest.raises(PTXError, match="unknown label"):
        parse_ptx(ptx)
    with pytest.raises(PTXError, match="PTX line 4"):
        parse_ptx(".version 9.5\n.target sm_75\n.address_size 64\n.bogus 1;\n")


def test_compile_error_has_file_and_line():
    with pytest.raises(CompileError) as ei:
        compile_cuda(
            'extern "C" __global__ void f(int* p) {\n  p[0] = undefined_thing;\n}\n', filename="bad.cu"
        )
    assert "bad.cu(2)" in str(ei.value) and "undefined" in str(ei.value)
