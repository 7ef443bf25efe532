"""The circuit description and its exact evaluator, without any model: many Hypothesis examples.

Widths vary (1..40 bits) so single-chunk, exact-chunk and ragged-chunk adders, comparators and
shifters are all exercised against plain Python semantics.
"""

from __future__ import annotations

import numpy as np
import pytest
from circuit_helpers import M32, small_config
from hypothesis import given, settings
from hypothesis import strategies as st

from qwengpu.compiler import Circuit, CircuitError, ContractError, FitError, compile_circuit, evaluate
from qwengpu.compiler.residual import NORM_LOG4, filler_count, plan_residual, sum_of_squares

FAST = settings(max_examples=60, deadline=None)


def sgn(x: int, w: int) -> int:
    return x - (1 << w) if x >> (w - 1) else x


@st.composite
def operands(draw, max_width=40, n=24):
    w = draw(st.integers(1, max_width))
    m = (1 << w) - 1
    edge = st.sampled_from(sorted({0, 1, m, m >> 1, (m >> 1) + 1, m - 1}))
    val = st.one_of(edge, st.integers(0, m))
    a = draw(st.lists(val, min_size=1, max_size=n))
    b = draw(st.lists(val, min_size=len(a), max_size=len(a)))
    b = [(m ^ x) if i % 5 == 1 else y for i, (x, y) in enumerate(zip(a, b, strict=True))]  # ripple carries
    chunk = draw(st.sampled_from([2, 3, 8]))
    return w, np.array(a, dtype=object), np.array(b, dtype=object), chunk


def _eval(build, w, a, b, chunk):
    c = Circuit("t", chunk=chunk)
    x, y = c.input("a", w), c.input("b", w)
    for name, val in build(c, x, y).items():
        c.output(name, val)
    return evaluate(c, {"a": a, "b": b})


@FAST
@given(operands())
def test_arithmetic_and_compare(ops):
    w, a, b, chunk = ops
    m = (1 << w) - 1
    out = _eval(lambda c, x, y: {
        "add": x + y, "sub": x - y, "neg": -x, "ltu": x < y, "leu": x <= y, "gtu": x > y, "geu": x >= y,
        "lts": x.as_signed() < y.as_signed(), "ges": x.as_signed() >= y.as_signed(), "eq": x == y,
        "ne": x != y, "cout": c.add_carry(x, y, 1)[1],
    }, w, a, b, chunk)
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        p, q = int(p), int(q)
        assert out["add"][i] == (p + q) & m
        assert out["sub"][i] == (p - q) & m
        assert out["neg"][i] == (-p) & m
        assert out["ltu"][i] == int(p < q) and out["leu"][i] == int(p <= q)
        assert out["gtu"][i] == int(p > q) and out["geu"][i] == int(p >= q)
        assert out["lts"][i] == int(sgn(p, w) < sgn(q, w)) and out["ges"][i] == int(sgn(p, w) >= sgn(q, w))
        assert out["eq"][i] == int(p == q) and out["ne"][i] == int(p != q)
        assert out["cout"][i] == (p + q + 1) >> w


@FAST
@given(operands(max_width=24, n=16))
def test_multiply(ops):
    w, a, b, chunk = ops
    m = (1 << w) - 1
    out = _eval(lambda c, x, y: {"mul": x * y, "mulc": x * 0x2D, "sq": x * x}, w, a, b, chunk)
    for i, (p, q) in enumerate(zip(a, b, strict=True)):
        p, q = int(p), int(q)
        assert out["mul"][i] == (p * q) & m
        assert out["mulc"][i] == (p * 0x2D) & m
        assert out["sq"][i] == (p * p) & m


@FAST
@given(st.sampled_from([1, 2, 7, 8, 16, 24, 32]), st.lists(st.integers(0, M32), min_size=1, max_size=16),
       st.lists(st.integers(0, 70), min_size=16, max_size=16), st.sampled_from([3, 5, 6, 32]))
def test_variable_shifts(w, vals, amounts, amount_width):
    m = (1 << w) - 1
    a = np.array([v & m for v in vals], dtype=object)
    k = np.array([amounts[i] & ((1 << amount_width) - 1) for i in range(len(vals))], dtype=object)
    c = Circuit("sh")
    x, s = c.input("a", w), c.input("k", amount_width)
    c.output("shl", x << s)
    c.output("shr", x >> s)
    c.output("sar", x.as_signed() >> s)
    if w & (w - 1) == 0 and amount_width >= max(1, (w - 1).bit_length()):
        c.output("rotl", x.rotl(s))
    out = evaluate(c, {"a": a, "k": k})
    for i, (p, n) in enumerate(zip(a, k, strict=True)):
        p, n = int(p), int(n)
        assert out["shl"][i] == ((p << n) & m if n < w else 0)
        assert out["shr"][i] == (p >> n if n < w else 0)
        assert out["sar"][i] == (sgn(p, w) >> min(n, w - 1)) & m
        if "rotl" in out:
            r = n % w
            assert out["rotl"][i] == (((p << r) | (p >> (w - r))) & m if r else p)


@FAST
@given(st.integers(1, 6), st.data())
def test_decode_select_lut(n, data):
    idx = data.draw(st.lists(st.integers(0, (1 << n) - 1), min_size=1, max_size=20))
    opts = data.draw(st.lists(st.integers(0, 255), min_size=1, max_size=1 << n))
    table = data.draw(st.lists(st.integers(0, 1), min_size=1 << min(n, 4), max_size=1 << min(n, 4)))
    c = Circuit("dsl")
    i = c.input("i", n)
    c.output("onehot", i.decode())
    c.output("back", c.encode(i.decode()))
    c.output("sel", c.select(i, [c.const(v, 8) for v in opts]))
    k = min(n, 4)
    c.output("lut", c.lut(list(i)[:k], lambda *bits: table[sum(b << j for j, b in enumerate(bits))]))
    out = evaluate(c, {"i": np.array(idx, dtype=object)})
    for t, v in enumerate(idx):
        assert out["onehot"][t] == 1 << v
        assert out["back"][t] == v
        assert out["sel"][t] == (opts[v] if v < len(opts) else 0)
        assert out["lut"][t] == table[v & ((1 << k) - 1)]


def test_constants_fold_without_nodes():
    c = Circuit("fold")
    a = c.input("a", 8)
    before = len(c.nodes)
    same = (a & 0xFF) | 0
    assert len(c.nodes) == before  # and/or with constants fold to the bits themselves: no node
    c2 = Circuit("fold2")
    x = c2.input("x", 8)
    y = c2.mux(c2.bit(1), x, ~x)
    assert y is x
    assert all(b.sig is not None for b in (x << 0).bits)
    c.output("same", same)
    out = evaluate(c, {"a": np.arange(256, dtype=object)})
    assert list(out["same"]) == list(range(256))


def test_built_twice_gives_two_independent_circuits():
    def make():
        c = Circuit("adder")
        a, b = c.input("a", 8), c.input("b", 8)
        c.output("s", a + b)
        return c

    c1, c2 = make(), make()
    assert c1.nodes is not c2.nodes and [n.name for n in c1.nodes] == [n.name for n in c2.nodes]
    v = {"a": np.arange(256, dtype=object), "b": np.arange(256, dtype=object)[::-1]}
    assert list(evaluate(c1, v)["s"]) == list(evaluate(c2, v)["s"])


def test_circuit_errors():
    c = Circuit("err")
    a, b = c.input("a", 8), c.input("b", 4)
    with pytest.raises(CircuitError, match="width"):
        _ = a + b
    with pytest.raises(TypeError, match="truth value"):
        if a == a:  # noqa: PLR0124
            pass
    with pytest.raises(CircuitError, match="duplicate"):
        c.input("a", 3)
    m = c.memory("m", rows=4, width=8)
    m.write(b[:2], a)
    with pytest.raises(CircuitError, match="one write port"):
        m.write(b[:2], a)
    with pytest.raises(CircuitError, match="address"):
        m.read(b)
    # a write that depends on a read of the same memory in the same token: impossible
    c2 = Circuit("rmw")
    x = c2.input("x", 2)
    m2 = c2.memory("m", rows=4, width=2)
    r = m2.read(x)
    m2.write(x, r + 1)
    c2.output("r", r)
    with pytest.raises(CircuitError, match="cycle"):
        compile_circuit(c2, small_config())
    c3 = Circuit("unwritten")
    m3 = c3.memory("m", rows=2, width=1)
    c3.output("r", m3.read(c3.input("x", 1)))
    with pytest.raises(CircuitError, match="never written"):
        compile_circuit(c3, small_config())


def test_memory_semantics_rows_not_power_of_two():
    """Addresses >= rows: writes are dropped, reads give zeros (as memory.py's banks do)."""
    c = Circuit("mem5")
    wa, wd, ra = c.input("wa", 3), c.input("wd", 4), c.input("ra", 3)
    m = c.memory("m", rows=5, width=4)
    m.write(wa, wd)
    c.output("r", m.read(ra))
    inp = {"wa": np.array([6, 1, 7, 3]), "wd": np.array([9, 5, 8, 2]), "ra": np.array([6, 1, 7, 1])}
    out = evaluate(c, inp)
    assert list(out["r"]) == [0, 5, 0, 5]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 600_000))
def test_sum_of_squares(n):
    v = sum_of_squares(n, 256, 16)
    assert sum(x * x for x in v) == n and all(1 <= x <= 256 for x in v)


@pytest.mark.parametrize("hidden", [64, 256, 1000, 2048, 2560, 5120])
def test_residual_norm_is_exact_power_of_four(hidden):
    nf = filler_count(hidden)
    for n_sig in (0, 1, hidden // 3, hidden - 1 - nf):
        fillers = list(range(hidden - 2, hidden - 2 - nf, -1))
        layout = plan_residual(hidden, list(range(n_sig)), hidden - 1, fillers)
        x = layout.base().astype(np.float64)
        assert (x * x).sum() == 4 ** NORM_LOG4 * hidden
        layout.check(x)


def test_residual_check_catches_one_ulp():
    layout = plan_residual(256, list(range(10)), 255, [254, 253, 252, 251, 250])
    x = layout.base()
    x[3] = np.nextafter(np.float32(-1.0), np.float32(0.0))
    with pytest.raises(ContractError, match="signal dim 3"):
        layout.check(x)
    y = layout.base()
    y[100] = 1e-30
    with pytest.raises(ContractError, match="unused dim 100"):
        layout.check(y)


def test_fit_error_is_a_value_error():
    assert issubclass(FitError, ValueError)
