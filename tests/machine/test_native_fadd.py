"""The float adders in the weights (issue 14): what the lowering emits for a machine that has them
(``Options.native_fadd``, ``MachineShape.fadd``), run on the ISA simulator against the independent
float model of tests/test_fuzz_kernels.py; which adds stay sequences; the engine refusing an
``fadd`` row on a machine without the adders. (The circuit itself: test_fpu.py; inside the model:
tests/machine_weights/test_multiplier_2b.py, slow.)"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from machine_helpers import binop_ptx, binop_spec

from qwengpu.codegen.soft import Options, run_for_weights, simulate_for_weights
from qwengpu.codegen.softmem import run_weights
from qwengpu.errors import MachineLimitError
from qwengpu.machine.circuit import MachineShape
from qwengpu.model import configs
from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
NATIVE = Options(native_mul=True, native_fadd=True)


def _prog(op: str, options: Options):
    module = parse_ptx(binop_ptx(op, "f32", "f32", "f32"))
    spec = parse_spec(binop_spec([0x3F800000], [0x40000000], "f32", "f32", "f32"))
    return simulate_for_weights(module, spec, options=options)[2]


@pytest.mark.parametrize(("op", "native"), [
    ("add.f32 {C}, {A}, {B};", True),
    ("add.rn.ftz.f32 {C}, {A}, {B};", True),
    ("sub.f32 {C}, {A}, {B};", True),
    ("add.rz.f32 {C}, {A}, {B};", False),  # other rounding modes stay integer sequences
    ("add.sat.f32 {C}, {A}, {B};", False),
])
def test_which_adds_become_one_row(op, native):
    with_adders = _prog(op, NATIVE)
    without = _prog(op, Options(native_mul=True))
    fadds = [x for x in with_adders.code if x.op in ("fadd", "fsub")]  # fsub: the adder's negate bit
    assert len(fadds) == (1 if native else 0)
    assert not any(x.op in ("fadd", "fsub") for x in without.code)
    if native:
        assert len(with_adders.code) < len(without.code) - 20
        assert fadds[0].mod("ftz") == ("ftz" in op)


@pytest.mark.parametrize("seed", range(3))
def test_random_float_kernels_with_the_adders(tmp_path, seed):
    """Random float expressions (adds, products, fma ...) lowered for the machine with the adders
    and run on the ISA simulator, against the exact-rational float model of the fuzz tests."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_fuzz_kernels as fz

    n = 64
    cu, exprs, vals = fz.write_float_kernel(tmp_path, random.Random(300 + seed), n)
    res = run_for_weights(cu, options=NATIVE)
    got = np.asarray(res.outputs["out"]).view(np.uint32).tolist()
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        assert got[k * n : (k + 1) * n] == want, f"expression {k}: {text}"


def _cvt_values(seed: int, n: int) -> list[int]:
    """32-bit words: zero, ±1, the ends, every width's round-half cases, random words."""
    edge = [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001, 0x7FFFFFC0, 0xFFFFFF80]
    for k in range(23, 32):
        base = 1 << k
        edge += [base - 1, base + 1, base + (1 << (k - 23)), base + 3 * (1 << (k - 24)) if k > 23 else base]
        edge += [(-x) & 0xFFFFFFFF for x in edge[-4:]]
    rng = random.Random(seed)
    vals = edge + [rng.getrandbits(rng.choice((8, 16, 24, 25, 31, 32))) for _ in range(n)]
    return vals[: n - n % 32]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("sign", ["s32", "u32"])
def test_int_to_float_on_the_adders_is_exact(sign, seed):
    """``cvt.rn.f32.{s32,u32}`` on the adders (two ``fadd`` rows, halves of 16 bits) on the ISA
    simulator, against NumPy's casts (round to nearest even); other modes stay sequences."""
    op = f"cvt.rn.f32.{sign} {{C}}, {{A}};"
    vals = _cvt_values(seed * 2 + (sign == "u32"), 320)  # 3 x 320 words: the machine's memory
    module = parse_ptx(binop_ptx(op, sign, "u32", "f32"))
    spec = parse_spec(binop_spec(vals, [0] * len(vals), sign, "u32", "f32"))
    outputs, _, prog = simulate_for_weights(module, spec, options=NATIVE)
    assert sum(x.op == "fadd" for x in prog.code) == 2
    words = np.asarray(vals, dtype=np.uint32)
    want = (words.view(np.int32) if sign == "s32" else words).astype(np.float32)
    assert np.asarray(outputs["out"]).view(np.uint32).tolist() == want.view(np.uint32).tolist()
    # a value known to be below 2^23 (value_bounds: masked to 20 bits) takes one exact add
    masked = f"and.b32 %r13, {{A}}, 0xFFFFF;\n    cvt.rn.f32.{sign} {{C}}, %r13;"
    module = parse_ptx(binop_ptx(masked, sign, "u32", "f32"))
    outputs, _, prog = simulate_for_weights(module, spec, options=NATIVE)
    assert sum(x.op == "fadd" for x in prog.code) == 1
    want = (words & 0xFFFFF).astype(np.float32)
    assert np.asarray(outputs["out"]).view(np.uint32).tolist() == want.view(np.uint32).tolist()
    rz = f"cvt.rz.f32.{sign} {{C}}, {{A}};"
    prog_rz = simulate_for_weights(parse_ptx(binop_ptx(rz, sign, "u32", "f32")), spec, options=NATIVE)[2]
    assert not any(x.op == "fadd" for x in prog_rz.code)


def test_float_atomic_add_and_dot_are_shorter_and_exact():
    for name in ("dot", "atomic_float_add"):
        cu = ROOT / "kernels" / f"{name}.cu"
        base = run_weights(cu, options=Options(native_mul=True))
        fast = run_weights(cu, options=NATIVE)
        assert base.passed and fast.passed, name
        assert fast.stats["warp_instructions"] < 0.6 * base.stats["warp_instructions"], name


def test_shape_decides_the_adders():
    from qwengpu.compiler import text_config

    assert not configs.shape_for(configs.test_config()).fadd
    assert configs.shape_for(text_config("qwen3_5_2b_text")).fadd


def test_an_fadd_row_is_refused_on_a_machine_without_the_adders():
    from qwengpu.runtime.engine import encode_program

    prog = _prog("add.f32 {C}, {A}, {B};", NATIVE)
    with pytest.raises(MachineLimitError, match="no float adder"):
        encode_program(prog, b"\0" * 64, (1, 1, 1), MachineShape(multiplier=True))
    rows = encode_program(prog, b"\0" * 64, (1, 1, 1), MachineShape(multiplier=True, fadd=True))
    assert len(rows) == len(prog.code)


CONVERT_PARAM = """extern "C" __global__ void conv(int n, float* out)
{
    int i = threadIdx.x;
    out[i] = (float)(n + i);
}
"""


@pytest.mark.parametrize(("n", "short"), [(5, True), (0x3FFF00, True), (1 << 24, False), (-5, False)])
def test_a_small_scalar_parameter_bounds_the_conversion(tmp_path, n, short):
    """The launch's scalar parameters bound what is loaded from them (``Options.param_words``,
    launch constants the ROM holds anyway): ``(float)(n + i)`` with a small ``n`` is the short
    conversion (one exact add), with a large or negative one the general (two adds); every result
    equals NumPy's cast of n + i."""
    import json

    cu = tmp_path / "conv.cu"
    cu.write_text(CONVERT_PARAM)
    spec = {"kernel": "conv", "grid": 1, "block": [32, 1, 1],
            "args": [{"name": "n", "type": "i32", "value": n},
                     {"name": "out", "type": "f32*", "data": [0] * 32}],
            "outputs": ["out"]}
    (tmp_path / "conv.json").write_text(json.dumps(spec))
    res = run_weights(cu, options=NATIVE)
    assert sum(x.op == "fadd" for x in res.program.code) == (1 if short else 2)
    want = (np.int64(n) + np.arange(32)).astype(np.int32).astype(np.float32)
    assert np.asarray(res.outputs["out"]).view(np.uint32).tolist() == want.view(np.uint32).tolist()
