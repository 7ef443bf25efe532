"""Launch words and special registers read by their readers (machine v2, issue 26): a kernel's
parameter words and buffer windows ride in the ROM rows that read them as immediates
(``softmem.fold_param_loads``: a ``ld.param`` is the ``mov`` of its word that the ROM row is
anyway; register allocation's constant propagation then puts the word into its readers), and a
thread or block index is read by its readers through the row's ``a_sr`` field
(``softmem.fold_special_reads``, ``isa.instr.SR``). Neither computes anything on the host: the
rows still compute every value from the words. Also the zero at entry that one-lane rows no
longer need (``regalloc._entry_reads``).

Checked here on the ISA simulator as the weights run it: the same bits as without the folds and
as the kernels' meaning, fewer passes, a launch's own word in its rows (another ``n``, another
immediate and another result), the ROM fields and the refusal of a special register as operand
b. In the model (test shape): ``tests/machine_weights/test_machine_weights.py``
(``test_launch_words_and_thread_indices_ride_in_the_rows``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from qwengpu.codegen.regalloc import _entry_reads
from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import _as_operand_a, run_weights
from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import SR, Imm, MInstr, P, R
from qwengpu.model.configs import shape_named

ROOT = Path(__file__).resolve().parents[2]
UNITS = unit_options(shape_named("2b"))
PLAIN = Options(**{**UNITS, "special_operands": False})
FOLDED = Options(**UNITS)
CORPUS = ["vec_add", "saxpy", "matmul", "histogram", "scan_hillis_steele", "shfl_reduce", "smem_reduce",
          "gcd", "transpose_2d", "int64_arith"]

INDEX_SRC = """
extern "C" __global__ void idx(int n, int* out)
{
    int i = threadIdx.x + 8 * blockIdx.x;
    int j = threadIdx.x;
    out[i] = (n > j ? 100 : 200) + (j - n) * 3 + (j ^ n) + min(j, n) + (int)blockIdx.x * 1000;
}
"""


def _index_kernel(tmp_path: Path, n: int) -> tuple[Path, Path]:
    (tmp_path / "idx.cu").write_text(INDEX_SRC)
    spec = tmp_path / f"idx_{n}.json"
    spec.write_text(json.dumps({
        "kernel": "idx", "grid": 2, "block": 8,
        "args": [{"name": "n", "type": "i32", "value": n}, {"name": "out", "type": "i32*", "size": 16}],
        "outputs": ["out"]}))
    return tmp_path / "idx.cu", spec


def _index_meaning(n: int) -> list[int]:
    return [(100 if n > j else 200) + (j - n) * 3 + (j ^ n) + min(j, n) + b * 1000
            for b in range(2) for j in range(8)]


@pytest.mark.parametrize("name", CORPUS)
def test_the_folds_keep_the_bits_in_fewer_passes(name: str) -> None:
    """Corpus kernels: outputs bit for bit those without the folds and the spec's expected values
    (from the kernels' meaning); never more passes, and fewer where a word or an index was read."""
    cu, spec = ROOT / "kernels" / f"{name}.cu", ROOT / "kernels" / f"{name}.json"
    folded = run_weights(cu, spec, options=FOLDED)
    plain = run_weights(cu, spec, options=PLAIN, fold_params=False)
    assert folded.passed and plain.passed
    for k, v in plain.outputs.items():
        assert folded.outputs[k].tobytes() == v.tobytes(), k
    assert folded.stats["passes"] <= plain.stats["passes"]
    assert not any(x.op == "ld" and x.mod("space") == "param" for x in folded.program.code)


def test_a_launchs_words_ride_in_its_rows(tmp_path: Path) -> None:
    """``n`` is an immediate of the rows that read it (no ``ld.param`` left): a launch with another
    ``n`` has another immediate there, and the model-side result follows the meaning for both."""
    cu, _ = _index_kernel(tmp_path, 5)
    for n in (5, 3):
        r = run_weights(cu, tmp_path / f"idx_{n}.json" if n == 5 else _index_kernel(tmp_path, n)[1],
                        options=FOLDED)
        assert r.outputs["out"].astype(np.int64).tolist() == _index_meaning(n)
        code = r.program.code
        assert not any(x.op == "ld" and x.mod("space") == "param" for x in code)
        assert any(Imm(n) in x.s for x in code if x.op in ("setp", "sub", "xor", "min"))


def test_thread_and_block_indices_are_read_as_operand_a(tmp_path: Path) -> None:
    """No ``s2r`` row is left for the index kernel: its readers select ``%tid.x`` / ``%ctaid.x``
    as operand a, never as operand b; bits as without the fold, in fewer passes."""
    cu, spec = _index_kernel(tmp_path, 5)
    folded = run_weights(cu, spec, options=FOLDED)
    plain = run_weights(cu, spec, options=PLAIN)
    assert folded.outputs["out"].astype(np.int64).tolist() == _index_meaning(5)
    assert plain.outputs["out"].tobytes() == folded.outputs["out"].tobytes()
    code = folded.program.code
    assert not any(x.op == "s2r" for x in code)
    readers = [x for x in code if any(isinstance(y, SR) for y in x.s)]
    assert readers and all(isinstance(x.s[0], SR) and not any(isinstance(y, SR) for y in x.s[1:])
                           for x in readers)
    assert {x.s[0] for x in readers} == {SR("tid.x"), SR("ctaid.x")}
    assert any(x.op == "s2r" for x in plain.program.code)
    assert folded.stats["passes"] < plain.stats["passes"]


def test_a_reader_takes_the_index_as_operand_a_or_not_at_all() -> None:
    """Operand a as it is; operand b swapped in where the op commutes, with the comparison mirrored
    (``x > v`` is ``v < x``) or the selection's predicate negated; never where it cannot be a
    (a difference's b, a second special register, a memory address)."""
    v, x, sr, p = R(9), R(1), SR("tid.x"), P(2)
    assert _as_operand_a(MInstr("add", (R(0),), (x, v)), v, sr).s == (sr, x)
    setp = _as_operand_a(MInstr("setp", (p,), (x, v), {"cmp": "gt", "sign": "s"}), v, sr)
    assert setp.s == (sr, x) and setp.mod("cmp") == "lt"
    sel = _as_operand_a(MInstr("sel", (R(0),), (x, v, p)), v, sr)
    assert sel.s == (sr, x, p.inv())
    assert _as_operand_a(MInstr("sub", (R(0),), (x, v)), v, sr) is None
    assert _as_operand_a(MInstr("add", (R(0),), (SR("ctaid.x"), v)), v, sr) is None
    assert _as_operand_a(MInstr("add", (R(0),), (v, v)), v, sr) is None
    assert _as_operand_a(MInstr("ld", (R(0),), (v,), {"space": "global", "size": 4}), v, sr) is None


def test_the_rom_row_selects_the_special_register() -> None:
    """The encoder puts the index in the row's ``a_sr`` field (``circuit.SR_CODES``); a launch
    constant (``ntid``) as an immediate; a special register as operand b is refused by name."""
    import test_fmulf as tf

    from qwengpu.machine.circuit import OP, SR_CODES
    from qwengpu.runtime.engine import encode_program

    shape = shape_named("2b")
    prog = tf._program([MInstr("add", (R(1),), (SR("ctaid.x"), Imm(7))), MInstr("exit", (), ())])
    row = encode_program(prog, bytes(64), (32, 1, 1), shape)[0]
    assert {n: tf._field(row, n) for n in ("op", "a_sr", "a_imm", "imm", "dst")} == {
        "op": OP["add"], "a_sr": SR_CODES["ctaid"], "a_imm": 0, "imm": 7, "dst": 1}
    bad = replace(prog, code=[MInstr("add", (R(1),), (R(2), SR("tid.x"))), prog.code[1]])
    with pytest.raises(MachineLimitError, match="operand %tid.x"):
        encode_program(bad, bytes(64), (32, 1, 1), shape)


def test_one_lane_rows_need_no_zero_at_entry() -> None:
    """A register each lane reads only after its own one-lane row wrote it (an atomic's turns) is
    not read before written; one that a full row reads after only some lanes wrote it is."""
    turns = [x for j in range(4) for x in (
        MInstr("ld", (R(0),), (Imm(16),), {"space": "global", "size": 4, "lane": j}),
        MInstr("add", (R(1),), (R(0), Imm(1)), {"lane": j}))]
    assert _entry_reads([*turns, MInstr("exit", (), ())]) & 1 == 0
    partial = turns[:6] + [MInstr("add", (R(2),), (R(0), Imm(1))), MInstr("exit", (), ())]
    assert _entry_reads(partial) & 1 == 1
    dot = run_weights(ROOT / "bench/kernels/dot_int.cu", options=FOLDED)
    assert dot.outputs["out"].tolist() == [32]
    assert not any(x.op == "mov" and x.s == (Imm(0),) for x in dot.program.code[:1])

