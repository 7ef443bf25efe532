"""Lowering for the weights (``qwengpu/codegen/soft.py``): every corpus kernel runs bit-identically
after ``expand_for_weights`` and keeps no mul/mad/mulhi/general mulw/plop/sub-word global load;
the multiply sequences are right on edge values, immediates of every kind, under guards true and
false and under divergence (lanes with different operands); expected values come from Python
integer arithmetic (the corpus: from the interpreter, itself checked against the generator)."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from machine_helpers import HEADER, binop_ptx, binop_spec, run_interp

from qwengpu.codegen import soft
from qwengpu.codegen.soft import (
    INTEGER_EXPANDED,
    WEIGHT_OPS,
    Seq,
    const_plan,
    in_weights,
    run_for_weights,
    simulate_for_weights,
    unsupported_ops,
)
from qwengpu.errors import MachineLimitError, QwenGPUError
from qwengpu.isa.instr import POISON, Imm, MInstr, P, R
from qwengpu.ptx.parser import parse_ptx
from qwengpu.runner import corpus, run_kernel
from qwengpu.spec import parse_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_fuzz_kernels as fz  # noqa: E402

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
ITEMS = corpus(KERNELS)
M32 = 0xFFFFFFFF
EXPANDED_NAMES = {"mul", "mad", "mulhi", "mulw", "plop", "ld.global.1", "ld.global.2"}
VARIANTS = ["unrolled", "loop", "bitloop", "straight"]
_REF: dict[str, object] = {}


def s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _ref(cu: Path, spec: Path):
    if cu.stem not in _REF:
        _REF[cu.stem] = run_kernel(cu, spec, engine="interp")
    return _REF[cu.stem]


def _check_corpus(cu: Path, spec: Path, mul: str) -> None:
    ref = _ref(cu, spec)
    mul, _, neg = mul.partition("+")
    opts = soft.Options(mul=mul, only=frozenset(INTEGER_EXPANDED), negmin=True if neg else None)
    try:
        res = run_for_weights(cu, spec, options=opts)
    except MachineLimitError as e:
        msg = str(e)
        if "approximate instruction" in msg:
            pytest.skip("not lowered (approximate)")
        if mul == "straight" and "machine instructions of program" in msg:
            pytest.skip("the branch-free variant does not fit the program ROM")
        raise
    for name, want in ref.outputs.items():  # type: ignore[attr-defined]
        got = res.outputs[name]
        assert got.tobytes() == want.tobytes(), f"{name}: expanded {got} interpreter {want}"
    assert res.stats["ptx_warp_instructions"] == ref.stats["warp_instructions"]  # type: ignore[attr-defined]
    left = set(unsupported_ops(res.program))
    assert not left & EXPANDED_NAMES, left
    assert not any(x.op == "mulw" and not in_weights(x) for x in res.program.code)


@pytest.mark.parametrize("cu,spec", ITEMS, ids=[c.stem for c, _ in ITEMS])
def test_corpus_kernel_expanded(cu: Path, spec: Path) -> None:
    _check_corpus(cu, spec, "auto")


MUL_KERNELS = ["int64_arith", "mulhi", "rsqrt_norm", "grid_stride", "atomic_cas", "device_call", "gcd"]


# bitloop and straight are kept for the measurements: slow here
@pytest.mark.parametrize("mul", [*VARIANTS[:2], *(pytest.param(v, marks=pytest.mark.slow)
                                                   for v in VARIANTS[2:]), "auto+negmin"])
@pytest.mark.parametrize("name", MUL_KERNELS)
def test_corpus_multiply_variants(name: str, mul: str) -> None:
    _check_corpus(KERNELS / f"{name}.cu", KERNELS / f"{name}.json", mul)


def test_expansion_is_only_weight_ops_for_integer_kernels() -> None:
    for name in ("mulhi", "int64_arith", "char_short", "bitfield", "transpose_2d", "logic_ops"):
        res = run_for_weights(KERNELS / f"{name}.cu", only=INTEGER_EXPANDED)
        left = unsupported_ops(res.program)
        assert set(left) <= {"st.global.1", "st.global.2"}, (name, left)
        assert all(x.op in WEIGHT_OPS for x in res.program.code if x.op not in ("st",))


def test_auto_respects_the_rom_budget() -> None:
    res = run_for_weights(KERNELS / "mulhi.cu", only=INTEGER_EXPANDED, budget=512)
    big = run_for_weights(KERNELS / "mulhi.cu", mul="unrolled", only=INTEGER_EXPANDED)
    assert big.stats["machine_instructions"] > 512 >= res.stats["machine_instructions"]
    assert res.stats["machine_instructions"] < big.stats["machine_instructions"]


# ------------------------------------------------------------------------------ small kernels
def run_soft(ptx: str, spec: dict, **kw):
    module = parse_ptx(ptx if ptx.lstrip().startswith(".version") else HEADER + ptx)
    sp = parse_spec(spec)
    if "options" not in kw:
        kw["only"] = INTEGER_EXPANDED
    try:
        got, st, prog = simulate_for_weights(module, sp, **kw)
    except QwenGPUError as e:
        return f"{type(e).__name__}: {e}", None, None
    return got, st, prog


def words(got: dict, name: str = "out") -> list[int]:
    return [int(x) & M32 for x in np.asarray(got[name]).astype(np.int64)]


E32 = [
    0,
    1,
    2,
    3,
    5,
    15,
    16,
    17,
    255,
    256,
    0xFFFF,
    0x10000,
    0x7FFFFFFF,
    0x80000000,
    0x80000001,
    0xFFFFFFFF,
    0xFFFFFFFE,
    0x12345678,
    0xDEADBEEF,
    0x55555555,
]


def edge_pairs(seed: int, n: int = 320) -> tuple[list[int], list[int]]:
    """Every pair of edge values, then random pairs of random bit lengths (lanes of one warp get
    multipliers of different lengths: the unrolled and loop shapes diverge)."""
    rng = random.Random(seed)
    out = [(x, y) for x in E32 for y in E32]
    rng.shuffle(out)
    out = out[: n * 5 // 8]
    while len(out) < n:
        out.append((rng.getrandbits(rng.randint(1, 32)), rng.getrandbits(rng.randint(1, 32))))
    return [x for x, _ in out], [y for _, y in out]


def mulhi_ref(x: int, y: int, signed: bool) -> int:
    if signed:
        x, y = s32(x), s32(y)
    return ((x * y) >> 32) & M32


OPS = {
    "mul.lo.s32 {C}, {A}, {B};": lambda x, y: (x * y) & M32,
    "mul.lo.u32 {C}, {A}, {B};": lambda x, y: (x * y) & M32,
    "mad.lo.s32 {C}, {A}, {B}, {A};": lambda x, y: (x * y + x) & M32,
    "mul.hi.u32 {C}, {A}, {B};": lambda x, y: mulhi_ref(x, y, False),
    "mul.hi.s32 {C}, {A}, {B};": lambda x, y: mulhi_ref(x, y, True),
    # the remainder step of integer division: q * -d + n (negmin picks d as the multiplier)
    "neg.s32 %r20, {B};\n    mad.lo.s32 {C}, {A}, %r20, {B};": lambda x, y: (x * -y + y) & M32,
    "neg.s32 %r20, {B};\n    mul.hi.s32 {C}, {A}, %r20;": lambda x, y: mulhi_ref(x, -y, True),
}


@pytest.mark.parametrize("mul", [*VARIANTS, "auto+negmin"])
@pytest.mark.parametrize("op", list(OPS))
def test_register_multiply_edges(op: str, mul: str) -> None:
    a, b = edge_pairs(list(OPS).index(op))
    mul, _, neg = mul.partition("+")
    opts = soft.Options(mul=mul, only=frozenset(INTEGER_EXPANDED), negmin=True if neg else None)
    got, st, prog = run_soft(
        binop_ptx(op, "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32"), options=opts
    )
    assert not isinstance(got, str), got
    assert words(got) == [OPS[op](x, y) for x, y in zip(a, b, strict=True)]
    assert not set(unsupported_ops(prog)) & EXPANDED_NAMES


IMMS = [
    0,
    1,
    2,
    3,
    5,
    7,
    10,
    12,
    45,
    100,
    255,
    256,
    1000,
    0x7FFFFFFF,
    0x80000000,
    0x80000001,
    0xFFFFFFFF,
    0xFFFFFFFD,
    0xFFFFFFF6,
    0x9E3779B9,
    0x55555555,
    0xAAAAAAAB,
    0x12345678,
    0xCCCCCCCD,
]


@pytest.mark.parametrize("k", IMMS)
def test_immediate_multiply(k: int) -> None:
    a, _ = edge_pairs(k, 96)
    ops = {
        f"mul.lo.s32 {{C}}, {{A}}, {s32(k)};": lambda x: (x * k) & M32,
        f"mad.lo.s32 {{C}}, {{A}}, {s32(k)}, {{A}};": lambda x: (x * k + x) & M32,
        f"mul.hi.u32 {{C}}, {{A}}, {k};": lambda x: mulhi_ref(x, k, False),
        f"mul.hi.s32 {{C}}, {{A}}, {s32(k)};": lambda x: mulhi_ref(x, k, True),
    }
    for op, f in ops.items():
        got, _, prog = run_soft(binop_ptx(op, "u32", "u32", "u32"), binop_spec(a, a, "u32", "u32", "u32"))
        assert not isinstance(got, str), got
        assert words(got) == [f(x) for x in a], op
        assert not set(unsupported_ops(prog)) & EXPANDED_NAMES


def _eval_plan(t: tuple, x: int) -> int:
    if t == soft.X:
        return x
    if t == soft.ZERO:
        return 0
    if t[0] == "shl":
        return (_eval_plan(t[1], x) << t[2]) & M32
    a, b = _eval_plan(t[1], x), _eval_plan(t[2], x)
    return (a + b if t[0] == "add" else a - b) & M32


def test_constant_plans() -> None:
    rng = random.Random(5)
    consts = [*IMMS, *(1 << k for k in range(32)), *(rng.getrandbits(32) for _ in range(60))]
    consts += [(1 << k) - 1 for k in range(33)] + [-(1 << k) & M32 for k in range(32)]
    for c in consts:
        cost, tree = const_plan(c)
        for x in (1, 3, 0xFFFFFFFF, 0x80000000, 0x12345679):
            assert _eval_plan(tree, x) == (x * c) & M32, hex(c)
        if c and c & (c - 1) == 0:
            assert cost <= 1
        assert cost <= 25, (hex(c), cost)
    assert const_plan(10)[0] == 3 and const_plan(-3 & M32)[0] == 2 and const_plan(M32)[0] == 1
    assert const_plan(45)[0] == 4 and const_plan(7)[0] == 2


# ------------------------------------------------------------------------------ guards
GUARDED = """
    and.b32 %r20, %r1, {mask};
    setp.ne.u32 %p1, %r20, 0;
    mov.u32 {{C}}, 1431655765;
    @%p1 {op}
"""


@pytest.mark.parametrize("mask", [1, 5, 0, 0xFFFFFFFF])  # alternate lanes, mixed, all false, all true
@pytest.mark.parametrize(
    "op,f",
    [
        ("mul.lo.s32 {C}, {A}, {B};", lambda x, y: (x * y) & M32),
        ("mul.lo.s32 {C}, {A}, 10;", lambda x, y: (x * 10) & M32),
        ("mad.lo.s32 {C}, {A}, {B}, {B};", lambda x, y: (x * y + y) & M32),
        ("mul.hi.s32 {C}, {A}, {B};", lambda x, y: mulhi_ref(x, y, True)),
        ("mul.hi.u32 {C}, {A}, -1431655765;", lambda x, y: mulhi_ref(x, 0xAAAAAAAB, False)),
    ],
)
@pytest.mark.parametrize("mul", ["unrolled", "loop", "straight"])
def test_guarded_multiply(op: str, f, mask: int, mul: str) -> None:
    a, b = edge_pairs(mask + 17, 96)
    body = GUARDED.format(mask=mask, op=op)
    got, _, _ = run_soft(binop_ptx(body, "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32"), mul=mul)
    assert not isinstance(got, str), got
    want = [f(x, y) if i & mask else 0x55555555 for i, (x, y) in enumerate(zip(a, b, strict=True))]
    assert words(got) == want


def test_local_value_numbering() -> None:
    """A recomputed value is read from its first register (the duplicate deleted, targets and PTX
    ranges shifted); a value whose predicate source was redefined (also read negated) is not."""
    from qwengpu.codegen.soft import local_value_numbering

    r = [R(i) for i in range(10)]
    p0 = P(0)
    code = [
        MInstr("s2r", (r[1],), (), {"sr": "tid.x"}),
        MInstr("shl", (r[2],), (r[1], Imm(2))),
        MInstr("s2r", (r[3],), (), {"sr": "tid.x"}),  # = r1
        MInstr("shl", (r[4],), (r[3], Imm(2))),  # = r2 once r3 reads as r1
        MInstr("setp", (p0,), (r[2], Imm(8)), {"cmp": "lt", "sign": "u"}),
        MInstr("sel", (r[5],), (r[4], Imm(0), p0.inv())),
        MInstr("setp", (p0,), (r[2], Imm(4)), {"cmp": "lt", "sign": "u"}),
        MInstr("sel", (r[6],), (r[2], Imm(0), p0.inv())),  # p0 changed: kept
        MInstr("bra", (), (), {}, P(0), 0),
        MInstr("add", (r[7],), (r[5], r[6])),
    ]
    out, ranges = local_value_numbering(code, [(0, 2), (2, 4), (4, 10)], set())
    assert [str(x) for x in out] == [str(x) for x in [
        code[0], code[1], code[4], MInstr("sel", (r[5],), (r[2], Imm(0), p0.inv())), code[6], code[7],
        code[8], code[9]]]  # fmt: skip
    assert ranges == [(0, 2), (2, 2), (2, 8)] and out[6].target == 0


def _cdiv(x: int, y: int, signed: bool, rem: bool) -> int:
    """C division of 32-bit words (truncation toward zero), from Python integers."""
    if signed:
        x, y = (v - (1 << 32) if v >> 31 else v for v in (x, y))
    q = abs(x) // abs(y)
    q = -q if (x < 0) != (y < 0) else q
    return (x - q * y if rem else q) & M32


@pytest.mark.parametrize("op", ["div.u32", "rem.u32", "div.s32", "rem.s32"])
@pytest.mark.parametrize("divisor", ["reg", 7, -3, 1, 0x80000000])
def test_integer_division_in_weight_ops(op: str, divisor) -> None:
    """32-bit div/rem (one ``idiv``/``irem`` instruction for the simulator) expanded into weight
    ops: edge pairs (INT_MIN / -1, divisors above the dividend, with the top bit set) and random
    pairs of random lengths (lanes of a warp take different numbers of quotient bits)."""
    a, b = edge_pairs(41, 192)
    b = [y or 7 for y in b]
    signed, rem = op.endswith("s32"), op.startswith("rem")
    src = "{B}" if divisor == "reg" else str(divisor)
    if divisor != "reg":
        b = [divisor & M32] * len(a)
    got, _, prog = run_soft(
        binop_ptx(f"{op} {{C}}, {{A}}, {src};", "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32")
    )
    assert not isinstance(got, str), got
    assert not any(x.op in ("idiv", "irem") for x in prog.code)
    assert words(got) == [_cdiv(x, y, signed, rem) for x, y in zip(a, b, strict=True)]


@pytest.mark.parametrize("mask", [1, 5, 0])
def test_guarded_integer_division(mask: int) -> None:
    a, b = edge_pairs(mask + 43, 96)
    b = [y or 3 for y in b]
    body = GUARDED.format(mask=mask, op="rem.s32 {C}, {A}, {B};")
    got, _, _ = run_soft(binop_ptx(body, "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32"))
    assert not isinstance(got, str), got
    pairs = enumerate(zip(a, b, strict=True))
    want = [_cdiv(x, y, True, True) if i & mask else 0x55555555 for i, (x, y) in pairs]
    assert words(got) == want


def test_guard_overwritten_by_its_own_sequence(monkeypatch) -> None:
    """An expansion that writes its own guard predicate and non-temporaries twice, with an inner
    guard on a non-temporary write: the framework copies the guard and combines the guards."""

    def twice(ins: MInstr, fr) -> list[MInstr]:
        s = Seq(fr)
        d = ins.d[0]
        a, b = ins.s
        s.setp_into(d, "ne", Imm(0), Imm(0))  # d = false, then d = a op b under an inner guard
        q = s.setp("eq", Imm(0), Imm(0))
        t = s.op("sel", Imm(1), Imm(0), a)
        s.setp_into(d, "ne", t, Imm(0), "u", ins.mod("bop"), b, guard=q)
        return s.code

    monkeypatch.setitem(soft.EXPANDERS, "plop", twice)
    ptx = """
.visible .entry k(.param .u64 o)
{
    .reg .pred %p<4>; .reg .b32 %r<8>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [o];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    and.b32 %r3, %r1, 2;
    setp.ne.u32 %p2, %r3, 0;
    and.b32 %r4, %r1, 4;
    setp.ne.u32 %p3, %r4, 0;
    @%p1 and.pred %p1, %p2, %p3;
    selp.u32 %r5, 1, 0, %p1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r5;
    ret;
}
"""
    spec = {"kernel": "k", "grid": 1, "block": 32, "args": [{"name": "o", "type": "u32*", "size": 32}]}
    got, _, prog = run_soft(ptx, spec)
    assert not isinstance(got, str), got
    want = [int(t & 7 == 7) for t in range(32)]  # p1 false stays false; p1 true becomes p2 && p3
    assert words(got, "o") == want
    assert "plop" not in unsupported_ops(prog)


# ------------------------------------------------------------------------------ window multiply
def mulw_ref(x: int, y: int, sa: str, sb: str) -> int:
    def val(v: int, sg: str) -> int | None:
        return (None if v == POISON else s32(v)) if sg == "s" else v

    u, v = val(x, sa), val(y, sb)
    if u is None or v is None or abs(u * v) > 2**31 - 1:
        return POISON
    return (u * v) & M32


def _to_mulw(sa: str, sb: str, imm: int | None):
    def tf(prog):
        code = []
        for ins in prog.code:
            if ins.op == "mul" and all(isinstance(x, R) for x in ins.s):  # the kernel's own multiply
                s = ins.s if imm is None else (ins.s[0], Imm(imm))
                ins = replace(ins, op="mulw", s=s, m={"sa": sa, "sb": sb})
            code.append(ins)
        return replace(prog, code=code)

    return tf


WIMMS = [None, 0, 3, 12, -3, -12, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0x10001, 46341]


@pytest.mark.parametrize("imm", WIMMS)
@pytest.mark.parametrize("sa,sb", [("s", "s"), ("u", "u"), ("s", "u"), ("u", "s")])
def test_window_multiply(sa: str, sb: str, imm: int | None) -> None:
    a, b = edge_pairs(7, 160)
    a = [*a[:150], POISON, 46340, 46341, 0xFFFF4BBC, 0xFFFF4BBB, 0x10000, 0x8000, 0xFFFF8000, 1, 0x7FFFFFFF]
    k = None if imm is None else imm & M32
    got, _, prog = run_soft(
        binop_ptx("mul.lo.s32 %r12, {A}, {B};", "u32", "u32", "u32"),
        binop_spec(a, b, "u32", "u32", "u32"),
        transform=_to_mulw(sa, sb, k),
    )
    assert not isinstance(got, str), got
    want = [mulw_ref(x, y if k is None else k, sa, sb) for x, y in zip(a, b, strict=True)]
    assert words(got) == want
    assert not any(x.op == "mulw" and not in_weights(x) for x in prog.code)


# ------------------------------------------------------------------------------ sub-word loads
def ld_ptx(t: str, size: int) -> str:
    """out[i] = *(T*)(a + i*size + boff) for i < n (the PTX offset +4 exercises base+off)."""
    return f"""
.visible .entry k(.param .u64 a, .param .u64 o, .param .u32 n, .param .u32 off)
{{
    .reg .pred %p<2>; .reg .b32 %r<12>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [o];
    ld.param.u32 %r9, [n];
    ld.param.u32 %r10, [off];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r1, %r2, %r3, %r1;
    setp.ge.s32 %p1, %r1, %r9;
    @%p1 bra DONE;
    mad.lo.s32 %r4, %r1, {size}, %r10;
    cvt.s64.s32 %rd5, %r4;
    add.s64 %rd5, %rd3, %rd5;
    ld.global.{t} %r5, [%rd5+4];
    mul.wide.s32 %rd6, %r1, 4;
    add.s64 %rd6, %rd4, %rd6;
    st.global.u32 [%rd6], %r5;
DONE:
    ret;
}}
"""


def ld_spec(data: list[int], n: int, boff: int) -> dict:
    return {
        "kernel": "k",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "a", "type": "u8*", "data": data},
            {"name": "o", "type": "u32*", "size": 64},
            {"name": "n", "type": "i32", "value": n},
            {"name": "off", "type": "i32", "value": boff - 4},
        ],
        "outputs": ["o"],
    }


@pytest.mark.parametrize("t", ["u8", "s8", "u16", "s16"])
def test_sub_word_global_loads(t: str) -> None:
    """Every byte position in its word, the last element of a buffer whose size is not a multiple
    of 4 (its aligned word extends past the buffer: still no fault), sign and zero extension."""
    size = int(t[1:]) // 8
    nbytes, n, boff = (77, 64, 13) if size == 1 else (78, 39, 0)
    rng = random.Random(size)
    data = [rng.getrandbits(8) for _ in range(nbytes)]
    data[boff : boff + 8] = [0x80, 0x7F, 0xFF, 0x00, 0x01, 0xFE, 0x81, 0x7E]
    got, _, prog = run_soft(ld_ptx(t, size), ld_spec(data, n, boff))
    assert not isinstance(got, str), got
    want = []
    for i in range(64):
        if i >= n:
            want.append(0)
            continue
        at = boff + i * size
        v = int.from_bytes(bytes(data[at : at + size]), "little")
        if t[0] == "s" and v >> (8 * size - 1):
            v -= 1 << (8 * size)
        want.append(v & M32)
    assert words(got, "o") == want
    assert not [x for x in prog.code if x.op == "ld" and x.mod("size") < 4 and x.mod("space") == "global"]


@pytest.mark.parametrize(
    "t,nbytes,n,boff",
    [
        ("u8", 77, 64, 14),  # lane 63 reads byte 77: one past the end, inside the last word
        ("s16", 78, 40, 0),  # lane 39 reads bytes 78, 79
        ("u16", 78, 8, 1),  # misaligned
        ("s8", 77, 8, -300),  # before the buffer
    ],
)
def test_sub_word_load_faults_are_the_interpreters(t: str, nbytes: int, n: int, boff: int) -> None:
    size = int(t[1:]) // 8
    ptx, spec = ld_ptx(t, size), ld_spec(list(range(nbytes)), n, boff)
    try:
        run_interp(parse_ptx(HEADER + ptx), parse_spec(spec))
        ref = "no fault"
    except QwenGPUError as e:
        ref = f"{type(e).__name__}: {e}"
    got, _, _ = run_soft(ptx, spec)
    assert ref != "no fault"
    assert got == ref


# ------------------------------------------------------------------------------ random kernels
@pytest.mark.parametrize("seed", range(3))
def test_random_integer_kernels_expanded(tmp_path, seed: int) -> None:
    n = 64
    cu, exprs, vals = fz.write_int_kernel(tmp_path, random.Random(3000 + seed), n)
    res = run_for_weights(cu, only=INTEGER_EXPANDED)
    got = words(res.outputs)
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        assert got[k * n : (k + 1) * n] == want, f"expression {k}: {text}"


# ------------------------------------------------------------------------------ costs
def test_costs_follow_the_multiplier_length() -> None:
    """Uniform short multipliers (ctaid * ntid) are cheap; a warp costs its longest lane."""
    n = 64

    def cost(a: list[int], b: list[int], mul: str = "auto") -> int:
        op = "mul.lo.s32 %r20, {A}, {B};\n    xor.b32 {C}, %r20, 0;"
        got, st, _ = run_soft(
            binop_ptx(op, "u32", "u32", "u32"), binop_spec(a, b, "u32", "u32", "u32"), mul=mul
        )
        assert words(got) == [(x * y) & M32 for x, y in zip(a, b, strict=True)]
        return st.warp_instructions  # type: ignore[union-attr]

    rng = random.Random(1)
    small = cost([rng.getrandbits(32) for _ in range(n)], [rng.getrandbits(3) for _ in range(n)])
    big = cost(
        [rng.getrandbits(32) | 1 << 31 for _ in range(n)], [rng.getrandbits(32) | 1 << 31 for _ in range(n)]
    )
    mixed = cost(
        [rng.getrandbits(32) | 1 << 31 for _ in range(n)],
        [rng.getrandbits(32) | 1 << 31 if i % 32 == 5 else 3 for i in range(n)],
    )
    assert small < big and abs(mixed - big) <= 8
    assert cost([7] * n, [9] * n, "loop") < cost([0xFFFFFFF] * n, [0xFFFFFFF] * n, "loop")
