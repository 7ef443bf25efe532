"""float64 on the machine: the simulator's pair ops and the weights' integer expansions.

Two independent proofs per PTX f64 form (``f64_helpers.FORMS``), all rounding modes PTX allows:
1. the simulator's op (exact rationals, ``qwengpu.isa.f64``) equals an independent
   implementation: the interpreter's NumPy-based ``qwengpu.simt.fp32`` functions (error-free
   transforms; NumPy's correctly rounded rn) -- compared bit for bit;
2. the integer sequence the weights run (``softfloat64.py`` after ``expand_for_weights``: only
   weight ops left) equals the simulator's op, on every pair of an edge set (zeros, subnormals,
   range ends, infinities, NaN payloads, rounding ties, near-cancelling operands), random bits
   and hypothesis-drawn operands.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from f64_helpers import run
from hypothesis import given, settings
from hypothesis import strategies as st

from qwengpu.isa import f64 as F
from qwengpu.simt import fp32

MODES = ("rn", "rz", "rm", "rp")
IMODES = ("rni", "rzi", "rmi", "rpi")


def b64(x: float) -> int:
    return int(np.array([x], dtype=np.float64).view(np.uint64)[0])


EDGES = np.array(
    [0, 1 << 63, 1, (1 << 63) | 1, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x8010000000000000,
     0x3FF0000000000000, 0x3FF0000000000001, 0xBFF0000000000000, 0x3FF8000000000000, 0x4000000000000000,
     0x3FE0000000000000, 0xBFE0000000000000, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FF0000000000000,
     0xFFF0000000000000, 0x7FF8000000000000, 0x7FF0000000000001, 0xFFF8000000000123, 0x4330000000000000,
     0x4330000000000001, b64(2.5), b64(-3.5), b64(0.1), b64(1e300), b64(1e-300), b64(2.0**-1022 * 1.5),
     b64(2.0**31), b64(-(2.0**31)), b64(2.0**63), b64(-(2.0**63)), b64(4294967295.5)],
    dtype=np.uint64,
)  # fmt: skip


def edge_pairs() -> tuple[np.ndarray, np.ndarray]:
    a, b = zip(*itertools.product(EDGES, EDGES), strict=True)
    n = len(a) // 32 * 32
    return np.array(a[:n], dtype=np.uint64), np.array(b[:n], dtype=np.uint64)


def random_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**64, n, dtype=np.uint64)


def close(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Near-cancelling pairs: b ~ -a (massive cancellation, exact zeros, sticky bits)."""
    a = random_bits(rng, n) & np.uint64(0x3FFFFFFFFFFFFFFF) | np.uint64(0x3000000000000000)
    d = rng.integers(-4, 5, n).astype(np.int64).view(np.uint64)
    return a, (a + d) ^ np.uint64(1 << 63)


def _ref(form: str, r: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """What the form means, from fp32.py (independent of qwengpu.isa.f64)."""
    with np.errstate(all="ignore"):
        if form in ("add", "sub", "mul", "div"):
            return getattr(fp32, form + "64")(a, b, r)
        if form == "fma":
            return fp32.fma64(a, b, c, r)
        if form == "rcp":
            return fp32.rcp64(a, r)
        if form == "sqrt":
            return fp32.sqrt64(a, r)
        if form in ("min", "max"):
            return getattr(fp32, form + "64")(a, b)
        if form == "setp":
            return fp32.setp64(r, a, b).astype(np.uint64)
        if form == "d2f":
            return fp32.f32_from_f64(a, r).astype(np.uint64)
        if form == "d2f_ftz":
            return fp32.f32_from_f64(a, r, True).astype(np.uint64)
        if form in ("f2d", "f2d_ftz"):
            return fp32.f64_from_f32((a & np.uint64(M32)).astype(np.uint32), form == "f2d_ftz")
        if form in ("s64", "u64"):
            return fp32.f64_from_int(a.view(np.int64) if form == "s64" else a, form, r)
        if form in ("s32", "u32"):
            lo = (a & np.uint64(M32)).astype(np.uint32)
            return fp32.f64_from_int(lo.view(np.int32) if form == "s32" else lo, form, r)
        if form.startswith("to_"):
            t = form[3:]
            v = fp32.int_from_f64(a, t, r).astype(np.int64).view(np.uint64)
            return v & np.uint64((1 << int(t[1:])) - 1)
        if form == "rint":
            f = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[r]
            x = f(a.view(np.float64))
            out = x.view(np.uint64).copy()
            out[x != x] = F.CNAN
            return out
    raise AssertionError(form)


M32 = 0xFFFFFFFF
BINARY = [(f, r) for f in ("add", "sub", "mul", "div") for r in MODES]
UNARY = [(f, r) for f in ("sqrt", "rcp") for r in MODES]
CONV = (
    [(f, r) for f in ("d2f", "d2f_ftz", "s64", "u64", "s32", "u32") for r in MODES]
    + [("f2d", ""), ("f2d_ftz", "")]
    + [(f, r) for f in ("to_s32", "to_u32", "to_s64", "to_u64", "rint") for r in IMODES]
)
CMPS = [
    ("setp", c)
    for c in ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
]
ALL = [*BINARY, *UNARY, *[("fma", r) for r in MODES], ("min", ""), ("max", ""), *CONV, *CMPS]


def _inputs(form: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ea, eb = edge_pairs()
    ra, rb = random_bits(rng, 256), random_bits(rng, 256)
    ca, cb = close(rng, 128)
    a = np.concatenate([ea, ra, ca])
    b = np.concatenate([eb, rb, cb])
    c = np.concatenate([eb[::-1], random_bits(rng, 256), ca ^ np.uint64(1 << 63)])
    if form == "fma":  # c ~ -(a*b): the exact product decides
        with np.errstate(all="ignore"):
            p = (ra.view(np.float64) * rb.view(np.float64)).view(np.uint64) ^ np.uint64(1 << 63)
        c[len(ea) : len(ea) + 256 : 2] = p[::2]
    if form.startswith("to_") or form == "rint":  # values near the integers and the ranges
        k = rng.integers(-(2**40), 2**40, 256).astype(np.float64) / rng.choice([1, 2, 4, 1024], 256)
        a[len(ea) : len(ea) + 256] = k.view(np.uint64)
    return a, b, c


@pytest.mark.parametrize(("form", "r"), ALL, ids=lambda x: x or "-")
def test_simulator_op_equals_independent_model(form: str, r: str) -> None:
    """The simulator's exact f64 ops (isa/f64.py) equal fp32.py's, bit for bit."""
    a, b, c = _inputs(form)
    got = run(form, r, a, b, c, weights=False)
    want = _ref(form, r, a, b, c)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), (
        f"{len(bad)} differ; first a={a[bad[0]]:#x} b={b[bad[0]]:#x} c={c[bad[0]]:#x} "
        f"machine {got[bad[0]]:#x} model {want[bad[0]]:#x}"
    )


#: the long sequences' directed modes toward infinity run in the slow suite (1-3 s each on the
#: simulator): the default run keeps rn and rz of them, and every mode of the other forms
SLOW_WEIGHT_FORMS = [(f, r) for f in ("mul", "fma", "div", "sqrt", "rcp") for r in ("rm", "rp")]


@pytest.mark.parametrize(("form", "r"), [x if x not in SLOW_WEIGHT_FORMS else
                                         pytest.param(*x, marks=pytest.mark.slow) for x in ALL],
                         ids=lambda x: x or "-")
def test_weight_sequence_equals_simulator_op(form: str, r: str) -> None:
    """The integer expansion (weight ops only) equals the simulator's op on edges, random bits
    and near-cancelling operands."""
    a, b, c = _inputs(form, 1)
    got = run(form, r, a, b, c, weights=True)
    want = run(form, r, a, b, c, weights=False)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), (
        f"{len(bad)} differ; first a={a[bad[0]]:#x} b={b[bad[0]]:#x} c={c[bad[0]]:#x} "
        f"weights {got[bad[0]]:#x} simulator {want[bad[0]]:#x}"
    )


def test_setp_bop_and_guard() -> None:
    """setp.lt.xor.f64 with a third predicate, sequence and op agree with the model."""
    a, b = edge_pairs()
    p3 = (np.arange(len(a)) & 1).astype(bool)
    want = fp32.setp64("lt", a, b) ^ p3
    for w in (False, True):
        assert (run("setp_bop", "lt", a, b, weights=w) == want.astype(np.uint64)).all()


@pytest.mark.parametrize("r", ["rn", "rm"])
def test_guarded_ops_with_aliased_destination(r: str) -> None:
    """@p add / @!p div into a register that is also a source: lanes whose guard is false keep it."""
    a, b = edge_pairs()
    odd = (np.arange(len(a)) & 1).astype(bool)
    add, div = fp32.add64(a, b, r), fp32.div64(b, a, r)
    for w in (False, True):
        assert (run("guarded_add", r, a, b, weights=w) == np.where(odd, add, a)).all()
        assert (run("guarded_div", r, a, b, weights=w) == np.where(odd, a, div)).all()


words = st.lists(st.integers(0, 2**64 - 1), min_size=32, max_size=32)


@settings(max_examples=12, deadline=None)
@given(words, words, words, st.sampled_from(["add", "mul", "fma", "div", "sqrt"]), st.sampled_from(MODES))
def test_hypothesis_operands(a, b, c, form, r) -> None:
    a, b, c = (np.array(x, dtype=np.uint64) for x in (a, b, c))
    want = _ref(form, r, a, b, c)
    assert (run(form, r, a, b, c, weights=False) == want).all()
    assert (run(form, r, a, b, c, weights=True) == want).all()


def test_float_expression_with_double_literal() -> None:
    """``x * 0.5 + 1.25`` with a float x: NVRTC's cvt.f64.f32 + fma.rn.f64 + cvt.rn.f32.f64."""
    from pathlib import Path

    from qwengpu.codegen.pipeline import run_machine_sim
    from qwengpu.codegen.soft import run_for_weights

    cu = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels" / "dbl.cu"
    for r in (run_machine_sim(cu), run_for_weights(cu)):
        assert r.passed, r.mismatches


@pytest.mark.parametrize(
    ("op", "ta", "tc"),
    [
        ("cvt.rzi.s64.f32", "f32", "s64"),
        ("cvt.rzi.u64.f32", "f32", "u64"),
        ("cvt.rzi.s32.f64", "f64", "s32"),
        ("cvt.rni.u32.f64", "f64", "u32"),
        ("cvt.rzi.s64.f64", "f64", "s64"),
        ("cvt.rzi.u16.f64", "f64", "u16"),
        ("cvt.rzi.s16.f64", "f64", "s16"),
        ("cvt.rzi.s32.f32", "f32", "s32"),
    ],
)
def test_nan_to_integer_follows_ptx(op: str, ta: str, tc: str) -> None:
    """A NaN converts to 0 only from f32 to at most 32 bits, else to 1 << (width - 1) (PTX ISA 9.0;
    an H200 gives 0x8000000000000000 for ``cvt.rzi.s64.f32``): the lowering (the sequences for the
    64-bit and sub-word cases) equal to the interpreter, and both to that rule."""
    from machine_helpers import assert_same, binop_ptx, binop_spec, both

    nans = [0x7FC00000, 0xFFC00001, 0x7F800001] if ta == "f32" else [0x7FF8000000000000, 0xFFF0000000000001]
    ones = [0x3F800000] if ta == "f32" else [0x3FF0000000000000]
    vals = nans + ones
    tload = "u64" if ta == "f64" else ta  # the f64 words travel as 64-bit integers
    ptx = binop_ptx(f"{op} {{C}}, {{A}};", tload, "u32", tc)
    ref, got, _, _ = both(ptx, binop_spec(vals, [0] * len(vals), tload, "u32", tc))
    assert_same(ref, got)
    bits = int(tc[1:])
    want = 0 if ta == "f32" and bits <= 32 else 1 << (bits - 1)
    out = np.asarray(ref["out"]).view(f"uint{bits}").tolist()
    assert out == [want] * len(nans) + [1]
