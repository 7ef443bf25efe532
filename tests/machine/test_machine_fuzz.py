"""Random differential tests: the random C expression kernels of ``tests/test_fuzz_kernels.py``
(integer trees with signed/unsigned division, shifts, compares, selects; float trees with every
rounding mode), run on the machine simulator and on the interpreter, compared bit for bit."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_fuzz_kernels as fz  # noqa: E402

from qwengpu.codegen.pipeline import run_machine_sim  # noqa: E402
from qwengpu.runner import run_kernel  # noqa: E402

SEEDS = int(os.environ.get("MACHINE_FUZZ_SEEDS", "4"))


def _int_kernel(tmp_path: Path, seed: int) -> Path:
    return fz.write_int_kernel(tmp_path, random.Random(1000 + seed))[0]


def _float_kernel(tmp_path: Path, seed: int) -> Path:
    return fz.write_float_kernel(tmp_path, random.Random(2000 + seed))[0]


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
