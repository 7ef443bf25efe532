"""``dp4a``, ``dp2a.{lo,hi}`` and 32-bit ``sad`` on the machine: the ISA simulator and the weights
form (every op the weights run, the multiply as a sequence or the multiplier) give the interpreter's
bits, and both equal an independent Python reference of the PTX ISA's definition."""

from __future__ import annotations

import random

import pytest
from machine_helpers import assert_same, binop_ptx, binop_spec, both

from qwengpu.codegen.soft import Options, simulate_for_weights
from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

M32 = 0xFFFFFFFF
EDGES = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, M32, 0x80808080,
         0x7F7F7F7F, 0x01020304, 0xFEDCBA98]


def _cases(seed: int, n: int = 64) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    a = [rng.choice(EDGES) if rng.random() < 0.4 else rng.getrandbits(32) for _ in range(n)]
    b = [rng.choice(EDGES) if rng.random() < 0.4 else rng.getrandbits(32) for _ in range(n)]
    return a, b


def _field(v: int, k: int, bits: int, signed: bool) -> int:
    x = (v >> (k * bits)) & ((1 << bits) - 1)
    return x - (1 << bits) if signed and x >= 1 << (bits - 1) else x


def ref_dot(a: int, b: int, c: int, n: int, sa: bool, sb: bool, hi: bool = False) -> int:
    acc = c
    for k in range(n):
        if n == 4:
            acc += _field(a, k, 8, sa) * _field(b, k, 8, sb)
        else:
            acc += _field(a, k, 16, sa) * _field(b, k + 2 * hi, 8, sb)
    return acc & M32


def _run_all(op: str, a: list[int], b: list[int]) -> dict:
    ptx = binop_ptx(op, "u32", "u32", "u32")
    spec = binop_spec(a, b, "u32", "u32", "u32")
    ref, got, _, _ = both(ptx, spec)
    assert_same(ref, got)
    module, sp = parse_ptx(ptx), parse_spec(spec)
    for native_mul in (False, True):
        weights, _, _ = simulate_for_weights(module, sp, options=Options(native_mul=native_mul))
        assert_same(ref, weights)
    return ref


@pytest.mark.parametrize("ta,tb", [("u32", "u32"), ("s32", "s32"), ("u32", "s32"), ("s32", "u32")])
def test_dp4a_matches_the_definition(ta: str, tb: str) -> None:
    a, b = _cases(len(ta) * 31 + (ta == "s32") * 2 + (tb == "s32"))
    out = _run_all(f"dp4a.{ta}.{tb} {{C}}, {{A}}, {{B}}, {{B}};", a, b)
    want = [ref_dot(x, y, y, 4, ta == "s32", tb == "s32") for x, y in zip(a, b, strict=True)]
    assert [int(v) & M32 for v in out["out"]] == want


@pytest.mark.parametrize("half", ["lo", "hi"])
@pytest.mark.parametrize("ta,tb", [("u32", "s32"), ("s32", "u32")])
def test_dp2a_matches_the_definition(half: str, ta: str, tb: str) -> None:
    a, b = _cases(7 + len(half) + len(ta))
    out = _run_all(f"dp2a.{half}.{ta}.{tb} {{C}}, {{A}}, {{B}}, {{A}};", a, b)
    want = [ref_dot(x, y, x, 2, ta == "s32", tb == "s32", half == "hi") for x, y in zip(a, b, strict=True)]
    assert [int(v) & M32 for v in out["out"]] == want


@pytest.mark.parametrize("t", ["u32", "s32"])
def test_sad_matches_the_definition(t: str) -> None:
    a, b = _cases(11 if t == "u32" else 12)
    out = _run_all(f"sad.{t} {{C}}, {{A}}, {{B}}, {{B}};", a, b)

    def s(v: int) -> int:
        return v - (1 << 32) if t == "s32" and v >= 1 << 31 else v

    want = [(abs(s(x) - s(y)) + y) & M32 for x, y in zip(a, b, strict=True)]
    assert [int(v) & M32 for v in out["out"]] == want


def test_sad_on_16_bits_is_a_named_machine_limit() -> None:
    a, b = _cases(3, 8)
    body = ("cvt.u16.u32 %rs3, {A};\n    cvt.u16.u32 %rs4, {B};\n    sad.u16 %rs5, %rs3, %rs4, %rs4;\n"
            "    cvt.u32.u16 {C}, %rs5;")
    ptx = binop_ptx(body, "u32", "u32", "u32")
    _, got, _, _ = both(ptx, binop_spec(a, b, "u32", "u32", "u32"))
    assert isinstance(got, str) and "sad.u16" in got


def test_the_refused_list_is_the_documented_one() -> None:
    """Every instruction the interpreter runs also runs on the machine, except this short list,
    refused by name (README "Limits and supported features", ``qwengpu machine info``)."""
    from pathlib import Path

    from qwengpu.codegen.lowering.table import refused_opcodes

    documented = ["cos", "cp", "fns", "isspacep", "lg2", "sin", "tanh", "vprintf"]
    assert refused_opcodes() == documented
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for op in ("lg2", "fns", "isspacep", "cp.async", "vprintf"):
        assert f"`{op}" in readme, op


def test_machine_info_lists_the_refused_opcodes() -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    from qwengpu.codegen.lowering.table import refused_opcodes

    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-m", "qwengpu", "machine", "info", "--json"], capture_output=True,
                       text=True, cwd=root)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["refused_opcodes"] == refused_opcodes()
