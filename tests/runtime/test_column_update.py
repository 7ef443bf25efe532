"""Two exact shortcuts of the fast runtime's sparse products, against the products themselves.

``SparseRows.set`` (``y := A x`` in one call) must give the bits of ``y.fill(0); into(x, y)``, signed
zeros included; ``ColumnUpdate`` (``A x`` brought up to date through the columns whose +-1 input
changed) must give the bits of the full product after every step, fall back where its guard does
not hold, and refuse maps whose sums could round. The machine-level check (a launch with column
updates on, equal to the stock model's trace) is in ``test_fast_runtime.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.runtime.fast import ColumnUpdate, SparseRows

F32 = np.float32


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=F32).view(np.uint32)


def _map(rng: np.random.Generator, rows: int, cols: int, density: float, halves: bool = True) -> SparseRows:
    """An integer-or-half map like a compiled MLP's, with some all-zero rows and columns."""
    w = rng.integers(-40, 41, size=(rows, cols)).astype(F32)
    if halves:
        w += rng.choice(np.array([0, 0.5], F32), size=w.shape)
    w[rng.random(w.shape) > density] = 0
    w[rng.integers(0, rows, rows // 8)] = 0
    w[:, rng.integers(0, cols, cols // 8)] = 0
    return SparseRows.of(w)


def test_set_equals_fill_then_into_bit_for_bit():
    rng = np.random.default_rng(1)
    for trial in range(40):
        a = _map(rng, 60, 30, 0.2, halves=trial % 2 == 0)
        x = rng.choice(np.array([-1, 1, 0, -0.0, 3.25, -7.5], F32), size=30)
        if trial % 3 == 0:  # products that cancel: exact zero sums (the sign of zero matters)
            x = np.where(rng.random(30) < 0.5, F32(-0.0), x).astype(F32)
        y = np.full(60, np.nan, F32)
        a.set(x, y)
        want = np.zeros(60, F32)
        a.into(x, want)
        assert np.array_equal(_bits(y), _bits(want)), trial
        assert not np.signbit(y[y == 0]).any()  # sums start from +0: never -0


def test_column_update_equals_the_full_product_after_every_step():
    rng = np.random.default_rng(2)
    a = _map(rng, 300, 120, 0.3)
    assert ColumnUpdate.admits(a)
    cu = ColumnUpdate(a)
    x = rng.choice(np.array([-1, 1], F32), size=120)
    for step in range(300):
        flips = rng.choice(120, size=int(rng.choice([0, 1, 3, 8, 40])), replace=False)
        x = x.copy()
        x[flips] = -x[flips]
        got = cu.product(x).copy()
        want = np.zeros(300, F32)
        a.into(x, want)
        assert np.array_equal(_bits(got), _bits(want)), step
    assert cu.updates > 150 and cu.fulls >= 1  # most steps took the update; 40 flips do not


def test_column_update_falls_back_where_inputs_are_not_unit():
    """A changed input that is not +-1 (a broken residual contract) takes the full product, and an
    input stored that way is never updated from."""
    rng = np.random.default_rng(3)
    a = _map(rng, 200, 80, 0.3)
    cu = ColumnUpdate(a)
    x = rng.choice(np.array([-1, 1], F32), size=80)
    cu.product(x)
    for bad in (F32(0.75), F32(3.0), F32(0.0), F32(np.nextafter(F32(1), F32(2)))):
        y = x.copy()
        y[5] = bad
        fulls = cu.fulls
        got = cu.product(y).copy()
        want = np.zeros(200, F32)
        a.into(y, want)
        assert np.array_equal(_bits(got), _bits(want))
        assert cu.fulls == fulls + 1 and not cu.valid
        z = y.copy()
        z[9] = -z[9]  # the stored input is not all +-1: the next call is a full product too
        got = cu.product(z).copy()
        want[:] = 0
        a.into(z, want)
        assert np.array_equal(_bits(got), _bits(want)) and cu.fulls == fulls + 2
        cu.product(x)  # back to a unit input: stored again
        assert cu.valid


@pytest.mark.parametrize("weight", [0.3, 1 / 1024, 2.0**22])
def test_column_update_refuses_maps_whose_sums_could_round(weight):
    """Weights that are not multiples of 2^-8, or a row whose |w| sum reaches 2^24 / 2^k: no
    exactness argument, so no updates (the full product runs)."""
    w = np.zeros((4, 8), F32)
    w[0, :] = 1
    w[1, 3] = weight
    w[2, :] = 2.0**21 if weight == 2.0**22 else 1
    a = SparseRows.of(w)
    assert not ColumnUpdate.admits(a)
    halves = SparseRows.of(np.where(w == weight, F32(0.5), w))  # k = 1: row 2 sums to 2^24 / 2^1
    assert ColumnUpdate.admits(halves) is (weight != 2.0**22)
