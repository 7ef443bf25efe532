"""Random kernels beyond the corpus: random C expression trees compiled by NVRTC, run on the
interpreter, compared bit for bit with an independent Python model of C and IEEE semantics.

Integer trees use unsigned arithmetic (wrap-around is defined in C) with signed division,
remainder, shifts and comparisons through casts; float trees use the ``__f*_rn`` intrinsics so the
compiler cannot contract or reorder them, and the model rounds exact rationals to float32.
"""

from __future__ import annotations

import json
import os
import random
import struct
from fractions import Fraction

import numpy as np
import pytest

from qwengpu.runner import run_kernel

M32 = 0xFFFFFFFF
SEEDS = int(os.environ.get("FUZZ_SEEDS", "6"))  # FUZZ_SEEDS=200 for a longer local run


def s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def gen_int(rng: random.Random, depth: int) -> tuple[str, object]:
    """A random unsigned expression over a, b, c: (C text, Python evaluator)."""
    if depth == 0 or rng.random() < 0.2:
        leaf = rng.choice(["a", "b", "c", "K"])
        if leaf == "K":
            k = rng.choice([0, 1, 2, 3, 7, 31, 32, 0x80000000, M32, rng.getrandbits(32)])
            return f"{k}u", (lambda v, k=k: k)
        return leaf, (lambda v, n=leaf: v[n])
    op = rng.choice(
        [
            "+",
            "-",
            "*",
            "&",
            "|",
            "^",
            "<<",
            ">>u",
            ">>s",
            "/u",
            "%u",
            "/s",
            "%s",
            "<s",
            "<u",
            "==",
            "?:",
            "min",
            "max",
            "~",
            "neg",
        ]
    )
    xa, fa = gen_int(rng, depth - 1)
    xb, fb = gen_int(rng, depth - 1)
    if op in ("+", "-", "*", "&", "|", "^"):
        f = {
            "+": lambda x, y: x + y,
            "-": lambda x, y: x - y,
            "*": lambda x, y: x * y,
            "&": lambda x, y: x & y,
            "|": lambda x, y: x | y,
            "^": lambda x, y: x ^ y,
        }[op]
        return f"({xa} {op} {xb})", (lambda v: f(fa(v), fb(v)) & M32)
    if op == "<<":
        return f"({xa} << ({xb} & 31u))", (lambda v: (fa(v) << (fb(v) & 31)) & M32)
    if op == ">>u":
        return f"({xa} >> ({xb} & 31u))", (lambda v: fa(v) >> (fb(v) & 31))
    if op == ">>s":
        return f"(unsigned)((int){xa} >> ({xb} & 31u))", (lambda v: (s32(fa(v)) >> (fb(v) & 31)) & M32)
    if op in ("/u", "%u"):
        # divisor forced non-zero
        if op == "/u":
            return f"({xa} / ({xb} | 1u))", (lambda v: fa(v) // (fb(v) | 1))
        return f"({xa} % ({xb} | 1u))", (lambda v: fa(v) % (fb(v) | 1))
    if op in ("/s", "%s"):
        # divisor is never 0 or -1: force bit 1 and clear the sign bit
        def tdiv(x: int, y: int) -> int:
            q = abs(x) // abs(y)
            return q if (x < 0) == (y < 0) else -q

        d = f"(int)(({xb} | 2u) & 0x7fffffffu)"
        if op == "/s":
            return (
                f"(unsigned)((int){xa} / {d})",
                (lambda v: tdiv(s32(fa(v)), (fb(v) | 2) & 0x7FFFFFFF) & M32),
            )
        return (
            f"(unsigned)((int){xa} % {d})",
            (
                lambda v: (
                    (s32(fa(v)) - tdiv(s32(fa(v)), (fb(v) | 2) & 0x7FFFFFFF) * ((fb(v) | 2) & 0x7FFFFFFF))
                    & M32
                )
            ),
        )
    if op == "<s":
        return f"(unsigned)((int){xa} < (int){xb})", (lambda v: int(s32(fa(v)) < s32(fb(v))))
    if op == "<u":
        return f"(unsigned)({xa} < {xb})", (lambda v: int(fa(v) < fb(v)))
    if op == "==":
        return f"(unsigned)({xa} == {xb})", (lambda v: int(fa(v) == fb(v)))
    if op == "?:":
        xc, fc = gen_int(rng, depth - 1)
        return f"(({xc} & 1u) ? {xa} : {xb})", (lambda v: fa(v) if fc(v) & 1 else fb(v))
    if op == "min":
        return f"(unsigned)min((int){xa}, (int){xb})", (lambda v: min(s32(fa(v)), s32(fb(v))) & M32)
    if op == "max":
        return f"max({xa}, {xb})", (lambda v: max(fa(v), fb(v)))
    if op == "~":
        return f"(~{xa})", (lambda v: ~fa(v) & M32)
    return f"(0u - {xa})", (lambda v: -fa(v) & M32)


EDGE = [0, 1, 2, M32, 0x80000000, 0x7FFFFFFF, 0xFFFFFFFE, 31, 32, 33, 0x10000, 0xFFFF]


def write_int_kernel(tmp_path, rng: random.Random, n: int = 64) -> tuple[object, list, dict]:
    """A random integer-expression kernel and its spec in ``tmp_path``: (cu path, exprs, inputs)."""
    exprs = [gen_int(rng, 4) for _ in range(6)]
    body = "\n".join(f"  out[{k} * n + i] = {x};" for k, (x, _) in enumerate(exprs))
    src = (
        f'extern "C" __global__ void fz(const unsigned* A, const unsigned* B, const unsigned* C, '
        f"unsigned* out, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"  if (i >= n) return;\n  unsigned a = A[i], b = B[i], c = C[i];\n{body}\n}}\n"
    )
    vals = {
        k: [rng.choice(EDGE) if rng.random() < 0.4 else rng.getrandbits(32) for _ in range(n)] for k in "abc"
    }
    spec = {
        "kernel": "fz",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "A", "type": "u32*", "data": vals["a"]},
            {"name": "B", "type": "u32*", "data": vals["b"]},
            {"name": "C", "type": "u32*", "data": vals["c"]},
            {"name": "out", "type": "u32*", "size": n * len(exprs)},
            {"name": "n", "type": "i32", "value": n},
        ],
    }
    (tmp_path / "fz.cu").write_text(src)
    (tmp_path / "fz.json").write_text(json.dumps(spec))
    return tmp_path / "fz.cu", exprs, vals


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_integer_expressions(tmp_path, seed):
    n = 64
    cu, exprs, vals = write_int_kernel(tmp_path, random.Random(seed), n)
    got = run_kernel(cu).outputs["out"].tolist()
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        assert got[k * n : (k + 1) * n] == want, f"expression {k}: {text}"


# ---------------------------------------------------------------------- floats
def f2b(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def b2f(b: int) -> float:
    return struct.unpack("<f", struct.pack("<I", b))[0]


def round32(q: Fraction, mode: str = "rn") -> int:
    """Correctly rounded float32 bits of an exact non-zero rational (rn/rz/rd/ru), subnormals and overflow."""
    if q == 0:
        return 0
    sign = 0x80000000 if q < 0 else 0
    away = (mode == "ru" and not sign) or (mode == "rd" and sign)  # directed modes round |q| up here
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, -126)
    scaled = q * Fraction(2) ** (23 - e)
    m = scaled.numerator // scaled.denominator
    rem = scaled - m
    if mode == "rn":
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and m & 1):
            m += 1
    elif away and rem > 0:
        m += 1
    if m == 1 << 24:
        m >>= 1
        e += 1
    if e > 127:
        if mode == "rn" or away:
            return sign | 0x7F800000
        return sign | 0x7F7FFFFF
    if m < (1 << 23):
        return sign | m
    return sign | ((e + 127) << 23) | (m - (1 << 23))


NAN = 0x7FFFFFFF


def fop(op: str, x: int, y: int, z: int = 0, mode: str = "rn") -> int:
    """IEEE-754 float32 operation on bits, with the GPU's canonical NaN."""
    fx, fy, fz = b2f(x), b2f(y), b2f(z)
    vals = [fx, fy] + ([fz] if op == "fma" else [])
    if any(v != v for v in vals):
        return NAN
    infs = [v for v in vals if v in (float("inf"), float("-inf"))]
    if infs:
        if op == "div" and fy == 0:  # inf / 0 = signed inf
            return ((x ^ y) & 0x80000000) | 0x7F800000
        r = {
            "add": lambda: fx + fy,
            "mul": lambda: fx * fy,
            "div": lambda: fx / fy,
            "fma": lambda: fx * fy + fz,
        }[op]()
        if r != r:
            return NAN
        return f2b(r)
    if op == "div" and fy == 0:
        if fx == 0:
            return NAN
        neg = (x ^ y) & 0x80000000
        return neg | 0x7F800000
    X, Y, Z = Fraction(fx), Fraction(fy), Fraction(fz)
    exact = {"add": lambda: X + Y, "mul": lambda: X * Y, "div": lambda: X / Y, "fma": lambda: X * Y + Z}[op]()
    if exact == 0:
        # signs of exact zeros: a product keeps its sign; a sum of opposite signs is +0 (-0 rounding down)
        if op == "mul" or op == "div":
            return (x ^ y) & 0x80000000
        if op == "add":
            a_neg, b_neg = bool(x & 0x80000000), bool(y & 0x80000000)
        else:
            a_neg = bool((x ^ y) & 0x80000000) if X * Y == 0 else (X * Y < 0)
            b_neg = bool(z & 0x80000000)
        if (
            a_neg
            and b_neg
            and (X * Y == 0 if op == "fma" else X == 0)
            and (Z == 0 if op == "fma" else Y == 0)
        ):
            return 0x80000000
        return 0x80000000 if mode == "rd" and not (not a_neg and not b_neg) else 0
    return round32(exact, mode)


def gen_float(rng: random.Random, depth: int) -> tuple[str, object]:
    if depth == 0 or rng.random() < 0.2:
        leaf = rng.choice(["a", "b", "c"])
        return leaf, (lambda v, n=leaf: v[n])
    op = rng.choice(["add", "mul", "div", "fma", "add", "mul"])
    mode = rng.choice(["rn", "rn", "rz", "rd", "ru"])
    xa, fa = gen_float(rng, depth - 1)
    xb, fb = gen_float(rng, depth - 1)
    if op == "fma":
        xc, fc = gen_float(rng, depth - 1)
        return f"__fmaf_{mode}({xa}, {xb}, {xc})", (lambda v: fop("fma", fa(v), fb(v), fc(v), mode))
    name = {"add": "__fadd_", "mul": "__fmul_", "div": "__fdiv_"}[op] + mode
    return f"{name}({xa}, {xb})", (lambda v, op=op: fop(op, fa(v), fb(v), 0, mode))


FEDGE = [
    0x00000000,
    0x80000000,
    0x00000001,
    0x80000001,
    0x007FFFFF,
    0x00800000,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x7F800000,
    0xFF800000,
    0x3F800000,
    0x3F800001,
    0x33800000,
    0x4B800000,
    0x7FFFFFFF,
]


def write_float_kernel(tmp_path, rng: random.Random, n: int = 64) -> tuple[object, list, dict]:
    """A random float-expression kernel and its spec in ``tmp_path``: (cu path, exprs, input bits)."""
    exprs = [gen_float(rng, 3) for _ in range(5)]
    body = "\n".join(f"  out[{k} * n + i] = {x};" for k, (x, _) in enumerate(exprs))
    src = (
        'extern "C" __global__ void ff(const float* A, const float* B, const float* C,'
        f" float* out, int n) {{\n"
        f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n"
        f"  float a = A[i], b = B[i], c = C[i];\n{body}\n}}\n"
    )

    def rnd_bits() -> int:
        r = rng.random()
        if r < 0.25:
            return rng.choice(FEDGE)
        if r < 0.5:
            return rng.getrandbits(32)
        return f2b(float(np.float32(rng.uniform(-4, 4))))

    vals = {k: [rnd_bits() for _ in range(n)] for k in "abc"}
    spec = {
        "kernel": "ff",
        "grid": 2,
        "block": 32,
        "args": [
            {"name": "A", "type": "f32*", "data": [f"0x{v:08x}" for v in vals["a"]]},
            {"name": "B", "type": "f32*", "data": [f"0x{v:08x}" for v in vals["b"]]},
            {"name": "C", "type": "f32*", "data": [f"0x{v:08x}" for v in vals["c"]]},
            {"name": "out", "type": "f32*", "size": n * len(exprs)},
            {"name": "n", "type": "i32", "value": n},
        ],
    }
    (tmp_path / "ff.cu").write_text(src)
    (tmp_path / "ff.json").write_text(json.dumps(spec))
    return tmp_path / "ff.cu", exprs, vals


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_float_expressions(tmp_path, seed):
    n = 64
    cu, exprs, vals = write_float_kernel(tmp_path, random.Random(100 + seed), n)
    got = run_kernel(cu).outputs["out"].view(np.uint32).tolist()
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        bad = [(i, hex(got[k * n + i]), hex(want[i])) for i in range(n) if got[k * n + i] != want[i]]
        assert not bad, f"expression {k}: {text}: first mismatches {bad[:3]}"
