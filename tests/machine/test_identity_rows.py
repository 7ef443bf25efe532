"""Identity rows (``add d, x, 0``, ``shl d, x, 0``, ``mul d, x, 1`` ...) become copies the allocator
drops (``softmem.drop_identity_ops``), for the program's own immediates only: a launch parameter
that happens to be 0 keeps its row (the model adds it), since the pass runs before the parameter
words become immediates. Checked on the ISA simulator as the weights run it, outputs against
Python."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import drop_identity_ops, run_weights
from qwengpu.isa.instr import Imm, MInstr, R
from qwengpu.model.configs import shape_named

SHAPES = {name: Options(**unit_options(shape_named(name))) for name in ("2b", "test")}
KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _identities(prog) -> int:
    return sum(1 for x in prog.code if x.guard is None and (
        (x.op in ("add", "or", "xor") and Imm(0) in x.s)
        or (x.op in ("sub", "shl", "shr") and x.s[1:] == (Imm(0),))
        or (x.op == "mul" and Imm(1) in x.s)))


def test_each_identity_form_becomes_a_copy() -> None:
    from qwengpu.codegen.softmem import _IDENTITY

    for op, (pos, unit) in _IDENTITY.items():
        for k in pos:
            s = [R(1), R(1)]
            s[k] = Imm(unit)
            ins = MInstr(op, (R(2),), tuple(s))
            prog = replace(_empty(), code=[ins])
            (out,) = drop_identity_ops(prog).code
            assert (out.op, out.d, out.s) == ("mov", (R(2),), (R(1),)), (op, k)
    kept = [MInstr("sub", (R(2),), (Imm(0), R(1))), MInstr("add", (R(2),), (R(1), Imm(1))),
            MInstr("addw", (R(2),), (R(1), Imm(0)), {"sa": "u", "sb": "s"})]
    assert drop_identity_ops(replace(_empty(), code=kept)).code == kept


def _empty():
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file
    from qwengpu.ptx.parser import parse_ptx

    cu = KERNELS / "vec_add.cu"
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
    return lower_kernel(module, "vec_add", [True, True, True, False])


@pytest.mark.parametrize("shape", SHAPES)
def test_shared_memorys_zero_base_costs_no_row(shape: str) -> None:
    cu, spec = KERNELS / "smem_reduce.cu", KERNELS / "smem_reduce.json"
    runs = {f: run_weights(cu, spec, options=replace(SHAPES[shape], drop_identity_rows=f))
            for f in (False, True)}
    for r in runs.values():
        assert r.passed
    assert _identities(runs[False].program) > 0 == _identities(runs[True].program)
    assert runs[True].stats["passes"] < runs[False].stats["passes"]


PARAM = """extern "C" __global__ void k(const int* in, int* out, int off) {
    int i = threadIdx.x;
    out[i] = (in[i] + off) << off;
}"""


@pytest.mark.parametrize("shape", SHAPES)
def test_a_parameter_that_is_zero_keeps_its_rows(shape: str, tmp_path: Path) -> None:
    x = [i * 37 - 300 for i in range(32)]
    (tmp_path / "k.cu").write_text(PARAM)
    (tmp_path / "k.json").write_text(json.dumps({"kernel": "k", "grid": 1, "block": 32, "args": [
        {"name": "in", "type": "i32*", "data": x}, {"name": "out", "type": "i32*", "size": 32},
        {"name": "off", "type": "i32", "value": 0}], "outputs": ["out"]}))
    r = run_weights(tmp_path / "k.cu", tmp_path / "k.json", options=SHAPES[shape])
    assert list(r.outputs["out"]) == x
    assert _identities(r.program) == 2  # the add and the shift by the parameter's 0, in the rows
