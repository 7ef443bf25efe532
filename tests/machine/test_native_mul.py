"""The multiplier in the weights (issue 14): what the lowering emits for a machine that has it
(``Options.native_mul``, ``MachineShape.multiplier``), run on the ISA simulator and compared with
plain Python products; the corpus with it; and the engine refusing a ``mul`` row on a machine
without one. (Inside the model: tests/machine_weights/test_multiplier_2b.py, slow: the Qwen3.5-2B
layer shape, the one whose MLPs hold the multiplier.)"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from machine_helpers import binop_ptx, binop_spec

from qwengpu.codegen.soft import Options, simulate_for_weights
from qwengpu.codegen.softmem import run_weights
from qwengpu.errors import MachineLimitError
from qwengpu.machine.circuit import MachineShape
from qwengpu.model import configs
from qwengpu.ptx.parser import parse_ptx
from qwengpu.runner import corpus
from qwengpu.spec import parse_spec

ROOT = Path(__file__).resolve().parents[2]
M32 = 0xFFFFFFFF
NATIVE = Options(native_mul=True)


def _operands(n: int = 64) -> tuple[list[int], list[int]]:
    rng = random.Random(14)
    edge = [0, 1, 2, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, M32, 0xFFFF0001, 3]
    a = edge + [rng.getrandbits(rng.choice([4, 16, 24, 32])) for _ in range(n - len(edge))]
    b = list(reversed(edge)) + [rng.getrandbits(rng.choice([4, 16, 24, 32])) for _ in range(n - len(edge))]
    return a, b


def _s32(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


def _run(op: str, ta: str, tb: str, tc: str, a: list[int], b: list[int], options: Options):
    module = parse_ptx(binop_ptx(op, ta, tb, tc))
    spec = parse_spec(binop_spec(a, b, ta, tb, tc))
    out, _, prog = simulate_for_weights(module, spec, options=options)
    return out["out"], prog


CASES = [
    ("mul.lo.s32 {C}, {A}, {B};", "s32", lambda x, y: (x * y) & M32),
    ("mul.lo.s32 {C}, {A}, 1000003;", "s32", lambda x, y: (x * 1000003) & M32),
    ("mul.hi.u32 {C}, {A}, {B};", "u32", lambda x, y: (x * y) >> 32),
    ("mul.hi.s32 {C}, {A}, {B};", "s32", lambda x, y: ((_s32(x) * _s32(y)) >> 32) & M32),
    ("mul.hi.u32 {C}, {A}, -1431655765;", "u32", lambda x, y: (x * 0xAAAAAAAB) >> 32),
    ("mad.lo.s32 {C}, {A}, {B}, {A};", "s32", lambda x, y: (x * y + x) & M32),
]


@pytest.mark.parametrize("op,t,want", CASES, ids=[f"{c[0].split()[0]}-{k}" for k, c in enumerate(CASES)])
def test_native_multiply_sequences_equal_python(op, t, want):
    a, b = _operands()
    got, prog = _run(op, t, t, t, a, b, NATIVE)
    expect = [want(x & M32, y & M32) for x, y in zip(a, b, strict=True)]
    assert [int(v) & M32 for v in np.asarray(got).astype(np.int64)] == expect
    assert any(x.op == "mul" for x in prog.code)  # the multiplier's rows, not shift-and-add


@pytest.mark.parametrize("op,t", [("mul.hi.u32 {C}, {A}, {B};", "u32"), ("mul.lo.s64 {C}, {A}, {B};", "u64")])
def test_the_high_words_middle_column_carries(op, t):
    """``_mulhi_halves`` (9.28): the middle column ah*bl + al*bh + (al*bl >> 16) is a word and a
    carry; operands whose halves are all large make it wrap (every pair of 0xFFFFxxxx-like words),
    small ones do not; the high word and the 64-bit product are Python's."""
    rng = random.Random(28)
    big = [0xFFFFFFFF, 0xFFFF0000, 0x8000FFFF, 0xFFFF8001]
    big += [rng.getrandbits(32) | 0x80008000 for _ in range(28)]
    a = [x for x in big for _ in big][:512] + [rng.getrandbits(32) for _ in range(64)]
    b = [y for _ in big for y in big][:512] + [rng.getrandbits(32) for _ in range(64)]
    if t == "u64":
        a = [(x << 32) | (y ^ 0x5A5A5A5A) for x, y in zip(a, b, strict=True)]
        b = [(y << 32) | x for x, y in zip(a, b, strict=True)]
    got, prog = _run(op, t, t, t, a, b, NATIVE)
    bits = 32 if t == "u32" else 64
    want = [(x * y) >> 32 if t == "u32" else (x * y) % 2**64 for x, y in zip(a, b, strict=True)]
    words = np.asarray(got).astype(np.uint64 if bits == 64 else np.int64).tolist()
    assert [int(v) % 2**bits for v in words] == want


def test_native_wide_multiply_equals_python():
    a, b = _operands()
    op = "mul.wide.s32 {C}, {A}, {B};"
    got, _ = _run(op, "s32", "s32", "s64", a, b, NATIVE)
    expect = [(_s32(x & M32) * _s32(y & M32)) % 2**64 for x, y in zip(a, b, strict=True)]
    assert [int(v) % 2**64 for v in np.asarray(got).tolist()] == expect


@pytest.mark.parametrize("op", ["mul.rn.f32 {C}, {A}, {B};", "fma.rn.f32 {C}, {A}, {B}, {A};"])
def test_native_float_products_equal_the_sequences(op):
    """fmul / ffma built on the multiplier give the same bits as the shift-and-add build (which
    tests/machine/test_softfloat.py holds to the float semantics) on random and edge floats."""
    rng = random.Random(5)
    edge = [0x3F800000, 0x00000001, 0x007FFFFF, 0x7F7FFFFF, 0x80000000, 0x7F800000, 0x7FC00000, 0x33800000]
    a = edge + [rng.getrandbits(32) for _ in range(56)]
    b = [0x3F800001, 0x00800000, 0x4B000000, 0x3F000000] * 2 + [rng.getrandbits(32) for _ in range(56)]
    got, prog = _run(op, "f32", "f32", "f32", a, b, NATIVE)
    ref, ref_prog = _run(op, "f32", "f32", "f32", a, b, Options())
    assert np.asarray(got).view(np.uint32).tolist() == np.asarray(ref).view(np.uint32).tolist()
    assert any(x.op == "mul" for x in prog.code) and not any(x.op == "mul" for x in ref_prog.code)


SHORT = ("dot", "mulhi", "int64_arith", "device_call", "int_edges", "iota_scale", "transpose_2d", "saxpy")


@pytest.mark.parametrize("which", ["short", pytest.param("all", marks=pytest.mark.slow)])
def test_corpus_with_the_multiplier_on_the_simulator(which):
    """Corpus kernels with products (``-m slow``: every corpus kernel), lowered for a machine with
    the multiplier, give the spec's expected outputs (from the kernel's meaning) on the ISA
    simulator, in fewer warp instructions in total."""
    base = native = 0
    failed = []
    for cu, spec in corpus(ROOT / "kernels"):
        if which == "short" and cu.stem not in SHORT:
            continue
        r0, r1 = run_weights(cu, spec), run_weights(cu, spec, options=NATIVE)
        if not r1.passed:
            failed.append(cu.stem)
        base += r0.stats["warp_instructions"]
        native += r1.stats["warp_instructions"]
    assert not failed
    assert native < 0.85 * base, (native, base)


def test_shape_decides_the_multiplier():
    from qwengpu.compiler import text_config

    assert not configs.shape_for(configs.test_config()).multiplier
    assert configs.shape_for(text_config("qwen3_5_2b_text")).multiplier


def test_a_mul_row_is_refused_on_a_machine_without_the_multiplier():
    from qwengpu.runtime.engine import encode_program

    module = parse_ptx(binop_ptx("mul.lo.s32 {C}, {A}, {B};", "s32", "s32", "s32"))
    spec = parse_spec(binop_spec([3], [5], "s32", "s32", "s32"))
    _, _, prog = simulate_for_weights(module, spec, options=NATIVE)
    with pytest.raises(MachineLimitError, match="no multiplier"):
        encode_program(prog, b"\0" * 64, (1, 1, 1), MachineShape())
    rows = encode_program(prog, b"\0" * 64, (1, 1, 1), MachineShape(multiplier=True))
    assert len(rows) == len(prog.code)
