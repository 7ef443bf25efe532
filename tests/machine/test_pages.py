"""Global memory past one 1,024-word page (issue 26): the page tokens, and the 2B-shape machine's
4,096 words in two banks of 2,048 rows, run by the compiler's exact evaluator (no model).

Why the evaluator: the 2B model is a 9 GB build; the evaluator runs the 2B circuit itself, token by
token, on integers (what the model writes whenever it is exact: the compiler's contract, checked
elsewhere). The test shape's two pages run in its model (``tests/machine_weights``: ``pages.cu``).
"""

from __future__ import annotations

import numpy as np
import pytest

from qwengpu.compiler.evaluator import evaluate
from qwengpu.isa.instr import Imm, MInstr, R
from qwengpu.machine import circuit as M
from qwengpu.machine import protocol as P
from qwengpu.model.configs import shape_for
from qwengpu.runtime.engine import decode_dump, encode_program, machine_config, token_census
from qwengpu.simt.memory import GLOBAL_BASE

G = {"space": "global", "size": 4, "base": GLOBAL_BASE}


def test_page_tokens_are_written_only_where_the_page_changes():
    """The host's loads: PAGE before the first word of a page other than the latch's; MEMADDR
    carries the low 10 bits and the reader puts the page back above them. The dump range names
    the page of its first word (when the loads left the latch elsewhere) and of its last."""
    words = [(3, 7), (1023, 8), (1024, 9), (3000, 10), (3001, 11)]
    toks = P.mem_load(words, 3)
    read = P.read_all(toks)
    assert [t for t in read if t.kind == "PAGE"] == [P.Token("PAGE", 1), P.Token("PAGE", 2)]
    assert [t.a for t in read if t.kind == "MEMADDR"] == [w for w, _ in words]
    assert [P.decode(t).a for t in toks if P.decode(t).kind == "MEMADDR"] == [3, 1023, 0, 952, 953]
    assert P.dump_range(5, 9, 0) == [P.ctl(P.DUMPLO, 5), P.ctl(P.DUMPHI, 9)]  # page 0 only: as before
    assert P.read_all(P.dump_range(1020, 2100, 2)) == [
        P.Token("PAGE", 0), P.Token("ENDPAGE", 2), P.Token("DUMPLO", 1020), P.Token("DUMPHI", 2100 - 2048)]
    # a page token is not a ROM bank: the reader's bank (PASS pcs) stays
    r = P.Reader()
    r.read(P.ctl(P.BANK, P.bank_arg(3)))
    r.read(P.ctl(P.BANK, P.page_arg(1)))
    assert r.read(P.pass_(5)).a == 3 * 512 + 5 and r.read(P.ctl(P.DUMPADDR, 4)).a == 1028
    # the read-back: DUMPADDR's page from the PAGE before it (or the prompt's, passed in)
    trace = [P.ctl(P.DUMPADDR, 1023), P.ctl(P.USHORT, 5), P.ctl(P.BANK, P.page_arg(2)),
             P.ctl(P.DUMPADDR, 0), P.ctl(P.USHORT, 6), P.ctl(P.HALT)]
    assert decode_dump(trace, page=1) == {2047: 5, 2048: 6}
    assert token_census(trace)["dump"] == 3  # DUMPADDR, PAGE, DUMPADDR (USHORT counts as short)


@pytest.fixture(scope="module")
def circuit_2b():
    shape = shape_for(machine_config("2b"))
    assert shape.gmem_words == 16384 and shape.gmem_bank_rows == 2048
    return shape, M.build_machine(shape)


def _run(c, prompt: list[int], limit: int = 200) -> list[int]:
    """What the circuit writes after ``prompt``, one token at a time, until HALT."""
    seq = list(prompt)
    while seq[-1] != P.ctl(P.HALT) and len(seq) < len(prompt) + limit:
        seq.append(int(evaluate(c, {"tok": np.array(seq)})["out"][-1]))
    return seq[len(prompt):]


def _trace(c, shape_name: str, prompt: list[int], limit: int) -> list[int]:
    """What the circuit ``c`` writes after ``prompt``. On the test shape the cached model writes
    it and ONE evaluator pass checks it: every position's circuit output is the next token of the
    trace (teacher-forced), so the circuit run token by token writes exactly this trace — linear
    time, where ``_run`` evaluates the whole sequence again for every token (54 s of the default
    run). On the 2B shape (no model in the default run) the evaluator runs token by token."""
    if shape_name != "test":
        return _run(c, prompt, limit)
    from qwengpu.runtime.cached import machine_fast

    trace = machine_fast(machine_config("test")).generate(prompt, limit, stop=P.ctl(P.HALT))
    out = evaluate(c, {"tok": np.array(prompt + trace)})["out"]
    written = [int(x) for x in out[len(prompt) - 1:len(prompt) + len(trace) - 1]]
    assert written == trace, "the circuit does not write the model's trace"
    return trace


@pytest.mark.slow  # 30 s of the evaluator; the test shape's two banks run in its model by default
def test_four_lanes_load_and_store_in_four_pages_of_the_2b_machine(circuit_2b):
    """Lane x loads word 1024x + 2 (pages 0..3: banks 0, 0, 1, 1), adds 1, stores it at word
    1024x + 5 and loads it back, then stores that at word 1022 + x; the dump (words 1022..1025)
    crosses from page 0 into page 1, so the model writes PAGE(1) and DUMPADDR(0) there. A bank
    select that ignored the high bits would read word 2050 as word 2 and 3074 as 1026 (other
    values), a write enable on every bank would let lane 3's store overwrite lane 1's (same row of
    the other bank), a page latch ignored by the loads would put the values in page 0."""
    shape, c = circuit_2b

    class Prog:
        name = "pages"
        code = [
            MInstr("s2r", (R(1),), (), {"sr": "tid.x"}),
            MInstr("shl", (R(2),), (R(1), Imm(12))),  # byte address of word 1024 * tid
            MInstr("ld", (R(3),), (R(2),), {**G, "off": 8}),
            MInstr("add", (R(3),), (R(3), Imm(1))),
            MInstr("st", (), (R(2), R(3)), {**G, "off": 20}),
            MInstr("ld", (R(4),), (R(2),), {**G, "off": 20}),
            MInstr("shl", (R(5),), (R(1), Imm(2))),
            MInstr("st", (), (R(5), R(4)), {**G, "off": 4 * 1022}),
            MInstr("exit"),
        ]

    rows = encode_program(Prog(), b"", (4, 1, 1), shape)
    loads = [(1024 * x + 2, 11 * (x + 1)) for x in range(4)]
    prompt = P.rom_load(rows, M.ROM_CHUNKS) + P.mem_load(loads, M.NCHUNK)
    prompt += [P.ctl(P.NTHREADS, 4), P.ctl(P.NBLOCKS, 1), *P.dump_range(1022, 1025, 3), P.ctl(P.BLOCK, 0)]
    trace = _run(c, prompt)
    assert trace[-1] == P.ctl(P.HALT)
    assert decode_dump(trace, page=0) == {1022: 12, 1023: 23, 1024: 34, 1025: 45}
    toks = P.read_all(trace)
    k = toks.index(P.Token("PAGE", 1))
    assert [t.kind for t in toks].count("PAGE") == 1 and toks[k + 1] == P.Token("DUMPADDR", 1024)


def results_by_pc(trace: list[int]) -> dict[int, list[P.Token]]:
    """The result tokens (DATA, HIGH, SHORT, USHORT) the model wrote after each PASS, by its pc."""
    by_pc: dict[int, list[P.Token]] = {}
    pc = -1
    for t in P.read_all(trace):
        if t.kind == "PASS":
            pc = t.a
        elif t.kind in ("DATA", "HIGH", "SHORT", "USHORT"):
            by_pc.setdefault(pc, []).append(t)
    return by_pc


def _one_port_program(hi: int):
    """Lane x loads word hi + 2x (5, a 32-bit word, 5 again, 1000: a SHORT, three chunks, a SHORT
    of the same value as lane 0's from another address, chunk 0 and a HIGH), every lane loads word
    hi + 100 (one big value: the uniform chunks) and hi + 101 (7: one USHORT), the odd lanes load
    into their own address register (``@p0 ld r2, [r2 + ..]``: a partial mask, and a commit that
    rewrites the register the port reads the address from), every lane loads word hi + 200 + 2x
    (9 in every lane, from four addresses: not uniform), and each lane stores its five values."""
    from qwengpu.isa.instr import P as Pr

    return [
        MInstr("s2r", (R(1),), (), {"sr": "tid.x"}),
        MInstr("shl", (R(2),), (R(1), Imm(3))),
        MInstr("ld", (R(3),), (R(2),), {**G, "off": 4 * hi}),
        MInstr("ld", (R(4),), (R(0),), {**G, "off": 4 * (hi + 100)}),
        MInstr("ld", (R(5),), (R(0),), {**G, "off": 4 * (hi + 101)}),
        MInstr("and", (R(6),), (R(1), Imm(1))),
        MInstr("setp", (Pr(0),), (R(6), Imm(1)), {"cmp": "eq", "sign": "u"}),
        MInstr("ld", (R(2),), (R(2),), {**G, "off": 4 * (hi + 50)}, guard=Pr(0)),
        MInstr("shl", (R(7),), (R(1), Imm(3))),
        MInstr("ld", (R(8),), (R(7),), {**G, "off": 4 * (hi + 200)}),
        MInstr("shl", (R(9),), (R(1), Imm(4))),
        MInstr("shl", (R(10),), (R(1), Imm(2))),
        MInstr("add", (R(9),), (R(9), R(10))),  # 5 words per lane
        *[MInstr("st", (), (R(9), R(r)), {**G, "off": 4 * (100 + k)})
          for k, r in enumerate((3, 4, 5, 2, 8))],
        MInstr("exit"),
    ]


@pytest.mark.parametrize("shape_name", ["test", pytest.param("2b", marks=pytest.mark.slow)])
def test_one_read_port_serves_each_lane_at_the_token_that_emits_it(shape_name):
    """The one-port memory (docs/machine-in-weights.md 9.15): every emitted word is the emitting
    lane's, through SHORT, chunk, uniform and USHORT forms and a partial mask; a load every lane
    makes at one address is uniform, one of equal values from different addresses is not."""
    shape = shape_for(machine_config(shape_name))
    c = M.build_machine(shape)
    hi = shape.gmem_words - 400  # the top bank (of the 2B shape's 16,384 words: bank 7)
    words = {hi: 5, hi + 2: 0x12345678, hi + 4: 5, hi + 6: 1000, hi + 100: 0xDEADBEEF, hi + 101: 7,
             hi + 52: 0xCAFE0001, hi + 56: 200, **{hi + 200 + 2 * x: 9 for x in range(4)}}

    class Prog:
        name = "one_port"
        code = _one_port_program(hi)

    rows = encode_program(Prog(), b"", (4, 1, 1), shape)
    prompt = P.rom_load(rows, M.ROM_CHUNKS) + P.mem_load(sorted(words.items()), M.NCHUNK)
    prompt += [P.ctl(P.NTHREADS, 4), P.ctl(P.NBLOCKS, 1), *P.dump_range(100, 119, max(words) >> 10),
               P.ctl(P.BLOCK, 0)]
    trace = _trace(c, shape_name, prompt, limit=300)
    assert trace[-1] == P.ctl(P.HALT)
    want = {}
    for x in range(4):
        r2 = words[hi + 50 + 2 * x] if x % 2 else 8 * x
        vals = (words[hi + 2 * x], 0xDEADBEEF, 7, r2, 9)
        want.update({100 + 5 * x + k: v for k, v in enumerate(vals)})
    got = decode_dump(trace, page=0)
    assert {w: got.get(w, 0) for w in want} == want
    by_pc = results_by_pc(trace)
    short = [P.Token("SHORT", x << 8 | v) for x, v in ((0, 5), (2, 5))]
    assert by_pc[2] == [short[0], *[P.Token("DATA", 3 + j, (0x12345678 >> 11 * j) & 2047) for j in range(3)],
                        short[1], P.Token("DATA", 9, 1000), P.Token("HIGH", 3, 0)]
    assert by_pc[3] == [P.Token("DATA", P.IDX_UNIFORM + j, (0xDEADBEEF >> 11 * j) & 2047) for j in range(3)]
    assert by_pc[4] == [P.Token("USHORT", 7)]
    assert by_pc[7] == [*[P.Token("DATA", 3 + j, (0xCAFE0001 >> 11 * j) & 2047) for j in range(3)],
                        P.Token("SHORT", 3 << 8 | 200)]
    assert by_pc[9] == [P.Token("SHORT", x << 8 | 9) for x in range(4)]
