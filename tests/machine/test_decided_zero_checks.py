"""Division-by-zero checks that a test on every path already decides (``codegen.nonzero``): the
``trap.divzero`` and its ``setp`` go, and the division skips its divisor clamp, only where no lane
reaching the division can hold a zero divisor.

Checked on the ISA simulator as the weights run it (``run_weights`` with the engine's options):
the same output bits with and without the pass and as the kernels' meaning (spec values from
NumPy / Python), fewer passes; a division that some path reaches unchecked keeps its trap and still
faults; and the data-flow itself on hand-made rows (a guarded write, a loop that zeroes the
divisor, a call). In the model (test shape, default run): the corpus ``gcd`` launch of
``tests/machine_weights`` runs this program."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from qwengpu.codegen.nonzero import drop_decided_zero_checks, implied, known_facts
from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import run_weights
from qwengpu.errors import ExecutionError
from qwengpu.isa.instr import Imm, MInstr, P, R
from qwengpu.isa.program import Layout, Program
from qwengpu.model.configs import shape_named

ROOT = Path(__file__).resolve().parents[2]
ON = Options(**unit_options(shape_named("2b")))
OFF = replace(ON, decided_zero_checks=False)


def _traps(prog: Program) -> int:
    return sum(ins.op == "trap" and ins.mod("code") == "divzero" for ins in prog.code)


def test_euclid_keeps_its_bits_without_the_checks_its_loop_test_decides() -> None:
    """``gcd``: ``while (y != 0) t = x % y`` and ``x == 0 ? 0 : a / x``: both checks go, the
    outputs are bit for bit the same and the spec's (Python's math.gcd / lcm mod 2^32), and the
    launch takes fewer passes."""
    cu, spec = ROOT / "kernels" / "gcd.cu", ROOT / "kernels" / "gcd.json"
    on, off = run_weights(cu, spec, options=ON), run_weights(cu, spec, options=OFF)
    assert on.passed and off.passed
    for k, v in off.outputs.items():
        assert on.outputs[k].tobytes() == v.tobytes(), k
    assert _traps(off.program) == 2 and _traps(on.program) == 0
    assert not any(i.op == "max" and i.s[1:] == (Imm(1),) for i in on.program.code)
    assert on.stats["passes"] < 0.95 * off.stats["passes"]  # 1,814 against 1,952


SRC = """
extern "C" __global__ void k(const int* d, int* out)
{
    int i = threadIdx.x;
    int x = d[i];
    int q = -1;
    if (x != 0) q = 1000 / x;          // decided: the test guards this division
    out[i] = q + 7 % (x + %s);         // not decided: x + %s may be zero
}
"""


def _launch(tmp_path: Path, data: list[int], shift: int) -> tuple[Path, Path]:
    cu = tmp_path / f"k{shift}.cu"
    cu.write_text(SRC.replace("%s", str(shift)))
    spec = tmp_path / f"k{shift}.json"
    spec.write_text(json.dumps({"kernel": "k", "grid": 1, "block": len(data), "args": [
        {"name": "d", "type": "i32*", "data": data}, {"name": "out", "type": "i32*", "size": len(data)}],
        "outputs": ["out"]}))
    return cu, spec


def _c_div(a: int, b: int) -> int:  # C's truncating division
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def test_a_checked_division_loses_its_trap_an_unchecked_one_keeps_it(tmp_path: Path) -> None:
    data = [5, 0, -3, 7, 0, 12, -1000, 2]
    cu, spec = _launch(tmp_path, data, 100)
    on, off = run_weights(cu, spec, options=ON), run_weights(cu, spec, options=OFF)
    want = [(-1 if x == 0 else _c_div(1000, x)) + (7 - _c_div(7, x + 100) * (x + 100)) for x in data]
    assert [int(v) for v in on.outputs["out"]] == want
    assert on.outputs["out"].tobytes() == off.outputs["out"].tobytes()
    assert _traps(off.program) == 2 and _traps(on.program) == 1
    # the unchecked division still faults where its divisor is zero (lane 2: -3 + 3)
    cu, spec = _launch(tmp_path, data, 3)
    with pytest.raises(ExecutionError, match="division by zero"):
        run_weights(cu, spec, options=ON)


def _prog(code: list[MInstr]) -> Program:
    layout = Layout({}, 0, {}, [], 0, [], {}, 0, [])
    return Program(name="t", code=code, ptx=[], layout=layout, bank_slots=[], nregs=8, npreds=4)


def _check(r: int) -> list[MInstr]:
    return [MInstr("setp", (P(1),), (R(r), Imm(0)), {"cmp": "eq", "sign": "u"}),
            MInstr("trap", (), (), {"code": "divzero"}, guard=P(1)),
            MInstr("idiv", (R(3),), (R(2), R(r)), {"sign": "u"})]


@pytest.mark.parametrize("second, kept", [
    (MInstr("mov", (R(1),), (Imm(7),), {}, guard=P(0)), 0),  # guarded: old 5 or new 7, both nonzero
    (MInstr("mov", (R(1),), (R(2),), {}, guard=P(0)), 1),  # guarded: r2 unknown
    (MInstr("add", (R(1),), (R(1), Imm(1)), {}), 1),  # add may wrap to zero
    (MInstr("or", (R(1),), (R(2), Imm(1)), {}), 0),
    (MInstr("min", (R(1),), (R(2), Imm(1)), {"sign": "s"}), 1),  # min(r2, 1) may be 0 or negative
    (MInstr("max", (R(1),), (R(2), Imm(1)), {"sign": "u"}), 0),  # unsigned max(r2, 1) >= 1
])
def test_what_carries_the_fact(second: MInstr, kept: int) -> None:
    code = [MInstr("ld", (R(2),), (Imm(0),), {"space": "param", "size": 4}),
            MInstr("mov", (R(1),), (Imm(5),), {}), second, *_check(1), MInstr("exit")]
    out = drop_decided_zero_checks(_prog(code))
    assert _traps(out) == kept
    assert sum(i.op == "setp" for i in out.code) == kept  # the check's setp goes with its trap
    # past the check (dropped or kept) no lane has r1 == 0: the division needs no clamp either way
    assert next(i for i in out.code if i.op == "idiv").m.get("nz") is True


def test_a_loop_that_zeroes_the_divisor_keeps_the_check() -> None:
    """Entry: r1 tested nonzero; the back edge brings r1 = r1 - 1 (maybe 0): the join keeps
    nothing, the check stays. Without the back edge's write it goes."""
    def loop(body: MInstr) -> Program:
        return _prog([
            MInstr("ld", (R(1),), (Imm(0),), {"space": "param", "size": 4}),  # 0
            MInstr("setp", (P(0),), (R(1), Imm(0)), {"cmp": "eq", "sign": "u"}),  # 1
            MInstr("bra", guard=P(0), target=8),  # 2
            *_check(1),  # 3, 4, 5
            body,  # 6
            MInstr("bra", guard=P(2), target=3),  # 7
            MInstr("exit")])  # 8
    assert _traps(drop_decided_zero_checks(loop(MInstr("sub", (R(1),), (R(1), Imm(1)), {})))) == 1
    assert _traps(drop_decided_zero_checks(loop(MInstr("sub", (R(4),), (R(1), Imm(1)), {})))) == 0


def test_a_call_forgets_and_a_passed_trap_teaches() -> None:
    """After ``@p trap`` (p: r == 0) the lanes that go on have r != 0 (the second check goes);
    a call between forgets it (routines write registers)."""
    twice = [MInstr("ld", (R(1),), (Imm(0),), {"space": "param", "size": 4}), *_check(1), *_check(1),
             MInstr("exit")]
    facts = known_facts(_prog(twice))
    assert 1 not in facts[1][0] and 1 in facts[4][0]
    assert _traps(drop_decided_zero_checks(_prog(twice))) == 1
    called = [*twice[:4], MInstr("call", (R(5),), target=9), *twice[4:], MInstr("ret", s=(R(5),))]
    assert _traps(drop_decided_zero_checks(_prog(called))) == 2
    bare = [twice[0], MInstr("idiv", (R(3),), (R(2), R(1)), {"sign": "u"}), MInstr("exit")]
    assert "nz" not in drop_decided_zero_checks(_prog(bare)).code[1].m  # unchecked: clamped


@pytest.mark.parametrize("cmp, sign, k, want", [
    ("ge", "s", 1, (True, True)), ("ge", "s", 0, (False, True)), ("gt", "s", 0xFFFFFFFF, (False, True)),
    ("gt", "s", 0, (True, True)), ("lt", "s", 0, (True, False)), ("le", "s", 0, (False, False)),
    ("ge", "s", 0xFFFFFFFF, (False, False)),  # r >= -1
    ("lt", "u", 0x80000000, (False, True)), ("le", "u", 0x80000000, (False, False)),
    ("gt", "u", 0, (True, False)), ("ge", "u", 1, (True, False)), ("eq", "u", 5, (True, True)),
    ("eq", "s", 0xFFFFFFFB, (True, False)), ("ne", "u", 0, (True, False)), ("ne", "u", 3, (False, False)),
])
def test_what_a_comparison_implies(cmp: str, sign: str, k: int, want: tuple[bool, bool]) -> None:
    """(nonzero, non-negative as s32) for every r with ``r cmp k``, checked on sample values."""
    assert implied(cmp, sign, k) == want
    ops = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
           "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
    for u in [0, 1, 2, 3, 5, 0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFB, 0xFFFFFFFF]:
        a, b = (u, k) if sign == "u" else (u - (u >> 31 << 32), k - (k >> 31 << 32))
        if ops[cmp](a, b):
            assert not want[0] or u != 0
            assert not want[1] or u < 0x80000000


def test_a_remainder_of_a_tested_dividend_takes_no_sign_rows() -> None:
    """``prime_count``: ``if (n < 2) continue; ... n % d``: n is non-negative where it is divided,
    so the remainder takes neither n's magnitude nor the result's sign (5 rows an inner
    iteration); the outputs are the same bits and the spec's (primes by the kernel's meaning)."""
    cu, spec = ROOT / "kernels" / "prime_count.cu", ROOT / "kernels" / "prime_count.json"
    on, off = run_weights(cu, spec, options=ON), run_weights(cu, spec, options=OFF)
    assert on.passed and off.passed
    for k, v in off.outputs.items():
        assert on.outputs[k].tobytes() == v.tobytes(), k
    assert on.stats["passes"] < 0.95 * off.stats["passes"]


SIGNS = """
extern "C" __global__ void k2(const int* a, const int* b, int* out)
{
    int i = threadIdx.x;
    int x = a[i], y = b[i], r = -7;
    if (x >= 0 && y != 0) r = x / y * 1000 + x % y;       // x non-negative, y nonzero
    else if (x < 0 && y > 0) r = x / y * 1000 + x % y;    // y positive, x negative
    out[i] = r;
}
"""


def test_signed_divisions_on_tested_signs_keep_cs_rounding(tmp_path: Path) -> None:
    """Quotient and remainder by C's rules (toward zero; the remainder takes the dividend's sign)
    where the tests decide one operand's sign and the other's is unknown, including INT_MIN."""
    a = [7, 7, -7, -7, 0, 2147483647, -2147483648, 100, 5, -5, 13, -13]
    b = [2, -2, 2, -2, -3, -1, 3, 0, 0, 0, -4, 4]
    (tmp_path / "k2.cu").write_text(SIGNS)
    spec = tmp_path / "k2.json"
    spec.write_text(json.dumps({"kernel": "k2", "grid": 1, "block": len(a), "args": [
        {"name": "a", "type": "i32*", "data": a}, {"name": "b", "type": "i32*", "data": b},
        {"name": "out", "type": "i32*", "size": len(a)}], "outputs": ["out"]}))

    def want(x: int, y: int) -> int:
        if (x >= 0 and y != 0) or (x < 0 < y):
            q = _c_div(x, y)
            v = q * 1000 + (x - q * y)
            return (v + 2**31) % 2**32 - 2**31
        return -7

    on = run_weights(tmp_path / "k2.cu", spec, options=ON)
    off = run_weights(tmp_path / "k2.cu", spec, options=OFF)
    assert [int(v) for v in on.outputs["out"]] == [want(x, y) for x, y in zip(a, b, strict=True)]
    assert on.outputs["out"].tobytes() == off.outputs["out"].tobytes()
    assert on.stats["passes"] < off.stats["passes"]
