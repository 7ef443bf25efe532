"""Identity rows (``add d, x, 0``, ``shl d, x, 0``, ``mul d, x, 1`` ...) become copies the allocator
drops (``rowfold.drop_identity_ops``) and rows of immediates fold (``rowfold.fold_constant_rows``),
for the program's own immediates only: a launch parameter that happens to be 0 keeps its row (the
model adds it), since the passes run before the parameter words become immediates. Checked on the
ISA simulator as the weights run it, outputs against Python."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from qwengpu.codegen.rowfold import drop_identity_ops
from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import run_weights
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
    from qwengpu.codegen.rowfold import _IDENTITY

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


GEOMETRY = """extern "C" __global__ void k(const int* in, int* out, int n) {
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {   // 32 first: never 0 on entry
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    int extra = blockDim.x > 100 ? 7 : 3;                            // a launch constant: 3
    if (t == 0) out[0] = s[0] * extra;
    if (n > 5) out[1 + t] = t;                                       // a parameter: stays a test
}"""


@pytest.mark.parametrize("shape", SHAPES)
def test_rows_of_launch_constants_fold_and_parameters_stay(shape: str, tmp_path: Path) -> None:
    """``blockDim.x / 2`` is a ``mov`` of 32, the loop's entry test on it and the branch over the
    loop go (``fold_constant_rows``), ``blockDim.x > 100`` is decided; ``n > 5`` on a parameter
    (6 here) stays a comparison the model makes. Outputs against Python; the folded program runs
    fewer passes than the one without folding."""
    x = [(i * 7919) % 1000 - 500 for i in range(64)]
    (tmp_path / "k.cu").write_text(GEOMETRY)
    (tmp_path / "k.json").write_text(json.dumps({"kernel": "k", "grid": 1, "block": 64, "args": [
        {"name": "in", "type": "i32*", "data": x}, {"name": "out", "type": "i32*", "size": 65},
        {"name": "n", "type": "i32", "value": 6}], "outputs": ["out"]}))
    runs = {f: run_weights(tmp_path / "k.cu", tmp_path / "k.json",
                           options=replace(SHAPES[shape], drop_identity_rows=f)) for f in (False, True)}
    for r in runs.values():
        assert list(r.outputs["out"]) == [sum(x) * 3, *range(64)]
    prog = runs[True].program
    assert not [x for x in prog.code if Imm(100) in x.s or x.op == "sel"]  # blockDim.x > 100 decided
    assert not [x for x in prog.code if x.op == "shr" and all(isinstance(y, Imm) for y in x.s)]
    assert [x for x in prog.code if x.op == "setp" and Imm(6) in x.s]  # n > 5: n's word in the row
    assert [x for x in runs[False].program.code if Imm(100) in x.s]
    assert runs[True].stats["passes"] < runs[False].stats["passes"]
