"""Sequences the lowering expands PTX forms into, checked bit for bit against the interpreter on
edge values: 64-bit pairs (carries across the word boundary, INT64_MIN, shifts by 0/31/32/63),
integer division (INT_MIN / -1, negative operands, unsigned max), sub-word types, and the exact
float sequences (div, rcp, sqrt in every rounding mode, conversions to and from 64-bit)."""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

import pytest
from machine_helpers import assert_same, binop_ptx, binop_spec, both

from qwengpu.codegen.pipeline import run_machine_sim

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_fuzz_kernels as fz  # noqa: E402

M64 = 2**64 - 1
E64 = [
    0,
    1,
    2,
    3,
    M64,
    M64 - 1,
    2**63,
    2**63 - 1,
    2**63 + 1,
    2**32,
    2**32 - 1,
    2**32 + 1,
    2**31,
    2**31 - 1,
    M64 - 2**31 + 1,
    0xFFFFFFFF00000000,
    0x8000000080000000,
    0x7FFFFFFF80000000,
    5,
    7,
    10,
    M64 - 6,
]
E32 = [
    0,
    1,
    2,
    3,
    7,
    10,
    0xFFFFFFFF,
    0xFFFFFFFE,
    0xFFFFFFF9,
    0x80000000,
    0x7FFFFFFF,
    0x80000001,
    0x10000,
    0xFFFF,
    31,
    32,
    33,
    63,
    64,
]
SHIFTS = [0, 1, 31, 32, 33, 63, 64, 65, 100, 0xFFFFFFFF, 0x80000000]
N = 160  # 5 blocks of 32: three 64-bit buffers fit the machine's 1024 words


def pairs(ea: list[int], eb: list[int], seed: int, n: int = N, bits: int = 64) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    cross = [(x, y) for x in ea for y in eb]
    rng.shuffle(cross)
    out = cross[: n * 3 // 4]
    while len(out) < n:
        out.append((rng.getrandbits(bits), rng.getrandbits(bits) >> rng.randrange(bits)))
    return [x for x, _ in out], [y for _, y in out]


def run_binop(op: str, ta: str, tb: str, tc: str, a: list[int], b: list[int]) -> None:
    ref, got, _, _ = both(binop_ptx(op, ta, tb, tc), binop_spec(a, b, ta, tb, tc))
    assert_same(ref, got)


OPS64 = [
    "add.s64 {C}, {A}, {B};",
    "sub.s64 {C}, {A}, {B};",
    "mul.lo.s64 {C}, {A}, {B};",
    "mul.hi.u64 {C}, {A}, {B};",
    "mul.hi.s64 {C}, {A}, {B};",
    "and.b64 {C}, {A}, {B};",
    "or.b64 {C}, {A}, {B};",
    "xor.b64 {C}, {A}, {B};",
    "min.s64 {C}, {A}, {B};",
    "max.u64 {C}, {A}, {B};",
    "min.u64 {C}, {A}, {B};",
    "max.s64 {C}, {A}, {B};",
    "neg.s64 {C}, {A};",
    "abs.s64 {C}, {A};",
    "not.b64 {C}, {A};",
    "brev.b64 {C}, {A};",
    "add.s64 {C}, {A}, 4294967295;",
    "sub.s64 {C}, {A}, -1;",
]


@pytest.mark.parametrize("op", OPS64)
def test_pair_arithmetic(op: str) -> None:
    a, b = pairs(E64, E64, hash(op) % 1000)
    run_binop(op, "u64", "u64", "u64", a, b)


@pytest.mark.parametrize("op", ["div.u64", "rem.u64", "div.s64", "rem.s64"])
def test_pair_division(op: str) -> None:
    a, b = pairs(E64, [x for x in E64 if x] + [M64, 2**63], 11)
    b = [y or 3 for y in b]
    run_binop(f"{op} {{C}}, {{A}}, {{B}};", "u64", "u64", "u64", a, b)


@pytest.mark.parametrize(
    "cmp,t",
    [(c, t) for t in ("s64", "u64") for c in ("eq", "ne", "lt", "le", "gt", "ge")]
    + [(c, "u64") for c in ("lo", "ls", "hi", "hs")],
)
def test_pair_compare(cmp: str, t: str) -> None:
    a, b = pairs(E64, E64, 5)
    b[:20] = a[:20]  # equal operands
    op = f"setp.{cmp}.{t} %p1, {{A}}, {{B}}; selp.u32 {{C}}, 1, 0, %p1;"
    run_binop(op, "u64", "u64", "u32", a, b)


@pytest.mark.parametrize("kind", ["shl.b64", "shr.u64", "shr.s64"])
def test_pair_shift_by_register(kind: str) -> None:
    a, b = pairs(E64, SHIFTS, 3)
    run_binop(f"{kind} {{C}}, {{A}}, {{B}};", "u64", "u32", "u64", a, b)


@pytest.mark.parametrize("amount", [0, 1, 31, 32, 33, 63])
@pytest.mark.parametrize("kind", ["shl.b64", "shr.u64", "shr.s64"])
def test_pair_shift_by_immediate(kind: str, amount: int) -> None:
    a, b = pairs(E64, [0], 4)
    run_binop(f"{kind} {{C}}, {{A}}, {amount};", "u64", "u32", "u64", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "clz.b64 {C}, {A};",
        "popc.b64 {C}, {A};",
        "bfind.u64 {C}, {A};",
        "bfind.s64 {C}, {A};",
        "bfind.shiftamt.u64 {C}, {A};",
        "cvt.u32.u64 {C}, {A};",
    ],
)
def test_pair_to_word(op: str) -> None:
    a, b = pairs(E64, [0], 6)
    run_binop(op, "u64", "u32", "u32", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "mul.wide.s32 {C}, {A}, {B};",
        "mul.wide.u32 {C}, {A}, {B};",
        "cvt.s64.s32 {C}, {A};",
        "cvt.u64.u32 {C}, {A};",
        "mad.wide.s32 {C}, {A}, {B}, 9223372036854775807;",
        "mad.wide.u32 {C}, {A}, {B}, -1;",
        "mul.hi.s32 %r20, {A}, {B}; cvt.s64.s32 {C}, %r20;",
    ],
)
def test_word_to_pair(op: str) -> None:
    a, b = pairs(E32, E32, 7, bits=32)
    run_binop(op, "u32", "u32", "u64", a, b)


@pytest.mark.parametrize("op", ["div.s32", "rem.s32", "div.u32", "rem.u32"])
def test_word_division(op: str) -> None:
    a, b = pairs(E32, [x for x in E32 if x], 8, bits=32)
    b = [y or 1 for y in b]
    run_binop(f"{op} {{C}}, {{A}}, {{B}};", "u32", "u32", "u32", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "div.s32 {C}, {A}, 7;",
        "rem.s32 {C}, {A}, -3;",
        "div.u32 {C}, {A}, 10;",
        "rem.u32 {C}, {A}, 4294967295;",
        "div.s32 {C}, {A}, -1;",
    ],
)
def test_word_division_by_constant(op: str) -> None:
    a, b = pairs(E32, [0], 9, bits=32)
    run_binop(op, "u32", "u32", "u32", a, b)


def test_int_min_divided_by_minus_one() -> None:
    a = [0x80000000] * 32
    b = [0xFFFFFFFF] * 32
    run_binop("div.s32 {C}, {A}, {B};", "u32", "u32", "u32", a, b)
    run_binop("rem.s32 {C}, {A}, {B};", "u32", "u32", "u32", a, b)
    run_binop("div.s64 {C}, {A}, {B};", "u64", "u64", "u64", [2**63] * 32, [M64] * 32)


@pytest.mark.parametrize(
    "op,t", [("div.s32", "u32"), ("rem.u32", "u32"), ("div.u64", "u64"), ("rem.s64", "u64")]
)
def test_division_by_zero_fault(op: str, t: str) -> None:
    a = list(range(1, 33))
    b = [3] * 32
    b[5] = 0
    b[9] = 0
    ref, got, _, _ = both(binop_ptx(f"{op} {{C}}, {{A}}, {{B}};", t, t, t), binop_spec(a, b, t, t, t))
    assert isinstance(ref, str) and "integer division by zero" in ref and "lane 5" in ref
    assert_same(ref, got)


OPS16 = [
    "add.s16 {C}, {A}, {B};",
    "sub.u16 {C}, {A}, {B};",
    "mul.lo.s16 {C}, {A}, {B};",
    "mul.hi.s16 {C}, {A}, {B};",
    "mul.hi.u16 {C}, {A}, {B};",
    "shr.s16 {C}, {A}, 3;",
    "shr.u16 {C}, {A}, 17;",
    "shl.b16 {C}, {A}, 9;",
    "min.s16 {C}, {A}, {B};",
    "max.u16 {C}, {A}, {B};",
    "and.b16 {C}, {A}, 255;",
    "not.b16 {C}, {A};",
    "neg.s16 {C}, {A};",
    "abs.s16 {C}, {A};",
    "setp.lt.s16 %p1, {A}, {B}; selp.b16 {C}, {A}, {B}, %p1;",
    "setp.gt.u16 %p1, {A}, {B}; selp.b16 {C}, 7, {B}, %p1;",
]


@pytest.mark.parametrize("op", OPS16)
def test_sub_word(op: str) -> None:
    e16 = [0, 1, 0xFFFF, 0x8000, 0x7FFF, 0x8001, 255, 256, 0xFF00]
    a, b = pairs(e16, e16, 12, n=96, bits=16)
    run_binop(op, "s16", "s16", "s16", a, b)


@pytest.mark.parametrize("op", ["div.s16 {C}, {A}, {B};", "rem.s16 {C}, {A}, {B};", "div.u16 {C}, {A}, {B};"])
def test_sub_word_division(op: str) -> None:
    e16 = [1, 0xFFFF, 0x8000, 0x7FFF, 3, 255, 256]
    a, b = pairs(e16, e16, 13, n=96, bits=16)
    b = [y or 1 for y in b]
    run_binop(op, "u16", "u16", "u16", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "cvt.s32.s16 {C}, {A};",
        "cvt.u32.u16 {C}, {A};",
        "cvt.s32.s8 {C}, {A};",
        "cvt.rn.f32.s16 {C}, {A};",
        "cvt.u32.s8 {C}, {A};",
    ],
)
def test_sub_word_conversions(op: str) -> None:
    e16 = [0, 1, 0xFFFF, 0x8000, 0x7FFF, 0x80, 0x7F, 0xFF]
    a, b = pairs(e16, [0], 14, n=64, bits=16)
    tc = "f32" if "f32" in op else "u32"
    run_binop(op, "s16", "s16", tc, a, b)


# ---------------------------------------------------------------------------------------------
# floats
# ---------------------------------------------------------------------------------------------
# the float edge values of the interpreter's fuzz tests, plus values that stress the sequences
FEDGE = [*fz.FEDGE, 0x7FC00001, 0x40400000, 0xBF7FFFFF, 0x00400000, 0x00000003, 0x7E800000, 0x01000000,
         0x3FFFFFFF]


def fvals(seed: int, n: int = N) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    a, b = pairs(FEDGE, FEDGE, seed, n=n // 2, bits=32)
    for _ in range(n - len(a)):
        r = rng.random()
        if r < 0.3:
            x, y = rng.getrandbits(32), rng.getrandbits(32)
        elif r < 0.5:
            x, y = rng.getrandbits(23) | (rng.getrandbits(1) << 31), rng.getrandbits(32)
        else:
            x = struct.unpack("<I", struct.pack("<f", rng.uniform(-4, 4)))[0]
            y = struct.unpack("<I", struct.pack("<f", rng.uniform(-4, 4)))[0]
        a.append(x)
        b.append(y)
    return a, b


@pytest.mark.parametrize(
    "mods",
    [
        "rn",
        "rz",
        "rm",
        "rp",
        "rn.ftz",
        "rz.ftz",
        "rm.ftz",
        "rp.ftz",
        "full",
        "approx",
        "full.ftz",
        "approx.ftz",
    ],
)
def test_float_division(mods: str) -> None:
    a, b = fvals(21 + len(mods))
    run_binop(f"div.{mods}.f32 {{C}}, {{A}}, {{B}};", "f32", "f32", "f32", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "rcp.rn",
        "rcp.rz",
        "rcp.rm",
        "rcp.rp",
        "rcp.rn.ftz",
        "rcp.approx",
        "rcp.approx.ftz",
        "sqrt.rn",
        "sqrt.rz",
        "sqrt.rm",
        "sqrt.rp",
        "sqrt.rn.ftz",
        "sqrt.approx",
        "sqrt.rp.ftz",
        "rsqrt.approx",
        "rsqrt.approx.ftz",
    ],
)
def test_float_unary_sequences(op: str) -> None:
    a, b = fvals(31 + len(op))
    run_binop(f"{op}.f32 {{C}}, {{A}};", "f32", "f32", "f32", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "abs.ftz.f32 {C}, {A};",
        "neg.ftz.f32 {C}, {A};",
        "copysign.f32 {C}, {A}, {B};",
        "cvt.sat.f32.f32 {C}, {A};",
        "cvt.ftz.f32.f32 {C}, {A};",
        "cvt.rni.ftz.f32.f32 {C}, {A};",
        "min.ftz.f32 {C}, {A}, {B};",
        "testp.subnormal.f32 %p1, {A}; selp.f32 {C}, {A}, {B}, %p1;",
        "testp.normal.f32 %p1, {A}; selp.f32 {C}, {A}, {B}, %p1;",
        "testp.notanumber.f32 %p1, {A}; selp.f32 {C}, {A}, {B}, %p1;",
        "testp.finite.f32 %p1, {A}; selp.f32 {C}, {A}, {B}, %p1;",
        "setp.gtu.ftz.f32 %p1, {A}, {B}; selp.f32 {C}, {A}, {B}, %p1;",
        "add.rm.sat.f32 {C}, {A}, {B};",
        "fma.rp.ftz.f32 {C}, {A}, {B}, {A};",
        "slct.f32.f32 {C}, {A}, {B}, {A};",
        "set.lt.f32.f32 {C}, {A}, {B};",
    ],
)
def test_float_bit_sequences(op: str) -> None:
    a, b = fvals(41 + len(op))
    run_binop(op, "f32", "f32", "f32", a, b)


@pytest.mark.parametrize("rnd", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("src", ["s64", "u64"])
def test_int64_to_float(rnd: str, src: str) -> None:
    rng = random.Random(51)
    a = E64 + [rng.getrandbits(64) >> rng.randrange(64) for _ in range(N - len(E64))]
    a += [(1 << 24) + 1, (1 << 25) + 3, (1 << 53) + 1, 2**64 - 2**40 - 1]
    a = a[:N]
    run_binop(f"cvt.{rnd}.f32.{src} {{C}}, {{A}};", "u64", "u64", "f32", a, a)


@pytest.mark.parametrize("rnd", ["rni", "rzi", "rmi", "rpi", "rzi.ftz"])
@pytest.mark.parametrize("dst", ["s64", "u64", "s32", "u32", "s16", "u8"])
def test_float_to_int(rnd: str, dst: str) -> None:
    a, _ = fvals(61)
    extra = [
        0x5F000000,
        0xDF000000,
        0x5F800000,
        0x4F000000,
        0xCF000000,
        0x4F800000,
        0x5EFFFFFF,
        0xBF000000,
        0x3F000000,
        0x3FC00000,
        0xC0200000,
        0xBF400000,
    ]
    a = (extra + a)[:N]
    tc = "u64" if "64" in dst else "u32"
    run_binop(
        f"cvt.{rnd}.{dst}.f32 %rd25, {{A}}; mov.b64 {{C}}, %rd25;"
        if tc == "u64"
        else f"cvt.{rnd}.{dst}.f32 {{C}}, {{A}};",
        "f32",
        "f32",
        tc,
        a,
        a,
    )


@pytest.mark.parametrize(
    "op",
    [
        "bfe.u32 {C}, {A}, {B}, 5;",
        "bfe.s32 {C}, {A}, {B}, 9;",
        "bfe.s32 {C}, {A}, 28, {B};",
        "bfe.u32 {C}, {A}, 0, {B};",
        "bfi.b32 {C}, {A}, {B}, 3, 7;",
        "bfi.b32 {C}, {B}, {A}, {B}, 12;",
        "prmt.b32 {C}, {A}, {B}, 0x3210;",
        "prmt.b32 {C}, {A}, {B}, 0x8B4F;",
        "prmt.b32 {C}, {A}, {B}, {B};",
        "prmt.b32.f4e {C}, {A}, {B}, {B};",
        "prmt.b32.b4e {C}, {A}, {B}, {A};",
        "prmt.b32.rc16 {C}, {A}, {B}, {B};",
        "prmt.b32.ecl {C}, {A}, {B}, {B};",
        "prmt.b32.ecr {C}, {A}, {B}, {B};",
        "prmt.b32.rc8 {C}, {A}, {B}, {B};",
        "shf.l.wrap.b32 {C}, {A}, {B}, {B};",
        "shf.r.clamp.b32 {C}, {A}, {B}, {A};",
        "lop3.b32 {C}, {A}, {B}, {A}, 0x96;",
        "lop3.b32 {C}, {A}, {B}, {B}, 0xE8;",
        "bfind.s32 {C}, {A};",
        "bfind.shiftamt.u32 {C}, {A};",
        "brev.b32 {C}, {A};",
        "cnot.b32 {C}, {A};",
        "add.sat.s32 {C}, {A}, {B};",
        "sub.sat.s32 {C}, {A}, {B};",
        "mul.hi.u32 {C}, {A}, {B};",
        "mad.hi.s32 {C}, {A}, {B}, {A};",
        "add.cc.u32 %r20, {A}, {B}; addc.u32 {C}, {A}, {B};",
        "sub.cc.u32 %r20, {A}, {B}; subc.cc.u32 %r21, {B}, {A}; subc.u32 {C}, %r21, 1;",
        "cvt.sat.u8.s32 {C}, {A};",
        "cvt.sat.s16.u32 {C}, {A};",
    ],
)
def test_word_sequences(op: str) -> None:
    a, b = pairs(E32, E32 + [0x1F05, 0x3F, 0x2A, 0x91], 71, bits=32)
    run_binop(op, "u32", "u32", "u32", a, b)


@pytest.mark.parametrize(
    "op",
    [
        "mul24.hi.s32 {C}, {A}, {B};",
        "mul24.lo.s32 {C}, {A}, {B};",
        "mad24.lo.u32 {C}, {A}, {B}, {A};",
        "mul24.hi.u32 {C}, {A}, {B};",
    ],
)
def test_mul24(op: str) -> None:
    """Operands within the 24-bit range (the interpreter does not truncate signed operands to 24 bits,
    PTX does; the machine follows PTX, so they agree exactly there)."""
    e24 = [0, 1, 0x7FFFFF, 0xFFFFFFFF, 0xFF800000, 0xFF800001, 0x123456, 3]
    a, b = pairs(e24, e24, 73, bits=23)
    if "u32" in op:
        a, b = [x & 0xFFFFFF for x in a], [y & 0xFFFFFF for y in b]
    run_binop(op, "u32", "u32", "u32", a, b)


def test_bfi_64_immediate() -> None:
    a, b = pairs(E64, E64, 72)
    run_binop("bfi.b64 {C}, {A}, {B}, 32, 32;", "u64", "u64", "u64", a, b)
    run_binop("bfi.b64 {C}, {A}, {B}, 20, 30;", "u64", "u64", "u64", a, b)


# ---------------------------------------------------------------------------------------------
# f64: the lowering's pair sequences (mul.rn, conversions) and pair ops (tests/machine/test_softfloat64.py)
# ---------------------------------------------------------------------------------------------
D64 = [
    0,
    2**63,
    0x7FF0000000000000,
    0xFFF0000000000000,
    0x7FF8000000000001,
    0x3FF0000000000000,
    1,
    0x7FEFFFFFFFFFFFFF,
    0x000FFFFFFFFFFFFF,
    0x0010000000000000,
    0x3FF0000000000001,
    0x3CA0000000000000,
    0xBFEFFFFFFFFFFFFF,
    0x4340000000000000,
    0x3BF921FB54442D19,
    0x0000000000000003,
    0x2000000000000000,
    0x5FF0000000000000,
    0x3FE0000000000001,
    0x001FFFFFFFFFFFFF,
]


def test_f64_multiply() -> None:
    rng = random.Random(81)
    a, b = pairs(D64, D64, 81)
    for i in range(len(a) // 2):  # random exponents near each other, random significands
        a[i] = (rng.getrandbits(1) << 63) | (rng.randrange(700, 1300) << 52) | rng.getrandbits(52)
    run_binop("mul.rn.f64 %fd1, {A}, {B}; mov.b64 {C}, %fd1;", "u64", "u64", "u64", a, b)


@pytest.mark.parametrize("op", ["cvt.rn.f32.f64", "cvt.rz.f32.f64", "cvt.rm.f32.f64", "cvt.rp.ftz.f32.f64"])
def test_f64_to_f32(op: str) -> None:
    rng = random.Random(82)
    a = D64 + [
        (rng.getrandbits(1) << 63) | (rng.randrange(800, 1250) << 52) | rng.getrandbits(52)
        for _ in range(N - len(D64))
    ]
    run_binop(f"{op} {{C}}, {{A}};", "u64", "u64", "f32", a, a)


@pytest.mark.parametrize("op", ["cvt.rn.f64.s64", "cvt.rz.f64.u64", "cvt.rp.f64.s64", "cvt.rn.f64.s32"])
def test_int_to_f64(op: str) -> None:
    rng = random.Random(83)
    a = E64 + [rng.getrandbits(64) >> rng.randrange(64) for _ in range(N - len(E64))]
    src = "u32" if op.endswith("32") else "u64"
    run_binop(f"{op} %fd1, {{A}}; mov.b64 {{C}}, %fd1;", src, src, "u64", a, a)


def test_f32_to_f64() -> None:
    a, _ = fvals(84)
    run_binop("cvt.f64.f32 %fd1, {A}; mov.b64 {C}, %fd1;", "f32", "f32", "u64", a, a)
    run_binop("cvt.ftz.f64.f32 %fd1, {A}; mov.b64 {C}, %fd1;", "f32", "f32", "u64", a, a)


def test_f64_add_in_a_branch() -> None:
    """add.f64 is a machine op now (it used to trap): reached by one lane of a warp, as in PTX."""
    op = (
        "setp.gt.u32 %p1, {A}, 100; @%p1 bra $SKIP; add.f64 %fd1, {A}, {B}; mov.b64 {C}, %fd1; "
        "$SKIP: mov.b64 {C}, {A};"
    )
    a = [200 + k for k in range(32)]
    a[7] = 3
    run_binop(op, "u64", "u64", "u64", a, a)


@pytest.mark.parametrize("op", ["xor.b64", "or.b64", "and.b64"])
def test_window_offset_masks(tmp_path, op: str) -> None:
    """p[i ^ 1]-style offsets stay single-register window values; out-of-range ones still fault."""
    import json

    from qwengpu.runner import run_kernel

    sym = {"xor.b64": "^", "or.b64": "|", "and.b64": "&"}[op]
    src = (
        'extern "C" __global__ void k(const int* a, int* out, long long m) {\n'
        f"  long long i = threadIdx.x;\n  out[i] = a[i {sym} m];\n}}\n"
    )
    for m in (1, 6, 64):
        spec = {
            "kernel": "k",
            "grid": 1,
            "block": 32,
            "args": [
                {"name": "a", "type": "i32*", "data": list(range(100, 132))},
                {"name": "out", "type": "i32*", "size": 32},
                {"name": "m", "type": "i64", "value": m},
            ],
        }
        (tmp_path / "k.cu").write_text(src)
        (tmp_path / "k.json").write_text(json.dumps(spec))
        try:
            ref = run_kernel(tmp_path / "k.cu").outputs["out"].tobytes()
        except Exception as e:  # noqa: BLE001 - compare the fault
            ref = str(e)
        try:
            got = run_machine_sim(tmp_path / "k.cu").outputs["out"].tobytes()
        except Exception as e:  # noqa: BLE001
            got = str(e)
        assert got == ref
