"""Instructions NVRTC emits for common CUDA intrinsics that the interpreter used to refuse or, for
``__syncthreads_count/and/or``, silently got wrong. Expected values come from each intrinsic's
definition, computed here in plain Python."""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.errors import ExecutionError

from .conftest import run_ptx


def _u32(x: int) -> int:
    return x & 0xFFFFFFFF


def _s32(x: int) -> int:
    return ((x + 2**31) % 2**32) - 2**31


def _io(kernel: str, block: int, typ: str, data: list[int], out_size: int) -> dict:
    """A launch spec with one input buffer ``in`` and one output buffer ``out``."""
    return {
        "kernel": kernel,
        "grid": 1,
        "block": block,
        "args": [
            {"name": "in", "type": typ, "data": data},
            {"name": "out", "type": typ, "size": out_size},
        ],
    }


SYNC = r"""extern "C" __global__ void sc(const int* in, int* out) {
  int i = threadIdx.x; int p = in[i] > 0;
  int c = __syncthreads_count(p); int a = __syncthreads_and(p); int o = __syncthreads_or(p);
  out[i] = c * 100 + a * 10 + o;
}
"""


@pytest.mark.parametrize("values", [[(k % 7) - 2 for k in range(40)], [k + 1 for k in range(40)], [0] * 40])
def test_syncthreads_count_and_or(compile_run, values):
    spec = _io("sc", len(values), "i32*", values, len(values))
    p = [v > 0 for v in values]
    want = sum(p) * 100 + all(p) * 10 + any(p)
    assert compile_run(SYNC, spec)["out"].tolist() == [want] * len(values)


WARP = r"""extern "C" __global__ void wm(const unsigned* in, unsigned* out) {
  unsigned i = threadIdx.x, v = in[i];
  if (i == 30) return;  // lane 30 is not active: it takes part in nothing below
  unsigned mask = __activemask();
  int pred;
  out[i * 4 + 0] = __match_any_sync(mask, v & 3);
  out[i * 4 + 1] = __match_all_sync(mask, v >> 8, &pred);
  out[i * 4 + 2] = pred;
  out[i * 4 + 3] = __fns(v, i & 31, (int)(v % 5) - 2);
}
"""


def test_match_and_fns(compile_run):
    vals = [(k * 2654435761) % 2**32 & 0xFF for k in range(32)]  # v >> 8 == 0: match.all succeeds
    spec = _io("wm", 32, "u32*", vals, 128)
    out = np.asarray(compile_run(WARP, spec)["out"]).reshape(32, 4).tolist()
    active = [k for k in range(32) if k != 30]
    full = sum(1 << k for k in active)

    def fns(mask: int, base: int, off: int) -> int:
        if off == 0:
            return base if (mask >> base) & 1 else 0xFFFFFFFF
        pos, count, inc = base, abs(off) - 1, 1 if off > 0 else -1
        while 0 <= pos < 32:
            if (mask >> pos) & 1:
                if count == 0:
                    return pos
                count -= 1
            pos += inc
        return 0xFFFFFFFF

    for i in active:
        v = vals[i]
        any_mask = sum(1 << k for k in active if vals[k] & 3 == v & 3)
        assert out[i] == [any_mask, full, 1, fns(v, i, v % 5 - 2)]
    assert out[30] == [0, 0, 0, 0]
    assert [fns(0xAAAAAAAA, 3, 1), fns(0xAAAAAAAA, 3, -1), fns(0xAAAAAAAA, 2, 1), fns(0xAAAAAAAA, 2, -1)] == [
        3, 3, 3, 1]  # fmt: skip  # the PTX ISA's own examples


REDUX = r"""extern "C" __global__ void rx(const unsigned* in, unsigned* out) {
  unsigned i = threadIdx.x, v = in[i];
  if (i >= 29) return;
  unsigned m = __activemask();
  out[i * 6 + 0] = __reduce_add_sync(m, v);
  out[i * 6 + 1] = __reduce_min_sync(m, (int)v);
  out[i * 6 + 2] = __reduce_max_sync(m, v);
  out[i * 6 + 3] = __reduce_and_sync(m, v);
  out[i * 6 + 4] = __reduce_or_sync(m, v);
  out[i * 6 + 5] = __reduce_xor_sync(m, v);
}
"""


def test_redux_sync(compile_run):
    vals = [_u32(k * 0x9E3779B9) | 0x10 for k in range(32)]
    spec = _io("rx", 32, "u32*", vals, 192)
    out = np.asarray(compile_run(REDUX, spec, arch="compute_80")["out"]).reshape(32, 6).tolist()
    act = vals[:29]
    a, o, x = 0xFFFFFFFF, 0, 0
    for v in act:
        a, o, x = a & v, o | v, x ^ v
    want = [_u32(sum(act)), _u32(min(_s32(v) for v in act)), max(act), a, o, x]
    assert all(out[i] == want for i in range(29)) and out[29:] == [[0] * 6] * 3


INTRIN = r"""extern "C" __global__ void ii(const int* in, int* out) {
  int i = threadIdx.x, v = in[i], w = in[(i + 1) % 16];
  out[i * 6 + 0] = __dp4a(v, w, i - 8);
  out[i * 6 + 1] = __dp4a((unsigned)v, (unsigned)w, (unsigned)i);
  out[i * 6 + 2] = __dp2a_lo(v, w, 7);
  out[i * 6 + 3] = __dp2a_hi((unsigned)v, (unsigned)w, 7u);
  out[i * 6 + 4] = __sad(v, w, (unsigned)i);
  out[i * 6 + 5] = __usad((unsigned)v, (unsigned)w, 3u);
}
"""


def test_dot_products_and_sad(compile_run):
    rng = np.random.default_rng(3)
    vals = [int(x) for x in rng.integers(-(2**31), 2**31, size=16)]
    vals[0], vals[1] = -(2**31), 2**31 - 1
    spec = _io("ii", 16, "i32*", vals, 96)
    out = np.asarray(compile_run(INTRIN, spec)["out"]).reshape(16, 6).tolist()

    def part(x: int, k: int, bits: int, signed: bool) -> int:
        f = (_u32(x) >> (k * bits)) & ((1 << bits) - 1)
        return f - (1 << bits) if signed and f >> (bits - 1) else f

    for i in range(16):
        v, w = vals[i], vals[(i + 1) % 16]
        dp4s = (i - 8) + sum(part(v, k, 8, True) * part(w, k, 8, True) for k in range(4))
        dp4u = i + sum(part(v, k, 8, False) * part(w, k, 8, False) for k in range(4))
        dp2lo = 7 + sum(part(v, k, 16, True) * part(w, k, 8, True) for k in range(2))
        dp2hi = 7 + sum(part(v, k, 16, False) * part(w, k + 2, 8, False) for k in range(2))
        sad = i + abs(v - w)
        usad = 3 + abs(_u32(v) - _u32(w))
        assert out[i] == [_s32(x) for x in (dp4s, dp4u, dp2lo, dp2hi, sad, usad)], i


SPACES = r"""extern "C" __global__ void sp(int* out) {
  __shared__ int s[4];
  int loc[2]; loc[threadIdx.x & 1] = 1;
  int* p = (threadIdx.x % 3 == 0) ? s : (threadIdx.x % 3 == 1) ? out : loc;
  out[threadIdx.x] = __isShared(p) * 4 + __isGlobal(p) * 2 + __isLocal(p) + loc[0] * 0;
}
"""


def test_isspacep(compile_run):
    spec = {"kernel": "sp", "grid": 1, "block": 6, "args": [{"name": "out", "type": "i32*", "size": 6}]}
    assert compile_run(SPACES, spec)["out"].tolist() == [4, 2, 1, 4, 2, 1]


TRAP = r"""extern "C" __global__ void tr(int* out) {
  if (out[threadIdx.x] == 12345) __trap();
  out[threadIdx.x] = 2;
}
"""


def test_trap_is_a_fault_naming_the_thread_and_line(compile_run):
    spec = {
        "kernel": "tr",
        "grid": 1,
        "block": 4,
        "args": [{"name": "out", "type": "i32*", "data": [0, 0, 12345, 0]}],
    }
    with pytest.raises(ExecutionError, match=r"(?s)executed `trap`.*thread \(2, 0, 0\).*tr\.cu:2"):
        compile_run(TRAP, spec, filename="tr.cu")
    spec["args"][0]["data"] = [0, 0, 0, 0]
    assert compile_run(TRAP, spec, filename="tr.cu")["out"].tolist() == [2, 2, 2, 2]


ELECT = r""".version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .pred %p<3>;
    griddepcontrol.wait;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p2, %r1, 3;
    @%p2 bra DONE;
    elect.sync %r2|%p1, 0xfffffff0;
    selp.u32 %r3, 100, 0, %p1;
    add.u32 %r4, %r3, %r2;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
DONE:
    griddepcontrol.launch_dependents;
    ret;
}
"""


def test_elect_sync_and_griddepcontrol():
    spec = {"kernel": "k", "grid": 1, "block": 8, "args": [{"name": "out", "type": "u32*", "size": 8}]}
    # lanes 3..7 are active; the member mask drops lanes 0..3, so lane 4 is the leader
    assert run_ptx(ELECT, spec)["out"].tolist() == [0, 0, 0, 4, 104, 4, 4, 4]


PIPELINE = r"""#include <cuda_pipeline.h>
extern "C" __global__ void ca(const float4* in, float* out) {
  __shared__ float4 s[64];
  __pipeline_memcpy_async(&s[threadIdx.x], &in[threadIdx.x], sizeof(float4));
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
  float4 v = s[63 - threadIdx.x];
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}
"""


def test_cp_async_pipeline(compile_run):
    from qwengpu.cuda.nvrtc import cuda_include_dirs

    if not cuda_include_dirs():
        pytest.skip("no CUDA toolkit headers (cuda_pipeline.h) on this machine")
    xs = [str(k * 0.5) for k in range(256)]
    spec = _io("ca", 64, "f32*", xs, 64)
    out = compile_run(PIPELINE, spec, arch="compute_80")["out"].tolist()
    assert out == [sum((4 * (63 - t) + j) * 0.5 for j in range(4)) for t in range(64)]


CP_ZFILL = r""".version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_param_0, .param .u64 k_param_1)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    .shared .align 16 .b8 sm[64];
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [k_param_1];
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 4;
    mov.u32 %r3, sm;
    add.s32 %r4, %r3, %r2;
    cvt.u64.u32 %rd3, %r2;
    add.s64 %rd4, %rd1, %rd3;
    // lane t copies 16 bytes of which only 4*t come from global memory, the rest is zero
    shl.b32 %r5, %r1, 2;
    cp.async.cg.shared.global [%r4], [%rd4], 16, %r5;
    // lane 3 repeats its copy with ignore-src set: all zeros
    setp.eq.u32 %p1, %r1, 3;
    @%p1 cp.async.ca.shared.global [%r4], [%rd4], 16, %p1;
    cp.async.commit_group;
    cp.async.wait_all;
    ld.shared.v4.u32 {%r6, %r7, %r5, %r3}, [%r4];
    cvt.u64.u32 %rd5, %r2;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r6, %r7, %r5, %r3};
    ret;
}
"""


def test_cp_async_zero_fill_and_ignore_src():
    data = list(range(1, 17))
    spec = _io("k", 4, "u32*", data, 16)
    out = run_ptx(CP_ZFILL, spec)["out"].tolist()
    want = []
    for t in range(4):
        row = [data[4 * t + j] if j < t else 0 for j in range(4)]  # src-size = 4t bytes = t words
        want += [0, 0, 0, 0] if t == 3 else row
    assert out == want
