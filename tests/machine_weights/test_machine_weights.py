"""The machine in the weights, end to end: a stock Qwen3.5 model writes every step of a launch.

Three oracles agree bit for bit: the reference interpreter, the ISA simulator (``sim.py``) and the
stock model run greedily token by token (recurrent path); the finished trace teacher-forced in one
prefill (chunked path) reproduces every argmax; one damaged weight breaks the run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from qwengpu.errors import MachineLimitError
from qwengpu.machine import protocol as P
from qwengpu.machine.engine import machine_model, prepare, run_machine
from qwengpu.machine.sim import run_machine_sim
from qwengpu.runner import run_kernel

K = Path(__file__).parent / "kernels"


@pytest.fixture(scope="module")
def machine():
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return machine_model()


@pytest.fixture(scope="module")
def vadd(machine):
    return run_machine(K / "vadd.cu", model=machine[1])


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.asarray(a[k]).view(np.uint32).tolist() == np.asarray(b[k]).view(np.uint32).tolist(), k


def test_protocol_roundtrip():
    assert P.decode(P.pass_(17, 0b1011)) == P.Token("PASS", 17, 0b1011)
    assert P.decode(P.data(12, 0x7FF)) == P.Token("DATA", 12, 0x7FF)
    assert P.decode(P.ctl(P.STORE, 3)) == P.Token("STORE", 3)
    assert max(P.pass_(1023, 15), P.ctl(P.HALT), P.data(15, 2047)) < 1 << 16


def test_vadd_model_equals_sim_and_interp(vadd):
    """Divergent guard (n=3 of 4 threads), loads, stores, add/xor/shl, window arithmetic."""
    sim = run_machine_sim(K / "vadd.cu")
    ref = run_kernel(K / "vadd.cu")
    _same(vadd.outputs, sim.outputs)
    _same(vadd.outputs, ref.outputs)
    assert vadd.passed
    assert vadd.stats["warp_instructions"] == sim.stats["warp_instructions"]
    assert vadd.trace[-1] == P.ctl(P.HALT)


def test_trace_reproduced_by_one_prefill(machine, vadd):
    """The chunked (prefill) path over prompt + trace gives the same argmax at every model step."""
    ids = torch.tensor([vadd.prompt + vadd.trace[:-1]])
    with torch.no_grad():
        logits = machine[1](input_ids=ids, use_cache=False).logits
    got = logits[0, len(vadd.prompt) - 1:].argmax(-1).tolist()
    assert got == vadd.trace


def test_refuses_what_the_slice_cannot_run():
    with pytest.raises(MachineLimitError, match="one block|cannot run"):
        prepare(Path("kernels/dot.cu"))


@pytest.mark.parametrize("name", ["intops", "bitops"])
def test_int_ops_model_equals_sim_and_interp(machine, name):
    """min/max (s, u), popc, clz, brev, shifts, sel with two immediates (the second one in the
    ROM row's ``off`` field): the model's dump equals sim.py, the interpreter and the expected."""
    run = run_machine(K / f"{name}.cu", model=machine[1])
    sim = run_machine_sim(K / f"{name}.cu")
    ref = run_kernel(K / f"{name}.cu")
    _same(run.outputs, sim.outputs)
    _same(run.outputs, ref.outputs)
    assert run.passed, run.mismatches
    assert run.stats["warp_instructions"] == sim.stats["warp_instructions"]
    # the stock transformers forward (one chunked prefill over prompt + trace) writes the same trace
    ids = torch.tensor([run.prompt + run.trace[:-1]])
    with torch.no_grad():
        logits = machine[1](input_ids=ids, use_cache=False).logits
    assert logits[0, len(run.prompt) - 1:].argmax(-1).tolist() == run.trace


def test_mul_refused_naming_the_op():
    """``mul`` (a Booth multiplier per lane does not fit the 2048-wide residual yet): refused by
    name, never run wrong."""
    with pytest.raises(MachineLimitError, match="op mul"):
        prepare(K / "mul.cu")


@pytest.mark.slow
def test_repeated_run_identical(machine, vadd):
    again = run_machine(K / "vadd.cu", model=machine[1])
    assert again.trace == vadd.trace


@pytest.mark.slow
def test_damaged_weight_breaks_the_run(machine, vadd):
    """Negative control: flip one used gate weight of a mid layer; the trace must differ."""
    model = machine[1]
    w = model.model.layers[7].mlp.gate_proj.weight
    r, col = (w != 0).nonzero()[0].tolist()
    old = float(w[r, col])
    try:
        with torch.no_grad():
            w[r, col] = -old
        ids = torch.tensor([vadd.prompt + vadd.trace[:-1]])
        with torch.no_grad():
            got = model(input_ids=ids, use_cache=False).logits[0, len(vadd.prompt) - 1:].argmax(-1).tolist()
        assert got != vadd.trace
    finally:
        with torch.no_grad():
            w[r, col] = old
