"""Float ops as integer sequences (``qwengpu/codegen/softfloat.py``), checked bit for bit against
``qwengpu.simt.fp32`` (the interpreter's float semantics, independent of the sequences) by running
the expanded machine code in the simulator: every pair of a float edge set (zeros, subnormals,
normals at the range ends, infinities, NaNs with payloads, rounding ties, exponent differences
0..30), random bit patterns and near-cancelling pairs, per op and modifier combination; guards,
aliased destinations and immediate operands; and the corpus kernels run with every float op
expanded, bit-identical to the interpreter. The big sweeps are marked ``slow``."""

from __future__ import annotations

import itertools
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from qwengpu.codegen import softfloat as sf
from qwengpu.codegen.lower import lower_kernel
from qwengpu.codegen.regalloc import allocate
from qwengpu.codegen.softcore import Options, unit_options
from qwengpu.isa.instr import Imm, MInstr, P, R
from qwengpu.isa.sim import MachineSim
from qwengpu.model.configs import shape_named
from qwengpu.ptx.parser import parse_ptx
from qwengpu.simt import fp32
from qwengpu.spec import bind, parse_spec, read_outputs

#: the lowering options of the machines (the 2B shape: multiplier, adders, one-lane rows)
MACHINE = Options(**unit_options(shape_named("2b")))
M32 = 0xFFFFFFFF

FLOAT_OPS = set(sf.FLOAT_EXPANDERS)
UNARY = ("i2f", "f2i", "frnd", "fsqrt", "fex2", "frsqrt")
HEADER = ".version 9.5\n.target sm_75\n.address_size 64\n"
# out = r8 ^ p1: the op under test replaces the `xor r8` (a register result) or the `setp p1`
# (fsetp); %p2 = c & 1 is a third predicate operand, %p3 = tid & 2 a guard, and r8 / p1 hold
# known values before (a guarded op that does not write leaves them).
TEMPLATE = (
    HEADER
    + """
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pout)
{
  .reg .pred %p<8>; .reg .b32 %r<32>; .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc]; ld.param.u64 %rd4, [pout];
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  cvta.to.global.u64 %rd3, %rd3; cvta.to.global.u64 %rd4, %rd4;
  mov.u32 %r1, %tid.x; mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd1, %rd5; ld.global.u32 %r5, [%rd6];
  add.s64 %rd7, %rd2, %rd5; ld.global.u32 %r6, [%rd7];
  add.s64 %rd8, %rd3, %rd5; ld.global.u32 %r7, [%rd8];
  and.b32 %r9, %r7, 1; setp.ne.u32 %p2, %r9, 0;
  and.b32 %r10, %r1, 2; setp.ne.u32 %p3, %r10, 0;
  setp.eq.u32 %p1, %r9, 0;
  mov.u32 %r8, 1234567;
  xor.b32 %r8, %r5, %r6;
  setp.ne.u32 %p1, %r5, %r6;
  selp.u32 %r11, 1, 0, %p1;
  xor.b32 %r8, %r8, %r11;
  add.s64 %rd9, %rd4, %rd5; st.global.u32 [%rd9], %r8;
  ret;
}
"""
)


@cache
def _module():
    return parse_ptx(TEMPLATE)


def machine(
    op: str,
    mods: dict,
    a,
    b,
    c,
    *,
    guard: bool = False,
    alias: int | None = None,
    imm: dict[int, int] | None = None,
    alloc: bool = False,
    expand: bool = True,
    weights: bool = False,
    info: dict | None = None,
    pconst: bool | None = None,
    options: Options | None = None,
) -> np.ndarray:
    """Run ``op`` with modifiers ``mods`` on the lanes' (a, b, c) through the simulator (after
    expanding the float ops); returns out = result ^ pred as uint32.

    ``guard``: the op is guarded by (tid & 2); ``alias``: the destination register is the same as
    source ``alias`` (0, 1); ``imm``: source index -> immediate replacing that operand;
    ``weights``: then also soft.py's expansion (mul, mulhi ...) so only weight ops remain;
    ``info``: filled with the program and the simulator's stats; ``pconst``: fsetp's third
    operand is the constant predicate PT (True) or !PT (False) instead of c & 1; ``options``: the
    machine's (softcore ``Options``: the multiplier, the adders) for both expansions."""
    a, b, c = (np.asarray(x, dtype=np.uint32) for x in (a, b, c))
    n = len(a)
    blk = min(n, 32)
    assert n % blk == 0
    bufs = [
        {"name": k, "type": "u32*", "data": [int(x) for x in v]}
        for k, v in zip("abc", (a, b, c), strict=True)
    ]
    spec = parse_spec({
        "kernel": "k", "grid": n // blk, "block": blk,
        "args": [*bufs, {"name": "out", "type": "u32*", "size": n}],
        "outputs": ["out"],
    })  # fmt: skip
    prog = lower_kernel(_module(), "k", [True] * 4)
    code = [replace(x, m=dict(x.m)) for x in prog.code]
    xi = next(i for i, x in enumerate(code) if x.op == "xor")
    si = next(i for i, x in enumerate(code) if x.op == "setp" and x.s[:2] == code[xi].s[:2])
    ra, rb = code[xi].s
    rc = R(7)
    pd, pc = code[si].d[0], P(2)
    rd = code[xi].d[0]
    srcs: list = [ra, rb, rc][: {"ffma": 3, "fsetp": 2}.get(op, 1 if op in UNARY else 2)]
    for k, v in (imm or {}).items():
        srcs[k] = Imm(v)
    g = P(3) if guard else None
    if op == "fsetp":
        if mods.get("bop"):
            srcs.append(pc if pconst is None else P(-1, not pconst))
        code[xi] = MInstr("mov", (rd,), (Imm(0),), ptx=code[xi].ptx)
        code[si] = MInstr("fsetp", (pd,), tuple(srcs), dict(mods), guard=g, ptx=code[si].ptx)
    else:
        if alias is not None:  # the destination is read as a source: copy the operand into it
            code[xi - 1] = MInstr("mov", (rd,), (srcs[alias],), ptx=code[xi - 1].ptx)
            srcs[alias] = rd
        code[xi] = MInstr(op, (rd,), tuple(srcs), dict(mods), guard=g, ptx=code[xi].ptx)
        code[si] = MInstr("setp", (pd,), (Imm(0), Imm(1)), {"cmp": "eq", "sign": "u"}, ptx=code[si].ptx)
    prog = replace(prog, code=code)
    if expand:
        prog = sf.expand_floats(prog, options=options)
        rows = {"fadd", "fsub"} if options is not None and options.native_fadd else set()  # the adders' rows
        assert not any(x.op in FLOAT_OPS - rows for x in prog.code)
    if weights:
        from qwengpu.codegen.soft import expand_for_weights, in_weights

        prog = expand_for_weights(prog, options=options)
        own = code[si if op == "fsetp" else xi].ptx
        nat = (False, False) if options is None else (options.native_mul, options.native_fadd)
        assert all(in_weights(x, *nat) for x in prog.code if x.ptx == own)
    if alloc:
        prog = allocate(prog)
    if weights and options is not None and options.native_fmulf:
        from qwengpu.codegen.softmem import expand_one_lane

        prog = expand_one_lane(prog)  # as the weights run it: four one-lane rows per fmulf
    bound = bind(spec, _kernel_fn())
    st = MachineSim(prog).launch(spec.grid, spec.block, bound.param_bytes, bound.gmem)
    if info is not None:
        info.update(program=prog, stats=st, ptx=code[si if op == "fsetp" else xi].ptx)
    return read_outputs(spec, bound.gmem)["out"]


@cache
def _kernel_fn():
    from qwengpu.simt.interp import _find_kernel

    return _find_kernel(_module(), "k")


# ---------------------------------------------------------------------------------------------
# the oracle: qwengpu.simt.fp32
# ---------------------------------------------------------------------------------------------
def reference(op: str, mods: dict, a, b, c, *, guard: bool = False, old=None, pconst=None) -> np.ndarray:
    """What ``machine`` must return, from fp32's functions (``old``: the destination's value
    before a guarded op, 1234567 by default)."""
    a, b, c = (np.asarray(x, dtype=np.uint32) for x in (a, b, c))
    rnd, ftz, sat = mods.get("rnd", "rn"), mods.get("ftz", False), mods.get("sat", False)
    p = np.zeros(len(a), dtype=bool)
    if op in ("fadd", "fsub", "fmul"):
        r = {"fadd": fp32.add, "fsub": fp32.sub, "fmul": fp32.mul}[op](a, b, rnd, ftz, sat)
    elif op == "ffma":
        r = fp32.fma(a, b, c, rnd, ftz, sat)
    elif op == "fdiv":
        r = fp32.div(a, b, rnd, ftz)
    elif op == "fsqrt":
        r = fp32.sqrt(a, rnd, ftz)
    elif op == "fex2":
        r = fp32.ex2_approx(a, ftz)
    elif op == "frsqrt":
        r = fp32.rsqrt_approx(a, ftz)
    elif op in ("fmin", "fmax"):
        r = (fp32.min if op == "fmin" else fp32.max)(a, b, ftz)
    elif op == "fsetp":
        r = np.zeros(len(a), dtype=np.uint32)
        p = fp32.setp(mods["cmp"], a, b, ftz)
        q = (c & 1) != 0 if pconst is None else np.full(len(a), pconst)
        bop = mods.get("bop")
        p = {None: p, "and": p & q, "or": p | q, "xor": p ^ q}[bop]
    elif op == "i2f":
        t = "s32" if mods.get("sign") == "s" else "u32"
        r = fp32.f32_from_int(a.view(np.int32) if t == "s32" else a, t, rnd)
    elif op == "f2i":
        t = "s32" if mods.get("sign") == "s" else "u32"
        r = fp32.int_from_f32(a, t, mods["irnd"], ftz).astype(np.int64).astype(np.uint32)
    elif op == "frnd":
        if mods.get("irnd"):
            r = fp32.round_f32(a, mods["irnd"], ftz)
        elif sat:
            r = fp32.sat_f32(a, ftz)
        elif ftz:
            sub = ((a & 0x7F800000) == 0) & ((a & 0x7FFFFF) != 0)
            r = np.where(sub, a & 0x80000000, a).astype(np.uint32)
        else:
            r = a.copy()
    else:
        raise ValueError(op)
    r = np.asarray(r, dtype=np.uint32)
    if guard:
        lane = np.arange(len(a)) % min(len(a), 32)
        g = (lane & 2) != 0
        if op == "fsetp":
            p = np.where(g, p, (c & 1) == 0)
        else:
            r = np.where(g, r, np.uint32(1234567) if old is None else old)
    return (r ^ p.astype(np.uint32)).astype(np.uint32)


def check(op: str, mods: dict, a, b=None, c=None, **kw) -> None:
    n = len(a)
    b = np.zeros(n, dtype=np.uint32) if b is None else b
    c = np.zeros(n, dtype=np.uint32) if c is None else c
    pad = (-n) % 32 if n > 32 else 0
    if pad:
        a, b, c = (
            np.concatenate([np.asarray(x, dtype=np.uint32), np.zeros(pad, dtype=np.uint32)])
            for x in (a, b, c)
        )
    imm = kw.get("imm") or {}
    ops = [np.asarray(x, dtype=np.uint32).copy() for x in (a, b, c)]
    for k, v in imm.items():
        ops[k][:] = v
    got = machine(op, mods, *ops, **kw)
    alias = kw.get("alias")
    old = None if alias is None else ops[alias]
    want = reference(op, mods, *ops, guard=kw.get("guard", False), old=old, pconst=kw.get("pconst"))
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = int(bad[0])
        raise AssertionError(
            f"{op} {mods}: {len(bad)} of {len(got)} differ; first: a=0x{ops[0][i]:08x} b=0x{ops[1][i]:08x} "
            f"c=0x{ops[2][i]:08x}: machine 0x{got[i]:08x} fp32 0x{want[i]:08x}"
        )


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------
def f2b(x: float) -> int:
    return int(np.array(x, dtype=np.float32).view(np.uint32))


EDGE = sorted({
    0x00000000, 0x80000000,  # zeros
    0x00000001, 0x80000001, 0x00000003, 0x00400000, 0x007FFFFF, 0x807FFFFF,  # subnormals
    0x00800000, 0x80800000, 0x00800001, 0x01000000,  # smallest normals
    0x3F800000, 0xBF800000, 0x3F800001, 0x3F7FFFFF, 0xBF7FFFFF, 0x3F000000, 0x40400000, 0x3FFFFFFF,
    0x3F800800,  # 1 + 2^-12: its square ties
    0x33800000, 0x33800001, 0xB3800000, 0x34000000,  # 2^-24: 1 + 2^-24 ties
    0x4B800000, 0x4B7FFFFF, 0xCB000001, 0x4F000000, 0xCF000000, 0x4F800000,  # integer range edges
    0x7E800000, 0x7F000000, 0x7F7FFFFF, 0xFF7FFFFF,  # largest
    0x7F800000, 0xFF800000,  # infinities
    0x7FC00000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF, 0xFFFFFFFF,  # NaNs with payloads
    0x1F800000, 0x20000000, 0x0C800000,  # products near the subnormal range
    *[0x3F800000 + (k << 23) + 0x5A5A5 for k in range(0, 31, 5)],  # exponent differences 0..30
    *[0xBF800000 + (k << 23) + 0x12345 for k in range(1, 31, 7)],
})  # fmt: skip


def edge_pairs() -> tuple[np.ndarray, np.ndarray]:
    a, b = zip(*itertools.product(EDGE, EDGE), strict=True)
    return np.array(a, dtype=np.uint32), np.array(b, dtype=np.uint32)


def random_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


def close_pairs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random pairs with close exponents and often opposite signs (cancellation), and random
    pairs with exponent differences up to 40."""
    a = random_bits(rng, n) & np.uint32(0xBFFFFFFF) | np.uint32(0x20000000)  # finite
    de = rng.integers(-3, 4, n).astype(np.int64)
    de[: n // 3] = rng.integers(-40, 41, n // 3)
    e = ((a >> 23) & 0xFF).astype(np.int64) + de
    e = np.clip(e, 0, 254).astype(np.uint32)
    frac = np.where(rng.random(n) < 0.5, a & 0x7FFFFF, random_bits(rng, n) & 0x7FFFFF)
    frac = np.where(rng.random(n) < 0.3, frac ^ rng.integers(0, 8, n).astype(np.uint32), frac)
    sign = np.where(rng.random(n) < 0.7, (a & 0x80000000) ^ 0x80000000, a & 0x80000000)
    b = (sign | (e << 23) | frac).astype(np.uint32)
    return a, b


def mixed(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random operands: raw bit patterns, edge values, small floats, near-cancelling pairs."""
    a, b = random_bits(rng, n), random_bits(rng, n)
    ca, cb = close_pairs(rng, n)
    e = np.array(EDGE, dtype=np.uint32)
    k = rng.random(n)
    a = np.where(k < 0.4, ca, np.where(k < 0.55, e[rng.integers(0, len(e), n)], a)).astype(np.uint32)
    b = np.where(k < 0.4, cb, np.where(rng.random(n) < 0.15, e[rng.integers(0, len(e), n)], b)).astype(
        np.uint32
    )
    small = np.array(rng.uniform(-8, 8, n), dtype=np.float32).view(np.uint32)
    a = np.where((k > 0.9), small, a).astype(np.uint32)
    c = random_bits(rng, n)
    return a, b, c


RND = ("rn", "rz", "rm", "rp")
CMPS = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
ARITH = [
    (op, {"rnd": r, "ftz": f, "sat": s})
    for op in ("fadd", "fsub", "fmul", "ffma")
    for r in RND
    for f in (False, True)
    for s in (False, True)
]
MINMAX = [(op, {"ftz": f}) for op in ("fmin", "fmax") for f in (False, True)]
SETP = [
    ("fsetp", {"cmp": c, "ftz": f, **({"bop": b} if b else {})})
    for c in CMPS
    for f in (False, True)
    for b in (None, "and", "or", "xor")
]
I2F = [("i2f", {"sign": s, "rnd": r}) for s in "su" for r in RND]
F2I = [
    ("f2i", {"sign": s, "irnd": i, "ftz": f})
    for s in "su"
    for i in ("rni", "rzi", "rmi", "rpi")
    for f in (False, True)
]
FRND = [("frnd", {"irnd": i, "ftz": f}) for i in ("rni", "rzi", "rmi", "rpi") for f in (False, True)] + [
    ("frnd", {"sat": True}),
    ("frnd", {"sat": True, "ftz": True}),
    ("frnd", {"ftz": True}),
    ("frnd", {}),
]
DIVSQRT = [(op, {"rnd": r, "ftz": f}) for op in ("fdiv", "fsqrt") for r in RND for f in (False, True)]
EX2 = [("fex2", {"ftz": f}) for f in (False, True)]
ALL = ARITH + MINMAX + SETP + I2F + F2I + FRND + DIVSQRT + EX2


def _id(c: tuple) -> str:
    op, m = c
    return ".".join(
        [op, *(str(v) if v is not True else k for k, v in m.items() if v not in (False, None, 0))]
    )


INT_EDGE = [0, 1, 2, 3, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFF, 0xFFFFFFFE, 0x00FFFFFF, 0x01000000,
            0x01000001, 0x01000003, 0x02000002, 0x02000006, 0x7FFFFFC0, 0x7FFFFF80, 0x7FFFFFBF, 0xFFFFFF01,
            0x80000080, 0x800000C0, 0xFF000001, 0x12345678, 0xF0000001]  # fmt: skip


def operands(op: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n lanes of operands for ``op``: edge values and pairs first, then random ones."""
    if op == "i2f":
        e = np.array(INT_EDGE, dtype=np.uint32)
        a = random_bits(rng, n) >> rng.integers(0, 32, n).astype(np.uint32)
        a[: len(e)] = e
        return a, a, random_bits(rng, n)
    a, b, c = mixed(rng, n)
    ea, eb = edge_pairs()
    k = min(n // 2, len(ea))
    pick = rng.permutation(len(ea))[:k]
    a[:k], b[:k] = ea[pick], eb[pick]
    if op == "ffma":  # addends near -(a*b): cancellation
        p = fp32.mul(a, b)
        near = (p ^ np.uint32(0x80000000)) + rng.integers(-2, 3, n).astype(np.uint32)
        c = np.where(rng.random(n) < 0.4, near, c).astype(np.uint32)
    if op == "fdiv":  # exact quotients, and halvings of subnormal-range values (rounding ties)
        k = rng.random(n)
        q = np.array(rng.choice([1.0, 2.0, 0.5, 3.0, 0.25, -4.0, 1.5], n), dtype=np.float32).view(np.uint32)
        b = np.where(k < 0.15, q, b).astype(np.uint32)
        a = np.where(k < 0.08, fp32.mul(b, a), a).astype(np.uint32)
        tiny = (rng.integers(1, 1 << 12, n) | (rng.integers(0, 2, n) << 31)).astype(np.uint32)
        a = np.where((k > 0.9) & (k < 0.95), tiny, a).astype(np.uint32)
    if op == "fsqrt":  # mostly non-negative, and exact squares
        a = np.where(rng.random(n) < 0.7, a & np.uint32(0x7FFFFFFF), a).astype(np.uint32)
        sq = fp32.mul(b & np.uint32(0x5FFFFFFF), b & np.uint32(0x5FFFFFFF))
        a = np.where(rng.random(n) < 0.15, sq, a).astype(np.uint32)
    if op == "fex2":  # mostly x in the range that is computed, |x| in [2^-32, 256)
        a = ex2_inputs(rng, n, a)
    if op in ("f2i", "frnd"):  # values near integers and the conversion limits
        x = np.array(
            np.round(rng.uniform(-1e4, 1e4, n)) + rng.choice([0, 0.5, 0.25, 0.75, 1e-3], n), dtype=np.float32
        )
        big = np.array(
            rng.choice([2.0**31, 2.0**32, 2.0**23, 2.0**24], n) * rng.choice([1, -1], n), dtype=np.float32
        )
        big = big.view(np.uint32) + rng.integers(-3, 4, n).astype(np.uint32)
        a = np.where(rng.random(n) < 0.3, x.view(np.uint32), np.where(rng.random(n) < 0.2, big, a)).astype(
            np.uint32
        )
    return a, b, c


def ex2_inputs(rng: np.random.Generator, n: int, raw: np.ndarray | None = None) -> np.ndarray:
    """fex2 operands: random x in [-160, 135], random bit patterns with |x| in [2^-32, 256),
    values near integers, tiny values, and (a fifth) ``raw`` (random bits and edge values)."""
    k = rng.random(n)
    wide = np.array(rng.uniform(-160, 135, n), dtype=np.float32).view(np.uint32)
    bits = rng.integers(95 << 23, 135 << 23, n, dtype=np.uint64).astype(np.uint32)
    bits |= rng.integers(0, 2, n).astype(np.uint32) << 31
    near = np.array(
        np.round(rng.uniform(-152, 130, n)) + rng.choice([1, -1], n) * 2.0 ** rng.integers(-24, -1, n),
        dtype=np.float32,
    ).view(np.uint32)
    tiny = np.array(rng.choice([1, -1], n) * 2.0 ** rng.uniform(-34, -20, n), dtype=np.float32)
    raw = random_bits(rng, n) if raw is None else raw
    a = np.select([k < 0.3, k < 0.55, k < 0.7, k < 0.8], [wide, bits, near, tiny.view(np.uint32)], raw)
    return a.astype(np.uint32)


def ex2_edges() -> np.ndarray:
    """The EDGE values and their negations, the integers -151..128 and the halves between them,
    a few ulps around -150, -149, -126, 127, 128, 256 and 2^-32 (where the sequence stops
    computing), values around +-2^-25 (2^x rounds to 1 or to a neighbour), NaNs and infinities."""
    ints = np.arange(-151, 129, dtype=np.float64)
    vals = [*EDGE, *[x ^ 0x80000000 for x in EDGE]]
    vals += list(np.array(ints, dtype=np.float32).view(np.uint32))
    vals += list(np.array(np.arange(-152, 130) + 0.5, dtype=np.float32).view(np.uint32))
    for v in (-150.0, -149.0, -126.0, 127.0, 128.0, 256.0, 2.0**-32, 2.0**-25, 2.0**-24, 2.0**-26, 1.0, 0.5):
        for b in (f2b(v), f2b(-v)):
            vals += [(b + d) & 0xFFFFFFFF for d in range(-8, 9)]
    vals += [0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FFFFFFF]
    return np.array(sorted(set(int(v) for v in vals)), dtype=np.uint32)


# ---------------------------------------------------------------------------------------------
# tests: every op and modifier combination
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["fadd", "fsub", "fmul", "ffma", "fdiv"])
def test_all_edge_pairs_rn(op: str) -> None:
    a, b = edge_pairs()
    rng = np.random.default_rng(1)
    c = np.array(EDGE, dtype=np.uint32)[rng.integers(0, len(EDGE), len(a))]
    check(op, {"rnd": "rn"}, a, b, c)


@pytest.mark.parametrize("combo", ALL, ids=[_id(c) for c in ALL])
def test_modifiers(combo: tuple) -> None:
    op, mods = combo
    rng = np.random.default_rng(abs(hash(_id(combo))) % 2**32)
    n = 128 if op == "fsetp" else 384
    check(op, mods, *operands(op, rng, n))


@pytest.mark.parametrize("op", ["fmin", "fmax", "fsetp"])
def test_compare_edge_pairs(op: str) -> None:
    a, b = edge_pairs()
    for mods in [{"ftz": f} for f in (False, True)] if op != "fsetp" else [{"cmp": c} for c in CMPS]:
        check(op, mods, a, b)


@pytest.mark.parametrize("op", ["i2f", "f2i", "frnd", "fsqrt"])
def test_conversion_edges(op: str) -> None:
    e = np.array(EDGE + [x ^ 0x80000000 for x in EDGE] + INT_EDGE, dtype=np.uint32)
    table = {"i2f": I2F, "f2i": F2I, "frnd": FRND, "fsqrt": DIVSQRT[8:]}[op]
    for _, mods in table:
        check(op, mods, e)


@pytest.mark.parametrize(
    "op,mods",
    [("fadd", {"rnd": "rm"}), ("ffma", {"rnd": "rp", "sat": True}), ("fmul", {"rnd": "rz", "ftz": True}),
     ("fmax", {}), ("f2i", {"sign": "s", "irnd": "rmi"}), ("i2f", {"sign": "s", "rnd": "rn"}),
     ("frnd", {"irnd": "rpi"}), ("fsetp", {"cmp": "ltu", "bop": "or"}), ("fsetp", {"cmp": "eq"}),
     ("fdiv", {"rnd": "rp", "ftz": True}), ("fsqrt", {"rnd": "rm"}), ("fex2", {"ftz": True}), ("fex2", {})],
)  # fmt: skip
def test_guard_alias_immediate(op: str, mods: dict) -> None:
    """A guarded op writes nothing where its guard is false; a destination that is also a source;
    immediate operands (folded while the sequence is built)."""
    rng = np.random.default_rng(3)
    a, b, c = operands(op, rng, 96)
    check(op, mods, a, b, c, guard=True)
    if op != "fsetp":
        check(op, mods, a, b, c, alias=0)
        if op not in UNARY:
            check(op, mods, a, b, c, alias=1, guard=True)
    nsrc = {"ffma": 3, "fsetp": 2}.get(op, 1 if op in UNARY else 2)
    for k in range(nsrc):
        for v in (0x3F800000, 0x4C000000, 0x80000000, 0x7F800000, 0x00000005, 0xC0490FDB, 0x7FFFFFFF):
            check(op, mods, a, b, c, imm={k: v})
    if nsrc >= 2:  # every operand constant: the whole op folds to a move
        check(op, mods, a, b, c, imm={k: 0x40490FDB for k in range(nsrc)})


@pytest.mark.parametrize("bop", ["and", "or", "xor"])
def test_fsetp_constant_predicate(bop: str) -> None:
    """fsetp's third operand PT / !PT (the combination folds while the sequence is built)."""
    rng = np.random.default_rng(5)
    a, b, c = operands("fsetp", rng, 128)
    for cmp in ("lt", "equ", "num", "ge"):
        for pc in (True, False):
            check("fsetp", {"cmp": cmp, "bop": bop}, a, b, c, pconst=pc, guard=pc)


@pytest.mark.parametrize(
    "op,mods",
    [("fadd", {}), ("fmul", {}), ("ffma", {}), ("f2i", {"sign": "u", "irnd": "rzi"}), ("fdiv", {}),
     ("fsqrt", {}), ("fex2", {}), ("fex2", {"ftz": True})],
)  # fmt: skip
def test_allocated(op: str, mods: dict) -> None:
    """The sequences run after register allocation (they fit the 32 registers and 8 predicates)."""
    rng = np.random.default_rng(4)
    check(op, mods, *operands(op, rng, 128), alloc=True)


# ---------------------------------------------------------------------------------------------
# fex2 (ex2.approx): edges here; every one of the 2^32 inputs by bench/ex2_exhaustive.py through
# ex2_model, which the next test ties to the machine sequence
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ftz", [False, True])
def test_ex2_edges(ftz: bool) -> None:
    check("fex2", {"ftz": ftz}, ex2_edges())


#: the 2B shape's units without its read-only words: the multiplier's sequence computes every step
MACHINE_NO_TABLE = replace(MACHINE, rodata_top=0)


def _ex2_on_machine(a: np.ndarray, ftz: bool, options: Options | None) -> np.ndarray:
    """fex2 of ``a`` (a multiple of 32 values) through the weights' expansion and allocation."""
    # launches of 64 blocks: the lowering's bound on %ctaid (and so its multiplies) stays 6 bits
    return np.concatenate(
        [
            machine("fex2", {"ftz": ftz}, x, x, x, weights=True, alloc=True, options=options)
            for x in np.split(a, range(2048, len(a), 2048))
        ]
    )


@pytest.mark.parametrize("ftz, units", [(False, None), (True, None), (False, "mul"), (True, "mul"),
                                        (False, "table"), (True, "table")])
def test_ex2_model_is_the_sequence(ftz: bool, units: str | None) -> None:
    """``ex2_model`` (what the exhaustive check runs) computes the bits the expanded machine code
    computes, on edge values and 4096 random inputs (after the weights' expansion: only weight
    ops; after register allocation), with the products as shift-and-add sequences, on the
    machines' multiplier (``units``: there the step k = 16 and ``ex2_model.poly_tail``) and with
    the 2B shape's read-only tables for the steps k = 1..16 (``table``: ``ex2_model.TABLE``,
    ``TABLE2`` and ``times``)."""
    from qwengpu.codegen import ex2_model

    rng = np.random.default_rng(21 + ftz)
    a = np.concatenate([ex2_edges(), ex2_inputs(rng, 4096)])
    a = np.concatenate([a, np.zeros((-len(a)) % 32, dtype=np.uint32)])
    opts = {None: None, "mul": MACHINE_NO_TABLE, "table": MACHINE}[units]
    got = _ex2_on_machine(a, ftz, opts)
    want = ex2_model.ex2(a, ftz, multiplier=units is not None, table=units == "table")
    bad = np.flatnonzero(got != want)
    assert not len(bad), [(hex(a[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
    assert (want == fp32.ex2_approx(a, ftz)).all()


@pytest.mark.parametrize("which", ["TABLE", "TABLE2"])
def test_ex2_tables_are_read_as_the_model_reads_them(which: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one table made wrong on purpose (every entry 2^37 too large: results off in their
    last bits), the machine and the model still agree bit
    for bit while both disagree with ``fp32.ex2_approx`` on many inputs: the sequence reads the
    entry the model reads, at the index the model takes, and uses it as the model does (equal
    correct results alone would not show that). The tables' words in the program are the model's
    ``TABLE_WORDS`` and ``TABLE2_WORDS``, at the top of the read-only words."""
    from qwengpu.codegen import ex2_model as em

    bad = tuple(t + (1 << 37) for t in getattr(em, which))
    monkeypatch.setattr(em, which, bad)
    monkeypatch.setattr(em, f"{which}_WORDS", tuple(t >> 32 for t in bad) + tuple(t & M32 for t in bad))
    rng = np.random.default_rng(5)
    a = ex2_inputs(rng, 2048)
    info: dict = {}
    got = machine("fex2", {}, a, a, a, weights=True, alloc=True, options=MACHINE, info=info)
    want = em.ex2(a, False, multiplier=True, table=True)
    wrong = np.flatnonzero(got != want)
    assert not len(wrong), [(hex(a[i]), hex(got[i]), hex(want[i])) for i in wrong[:5]]
    assert (want != fp32.ex2_approx(a, False)).sum() > 100
    top = MACHINE.rodata_top
    assert info["program"].rodata == ((top - 512, em.TABLE_WORDS), (top - 1024, em.TABLE2_WORDS))


def test_ex2_constants() -> None:
    """The sequence's immediates and its table are what their definitions say (recomputed with mpmath)."""
    import mpmath as mp

    from qwengpu.codegen import ex2_model as em

    assert em.exact_constants() == {"P1": em.P1, "C": em.C, "B16": em.B16, "D16": em.D16, "K1": em.K1,
                                    "K1F": em.K1F, "P16": em.P16}
    with mp.workprec(300):
        n = 1 << em.TABLE_BITS
        want = tuple(int(mp.nint((mp.mpf(2) ** (mp.mpf(j) / n) - 1) * mp.mpf(2) ** 64)) + em.TABLE_BIAS
                     for j in range(n))
        want2 = tuple(int(mp.nint((mp.mpf(2) ** (mp.mpf(j) / n**2) - 1) * mp.mpf(2) ** 64)) + em.TABLE2_BIAS
                      for j in range(n))
    assert em.TABLE == want and em.TABLE2 == want2
    assert em.TABLE_WORDS == tuple(t >> 32 for t in want) + tuple(t & M32 for t in want)
    assert em.TABLE2_WORDS == tuple(t >> 32 for t in want2) + tuple(t & M32 for t in want2)
    assert max(want2) < 1 << 56  # ex2_model.times: the factor's high word below 2^24


def test_ex2_cost() -> None:
    """The size (rows) and the cost (machine warp instructions, no divergence: fixed trip counts)
    of one inline fex2 on the machines' units (the multiplier), pinned so a change is noticed: 298
    rows / 1,154 issued while the BKM steps k = 33..63 were a loop, 333 / 829 with them as one
    product, 350 / 350 with the steps after k = 16 as a polynomial of half-word products
    (``ex2_model.poly_tail``), 193 / 193 with the steps k = 1..16 as two tables in the read-only
    words and one product (the 2B shape; 350 without read-only words)."""
    rng = np.random.default_rng(2)
    a = ex2_inputs(rng, 32)
    check("fex2", {}, a)
    for opts, most in ((MACHINE, 195), (MACHINE_NO_TABLE, 355)):
        info: dict = {}
        machine("fex2", {}, a, a, a, info=info, weights=True, options=opts)
        prog, st = info["program"], info["stats"]
        rows = sum(1 for x in prog.code if x.ptx == info["ptx"])
        # machine warp instructions per PTX-level issue of the fex2 (the costliest PTX instruction)
        issued = max(m / max(p, 1) for m, p in zip(st.machine_by_ptx, st.issues_by_ptx, strict=True))
        assert rows <= most and issued <= most, (rows, issued)


@pytest.mark.slow
@pytest.mark.parametrize("ftz", [False, True])
def test_ex2_random_sweep(ftz: bool) -> None:
    rng = np.random.default_rng(31 + ftz)
    check("fex2", {"ftz": ftz}, ex2_inputs(rng, 1 << 15))


# fdiv on the multiplier: long division in base 256 with a reciprocal's estimates
# ---------------------------------------------------------------------------------------------
FDIV = [c for c in DIVSQRT if c[0] == "fdiv"]


def test_fdiv_reciprocal_on_every_divisor() -> None:
    """What ``softfloat._fdiv_digits``' exactness rests on, on every significand den in [2^23,
    2^24) (its arithmetic, word for word): the reciprocal R never exceeds 2^39 / den and is within
    2^-13 below it, and every product fits a word. A 10-bit digit's estimate is then below the
    digit by less than 2^-5 + 1,024 2^-13 < 1 (the docstring's argument): one correction suffices."""
    from qwengpu.codegen.softfloat import FDIV_K0, FDIV_K2

    den = np.arange(1 << 23, 1 << 24, dtype=np.uint64)
    v = (den >> np.uint64(8)) + np.uint64(1)
    assert int((v * np.uint64(FDIV_K2)).max()) < 1 << 32
    r = np.uint64(FDIV_K0) - ((v * np.uint64(FDIV_K2)) >> np.uint64(16))
    for _ in range(2):
        assert int((v * r).max()) < 1 << 32
        e = (np.uint64(1 << 32) - v * r) >> np.uint64(17)
        assert int((r * e).max()) < 1 << 32
        r = (r * e) >> np.uint64(14)
    exact = 2.0**39 / den.astype(np.float64)
    assert (r.astype(np.float64) <= exact).all()
    assert (r.astype(np.float64) >= exact * (1 - 2.0**-13)).all()
    assert int((np.uint64(0xFFFF) * r).max()) < 1 << 32  # (r >> 8) * R, r < den < 2^24


@pytest.mark.parametrize("combo", FDIV, ids=[_id(c) for c in FDIV])
def test_fdiv_on_the_multiplier(combo: tuple) -> None:
    """fdiv in every mode and ftz on the machines' units (``_fdiv_digits``): random operands,
    exact quotients, subnormal ties, then every edge pair, bit for bit with the interpreter."""
    op, mods = combo
    rng = np.random.default_rng(abs(hash(_id(combo))) % 2**32 + 3)
    check(op, mods, *operands(op, rng, 1024), weights=True, options=MACHINE)
    a, b = edge_pairs()
    check(op, mods, a, b, weights=True, options=MACHINE)
    a, b = close_pairs(rng, 512)
    check(op, mods, a, b, weights=True, options=MACHINE)


SQRT_UNITS = [c for c in DIVSQRT if c[0] == "fsqrt"]


def test_fsqrt_root_on_every_significand() -> None:
    """``sqrt_model.root_rem`` (the sequence ``softfloat._fsqrt_digits`` runs on the multiplier,
    its constants shared) gives floor(sqrt(S' 2^26)) and the exact remainder for every one of
    the 3 * 2^24 significands S' in [2^24, 2^26)."""
    from qwengpu.codegen.sqrt_model import root_rem

    one = np.uint64(1)
    for lo in range(1 << 24, 1 << 26, 1 << 22):
        s = np.arange(lo, lo + (1 << 22), dtype=np.uint64)
        root, rem = root_rem(s)
        x = s << np.uint64(26)
        assert (root * root <= x).all() and ((root + one) * (root + one) > x).all()
        assert (rem == x - root * root).all()


def test_frsqrt_significand_on_every_significand() -> None:
    """``sqrt_model.rsqrt_sig`` (what ``softfloat._frsqrt_sig`` runs, word for word) is rn(2^36 /
    sqrt(S')) for every one of the 3 * 2^24 significands S' in [2^24, 2^26): float64 decides all
    but the values within 10^-6 of a rounding boundary, which exact integer roots decide
    (floor((isqrt(2^74 // S') + 1) / 2): 2^36 / sqrt(S') is irrational there, so no ties)."""
    import math

    from qwengpu.codegen.sqrt_model import rsqrt_sig

    for lo in range(1 << 24, 1 << 26, 1 << 22):
        s = np.arange(lo, lo + (1 << 22), dtype=np.uint64)
        r = rsqrt_sig(s)
        y = 2.0**36 / np.sqrt(s.astype(np.float64)) + 0.5
        near = np.abs(y - np.round(y)) < 1e-6
        assert (r[~near] == np.floor(y[~near]).astype(np.uint64)).all()
        for i in np.flatnonzero(near):
            assert int(r[i]) == (math.isqrt((1 << 74) // int(s[i])) + 1) >> 1


@pytest.mark.parametrize("ftz", [False, True])
@pytest.mark.parametrize("units", [False, True])
def test_frsqrt_is_the_interpreters(ftz: bool, units: bool) -> None:
    """``rsqrt.approx`` as the op ``frsqrt`` expanded (``softfloat.expand_frsqrt``: the significand
    above, the exponent, the specials), bit for bit with ``fp32.rsqrt_approx`` (rn(1/sqrt(x))) on
    the edge values and their negations, every exponent with random significands, subnormals, and
    4,096 random words; on the 2B machine's units and with the test shape's multiply sequences."""
    rng = np.random.default_rng(31 + ftz + 2 * units)
    e = np.array(EDGE + [x ^ 0x80000000 for x in EDGE], dtype=np.uint32)
    exps = np.arange(256, dtype=np.uint32).repeat(8) << np.uint32(23)
    a = np.concatenate([e, exps | (random_bits(rng, len(exps)) & np.uint32(0x7FFFFF)),
                        random_bits(rng, 1024) & np.uint32(0x807FFFFF), random_bits(rng, 4096)])
    if not units:
        a = a[::4]  # the test shape's multiplies are long sequences
    a = np.concatenate([a, np.zeros((-len(a)) % 32, dtype=np.uint32)])
    for x in np.split(a, range(2048, len(a), 2048)):
        check("frsqrt", {"ftz": ftz}, x, weights=True, options=MACHINE if units else None)


@pytest.mark.parametrize("combo", SQRT_UNITS, ids=[_id(c) for c in SQRT_UNITS])
def test_fsqrt_on_the_multiplier(combo: tuple) -> None:
    """fsqrt in every mode and ftz on the machines' units: random operands and exact squares,
    the edge values, and 4,096 of the top-16-bit patterns, bit for bit with the interpreter."""
    op, mods = combo
    rng = np.random.default_rng(abs(hash(_id(combo))) % 2**32 + 5)
    check(op, mods, *operands(op, rng, 1024), weights=True, options=MACHINE)
    e = np.array(EDGE + [x ^ 0x80000000 for x in EDGE] + INT_EDGE, dtype=np.uint32)
    check(op, mods, e, weights=True, options=MACHINE)
    hi = rng.choice(1 << 16, 4096, replace=False).astype(np.uint32) << 16
    check(op, mods, hi | (random_bits(rng, 4096) & 0xFFFF), weights=True, options=MACHINE)


def test_fdiv_fsqrt_cost() -> None:
    """One fdiv.rn's and one fsqrt.rn's issued machine warp instructions, pinned: 238 and 322 with
    the loops (the test shape's), 115 and 98 on the multiplier."""
    rng = np.random.default_rng(2)
    issued = {}
    for op in ("fdiv", "fsqrt"):
        a, b, c = operands(op, rng, 64)
        for units in (False, True):
            info: dict = {}
            machine(op, {"rnd": "rn"}, a, b, c, info=info, weights=True, options=MACHINE if units else None)
            st = info["stats"]
            per = zip(st.machine_by_ptx, st.issues_by_ptx, strict=True)
            issued[op, units] = max(m / max(p, 1) for m, p in per)
    assert issued["fdiv", False] <= 240 and issued["fdiv", True] <= 104, issued
    assert issued["fsqrt", False] <= 330 and issued["fsqrt", True] <= 100, issued


# ---------------------------------------------------------------------------------------------
# big sweeps (slow)
# ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("combo", ALL, ids=[_id(c) for c in ALL])
def test_sweep(combo: tuple) -> None:
    """All edge pairs, then 4096 random operand sets and 4096 near-cancelling pairs."""
    op, mods = combo
    rng = np.random.default_rng(abs(hash(_id(combo))) % 2**32 + 7)
    if op not in UNARY:
        a, b = edge_pairs()
        c = np.array(EDGE, dtype=np.uint32)[rng.integers(0, len(EDGE), len(a))]
        check(op, mods, a, b, c)
    check(op, mods, *operands(op, rng, 4096))
    a, b = close_pairs(rng, 4096)
    check(op, mods, a, b, random_bits(rng, 4096))


SQRT = [c for c in DIVSQRT if c[0] == "fsqrt"]


@pytest.mark.slow
@pytest.mark.parametrize("combo", DIVSQRT, ids=[_id(c) for c in DIVSQRT])
def test_divsqrt_sweep_on_the_multiplier(combo: tuple) -> None:
    """fdiv and fsqrt on the machines' units (base-1,024 division, the root's Newton steps): 8,192
    random operand sets and 4,096 near-equal pairs per mode; for fsqrt every top-16-bit pattern."""
    op, mods = combo
    rng = np.random.default_rng(abs(hash(_id(combo))) % 2**32 + 13)
    for _ in range(2):
        check(op, mods, *operands(op, rng, 4096), weights=True, options=MACHINE)
    a, b = close_pairs(rng, 4096)
    check(op, mods, a, b, weights=True, options=MACHINE)
    if op == "fsqrt":
        hi = np.arange(1 << 16, dtype=np.uint32) << 16
        check(op, mods, hi | (random_bits(rng, 1 << 16) & 0xFFFF), weights=True, options=MACHINE)


@pytest.mark.slow
@pytest.mark.parametrize("combo", I2F + F2I + FRND + SQRT, ids=[_id(c) for c in I2F + F2I + FRND + SQRT])
def test_unary_high_bits_exhaustive(combo: tuple) -> None:
    """Every pattern of the top 16 bits (sign, exponent, 7 fraction bits), random low bits."""
    op, mods = combo
    rng = np.random.default_rng(11)
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    lo = random_bits(rng, 1 << 16) & 0xFFFF
    lo[::4] = 0
    lo[1::4] = 0x8000
    check(op, mods, hi | lo)


@pytest.mark.slow
@pytest.mark.parametrize("rnd", RND)
def test_fma_edge_triples(rnd: str) -> None:
    """Every triple of a smaller edge set: inf*0, inf-inf, exact zeros, signed zeros."""
    small = [0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x3F800000, 0xBF800000, 0x3F800001, 0x33800000,
             0xB3800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF,
             0x1F800000, 0x40400000]  # fmt: skip
    a, b, c = (
        np.array(x, dtype=np.uint32) for x in zip(*itertools.product(small, small, small), strict=True)
    )
    for ftz in (False, True):
        check("ffma", {"rnd": rnd, "ftz": ftz}, a, b, c)


# ---------------------------------------------------------------------------------------------
# the corpus: every float kernel with its float ops expanded, bit-identical to the interpreter
# ---------------------------------------------------------------------------------------------
KERNELS = Path(__file__).resolve().parents[2] / "kernels"
# kernels the lowering refuses: approximate instructions (lg2 sin cos tanh .approx) with no exact
# sequence (ex2.approx has one: fex2; fast_intrinsics, softmax, tanh_approx use it)
APPROX: set[str] = set()
# float kernels whose expanded programs run long in the simulator (or allocate slowly)
SLOW = {"div_rn", "div_s64", "gcd", "histogram", "int_divmod", "layernorm", "prime_count",
        "rounding_div_rcp", "rsqrt_norm", "sin_cos", "sqrt_rn", "matmul"}  # fmt: skip
CORPUS = sorted(p.stem for p in KERNELS.glob("*.cu"))


def _corpus_run(name: str, expand) -> tuple[dict, dict, object]:
    from qwengpu.cuda import compile_file
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.runner import COMPILE_OPTIONS, run_kernel
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import load_spec

    cu = KERNELS / f"{name}.cu"
    spec = load_spec(cu.with_suffix(".json"))
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
    fn = _find_kernel(module, spec.kernel)
    prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])
    if not any(x.op in FLOAT_OPS for x in prog.code):
        pytest.skip("no float ops")
    prog = expand(prog)
    assert not any(x.op in FLOAT_OPS for x in prog.code)
    if len(prog.code) < 3000:
        prog = allocate(prog)
    bound = bind(spec, inline_calls(module, fn))
    MachineSim(prog).launch(
        spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes
    )
    ref = run_kernel(cu, cu.with_suffix(".json"), engine="interp")
    return ref.outputs, read_outputs(spec, bound.gmem), prog


def _corpus_params() -> list:
    out = []
    for name in CORPUS:
        marks = [pytest.mark.slow] if name in SLOW else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", _corpus_params())
def test_corpus_kernel(name: str) -> None:
    if name in APPROX:
        from qwengpu.errors import MachineLimitError

        with pytest.raises(MachineLimitError, match="approximate instruction"):
            _corpus_run(name, sf.expand_floats)
        return
    want, got, _ = _corpus_run(name, sf.expand_floats)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), f"{k}: machine {got[k]} interpreter {want[k]}"


@pytest.mark.parametrize(
    "name,mul", [("dot", "auto"), ("rounding_fma", "auto"), ("fcompare", "auto"), ("float_to_int", "auto"),
                 ("rounding_fma", "loop"), ("mul_ties", "loop")],
)  # fmt: skip
def test_weights_pipeline(name: str, mul: str) -> None:
    """Through soft.py's framework (the registry): no float op is left; with ``mul="loop"`` (what
    soft.py's ``auto`` falls back to when a program does not fit the ROM) the significand
    product is a loop too."""
    from qwengpu.codegen.soft import EXPANDERS, expand_for_weights, weight_name

    assert all(EXPANDERS.get(op) is fn for op, fn in sf.FLOAT_EXPANDERS.items())
    want, got, prog = _corpus_run(name, lambda p: expand_for_weights(p, mul=mul))
    assert not {weight_name(x) for x in prog.code} & FLOAT_OPS
    if mul == "loop":
        assert any(x.op == "bra" and x.target <= pc for pc, x in enumerate(prog.code))
    for k in want:
        assert got[k].tobytes() == want[k].tobytes()


@pytest.mark.parametrize("shape", ["unrolled", "loop", "mul"])
def test_product_shapes(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other shapes of the significand product: an 8-trip loop; mulhi + mul (soft.py)."""
    monkeypatch.setattr(sf, "MUL_SHAPE", shape)
    rng = np.random.default_rng(9)
    for op, mods in [("fmul", {}), ("ffma", {"rnd": "rp"}), ("fmul", {"rnd": "rm", "ftz": True})]:
        a, b, c = operands(op, rng, 256)
        check(op, mods, a, b, c, guard=True, weights=shape == "mul")


def test_product_high_half_on_the_multiplier(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``mul`` shape's P >> 16 (16 × 16 and 16 × 8 products, the carry fixed by the low
    word's parity): significands at the ends (2^23, 2^24 - 1, one byte all ones) and random, so
    both values of the carry and every byte pattern of the cross terms occur; fmul (rn, rz) and
    ffma (rn) against fp32."""
    monkeypatch.setattr(sf, "MUL_SHAPE", "mul")
    rng = np.random.default_rng(14)
    n = 1024
    ends = np.array([0, 0x7FFFFF, 0x0000FF, 0x7FFF00, 0x00FF00, 0x7F00FF, 0x000001], dtype=np.uint32)

    def floats() -> np.ndarray:
        sig = np.where(rng.random(n) < 0.5, rng.choice(ends, n), rng.integers(0, 1 << 23, n))
        sig = sig.astype(np.uint32)
        exp = rng.integers(64, 192, n).astype(np.uint32)
        return (sig | (exp << 23) | (rng.integers(0, 2, n).astype(np.uint32) << 31)).astype(np.uint32)

    a, b, c = floats(), floats(), floats()
    for op, mods in [("fmul", {}), ("fmul", {"rnd": "rz"}), ("ffma", {})]:
        check(op, mods, a, b, c, weights=True)
    for k in (0x3F000000, 0x3FFFFFFF, 0xC0490FDB):  # a constant factor takes mulhi's expansion
        check("fmul", {}, a, b, c, weights=True, imm={1: k})
