"""Float multiply and fma on the adders (issue 14): the exact product from 12 × 12 ``mul`` rows,
rounded in integer for ``mul.rn`` and, as two exact floats X + L, by Boldo and Melquiond's correctly
rounded sum of three floats on ``fadd`` rows for ``fma.rn``, with the integer sequence as the slow
path for the lanes outside its range. Run on
the ISA simulator with the machine's options (the multiplier and the adders) against
``qwengpu.simt.fp32`` (exact rational arithmetic), on operands built to find its faults:
cancellation, rounding ties, sparse significands (exact products), exponent sums at the ends of
the fast range, zeros, subnormals, constants. The negative control widens the range: the test
must then fail."""

from __future__ import annotations

import numpy as np
import pytest
import test_softfloat as tsf

from qwengpu.codegen import softfloat as sf
from qwengpu.codegen.softcore import Options
from qwengpu.simt import fp32

NATIVE = Options(native_mul=True, native_fadd=True)
U = np.uint32
SIGN = U(0x80000000)


def _floats(rng: np.random.Generator, n: int, lo: int, hi: int) -> np.ndarray:
    """Floats with exponent fields in [lo, hi); 40 % with three set (or three clear) fraction bits:
    their products are often exact or exactly halfway."""
    e = rng.integers(lo, hi, n).astype(U)
    frac = rng.integers(0, 1 << 23, n).astype(U)
    sparse = np.zeros(n, U)
    for _ in range(3):
        sparse |= U(1) << rng.integers(0, 23, n).astype(U)
    sparse = np.where(rng.random(n) < 0.5, sparse, U(0x7FFFFF) ^ sparse)
    frac = np.where(rng.random(n) < 0.4, sparse, frac)
    return ((rng.integers(0, 2, n).astype(U) << U(31)) | (e << U(23)) | frac).astype(U)


def _addends(rng: np.random.Generator, a: np.ndarray, b: np.ndarray, kind: int) -> np.ndarray:
    n = len(a)
    p = fp32.mul(a, b)
    if kind == 0:  # anything, specials included
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(U)
    if kind == 1:  # cancellation: within 3 units of -round(a*b)
        return ((p ^ SIGN) + rng.integers(-3, 4, n).astype(U)).astype(U)
    if kind == 2:  # 20-30 binades below the product, few bits: the sum lands on ties
        e = ((p >> U(23)) & U(0xFF)).astype(np.int64) - rng.integers(20, 30, n)
        e = np.clip(e, 0, 254).astype(U)
        s = rng.integers(0, 2, n).astype(U) << U(31)
        return (s | (e << U(23)) | (rng.integers(0, 4, n).astype(U) << U(21))).astype(U)
    zeros = np.where(rng.random(n) < 0.5, U(0), SIGN)  # signed zeros and subnormals
    return (zeros | np.where(rng.random(n) < 0.3, rng.integers(0, 1 << 23, n).astype(U), U(0))).astype(U)


def _cases(seed: int, n: int = 1024) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for k, (lo, hi) in enumerate([(100, 154), (1, 255), (60, 200), (120, 135), (80, 100)]):
        a, b = _floats(rng, n, lo, hi), _floats(rng, n, lo, hi)
        out.append((a, b, _addends(rng, a, b, k % 4)))
    # exponent sums at the ends of the fast range (ES_MIN, ES_MAX) and just outside it
    ea = rng.integers(1, 255, n)
    es = rng.choice([sf.ES_MIN - 1, sf.ES_MIN, sf.ES_MIN + 1, sf.ES_MAX - 1, sf.ES_MAX, sf.ES_MAX + 1], n)
    eb = np.clip(es - ea, 1, 254)
    a, b = _floats(rng, n, 1, 2), _floats(rng, n, 1, 2)
    a = (a & U(0x807FFFFF)) | (ea.astype(U) << U(23))
    b = (b & U(0x807FFFFF)) | (eb.astype(U) << U(23))
    out.append((a.astype(U), b.astype(U), _addends(rng, a, b, 1)))
    out.append((a.astype(U), b.astype(U), _addends(rng, a, b, 3)))
    # the ISA tests' operands: edge pairs (zeros, subnormals, inf, NaN) and mixed words
    out.append(tsf.operands("ffma", rng, n))
    return out


# .ftz: slow (5-6 s each on the simulator); the sequences' ftz handling: tests/machine/test_softfloat.py
@pytest.mark.parametrize("ftz", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("op", ["fmul", "ffma"])
def test_mul_and_fma_on_the_adders_are_exact(op, ftz):
    mods = {"ftz": True} if ftz else {}
    for a, b, c in _cases(41 + ftz + 2 * (op == "ffma")):
        tsf.check(op, mods, a, b, c, weights=True, options=NATIVE)
    a, b, c = _cases(7)[0]
    tsf.check(op, mods, a, b, c, weights=True, options=NATIVE, guard=True)
    tsf.check(op, mods, a, b, c, weights=True, options=NATIVE, alias=0)
    for k in (0x3FB8AA3B, 0x3F000000, 0xC0490FDB, 0x00000001, 0x7F800000, 0, 0x7F7FFFFF, 0x00800000):
        tsf.check(op, mods, a, b, c, weights=True, options=NATIVE, imm={1: k})
    if op == "ffma":
        for k in (0x3FB8AA3B, 0, 0x80000000, 0x7E800000, 0x7E7FFFFF, 0x00000003, 0x7FC00000):
            tsf.check(op, mods, a, b, c, weights=True, options=NATIVE, imm={2: k})


@pytest.mark.parametrize("op", ["fmul", "ffma"])
def test_normal_operands_take_the_fast_path(op):
    """Warps whose lanes are all in range (zeros included) issue only the fast path: fewer machine
    instructions than the integer sequence alone; a warp with one NaN lane issues both (of the
    launch's two warps, the other one the fast path only)."""
    rng = np.random.default_rng(3)
    a, b = _floats(rng, 64, 110, 145), _floats(rng, 64, 110, 145)
    a[5] = 0
    c = _floats(rng, 64, 100, 150)

    def issued(x: np.ndarray, options: Options) -> float:
        info: dict = {}
        tsf.check(op, {}, x, b, c, weights=True, options=options, info=info)
        return info["stats"].machine_by_ptx[info["ptx"]] / 2

    fast, slow = issued(a, NATIVE), issued(a, Options(native_mul=True))
    assert fast < (0.8 if op == "fmul" else 0.6) * slow, (fast, slow)
    nan = a.copy()
    nan[7] = 0x7FC00000
    assert issued(nan, NATIVE) > fast + slow / 2


def test_the_range_checks_matter(monkeypatch: pytest.MonkeyPatch):
    """Negative control: with the fast range widened past what the pieces can hold, products with
    small exponent sums (pieces in the subnormal range) go wrong, and the test above would see it."""
    monkeypatch.setattr(sf, "ES_MIN", 120)
    a, b, c = _cases(5)[1]
    with pytest.raises(AssertionError, match="differ"):
        tsf.check("fmul", {}, a, b, c, weights=True, options=NATIVE)


def test_the_fast_path_gives_way_when_the_rom_is_full():
    """The fast path and its slow routine are longer than the integer sequence alone: a program
    that does not fit the ROM with them is lowered without them (``Options.fast_floats``), and
    still gives fp32's bits."""
    from dataclasses import replace

    from machine_helpers import binop_ptx, binop_spec

    from qwengpu.codegen.soft import simulate_for_weights
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.spec import parse_spec

    rng = np.random.default_rng(9)
    a, b = _floats(rng, 32, 110, 145), _floats(rng, 32, 110, 145)
    module = parse_ptx(binop_ptx("fma.rn.f32 {C}, {A}, {B}, {B};", "f32", "f32", "f32"))
    spec = parse_spec(binop_spec(a.tolist(), b.tolist(), "u32", "u32", "u32"))
    want = fp32.fma(a, b, b).tolist()

    def lowered(options: Options) -> tuple[list[int], int, int]:
        out, _, prog = simulate_for_weights(module, spec, options=options)
        fadds = sum(x.op in ("fadd", "fsub") for x in prog.code)
        return np.asarray(out["out"]).view(np.uint32).tolist(), len(prog.code), fadds

    got, roomy, fadds = lowered(NATIVE)
    assert got == want and fadds >= 10
    got, slim, fadds = lowered(replace(NATIVE, fast_floats=False))
    assert got == want and fadds == 0 and slim < roomy
    got, tight, fadds = lowered(replace(NATIVE, budget=slim + 4))
    assert got == want and fadds == 0 and tight == slim


@pytest.mark.slow  # ~25 s: the lowering of a 949-row kernel
def test_a_kernel_that_outgrows_the_registers_spills_and_keeps_the_fast_path(monkeypatch: pytest.MonkeyPatch):
    """External nbody_integrate has more values live at once than 32 registers with the fast path
    inline. Since spill slots are sized from the free memory (docs/machine-in-weights.md 9.7) it
    is lowered once, with the fast path and the multiplier, and spills (this test said "drops the
    fast path first" until then, and failed since: found and corrected with issue 26's one-lane
    rows)."""
    from pathlib import Path

    from qwengpu.codegen import softmem
    from qwengpu.compiler import text_config
    from qwengpu.model import configs
    from qwengpu.runtime.engine import prepare

    tried = []
    inner = softmem._lower_for_weights

    def spy(*args, options=None, **kw):
        tried.append((options.native_mul, options.fast_floats))
        return inner(*args, options=options, **kw)

    monkeypatch.setattr(softmem, "_lower_for_weights", spy)
    cu = Path(__file__).resolve().parents[2] / "kernels" / "external" / "nbody_integrate.cu"
    _, prog, *_ = prepare(cu, None, configs.shape_for(text_config("qwen3_5_2b_text")))
    assert tried == [(True, True)]
    assert prog.spill_words > 0
    assert any(x.op == "mul" for x in prog.code)
