"""Register allocation and machine limits: a kernel with 32 live values runs, one with 33 is
refused with a message naming the registers needed; every limit in ``limits.py`` is enforced."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from machine_helpers import HEADER, assert_same, both

from qwengpu.codegen.lower import lower_kernel
from qwengpu.codegen.regalloc import allocate, liveness
from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import R
from qwengpu.isa.limits import LIMITS, format_limits, machine_limits
from qwengpu.ptx.parser import parse_ptx


def live_values_ptx(k: int) -> str:
    """k values loaded and all live at once (plus the buffer's address), then summed."""
    loads = "\n".join(f"    ld.global.u32 %r{j}, [%rd2+{4 * j}];" for j in range(k))
    adds = "\n".join(f"    add.s32 %r{k + j}, %r{k + j - 1 if j else 0}, %r{j + 1};" for j in range(k - 1))
    # a non-associative mix so nothing can be reordered away: x = x * 3 + r_j
    mix = "\n".join(
        f"    mad.lo.s32 %r{2 * k + j}, %r{2 * k + j - 1 if j else 0}, 3, %r{j};" for j in range(k)
    )
    del adds
    return (
        HEADER
        + f"""
.visible .entry k(.param .u64 k_param_0)
{{
    .reg .b32 %r<{3 * k + 2}>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
{loads}
{mix}
    st.global.u32 [%rd2], %r{3 * k - 1};
    ret;
}}
"""
    )


def _spec(n: int) -> dict:
    return {
        "kernel": "k",
        "grid": 1,
        "block": 1,
        "args": [{"name": "buf", "type": "u32*", "data": list(range(3, 3 + n))}],
        "outputs": ["buf"],
    }


def _max_live(k: int) -> int:
    prog = lower_kernel(parse_ptx(live_values_ptx(k)), "k")
    _, live_out = liveness(prog.code, R)
    return max(bin(x).count("1") for x in live_out)


def test_exactly_32_live_values_fit() -> None:
    assert _max_live(31) == 32
    ref, got, st, prog = both(live_values_ptx(31), _spec(31))
    assert_same(ref, got)
    assert prog.nregs == 32


def test_33_live_values_are_refused_without_spilling() -> None:
    assert _max_live(32) == 33
    prog = lower_kernel(parse_ptx(live_values_ptx(32)), "k")
    with pytest.raises(
        MachineLimitError, match=r"kernel k needs 33 registers after allocation; the machine has 32"
    ):
        allocate(prog, spill=False)


@pytest.mark.parametrize("k", [32, 40])
def test_more_live_values_spill(k: int) -> None:
    ref, got, st, prog = both(live_values_ptx(k), _spec(k))
    assert_same(ref, got)
    assert prog.nregs <= 32
    assert prog.spill_words >= (1 if k > 33 else 0)  # at 33 the buffer address is rematerialized instead


def _mix(k: int) -> int:
    """``live_values_ptx(k)``'s result from its meaning: x = 4 * v0, then x = 3x + v_j (mod 2^32)."""
    v = list(range(3, 3 + k))
    x = 4 * v[0]
    for j in range(1, k):
        x = (3 * x + v[j]) & 0xFFFFFFFF
    return x


@pytest.mark.parametrize("k", [60, pytest.param(120, marks=pytest.mark.slow)])
def test_heavy_register_pressure_spills_instead_of_refusing(k: int) -> None:
    """No kernel is refused for register pressure (issue 26): 61 and 121 values live at once run
    with 32 registers, the rest in spill slots (it was refused beyond 16 spill words before)."""
    ref, got, st, prog = both(live_values_ptx(k), _spec(k))
    assert_same(ref, got)
    assert int(got["buf"][0]) == _mix(k)
    assert prog.nregs <= 32 and prog.spill_words >= k + 1 - 32


def test_allocation_coalesces_moves() -> None:
    module = parse_ptx(live_values_ptx(8))
    prog = lower_kernel(module, "k")
    out = allocate(prog)
    assert sum(1 for x in out.code if x.op == "mov") < sum(1 for x in prog.code if x.op == "mov")
    assert out.allocated and out.nregs <= 10


def preds_ptx(k: int) -> str:
    setps = "\n".join(f"    setp.lt.u32 %p{j}, %r{j}, {j + 5};" for j in range(k))
    sels = "\n".join(f"    selp.b32 %r{k + j + 1}, %r{k + j}, 7, %p{j};" for j in range(k))
    loads = "\n".join(f"    ld.global.u32 %r{j}, [%rd2+{4 * j}];" for j in range(k))
    return (
        HEADER
        + f"""
.visible .entry k(.param .u64 k_param_0)
{{
    .reg .pred %p<{k + 1}>;
    .reg .b32 %r<{2 * k + 2}>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
{loads}
    mov.u32 %r{k}, 1;
{setps}
{sels}
    st.global.u32 [%rd2], %r{2 * k};
    ret;
}}
"""
    )


def test_predicate_limit() -> None:
    ref, got, _, prog = both(preds_ptx(8), _spec(8))
    assert_same(ref, got)
    assert prog.npreds == 8
    prog9 = lower_kernel(parse_ptx(preds_ptx(9)), "k")
    with pytest.raises(
        MachineLimitError, match=r"needs 9 predicate registers after allocation; the machine has 8"
    ):
        allocate(prog9, spill=False)


@pytest.mark.parametrize("k", [9, 12])
def test_predicates_beyond_eight_live_in_registers(k: int) -> None:
    """More than 8 live predicates: some are kept in general registers as 0/1 (sel after each
    definition, setp before each use); results equal the interpreter's."""
    ref, got, _, prog = both(preds_ptx(k), _spec(k))
    assert not isinstance(ref, str), ref
    assert_same(ref, got)
    assert prog.npreds <= 8


def test_shuffle_source_keeps_its_register(tmp_path) -> None:
    """A value read by shfl from other lanes shares its physical register with nothing."""
    src = (
        'extern "C" __global__ void k(int* out) {\n  int i = threadIdx.x; int v = out[i] * 3;\n'
        "  if (i & 1) { int w = out[i] + 5; out[i] = w * w; return; }\n"
        "  out[i] = __shfl_down_sync(0xffffffff, v, 1) + v;\n}\n"
    )
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(
        json.dumps(
            {
                "kernel": "k",
                "grid": 1,
                "block": 32,
                "args": [{"name": "out", "type": "i32*", "data": list(range(32))}],
            }
        )
    )
    from qwengpu.codegen.pipeline import run_machine_sim
    from qwengpu.runner import run_kernel

    ref = run_kernel(tmp_path / "k.cu")
    got = run_machine_sim(tmp_path / "k.cu")
    assert got.outputs["out"].tobytes() == ref.outputs["out"].tobytes()
    assert got.program.pinned


# ---------------------------------------------------------------------------------------------
# limits
# ---------------------------------------------------------------------------------------------
def test_limits_table() -> None:
    rows = {name: v for name, v, _ in machine_limits()}
    assert rows["registers"] == 32 and rows["threads_per_block"] >= 64 and rows["blocks_per_launch"] >= 64
    assert rows["global_words"] >= 1024 and rows["shared_words"] >= 256 and rows["program"] >= 512
    assert "32-bit registers per thread" in format_limits()


COPY = 'extern "C" __global__ void k(int* out) {\n  out[blockIdx.x * blockDim.x + threadIdx.x] += 1;\n}\n'


def _run_cuda(tmp_path, src: str, spec: dict):
    from qwengpu.codegen.pipeline import run_machine_sim

    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps(spec))
    return run_machine_sim(tmp_path / "k.cu")


@pytest.mark.parametrize(
    "grid,block,size,msg",
    [
        (1, 65, 65, "the launch needs 65 threads per block; the machine has 64"),
        ([256, 256, 1], 1, 65, "the launch needs 65536 blocks; the machine has 65535"),
        (1, 1, 16385, "the launch needs 16385 words of global memory it may store to; the machine has 16384"),
    ],
)
def test_launch_limits(tmp_path, grid: int | list[int], block: int, size: int, msg: str) -> None:
    spec = {
        "kernel": "k",
        "grid": grid,
        "block": block,
        "args": [{"name": "out", "type": "i32*", "size": size}],
    }
    with pytest.raises(MachineLimitError, match=msg):
        _run_cuda(tmp_path, COPY, spec)
    spec["grid"], spec["block"] = 1, 64
    res = _run_cuda(
        tmp_path,
        COPY,
        {"kernel": "k", "grid": 1, "block": 64, "args": [{"name": "out", "type": "i32*", "size": 1024}]},
    )
    assert int(res.outputs["out"][:64].sum()) == 64


def test_shared_memory_limit(tmp_path) -> None:
    src = (
        'extern "C" __global__ void k(int* out) {\n  extern __shared__ int s[];\n  s[threadIdx.x] = 1;\n'
        "  __syncthreads();\n  out[threadIdx.x] = s[threadIdx.x];\n}\n"
    )
    spec = {
        "kernel": "k",
        "grid": 1,
        "block": 4,
        "shared_bytes": 12289 * 4,
        "args": [{"name": "out", "type": "i32*", "size": 4}],
    }
    with pytest.raises(
        MachineLimitError, match="needs 12289 words of shared memory per block; the machine has 12288"
    ):
        _run_cuda(tmp_path, src, spec)
    spec["shared_bytes"] = 12288 * 4
    assert _run_cuda(tmp_path, src, spec).outputs["out"].tolist() == [1, 1, 1, 1]


def test_local_memory_limit(tmp_path) -> None:
    src = (
        'extern "C" __global__ void k(int* out, int n) {\n  int a[%d];\n'
        "  for (int j = 0; j < %d; j++) a[j] = out[j];\n  out[0] = a[n];\n}\n"
    )
    spec = {
        "kernel": "k",
        "grid": 1,
        "block": 1,
        "args": [{"name": "out", "type": "i32*", "size": 20}, {"name": "n", "type": "i32", "value": 3}],
    }
    with pytest.raises(
        MachineLimitError, match="needs 18 words of local memory per thread; the machine has 16"
    ):
        _run_cuda(tmp_path, src % (17, 17), spec)  # 68 bytes, 8-byte aligned like the interpreter's layout
    _run_cuda(tmp_path, src % (16, 16), spec)


def test_parameter_limit(tmp_path) -> None:
    n = LIMITS.param_words // 2 + 1
    params = ", ".join(f"long long p{j}" for j in range(n))
    body = " + ".join(f"p{j}" for j in range(n))
    src = f'extern "C" __global__ void k(long long* out, {params}) {{\n  out[0] = {body};\n}}\n'
    spec = {
        "kernel": "k",
        "grid": 1,
        "block": 1,
        "args": [{"name": "out", "type": "i64*", "size": 1}]
        + [{"name": f"p{j}", "type": "i64", "value": j} for j in range(n)],
    }
    with pytest.raises(
        MachineLimitError, match=r"words of parameters and launch constants; the machine has 64"
    ):
        _run_cuda(tmp_path, src, spec)


def test_program_limit() -> None:
    n = LIMITS.program + 1
    body = "\n".join(f"    add.s32 %r1, %r1, {j};" for j in range(n))
    ptx = (
        HEADER
        + f"""
.visible .entry k(.param .u64 k_param_0)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    ld.global.u32 %r1, [%rd2];
{body}
    st.global.u32 [%rd2], %r1;
    ret;
}}
"""
    )
    ref, got, _, _ = both(ptx, _spec(1))
    assert (
        isinstance(got, str) and f"machine instructions of program; the machine has {LIMITS.program}" in got
    )
    assert isinstance(ref, dict) and np.asarray(ref["buf"]).size == 1


def test_parameters_are_rematerialized(tmp_path) -> None:
    """NVRTC loads every parameter first; constant-bank words are reloaded at their use instead."""
    n = 24
    params = ", ".join(f"long long p{j}" for j in range(n))
    body = " ^ ".join(f"(p{j} * {j + 3})" for j in range(n))
    src = f'extern "C" __global__ void k(long long* out, {params}) {{\n  out[threadIdx.x] = {body};\n}}\n'
    spec = {
        "kernel": "k",
        "grid": 1,
        "block": 2,
        "args": [{"name": "out", "type": "i64*", "size": 2}]
        + [{"name": f"p{j}", "type": "i64", "value": (j * 0x123456789AB) ^ (j << 40)} for j in range(n)],
    }
    from qwengpu.runner import run_kernel

    res = _run_cuda(tmp_path, src, spec)
    ref = run_kernel(tmp_path / "k.cu")
    assert res.outputs["out"].tobytes() == ref.outputs["out"].tobytes()
    assert res.program.nregs <= 32


PRESSURE = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels" / "pressure.cu"


def _pressure_expected(a: list[int], t: int) -> int:
    """pressure.cu from its meaning: v_i = (a[i] ^ (t + i)) + 7i, folded s = 31 s + v_i from the top."""
    s = 0
    for i in reversed(range(len(a))):
        s = (s * 31 + (((a[i] ^ (t + i)) + 7 * i) & 0xFFFFFFFF)) & 0xFFFFFFFF
    return s


def test_spill_slots_take_the_memory_the_launch_leaves(tmp_path) -> None:
    """The program the weights run: pressure.cu (48 values live per thread) spills to per-thread
    words of global memory; 16 threads fit, and 64 in the 2B machine's 16,384 words; in a machine
    of 1,024 words (version 1's) 64 do not, refused as a memory limit naming the words."""
    from qwengpu.codegen.softmem import run_weights

    spec = json.loads(PRESSURE.with_suffix(".json").read_text())
    a = spec["args"][0]["data"]
    spec.pop("expected")
    spec["block"], spec["args"][1]["data"] = 16, [0] * 16
    (tmp_path / "p16.json").write_text(json.dumps(spec))
    run = run_weights(PRESSURE, tmp_path / "p16.json")
    assert run.outputs["out"].tolist() == [_pressure_expected(a, t) for t in range(16)]
    assert "spill slots" in run.stats["plan"]
    spec["block"], spec["args"][1]["data"] = 64, [0] * 64
    (tmp_path / "p64.json").write_text(json.dumps(spec))
    run = run_weights(PRESSURE, tmp_path / "p64.json")
    assert run.outputs["out"].tolist() == [_pressure_expected(a, t) for t in range(64)]
    want = (r"needs 1216 words of global memory for its spill slots \(19 per thread x 64 thread slots.* "
            r"words are left beside the launch's buffers \(120 words\)")
    with pytest.raises(MachineLimitError, match=want):
        run_weights(PRESSURE, tmp_path / "p64.json", gmem_words=1024)


CALLS = """__device__ __noinline__ unsigned f(unsigned x, unsigned y) { return x * 7u + (y ^ 0x55u); }
extern "C" __global__ void k(const unsigned *a, unsigned *out) {
  unsigned t = threadIdx.x, s = a[0];
%s  out[t] = s;
}
"""


def test_call_frames_promoted_to_registers_take_no_local_memory(tmp_path) -> None:
    """Twelve non-inlined calls leave a 36-word frame of call parameters in the layout, all
    promoted to registers: the kernel was refused for "36 words of local memory" (16 allowed)."""
    from qwengpu.codegen.softmem import run_weights

    a = [5, 9, 1, 77]
    (tmp_path / "k.cu").write_text(CALLS % "".join(f"  s = f(s, a[{j % 4}] + t);\n" for j in range(12)))
    spec = {"kernel": "k", "grid": 1, "block": 4,
            "args": [{"name": "a", "type": "u32*", "data": a},
                     {"name": "out", "type": "u32*", "data": [0] * 4}],
            "outputs": ["out"]}
    (tmp_path / "k.json").write_text(json.dumps(spec))
    want = []
    for t in range(4):
        s = a[0]
        for j in range(12):
            s = (s * 7 + ((a[j % 4] + t) ^ 0x55)) & 0xFFFFFFFF
        want.append(s)
    assert run_weights(tmp_path / "k.cu").outputs["out"].tolist() == want
