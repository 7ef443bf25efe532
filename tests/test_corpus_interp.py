"""The whole conformance corpus passes on the reference interpreter (bit-exact, or within the
declared ulp tolerance for the few kernels that use approximate hardware instructions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwengpu.runner import corpus, run_kernel

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
ITEMS = corpus(KERNELS)


def test_corpus_size():
    assert len(ITEMS) >= 60


@pytest.mark.parametrize("cu,spec", ITEMS, ids=[c.stem for c, _ in ITEMS])
def test_kernel(cu: Path, spec: Path):
    res = run_kernel(cu, spec, engine="interp")
    assert res.checked, "every corpus spec has expected values"
    assert not res.mismatches, "\n".join(res.mismatches)
    if res.spec.tolerance_ulp:
        # a tolerance is only for results whose hardware bits are not public (approximate
        # instructions, CUDA's library expansions of sinf/expf/...): few, and declared small
        assert res.spec.tolerance_ulp <= 8


def test_determinism():
    cu, spec = next((c, j) for c, j in ITEMS if c.stem == "atomic_add_contention")
    a = run_kernel(cu, spec)
    b = run_kernel(cu, spec)
    for k in a.outputs:
        assert a.outputs[k].tobytes() == b.outputs[k].tobytes()
