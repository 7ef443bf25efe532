"""Module variables (``__constant__`` tables, ``__device__`` globals) on the machine: the weights'
launch places them after the spec's buffers (their initial values are memory words of the prompt),
the ISA simulator of the weights' program and the model read and write them there.

Expected values from the kernel's meaning (plain Python below), not from the interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SRC = """
__constant__ int table[4] = {7, -3, 11, 100};
__constant__ float scale = 0.5f;
__device__ int hits = 5;
extern "C" __global__ void lookup(const int* idx, int* out, float* fout)
{
    int i = threadIdx.x;
    int j = idx[i] & 3;  // constant-index reads (register-indexed: GATHER below)
    int t = j == 0 ? table[0] : j == 1 ? table[1] : j == 2 ? table[2] : table[3];
    out[i] = t * (i + 1);
    fout[i] = scale * (float)out[i];
    atomicAdd(&hits, 1);
    __syncthreads();
    if (i == 0) out[4] = hits;
}
"""
IDX = [2, 0, 3, 1]


def _write(tmp: Path) -> tuple[Path, Path]:
    table = [7, -3, 11, 100]
    out = [table[j & 3] * (i + 1) for i, j in enumerate(IDX)]
    spec = {"kernel": "lookup", "grid": 1, "block": 4,
            "args": [{"name": "idx", "type": "i32*", "data": IDX},
                     {"name": "out", "type": "i32*", "size": 5},
                     {"name": "fout", "type": "f32*", "size": 4}],
            "outputs": ["out", "fout"],
            "expected": {"out": out + [5 + 4], "fout": [0.5 * v for v in out]}}  # exact: small halves
    return _files(tmp, SRC, spec)


def _files(tmp: Path, src: str, spec: dict) -> tuple[Path, Path]:
    cu, js = tmp / f"{spec['kernel']}.cu", tmp / f"{spec['kernel']}.json"
    cu.write_text(src)
    js.write_text(json.dumps(spec))
    return cu, js


GATHER = """
__constant__ int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
__constant__ float ftab[4] = {0.5f, -1.25f, 3.0f, 1e-3f};
__device__ int slots[8];
extern "C" __global__ void gather(const int* idx, int* out, float* fout)
{
    int i = threadIdx.x;
    int j = idx[i];
    out[i] = table[j & 7] + table[(j >> 3) & 7] * 10;  // a table's address plus a loaded index
    fout[i] = ftab[j & 3] * 2.0f;
    slots[(j + i) & 7] = i + 1;                          // a __device__ array at a register index
    __syncthreads();
    out[4 + i] = slots[(j + i) & 7];
    const int* t = (j & 1) ? table : table + 4;          // a pointer chosen between two addresses
    out[8 + i] = t[i & 3];
}
"""
GIDX = [0, 13, 7, 42]


def _write_gather(tmp: Path) -> tuple[Path, Path]:
    """A ``__constant__`` table indexed by a register (NVRTC: ``mov.u64 %rd, table`` then a 64-bit
    add of the scaled index), once an "internal" error of the machine's lowering."""
    import numpy as np

    table, ftab = [3, 1, 4, 1, 5, 9, 2, 6], np.array([0.5, -1.25, 3.0, 1e-3], dtype=np.float32)
    out = [table[j & 7] + 10 * table[(j >> 3) & 7] for j in GIDX]
    out += [i + 1 for i in range(4)]
    out += [(table if j & 1 else table[4:])[i & 3] for i, j in enumerate(GIDX)]
    fout = [f"0x{int(np.float32(ftab[j & 3] * np.float32(2)).view(np.uint32)):08x}" for j in GIDX]
    spec = {"kernel": "gather", "grid": 1, "block": 4,
            "args": [{"name": "idx", "type": "i32*", "data": GIDX},
                     {"name": "out", "type": "i32*", "size": 12},
                     {"name": "fout", "type": "f32*", "size": 4}],
            "outputs": ["out", "fout"], "expected": {"out": out, "fout": fout}}
    return _files(tmp, GATHER, spec)


WRITERS = {"constant_index": _write, "register_index": _write_gather}


@pytest.mark.parametrize("kernel", sorted(WRITERS))
def test_module_globals_in_the_weights_program(tmp_path: Path, kernel: str) -> None:
    from qwengpu.codegen.softmem import run_weights
    from qwengpu.runner import run_kernel

    cu, js = WRITERS[kernel](tmp_path)
    assert run_kernel(cu, js, engine="interp").mismatches == []
    assert run_weights(cu, js).mismatches == []


@pytest.mark.parametrize("kernel", sorted(WRITERS))
def test_module_globals_inside_the_model(tmp_path: Path, kernel: str) -> None:
    pytest.importorskip("transformers")
    from qwengpu.runtime.engine import run_machine

    cu, js = WRITERS[kernel](tmp_path)
    run = run_machine(cu, js, max_tokens=200_000)
    assert run.mismatches == [] and run.passed
