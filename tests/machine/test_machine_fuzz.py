"""Random differential tests: the random C expression kernels of ``tests/test_fuzz_kernels.py``
(integer trees with signed/unsigned division, shifts, compares, selects; float trees with every
rounding mode), run on the machine simulator and on the interpreter, compared bit for bit."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_fuzz_kernels as fz  # noqa: E402

from qwengpu.machine.sim import run_machine_sim  # noqa: E402
from qwengpu.runner import run_kernel  # noqa: E402

SEEDS = int(os.environ.get("MACHINE_FUZZ_SEEDS", "4"))


def _int_kernel(tmp_path: Path, seed: int) -> Path:
    rng = random.Random(1000 + seed)
    n = 64
    exprs = [fz.gen_int(rng, 4) for _ in range(6)]
    body = "\n".join(f"  out[{k} * n + i] = {x};" for k, (x, _) in enumerate(exprs))
    src = (
        f'extern "C" __global__ void fz(const unsigned* A, const unsigned* B, const unsigned* C, '
        f"unsigned* out, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i >= n) return;\n  unsigned a = A[i], b = B[i], c = C[i];\n{body}\n}}\n"
    )
    vals = {
        k: [rng.choice(fz.EDGE) if rng.random() < 0.4 else rng.getrandbits(32) for _ in range(n)]
        for k in "abc"
    }
    spec = {
        "kernel": "fz",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "A", "type": "u32*", "data": vals["a"]},
            {"name": "B", "type": "u32*", "data": vals["b"]},
            {"name": "C", "type": "u32*", "data": vals["c"]},
            {"name": "out", "type": "u32*", "size": n * len(exprs)},
            {"name": "n", "type": "i32", "value": n},
        ],
    }
    (tmp_path / "fz.cu").write_text(src)
    (tmp_path / "fz.json").write_text(json.dumps(spec))
    return tmp_path / "fz.cu"


def _float_kernel(tmp_path: Path, seed: int) -> Path:
    rng = random.Random(2000 + seed)
    n = 64
    exprs = [fz.gen_float(rng, 3) for _ in range(5)]
    body = "\n".join(f"  out[{k} * n + i] = {x};" for k, (x, _) in enumerate(exprs))
    src = (
        'extern "C" __global__ void ff(const float* A, const float* B, const float* C, float* out, '
        f"int n) {{\n"
        f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n"
        f"  float a = A[i], b = B[i], c = C[i];\n{body}\n}}\n"
    )

    def rnd_bits() -> int:
        r = rng.random()
        if r < 0.25:
            return rng.choice(fz.FEDGE)
        if r < 0.5:
            return rng.getrandbits(32)
        return fz.f2b(rng.uniform(-4, 4))

    vals = {k: [rnd_bits() for _ in range(n)] for k in "abc"}
    spec = {
        "kernel": "ff",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "A", "type": "f32*", "data": [f"0x{v:08x}" for v in vals["a"]]},
            {"name": "B", "type": "f32*", "data": [f"0x{v:08x}" for v in vals["b"]]},
            {"name": "C", "type": "f32*", "data": [f"0x{v:08x}" for v in vals["c"]]},
            {"name": "out", "type": "f32*", "size": n * len(exprs)},
            {"name": "n", "type": "i32", "value": n},
        ],
    }
    (tmp_path / "ff.cu").write_text(src)
    (tmp_path / "ff.json").write_text(json.dumps(spec))
    return tmp_path / "ff.cu"


def _compare(cu: Path) -> None:
    ref = run_kernel(cu)
    got = run_machine_sim(cu)
    for name, want in ref.outputs.items():
        assert got.outputs[name].tobytes() == want.tobytes(), f"{name} differs:\n{cu.read_text()}"
    assert got.stats["ptx_warp_instructions"] == ref.stats["warp_instructions"]


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_integer_kernels(tmp_path, seed: int) -> None:
    _compare(_int_kernel(tmp_path, seed))


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_float_kernels(tmp_path, seed: int) -> None:
    _compare(_float_kernel(tmp_path, seed))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(SEEDS, SEEDS + 60))
def test_random_kernels_long(tmp_path, seed: int) -> None:
    _compare(_int_kernel(tmp_path, seed))
    _compare(_float_kernel(tmp_path, seed))
