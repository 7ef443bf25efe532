"""Compositions: an ALU (adder, shifter, logic, multiplexer, comparator in series) and a DeltaNet
register file with three independent read ports whose values flow across tokens.

Both run thousands of tokens on the chunked prefill path and on the one-token recurrent decode
path with the model's cache, and must match plain Python and the exact evaluator bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_helpers import M32, Harness, batch, ripple_pair, signed, small_config
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from qwengpu.compiler import Circuit, LayoutReport, compile_circuit

SETTINGS = settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck),
                    phases=[Phase.explicit, Phase.reuse, Phase.generate])


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _alu_ref(a: int, b: int, op: int) -> int:
    k = b & 31
    return [(a + b) & M32, (a - b) & M32, a & b, a | b, a ^ b, (a << k) & M32, a >> k,
            (signed(a) >> k) & M32][op]


def alu_circuit() -> tuple[Circuit, dict]:
    c = Circuit("alu")
    a, b = c.input("a", 32), c.input("b", 32)
    op = c.input("op", 3)
    k = b[:5]
    y = c.select(op, [a + b, a - b, a & b, a | b, a ^ b, a << k, a >> k, a.as_signed() >> k])
    c.output("y", y)
    c.output("zero", y == 0)
    c.output("neg", y[31])
    c.output("next", c.mux(y == 0, a, y + 1))  # depends on the ALU result: a deeper chain
    c.output("slt", a.as_signed() < b.as_signed())

    def y_of(a, b, op):
        return _alu_ref(a, b, op)

    ref = {
        "y": y_of,
        "zero": lambda a, b, op: int(y_of(a, b, op) == 0),
        "neg": lambda a, b, op: y_of(a, b, op) >> 31,
        "next": lambda a, b, op: a if y_of(a, b, op) == 0 else (y_of(a, b, op) + 1) & M32,
        "slt": lambda a, b, op: int(signed(a) < signed(b)),
    }
    return c, ref


def regfile_circuit(rows: int = 16, ports: int = 3) -> tuple[Circuit, object]:
    """Write ``x + y`` to row ``wa`` when ``we``; read three rows; add and compare what was read."""
    c = Circuit("regfile")
    nb = (rows - 1).bit_length()
    we = c.bit_input("we")
    wa = c.input("wa", nb)
    x, y = c.input("x", 32), c.input("y", 32)
    ras = [c.input(f"ra{i}", nb) for i in range(ports)]
    rf = c.memory("regs", rows=rows, width=32)
    rf.write(wa, x + y, we)
    reads = [rf.read(ra) for ra in ras]
    for i, r in enumerate(reads):
        c.output(f"r{i}", r)
    c.output("sum", reads[0] + reads[1])
    c.output("lt", reads[1].as_signed() < reads[2].as_signed())

    def ref(inp):
        mem: dict[int, int] = {}
        n = len(inp["we"])
        out = {k: [] for k in [f"r{i}" for i in range(ports)] + ["sum", "lt"]}
        for t in range(n):
            if int(inp["we"][t]):
                mem[int(inp["wa"][t])] = (int(inp["x"][t]) + int(inp["y"][t])) & M32
            vals = [mem.get(int(inp[f"ra{i}"][t]), 0) for i in range(ports)]
            for i, v in enumerate(vals):
                out[f"r{i}"].append(v)
            out["sum"].append((vals[0] + vals[1]) & M32)
            out["lt"].append(int(signed(vals[1]) < signed(vals[2])))
        return out

    return c, ref


@pytest.fixture(scope="module")
def alu():
    return Harness(*alu_circuit(), small_config())


@pytest.fixture(scope="module")
def regfile():
    return Harness(*regfile_circuit(), small_config())


def regfile_inputs(n: int, seed: int, write_share: float = 0.3) -> dict[str, np.ndarray]:
    inp = batch([("we", 1), ("wa", 4), ("x", 32), ("y", 32), ("ra0", 4), ("ra1", 4), ("ra2", 4)], n, seed)
    rng = np.random.default_rng(seed + 99)
    inp["we"] = (rng.random(n) < write_share).astype(np.int64).astype(object)
    return inp


@pytest.mark.slow  # 7 s; the ALU stays in test_alu_decode and test_alu_prefill_many
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), pairs=st.lists(ripple_pair(), max_size=16),
       ops=st.lists(st.integers(0, 7), max_size=16))
def test_alu_prefill(alu, seed, pairs, ops):
    inp = batch([("a", 32), ("b", 32), ("op", 3)], 2048, seed,
                {"a": [x for x, _ in pairs], "b": [y for _, y in pairs], "op": ops})
    alu.check(inp)


def test_alu_decode(alu):
    alu.check(batch([("a", 32), ("b", 32), ("op", 3)], 128, seed=3), mode="decode")


@pytest.mark.slow  # 12 s; the register file stays in the decode, batch and prefill-then-decode tests below
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), share=st.sampled_from([0.05, 0.3, 0.9]))
def test_regfile_prefill_long(regfile, seed, share):
    """4096 tokens (64 DeltaNet chunks): values written early are read thousands of tokens later."""
    regfile.check(regfile_inputs(4096, seed, share))


@pytest.mark.slow
def test_regfile_decode_long(regfile):
    """2048 tokens one at a time through the recurrent DeltaNet path and the cache (slow, ~22 s:
    the default run decodes 120 tokens after a prefill and 128 ALU tokens)."""
    regfile.check(regfile_inputs(2048, seed=11), mode="decode")


def test_regfile_batch_rows_are_independent(regfile):
    inp = {k: np.stack([v, np.roll(v, 5)]) for k, v in regfile_inputs(512, seed=5).items()}
    regfile.check(inp)


def test_regfile_reads_what_was_just_written(regfile):
    """Write-before-read within one token: a port reading the row being written sees the new value."""
    n = 256
    inp = regfile_inputs(n, seed=2, write_share=1.0)
    inp["ra0"] = inp["wa"].copy()
    regfile.check(inp)


def test_regfile_prefill_then_decode_continues_state(regfile):
    """Prefill a prefix with the cache, then decode the rest: the memory survives the switch."""
    from qwengpu.compiler import embed_inputs, read_outputs

    inp = regfile_inputs(320, seed=8)
    expect = regfile.python(inp)
    emb = embed_inputs(regfile.compiled, inp)
    m = regfile.model.model
    with torch.no_grad():
        out = m(inputs_embeds=emb[:, :200], use_cache=True)
        hs, cache = [out.last_hidden_state], out.cache
        for t in range(200, 320):
            o = m(inputs_embeds=emb[:, t:t + 1], cache=cache, use_cache=True)
            hs.append(o.last_hidden_state)
            cache = o.cache
    got = read_outputs(regfile.compiled, torch.cat(hs, dim=1))
    for k, v in expect.items():
        assert list(got[k].reshape(-1)) == list(v), k


@pytest.mark.slow
def test_regfile_decode_4096(regfile):
    regfile.check(regfile_inputs(4096, seed=12), mode="decode")


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_alu_prefill_many(alu, seed):
    alu.check(batch([("a", 32), ("b", 32), ("op", 3)], 8192, seed))


def test_margin_report_covers_mlp_and_memory(regfile):
    from qwengpu.compiler import margin_report

    rep = margin_report(regfile.model, regfile.compiled, regfile_inputs(512, seed=4))
    print(rep)
    assert rep["mlp_gate"] >= 7.25
    mem = {k: v for k, v in rep.items() if k.startswith("L")}
    assert mem and all(v > 0 for k, v in mem.items() if not k.endswith("value_levels")), mem
    assert all(v == 0 for k, v in mem.items() if k.endswith("value_levels"))


def test_ordinary_text_passes_through_unchanged(regfile):
    """With every dimension the circuit uses at 0 (ordinary text), each compiled layer adds exactly 0."""
    res = regfile.compiled.residual
    ours = list(res.signal_dims) + [res.one_dim, *res.filler_dims]
    x = torch.randn(2, 64, res.hidden_size) * 3
    x[..., ours] = 0
    m = regfile.model.model
    with torch.no_grad():
        for mode in ("prefill", "decode"):
            if mode == "prefill":
                h = m(inputs_embeds=x, use_cache=False, output_hidden_states=True)
                states = h.hidden_states
            else:
                cache, steps = None, []
                for t in range(8):
                    o = m(inputs_embeds=x[:, t:t + 1], cache=cache, use_cache=True, output_hidden_states=True)
                    cache = o.cache
                    steps.append(o.hidden_states)
                states = [torch.cat([s[i] for s in steps], dim=1) for i in range(len(steps[0]))]
            ref = x if mode == "prefill" else x[:, :8]
            for s in states[:-1]:  # every layer boundary before the final norm
                assert torch.equal(s, ref), mode


def test_generate_feeds_outputs_back_through_memory():
    """The autoregressive loop of the stock ``generate``: each emitted token is the next input.
    Token x writes m[x mod 16] := x, reads r = m[x div 16] and emits (x + r + 1) mod 256."""
    c = Circuit("walker")
    x = c.input("x", 8)
    m = c.memory("m", rows=16, width=8)
    m.write(x[:4], x)
    r = m.read(x[4:])
    c.output("y", x + r + 1)
    compiled = compile_circuit(c, small_config(256, 1024))
    from qwengpu.compiler import build_model

    model = build_model(compiled)
    with torch.no_grad():
        out = model.generate(torch.tensor([[201]]), max_new_tokens=300, do_sample=False)[0].tolist()
    mem: dict[int, int] = {}
    v, want = 201, [201]
    for _ in range(300):
        mem[v & 15] = v
        v = (v + mem.get(v >> 4, 0) + 1) & 255
        want.append(v)
    assert out == want


def test_two_banks_share_one_deltanet_layer():
    c = Circuit("two_banks")
    a, d = c.input("a", 3), c.input("d", 8)
    m1, m2 = c.memory("m1", 8, 8), c.memory("m2", 8, 8)
    m1.write(a, d)
    m2.write(a, d, enable=d[0])
    c.output("x", m1.read(c.input("r1", 3)))
    c.output("y", m2.read(c.input("r2", 3)))

    def ref(inp):
        mem1, mem2, out = {}, {}, {"x": [], "y": []}
        for t in range(len(inp["a"])):
            mem1[int(inp["a"][t])] = int(inp["d"][t])
            if int(inp["d"][t]) & 1:
                mem2[int(inp["a"][t])] = int(inp["d"][t])
            out["x"].append(mem1.get(int(inp["r1"][t]), 0))
            out["y"].append(mem2.get(int(inp["r2"][t]), 0))
        return out

    h = Harness(c, ref, small_config())
    (layer,) = [lp for lp in h.compiled.layers if lp.banks]
    assert [b.name for b in layer.banks] == ["m1", "m2"]
    assert LayoutReport.of(h.compiled).layers[layer.index].heads == 2
    widths = [("a", 3), ("d", 8), ("r1", 3), ("r2", 3)]
    h.check(batch(widths, 1500, seed=1))
    h.check(batch(widths, 64, seed=2), mode="decode")
