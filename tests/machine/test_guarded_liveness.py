"""Liveness that knows a guarded write whose register is only read under the same guard
(``regalloc._covered``; issue 26's predicate-aware liveness): such a write kills the register, so
it is not zeroed at entry and its live range ends earlier. The lanes whose guard is false keep the
old value, but none of them reads it: every later read in the block carries the guard, and the
register is dead where the block ends (the greatest fixed point over the program).

What could break: calling a value dead that some lane reads. The negative cases below are the
reads that must keep the value live (a read without the guard, under the other sense, after the
guard is rewritten, in the next block); the launches compare the allocated program on the ISA
simulator with the reference interpreter, whose registers start at zero.
"""

from __future__ import annotations

import pytest
from machine_helpers import assert_same, both

from qwengpu.codegen.regalloc import liveness
from qwengpu.isa.instr import Imm, MInstr, P, R

G = P(0)
NOT_G = P(0, neg=True)


def _setp(p: int = 0) -> MInstr:
    return MInstr("setp", (P(p),), (R(9), Imm(1)), {"cmp": "eq", "type": "u"})


def _live_at_entry(code: list[MInstr], reg: int) -> bool:
    live_in, _ = liveness(code, R)
    return bool(live_in[0] >> reg & 1)


def test_a_register_written_and_read_under_one_guard_is_not_live_at_entry() -> None:
    """The atomic lane loop's shape: ``@p ld r1; @p add r2, r1, 1; @p st r2`` (and a loop back to
    the setp): neither r1 nor r2 is read by a lane that did not write it."""
    code = [
        MInstr("mov", (R(9),), (Imm(0),)),
        _setp(),  # 1: the loop head
        MInstr("ld", (R(1),), (R(9),), {"space": "global", "size": 4}, G),
        MInstr("add", (R(2),), (R(1), Imm(1)), {}, G),
        MInstr("st", (), (R(9), R(2)), {"space": "global", "size": 4}, G),
        MInstr("add", (R(9),), (R(9), Imm(1))),
        MInstr("bra", (), (), {}, NOT_G, 1),
        MInstr("exit"),
    ]
    assert not _live_at_entry(code, 1) and not _live_at_entry(code, 2)


@pytest.mark.parametrize(
    "reader",
    [
        [MInstr("add", (R(2),), (R(1), Imm(1)))],  # no guard: every lane reads r1
        [MInstr("add", (R(2),), (R(1), Imm(1)), {}, NOT_G)],  # the other sense
        [_setp(), MInstr("add", (R(2),), (R(1), Imm(1)), {}, G)],  # the guard rewritten first
        [MInstr("bra", (), (), {}, None, 4), MInstr("add", (R(2),), (R(1), Imm(1)), {}, G)],  # next block
        [MInstr("mov", (R(1),), (Imm(3),), {}, P(1)), MInstr("add", (R(2),), (R(1), Imm(1)), {}, G)],
    ],
    ids=["unguarded", "other-sense", "guard-rewritten", "next-block", "rewritten-under-another-guard"],
)
def test_reads_that_keep_the_old_value_live(reader: list[MInstr]) -> None:
    code = [_setp(), _setp(1), MInstr("mov", (R(1),), (Imm(7),), {}, G), *reader,
            MInstr("st", (), (R(9), R(2)), {"space": "global", "size": 4}), MInstr("exit")]
    assert _live_at_entry(code, 1)


PTX = """
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 2;
    @%p1 mov.u32 %r2, 40;
    @%p1 add.u32 %r2, %r2, %r1;
    {tail}
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"""


@pytest.mark.parametrize(
    "tail",
    [
        "@%p1 add.u32 %r3, %r2, 1;\n    @!%p1 mov.u32 %r3, 5;",  # read under the guard only
        "add.u32 %r3, %r2, 1;",  # every lane reads r2: lanes 2, 3 read the interpreter's zero
        # lane 2 reads a value it never wrote: 0
        "setp.lt.u32 %p1, %r1, 3;\n    @%p1 add.u32 %r3, %r2, 1;\n    @!%p1 mov.u32 %r3, 5;",
    ],
    ids=["same-guard", "unguarded-read", "guard-rewritten"],
)
def test_launches_equal_the_interpreter(tail: str) -> None:
    """Four threads; r2 is written under tid < 2 and read under the same guard, by every lane, or
    under a rewritten guard that lets lane 2 read a value it never wrote (zero in the interpreter):
    the allocated program's outputs equal the interpreter's bit for bit in each case."""
    spec = {"kernel": "k", "grid": 2, "block": 4, "args": [{"name": "out", "type": "u32*", "size": 4}],
            "outputs": ["out"]}
    ref, got, _, _ = both(PTX.replace("{tail}", tail), spec)
    assert_same(ref, got)
