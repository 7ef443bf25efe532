"""The multiplier inside the model (issue 14), slow: the machine compiled into the Qwen3.5-2B layer
shape (Qwen3.5-2B's layer fields, intermediate 6144: the shape whose MLPs hold
``circuit.multiplier``, at the machine's width 2,560; a ~12 GB float32 checkpoint built once into
the machine cache, ~1.5 min).

Launches whose programs use the multiplier's ``mul`` rows (integer products, mul-high from 16-bit
halves, 64-bit products, float significand products) run inside the stock model; outputs are
compared bit for bit with the reference interpreter, the trace with the ISA simulator's pass count,
and the passes with the same launch lowered without the multiplier (fewer); float adds on the
float adders (``fadd`` rows) likewise, and random float kernels. One damaged weight
breaks the run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import run_weights
from qwengpu.model.configs import shape_named
from qwengpu.runner import run_kernel

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ["dot", "mulhi", "int64_arith", "matmul"]
#: what the 2B-shape machine has: the multiplier, the float adders, the one-lane float multiplier,
#: one-lane rows (the lowering the engine gives it: ``softcore.unit_options``)
NATIVE = Options(**unit_options(shape_named("2b")))

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def machine_2b():
    from qwengpu.model.configs import machine_2b_config
    from qwengpu.runtime.engine import machine_model

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    cfg = machine_2b_config()
    return cfg, machine_model(cfg)[1]


@pytest.mark.parametrize("name", KERNELS)
def test_products_inside_the_2b_shape_model(machine_2b, name):
    from qwengpu.runtime.engine import prepare, run_machine, shape_for

    cfg, model = machine_2b
    cu = ROOT / "kernels" / f"{name}.cu"
    _, prog, _, _, _ = prepare(cu, None, shape_for(cfg))
    assert any(x.op == "mul" for x in prog.code)
    run = run_machine(cu, model=model, config=cfg, max_tokens=400_000)
    ref = run_kernel(cu)
    for k in ref.outputs:
        assert np.asarray(run.outputs[k]).tobytes() == np.asarray(ref.outputs[k]).tobytes(), k
    assert run.stats["passes"] == run_weights(cu, options=NATIVE).stats["passes"]
    assert run.stats["passes"] < run_weights(cu).stats["passes"]


def test_a_4096_row_rom_in_the_2b_model(machine_2b):
    """A 3,208-row program (``kernels/rom4k.cu``: a fully unrolled integer hash, which no shared
    routine shortens) loaded into all four 1,024-row ROM banks (the host writes BANK before rows
    1,024, 2,048 and 3,072) and run straight through: the model writes BANK as the pc enters each
    512-row bank, 1 to 6; the outputs are the spec's (a Python hash) and the interpreter's, bit for
    bit, the passes sim.py's."""
    from qwengpu.errors import MachineLimitError
    from qwengpu.machine import protocol as P
    from qwengpu.runtime.engine import prepare, run_machine, shape_for
    from qwengpu.runtime.engine import test_config as text_config_test

    cfg, model = machine_2b
    cu = ROOT / "tests" / "machine_weights" / "kernels" / "rom4k.cu"
    _, prog, prompt, _, _ = prepare(cu, None, shape_for(cfg))
    assert 3072 < len(prog.code) <= 4096
    assert [P.bank_of(P.decode(t).a) for t in prompt if P.decode(t).kind == "BANK"] == [2, 4, 6, 0]
    run = run_machine(cu, model=model, config=cfg, max_tokens=100_000)
    assert run.passed, run.mismatches
    ref = run_kernel(cu)
    for k in ref.outputs:
        assert np.asarray(run.outputs[k]).tobytes() == np.asarray(ref.outputs[k]).tobytes(), k
    assert run.stats["passes"] == run_weights(cu, options=NATIVE).stats["passes"]
    toks = P.read_all(run.trace)
    assert {P.bank_of(t.a) for t in toks if t.kind == "BANK"} == set(range(1, (len(prog.code) - 1 >> 9) + 1))
    assert max(t.a for t in toks if t.kind == "PASS") == len(prog.code) - 1  # the last row
    with pytest.raises(MachineLimitError, match=f"needs {len(prog.code)} instructions; the ROM has 1024"):
        prepare(cu, None, shape_for(text_config_test()))  # the test shape: one 1,024-row bank


@pytest.mark.parametrize("name", ["vadd", "tile2d", "warpsum", "odd"])
def test_blocks_of_more_than_64_threads_in_the_2b_model(machine_2b, name):
    """Blocks larger than the 64 threads the machine holds, run in parts (machine blocks one after
    another): 2 blocks of 128 threads, a 16 x 16 block of a 2 x 1 grid, 96 threads summing warps
    by shuffles, 100 threads in parts of 50 (``kernels/big_blocks.cu``; expected values from Python
    in the specs). Outputs bit for bit the interpreter's and the spec's; passes sim.py's."""
    _exact_in_the_2b_model(machine_2b, "big_blocks", name, 100_000)


def _exact_in_the_2b_model(machine_2b, stem: str, name: str, max_tokens: int) -> None:
    """``tests/machine_weights/kernels/{stem}.cu`` with ``{stem}_{name}.json`` in the 2B model:
    passed (the spec's expected values), the interpreter's outputs bit for bit, sim.py's passes."""
    from qwengpu.runtime.engine import run_machine

    cfg, model = machine_2b
    cu = ROOT / "tests" / "machine_weights" / "kernels" / f"{stem}.cu"
    js = cu.with_name(f"{stem}_{name}.json")
    run = run_machine(cu, js, model=model, config=cfg, max_tokens=max_tokens)
    assert run.passed, run.mismatches
    ref = run_kernel(cu, js)
    for k in ref.outputs:
        assert np.asarray(run.outputs[k]).tobytes() == np.asarray(ref.outputs[k]).tobytes(), k
    assert run.stats["passes"] == run_weights(cu, js, options=NATIVE).stats["passes"]


@pytest.mark.parametrize("name", ["tree256", "transpose", "warpsum", "tickets"])
def test_blocks_with_barriers_in_turns_in_the_2b_model(machine_2b, name):
    """Blocks of more than 64 threads that wait at barriers, the machine's threads taking the
    block's in turns (``codegen/turns.py``; ``kernels/turns.cu``, expected values from Python in
    the specs): 2 blocks of 256 threads summing through shared memory, the padded-tile transpose
    in 16 x 16 blocks, 192 threads reducing by shuffles, 128 threads taking atomic tickets.
    Outputs bit for bit the interpreter's; passes sim.py's."""
    _exact_in_the_2b_model(machine_2b, "turns", name, 400_000)


def test_a_damaged_weight_breaks_the_2b_run(machine_2b, flipped_weight):
    """The negative control on this shape: one flipped MLP weight and the launch no longer gives
    the interpreter's outputs (a wrong value, or no result at all)."""
    from qwengpu.runtime.engine import run_machine

    cfg, model = machine_2b
    cu = ROOT / "kernels" / "mulhi.cu"
    ref = run_kernel(cu)
    with flipped_weight(model):
        try:
            run = run_machine(cu, model=model, config=cfg, max_tokens=60_000)
            same = all(np.asarray(run.outputs[k]).tobytes() == np.asarray(ref.outputs[k]).tobytes()
                       for k in ref.outputs)
        except Exception:  # a broken machine may also stop without a result: that is a break too
            same = False
    assert not same


@pytest.mark.parametrize("seed", range(4))
def test_random_kernels_inside_the_2b_shape_model(machine_2b, tmp_path, seed):
    """The random C expression kernels of tests/test_fuzz_kernels.py (products included) on the
    machine with the multiplier, against the independent Python model of C semantics."""
    import random
    import sys

    from qwengpu.errors import MachineLimitError
    from qwengpu.runtime.engine import prepare, run_machine, shape_for

    sys.path.insert(0, str(ROOT / "tests"))
    import test_fuzz_kernels as fz

    cfg, model = machine_2b
    n = 32
    cu, exprs, vals = fz.write_int_kernel(tmp_path, random.Random(1000 + seed), n)
    try:
        prepare(cu, None, shape_for(cfg))
    except MachineLimitError as exc:
        assert "ROM" in str(exc) or "instructions" in str(exc)
        pytest.skip(f"refused: {exc}")
    budget = 8 * run_weights(cu, options=NATIVE).stats["passes"] + 10000
    got = run_machine(cu, model=model, config=cfg, max_tokens=budget).outputs["out"].tolist()
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        assert got[k * n : (k + 1) * n] == want, f"expression {k}: {text}"


@pytest.mark.parametrize("name", ["dot", "atomic_float_add", "add_ties"])
def test_float_adds_inside_the_2b_shape_model(machine_2b, name):
    """Launches whose float adds (``add.f32``, the float ``atomicAdd``) are ``fadd`` rows of the
    float adders run inside the model, bit for bit equal to the interpreter, with the simulator's
    pass count, and in fewer passes than the same launch lowered without the adders."""
    from qwengpu.runtime.engine import prepare, run_machine, shape_for

    cfg, model = machine_2b
    cu = ROOT / "kernels" / f"{name}.cu"
    _, prog, _, _, _ = prepare(cu, None, shape_for(cfg))
    assert any(x.op == "fadd" for x in prog.code)
    run = run_machine(cu, model=model, config=cfg, max_tokens=400_000)
    ref = run_kernel(cu)
    for k in ref.outputs:
        assert np.asarray(run.outputs[k]).tobytes() == np.asarray(ref.outputs[k]).tobytes(), k
    # the engine's lowering is softmem's (global memory, atomics): its simulator counts the passes
    assert run.stats["passes"] == run_weights(cu, options=NATIVE).stats["passes"]
    assert run.stats["passes"] < run_weights(cu, options=Options(native_mul=True)).stats["passes"]


@pytest.mark.parametrize("seed", range(2))
def test_random_float_kernels_inside_the_2b_shape_model(machine_2b, tmp_path, seed):
    """The random float expression kernels of tests/test_fuzz_kernels.py (adds, products, fma,
    edge values) on the machine with the float adders, against the exact-rational float model."""
    import random
    import sys

    from qwengpu.errors import MachineLimitError
    from qwengpu.runtime.engine import prepare, run_machine, shape_for

    sys.path.insert(0, str(ROOT / "tests"))
    import test_fuzz_kernels as fz

    cfg, model = machine_2b
    n = 32
    cu, exprs, vals = fz.write_float_kernel(tmp_path, random.Random(2000 + seed), n)
    try:
        prepare(cu, None, shape_for(cfg))
    except MachineLimitError as exc:
        pytest.skip(f"refused: {exc}")
    budget = 8 * run_weights(cu, options=NATIVE).stats["passes"] + 10000
    got = np.asarray(run_machine(cu, model=model, config=cfg, max_tokens=budget).outputs["out"])
    got = got.view(np.uint32).tolist()
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        assert got[k * n : (k + 1) * n] == want, f"expression {k}: {text}"



@pytest.mark.parametrize("name", ["dot", "mul_ties", "saxpy"])
def test_the_one_lane_multiplier_in_the_2b_model_is_the_stock_argmax(machine_2b, name):
    """Launches whose float multiplies and fmas use the one-lane unit (``fmulf`` rows in four lanes,
    its error mode for ``fma``, the ``frange`` row) in the 2,560-wide machine: the fast runtime's
    trace is the stock model's argmax at every step (one teacher-forced stock prefill), the outputs
    are the interpreter's bit for bit, and the passes are the simulator's."""
    import sys

    from qwengpu.runtime.engine import prepare, run_machine, shape_for

    sys.path.insert(0, str(ROOT / "tests" / "runtime"))
    from test_fast_runtime import stock_teacher_forced

    cfg, model = machine_2b
    cu = ROOT / "kernels" / f"{name}.cu"
    _, prog, _, _, _ = prepare(cu, None, shape_for(cfg))
    assert {x.op for x in prog.code} >= {"fmulf", "frange"}
    assert {x.mod("lane") for x in prog.code if x.op == "fmulf"} == {0, 1, 2, 3}
    run = run_machine(cu, model=model, config=cfg, max_tokens=400_000)  # the fast runtime
    assert stock_teacher_forced(model, run.prompt, run.trace) == run.trace
    ref = run_kernel(cu)
    for k in ref.outputs:
        assert np.asarray(run.outputs[k]).tobytes() == np.asarray(ref.outputs[k]).tobytes(), k
    assert run.stats["passes"] == run_weights(cu, options=NATIVE).stats["passes"]
