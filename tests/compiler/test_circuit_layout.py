"""Scheduling and shapes: layout reports, slot reuse, fit errors, two shapes, the Qwen3.5-2B shape.

The layout numbers asserted here are the design's cost model (layers, residual slots, neurons);
a change that makes a core primitive deeper or wider must update them on purpose.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_helpers import M32, Harness, batch, signed, small_config

from qwengpu.compiler import (
    Circuit,
    FitError,
    LayoutReport,
    build_model,
    check_against,
    compile_circuit,
    gate_margins,
    run,
    shipped_configs,
    text_config,
)
from qwengpu.compiler.mlp import certify
from qwengpu.compiler.schedule import neuron_rows


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def adder() -> Circuit:
    c = Circuit("adder32")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("sum", a + b)
    return c


def comparator() -> Circuit:
    c = Circuit("compare32")
    a, b = c.input("a", 32), c.input("b", 32)
    c.output("ltu", a < b)
    c.output("lts", a.as_signed() < b.as_signed())
    c.output("eq", a == b)
    return c


def shifter() -> Circuit:
    c = Circuit("shift32")
    a, n = c.input("a", 32), c.input("n", 5)
    c.output("shl", a << n)
    c.output("shr", a >> n)
    c.output("sar", a.as_signed() >> n)
    return c


def mux() -> Circuit:
    c = Circuit("mux32")
    a, b, p = c.input("a", 32), c.input("b", 32), c.bit_input("p")
    c.output("y", c.mux(p, a, b))
    return c


def regfile() -> Circuit:
    c = Circuit("regfile16x32")
    we, wa, wd = c.bit_input("we"), c.input("wa", 4), c.input("wd", 32)
    rf = c.memory("regs", rows=16, width=32)
    rf.write(wa, wd, we)
    for i in range(3):
        c.output(f"r{i}", rf.read(c.input(f"ra{i}", 4)))
    return c


# (circuit, layers, signal slots, MLP neurons) on the small shape. The register file needs one
# extra mixer-free layer: the stock cache asks a full-attention layer for the sequence length.
EXPECTED = {
    "adder32": (adder, 2, 64, 149),
    "compare32": (comparator, 2, 64, 74),
    "shift32": (shifter, 1, 96, 821),
    "mux32": (mux, 1, 65, 96),
    "regfile16x32": (regfile, 2, 145, 0),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_layout_report(name, capsys):
    make, layers, slots, neurons = EXPECTED[name]
    compiled = compile_circuit(make(), small_config())
    rep = LayoutReport.of(compiled)
    with capsys.disabled():
        print("\n" + str(rep))
    assert (rep.n_layers, rep.signal_dims, rep.total_neurons) == (layers, slots, neurons), rep.summary()
    assert rep.max_neurons <= rep.intermediate_size
    text = str(rep)
    assert f"{rep.n_layers} layers" in text and "MLP neurons" in text
    amap = rep.allocation_map()
    assert amap.count("\n") >= rep.signal_dims
    if name == "regfile16x32":
        assert rep.layers[0].heads == 3 and rep.layers[0].banks == ["regs"]


def test_dead_slots_are_reused_after_a_reset():
    """A long chain reuses dimensions: slots stay far below the number of signals."""
    c = Circuit("chain")
    x = c.input("x", 32)
    k = c.input("k", 32)
    for _ in range(6):
        x = (x ^ k) + k
    c.output("y", x)
    compiled = compile_circuit(c, small_config())
    rep = LayoutReport.of(compiled)
    n_signals = len(compiled.dim_of)
    assert rep.signal_dims < n_signals / 3
    assert sum(r.resets for r in rep.layers) > 0
    assert any(len(t) > 2 for _, t in rep.slots)
    h = Harness(c, {}, small_config())
    inp = batch([("x", 32), ("k", 32)], 512, seed=1)
    ref_x = []
    for xv, kv in zip(inp["x"], inp["k"], strict=True):
        v = int(xv)
        for _ in range(6):
            v = ((v ^ int(kv)) + int(kv)) & M32
        ref_x.append(v)
    got = run(h.model, h.compiled, inp)
    assert list(got["y"]) == ref_x


def test_two_shapes_same_results():
    c = Circuit("two_shapes")
    a, b, op = c.input("a", 32), c.input("b", 32), c.input("op", 2)
    c.output("y", c.select(op, [a + b, a - b, a ^ b, a >> b[:5]]))
    c.output("lt", a.as_signed() < b.as_signed())
    inp = batch([("a", 32), ("b", 32), ("op", 2)], 1024, seed=4)
    outs = []
    for cfg in (small_config(256, 1024, linear_num_key_heads=4, linear_num_value_heads=4),
                small_config(512, 2048)):
        compiled = compile_circuit(c, cfg)
        outs.append(run(build_model(compiled), compiled, inp))
    for k in outs[0]:
        assert list(outs[0][k]) == list(outs[1][k])
    assert list(outs[0]["lt"]) == [int(signed(int(x)) < signed(int(y))) for x, y in zip(inp["a"], inp["b"],
                                                                                        strict=True)]


def test_circuit_built_twice_is_independent():
    c1, c2 = adder(), adder()
    assert [n.name for n in c1.nodes] == [n.name for n in c2.nodes]
    k1, k2 = compile_circuit(c1, small_config()), compile_circuit(c2, small_config())
    assert k1.fingerprint() == k2.fingerprint()
    assert not set(map(id, k1.dim_of)) & set(map(id, k2.dim_of))


def test_fit_errors_say_what_does_not_fit():
    with pytest.raises(FitError, match="residual"):
        compile_circuit(adder(), small_config(hidden=64, intermediate=1024))
    rot = Circuit("rot")
    a, r = rot.input("a", 32), rot.input("r", 5)
    rot.output("y", a.rotl(r))
    with pytest.raises(FitError, match="intermediate_size"):
        compile_circuit(rot, small_config(intermediate=16))
    big = Circuit("bigmem")
    m = big.memory("m", rows=64, width=512)
    m.write(big.input("wa", 6), big.input("wd", 512))
    for i in range(4):
        big.output(f"r{i}", m.read(big.input(f"ra{i}", 6)))
    with pytest.raises(FitError, match="key heads"):
        compile_circuit(big, small_config(hidden=4096))


def test_wide_layers_spill_into_the_next_layer():
    """A layer that is full pushes formulas to the next MLP instead of failing."""
    c = Circuit("spill")
    a, r, q = c.input("a", 32), c.input("r", 5), c.input("q", 5)
    c.output("left", a.rotl(r))
    c.output("right", a.rotr(q))  # (rotr by r would share rotl's neurons: same gate and up rows)
    compiled = compile_circuit(c, small_config(intermediate=1100))
    assert compiled.n_layers == 2
    assert all(len(lp.mlp) <= 1100 for lp in compiled.layers)


@pytest.mark.parametrize("make", [adder, comparator, shifter, mux])
def test_margins_and_magnitude_certificate(make):
    """Measured gate margins stay >= 7.25 (-96 vs -88.75) and every sum stays below 2**24."""
    c = make()
    compiled = compile_circuit(c, small_config())
    for lp in compiled.layers:
        assert certify(neuron_rows(compiled, lp)).ok()
    model = build_model(compiled)
    widths = [(n, node.width) for n, node in c.inputs.items()]
    assert gate_margins(model, compiled, batch(widths, 512, seed=9)) >= 7.25


def test_shipped_2b_config():
    assert "qwen3_5_2b_text" in shipped_configs()
    cfg = text_config("qwen3_5_2b_text")
    assert (cfg.hidden_size, cfg.intermediate_size, cfg.linear_num_key_heads, cfg.linear_key_head_dim) == (
        2048, 6144, 16, 128)
    assert cfg.layer_types[3] == "full_attention" and cfg.layer_types[0] == "linear_attention"
    assert check_against("qwen3_5_2b_text", {"text_config": {**cfg.to_dict()}}) == []
    assert check_against("qwen3_5_2b_text", {"hidden_size": 1024}) != []


def test_2b_layer_shape_register_file_and_alu():
    """The 2B layer shape from the shipped JSON: only the layers the circuit needs are built."""
    c = Circuit("core2b")
    we, wa = c.bit_input("we"), c.input("wa", 5)
    a, b = c.input("a", 32), c.input("b", 32)
    rf = c.memory("regs", rows=32, width=32)
    rf.write(wa, a - b, we)
    r0, r1 = rf.read(c.input("ra0", 5)), rf.read(c.input("ra1", 5))
    c.output("sum", r0 + r1)
    c.output("slt", r0.as_signed() < r1.as_signed())
    c.output("sh", r0 << r1[:5])
    cfg = text_config("qwen3_5_2b_text")
    compiled = compile_circuit(c, cfg, layer_types="config")
    print("\n" + str(LayoutReport.of(compiled)))
    assert compiled.n_layers <= 4
    assert all(t in ("linear_attention", "full_attention") for t in compiled.layer_types)
    for lp in compiled.layers:
        assert not lp.banks or lp.layer_type == "linear_attention"
    model = build_model(compiled)
    assert model.config.hidden_size == 2048 and model.config.num_hidden_layers == compiled.n_layers
    n = 192
    inp = batch([("we", 1), ("wa", 5), ("a", 32), ("b", 32), ("ra0", 5), ("ra1", 5)], n, seed=21)
    mem: dict[int, int] = {}
    want = {"sum": [], "slt": [], "sh": []}
    for t in range(n):
        if inp["we"][t]:
            mem[int(inp["wa"][t])] = (int(inp["a"][t]) - int(inp["b"][t])) & M32
        x, y = mem.get(int(inp["ra0"][t]), 0), mem.get(int(inp["ra1"][t]), 0)
        want["sum"].append((x + y) & M32)
        want["slt"].append(int(signed(x) < signed(y)))
        want["sh"].append((x << (y & 31)) & M32)
    got = run(model, compiled, inp)
    assert {k: list(v) for k, v in got.items()} == want
    got_dec = run(model, compiled, {k: v[:24] for k, v in inp.items()}, mode="decode")
    assert {k: list(v) for k, v in got_dec.items()} == {k: v[:24] for k, v in want.items()}
    small = compile_circuit(c, small_config())
    got_small = run(build_model(small), small, inp)
    assert {k: list(v) for k, v in got_small.items()} == want
    del model


def test_layer_types_config_pattern_keeps_memory_off_full_attention():
    c = Circuit("deep")
    x = c.input("x", 8)
    m = c.memory("m", rows=4, width=8)
    for _ in range(3):
        x = x + 1
    m.write(c.input("wa", 2), x)
    c.output("r", m.read(c.input("ra", 2)))
    cfg = small_config(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"])
    compiled = compile_circuit(c, cfg, layer_types="config")
    (bank_layer,) = [lp for lp in compiled.layers if lp.banks]
    assert bank_layer.layer_type == "linear_attention"
    assert np.all(np.array(compiled.layer_types[1::2]) == "full_attention")
