"""Division and remainder by a power of two known for the launch: one shift or one AND on the
magnitude (``softcore._pow2_divmod``) instead of the shift-and-subtract loop of ``udivmod_into``.

The divisor is known either as an immediate (a launch constant such as ``blockDim.x``, substituted
before the expansion) or as a scalar parameter word (``Options.param_words``), whose mask and shift
the model computes itself (``d - 1``, ``31 - clz d``). A parameter word that is nonzero also lets
``codegen.nonzero`` drop the division's ``trap.divzero``.

Checked on the ISA simulator as the weights run it (``run_weights`` with the engine's options, the
2B shape's and the test shape's): every quotient and remainder is C's (Python on the integers:
truncation toward zero, the remainder with the dividend's sign), on dividends that include INT_MIN,
-1 and the largest words; the power-of-two launches run no loop and fewer passes than a launch of
the same kernel with a divisor that is not a power of two; a zero divisor still faults, and a
negative power of two (signed) takes the general path and is still exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import run_weights
from qwengpu.errors import ExecutionError
from qwengpu.model.configs import shape_named

SRC = """
extern "C" __global__ void k(const int* x, const unsigned* ux, int d, unsigned ud, int* out)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int a = x[i];
    unsigned u = ux[i];
    out[6 * i + 0] = a / d;
    out[6 * i + 1] = a % d;
    out[6 * i + 2] = (int)(u / ud);
    out[6 * i + 3] = (int)(u % ud);
    out[6 * i + 4] = a % (int)blockDim.x;
    out[6 * i + 5] = (int)(u / blockDim.x);
}
"""

X = [0, 1, -1, 7, -7, 8, -8, 9, -9, 2**31 - 1, -(2**31), 123456789, -123456789, 1 << 30, -(1 << 30), 100]
UX = [0, 1, 2**32 - 1, 7, 8, 9, 2**31, 2**31 - 1, 2**31 + 1, 3000000000, 15, 16, 17, 1 << 30, 255, 256]
BLOCK = 8
SHAPES = {name: Options(**unit_options(shape_named(name))) for name in ("2b", "test")}


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _want(d: int, ud: int) -> list[int]:
    out = []
    for a, u in zip(X, UX, strict=True):
        vals = [_cdiv(a, d), a - _cdiv(a, d) * d, u // ud, u % ud, a - _cdiv(a, BLOCK) * BLOCK, u // BLOCK]
        out += [v - (1 << 32) if v >= 1 << 31 else v for v in vals]
    return out


def _launch(tmp_path: Path, d: int, ud: int) -> tuple[Path, Path]:
    cu = tmp_path / "k.cu"
    cu.write_text(SRC)
    spec = tmp_path / f"k_{d}_{ud}.json"
    spec.write_text(json.dumps({"kernel": "k", "grid": len(X) // BLOCK, "block": BLOCK, "args": [
        {"name": "x", "type": "i32*", "data": X}, {"name": "ux", "type": "u32*", "data": UX},
        {"name": "d", "type": "i32", "value": d}, {"name": "ud", "type": "u32", "value": ud},
        {"name": "out", "type": "i32*", "size": 6 * len(X)}], "outputs": ["out"]}))
    return cu, spec


def _loops(res: object) -> int:
    return sum(ins.op == "bra" and ins.target is not None and ins.target <= pc
               for pc, ins in enumerate(res.program.code))  # type: ignore[attr-defined]


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("d, ud", [(8, 16), (1, 1), (1 << 30, 1 << 31), (2, 4)])
def test_power_of_two_divisors_are_exact_and_run_no_loop(tmp_path: Path, shape: str, d: int, ud: int) -> None:
    res = run_weights(*_launch(tmp_path, d, ud), options=SHAPES[shape])
    assert [int(v) for v in res.outputs["out"]] == _want(d, ud)
    assert _loops(res) == 0
    assert not any(i.op == "trap" for i in res.program.code)  # both divisors known nonzero


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_other_divisors_keep_the_loop_and_cost_more(tmp_path: Path, shape: str) -> None:
    """A divisor that is not a power of two (6, 10) and a negative one (-8, signed) take the
    general sequence: exact, with its loop, and more passes than the power-of-two launch."""
    pow2 = run_weights(*_launch(tmp_path, 8, 16), options=SHAPES[shape])
    for d, ud in ((6, 10), (-8, 16)):
        res = run_weights(*_launch(tmp_path, d, ud), options=SHAPES[shape])
        assert [int(v) for v in res.outputs["out"]] == _want(d, ud)
        assert _loops(res) > 0
        assert res.stats["passes"] > pow2.stats["passes"]


def test_a_zero_divisor_still_faults(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError, match="division by zero"):
        run_weights(*_launch(tmp_path, 0, 16), options=SHAPES["2b"])
    with pytest.raises(ExecutionError, match="division by zero"):
        run_weights(*_launch(tmp_path, 8, 0), options=SHAPES["2b"])
