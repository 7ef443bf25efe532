"""Constructs of real CUDA code, each with expected values from the kernel's meaning in Python:
dense switches, inline PTX with its own scoped registers, vector loads, dynamically indexed local
arrays, templates, constant/global initializers, CAS loops and mixed-width atomics."""

from __future__ import annotations

import numpy as np
import pytest

OPTIONS = [("-lineinfo",), ("-G",), ("--use_fast_math", "-lineinfo"), ("-std=c++17", "-default-device")]


def _s32(x: int) -> int:
    return ((x + 2**31) % 2**32) - 2**31


def _spec(kernel: str, block: int, *args: tuple) -> dict:
    """``(name, type, data-list | size-int | scalar)`` per argument; floats go in as exact decimal text."""
    out = []
    for name, typ, val in args:
        if typ.endswith("*"):
            key = "size" if isinstance(val, int) else "data"
            val = val if key == "size" else [str(x) if isinstance(x, float) else x for x in val]
            out.append({"name": name, "type": typ, key: val})
        else:
            out.append({"name": name, "type": typ, "value": val})
    return {"kernel": kernel, "grid": 1, "block": block, "args": out}


SWITCH = r"""extern "C" __global__ void sw(const int* in, int* out) {
  int i = threadIdx.x; int v = in[i]; int r;
  switch (v & 7) { case 0: r = v * 3; break; case 1: r = v - 9; break; case 2: r = v ^ 0x55; break;
    case 3: r = v << 2; break; case 4: r = -v; break; case 5: r = v / 3; break; case 6: r = v % 5; break;
    default: r = 42; }
  out[i] = r;
}
"""


@pytest.mark.parametrize("options", OPTIONS)
def test_switch(compile_run, options):
    xs = [k * 5 - 17 for k in range(32)]
    spec = _spec("sw", 32, ("in", "i32*", xs), ("out", "i32*", 32))

    def f(v: int) -> int:
        c = v & 7
        q = abs(v) // 3 * (1 if v >= 0 else -1)  # C truncates
        rem = abs(v) % 5 * (1 if v >= 0 else -1)
        return [v * 3, v - 9, v ^ 0x55, _s32(v << 2), -v, q, rem, 42][c]

    assert compile_run(SWITCH, spec, options=options)["out"].tolist() == [f(v) for v in xs]


ASM = r"""extern "C" __global__ void ia(int* out) {
  unsigned lane; asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  unsigned r, q;
  asm("{\n\t.reg .pred p;\n\tsetp.eq.u32 p, %1, 3;\n\tselp.u32 %0, 7, 9, p;\n\t}" : "=r"(r) : "r"(lane));
  asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %1, 3;\n\tselp.u32 %0, 1, 2, p;\n\t}" : "=r"(q) : "r"(lane));
  out[threadIdx.x] = r * 10 + q;
}
"""


@pytest.mark.parametrize("options", OPTIONS[:2])
def test_inline_asm_with_scoped_bare_registers(compile_run, options):
    spec = {"kernel": "ia", "grid": 1, "block": 40, "args": [{"name": "out", "type": "i32*", "size": 40}]}
    want = [72 if k % 32 == 3 else 91 for k in range(40)]
    assert compile_run(ASM, spec, options=options)["out"].tolist() == want


LOCAL = r"""extern "C" __global__ void la(const int* in, int* out, int k) {
  int buf[32];
  for (int j = 0; j < 32; j++) buf[j] = in[(threadIdx.x + j) & 31] * j;
  out[threadIdx.x] = buf[(k + threadIdx.x) & 31] + buf[k & 31];
}
"""


@pytest.mark.parametrize("options", OPTIONS[:2])
def test_dynamically_indexed_local_array(compile_run, options):
    xs = [(7 * k) % 23 - 11 for k in range(32)]
    spec = _spec("la", 32, ("in", "i32*", xs), ("out", "i32*", 32), ("k", "i32", 37))
    want = []
    for t in range(32):
        buf = [xs[(t + j) & 31] * j for j in range(32)]
        want.append(buf[(37 + t) & 31] + buf[37 & 31])
    assert compile_run(LOCAL, spec, options=options)["out"].tolist() == want


VEC = r"""extern "C" __global__ void vl(const float4* __restrict__ in, float4* out, const int2* ii,
                                       double2* dd) {
  int i = threadIdx.x; float4 v = __ldg(&in[i]); int2 q = ii[i];
  out[i] = make_float4(v.w, v.z + (float)q.x, v.y, v.x + (float)q.y);
  dd[i] = make_double2(v.x, (double)q.x * 0.5);
}
"""


@pytest.mark.parametrize("options", OPTIONS[:2])
def test_vector_loads_and_stores(compile_run, options):
    n = 8
    f = [float(k) * 0.25 - 3 for k in range(4 * n)]
    q = [k * 3 - 7 for k in range(2 * n)]
    spec = _spec("vl", n, ("in", "f32*", f), ("out", "f32*", 4 * n), ("ii", "i32*", q), ("dd", "f64*", 2 * n))
    got = compile_run(VEC, spec, options=options)
    want_out, want_dd = [], []
    for i in range(n):
        x, y, z, w = f[4 * i : 4 * i + 4]
        want_out += [w, z + q[2 * i], y, x + q[2 * i + 1]]  # small quarter-integers: every sum is exact
        want_dd += [x, q[2 * i] * 0.5]
    assert got["out"].tolist() == want_out and got["dd"].tolist() == want_dd


TEMPLATE = r"""template <typename T, int BS> __global__ void red(const T* in, T* out) {
  __shared__ T s[BS]; int t = threadIdx.x; s[t] = in[t] + in[t + BS]; __syncthreads();
  for (int k = BS / 2; k > 32; k >>= 1) { if (t < k) s[t] += s[t + k]; __syncthreads(); }
  if (t < 32) { volatile T* v = s; v[t] += v[t + 32]; v[t] += v[t + 16]; v[t] += v[t + 8];
                v[t] += v[t + 4]; v[t] += v[t + 2]; v[t] += v[t + 1]; }
  if (t == 0) out[blockIdx.x] = s[0];
}
template __global__ void red<int, 64>(const int*, int*);
template __global__ void red<int, 128>(const int*, int*);
"""


@pytest.mark.parametrize("bs, mangled", [(64, "_Z3redIiLi64EEvPKT_PS0_"), (128, "_Z3redIiLi128EEvPKT_PS0_")])
def test_template_instances_by_mangled_name(compile_run, bs, mangled):
    xs = [(k * 97) % 1000 - 500 for k in range(2 * bs)]
    spec = _spec(mangled, bs, ("in", "i32*", xs), ("out", "i32*", 1))
    assert compile_run(TEMPLATE, spec)["out"].tolist() == [sum(xs)]


INIT = r"""__constant__ float cst[4] = {1.5f, 2.5f, -3.0f, 0.125f};
__device__ int gtab[3] = {7, 8, 9};
__device__ unsigned long long counter = 5;
extern "C" __global__ void __launch_bounds__(64, 2) cs(float* out) {
  out[threadIdx.x] = cst[threadIdx.x & 3] + gtab[threadIdx.x % 3] + (float)atomicAdd(&counter, 1ull) * 0.0f;
}
"""


def test_constant_and_global_initializers(compile_run):
    spec = {"kernel": "cs", "grid": 1, "block": 12, "args": [{"name": "out", "type": "f32*", "size": 12}]}
    cst, gtab = [1.5, 2.5, -3.0, 0.125], [7, 8, 9]
    assert compile_run(INIT, spec)["out"].tolist() == [cst[t & 3] + gtab[t % 3] for t in range(12)]


ATOMICS = r"""__device__ float atomicMaxF(float* a, float v) {
  int* ai = (int*)a; int old = *ai, as;
  do { as = old; old = atomicCAS(ai, as, __float_as_int(fmaxf(v, __int_as_float(as)))); } while (as != old);
  return __int_as_float(old);
}
extern "C" __global__ void a2(const float* in, float* mx, double* ds, unsigned long long* u) {
  __shared__ float sm;
  if (threadIdx.x == 0) sm = 0;
  __syncthreads();
  atomicAdd(&sm, in[threadIdx.x]);
  atomicMaxF(mx, in[threadIdx.x]);
  atomicAdd(ds, (double)in[threadIdx.x]);
  atomicAdd(u, 1ull);
  atomicAdd_block(u + 1, 2ull);
  atomicMax((long long*)u + 2, (long long)(in[threadIdx.x] * 4.0f));
  __syncthreads();
  if (threadIdx.x == 0) mx[1] = sm;
}
"""


@pytest.mark.parametrize("options", OPTIONS[:2])
def test_cas_loop_and_mixed_width_atomics(compile_run, options):
    xs = [1.5, -2.0, 3.25, 0.5, 7.0, -8.0, 2.0, 1.0, -0.75, 6.5]
    n = len(xs)
    spec = _spec(
        "a2", n, ("in", "f32*", xs), ("mx", "f32*", [-100, 0]), ("ds", "f64*", 1), ("u", "u64*", [0, 0, 0])
    )
    got = compile_run(ATOMICS, spec, options=options)
    # quarter-integers: every partial sum is exact, so the order of the atomics does not matter
    assert got["mx"].tolist() == [max(xs), sum(xs)]
    assert got["ds"].tolist() == [sum(xs)]
    assert got["u"].tolist() == [n, 2 * n, int(max(xs) * 4)]


def test_intrinsics_against_their_definitions(compile_run):
    src = r"""extern "C" __global__ void it(const int* in, int* out) {
  int i = threadIdx.x; int v = in[i]; unsigned u = (unsigned)v;
  out[i * 9 + 0] = __ffs(v); out[i * 9 + 1] = __clz(v); out[i * 9 + 2] = __popc(u);
  out[i * 9 + 3] = __brev(u); out[i * 9 + 4] = __byte_perm(u, 0x12345678u, 0x7531);
  out[i * 9 + 5] = __funnelshift_l(u, 0xdeadbeefu, i); out[i * 9 + 6] = __mul24(v, 77);
  out[i * 9 + 7] = __umulhi(u, 0x9e3779b9u); out[i * 9 + 8] = __rhadd(v, 3);
}
"""
    xs = [0, 1, -1, 0x7FFFFFFF, -(2**31), 12345, -999, 0x0F0F0F0F]
    spec = _spec("it", len(xs), ("in", "i32*", xs), ("out", "i32*", 9 * len(xs)))
    out = np.asarray(compile_run(src, spec)["out"]).reshape(len(xs), 9).tolist()
    for i, v in enumerate(xs):
        u = v & 0xFFFFFFFF
        ffs = (u & -u).bit_length()
        clz = 32 - u.bit_length()
        brev = int(f"{u:032b}"[::-1], 2)
        both = u | (0x12345678 << 32)
        perm = sum(((both >> (8 * ((0x7531 >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
        fsh = ((((0xDEADBEEF << 32) | u) << (i & 31)) >> 32) & 0xFFFFFFFF
        m24 = _s32((((v & 0xFFFFFF) ^ 0x800000) - 0x800000) * 77)
        mulhi = (u * 0x9E3779B9) >> 32
        rhadd = (v + 3 + 1) >> 1
        want = [ffs, clz, bin(u).count("1"), brev, perm, fsh, m24, mulhi, rhadd]
        assert out[i] == [_s32(x) for x in want], i
