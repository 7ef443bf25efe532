"""The one-lane fast-range float multiplier (machine v2, issue 26): ``fpu.fmul_fast`` in the
weights (the product, or with ``err`` the rounding's exact error), ``fpu.fmul_range_ok`` (the
``frange`` row: where the unit is ``mul.rn``), and their simulator twins in ``simt.fp32``; the
``fmulf`` rows that softfloat's fast paths use (``mul.rn.f32``: the product; ``fma.rn.f32``: the
product and its error, X + L = a·c exactly, then Boldo and Melquiond's sum on the adders),
expanded after register allocation into four rows (one per lane of a group) that kill nothing in
the liveness analysis.

Checked here: the circuits against the simulator's functions bit for bit on any words (so the
weights and the simulator agree even where the value is garbage), the product against float32
multiplication and X + L against a·c as rationals where the range row says so; ``mul`` and
``fma.rn.f32`` lowered with the unit against ``fp32`` on the fast-path test's operands (ties,
cancellation, range ends, zeros, subnormals, specials, guarded, aliased, constant operands, both
``ftz``); the rows, their lanes and the ROM encoding; and a negative control (the range row taken
as always true breaks the results)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import test_fma_on_adders as tfa
import test_softfloat as tsf

from qwengpu.codegen import softfloat as sf
from qwengpu.codegen.liveness import dead_results
from qwengpu.codegen.softcore import Options
from qwengpu.codegen.softmem import expand_one_lane
from qwengpu.compiler import Circuit, evaluate
from qwengpu.isa.instr import Imm, MInstr, R
from qwengpu.isa.program import Program
from qwengpu.machine import fpu
from qwengpu.simt import fp32

UNIT = Options(native_mul=True, native_fadd=True, native_fmulf=True)
U = np.uint32


def _circuit(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(fmul_fast, its error mode, fmul_range_ok without ftz, with ftz) on the compiler's evaluator."""
    c = Circuit("fmulf")
    x, y, f = c.input("a", 32), c.input("b", 32), c.input("f", 1)
    c.output("y", fpu.fmul_fast(c, x, y, f[0]))  # f: the error mode here, ftz below
    c.output("ok", c.concat(fpu.fmul_range_ok(c, x, y, f[0])))
    outs = []
    for ftz in (0, 1):
        o = evaluate(c, {"a": a.astype(np.int64).astype(object), "b": b.astype(np.int64).astype(object),
                         "f": np.full(len(a), ftz, dtype=np.int64).astype(object)})
        outs.append(o)
    y, e = (np.array([int(v) for v in o["y"].ravel()], dtype=np.uint64).astype(U) for o in outs)
    return y, e, *(np.array([int(v) for v in o["ok"].ravel()]) == 1 for o in outs)


def test_the_circuit_is_the_simulators_function_on_any_words():
    """Bit for bit on random words (specials, subnormals, exponents far outside the range) and on
    in-range pairs, where both are float32 multiplication rounded to nearest even."""
    rng = np.random.default_rng(5)
    a = rng.integers(0, 2**32, 600, dtype=np.uint64).astype(U)
    b = rng.integers(0, 2**32, 600, dtype=np.uint64).astype(U)
    ra, rb, _ = tfa._cases(11, n=200)[0]
    edge = np.array(tsf.EDGE, dtype=U)
    ea, eb = np.repeat(edge, len(edge)), np.tile(edge, len(edge))
    a, b = np.concatenate([a, ra, ea]), np.concatenate([b, rb, eb])
    # the ends of the range with few product bits: the error's smallest exponents (2^-126 at 174)
    ends = rng.choice([fpu.FMUL_ES_MIN, fpu.FMUL_ES_MIN + 1, fpu.FMUL_ES_MAX], 200)
    e1 = rng.integers(1, 128, 200)
    fa = (U(1) << U(23)) * e1.astype(U) | rng.integers(0, 8, 200).astype(U) << U(20)
    fb = (U(1) << U(23)) * (ends - e1).astype(U) | rng.integers(0, 1 << 23, 200).astype(U)
    a, b = np.concatenate([a, fa.astype(U)]), np.concatenate([b, fb.astype(U)])
    got, err, ok, ok_ftz = _circuit(a, b)
    assert np.array_equal(got, fp32.mul_fast(a, b))
    assert np.array_equal(err, fp32.mul_fast_err(a, b))
    # in the range the error is exact: a * b == X + L as rationals, L normal or +0
    from fractions import Fraction

    def q(w: int) -> Fraction:
        return Fraction(float(np.array(w, dtype=U).view(np.float32)))

    for i in np.nonzero(ok)[0]:
        assert q(a[i]) * q(b[i]) == q(got[i]) + q(err[i]), (hex(a[i]), hex(b[i]))
        assert err[i] == 0 or (err[i] >> 23) & 0xFF >= 1
    assert np.array_equal(ok, fp32.mul_fast_ok(a, b)) and np.array_equal(ok_ftz, fp32.mul_fast_ok(a, b, True))
    # where the range row says so, the unit's word is mul.rn's (zeros, and subnormals under ftz)
    assert np.array_equal(got[ok], fp32.mul(a[ok], b[ok]))
    assert np.array_equal(got[ok_ftz], fp32.mul(a[ok_ftz], b[ok_ftz], "rn", True))
    assert ok.sum() > 300 and (ok_ftz & ~ok).sum() > 10
    e1, e2 = (a >> 23) & 0xFF, (b >> 23) & 0xFF
    es = e1 + e2
    inr = (e1 > 0) & (e1 < 255) & (e2 > 0) & (e2 < 255) & (es >= fpu.FMUL_ES_MIN) & (es <= fpu.FMUL_ES_MAX)
    assert inr.sum() > 300
    assert np.array_equal(got[inr], fp32.mul(a[inr], b[inr]))
    assert (sf.ES_MIN, sf.ES_MAX) == (fpu.FMUL_ES_MIN, fpu.FMUL_ES_MAX)


# .ftz: slow (5-6 s each on the simulator); the sequences' ftz handling: tests/machine/test_softfloat.py
@pytest.mark.parametrize("ftz", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("op", ["fmul", "ffma"])
def test_mul_and_fma_with_the_unit_are_exact(op, ftz):
    """``mul.rn.f32``: the range row and the unit's four rows; ``fma.rn.f32``: the range row in
    place of the chain of compares, the rest on the adders as before."""
    mods = {"ftz": True} if ftz else {}
    for a, b, c in tfa._cases(43 + ftz + 2 * (op == "ffma")):
        tsf.check(op, mods, a, b, c, weights=True, options=UNIT)
    a, b, c = tfa._cases(7)[0]
    tsf.check(op, mods, a, b, c, weights=True, options=UNIT, guard=True)
    tsf.check(op, mods, a, b, c, weights=True, options=UNIT, alias=0)
    tsf.check(op, mods, a, b, c, weights=True, options=UNIT, alias=1)
    for k in (0x3FB8AA3B, 0x3F000000, 0xC0490FDB, 0x00000001, 0x7F800000, 0, 0x7F7FFFFF, 0x00800000):
        tsf.check(op, mods, a, b, c, weights=True, options=UNIT, imm={1: k})


@pytest.mark.parametrize("ftz", [False, True])
def test_fma_of_a_zero_product_keeps_the_signed_zero_rules(ftz):
    """A zero product (X = ±0) is ``X + z``'s signed zero. Boldo and Melquiond's sum as written
    gives +0 for -0 * 1 + -0 (TwoSum's error and the odd sum are +0, and -0 + +0 = +0); the
    sequence runs TwoSum's error negated and ends with th - (-v), whose zeros are +0, so th's -0
    stays (``softfloat._ffma_on_the_unit``; until then a zero-product check and a guarded copy).
    Every sign of a zero, ±1 and subnormal factor and of a zero, subnormal and normal addend."""
    import itertools

    zero, one, sub = [0x00000000, 0x80000000], [0x3F800000, 0xBF800000], [0x00000001, 0x80000001]
    rows = list(itertools.product(zero + one + sub, zero + one, zero + sub + [0x3F800000]))
    a, b, c = (np.array([r[k] for r in rows], dtype=U) for k in range(3))
    tsf.check("ffma", {"ftz": True} if ftz else {}, a, b, c, weights=True, options=UNIT)


@pytest.mark.parametrize("ftz", [False, True])
@pytest.mark.parametrize("rnd", ["rm", "rp", "rz"])
def test_fma_in_the_directed_modes_on_the_unit(rnd, ftz):
    """``fma.rm/rp/rz`` on the unit (``softfloat._directed``): Boldo and Melquiond's sum rounded to
    nearest, its exact error by TwoSum's rows, one unit toward the mode where the error points
    away from it; under rm an exact zero is -0 unless both zeros are +0. Random operands with
    near-cancelling addends, exact cancellations c = -RN(a b), every triple of signed zeros, ±1
    and subnormals, every edge pair; bit for bit with the interpreter, and a few times cheaper
    than the integer sequence (the slow path) they replace."""
    import itertools

    from qwengpu.simt import fp32

    mods = {"rnd": rnd, "ftz": ftz}
    rng = np.random.default_rng(17 + ftz)
    tsf.check("ffma", mods, *tsf.operands("ffma", rng, 2048), weights=True, options=UNIT)
    a, b = tsf.random_bits(rng, 1024), tsf.random_bits(rng, 1024)
    tsf.check("ffma", mods, a, b, fp32.mul(a, b) ^ np.uint32(0x80000000), weights=True, options=UNIT)
    zero, one, sub = [0x00000000, 0x80000000], [0x3F800000, 0xBF800000], [0x00000001, 0x80000001]
    rows = list(itertools.product(zero + one + sub, zero + one, zero + sub + [0x3F800000, 0xBF800000]))
    a, b, c = (np.array([r[k] for r in rows], dtype=U) for k in range(3))
    tsf.check("ffma", mods, a, b, c, weights=True, options=UNIT)
    ea, eb = tsf.edge_pairs()
    tsf.check("ffma", mods, ea, eb, np.array(tsf.EDGE, dtype=U)[rng.integers(0, len(tsf.EDGE), len(ea))],
              weights=True, options=UNIT)
    x, y, z = tfa._floats(rng, 32, 110, 145), tfa._floats(rng, 32, 110, 145), tfa._floats(rng, 32, 100, 150)
    issued = {}
    for opts in (UNIT, tfa.NATIVE):
        info: dict = {}
        tsf.check("ffma", mods, x, y, z, weights=True, options=opts, info=info)
        issued[opts is UNIT] = info["stats"].machine_by_ptx[info["ptx"]]
    assert issued[True] * 3 < issued[False], issued


@pytest.mark.parametrize("rnd", ["rm", "rp", "rz"])
@pytest.mark.parametrize("op", ["fadd", "fsub", "fmul"])
def test_add_and_mul_in_the_directed_modes_on_the_unit(op, rnd):
    """``add/sub/mul.rm/rp/rz`` on the adders and the unit (9.28): the sum rounded to nearest and
    its exact error by TwoSum's rows (``softfloat._directed``, the fma's), or the unit's product
    and its exact error, then one unit toward the mode (``_step_toward``); both operands below
    2^126 (the product: the range row), the rest the integer sequence as a cold routine. Edge
    pairs, random operands, close pairs (cancellation), exact cancellations and every pair of
    signed zeros, ±1 and subnormals; bit for bit with the interpreter, and fewer than half the
    warp instructions of the integer sequence."""
    import itertools

    mods = {"rnd": rnd}
    rng = np.random.default_rng(29)
    tsf.check(op, mods, *tsf.operands(op, rng, 2048), weights=True, options=UNIT)
    a, b = tsf.close_pairs(rng, 1024)
    tsf.check(op, mods, a, b, weights=True, options=UNIT)
    a = tsf.random_bits(rng, 512) & np.uint32(0xBFFFFFFF)  # finite, exponents below 2^65
    tsf.check(op, mods, a, a ^ np.uint32(0 if op == "fsub" else 0x80000000), weights=True, options=UNIT)
    zero, one, sub = [0x00000000, 0x80000000], [0x3F800000, 0xBF800000], [0x00000001, 0x80000001]
    rows = list(itertools.product(zero + one + sub, zero + one + sub))
    a, b = (np.array([r[k] for r in rows], dtype=U) for k in range(2))
    tsf.check(op, mods, a, b, weights=True, options=UNIT)
    x, y = tfa._floats(rng, 32, 110, 145), tfa._floats(rng, 32, 110, 145)
    issued = {}
    for opts in (UNIT, tfa.NATIVE):
        info: dict = {}
        tsf.check(op, mods, x, y, weights=True, options=opts, info=info)
        issued[opts is UNIT] = info["stats"].machine_by_ptx[info["ptx"]]
    assert issued[True] * 2 < issued[False], issued


def test_every_fma_mode_in_one_program_on_the_unit():
    """``kernels/rounding_fma.cu`` (``__fmaf_rn/rz/rd/ru`` side by side, products that overflow
    and subnormal factors: the slow path in every mode) in the weights' program on the units, bit
    for bit with its spec: each mode's slow path is its own cold routine (one routine named for
    all modes gave the rn body to the rz and rm calls: max * 2 rounded to inf)."""
    from pathlib import Path

    from qwengpu.codegen.softmem import run_weights

    root = Path(__file__).resolve().parents[2]
    res = run_weights(root / "kernels/rounding_fma.cu", options=UNIT)
    assert res.passed, res.mismatches


def test_the_product_is_four_one_lane_rows_and_fewer_warp_instructions():
    rng = np.random.default_rng(3)
    a, b = tfa._floats(rng, 64, 110, 145), tfa._floats(rng, 64, 110, 145)
    info: dict = {}
    tsf.check("fmul", {}, a, b, b, weights=True, options=UNIT, info=info)
    code = info["program"].code
    rows = [i for i, x in enumerate(code) if x.op == "fmulf"]
    assert len(rows) == 4 and rows == list(range(rows[0], rows[0] + 4))
    assert [code[i].mod("lane") for i in rows] == [0, 1, 2, 3]
    assert sum(x.op == "frange" for x in code) == 1
    unit = info["stats"].machine_by_ptx[info["ptx"]]
    tsf.check("fmul", {}, a, b, b, weights=True, options=tfa.NATIVE, info=info)
    assert unit < 0.3 * info["stats"].machine_by_ptx[info["ptx"]]


def test_the_fma_takes_two_unit_products_and_one_range_row():
    rng = np.random.default_rng(6)
    a, b, c = tfa._floats(rng, 32, 110, 145), tfa._floats(rng, 32, 110, 145), tfa._floats(rng, 32, 100, 150)
    info: dict = {}
    tsf.check("ffma", {}, a, b, c, weights=True, options=UNIT, info=info)
    code = info["program"].code
    assert sum(x.op == "frange" for x in code) == 1
    assert [bool(x.mod("err")) for x in code if x.op == "fmulf"] == [False] * 4 + [True] * 4
    unit = info["stats"].machine_by_ptx[info["ptx"]]
    tsf.check("ffma", {}, a, b, c, weights=True, options=tfa.NATIVE, info=info)
    assert unit < 0.6 * info["stats"].machine_by_ptx[info["ptx"]]


def test_a_one_lane_row_kills_nothing():
    """Three of the four rows would look dead if a lane row killed its destination."""
    mk = lambda k: MInstr("fmulf", (R(1),), (R(2), R(3)), {"lane": k})  # noqa: E731
    code = [mk(0), mk(1), mk(2), mk(3), MInstr("st", (), (R(4), R(1)), {"space": "global", "size": 4}),
            MInstr("exit", (), ())]
    assert dead_results(code)[:4] == [False] * 4
    code[4] = MInstr("mov", (R(1),), (Imm(0),))  # overwritten before any read: the last row is dead
    assert dead_results(code)[3]


def _program(code: list[MInstr]) -> Program:
    rng = np.random.default_rng(3)
    a = tfa._floats(rng, 32, 110, 145)
    info: dict = {}
    tsf.check("fmul", {}, a, a, a, weights=True, options=UNIT, info=info)
    return replace(info["program"], code=code, ptx_ranges=[])


def test_the_expansion_keeps_branch_targets():
    code = [MInstr("bra", (), (), target=2), MInstr("mov", (R(2),), (Imm(1),)),
            MInstr("fmulf", (R(1),), (R(2), R(2))), MInstr("bra", (), (), target=2), MInstr("exit", (), ())]
    prog = expand_one_lane(_program(code))
    ops = [x.op for x in prog.code]
    assert ops == ["bra", "mov", "fmulf", "fmulf", "fmulf", "fmulf", "bra", "exit"]
    assert prog.code[0].target == 2 and prog.code[6].target == 2


def _field(row: int, name: str) -> int:
    from qwengpu.machine.circuit import ROM_FIELDS

    off = 0
    for n, w in ROM_FIELDS:
        if n == name:
            return (row >> off) & ((1 << w) - 1)
        off += w
    raise KeyError(name)


def test_the_rom_row_names_the_lane_and_a_machine_without_the_unit_refuses_it():
    from qwengpu.errors import MachineLimitError
    from qwengpu.machine.circuit import OP, MachineShape
    from qwengpu.runtime.engine import encode_program

    prog = _program([MInstr("fmulf", (R(1),), (R(2), Imm(0x3F800000)), {"lane": 3}), MInstr("exit", (), ())])
    unit = MachineShape(multiplier=True, fadd=True, fmulf=True)
    row = encode_program(prog, bytes(64), (32, 1, 1), unit)[0]
    assert (_field(row, "op"), _field(row, "target"), _field(row, "dst")) == (OP["fmulf"], 3, 1)
    assert (_field(row, "ra"), _field(row, "b_imm"), _field(row, "imm")) == (2, 1, 0x3F800000)
    with pytest.raises(MachineLimitError, match="one-lane float multiplier"):
        encode_program(prog, bytes(64), (32, 1, 1), MachineShape(multiplier=True, fadd=True))
    with pytest.raises(MachineLimitError, match="names its lane"):
        encode_program(replace(prog, code=[MInstr("fmulf", (R(1),), (R(2), R(3))), prog.code[1]]),
                       bytes(64), (32, 1, 1), unit)


def test_the_range_row_matters(monkeypatch: pytest.MonkeyPatch):
    """Negative control: with the range row taken as always true, the lanes outside the unit's
    range (subnormal, infinite, NaN, extreme exponents) keep the unit's word, which is not the
    product, and the exactness test above would see it."""
    from qwengpu.isa.instr import TRUE

    monkeypatch.setattr(sf, "_range_row", lambda b, a, c, ftz: TRUE)
    a, b, c = tfa._cases(5)[1]
    with pytest.raises(AssertionError, match="differ"):
        tsf.check("fmul", {}, a, b, c, weights=True, options=UNIT)


def test_without_the_unit_nothing_changes():
    """The options without ``native_fmulf`` lower ``mul.rn.f32`` as before (no fmulf row)."""
    rng = np.random.default_rng(4)
    a, b = tfa._floats(rng, 32, 110, 145), tfa._floats(rng, 32, 110, 145)
    info: dict = {}
    tsf.check("fmul", {}, a, b, b, weights=True, options=replace(UNIT, native_fmulf=False), info=info)
    assert not any(x.op == "fmulf" for x in info["program"].code)
