"""Device functions that NVRTC does not inline (``__noinline__``, ``-G``): ``.param`` passing of
every width through block-scoped declarations; what cannot be flattened is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.cuda import compile_cuda
from qwengpu.errors import PTXError
from qwengpu.ptx.parser import parse_ptx
from qwengpu.simt.interp import Interpreter

from .conftest import run_ptx

CALLS = r"""
__device__ __noinline__ long long widen(int x) { return (long long)x * 3000000000LL; }
__device__ __noinline__ int narrow(long long v) { return (int)(v >> 20); }
__device__ __noinline__ float half(float f, double d) { return f * 0.5f + (float)d; }
__device__ __noinline__ void store(int* p, int v) { *p = v; }
extern "C" __global__ void calls(const int* in, int* out, float* fout) {
  int i = threadIdx.x;
  int a = narrow(widen(in[i]));
  int b = narrow(widen(in[i] + 1));
  store(out + i, a - b);
  fout[i] = half((float)in[i], 0.25);
}
"""


@pytest.mark.parametrize("options", [("-lineinfo",), ("-G",), ()])
def test_noinline_calls_pass_params_of_every_width(compile_run, options):
    xs = [0, 1, -1, 7, 123456, -99999, 2**31 - 2, -(2**31)]
    spec = {
        "kernel": "calls",
        "grid": 1,
        "block": len(xs),
        "args": [
            {"name": "in", "type": "i32*", "data": xs},
            {"name": "out", "type": "i32*", "size": len(xs)},
            {"name": "fout", "type": "f32*", "size": len(xs)},
        ],
    }
    if options == ("-G",):  # the case that broke: param0 declared .b32, then .b64, in sibling blocks
        ptx = compile_cuda(CALLS, filename="calls.cu", options=options)
        assert ".param .b32 param0;" in ptx and ".param .b64 param0;" in ptx
    got = compile_run(CALLS, spec, options=options)

    def narrow(v: int) -> int:
        return (((v >> 20) + 2**31) % 2**32) - 2**31

    def wrap32(v: int) -> int:
        return ((v + 2**31) % 2**32) - 2**31

    x1 = [wrap32(x + 1) for x in xs]
    want = [wrap32(narrow(x * 3000000000) - narrow(y * 3000000000)) for x, y in zip(xs, x1, strict=True)]
    assert got["out"].tolist() == want
    # f * 0.5 is exact for these values: one rounding of the sum, as float32 arithmetic gives it
    wf = np.array([np.float32(x) * np.float32(0.5) + np.float32(0.25) for x in xs], dtype=np.float32)
    assert got["fout"].view(np.uint32).tolist() == wf.view(np.uint32).tolist()


REFUSED = r"""__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
typedef int (*fn_t)(int);
__device__ fn_t table[1];
extern "C" __global__ void rec(int* out) { out[threadIdx.x] = fib(threadIdx.x); }
extern "C" __global__ void fptr(int* out, int k) { out[threadIdx.x] = table[k](threadIdx.x); }
extern "C" __global__ void ext(int* out) { out[threadIdx.x] = (int)(long long)malloc(16); }
"""


@pytest.mark.parametrize("options", [("-lineinfo",), ("-G",)])
@pytest.mark.parametrize(
    "kernel, message",
    [
        ("rec", r"PTX line \d+, calls\.cu:1: recursive call of fib \(rec -> fib -> fib\) is not supported"),
        ("fptr", r"PTX line \d+, calls\.cu:5: indirect call through a function pointer .* is not supported"),
        (
            "ext",
            r"PTX line \d+, calls\.cu:6: call of external function malloc \(device malloc\) is not supported",
        ),
    ],
)
def test_what_cannot_be_inlined_is_refused_by_name(options, kernel, message):
    m = parse_ptx(compile_cuda(REFUSED, filename="calls.cu", options=options))
    with pytest.raises(PTXError, match=message):
        Interpreter(m, kernel)


def test_function_pointer_initializer_is_refused():
    src = "__device__ int twice(int x) { return 2 * x; }\n__device__ int (*table[1])(int) = {twice};\n"
    src += 'extern "C" __global__ void k(int* o) { o[0] = table[0](o[0]); }\n'
    with pytest.raises(PTXError, match=r"initializer holding the address of '_Z5twicei'"):
        parse_ptx(compile_cuda(src, filename="t.cu", options=("-lineinfo",)))


PREDICATED = r""".version 8.0
.target sm_75
.address_size 64
.func (.param .b32 func_retval0) inc(.param .b32 inc_param_0)
{
    .reg .b32 %r<3>;
    ld.param.u32 %r1, [inc_param_0];
    add.s32 %r2, %r1, 1;
    st.param.b32 [func_retval0+0], %r2;
    ret;
}
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 100;
    setp.lt.u32 %p1, %r1, 2;
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    @%p1 call.uni (retval0), inc, (param0);
    @%p1 ld.param.b32 %r2, [retval0+0];
    }
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""


def test_predicated_call():
    spec = {"kernel": "k", "grid": 1, "block": 4, "args": [{"name": "out", "type": "u32*", "size": 4}]}
    assert run_ptx(PREDICATED, spec)["out"].tolist() == [1, 2, 100, 100]


PRINTF = r"""extern "C" __global__ void pf(int* out, const char* s) {
  int r = printf("t=%d u=%u x=%08x f=%.3f e=%e c=%c s=%s ll=%lld w=%*d %5.1f%% %s\n", threadIdx.x,
                 4000000000u, 0xbeef, 1.5f, -2.25, 'A' + threadIdx.x, "lit", -(1LL << 40), 4, 7, 3.14159, s);
  out[threadIdx.x] = r;
  if (threadIdx.x == 1) printf("plain\n");
}
"""


@pytest.mark.parametrize("options", [("-lineinfo",), ("-G",)])
def test_printf_in_lane_order(options):
    from qwengpu.spec import bind, parse_spec

    m = parse_ptx(compile_cuda(PRINTF, filename="pf.cu", options=options))
    lines: list[str] = []
    it = Interpreter(m, "pf", printf=lines.append)
    args = [{"name": "out", "type": "i32*", "size": 3}, {"name": "s", "type": "u8*", "data": [104, 105, 0]}]
    spec = parse_spec({"kernel": "pf", "grid": 1, "block": 3, "args": args})
    b = bind(spec, it.fn)
    it.launch(spec.grid, spec.block, b.param_bytes, b.gmem)
    want = [
        f"t={t} u=4000000000 x=0000beef f=1.500 e=-2.250000e+00 c={'ABC'[t]} s=lit ll=-1099511627776 w=   7"
        "   3.1% hi\n"
        for t in range(3)
    ]
    assert lines == [*want, "plain\n"]
    assert np.frombuffer(b.gmem.read("out"), dtype=np.int32).tolist() == [12, 12, 12]  # arguments parsed
