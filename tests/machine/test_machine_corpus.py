"""Every corpus kernel runs on the machine simulator bit-identically to the interpreter.

Every corpus kernel must be accepted: a refusal (MachineLimitError) fails the test, it is never
skipped (the corpus is the machine's conformance bar)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwengpu.codegen.pipeline import run_machine_sim
from qwengpu.errors import MachineLimitError
from qwengpu.runner import corpus, run_kernel

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
ITEMS = corpus(KERNELS)
STATS: dict[str, dict] = {}


@pytest.mark.parametrize("cu,spec", ITEMS, ids=[c.stem for c, _ in ITEMS])
def test_corpus_kernel_on_machine(cu: Path, spec: Path) -> None:
    ref = run_kernel(cu, spec, engine="interp")
    try:
        res = run_machine_sim(cu, spec)
    except MachineLimitError as e:  # every corpus kernel must run: a refusal is a failure, not a skip
        pytest.fail(f"the machine refuses corpus kernel {cu.stem}: {str(e).splitlines()[0]}")
    for name, want in ref.outputs.items():
        got = res.outputs[name]
        assert got.tobytes() == want.tobytes(), f"{name}: machine {got} interpreter {want}"
    assert not res.mismatches or ref.mismatches, "\n".join(res.mismatches)
    assert res.stats["ptx_warp_instructions"] == ref.stats["warp_instructions"]
    assert res.stats["registers"] <= 32
    assert 1 <= res.stats["passes"] <= 8 * res.stats["warp_instructions"]
    STATS[cu.stem] = res.stats
