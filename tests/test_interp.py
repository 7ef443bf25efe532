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
