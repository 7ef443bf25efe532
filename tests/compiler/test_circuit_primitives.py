"""Every primitive through the stock Qwen3.5 modules: Python == exact evaluator == compiled model.

Each test compiles one family of primitives (every output is one primitive), builds a stock
``Qwen3_5ForCausalLM`` once per module, and feeds Hypothesis-chosen edge cases followed by
thousands of random tokens through the chunked prefill path; the recurrent one-token decode path
runs on a shorter prefix. The hidden state must satisfy the residual contract exactly (every
signal dimension exactly +-1) or the read fails.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_helpers import M32, Harness, batch, edge_values, ripple_pair, signed, small_config, word
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from qwengpu.compiler import Circuit

N_PREFILL = 2048
N_DECODE = 96
# model examples are long sequences: no shrinking (the failure message names the first bad token)
SETTINGS = settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The test machines are shared: one BLAS thread avoids oneDNN barrier stalls under load."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# ---------------------------------------------------------------------------------------------
# circuits


def logic_circuit() -> tuple[Circuit, dict]:
    c = Circuit("logic")
    a, b = c.input("a", 32), c.input("b", 32)
    p = c.bit_input("p")
    s = c.input("s", 4)
    h = c.input("h", 16)
    c.output("and", a & b)
    c.output("or", a | b)
    c.output("xor", a ^ b)
    c.output("not", ~a)
    c.output("mux", c.mux(p, a, b))
    c.output("eq", a == b)
    c.output("ne", a != b)
    c.output("eqc", a == 0xDEADBEEF)
    c.output("eq0", a == 0)
    c.output("decode", s.decode())
    c.output("encode", c.encode(h))
    c.output("maj3", c.threshold([a[0], b[0], p], [1, 1, 1], 2))
    c.output("lut", c.lut([a[1], b[1], p], lambda x, y, z: (x & y) ^ z))
    c.output("parity5", c.parity([a[2], a[3], b[2], b[3], p]))
    c.output("all4", c.all_of(list(s)))
    c.output("any4", c.any_of(list(s)))

    def encode(hv: int) -> int:
        out = 0
        for i in range(16):
            if (hv >> i) & 1:
                out |= i
        return out

    ref = {
        "and": lambda a, b, p, s, h: a & b,
        "or": lambda a, b, p, s, h: a | b,
        "xor": lambda a, b, p, s, h: a ^ b,
        "not": lambda a, b, p, s, h: M32 ^ a,
        "mux": lambda a, b, p, s, h: a if p else b,
        "eq": lambda a, b, p, s, h: int(a == b),
        "ne": lambda a, b, p, s, h: int(a != b),
        "eqc": lambda a, b, p, s, h: int(a == 0xDEADBEEF),
        "eq0": lambda a, b, p, s, h: int(a == 0),
        "decode": lambda a, b, p, s, h: 1 << s,
        "encode": lambda a, b, p, s, h: encode(h),
        "maj3": lambda a, b, p, s, h: int((a & 1) + (b & 1) + p >= 2),
        "lut": lambda a, b, p, s, h: (((a >> 1) & (b >> 1)) & 1) ^ p,
        "parity5": lambda a, b, p, s, h: ((a >> 2) ^ (a >> 3) ^ (b >> 2) ^ (b >> 3) ^ p) & 1,
        "all4": lambda a, b, p, s, h: int(s == 15),
        "any4": lambda a, b, p, s, h: int(s != 0),
    }
    return c, ref


def arith_circuit() -> tuple[Circuit, dict]:
    c = Circuit("arith")
    a, b = c.input("a", 32), c.input("b", 32)
    cin = c.bit_input("cin")
    sa, sb = a.as_signed(), b.as_signed()
    total, cout = c.add_carry(a, b, cin)
    c.output("add", a + b)
    c.output("sub", a - b)
    c.output("neg", -a)
    c.output("adc", total)
    c.output("cout", cout)
    c.output("ltu", a < b)
    c.output("leu", a <= b)
    c.output("gtu", a > b)
    c.output("geu", a >= b)
    c.output("lts", sa < sb)
    c.output("les", sa <= sb)
    c.output("gts", sa > sb)
    c.output("ges", sa >= sb)
    c.output("ltc", a < 1000)
    c.output("inc", a + 1)
    s = signed
    ref = {
        "add": lambda a, b, ci: (a + b) & M32,
        "sub": lambda a, b, ci: (a - b) & M32,
        "neg": lambda a, b, ci: (-a) & M32,
        "adc": lambda a, b, ci: (a + b + ci) & M32,
        "cout": lambda a, b, ci: (a + b + ci) >> 32,
        "ltu": lambda a, b, ci: int(a < b),
        "leu": lambda a, b, ci: int(a <= b),
        "gtu": lambda a, b, ci: int(a > b),
        "geu": lambda a, b, ci: int(a >= b),
        "lts": lambda a, b, ci: int(s(a) < s(b)),
        "les": lambda a, b, ci: int(s(a) <= s(b)),
        "gts": lambda a, b, ci: int(s(a) > s(b)),
        "ges": lambda a, b, ci: int(s(a) >= s(b)),
        "ltc": lambda a, b, ci: int(a < 1000),
        "inc": lambda a, b, ci: (a + 1) & M32,
    }
    return c, ref


def shift_circuit() -> tuple[Circuit, dict]:
    c = Circuit("shift")
    a, n = c.input("a", 32), c.input("n", 32)
    r = c.input("r", 5)
    c.output("shl", a << n)
    c.output("shr", a >> n)
    c.output("sar", a.as_signed() >> n)
    c.output("rotl", a.rotl(r))
    c.output("rotr", a.rotr(r))
    c.output("shl7", a << 7)
    c.output("shr13", a >> 13)
    c.output("sar5", a.as_signed() >> 5)
    c.output("rotl9", a.rotl(9))

    def rotl(x: int, k: int) -> int:
        k %= 32
        return ((x << k) | (x >> (32 - k))) & M32 if k else x

    ref = {
        "shl": lambda a, n, r: (a << n) & M32 if n < 32 else 0,
        "shr": lambda a, n, r: a >> n if n < 32 else 0,
        "sar": lambda a, n, r: (signed(a) >> min(n, 31)) & M32,
        "rotl": lambda a, n, r: rotl(a, r),
        "rotr": lambda a, n, r: rotl(a, 32 - r),
        "shl7": lambda a, n, r: (a << 7) & M32,
        "shr13": lambda a, n, r: a >> 13,
        "sar5": lambda a, n, r: (signed(a) >> 5) & M32,
        "rotl9": lambda a, n, r: rotl(a, 9),
    }
    return c, ref


def mul_circuit() -> tuple[Circuit, dict]:
    c = Circuit("mul")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("mul", a * b)
    c.output("mulc", a * 0x9E3779B9)
    ref = {"mul": lambda a, b: (a * b) & M32, "mulc": lambda a, b: (a * 0x9E3779B9) & M32}
    return c, ref


@pytest.fixture(scope="module")
def logic():
    return Harness(*logic_circuit(), small_config())


@pytest.fixture(scope="module")
def arith():
    return Harness(*arith_circuit(), small_config())


@pytest.fixture(scope="module")
def shifter():
    return Harness(*shift_circuit(), small_config())


@pytest.fixture(scope="module")
def multiplier():
    return Harness(*mul_circuit(), small_config())


def _shift_amounts(rng_seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(rng_seed + 1)
    small = rng.integers(0, 40, n).astype(object)  # mostly in-range, some clamped (>= 32)
    big = np.array([int(v) for v in rng.integers(0, M32 + 1, n)], dtype=object)
    return np.where(rng.random(n) < 0.8, small, big)


# ---------------------------------------------------------------------------------------------
# prefill: thousands of tokens per example


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), pairs=st.lists(ripple_pair(), max_size=24),
       sel=st.lists(st.integers(0, 15), max_size=24))
def test_logic_prefill(logic, seed, pairs, sel):
    inp = batch([("a", 32), ("b", 32), ("p", 1), ("s", 4), ("h", 16)], N_PREFILL, seed,
                {"a": [x for x, _ in pairs], "b": [y for _, y in pairs], "s": sel, "h": edge_values(16)})
    inp["b"][N_PREFILL // 2:] = np.where(np.arange(N_PREFILL - N_PREFILL // 2) % 3 == 0,
                                         inp["a"][N_PREFILL // 2:], inp["b"][N_PREFILL // 2:])
    logic.check(inp)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), pairs=st.lists(ripple_pair(), max_size=32),
       carry=st.lists(st.integers(0, 1), max_size=32))
def test_arith_prefill(arith, seed, pairs, carry):
    inp = batch([("a", 32), ("b", 32), ("cin", 1)], N_PREFILL, seed,
                {"a": [x for x, _ in pairs], "b": [y for _, y in pairs], "cin": carry})
    arith.check(inp)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), vals=st.lists(word(), max_size=24),
       amounts=st.lists(st.one_of(st.integers(0, 40), word()), max_size=24))
def test_shift_prefill(shifter, seed, vals, amounts):
    inp = batch([("a", 32), ("n", 32), ("r", 5)], N_PREFILL, seed, {"a": vals})
    inp["n"] = _shift_amounts(seed, N_PREFILL)
    inp["n"][: len(amounts)] = np.array(amounts, dtype=object)
    shifter.check(inp)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), pairs=st.lists(st.tuples(word(), word()), max_size=24))
def test_mul_prefill(multiplier, seed, pairs):
    inp = batch([("a", 32), ("b", 32)], N_PREFILL, seed,
                {"a": [x for x, _ in pairs], "b": [y for _, y in pairs]})
    multiplier.check(inp)


# ---------------------------------------------------------------------------------------------
# decode: one token per forward call, through the model's cache


@pytest.mark.parametrize("family", ["logic", "arith", "shifter", "multiplier"])
def test_decode_path(request, family):
    h = request.getfixturevalue(family)
    widths = [(n, node.width) for n, node in h.circuit.inputs.items()]
    inp = batch(widths, N_DECODE, seed=7, extra={n: edge_values(w)[::-1] for n, w in widths if w > 1})
    if family == "shifter":
        inp["n"] = _shift_amounts(7, N_DECODE)
    h.check(inp, mode="decode")


# ---------------------------------------------------------------------------------------------
# tokens: input_ids in, argmax of the stock lm_head out


@pytest.fixture(scope="module")
def small_alu():
    """6-bit operands: the vocabulary is every (a, b) pair, 4096 tokens."""
    c = Circuit("small_alu")
    a, b = c.input("a", 6), c.input("b", 6)
    c.output("sum", a + b)
    c.output("lt", a.as_signed() < b.as_signed())
    ref = {"sum": lambda a, b: (a + b) & 63, "lt": lambda a, b: int(signed(a, 6) < signed(b, 6))}
    return Harness(c, ref, small_config(hidden=256, intermediate=1024))


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_token_io_exhaustive(small_alu, mode):
    """All 4096 operand pairs (prefill: 16 sequences of 256) / a slice (decode), read as argmax
    tokens of the stock lm_head."""
    a, b = np.meshgrid(np.arange(64), np.arange(64), indexing="ij")
    a, b = a.reshape(16, 256).astype(object), b.reshape(16, 256).astype(object)
    if mode == "decode":
        a, b = a.reshape(-1)[::37], b.reshape(-1)[::37]
    small_alu.check({"a": a, "b": b}, mode=mode, tokens=True)


def test_token_logit_margin(small_alu):
    """The matching output token wins by exactly 2 logits (one flipped bit costs 2)."""
    from qwengpu.compiler.build import TokenIO

    io = TokenIO.of(small_alu.compiled)
    ids = io.encode({"a": np.arange(64, dtype=object), "b": np.arange(64, dtype=object)[::-1]})
    with torch.no_grad():
        logits = small_alu.model(input_ids=ids).logits[0]
    top2 = logits.topk(2, dim=-1).values
    assert bool(((top2[:, 0] - top2[:, 1]) == 2).all())
    assert bool((top2[:, 0] == 7).all())  # 7 output bits, all agreeing


# ---------------------------------------------------------------------------------------------
# longer runs (pytest -m slow)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["logic", "arith", "shifter", "multiplier"])
def test_many_long_sequences(request, family):
    h = request.getfixturevalue(family)
    widths = [(n, node.width) for n, node in h.circuit.inputs.items()]
    for seed in range(8):
        inp = batch(widths, 8192, seed=1000 + seed)
        if family == "shifter":
            inp["n"] = _shift_amounts(seed, 8192)
        h.check(inp)
    h.check(batch(widths, 1024, seed=77), mode="decode")
