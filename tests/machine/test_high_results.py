"""HIGH tokens (``machine/protocol.py``): a lane result from 256 to 2^18 is its chunk 0 and one HIGH
token carrying bits 11..17, two tokens instead of three chunks; the token commits the register.

Run in the circuit itself: on the test shape the cached model writes the trace and the compiler's
exact evaluator checks every position (``test_pages._trace``), on the 2B shape the evaluator writes
it token by token (slow). The boundaries: 255 (SHORT), 256 and 2^18 - 1 (HIGH), 2^18 (three
chunks), through the read port (a load) and through the datapath (an add), and a HIGH-written value
read again as an operand. HIGH(0, 0) and HIGH(1, 127) come before the passes that follow: had they
reached the thread count (NTHREADS, whose argument's bit-9 form HIGH is), the next passes would run
on no lane or on groups that do not exist.
"""

from __future__ import annotations

import pytest
from test_pages import _trace, results_by_pc

from qwengpu.isa.instr import Imm, MInstr, R
from qwengpu.machine import circuit as M
from qwengpu.machine import protocol as P
from qwengpu.model.configs import shape_for
from qwengpu.runtime.engine import PassResults, decode_dump, encode_program, machine_config, token_census
from qwengpu.simt.memory import GLOBAL_BASE

G = {"space": "global", "size": 4, "base": GLOBAL_BASE}
M32 = (1 << 32) - 1


def test_high_tokens_decode_and_read_back():
    """HIGH's id is NTHREADS' argument with bit 9 set; the host reads lane, bits and the value."""
    t = P.high(2, 0x55)
    assert P.decode(t) == P.Token("HIGH", 2, 0x55)
    assert P.decode(P.ctl(P.NTHREADS, 64)) == P.Token("NTHREADS", 64)  # the launch's count stays
    assert str(P.decode(t)) == "HIGH(lane=2,55)"
    res = PassResults()
    for tk in (P.data(6, 0x7AB), P.high(2, 0x55), P.data(0, 3), P.data(1, 4), P.data(2, 5)):
        res.take(P.decode(tk))
    assert res.values([0, 2]) == {2: 0x55 << 11 | 0x7AB, 0: 3 | 4 << 11 | 5 << 22}
    assert token_census([P.pass_(1), P.data(6, 1), P.high(2, 1), P.ctl(P.HALT)])["result"] == 2
    with pytest.raises(AssertionError):
        P.high(0, 128)  # bits 11..17 only: 2^18 and more take three chunks


def _program(hi: int):
    """Lane x loads word hi + x (256, 2^18 - 1, 2^18, 255), forms (x << 16) + 255 (255, then three
    values from 2^16 to 2^18) and their sum, and stores the three at words 100 + 4x .. 102 + 4x."""
    return [
        MInstr("s2r", (R(1),), (), {"sr": "tid.x"}),
        MInstr("shl", (R(2),), (R(1), Imm(2))),
        MInstr("ld", (R(3),), (R(2),), {**G, "off": 4 * hi}),
        MInstr("shl", (R(4),), (R(1), Imm(16))),
        MInstr("add", (R(4),), (R(4), Imm(255))),
        MInstr("add", (R(5),), (R(3), R(4))),
        MInstr("shl", (R(6),), (R(1), Imm(4))),
        *[MInstr("st", (), (R(6), R(r)), {**G, "off": 4 * (100 + k)}) for k, r in enumerate((3, 4, 5))],
        MInstr("exit"),
    ]


@pytest.mark.parametrize("shape_name", ["test", pytest.param("2b", marks=pytest.mark.slow)])
def test_a_lane_result_below_2_18_is_its_chunk_0_and_a_high_token(shape_name):
    shape = shape_for(machine_config(shape_name))
    c = M.build_machine(shape)
    hi = shape.gmem_words - 64
    loaded = [256, (1 << 18) - 1, 1 << 18, 255]

    class Prog:
        name = "high_results"
        code = _program(hi)

    rows = encode_program(Prog(), b"", (4, 1, 1), shape)
    words = {hi + x: v for x, v in enumerate(loaded)}
    prompt = P.rom_load(rows, M.ROM_CHUNKS) + P.mem_load(sorted(words.items()), M.NCHUNK)
    prompt += [P.ctl(P.NTHREADS, 4), P.ctl(P.NBLOCKS, 1), *P.dump_range(100, 114, hi >> 10),
               P.ctl(P.BLOCK, 0)]
    trace = _trace(c, shape_name, prompt, limit=300)
    assert trace[-1] == P.ctl(P.HALT)
    formed = [(x << 16) + 255 for x in range(4)]
    want = {}
    for x in range(4):
        sums = (loaded[x] + formed[x]) & M32
        want.update({100 + 4 * x: loaded[x], 101 + 4 * x: formed[x], 102 + 4 * x: sums})
    got = decode_dump(trace, page=0)
    assert {w: got.get(w, 0) for w in want} == want
    by_pc = results_by_pc(trace)

    def lane(x: int, v: int) -> list[P.Token]:
        if v < 256:
            return [P.Token("SHORT", x << 8 | v)]
        if v < P.HIGH_LIMIT:
            return [P.Token("DATA", 3 * x, v & 2047), P.Token("HIGH", x, v >> 11)]
        return [P.Token("DATA", 3 * x + j, (v >> 11 * j) & 2047) for j in range(3)]

    assert by_pc[2] == [t for x in range(4) for t in lane(x, loaded[x])]  # the load: the read port
    assert [t.kind for t in by_pc[2]] == ["DATA", "HIGH", "DATA", "HIGH", "DATA", "DATA", "DATA", "SHORT"]
    assert by_pc[4] == [t for x in range(4) for t in lane(x, formed[x])]  # the datapath
    assert by_pc[5] == [t for x in range(4) for t in lane(x, (loaded[x] + formed[x]) & M32)]
