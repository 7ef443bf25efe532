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


def test_every_corpus_and_external_kernel_on_the_2b_machines_units() -> None:
    """The program the 2B machine's weights run (``softmem.run_weights`` with the shape's units:
    the multiplier, the float adders, the one-lane float multiplier, one-lane rows) gives every
    corpus and external kernel's expected outputs on the ISA simulator (the approximate ones
    within their tolerance): a code-generator step that breaks one launch on the units fails here
    in seconds, before a model sweep (an fma slow-path routine shared by all rounding modes
    broke ``rounding_fma`` only there)."""
    from qwengpu.codegen.soft import Options
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.codegen.softmem import run_weights
    from qwengpu.model.configs import shape_named

    opts = Options(**unit_options(shape_named("2b")))
    failed = {}
    items = ITEMS + corpus(KERNELS / "external")
    for cu, spec in items:
        res = run_weights(cu, spec, options=opts)
        if not res.passed:
            failed[cu.stem] = res.mismatches[:2]
    assert len(items) >= 136 and not failed, failed
