"""Faults on the machine carry the interpreter's message (thread, block, the PTX instruction and
its CUDA line): out-of-bounds global/shared/local accesses, misalignment, division by zero, the
step limit. An address more than 2 GiB away from its buffer's window (which the machine's 32-bit
window arithmetic cannot represent) is still reported as out of bounds, with its own message."""

from __future__ import annotations

import pytest

from qwengpu.codegen.pipeline import run_machine_sim
from qwengpu.errors import ExecutionError
from qwengpu.runner import run_kernel

CASES = {
    "past_end": (
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n'
        "  if (i <= n) out[i] = i;\n}\n",
        8,
        12,
    ),
    "before_start": (
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n  out[i - n] = i;\n}\n',
        3,
    ),
    "shared_oob": (
        'extern "C" __global__ void k(int* out, int n) {\n  __shared__ int s[8];\n'
        "  int i = threadIdx.x;\n  s[i + n] = i;\n  __syncthreads();\n  out[i] = s[i];\n}\n",
        5,
    ),
    "local_oob": (
        'extern "C" __global__ void k(int* out, int n) {\n  int a[4];\n  int i = threadIdx.x;\n'
        "  for (int j = 0; j < 4; j++) a[j] = out[j];\n  a[(i + n) & 7] = 1;\n  out[i] = a[i & 3];\n}\n",
        2,
    ),
    "misaligned": (
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n'
        "  *(int*)((char*)out + 4 * i + n) = 1;\n}\n",
        2,
    ),
    "div_zero": (
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n'
        "  out[i] = 100 / (i - n);\n}\n",
        6,
    ),
    "trap": (  # __trap() in some lanes (PTX trap): the machine's trap, the interpreter's message
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n'
        "  if (i == n) __trap();\n  out[i] = i;\n}\n",
        5,
    ),
    "within_window": (
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n  out[i + n] = 1;\n}\n',
        0x10000000,
    ),
}


def _spec(n: int, threads: int = 8) -> dict:
    return {
        "kernel": "k",
        "grid": 1,
        "block": threads,
        "args": [{"name": "out", "type": "i32*", "data": [0] * 8}, {"name": "n", "type": "i32", "value": n}],
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_messages_match(tmp_path, name: str) -> None:
    import json

    src, n, *threads = CASES[name]
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps(_spec(n, *threads)))
    with pytest.raises(ExecutionError) as ref:
        run_kernel(tmp_path / "k.cu")
    with pytest.raises(ExecutionError) as got:
        run_machine_sim(tmp_path / "k.cu")
    assert str(got.value) == str(ref.value)


def test_address_beyond_the_window_is_reported(tmp_path) -> None:
    import json

    src = 'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n  out[i + n] = 1;\n}\n'
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps(_spec(0x40000000)))
    with pytest.raises(ExecutionError) as ref:
        run_kernel(tmp_path / "k.cu")
    with pytest.raises(ExecutionError) as got:
        run_machine_sim(tmp_path / "k.cu")
    assert "out-of-bounds global store" in str(ref.value)
    assert "out-of-bounds global store of 4 bytes: the address is more than 2 GiB away" in str(got.value)
    # same thread, block and instruction lines
    assert str(got.value).splitlines()[1:] == str(ref.value).splitlines()[1:]


@pytest.mark.parametrize("limit", [1, 7, 50, 333, 2000])
def test_step_limit_message_matches(tmp_path, limit: int) -> None:
    import json

    src = (
        'extern "C" __global__ void k(int* out, int n) {\n  int i = threadIdx.x;\n  int x = i + n;\n'
        "  while (x != 0) { x = (x & 1) ? 3 * x + 1 : x / 2; out[i] += 1; }\n}\n"
    )
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps(_spec(7)))
    with pytest.raises(ExecutionError) as ref:
        run_kernel(tmp_path / "k.cu", max_steps=limit)
    with pytest.raises(ExecutionError) as got:
        run_machine_sim(tmp_path / "k.cu", max_steps=limit)
    assert str(got.value) == str(ref.value)
