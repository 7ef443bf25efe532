"""The 4,096-row ROM of the 2B-shape machine, run by the compiler's exact evaluator (no model).

Why here and not in the model: the test shape holds one 1,024-row ROM bank (four do not fit its
residual), and the 2B model is a 9 GB build (its launch of a 3,208-row program is the slow test
``tests/machine_weights/test_multiplier_2b.py::test_a_4096_row_rom_in_the_2b_model``). The evaluator
runs the 2B circuit itself, token by token, on integers: what it writes is what the model writes
whenever the model is exact (the compiler's contract, checked elsewhere).
"""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.compiler.evaluator import evaluate
from qwengpu.isa.instr import Imm, MInstr, R
from qwengpu.machine import circuit as M
from qwengpu.machine import protocol as P
from qwengpu.model.configs import shape_for
from qwengpu.runtime.engine import decode_dump, encode_program, machine_config
from qwengpu.simt.memory import GLOBAL_BASE


@pytest.fixture(scope="module")
def circuit_2b():
    shape = shape_for(machine_config("2b"))
    assert shape.rom_rows == 4096
    return shape, M.build_machine(shape)


def _run(c, prompt: list[int], limit: int = 40) -> list[int]:
    """What the circuit writes after ``prompt``, one token at a time, until HALT."""
    seq = list(prompt)
    while seq[-1] != P.ctl(P.HALT) and len(seq) < len(prompt) + limit:
        seq.append(int(evaluate(c, {"tok": np.array(seq)})["out"][-1]))
    return seq[len(prompt):]


_ST = MInstr("st", (), (Imm(0), R(1)), {"space": "global", "size": 4, "base": GLOBAL_BASE})
#: (rows of the program, the jump targets whose decoys are planted, the stored result, the PASS pcs)
FAR = {
    "four_banks": ({0: MInstr("mov", (R(1),), (Imm(7),)), 1: MInstr("bra", target=3500),
                    3500: MInstr("add", (R(1),), (R(1), Imm(5))), 3501: MInstr("bra", target=1500),
                    1500: MInstr("add", (R(1),), (R(1), Imm(100))), 1501: MInstr("bra", target=2600),
                    2600: _ST, 2601: MInstr("exit")}, (3500, 1500, 2600), 112,
                   [0, 1, 3500, 3501, 1500, 1501, 2600, 2601]),
    "two_banks": ({0: MInstr("mov", (R(1),), (Imm(7),)), 1: MInstr("bra", target=3500),
                   3500: MInstr("add", (R(1),), (R(1), Imm(5))), 3501: _ST, 3502: MInstr("exit")},
                  (3500,), 12, [0, 1, 3500, 3501, 3502]),
}


# both slow (19 s and 34 s on the evaluator, which re-evaluates the whole sequence for every token): the
# ROM banks are the 2B shape's (the default run's test-shape machine has one bank of 1,024 rows)
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["four_banks", "two_banks"])
def test_a_program_across_the_rom_banks(circuit_2b, variant):
    """four_banks: r1 = 7, then a jump to row 3,500 (ROM bank 3), +5, to row 1,500 (bank 1), +100,
    to row 2,600 (bank 2): store r1 and exit. Decoys at the same 10-bit row in every other ROM bank
    (adding 1,000, 2,000 or 4,000) would show in the result if the banks' write enables or the read
    select mixed them up. The model writes BANK before every pass in another 512-row bank: its
    argument carries pc bits 9..11 (bits 0, 2, 3), and the host reads the PASS pcs back as 12 bits.
    two_banks: the jump to bank 3, its decoys in banks 0-2, the store there (a shorter check)."""
    shape, c = circuit_2b
    program, far, result, passes = FAR[variant]
    at = dict(program)
    for pc in far:
        for b in range(4):
            decoy = (pc & 1023) | b << 10
            if decoy != pc:
                at[decoy] = MInstr("add", (R(1),), (R(1), Imm(1000 << (b % 3))))

    class Prog:
        name = "far"
        code = [at.get(pc, MInstr("exit")) for pc in range(max(at) + 1)]

    rows = encode_program(Prog(), b"", (1, 1, 1), shape)
    # the host's ROM load, only the rows used: BANK(b12 << 2) before ROMADDR's 10 bits, BANK(0) last
    prompt, hi = [], 0
    for pc in sorted(at):
        if pc >> 10 != hi:
            hi = pc >> 10
            prompt.append(P.ctl(P.BANK, P.bank_arg(hi << 1)))
        chunks = P.chunks(rows[pc], M.ROM_CHUNKS)
        prompt += [P.ctl(P.ROMADDR, pc & 1023), *(P.data(k, v) for k, v in enumerate(chunks))]
    prompt += [P.ctl(P.BANK, 0), P.ctl(P.NTHREADS, 1), P.ctl(P.NBLOCKS, 1), P.ctl(P.DUMPLO, 0),
               P.ctl(P.DUMPHI, 0), P.ctl(P.BLOCK, 0)]
    trace = _run(c, prompt)
    toks = P.read_all(trace)
    assert [t.a for t in toks if t.kind == "PASS"] == passes
    assert [t.a for t in toks if t.kind == "BANK"] == [P.bank_arg(pc >> 9) for pc in far]
    assert decode_dump(trace) == {0: result}
    assert trace[-1] == P.ctl(P.HALT)


@pytest.mark.slow  # 28 s of lowering
def test_the_lowering_aims_for_1024_rows_and_takes_the_rom_when_it_must():
    """Programs are lowered for 1,024 rows (a row is 12 prompt tokens: ``soft.ROM_BUDGET``); one
    that does not fit that even with shared routines (``rom4k``: 3,208 rows of unrolled integer
    code) takes the 2B shape's 4,096-row ROM (the test shape's one bank refuses it: the slow
    ``test_a_4096_row_rom_in_the_2b_model``). Lowering it takes ~11 s (97 s before the value
    numbering stopped rescanning entries too old to reuse)."""
    from pathlib import Path

    from qwengpu.codegen.soft import ROM_BUDGET
    from qwengpu.runtime.engine import prepare

    cu = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels" / "rom4k.cu"
    _, prog, prompt, _, _ = prepare(cu, None, shape_for(machine_config("2b")))
    assert ROM_BUDGET == 1024 < 3072 < len(prog.code) <= 4096
    assert [P.bank_of(P.decode(t).a) for t in prompt if P.decode(t).kind == "BANK"] == [2, 4, 6, 0]
