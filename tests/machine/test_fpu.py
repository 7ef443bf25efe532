"""The float adder circuit (``machine.fpu.fadd``, issue 14) against the interpreter's float add.

The compiler's exact evaluator runs the circuit on integers; the expected bits come from
``simt.fp32.add`` (numpy float32 addition, flushed by mask for ftz), never from the circuit's own
arithmetic. Not yet a unit of the machine: bench/fadd_unit.py measures why (depth, residual)."""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.compiler import Circuit, Word, evaluate
from qwengpu.machine.fpu import fadd
from qwengpu.simt import fp32

SPECIAL = [0, 0x80000000, 1, 0x80000001, 0x7FFFFF, 0x807FFFFF, 0x800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF,
           0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x3F800000, 0xBF800000, 0x3F800001,
           0xBF7FFFFF, 0x33800000, 0xB3800000, 0x4B800000, 0xCB7FFFFF, 0x00400000, 0x80400000, 0x4B000001]


def _circuit(damage: bool = False) -> Circuit:
    c = Circuit("fadd")
    a, b, f = c.input("a", 32), c.input("b", 32), c.input("ftz", 1)
    y = fadd(c, a, b, f.bits[0])
    if damage:  # the negative control: the lowest bit of the result stuck at 0
        y = Word(c, [y.bits[0] & ~y.bits[0]] + list(y.bits[1:]))
    c.output("y", y)
    return c


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(14)
    u = lambda: rng.integers(0, 2**32, size=n, dtype=np.uint64)  # noqa: E731
    near_a = (u() & 0xFF800000) | rng.integers(0, 2**23, size=n, dtype=np.uint64)
    shift = (rng.integers(-3, 4, size=n).astype(np.int64) << 23).astype(np.uint64)
    near_b = ((near_a + shift) & 0xFFFFFFFF) ^ (rng.integers(0, 2, size=n, dtype=np.uint64) << 31)
    a = [x for x in SPECIAL for _ in SPECIAL] + list(u()) + list(near_a) + list(u() & 0x81FFFFFF)
    b = [y for _ in SPECIAL for y in SPECIAL] + list(u()) + list(near_b) + list(u() & 0x81FFFFFF)
    return np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64)


def _run(c: Circuit, a: np.ndarray, b: np.ndarray, ftz: bool) -> np.ndarray:
    ins = {"a": a.astype(object), "b": b.astype(object), "ftz": np.full(len(a), int(ftz), dtype=object)}
    out = evaluate(c, ins)
    return np.array([int(v) for v in out["y"].ravel()], dtype=np.uint64)


@pytest.mark.parametrize("ftz", [False, True])
def test_fadd_circuit_is_bit_exact(ftz):
    a, b = _pairs(4000)
    want = fp32.add(a.astype(np.uint32), b.astype(np.uint32), "rn", ftz, False).astype(np.uint64)
    got = _run(_circuit(), a, b, ftz)
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, [tuple(hex(int(v[i])) for v in (a, b, got, want)) for i in bad[:5]]
    # the cases the adder must get right were exercised: cancellation to zero, overflow, NaN, subnormals
    assert (want == 0).any() and (want == 0x7F800000).any() and (want == 0x7FFFFFFF).any()
    assert ((want & 0x7F800000) == 0).sum() > 100


def test_damaged_fadd_circuit_is_caught():
    a, b = _pairs(200)
    want = fp32.add(a.astype(np.uint32), b.astype(np.uint32), "rn", False, False).astype(np.uint64)
    assert (_run(_circuit(damage=True), a, b, False) != want).any()
