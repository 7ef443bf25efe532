"""The reference interpreter beyond the corpus: fresh kernels with independent expected values,
and every fault a kernel can cause, each with its message."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from qwengpu.errors import ExecutionError, LaunchSpecError, PTXError


def _f32(x: Fraction) -> np.float32:
    """Exact RN rounding of a rational to float32 (normal range suffices here)."""
    if x == 0:
        return np.float32(0.0)
    s = -1 if x < 0 else 1
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    q = x * Fraction(2) ** (23 - e)
    n = q.numerator // q.denominator
    r = q - n
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and n & 1):
        n += 1
    return np.float32(s * n * 2.0 ** (e - 23))


def test_fma_saxpy_random(run_cuda):
    rng = np.random.default_rng(7)
    n = 64
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    y = (rng.standard_normal(n) * 3).astype(np.float32)
    a = np.float32(1.7)
    src = (
        'extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = a * x[i] + y[i];\n}\n"
    )
    spec = {
        "kernel": "saxpy",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "a", "type": "f32", "value": f"0x{a.view(np.uint32):08x}"},
            {"name": "x", "type": "f32*", "data": [f"0x{v:08x}" for v in x.view(np.uint32)]},
            {"name": "y", "type": "f32*", "data": [f"0x{v:08x}" for v in y.view(np.uint32)]},
            {"name": "n", "type": "i32", "value": n},
        ],
        "outputs": ["y"],
    }
    res = run_cuda(src, spec)
    want = np.array(
        [
            _f32(Fraction(float(a)) * Fraction(float(xi)) + Fraction(float(yi)))
            for xi, yi in zip(x, y, strict=True)
        ],
        dtype=np.float32,
    )
    assert np.array_equal(res.outputs["y"].view(np.uint32), want.view(np.uint32))


def test_integer_mix_random(run_cuda):
    rng = np.random.default_rng(3)
    a = rng.integers(-(2**31), 2**31, 64, dtype=np.int64).astype(np.int32)
    b = rng.integers(1, 2**31, 64, dtype=np.int64).astype(np.int32)
    b[::3] *= -1
    a[0], a[1], b[1] = -(2**31), -(2**31), -1
    src = r"""extern "C" __global__ void mix(const int* a, const int* b, int* q, int* r,
                                             unsigned* s, int* h) {
      int i = threadIdx.x + blockDim.x * blockIdx.x;
      q[i] = a[i] / b[i]; r[i] = a[i] % b[i];
      s[i] = ((unsigned)a[i] >> (b[i] & 31)) ^ ((unsigned)a[i] << 3);
      h[i] = __mulhi(a[i], b[i]);
    }"""
    n = 64
    spec = {
        "kernel": "mix",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "a", "type": "i32*", "data": a.tolist()},
            {"name": "b", "type": "i32*", "data": b.tolist()},
            {"name": "q", "type": "i32*", "size": n},
            {"name": "r", "type": "i32*", "size": n},
            {"name": "s", "type": "u32*", "size": n},
            {"name": "h", "type": "i32*", "size": n},
        ],
    }
    res = run_cuda(src, spec)

    def wrap(v):
        return ((v + 2**31) % 2**32) - 2**31

    al, bl = a.tolist(), b.tolist()
    q = [wrap((abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)) for x, y in zip(al, bl, strict=True)]
    r = [
        wrap(x - ((abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1)) * y)
        for x, y in zip(al, bl, strict=True)
    ]
    s = [(((x % 2**32) >> (y & 31)) ^ ((x % 2**32) << 3)) % 2**32 for x, y in zip(al, bl, strict=True)]
    h = [wrap((x * y) >> 32) for x, y in zip(al, bl, strict=True)]
    assert res.outputs["q"].tolist() == q
    assert res.outputs["r"].tolist() == r
    assert res.outputs["s"].tolist() == s
    assert res.outputs["h"].tolist() == h


def test_divergent_loops_and_multiwarp_barrier(run_cuda):
    src = r"""extern "C" __global__ void k(const int* n, int* out) {
      __shared__ int acc[64];
      int t = threadIdx.x, s = 0;
      for (int i = 0; i < n[t]; i++) { if (i & 1) continue; s += i; if (s > 50) break; }
      acc[t] = s;
      __syncthreads();
      out[t] = acc[63 - t] + (t < 32 ? 1000 : 2000);
    }"""
    rng = np.random.default_rng(1)
    n = rng.integers(0, 40, 64).tolist()

    def f(m):
        s = 0
        for i in range(m):
            if i & 1:
                continue
            s += i
            if s > 50:
                break
        return s

    spec = {
        "kernel": "k",
        "grid": 1,
        "block": 64,
        "args": [{"name": "n", "type": "i32*", "data": n}, {"name": "out", "type": "i32*", "size": 64}],
    }
    res = run_cuda(src, spec)
    assert res.outputs["out"].tolist() == [f(n[63 - t]) + (1000 if t < 32 else 2000) for t in range(64)]
    assert res.stats["barriers"] >= 1 and res.stats["divergent_branches"] >= 1


def test_out_of_bounds_names_thread_instruction_address(run_cuda):
    src = 'extern "C" __global__ void oob(int* p) { p[threadIdx.x + 4] = 1; }\n'
    spec = {"kernel": "oob", "grid": 1, "block": 8, "args": [{"name": "p", "type": "i32*", "size": 8}]}
    with pytest.raises(ExecutionError) as ei:
        run_cuda(src, spec)
    msg = str(ei.value)
    assert "out-of-bounds global store of 4 bytes" in msg
    assert "thread (4, 0, 0) of block (0, 0, 0)" in msg
    assert "st.global.u32" in msg and "PTX line" in msg and "oob.cu:1" in msg
    assert "past the end of buffer 'p'" in msg


def test_shared_out_of_bounds(run_cuda):
    src = 'extern "C" __global__ void s(int* p) { __shared__ int a[4]; a[threadIdx.x] = 1; p[0] = a[0]; }\n'
    spec = {"kernel": "s", "grid": 1, "block": 8, "args": [{"name": "p", "type": "i32*", "size": 1}]}
    with pytest.raises(ExecutionError, match="out-of-bounds shared store"):
        run_cuda(src, spec)


def test_division_by_zero_reported(run_cuda):
    src = 'extern "C" __global__ void d(int* p, int z) { p[threadIdx.x] = 7 / (z - (int)threadIdx.x); }\n'
    spec = {
        "kernel": "d",
        "grid": 1,
        "block": 4,
        "args": [{"name": "p", "type": "i32*", "size": 4}, {"name": "z", "type": "i32", "value": 2}],
    }
    with pytest.raises(ExecutionError, match=r"division by zero[\s\S]*thread \(2, 0, 0\)"):
        run_cuda(src, spec)


def test_step_limit_stops_runaway(run_cuda):
    src = 'extern "C" __global__ void spin(volatile int* p) { while (p[0] == 0) { } }\n'
    spec = {"kernel": "spin", "grid": 1, "block": 1, "args": [{"name": "p", "type": "i32*", "size": 1}]}
    with pytest.raises(ExecutionError, match="step limit reached: 1000 warp instructions"):
        run_cuda(src, spec, max_steps=1000)


def test_unsupported_instruction_named_with_line(tmp_path):
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.simt.interp import Interpreter

    ptx = (
        ".version 9.5\n.target sm_75\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
        "\t.reg .b32 %r<3>;\n\tvabsdiff4.u32.u32.u32.add %r1, %r2, %r2, %r2;\n\tret;\n}\n"
    )
    with pytest.raises(PTXError, match=r"PTX line 7: unsupported PTX instruction `vabsdiff4\.u32\.u32\.u32"):
        Interpreter(parse_ptx(ptx), "k")


def test_spec_mismatches_rejected(run_cuda):
    src = (
        'extern "C" __global__ void f(float* out, int n) { if (threadIdx.x < n) out[threadIdx.x] = 1.0f; }\n'
    )
    base = {"kernel": "f", "grid": 1, "block": 4}
    cases = [
        ([{"name": "out", "type": "f32*", "size": 4}], "takes 2 parameter"),
        ([{"name": "out", "type": "f32*", "size": 4}, {"name": "m", "type": "i32", "value": 1}], "named 'n'"),
        (
            [{"name": "out", "type": "i32*", "size": 4}, {"name": "n", "type": "i32", "value": 1}],
            "C type f32",
        ),
        (
            [{"name": "out", "type": "f32", "value": 1}, {"name": "n", "type": "i32", "value": 1}],
            "is a pointer",
        ),
        ([{"name": "out", "type": "f32*"}, {"name": "n", "type": "i32", "value": 1}], 'needs "data"'),
        (
            [{"name": "out", "type": "f32*", "size": 4}, {"name": "n", "type": "i32", "value": 2**40}],
            "out of range",
        ),
        (
            [{"name": "out", "type": "q32*", "size": 4}, {"name": "n", "type": "i32", "value": 1}],
            "unknown type",
        ),
    ]
    for args, msg in cases:
        with pytest.raises(LaunchSpecError, match=msg):
            run_cuda(src, {**base, "args": args})
    with pytest.raises(LaunchSpecError, match="unknown output 'nope'"):
        run_cuda(
            src,
            {
                **base,
                "args": cases[1][0][:1] + [{"name": "n", "type": "i32", "value": 1}],
                "outputs": ["nope"],
            },
        )
    with pytest.raises(PTXError, match="no kernel named 'g'"):
        run_cuda(src, {**base, "kernel": "g", "args": []})


def test_float_specials_and_json_roundtrip(run_cuda):
    src = r"""extern "C" __global__ void sp(const float* a, float* o) {
      int i = threadIdx.x; o[i] = a[i] * 2.0f - a[i];
    }"""
    vals = ["inf", "-inf", "nan", -0.0, 1e-45, 3.4028234663852886e38, 0.1, "0x7fc00001"]
    spec = {
        "kernel": "sp",
        "grid": 1,
        "block": 8,
        "args": [{"name": "a", "type": "f32*", "data": vals}, {"name": "o", "type": "f32*", "size": 8}],
    }
    res = run_cuda(src, spec)
    bits = res.outputs["o"].view(np.uint32).tolist()
    assert bits[0] == 0x7FFFFFFF  # inf*2 - inf = NaN, canonical
    assert bits[2] == 0x7FFFFFFF and bits[7] == 0x7FFFFFFF  # NaN in -> canonical NaN out
    assert bits[3] == 0x00000000  # -0*2 - -0 = +0
    assert bits[5] == 0x7F800000  # add.f32 FLT_MAX+FLT_MAX = inf, then inf - FLT_MAX = inf
    out = res.as_json()["outputs"]["o"]
    from qwengpu.spec import parse_value

    for v, b in zip(out, bits, strict=False):
        assert parse_value(v if not isinstance(v, float) else repr(v), "f32", "x") == b


def test_mul24_mad24_handwritten_ptx():
    """PTX mul24/mad24 (NVRTC never emits them): low 24 bits of each operand, sign-extended for .s32."""
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.simt.interp import Interpreter
    from qwengpu.simt.memory import GlobalMemory

    ptx = """.version 9.5
.target sm_75
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 a, .param .u32 b)
{
    .reg .b32 %r<10>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [a];
    ld.param.u32 %r2, [b];
    mul24.lo.s32 %r3, %r1, %r2;
    mul24.hi.s32 %r4, %r1, %r2;
    mul24.lo.u32 %r5, %r1, %r2;
    mul24.hi.u32 %r6, %r1, %r2;
    mad24.lo.s32 %r7, %r1, %r2, 5;
    mad24.hi.u32 %r8, %r1, %r2, 7;
    st.global.v4.u32 [%rd1], {%r3, %r4, %r5, %r6};
    st.global.v2.u32 [%rd1+16], {%r7, %r8};
    ret;
}
"""

    def s24(x: int) -> int:
        x &= 0xFFFFFF
        return x - (1 << 24) if x >> 23 else x

    for a, b in [(0x00FFFFFF, 0x00800001), (0x12345678, 0xFEDCBA98), (-3 & 0xFFFFFFFF, 0x7FFFFF), (5, 7)]:
        interp = Interpreter(parse_ptx(ptx), "k")
        gmem = GlobalMemory()
        base = gmem.alloc("out", bytes(24))
        gmem.finalize()
        params = base.to_bytes(8, "little") + a.to_bytes(4, "little") + b.to_bytes(4, "little")
        interp.launch((1, 1, 1), (1, 1, 1), params, gmem)
        got = np.frombuffer(gmem.read("out"), dtype=np.uint32).tolist()
        ps, pu = s24(a) * s24(b), (a & 0xFFFFFF) * (b & 0xFFFFFF)
        want = [
            ps & 0xFFFFFFFF,
            (ps >> 16) & 0xFFFFFFFF,
            pu & 0xFFFFFFFF,
            (pu >> 16) & 0xFFFFFFFF,
            (ps + 5) & 0xFFFFFFFF,
            ((pu >> 16) + 7) & 0xFFFFFFFF,
        ]
        assert got == want, (hex(a), hex(b))


# ------------------------------------------------------------------------------------------------
# f64 rounding modifiers: add/sub/mul/fma/div/sqrt/rcp.{rn,rz,rm,rp}.f64 and cvt.{rni,rzi,rmi,rpi}
# .f64.f64 through the interpreter, against tests/fp_reference.py (exact rationals, no shared code)
# ------------------------------------------------------------------------------------------------

import functools  # noqa: E402

import fp_reference as ref  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

F64_LANES = 16
_F64_EDGES = [
    0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x8000000000000001,
    0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x001FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF,
    0x7FF0000000000000, 0xFFF0000000000000, 0x7FF8000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
    0x3FF0000000000001, 0x3FEFFFFFFFFFFFFF, 0x3CA0000000000000, 0x4008000000000000, 0x3FE0000000000000,
    0xBFE0000000000000, 0x3FF8000000000000, 0xC004000000000000, 0x4330000000000000, 0x4330000000000001,
    0x432FFFFFFFFFFFFF, 0xC330000000000001,
]  # fmt: skip
_bits64 = st.one_of(
    st.sampled_from(_F64_EDGES),
    st.integers(0, (1 << 64) - 1),
    st.builds(  # exponents near each other, near 1, near the subnormal and overflow edges
        lambda s, e, m: (s << 63) | (e << 52) | m,
        st.integers(0, 1),
        st.one_of(st.integers(0, 60), st.integers(1000, 1080), st.integers(1990, 2047)),
        st.one_of(st.integers(0, (1 << 52) - 1), st.sampled_from([0, 1, (1 << 52) - 1, 1 << 51])),
    ),
)
_F64_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_F64_PTX = """.version 8.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<16>;
    .reg .f64 %fd<5>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pc];
    ld.param.u64 %rd4, [pd];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd5, %r1, 8;
    add.s64 %rd6, %rd1, %rd5;
    add.s64 %rd7, %rd2, %rd5;
    add.s64 %rd8, %rd3, %rd5;
    add.s64 %rd9, %rd4, %rd5;
    ld.global.f64 %fd1, [%rd6];
    ld.global.f64 %fd2, [%rd7];
    ld.global.f64 %fd3, [%rd8];
    {op};
    st.global.f64 [%rd9], %fd4;
    ret;
}}
"""

_F64_ONE = 0x3FF0000000000000


def _ref_round_integral64(a: int, rnd: str) -> int:
    v = ref.decode(a, ref.F64)
    if v.kind == "nan":
        return ref.nan(ref.F64)
    if v.kind == "inf":
        return a
    return ref.round_q(Fraction(ref.round_integral(v.q, rnd)), "rn", ref.F64, v.neg)  # -0 kept


F64_OPS = {  # name -> (PTX instruction with {r}, reference(a, b, c, rnd))
    "add": ("add.{r}.f64 %fd4, %fd1, %fd2", lambda a, b, c, r: ref.add(a, b, r, fmt=ref.F64)),
    "sub": ("sub.{r}.f64 %fd4, %fd1, %fd2", lambda a, b, c, r: ref.sub(a, b, r, fmt=ref.F64)),
    "mul": ("mul.{r}.f64 %fd4, %fd1, %fd2", lambda a, b, c, r: ref.mul(a, b, r, fmt=ref.F64)),
    "fma": ("fma.{r}.f64 %fd4, %fd1, %fd2, %fd3", lambda a, b, c, r: ref.fma(a, b, c, r, fmt=ref.F64)),
    "div": ("div.{r}.f64 %fd4, %fd1, %fd2", lambda a, b, c, r: ref.div(a, b, r, fmt=ref.F64)),
    "sqrt": ("sqrt.{r}.f64 %fd4, %fd1", lambda a, b, c, r: ref.sqrt(a, r, fmt=ref.F64)),
    "rcp": ("rcp.{r}.f64 %fd4, %fd1", lambda a, b, c, r: ref.div(_F64_ONE, a, r, fmt=ref.F64)),
    "cvt_int": ("cvt.{r}i.f64.f64 %fd4, %fd1", lambda a, b, c, r: _ref_round_integral64(a, r)),
}


@functools.cache
def _f64_module(name: str, rnd: str):
    from qwengpu.ptx.parser import parse_ptx

    return parse_ptx(_F64_PTX.format(op=F64_OPS[name][0].format(r=rnd)), source_name=f"{name}.{rnd}.ptx")


def _run_f64(name: str, rnd: str, xs: list[tuple[int, int, int]]) -> list[int]:
    from qwengpu.simt.interp import Interpreter
    from qwengpu.spec import bind, parse_spec, read_outputs

    xs = (xs * F64_LANES)[:F64_LANES]
    cols = [[f"0x{x[i]:016x}" for x in xs] for i in range(3)]
    spec = parse_spec({
        "kernel": "k", "grid": 1, "block": F64_LANES,
        "args": [{"name": n, "type": "u64*", "data": c} for n, c in zip("abc", cols, strict=True)]
        + [{"name": "d", "type": "u64*", "size": F64_LANES}],
        "outputs": ["d"],
    })  # fmt: skip
    module = _f64_module(name, rnd)
    it = Interpreter(module, "k")
    b = bind(spec, it.fn)
    it.launch(spec.grid, spec.block, b.param_bytes, b.gmem)
    return [int(v) for v in read_outputs(spec, b.gmem)["d"]]


def _check_f64(name: str, rnd: str, xs: list[tuple[int, int, int]]) -> None:
    xs = (xs * F64_LANES)[:F64_LANES]
    got = _run_f64(name, rnd, xs)
    want = [F64_OPS[name][1](a, b, c, rnd) for a, b, c in xs]
    bad = [(tuple(map(hex, x)), hex(g), hex(w)) for x, g, w in zip(xs, got, want, strict=True) if g != w]
    assert not bad, f"{name}.{rnd}.f64: (inputs, interpreter, exact) {bad[:4]}"


@pytest.mark.parametrize("rnd", ["rn", "rz", *(pytest.param(r, marks=pytest.mark.slow)
                                               for r in ("rm", "rp"))])  # rm, rp: 6 s
@pytest.mark.parametrize("name", list(F64_OPS))
@_F64_SETTINGS
@given(xs=st.lists(st.tuples(_bits64, _bits64, _bits64), min_size=1, max_size=F64_LANES))
def test_f64_rounding_modes_are_exact(name: str, rnd: str, xs: list[tuple[int, int, int]]) -> None:
    _check_f64(name, rnd, xs)


def _b(x: float) -> int:
    return int(np.float64(x).view(np.uint64))


MAXF, MINSUB = 0x7FEFFFFFFFFFFFFF, 0x0000000000000001


@pytest.mark.parametrize(
    "name, rnd, a, b, c, want",
    [
        # 1/3 is 0x3FD5555555555555.5...: rz and rm truncate, rp rounds up, rn rounds down
        ("div", "rz", _b(1.0), _b(3.0), 0, 0x3FD5555555555555),
        ("div", "rp", _b(1.0), _b(3.0), 0, 0x3FD5555555555556),
        ("div", "rm", _b(-1.0), _b(3.0), 0, 0xBFD5555555555556),
        ("rcp", "rp", _b(3.0), 0, 0, 0x3FD5555555555556),
        # x - x is +0 in every mode but rm, where it is -0; -0 + -0 stays -0
        ("sub", "rm", _b(1.5), _b(1.5), 0, 0x8000000000000000),
        ("sub", "rp", _b(1.5), _b(1.5), 0, 0),
        ("add", "rn", 0x8000000000000000, 0x8000000000000000, 0, 0x8000000000000000),
        ("fma", "rm", _b(2.0), _b(3.0), _b(-6.0), 0x8000000000000000),
        # overflow: inf in rn and toward it, max-finite toward zero
        ("mul", "rz", MAXF, _b(2.0), 0, MAXF),
        ("mul", "rm", MAXF, _b(2.0), 0, MAXF),
        ("mul", "rp", MAXF, _b(2.0), 0, 0x7FF0000000000000),
        ("add", "rm", 0xFFEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0, 0xFFF0000000000000),
        ("add", "rp", 0xFFEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0, 0xFFEFFFFFFFFFFFFF),
        # subnormals: 2^-1074 / 2 is a tie (rn: to even, 0), rp: 2^-1074, rm(-): -2^-1074
        ("mul", "rn", MINSUB, _b(0.5), 0, 0),
        ("mul", "rp", MINSUB, _b(0.5), 0, MINSUB),
        ("mul", "rm", MINSUB | 1 << 63, _b(0.5), 0, 0x8000000000000001),
        ("mul", "rz", MINSUB | 1 << 63, _b(0.5), 0, 0x8000000000000000),
        # fma rounds once: (1 + 2^-52)(1 - 2^-52) - 1 = -2^-104 exactly
        ("fma", "rz", 0x3FF0000000000001, 0x3FEFFFFFFFFFFFFE, _b(-1.0), _b(-(2.0**-104))),
        ("sqrt", "rz", _b(2.0), 0, 0, 0x3FF6A09E667F3BCC),
        ("sqrt", "rp", _b(2.0), 0, 0, 0x3FF6A09E667F3BCD),
        ("sqrt", "rm", 0x8000000000000000, 0, 0, 0x8000000000000000),
        # round to integral: floor / ceil / trunc / rint, -0 kept, halves to even
        ("cvt_int", "rm", _b(-2.5), 0, 0, _b(-3.0)),
        ("cvt_int", "rp", _b(-0.5), 0, 0, 0x8000000000000000),
        ("cvt_int", "rz", _b(-0.75), 0, 0, 0x8000000000000000),
        ("cvt_int", "rn", _b(2.5), 0, 0, _b(2.0)),
        ("cvt_int", "rn", _b(-3.5), 0, 0, _b(-4.0)),
        ("cvt_int", "rp", _b(1e300), 0, 0, _b(1e300)),
        ("cvt_int", "rm", 0xFFF0000000000000, 0, 0, 0xFFF0000000000000),
    ],
)
def test_f64_rounding_edge_cases(name: str, rnd: str, a: int, b: int, c: int, want: int) -> None:
    """Expected values worked out by hand from the exact result (see the comments)."""
    assert _run_f64(name, rnd, [(a, b, c)])[0] == want
    assert F64_OPS[name][1](a, b, c, rnd) == want  # and the exact reference agrees


def test_f32_round_to_integral_keeps_negative_zero() -> None:
    """``cvt.rXi.f32.f32`` (floorf and friends): -0 kept, halves to even, infinities pass."""
    from qwengpu.simt import fp32

    def f(x: float) -> int:
        return int(np.float32(x).view(np.uint32))

    cases = [("rmi", -2.5, -3.0), ("rpi", -0.5, -0.0), ("rni", 2.5, 2.0), ("rzi", -0.75, -0.0),
             ("rpi", float("inf"), float("inf"))]  # fmt: skip
    for rnd, x, want in cases:
        assert int(fp32.round_f32(np.array([f(x)], dtype=np.uint32), rnd)[0]) == f(want), (rnd, x)


def test_dbl_kernel_floor_of_a_double() -> None:
    """tests/machine_weights/kernels/dbl.cu on the interpreter: ``floor(double)`` is
    ``cvt.rmi.f64.f64`` (it used to be a plain move: iout[1] came out -2513 instead of -2520).
    Expected values from Python's IEEE doubles and int arithmetic wrapped to 32 bits."""
    import math
    from pathlib import Path

    from qwengpu.runner import run_kernel

    def s32(n: int) -> int:
        return (n + 2**31) % 2**32 - 2**31

    def to_int(v: float) -> int:  # cvt.rzi.s32.f64 saturates
        return max(-(2**31), min(2**31 - 1, math.trunc(v)))

    xs, ys = [1.5, -3.25, 9.99994610111476e-41, 70000001024.0], [0.1, -2.5, 1e300, 0.25]
    x32 = np.array(xs, dtype=np.float32).astype(np.float64)
    want_out = np.array([float(a) * 0.5 + 1.25 for a in x32], dtype=np.float32)
    want_dout = [math.sqrt(abs(v)) + v / (v + 3.0) - min(v, 2.0) * max(v, -1.0) for v in ys]
    want_iout = [s32(to_int(v * 1000.0) + (v < 0.25) + s32(to_int(math.floor(v)) * 7)) for v in ys]
    assert want_iout == [101, -2520, -8, 250]
    cu = Path(__file__).parent / "machine_weights" / "kernels" / "dbl.cu"
    r = run_kernel(cu, engine="interp")
    assert r.outputs["out"].tobytes() == want_out.tobytes()
    assert r.outputs["dout"].tobytes() == np.array(want_dout, dtype=np.float64).tobytes()
    assert r.outputs["iout"].tolist() == want_iout


def test_global_layout_is_compact_and_guarded():
    """Buffers start 16-byte aligned (what v4 accesses need) with 16 to 31 bytes between them (and 16
    before the first): an access up to 4 words past a buffer's end or before its start lands in no
    buffer and faults (version 1 aligned to 256 bytes with a 256-byte guard: a 128-word slot per
    small buffer in the machine's 1,024-word memory)."""
    from qwengpu.simt.memory import GLOBAL_BASE, GlobalMemory

    gmem = GlobalMemory()
    a = gmem.alloc("a", bytes(12))
    b = gmem.alloc("b", bytes(3))
    c = gmem.alloc("c", bytes(40))
    gmem.finalize()
    assert [x - GLOBAL_BASE for x in (a, b, c)] == [16, 48, 80]
    starts = np.array([a, b, c], dtype=np.uint64)
    assert gmem.check(starts, 1).all() and gmem.check(np.array([c + 36], dtype=np.uint64), 4).all()
    for base, size in ((a, 12), (b, 3), (c, 40)):
        past = np.arange(base + size, base + size + 16, dtype=np.uint64)
        before = np.arange(base - 16, base, dtype=np.uint64)
        assert not gmem.check(past, 1).any() and not gmem.check(before, 1).any()
    assert not gmem.check(np.array([b], dtype=np.uint64), 4).any()  # 4 bytes of a 3-byte buffer
