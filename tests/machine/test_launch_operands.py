"""Launch words and special registers read by their readers (machine v2, issue 26): a kernel's
parameter words and buffer windows ride in the ROM rows that read them as immediates
(``softmem.fold_param_loads``: a ``ld.param`` is the ``mov`` of its word that the ROM row is
anyway; register allocation's constant propagation then puts the word into its readers), and a
thread or block index is read by its readers through the row's ``a_sr`` field
(``softmem.fold_special_reads``, ``isa.instr.SR``); a buffer's window plus an index addresses
the memory row directly (``softmem.fold_address_offsets``: the window in the row's ``off``). None
computes anything on the host: the rows still compute every value from the words. Also the zero
at entry that one-lane rows no longer need (``regalloc._entry_reads``), a branch over a few rows
made those rows guarded (``softmem.guard_short_skips``), and the zeros a one-block launch's
registers already hold (``softmem.drop_first_zeros``).

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
FOLDED = Options(**UNITS)
NO_SKIPS = replace(FOLDED, guard_short_skips=False)
PLAIN = replace(NO_SKIPS, special_operands=False)
CORPUS = ["vec_add", "saxpy", "matmul", "histogram", "scan_hillis_steele", "shfl_reduce", "smem_reduce",
          "gcd", "transpose_2d", "int64_arith", "scan_blelloch", "loop_break", "device_call"]

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
    """Corpus kernels: outputs bit for bit those without the folds and guarded skips and the
    spec's expected values (from the kernels' meaning); the folds alone never take more passes.
    (The guarded skips may: ``scan_blelloch``'s unrolled ``if (t < d)`` is skipped by most groups.)"""
    cu, spec = ROOT / "kernels" / f"{name}.cu", ROOT / "kernels" / f"{name}.json"
    folded = run_weights(cu, spec, options=FOLDED)
    plain = run_weights(cu, spec, options=PLAIN, fold_params=False)
    assert folded.passed and plain.passed
    for k, v in plain.outputs.items():
        assert folded.outputs[k].tobytes() == v.tobytes(), k
    assert run_weights(cu, spec, options=NO_SKIPS).stats["passes"] <= plain.stats["passes"]
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



def _mem(op: str, a: object, *rest: object, d: tuple = ()) -> MInstr:
    return MInstr(op, d, (a, *rest), {"space": "global", "size": 4, "amode": "s", "base": 0x7F00000000})


def test_a_window_plus_an_index_addresses_the_row_directly() -> None:
    """``addw r1, window, r2`` read only as the address of the loads and stores after it -> they
    address ``r2`` with the window in ``off``; not when a row between rewrites ``r2``, when a branch
    can enter between, or when the sum is also read as a value."""
    import test_fmulf as tf

    from qwengpu.codegen.softmem import fold_address_offsets

    addw = MInstr("addw", (R(1),), (Imm(0x1D0), R(2)), {"sa": "s", "sb": "s"})
    ld, st = _mem("ld", R(1), d=(R(3),)), _mem("st", R(1), R(3))
    done = fold_address_offsets(tf._program([addw, ld, st, MInstr("exit", (), ())])).code
    assert [x.op for x in done] == ["ld", "st", "exit"]
    assert all(x.s[0] == R(2) and x.mod("off") == 0x1D0 for x in done[:2])
    neg = replace(addw, s=(Imm(-8), R(2)))
    assert fold_address_offsets(tf._program([neg, ld, MInstr("exit", (), ())])).code[0].mod("off") == -8
    for code in ([addw, MInstr("add", (R(2),), (R(2), Imm(1))), ld, MInstr("exit", (), ())],
                 [addw, MInstr("bra", (), (), target=2), ld, MInstr("exit", (), ())],
                 [addw, ld, _mem("st", R(4), R(1)), MInstr("exit", (), ())]):
        assert fold_address_offsets(tf._program(code)).code[0].op == "addw"


def test_an_index_past_the_buffer_still_faults_with_its_thread(tmp_path: Path) -> None:
    """With the window in the row's ``off``, an index one past the buffer is still reported as the
    interpreter reports it (thread and address; the engine's bounds watch forms the same address)."""
    from qwengpu.errors import ExecutionError

    (tmp_path / "oob.cu").write_text("""
extern "C" __global__ void oob(const int* a, int* out)
{
    int i = threadIdx.x;
    out[i] = a[i + 4];
}
""")
    (tmp_path / "oob.json").write_text(json.dumps({
        "kernel": "oob", "grid": 1, "block": 4,
        "args": [{"name": "a", "type": "i32*", "data": [1, 2, 3, 4, 5, 6, 7]},
                 {"name": "out", "type": "i32*", "size": 4}], "outputs": ["out"]}))
    with pytest.raises(ExecutionError, match=r"past the end of buffer 'a'(.|\n)*thread \(3, 0, 0\)"):
        run_weights(tmp_path / "oob.cu", tmp_path / "oob.json", options=FOLDED)


def test_the_integer_dots_guard_runs_as_guarded_rows() -> None:
    """``int p = i < n ? a[i] * b[i] : 0``: the branch over the four rows goes (its pass, and the
    MASK its split group paid), the rows are guarded by the compare, and the zero ``p`` starts with
    is the register's own (one block): the same 32 in two passes fewer."""
    cu = ROOT / "bench/kernels/dot_int.cu"
    now = run_weights(cu, options=FOLDED)
    before = run_weights(cu, options=NO_SKIPS)
    assert now.outputs["out"].tolist() == before.outputs["out"].tolist() == [32]
    code = now.program.code
    assert not any(x.op == "bra" for x in code)
    assert [x.op for x in code if x.guard is not None] == ["mulw", "ld", "ld", "mul"]
    assert not any(x.op == "mov" and x.s == (Imm(0),) for x in code)
    assert any(x.op == "mov" and x.s == (Imm(0),) for x in before.program.code)
    assert now.stats["passes"] == before.stats["passes"] - 2


def test_a_skip_stays_a_branch_where_guarding_would_cost_more() -> None:
    """Not inside a loop (groups that all skip would pass the rows every trip), not on an equality
    (``if (tid == 0)``), not over a call, a row already guarded, one that writes the predicate, or
    more than ``SKIP_ROWS`` rows, and not when a branch from elsewhere lands inside."""
    import test_fmulf as tf

    from qwengpu.codegen.softmem import SKIP_ROWS, guard_short_skips

    p = P(1)
    setp = MInstr("setp", (p,), (R(2), Imm(5)), {"cmp": "lt", "sign": "s"})
    body = [MInstr("add", (R(3),), (R(2), Imm(1))), MInstr("add", (R(4),), (R(3), Imm(2)))]
    skip = MInstr("bra", (), (), guard=p, target=4)
    end = [MInstr("exit", (), ())]
    done = guard_short_skips(tf._program([setp, skip, *body, *end])).code
    assert [x.op for x in done] == ["setp", "add", "add", "exit"]
    assert all(x.guard == p.inv() for x in done[1:3])

    def kept(code: list[MInstr]) -> bool:
        return any(x.op == "bra" and x.guard is not None for x in guard_short_skips(tf._program(code)).code)

    assert kept([setp, skip, *body, MInstr("bra", (), (), target=0), *end])  # a loop around it
    assert kept([replace(setp, m={"cmp": "eq", "sign": "s"}), skip, *body, *end])
    assert kept([setp, skip, body[0], replace(body[1], guard=P(2)), *end])
    assert kept([setp, skip, body[0], MInstr("setp", (p,), (R(3), Imm(0)), {"cmp": "lt", "sign": "s"}), *end])
    assert kept([setp, MInstr("bra", (), (), target=3), replace(skip, target=5), *body, *end])  # lands inside
    long = [MInstr("add", (R(3),), (R(3), Imm(k))) for k in range(SKIP_ROWS + 1)]
    assert kept([setp, replace(skip, target=2 + len(long)), *long, *end])


def test_only_a_first_zero_of_a_one_pass_row_goes() -> None:
    """``drop_first_zeros``: the machine's registers start at 0, so a ``mov r, 0`` that is the
    first write of ``r`` and runs once per thread is the register's own value; a zero after
    another write of ``r``, or inside a loop, stays (the engine applies it to launches of one
    machine block only: registers persist across blocks)."""
    import test_fmulf as tf

    from qwengpu.codegen.softmem import drop_first_zeros

    zero = MInstr("mov", (R(1),), (Imm(0),))
    use = MInstr("add", (R(2),), (R(1), Imm(3)))
    end = MInstr("exit", (), ())
    assert [x.op for x in drop_first_zeros(tf._program([zero, use, end])).code] == ["add", "exit"]
    again = [MInstr("mov", (R(1),), (Imm(7),)), use, zero, use, end]
    assert len(drop_first_zeros(tf._program(again)).code) == 5
    loop = [zero, use, MInstr("bra", (), (), guard=P(1), target=0), end]
    assert len(drop_first_zeros(tf._program(loop)).code) == 4
