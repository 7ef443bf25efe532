"""The instruction set's table and encoding: every instruction of allocated corpus programs
validates and encodes into small fixed fields (registers < 32, predicates < 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwengpu.codegen.pipeline import compile_machine
from qwengpu.isa.instr import OPCODES, OPERAND_IMM, SPECS, Imm, MInstr, R, encode, op_table, validate

KERNELS = Path(__file__).resolve().parents[2] / "kernels"
SAMPLE = ["layernorm", "shfl_xor_butterfly", "div_s64", "atomic_cas", "sin_cos", "byte_perm", "vote"]


def test_op_table_is_small() -> None:
    assert len(OPCODES) < 128  # a 7-bit opcode (6 bits until fmulf and frange: isa/instr.py)
    rows = op_table()
    assert {r[0] for r in rows} == set(SPECS)
    assert all(bits <= 12 for _, _, _, _, bits, _ in rows)


@pytest.mark.parametrize("name", SAMPLE)
def test_allocated_programs_encode(name: str) -> None:
    prog = compile_machine(KERNELS / f"{name}.cu", name)
    assert prog.allocated and prog.nregs <= 32 and prog.npreds <= 8
    for ins in prog.code:
        validate(ins)
        words = encode(ins)
        assert words[0] == OPCODES[ins.op]
        nops = len(ins.d) + len(ins.s)
        fields = words[3 : 3 + nops]
        assert all(0 <= f < 128 for f in fields)
        for x, f in zip((*ins.d, *ins.s), fields, strict=True):
            if isinstance(x, R):
                assert f < 32
            elif f != OPERAND_IMM:
                assert 32 <= f & 63 <= 40


def test_cross_lane_destination_must_differ() -> None:
    with pytest.raises(ValueError, match="cross-lane"):
        validate(MInstr("shfl", (R(1),), (R(1), R(2), R(3)), {"mode": "down"}))


@pytest.mark.parametrize("name", ["layernorm", "byte_perm", "int64_arith"])
def test_one_immediate_per_instruction_option(name: str) -> None:
    """``allocate(..., max_immediates=1)`` serves decoders with a single immediate field."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.regalloc import allocate
    from qwengpu.cuda import compile_file
    from qwengpu.isa.sim import MachineSim
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.runner import COMPILE_OPTIONS, run_kernel
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import bind, load_spec, read_outputs

    cu, js = KERNELS / f"{name}.cu", KERNELS / f"{name}.json"
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS))
    spec = load_spec(js)
    fn = _find_kernel(module, spec.kernel)
    prog = allocate(lower_kernel(module, fn.name, [a.is_ptr for a in spec.args]), max_immediates=1)
    for ins in prog.code:
        srcs = ins.s[1:] if ins.op in ("ld", "st", "atom") else ins.s
        assert sum(isinstance(x, Imm) for x in srcs) <= 1, str(ins)
    bound = bind(spec, inline_calls(module, fn))
    MachineSim(prog).launch(
        spec.grid, spec.block, bound.param_bytes, bound.gmem, dynamic_shared=spec.shared_bytes
    )
    got = read_outputs(spec, bound.gmem)
    ref = run_kernel(cu, js).outputs
    assert all(got[k].tobytes() == ref[k].tobytes() for k in ref)
