"""Negative controls and bfloat16: the tests can fail, and which primitives survive bfloat16.

Damaging a single compiled weight must make the three-way check fail (through a wrong value or a
broken residual contract), and a formula that is not a bit must be rejected by the evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from circuit_helpers import Harness, batch, small_config
from test_circuit_compositions import regfile_circuit, regfile_inputs
from test_circuit_primitives import arith_circuit, logic_circuit, shift_circuit

from qwengpu.compiler import Circuit, ContractError, EvaluationError, evaluate
from qwengpu.compiler.ir import Formula


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def arith():
    return Harness(*arith_circuit(), small_config())


def _arith_inputs(n=512, seed=3):
    return batch([("a", 32), ("b", 32), ("cin", 1)], n, seed)


def test_intact_model_passes(arith):
    arith.check(_arith_inputs())


@pytest.mark.parametrize("which", ["down_ulp", "gate_plus_one", "up_zero", "norm"])
def test_damaging_one_weight_is_detected(arith, which):
    model = arith.model
    layer = model.model.layers[1].mlp
    with torch.no_grad():
        if which == "down_ulp":  # one ulp on one down-projection weight of a carry neuron
            w = layer.down_proj.weight
            d, n = (int(i) for i in torch.nonzero(w)[len(torch.nonzero(w)) // 2])
            saved = w[d, n].clone()
            w[d, n] = torch.nextafter(saved, torch.tensor(float("inf")))
            param, idx = w, (d, n)
        elif which == "gate_plus_one":  # shifts one threshold by a fraction of a step
            w = layer.gate_proj.weight
            n = int(torch.nonzero(w.abs().sum(1))[3])
            idx = (n, int(torch.nonzero(w[n])[0]))
            saved = w[idx].clone()
            w[idx] = saved + 1.0
            param = w
        elif which == "up_zero":
            w = layer.up_proj.weight
            n = int(torch.nonzero(w.abs().sum(1))[5])
            idx = (n, int(torch.nonzero(w[n])[0]))
            saved = w[idx].clone()
            w[idx] = 0.0
            param = w
        else:  # one RMSNorm weight off by one ulp: the norm is no longer the identity
            w = model.model.layers[0].post_attention_layernorm.weight
            idx = (0,)
            saved = w[idx].clone()
            w[idx] = torch.nextafter(saved, torch.tensor(0.0))
            param = w
    try:
        with pytest.raises((AssertionError, ContractError)):
            arith.check(_arith_inputs())
    finally:
        with torch.no_grad():
            param[idx] = saved
    arith.check(_arith_inputs(64))  # restored


def test_damaged_memory_weight_is_detected():
    h = Harness(*regfile_circuit(), small_config())
    (mem_layer,) = [lp.index for lp in h.compiled.layers if lp.banks]
    out = h.model.model.layers[mem_layer].linear_attn.out_proj.weight
    with torch.no_grad():
        d, n = (int(i) for i in torch.nonzero(out)[7])
        out[d, n] = out[d, n] * (1 + 2**-20)
    with pytest.raises((AssertionError, ContractError)):
        h.check(regfile_inputs(300, seed=1))


def test_evaluator_rejects_a_formula_that_is_not_a_bit():
    c = Circuit("bad")
    a = c.input("a", 2)
    (bit,) = c.formulas("bad", [Formula(a[0].lin() + a[1].lin())])  # 2 when both are set
    c.output("y", bit)
    with pytest.raises(EvaluationError, match="not a bit"):
        evaluate(c, {"a": np.array([0, 1, 2, 3])})


# ---------------------------------------------------------------------------------------------
# bfloat16: the same circuits built in bfloat16 (weights rounded, memory calibrated for bf16)

BF16_EXACT = {
    "logic": ["and", "or", "xor", "not", "mux", "eq", "ne", "eqc", "eq0", "decode", "encode", "maj3", "lut",
              "parity5", "all4", "any4"],
    "shift": ["shl", "shr", "sar", "rotl", "rotr", "shl7", "shr13", "sar5", "rotl9"],
}


def _bf16_check(make, names, seed=6, n=1024):
    c, ref = make()
    h = Harness(c, {k: ref[k] for k in names}, small_config(), dtype=torch.bfloat16)
    widths = [(nm, node.width) for nm, node in c.inputs.items()]
    inp = batch(widths, n, seed)
    if "n" in inp:
        inp["n"] = np.array([int(v) % 40 if i % 4 else int(v) for i, v in enumerate(inp["n"])], dtype=object)
    return h, inp


@pytest.mark.parametrize("family", list(BF16_EXACT))
def test_bfloat16_exact_primitives(family):
    make = {"logic": logic_circuit, "shift": shift_circuit}[family]
    h, inp = _bf16_check(make, BF16_EXACT[family])
    h.check(inp)


def test_bfloat16_register_file_without_arithmetic():
    c = Circuit("mem_bf16")
    we, wa, wd = c.bit_input("we"), c.input("wa", 4), c.input("wd", 32)
    rf = c.memory("regs", rows=16, width=32)
    rf.write(wa, wd, we)
    for i in range(2):
        c.output(f"r{i}", rf.read(c.input(f"ra{i}", 4)))

    def ref(inp):
        mem, out = {}, {"r0": [], "r1": []}
        for t in range(len(inp["we"])):
            if int(inp["we"][t]):
                mem[int(inp["wa"][t])] = int(inp["wd"][t])
            for i in range(2):
                out[f"r{i}"].append(mem.get(int(inp[f"ra{i}"][t]), 0))
        return out

    h = Harness(c, ref, small_config(), dtype=torch.bfloat16)
    inp = batch([("we", 1), ("wa", 4), ("wd", 32), ("ra0", 4), ("ra1", 4)], 1024, seed=4)
    h.check(inp)
    h.check({k: v[:64] for k, v in inp.items()}, mode="decode")


def test_bfloat16_arithmetic_is_not_exact(capsys):
    """Report: wide thresholds (carries, the multiplier's column sums) overflow bf16's 8-bit
    mantissa, so add/sub/compare/mul are float32-only. The report must stay honest."""
    h, inp = _bf16_check(arith_circuit, ["add"], n=256)
    with pytest.raises((AssertionError, ContractError)):
        h.check(inp)
