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


def _mode_circuit() -> Circuit:
    c = Circuit("fadd_modes")
    a, b, f = c.input("a", 32), c.input("b", 32), c.input("ftz", 1)
    neg, odd = c.input("neg", 1), c.input("odd", 1)
    c.output("y", fadd(c, a, b, f.bits[0], neg=neg.bits[0], odd=odd.bits[0]))
    return c


@pytest.mark.parametrize("ftz", [False, True])
@pytest.mark.parametrize("mode", ["rn", "sub", "odd", "subodd"])
def test_fadd_circuit_modes_are_bit_exact(mode, ftz):
    """The machine's adder with its two ROM bits (circuit.float_adder): ``neg`` is ``fp32.sub``,
    ``odd`` is ``fp32.add_odd``, both are ``fp32.add_odd`` of -b (the fma's ``fsub.odd`` row),
    neither is the plain add."""
    a, b = _pairs(2000)
    a32, b32 = a.astype(np.uint32), b.astype(np.uint32)
    want = {"rn": lambda: fp32.add(a32, b32, "rn", ftz), "sub": lambda: fp32.sub(a32, b32, "rn", ftz),
            "odd": lambda: fp32.add_odd(a32, b32, ftz),
            "subodd": lambda: fp32.add_odd(a32, b32 ^ np.uint32(0x80000000), ftz)}[mode]().astype(np.uint64)
    n = len(a)
    flag = lambda v: np.full(n, int(v), dtype=object)  # noqa: E731
    ins = {"a": a.astype(object), "b": b.astype(object), "ftz": flag(ftz),
           "neg": flag(mode in ("sub", "subodd")), "odd": flag(mode in ("odd", "subodd"))}
    got = np.array([int(v) for v in evaluate(_mode_circuit(), ins)["y"].ravel()], dtype=np.uint64)
    bad = np.nonzero(got != want)[0]
    assert len(bad) == 0, [tuple(hex(int(v[i])) for v in (a, b, got, want)) for i in bad[:5]]
    if mode == "odd":  # rounding to odd differs from rounding to nearest on these pairs
        assert (want != fp32.add(a32, b32, "rn", ftz)).sum() > 1000
    if mode == "subodd":
        assert (want != fp32.sub(a32, b32, "rn", ftz)).sum() > 1000


def _odd_by_definition(x: int, y: int) -> int | None:
    """Round-to-odd of the exact sum of two finite float32 bit patterns, from rationals (None for
    an exact zero sum, whose sign follows the add's rules)."""
    from fractions import Fraction

    s = sum(Fraction(float(np.array([v], dtype=np.uint32).view(np.float32)[0])) for v in (x, y))
    if s == 0:
        return None
    sign = 0x80000000 if s < 0 else 0
    m = abs(s)
    if m >= 2**128:
        return sign | 0x7F800000
    e = max(m.numerator.bit_length() - m.denominator.bit_length() - 1, -126)
    while Fraction(2) ** (e + 1) <= m:
        e += 1
    while e > -126 and Fraction(2) ** e > m:
        e -= 1
    ulp = Fraction(2) ** (e - 23)
    q = int(m / ulp)  # truncated: toward zero
    q |= int(q * ulp != m)
    return sign | int(np.array([float(q * ulp)], dtype=np.float32).view(np.uint32)[0])


def test_add_odd_is_round_to_odd():
    """``fp32.add_odd`` against round-to-odd computed on rationals: random finite pairs, pairs a
    few binades apart (inexact sums), subnormals, sums near the overflow threshold."""
    rng = np.random.default_rng(21)
    n = 3000
    a = rng.integers(0, 2**32, n, dtype=np.uint64)
    b = (a & 0xFF800000) + (rng.integers(-30, 30, n).astype(np.int64) << 23).astype(np.uint64)
    b = (b & 0xFF800000) | rng.integers(0, 2**23, n, dtype=np.uint64)
    sub = rng.integers(0, 2**24, 300, dtype=np.uint64)  # subnormal and small normal
    a = np.concatenate([a, sub, [0x7F7FFFFF, 0x7F7FFFFF, 0x7F000000]])
    b = np.concatenate([b & 0xFFFFFFFF, sub[::-1], [0x7F7FFFFF, 0x73000000, 0x7F7FFFFF]])
    a32, b32 = a.astype(np.uint32), b.astype(np.uint32)
    got = fp32.add_odd(a32, b32)
    finite = ((a32 & 0x7F800000) != 0x7F800000) & ((b32 & 0x7F800000) != 0x7F800000)
    checked = inexact = 0
    for i in np.nonzero(finite)[0]:
        want = _odd_by_definition(int(a32[i]), int(b32[i]))
        if want is None:
            continue
        assert int(got[i]) == want, (hex(int(a32[i])), hex(int(b32[i])), hex(int(got[i])), hex(want))
        checked += 1
        inexact += want != int(fp32.add(a32[i:i + 1], b32[i:i + 1])[0])
    assert checked > 2500 and inexact > 500
    assert int(got[-3]) == 0x7F800000 and int(got[-2]) == 0x7F7FFFFF  # overflow; odd rounds down
