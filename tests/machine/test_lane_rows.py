"""One-lane rows (machine v2, issue 26): a ROM row of any op but a branch may run in ONE lane of
its lane group (the ``lane`` modifier; in the weights the row's guard fields say "no guard,
negated" and name the lane: ``circuit.register_file``, ``LANE_ROW``). The lowering's lane loops
(atomics, sub-word stores: ``softmem._lane_loop``) use them: in a lane group's copy of the loop,
each lane's turn is its own rows, without the loop's predicate, count and branch.

Checked here, on the ISA simulator as the weights run it: the same bits as the loop and as the
kernels' meaning (the integer and float dots, a histogram, float atomics in lane order), fewer
passes, the rows' shape (lane rows, no loop count, a CAS turn keeping its predicate); that a lane
row is a partial write for the register allocator (it kills nothing); and the ROM encoding with
its refusals. Every atomic kind in lane order with the rows: ``test_softmem.py``
(``test_atomic_all_lanes_one_address``); in the model: ``tests/machine_weights``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from qwengpu.codegen.regalloc import use_def
from qwengpu.codegen.soft import Options
from qwengpu.codegen.softmem import run_weights
from qwengpu.errors import MachineLimitError
from qwengpu.isa.instr import Imm, MInstr, P, R, validate

ROOT = Path(__file__).resolve().parents[2]
NATIVE = Options(native_mul=True, native_fadd=True, native_fmulf=True)
KERNELS = {  # name: (source, spec, the 2B shape's units, the outputs' meaning)
    "dot_int": (ROOT / "bench/kernels/dot_int.cu", None, False, {"out": [32]}),
    "dot": (ROOT / "kernels/dot.cu", None, True, {"out": [np.float32(32.0)]}),
    "histogram": (ROOT / "kernels/histogram.cu", ROOT / "kernels/histogram.json", False, None),
    "atomic_float_add": (ROOT / "kernels/atomic_float_add.cu", ROOT / "kernels/atomic_float_add.json", True,
                         None),
}


def _runs(name: str):
    cu, spec, native, _ = KERNELS[name]
    base = NATIVE if native else Options()
    return {rows: run_weights(cu, spec, options=replace(base, lane_rows=rows)) for rows in (False, True)}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_lane_turns_give_the_loops_bits_in_fewer_passes(name: str) -> None:
    """The same output bits as the lane loop and as the launch's expected values (the spec's, or
    the dot's [1, 2, 3] . [4, 5, 6] = 32), in fewer passes; the atomic's rows are one-lane rows and
    no loop count is left."""
    runs = _runs(name)
    for r in runs.values():
        assert not r.mismatches, r.mismatches
    for k, v in runs[True].outputs.items():
        assert v.tobytes() == runs[False].outputs[k].tobytes(), k
    want = KERNELS[name][3]
    if want is not None:
        for k, v in want.items():
            got = runs[True].outputs[k]
            assert got.tobytes() == np.asarray(v, dtype=got.dtype).tobytes()
    assert runs[True].stats["passes"] < runs[False].stats["passes"]
    code = runs[True].program.code
    lanes = {x.mod("lane") for x in code if x.op in ("ld", "st") and x.mod("lane") is not None}
    assert lanes == {0, 1, 2, 3}
    assert all(x.guard is None for x in code if x.op != "fmulf" and x.mod("lane") is not None)
    branches = [sum(x.op == "bra" for x in r.program.code) for r in (runs[True], runs[False])]
    assert branches[0] < branches[1]  # no loop branch per copy


def test_the_dots_atomic_costs_three_rows_a_lane() -> None:
    """The integer dot's ``atomicAdd`` (4 threads, one lane group): a load, an add and a store per
    lane, 12 rows where the loop ran 6 a lane (predicate, load, add, store, count, branch)."""
    runs = _runs("dot_int")
    rows = [x for x in runs[True].program.code if x.mod("lane") is not None]
    assert [x.op for x in rows] == ["ld", "add", "st"] * 4
    assert [x.mod("lane") for x in rows] == [j for j in range(4) for _ in range(3)]
    assert runs[False].stats["passes"] - runs[True].stats["passes"] >= 12


def test_a_cas_turn_keeps_its_predicate(tmp_path: Path) -> None:
    """``atomicCAS`` stores under ``old == compare`` and the lane's turn: a row cannot carry both a
    guard and a lane, so that turn keeps its predicate (``laneid == k``); still in lane order."""
    src = """
extern "C" __global__ void cas(unsigned* cell, unsigned* olds)
{
    unsigned t = threadIdx.x;
    olds[t] = atomicCAS(cell, t, t + 1);
}
"""
    import json

    (tmp_path / "cas.cu").write_text(src)
    (tmp_path / "cas.json").write_text(json.dumps({
        "kernel": "cas", "grid": 1, "block": 8,
        "args": [{"name": "cell", "type": "u32*", "data": [0]}, {"name": "olds", "type": "u32*", "size": 8}],
        "outputs": ["cell", "olds"]}))
    r = run_weights(tmp_path / "cas.cu", tmp_path / "cas.json", options=Options(lane_rows=True))
    assert r.outputs["olds"].tolist() == list(range(8)) and r.outputs["cell"].tolist() == [8]
    code = r.program.code
    assert any(x.op == "st" and x.guard is not None for x in code)
    assert not any(x.mod("lane") is not None for x in code)
    loop = run_weights(tmp_path / "cas.cu", tmp_path / "cas.json")
    assert loop.outputs["olds"].tobytes() == r.outputs["olds"].tobytes()
    assert r.stats["passes"] < loop.stats["passes"]  # unrolled: no count, no loop branch


def test_a_lane_row_is_a_partial_write_for_the_allocator() -> None:
    """The other lanes keep the register: its old value flows through (a use), nothing is killed;
    a row without a lane kills. (Were it a kill, the allocator could give the register to a value
    the other lanes still hold.)"""
    row = MInstr("add", (R(1),), (R(2), Imm(1)), {"lane": 2})
    uses, kills, defs = use_def(row, R)
    assert uses == {1, 2} and kills == set() and defs == {1}
    uses, kills, _ = use_def(replace(row, m={}), R)
    assert uses == {2} and kills == {1}
    pset = MInstr("setp", (P(1),), (R(2), Imm(3)), {"cmp": "eq", "sign": "u", "lane": 0})
    assert use_def(pset, P)[1] == set()
    validate(row)
    with pytest.raises(ValueError, match="no modifier 'lane'"):
        validate(MInstr("bra", (), (), {"lane": 0}, target=0))


def test_the_rom_row_names_the_lane_in_its_guard_fields() -> None:
    """gen 0, gneg 1 (never an unguarded row's), gidx the lane; a machine without one-lane rows,
    and a lane row that also has a guard, are refused by name."""
    import test_fmulf as tf

    from qwengpu.machine.circuit import OP, MachineShape
    from qwengpu.runtime.engine import encode_program

    prog = tf._program([MInstr("add", (R(1),), (R(2), Imm(5)), {"lane": 2}), MInstr("exit", (), ())])
    shape = MachineShape(lane_rows=True)
    row = encode_program(prog, bytes(64), (32, 1, 1), shape)[0]
    f = {n: tf._field(row, n) for n in ("op", "gen", "gneg", "gidx", "dst", "ra", "imm", "target")}
    assert f == {"op": OP["add"], "gen": 0, "gneg": 1, "gidx": 2, "dst": 1, "ra": 2, "imm": 5, "target": 0}
    plain = encode_program(replace(prog, code=[replace(prog.code[0], m={}), prog.code[1]]), bytes(64),
                           (32, 1, 1), shape)[0]
    assert (tf._field(plain, "gen"), tf._field(plain, "gneg"), tf._field(plain, "gidx")) == (0, 0, 0)
    with pytest.raises(MachineLimitError, match="no one-lane rows"):
        encode_program(prog, bytes(64), (32, 1, 1), MachineShape())
    guarded = replace(prog.code[0], guard=P(1))
    with pytest.raises(MachineLimitError, match="carries no guard"):
        encode_program(replace(prog, code=[guarded, prog.code[1]]), bytes(64), (32, 1, 1), shape)


def test_the_groups_copies_share_one_routine_of_turns_on_a_small_launch(tmp_path: Path) -> None:
    """``histogram`` (2 blocks of 64 threads: 8 lane groups a warp): every group's copy calls one
    routine holding the four turns once (the ROM: fewer rows than the loop's copies); a launch of
    32 blocks of 256 threads, where the calls would cost more than the rows, keeps a copy of the
    turns per group. Both give the interpreter's bits."""
    import json

    runs = _runs("histogram")
    code = runs[True].program.code
    calls = [x for x in code if x.op == "call"]
    assert len(calls) == 8 and len({x.target for x in calls}) == 1
    entry = calls[0].target
    assert entry < code.index(calls[0])  # below the copies: min-PC finishes a group's call first
    body = code[entry : next(pc for pc in range(entry, len(code)) if code[pc].op == "ret")]
    assert [x.mod("lane") for x in body if x.op == "st"] == [0, 1, 2, 3]
    assert sum(x.op == "st" and x.mod("lane") is not None for x in code) == 4
    assert len(code) < len(runs[False].program.code)

    src = """
extern "C" __global__ void hist(const int* data, int* bins)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&bins[data[i] & 7], 1);
}
"""
    n = 32 * 256
    data = [(i * 2654435761) >> 7 & 0xFFFF for i in range(n)]
    (tmp_path / "hist.cu").write_text(src)
    (tmp_path / "hist.json").write_text(json.dumps({
        "kernel": "hist", "grid": 32, "block": 256,
        "args": [{"name": "data", "type": "i32*", "data": data}, {"name": "bins", "type": "i32*", "size": 8}],
        "outputs": ["bins"]}))
    big = run_weights(tmp_path / "hist.cu", tmp_path / "hist.json", options=Options(lane_rows=True))
    assert not any(x.op == "call" for x in big.program.code)
    assert sum(x.op == "st" and x.mod("lane") is not None for x in big.program.code) == 32
    assert big.outputs["bins"].tolist() == [sum(1 for v in data if v & 7 == b) for b in range(8)]
