"""examples/: every kernel passes its launch spec on the interpreter and on the machine, and the
expected values are the NumPy generator's (``examples/make_expected.py``), reproduced here."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from qwengpu.runner import corpus, run_kernel

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = [cu.stem for cu, _ in corpus(EXAMPLES)]
FAST_ON_MACHINE: set[str] = set()  # warp_scan 20 s, the others 12-26 s each: slow (a launch inside the
# model stays in the default run: tests/test_cli.py runs kernels/dot.cu on the default engine)


def _generator():
    spec = importlib.util.spec_from_file_location("make_expected", EXAMPLES / "make_expected.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_five_examples_are_there() -> None:
    assert NAMES == ["block_sum", "histogram", "saxpy", "stencil2d", "warp_scan"]


def test_generator_reproduces_the_specs(tmp_path: Path) -> None:
    """The JSONs are exactly what the generator writes (nobody hand-edited an expected value)."""
    _generator().main(tmp_path)
    for name in NAMES:
        assert (tmp_path / f"{name}.json").read_text() == (EXAMPLES / f"{name}.json").read_text(), name


@pytest.mark.parametrize("name", NAMES)
def test_example_on_interp(name: str) -> None:
    spec = json.loads((EXAMPLES / f"{name}.json").read_text())
    assert spec.get("expected"), name
    r = run_kernel(EXAMPLES / f"{name}.cu", engine="interp")
    assert r.checked and r.passed, r.mismatches


@pytest.mark.parametrize(
    "name", [n if n in FAST_ON_MACHINE else pytest.param(n, marks=pytest.mark.slow) for n in NAMES]
)
def test_example_on_machine(name: str) -> None:
    """Every result from the compiled model's argmax tokens, bit for bit the NumPy expectation."""
    r = run_kernel(EXAMPLES / f"{name}.cu", engine="machine")
    assert r.checked and r.passed, r.mismatches
    assert r.stats["tokens"] > 0
