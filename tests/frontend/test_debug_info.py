"""Everything NVRTC writes for line and debug information parses, and each instruction keeps the
CUDA line the user wrote (an inlined device function's own line, with its call site)."""

from __future__ import annotations

import pytest

from qwengpu.cuda import compile_cuda
from qwengpu.errors import PTXError
from qwengpu.ptx.ir import Imm
from qwengpu.ptx.parser import parse_operand, parse_ptx

SQ = """__device__ int sq(int x) { return x * x + 1; }
extern "C" __global__ void k(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = sq(in[i]) + warpSize;
}
"""


def _spec(xs: list[int]) -> dict:
    return {
        "kernel": "k",
        "grid": 1,
        "block": len(xs),
        "args": [
            {"name": "in", "type": "i32*", "data": xs},
            {"name": "out", "type": "i32*", "size": len(xs)},
            {"name": "n", "type": "i32", "value": len(xs)},
        ],
        "outputs": ["out"],
    }


@pytest.mark.parametrize(
    "options",
    [("--generate-line-info",), ("-lineinfo",), ("-G",), (), ("--use_fast_math", "-lineinfo")],
)
def test_device_function_and_warpsize(compile_run, options):
    xs = [1, -2, 3, 40000, -7]
    out = compile_run(SQ, _spec(xs), options=options)["out"]
    want = [((x * x + 1 + 32 + 2**31) % 2**32) - 2**31 for x in xs]
    assert out.tolist() == want


def test_inlined_instruction_keeps_the_device_function_line():
    ptx = compile_cuda(SQ, filename="sq.cu", options=("--generate-line-info",))
    assert "inlined_at" in ptx and ".section" in ptx and "WARP_SZ" in ptx  # the constructs under test
    m = parse_ptx(ptx)
    body = m.kernels["k"].body
    mad = next(i for i in body if i.op == "mad" and i.loc is not None and i.loc.inlined_at is not None)
    assert (mad.loc.file, mad.loc.line, mad.loc.function) == ("sq.cu", 1, "sq")
    assert (mad.loc.inlined_at.file, mad.loc.inlined_at.line) == ("sq.cu", 4)
    assert str(mad.loc) == "sq.cu:1 (in sq, inlined at sq.cu:4)"
    assert Imm(32) in next(i for i in body if "WARP_SZ" in i.text).operands


def test_warp_sz_is_an_immediate():
    assert parse_operand("WARP_SZ") == Imm(32)


def test_debug_build_sections_and_target():
    ptx = compile_cuda(SQ, filename="sq.cu", options=("-G",))
    assert ".section\t.debug_info" in ptx and ", debug" in ptx
    m = parse_ptx(ptx)
    assert m.target == "sm_75"
    assert "_Z2sqi" in m.functions and not m.functions["_Z2sqi"].is_entry


HAND = r""".version 8.0
.target sm_75, debug
.address_size 64
@@DWARF .section .debug_abbrev, "", @progbits
@@DWARF .byte 1
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .loc 1 3 0
$L__func_begin0:
    ld.param.u64 %rd1, [k_param_0];
    .loc 1 1 16, function_name $L__info_string0, inlined_at 1 4 3
    mov.u32 %r1, WARP_SZ;
    .loc 1 5 1
    st.global.u32 [%rd1], %r1;
    ret;
$L__func_end0:
}
    .file 1 "/nonexistent/dir/hand.cu", 1700000000, 321
    .section .debug_str
    {
$L__info_string0:
.b8 95,90,52,104,101,108,112,105,0
    }
    .section .debug_info
    {
.b32 125
.b8 2
.b64 $L__func_begin0
.b64 $L__func_end0
.b8 "s",0
    }
    .section .debug_loc { }
"""


def test_hand_written_debug_constructs():
    m = parse_ptx(HAND)
    body = m.kernels["k"].body
    assert m.target == "sm_75" and [i.op for i in body] == ["ld", "mov", "st", "ret"]
    assert str(body[1].loc) == "/nonexistent/dir/hand.cu:1 (in help, inlined at /nonexistent/dir/hand.cu:4)"
    assert body[1].operands[1] == Imm(32)


def _err(ptx: str) -> str:
    with pytest.raises(PTXError) as ei:
        parse_ptx(ptx, source_name="x.cu (PTX)")
    return str(ei.value)


def test_parse_errors_name_the_construct_and_the_cuda_line():
    bad = HAND.replace("mov.u32 %r1, WARP_SZ;", "mov.u32 %r1, 12abc!;")
    msg = _err(bad)
    assert "PTX line 14" in msg and "hand.cu:1 (in help, inlined at" in msg and "12abc!" in msg
    msg = _err(HAND.replace("    .reg .b32 %r<4>;", "    .surfref foo;"))
    assert "unsupported directive .surfref" in msg and "PTX line 8" in msg
    msg = _err(".version 8.0\n.target sm_75\n.address_size 64\n.global .u32 g;\n{\n}\n")
    assert "PTX line 5" in msg and "unexpected '{' at module level after `.global .u32 g`" in msg
    msg = _err(".version 8.0\n.target sm_75\n.address_size 64\n.bogus 1;\n")
    assert "PTX line 4" in msg and "`.bogus 1`" in msg


def test_ptx_cache_keys_on_the_file_name(tmp_path, monkeypatch):
    """The PTX names its CUDA file (``.file``, absolute): a cached compile of the same source under
    another name, or under the same relative name from another folder, must not hand back the
    other name."""
    a = compile_cuda(SQ, filename="first.cu", options=("-lineinfo",))
    b = compile_cuda(SQ, filename="second.cu", options=("-lineinfo",))
    assert "first.cu" in a and "second.cu" in b and "first.cu" not in b
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    monkeypatch.chdir(tmp_path / "x")
    in_x = compile_cuda(SQ, filename="same.cu", options=("-lineinfo",))
    monkeypatch.chdir(tmp_path / "y")
    in_y = compile_cuda(SQ, filename="same.cu", options=("-lineinfo",))
    assert f'"{tmp_path / "x" / "same.cu"}"' in in_x and f'"{tmp_path / "y" / "same.cu"}"' in in_y
