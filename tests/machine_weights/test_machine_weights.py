"""The machine in the weights, end to end: a stock Qwen3.5 model writes every step of a launch.

Three oracles agree bit for bit: the reference interpreter, the ISA simulator (``sim.py``) and the
stock model run greedily token by token (recurrent path, through the fast runtime that
tests/runtime proves token-identical to stock); the finished trace teacher-forced in one
prefill (chunked path) reproduces every argmax; one damaged weight breaks the run.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from qwengpu.errors import MachineLimitError
from qwengpu.machine import protocol as P
from qwengpu.runner import run_kernel
from qwengpu.runtime.engine import (
    machine_config,
    machine_model,
    prepare,
    run_machine,
    shape_for,
    trace_counts,
)

K = Path(__file__).parent / "kernels"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def machine():
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return machine_model()


@pytest.fixture(scope="module")
def chunked(machine):
    """The chunked-path runtime over the same model (tests/runtime prove it equal to the stock prefill)."""
    from qwengpu.runtime.chunked import ChunkedModel

    return ChunkedModel(machine[1])


@pytest.fixture(scope="module")
def vadd(machine):
    return run_machine(K / "vadd.cu", model=machine[1])


def _weights_sim(cu: Path):
    """The ISA simulator over the lowering the engine runs for this machine (``engine.prepare``:
    its shape's units and row operands, the launch's parameter bank)."""
    from qwengpu.codegen.soft import Options
    from qwengpu.codegen.softcore import unit_options
    from qwengpu.codegen.softmem import run_weights

    return run_weights(cu, options=Options(**unit_options(shape_for(machine_config()))))


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.asarray(a[k]).view(np.uint32).tolist() == np.asarray(b[k]).view(np.uint32).tolist(), k


def test_protocol_roundtrip():
    assert P.decode(P.pass_(17, 5)) == P.Token("PASS", 17, 5, True)
    assert P.decode(P.pass_(511, 15, full=False)) == P.Token("PASS", 511, 15, False)
    assert P.decode(P.data(12, 0x7FF)) == P.Token("DATA", 12, 0x7FF)
    assert P.decode(P.ctl(P.STORE, 3)) == P.Token("STORE", 3)
    assert P.decode(P.ctl(P.MASK, 0b0110)) == P.Token("MASK", 0b0110)
    assert max(P.pass_(511, 15), P.ctl(P.FAULT, 1023), P.data(15, 2047), P.ctl(P.BANK, 3)) < 1 << 16


def test_a_rom_of_4096_rows_is_loaded_and_named_by_bank():
    """The pc is 12 bits: a PASS carries 9, the BANK latch 3 (argument bits 0, 2, 3; bit 1 is the
    restart flag, so a 10-bit machine's BANK tokens keep their ids). ROMADDR carries 10 bits: the
    host loads rows 1,024 and up after BANK(b12 << 2) and ends with BANK(0)."""
    assert [P.bank_arg(b) for b in range(8)] == [0, 1, 4, 5, 8, 9, 12, 13]
    assert P.bank_arg(1, restart=True) == 3 and P.bank_of(3) == 1
    assert all(P.bank_of(P.bank_arg(b, r)) == b for b in range(8) for r in (False, True))
    rows = list(range(1, 3001))  # 3,000 rows: banks 0, 1 and 2 of 1,024
    toks = P.rom_load(rows, 2)
    addr = [(k, t) for k, t in enumerate(P.decode(x) for x in toks) if t.kind in ("ROMADDR", "BANK")]
    banks = [(k, t.a) for k, t in addr if t.kind == "BANK"]
    assert [a for _, a in banks] == [P.bank_arg(2), P.bank_arg(4), 0]
    # every ROMADDR's 10 bits plus the high bits of the BANK before it name its row, in order
    hi, seen = 0, []
    for _, t in addr:
        if t.kind == "BANK":
            hi = P.bank_of(t.a) >> 1
        else:
            seen.append(hi << 10 | t.a)
    assert seen == list(range(3000))
    assert len(toks) == 3000 * 3 + 3 and toks[-1] == P.ctl(P.BANK, 0)
    assert P.rom_load(rows[:1024], 2) == [x for pc, r in enumerate(rows[:1024])
                                          for x in [P.ctl(P.ROMADDR, pc), *(P.data(k, v) for k, v in
                                                                            enumerate(P.chunks(r, 2)))]]
    # the reader puts a PASS's 9 bits after the bank's 3
    toks = [P.ctl(P.BANK, P.bank_arg(7)), P.pass_(511, 2), P.ctl(P.BANK, P.bank_arg(4, True)), P.pass_(3, 1)]
    assert [t.a for t in P.read_all(toks) if t.kind == "PASS"] == [4095, 2051]


def test_block_indices_take_two_parts():
    """A 16-bit block index / count: BLOCK / NBLOCKS carry the low 9 bits, their HI forms (argument
    bit 9) the high 7; the reader puts the parts side by side (a blank high part is 0)."""
    assert P.block_tokens(P.NBLOCKS, 511) == [P.ctl(P.NBLOCKS, 511)]  # the prompt of small launches
    assert P.block_tokens(P.NBLOCKS, 65535) == [P.ctl(P.NBLOCKS, 512 | 127), P.ctl(P.NBLOCKS, 511)]
    assert P.decode(P.ctl(P.BLOCK, 512 | 3)) == P.Token("BLOCKHI", 3)
    assert P.decode(P.ctl(P.NBLOCKS, 512 | 3)) == P.Token("NBLOCKSHI", 3)
    toks = P.read_all([P.ctl(P.BLOCK, 511), *P.block_tokens(P.BLOCK, 1024), P.ctl(P.BLOCK, 1)])
    assert [(t.kind, t.a) for t in toks] == [("BLOCK", 511), ("BLOCKHI", 2), ("BLOCK", 1024), ("BLOCK", 1025)]
    with pytest.raises(AssertionError):
        P.block_tokens(P.BLOCK, 65536)


@pytest.mark.slow  # a long trace (9-49 s); blocks, barriers stay in test_blocks_and_barriers_are_written...
def test_a_grid_past_512_blocks_runs_in_the_model(machine):
    """530 one-thread blocks, one after another: at the 512th block the model writes BLOCKHI (the
    high part of the block index) and then BLOCK(0); every block's full index reaches the datapath
    (out[k] sums b + 1 over the blocks b = k mod 64). The host fed NBLOCKSHI(1) NBLOCKS(18). (1,030
    blocks, two BLOCKHIs, until the default run neared its 20 minutes; 65,535 blocks in the 2B
    model: bench/results/block_marks_65535_2b.jsonl.)"""
    seen: list[tuple[int, int]] = []
    run = run_machine(K / "many_blocks.cu", model=machine[1], max_tokens=60_000,
                      progress=lambda n, block: seen.append((n, block)))
    # progress every 256 tokens names the block running, read from the model's BLOCK tokens
    assert [n for n, _ in seen] == list(range(256, len(run.trace) + 1, 256))
    assert [b for _, b in seen] == sorted(b for _, b in seen) and 500 < seen[-1][1] < 530
    want = np.zeros(64, dtype=np.int64)
    np.add.at(want, np.arange(530) & 63, np.arange(530) + 1)
    assert run.outputs["out"].tolist() == want.tolist()
    assert run.stats["blocks"] == 530 and run.stats["addresses_checked"] == 2 * 530
    toks = P.read_all(run.trace)
    his = [(k, t.a) for k, t in enumerate(toks) if t.kind == "BLOCKHI"]
    assert [h for _, h in his] == [1]
    assert all(toks[k + 1] == P.Token("BLOCK", 512 * h) for k, h in his)  # the low part 0 comes next
    blocks = [t.a for t in toks if t.kind == "BLOCK"]
    assert blocks == list(range(1, 530))  # BLOCK(0) is the host's
    prompt = prepare(K / "many_blocks.cu")[2]
    assert P.block_tokens(P.NBLOCKS, 1030) == [P.ctl(P.NBLOCKS, 512 | 2), P.ctl(P.NBLOCKS, 6)]
    assert P.block_tokens(P.NBLOCKS, 530) == [P.ctl(P.NBLOCKS, 512 | 1), P.ctl(P.NBLOCKS, 18)]
    assert all(t in prompt for t in P.block_tokens(P.NBLOCKS, 530))
    # a PASS names pc bits 0..8; the 10th bit comes from the last BANK token before it
    toks = [P.pass_(5, 1), P.ctl(P.BANK, 1), P.pass_(5, 1), P.ctl(P.BANK, 2), P.pass_(7, 0, full=False)]
    assert [t.a for t in P.read_all(toks) if t.kind == "PASS"] == [5, 517, 7]


def test_trace_counts_split_passes_into_warp_instructions():
    """Later groups of the same warp at the same pc continue one warp instruction."""
    tr = [P.ctl(P.BLOCK, 0), P.pass_(0, 0), P.pass_(0, 1), P.pass_(0, 9), P.pass_(1, 0), P.pass_(1, 9)]
    assert trace_counts(tr) == {"warp_instructions": 4, "passes": 5, "blocks": 1, "barriers": 0}


# the longest traces (multi 14,120 tokens, banks 20,008 after a 7,445-token prompt) and the barrier
# kernel (20 s; barriers stay in test_blocks_and_barriers_are_written_by_the_model) run only in the
# slow run (the chunked replay stays on vadd, intops, bitops and mul)
@pytest.mark.parametrize(("name", "replayed"), [
    *[(n, True) for n in ["vadd", "intops", "bitops", "mul"]],
    *[pytest.param("bar", r, marks=pytest.mark.slow, id="bar" + ("-replay" if r else ""))
      for r in (False, True)],
    *[pytest.param(n, r, marks=pytest.mark.slow, id=n + ("-replay" if r else ""))
      for n in ["multi", "banks"] for r in (False, True)],
])
def test_model_equals_sim_and_interp(machine, chunked, name, replayed):
    """vadd: divergent guard (3 of 4 threads); intops/bitops: min/max, popc, clz, brev, shifts, sel
    with two immediates; mul: multiplication as a sequence of weight ops; sim.py runs the engine's
    own lowering (``_weights_sim``); multi: 3 blocks of 64
    threads (2 warps, 16 lane groups), data-dependent loop trip counts (divergence and min-PC
    reconvergence), blockIdx; bar: 2 blocks of 64 threads exchanging values through global memory
    across three ``__syncthreads()``; banks: a 618-row program whose loop crosses between the two
    halves of the ROM every trip, lanes of one group in different halves. The model's dump equals
    sim.py (with the same expansion), the interpreter and the spec's expected values, it issues
    exactly sim.py's warp instructions, and the trace fed back in one prefill (chunked path,
    ``qwengpu.runtime.chunked``) gives every token again (multi and banks: in the slow run)."""
    run = run_machine(K / f"{name}.cu", model=machine[1], max_tokens=60000)
    sim = _weights_sim(K / f"{name}.cu")
    ref = run_kernel(K / f"{name}.cu")
    _same(run.outputs, sim.outputs)
    _same(run.outputs, ref.outputs)
    assert run.passed, run.mismatches
    assert run.stats["warp_instructions"] == sim.stats["warp_instructions"]
    assert run.stats["passes"] == sim.stats["passes"]
    assert run.trace[-1] == P.ctl(P.HALT)
    assert run.stats["addresses_checked"] > 0 and "bounds_false_alarm" not in run.stats
    banks = [t for t in run.trace if P.decode(t).kind == "BANK"]
    # the model switches halves only when it must: banks goes 0 -> 1, back to 0 for the second
    # trip of its odd lanes, and 1 again; no other kernel leaves bank 0
    assert len(banks) == (3 if name == "banks" else 0)
    if not replayed:
        return
    from qwengpu.runtime.chunked import replay

    rep = replay(chunked, run.prompt, run.trace)  # the chunked path: one teacher-forced prefill
    assert rep["equal"], f"chunked replay differs at trace token {rep['first_mismatch']}"


def test_trace_lines_show_what_the_model_wrote(machine):
    """``--trace``: one line per lane-group pass, decoded from the model's tokens only."""
    lines: list[str] = []
    run_machine(K / "vadd.cu", model=machine[1], trace=lines.append)
    assert lines[0] == "-- block 0 starts" and lines[-1].startswith("-- every thread exited")
    # the thread index read by the compare itself (a row's a_sr operand), thread 3 failing the guard
    assert any(x.endswith("setp.ge.s p0, %tid.x, 3  pred = [0, 0, 0, 1]") for x in lines)
    assert any(x.endswith("mulw.s.s r0, %tid.x, 4  r0 = [0x0, 0x4, 0x8, -]") for x in lines)
    stores = "store lane 0  store lane 1  store lane 2"
    assert any("mask 0111  st." in x and x.endswith(stores) for x in lines)


def test_sticky_mask_one_mask_token_per_change(machine):
    """Machine v2's sticky mask: in kernels/dot.cu thread 3 exits at once and lanes 0-2 run every
    later pass; the model writes MASK(g=0, 0111) once, every later pass is PASS f=0 alone (version 1
    wrote a MASK after every such PASS: 87 of the dot's 564 tokens on the 2B shape). The host reads
    the lanes of each PASS f=0 from the last MASK, as the machine's own table does."""
    lines: list[str] = []  # the --trace display of the same run (checked at the end)
    run = run_machine(ROOT / "kernels" / "dot.cu", model=machine[1], trace=lines.append)
    toks = P.read_all(run.trace)
    masks = [t for t in toks if t.kind == "MASK"]
    partial = [t for t in toks if t.kind == "PASS" and not t.full]
    # the first MASK is lanes 0-2 of group 0; the atomic's lane-ordered loop may change it (on the
    # test shape it runs one lane at a time: two more MASKs); never one MASK per partial pass
    assert (masks[0].a >> 4 & 15, masks[0].a & 15) == (0, 0b0111)
    assert all(t.a >> 4 & 15 == 0 for t in masks)
    assert len(masks) <= 3 and len(partial) > 20
    assert np.asarray(run.outputs["out"], dtype=np.float32).view(np.uint32).tolist() == [0x42000000]  # 32.0
    # the trace shows each partial pass with the mask of the last MASK before it
    want: Counter[str] = Counter()
    cur = ""
    for t in toks:
        if t.kind == "MASK":
            cur = format(t.a & 15, "04b")
        elif t.kind == "PASS" and not t.full:
            want[cur] += 1
    got = Counter(m.group(1) for x in lines if (m := re.search(r" mask (\d{4}) ", x)))
    del got["1111"]
    assert got == want and got["0111"] > 20


def test_lane_rows_take_the_atomics_turns(machine, monkeypatch):
    """One-lane rows (issue 26): the integer dot's ``atomicAdd`` takes each lane's turn in a load,
    an add and a store that run in that lane only (the row's guard fields name it: gen 0, gneg 1,
    gidx the lane); the model writes [1, 2, 3] . [4, 5, 6] = 32. Negative control: the same rows
    encoded without their lane (every lane runs every turn, so the four lanes load one old value)
    no longer give 32."""
    from qwengpu.runtime import engine

    cu = ROOT / "bench" / "kernels" / "dot_int.cu"
    prog = prepare(cu, None, shape_for(machine_config()))[1]
    assert [x.op for x in prog.code if x.mod("lane") is not None] == ["ld", "add", "st"] * 4
    run = run_machine(cu, model=machine[1])
    assert run.passed and run.outputs["out"].tolist() == [32]
    monkeypatch.setattr(engine, "LANE_ROW", {"gen": 0, "gneg": 0})
    bad = run_machine(cu, model=machine[1])
    assert bad.outputs["out"].tolist() != [32]


def test_launch_words_and_thread_indices_ride_in_the_rows(machine, monkeypatch, tmp_path):
    """Issue 26: the integer dot's ``n`` and buffer windows are immediates of the rows that read
    them (no ``ld.param`` pass) and ``threadIdx.x`` is read through the rows' ``a_sr`` field (no
    ``s2r`` pass); the model writes 32, and 14 for a launch with n = 2 (another immediate in the
    same rows: the model computes with the launch's word). Negative control: the rows encoded to
    select ``warpid`` where they select the thread index (every lane reads 0) no longer give 32."""
    import json

    from qwengpu.isa.instr import SR
    from qwengpu.runtime import engine

    cu = ROOT / "bench" / "kernels" / "dot_int.cu"
    prog = prepare(cu, None, shape_for(machine_config()))[1]
    assert not any(x.op == "s2r" or x.op == "ld" and x.mod("space") == "param" for x in prog.code)
    assert any(SR("tid.x") in x.s for x in prog.code)
    run = run_machine(cu, model=machine[1])
    assert run.passed and run.outputs["out"].tolist() == [32]
    spec = json.loads(cu.with_suffix(".json").read_text())
    spec["args"][2]["value"], spec["expected"]["out"] = 2, [14]
    (tmp_path / "dot_int.json").write_text(json.dumps(spec))
    two = run_machine(cu, tmp_path / "dot_int.json", model=machine[1])
    assert two.passed and two.outputs["out"].tolist() == [14]
    monkeypatch.setattr(engine, "SR_CODES", {**engine.SR_CODES, "tid": engine.SR_CODES["warpid"]})
    bad = run_machine(cu, model=machine[1])
    assert bad.outputs["out"].tolist() != [32]


def test_many_buffers_fit_the_compact_layout(machine, monkeypatch):
    """Capacity of the global arena: six buffers (five inputs of 180 words, one output) end at word 928
    with 16-byte alignment and guards (within the 1,024 words of version 1's machine); the model
    reads each input at its far end and writes what the kernel means (out[t] = sum over k of (k+1) *
    (10(k+1) + t)). With version 1's layout (256-byte alignment and guard: a 128-word slot per small
    buffer) the same launch needs 1,396 words, refused by a machine of 1,024 words, naming the sizes."""
    from dataclasses import replace

    from qwengpu.model.configs import shape_for
    from qwengpu.simt import memory

    run = run_machine(K / "tails.cu", model=machine[1])
    assert run.passed and run.outputs["out"].tolist() == [550 + 15 * t for t in range(4)]
    assert run.stats["addresses_checked"] > 0
    gmem = prepare(K / "tails.cu")[3]
    own = [b for b in gmem.buffers if b.name != "(machine regions)"]
    assert [b.name for b in own][0] == "out"  # outputs first: the dump is their range only
    assert all(b.start % 16 == 0 for b in own)
    assert max((b.start - memory.GLOBAL_BASE + b.size) // 4 for b in own) == 928
    monkeypatch.setattr(memory, "ALIGN", 256)
    monkeypatch.setattr(memory, "GUARD", 256)
    with pytest.raises(MachineLimitError, match="need 1396 words of global memory"):
        prepare(K / "tails.cu", shape=replace(shape_for(machine[1].config), gmem_words=1024, ro_words=0))


@pytest.mark.slow
def test_a_padded_16x16_tile_runs_in_the_model(machine):
    """Shared memory up to 3/4 of the global words (from their top): the CUDA samples'
    conflict-free transpose at its classic 16x17 tile (272 words; the machine mapped at most 256
    before) runs in the model, 2-D block of 16x4 threads; the result is the matrix's transpose.
    (Slow since the 128-thread turns test took its place in the default run: the same tile at
    16 x 16 threads is ``tests/machine/test_turns.py``'s transpose, on sim.py.)"""
    from qwengpu.spec import load_spec

    run = run_machine(K / "tile_transpose.cu", model=machine[1], max_tokens=200_000)
    idata = np.array(load_spec(K / "tile_transpose.json").arg("idata").data).reshape(16, 16)
    assert run.passed and run.outputs["odata"].tolist() == idata.T.reshape(-1).tolist()
    assert run.stats["barriers"] == 1 and run.stats["addresses_checked"] > 0


def test_a_padded_16x16_tile_fits_and_a_smaller_cap_refuses_it(monkeypatch):
    """The 16x17 tile's 272 shared words fit the machine; with a cap of 256 words the launch is
    refused, naming what it needs."""
    from dataclasses import replace

    from qwengpu.isa import limits

    assert prepare(K / "tile_transpose.cu")[2]
    monkeypatch.setattr(limits, "LIMITS", replace(limits.LIMITS, shared_words=256))
    with pytest.raises(MachineLimitError, match="needs 272 words of shared memory per block"):
        prepare(K / "tile_transpose.cu")


def test_blocks_and_barriers_are_written_by_the_model(machine):
    run = run_machine(K / "bar.cu", model=machine[1], max_tokens=60000)
    assert run.stats["blocks"] == 2 and run.stats["barriers"] == 6
    assert P.ctl(P.BLOCK, 1) in run.trace and P.ctl(P.BLOCK, 0) not in run.trace  # the host fed BLOCK(0)


@pytest.mark.slow  # 12 s; the same stock prefill of vadd (prompt + trace) is compared position by position
# and layer by layer in tests/runtime/test_chunked_runtime.py::test_machine_launch_equals_stock_prefill
def test_trace_reproduced_by_one_prefill(machine, vadd):
    """The chunked (prefill) path over prompt + trace gives the same argmax at every model step."""
    ids = torch.tensor([vadd.prompt + vadd.trace[:-1]])
    with torch.no_grad():
        logits = machine[1](input_ids=ids, use_cache=False).logits
    got = logits[0, len(vadd.prompt) - 1 :].argmax(-1).tolist()
    assert got == vadd.trace


@pytest.mark.parametrize(
    ("name", "what", "where"),
    [("oob_store", "global store of 4 bytes at address 0x7f00000970 (2384 bytes past the end of buffer 'y'",
      "thread (1, 0, 0) of block (0, 0, 0)"),
     ("oob_load", "global load of 4 bytes at address 0x7f000000a0 (0 bytes past the end of buffer 'x'",
      "thread (7, 0, 0) of block (1, 0, 0)")],
)
def test_out_of_bounds_access_is_reported(machine, name, what, where):
    """The weights' memory is 1024 words addressed by their low bits (an out-of-bounds store would
    land elsewhere); the bounds watch reads the addresses from the model's own tokens, stops the
    launch at the first bad one and reports it as the interpreter does (thread, block, address,
    nearest buffer, PTX instruction and CUDA line)."""
    from qwengpu.errors import ExecutionError

    with pytest.raises(ExecutionError) as info:
        run_machine(K / f"{name}.cu", model=machine[1], max_tokens=20000)
    msg = str(info.value)
    assert f"out-of-bounds {what}" in msg and where in msg, msg
    assert f"{name}.cu:" in msg and "the model's trace: block" in msg
    with pytest.raises(ExecutionError) as ref:
        run_kernel(K / f"{name}.cu")
    assert msg.startswith(str(ref.value))


def test_refuses_launches_beyond_the_machine(tmp_path):
    spec = (K / "vadd.json").read_text().replace('"block": 4', '"block": 2048')
    (tmp_path / "vadd.cu").write_text((K / "vadd.cu").read_text())
    (tmp_path / "vadd.json").write_text(spec)
    with pytest.raises(MachineLimitError, match=r"2048 threads per block; the machine runs at most 1024"):
        prepare(tmp_path / "vadd.cu")
    # an approximate instruction with no exact sequence (ex2.approx has one: fex2; sin.approx not)
    (tmp_path / "fsin.cu").write_text(
        'extern "C" __global__ void fsin(float* y) { y[threadIdx.x] = __sinf(y[threadIdx.x]); }\n'
    )
    (tmp_path / "fsin.json").write_text(
        '{"kernel": "fsin", "grid": 1, "block": 4, '
        '"args": [{"name": "y", "type": "f32*", "data": [0.5, 1, 2, 3]}], "outputs": ["y"]}'
    )
    with pytest.raises(MachineLimitError, match="sin.approx"):
        prepare(tmp_path / "fsin.cu")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["saturate", "logic_ops", "funnel_shift", "bit_count", "shifts", "branch_nested", "square",
             "loop_break", "early_return", "byte_perm", "copy_nc", "grid_stride", "fcompare", "vec_add"]
)
def test_corpus_kernels_in_the_weights(machine, name):
    """Corpus kernels (integer and float, through the soft sequences) inside the model."""
    cu = ROOT / "kernels" / f"{name}.cu"
    run = run_machine(cu, model=machine[1], max_tokens=300000)
    _same(run.outputs, run_kernel(cu).outputs)
    assert run.passed, run.mismatches


@pytest.mark.slow
@pytest.mark.parametrize("name", ["rowsum", "clampf"])
def test_user_kernels_in_the_weights(machine, name):
    """Kernels written as a new user would (not from the corpus generator): a shared-memory tree
    reduction per block (5 blocks of 32 threads, barriers in a loop, a multiply by a register) and
    a float clamp over 2 blocks; expected values from Python/NumPy in the spec."""
    run = run_machine(K / f"{name}.cu", model=machine[1], max_tokens=100000)
    _same(run.outputs, run_kernel(K / f"{name}.cu").outputs)
    assert run.passed, run.mismatches


# nw: 6 s, slow; the other three stay
@pytest.mark.parametrize("name", [pytest.param("nw", marks=pytest.mark.slow), "devsq", "warpsz", "noinl"])
def test_real_cuda_kernels_in_the_weights(machine, name):
    """Issue 10's machine side: nw (Needleman-Wunsch anti-diagonals on a 2-D shared tile,
    ``temp[m - tx + 1][tx + 1]``: NVRTC forms a 32-bit shared base below zero plus a positive
    immediate, which PTX wraps modulo 2^32), devsq (a ``__device__`` function called from the
    kernel), noinl (a ``__noinline__`` function: a real ``call`` in PTX, inlined for the machine)
    and warpsz (``warpSize``, WARP_SZ in PTX) run inside the model: outputs equal the
    interpreter, the weights' ISA program (``softmem.run_weights``) and the spec's NumPy values,
    and the bounds watch saw every address in bounds."""
    run = run_machine(K / f"{name}.cu", model=machine[1], max_tokens=60000)
    sim = _weights_sim(K / f"{name}.cu")
    _same(run.outputs, sim.outputs)
    _same(run.outputs, run_kernel(K / f"{name}.cu").outputs)
    assert run.passed, run.mismatches
    assert run.stats["warp_instructions"] == sim.stats["warp_instructions"]
    assert "bounds_false_alarm" not in run.stats


@pytest.mark.slow  # a long trace (9-49 s); blocks, barriers stay in test_blocks_and_barriers_are_written...
def test_a_block_of_72_threads_runs_in_two_parts_in_the_model(machine):
    """A block larger than the 64 threads the machine holds (issue 26): 2 blocks of 72 threads
    of a kernel without barriers run as 4 machine blocks of 36 (NTHREADS 36, NBLOCKS 4), the
    program recomputing ``threadIdx.x`` and ``blockIdx.x`` from the machine's indices; the outputs
    are the spec's (Python) and the interpreter's, the BLOCK tokens the model wrote name the 4
    parts. The 2B model runs 128-, 96-, 100- and 16 x 16-thread blocks in the slow run."""
    from qwengpu.runtime.engine import launch_shape
    from qwengpu.spec import load_spec

    js = K / "big_blocks_odd72.json"
    _, _, prompt, _, _ = prepare(K / "big_blocks.cu", js)
    assert launch_shape(prompt, load_spec(js)) == (36, 2)
    run = run_machine(K / "big_blocks.cu", js, model=machine[1], max_tokens=20000)
    assert run.passed, run.mismatches
    _same(run.outputs, run_kernel(K / "big_blocks.cu", js).outputs)
    assert [t.a for t in P.read_all(run.trace) if t.kind == "BLOCK"] == [1, 2, 3]


@pytest.mark.slow  # a long trace (9-49 s); blocks, barriers stay in test_blocks_and_barriers_are_written...
def test_a_block_with_barriers_of_128_threads_runs_in_the_model(machine):
    """A block of 128 threads that waits at a barrier (issue 26): one machine block of 64 threads,
    each taking two of the block's threads in turns (``codegen.turns``): 128 ints reversed through
    shared memory; the values live across the barrier go to memory and come back. The output is
    the spec's (Python) and the interpreter's; one machine block (no BLOCK token) and one machine
    barrier. More launches in turns: ``tests/machine/test_turns.py`` (sim.py as the weights run
    it) and, in the 2B model, the slow ``test_multiplier_2b.py -k turns``."""
    from qwengpu.runtime.engine import launch_shape
    from qwengpu.spec import load_spec

    js = K / "turns_reverse.json"
    _, _, prompt, _, _ = prepare(K / "turns.cu", js)
    assert launch_shape(prompt, load_spec(js)) == (64, 1)
    run = run_machine(K / "turns.cu", js, model=machine[1], max_tokens=100_000)
    assert run.passed, run.mismatches
    _same(run.outputs, run_kernel(K / "turns.cu", js).outputs)
    assert run.outputs["out"].tolist() == load_spec(js).expected["out"].tolist()
    assert run.stats["barriers"] == 1 and run.stats["blocks"] == 1
    assert not [t for t in P.read_all(run.trace) if t.kind == "BLOCK"]


def test_global_memory_past_one_page_runs_in_the_model(machine):
    """Global memory of more than 1,024 words (issue 26; the test shape has 2,048 in two banks of
    1,024 rows, the 2B shape 4,096 in two of 2,048): the input lies in page 1 (the host wrote
    PAGE(1) before loading it, then PAGE(0) ENDPAGE(1) for the dump), every thread loads and
    stores there and stores in page 0, and the 1,100-word output's dump crosses into page 1: the
    model writes PAGE(1) after word 1,023 and then DUMPADDR(0). Outputs: the spec's (Python) and
    the interpreter's."""
    _, _, prompt, _, (lo, hi) = prepare(K / "pages.cu")
    assert (lo, hi) == (4, 1104)  # a 4-word guard below the first buffer
    read = P.read_all(prompt)
    assert [t for t in read if t.kind in ("PAGE", "ENDPAGE")] == [
        P.Token("PAGE", 1), P.Token("PAGE", 0), P.Token("ENDPAGE", 1)]
    assert min(t.a for t in read if t.kind == "MEMADDR") >= 1104  # the input, after the output
    run = run_machine(K / "pages.cu", model=machine[1], max_tokens=8000)
    assert run.passed, run.mismatches
    _same(run.outputs, run_kernel(K / "pages.cu").outputs)
    toks = P.read_all(run.trace)
    k = toks.index(P.Token("PAGE", 1))
    assert [t.kind for t in toks].count("PAGE") == 1 and toks[k - 2] == P.Token("DUMPADDR", 1023)
    assert toks[k + 1] == P.Token("DUMPADDR", 1024) and run.stats["addresses_checked"] == 16


@pytest.mark.slow  # a long trace (9-49 s); blocks, barriers stay in test_blocks_and_barriers_are_written...
def test_register_pressure_spills_in_the_model(machine):
    """48 values live per thread, 32 registers (issue 26: no kernel refused for register pressure):
    the spill slots live in global memory and the model writes every spill store and reload; the
    outputs equal the spec's values (from the kernel's meaning, in Python) and the interpreter."""
    run = run_machine(K / "pressure.cu", model=machine[1], max_tokens=60000)
    assert run.passed, run.mismatches
    _same(run.outputs, run_kernel(K / "pressure.cu").outputs)
    assert run.stats["spill_words"] > 0 and run.stats["registers"] <= 32


@pytest.mark.slow
def test_double_literal_in_a_float_expression_in_the_weights(machine):
    """halfx: ``x * 0.5 + 1.25`` with a float x is f64 code (cvt.f64.f32, fma.rn.f64,
    cvt.rn.f32.f64); the model runs softfloat64's integer sequences for the three pair ops
    (4 threads, ~1250 warp instructions) and writes the spec's NumPy values, bit for bit."""
    run = run_machine(K / "halfx.cu", model=machine[1], max_tokens=100000)
    sim = _weights_sim(K / "halfx.cu")
    _same(run.outputs, sim.outputs)
    _same(run.outputs, run_kernel(K / "halfx.cu").outputs)
    assert run.passed, run.mismatches
    assert run.stats["warp_instructions"] == sim.stats["warp_instructions"]


@pytest.mark.slow
def test_tiled_matrix_mul_2d_launch_in_the_weights(machine):
    """mm2d: a tiled matrixMul with ``dim3 block(4, 4)`` on a 2-D grid (2, 2): tid.x/y and
    ctaid.x/y come from the circuit's linear indices (softmem.py), shared tiles, barriers, fmaf."""
    run = run_machine(K / "mm2d.cu", model=machine[1], max_tokens=400000)
    _same(run.outputs, run_kernel(K / "mm2d.cu").outputs)
    assert run.passed, run.mismatches


@pytest.mark.slow
def test_repeated_run_identical(machine, vadd):
    again = run_machine(K / "vadd.cu", model=machine[1])
    assert again.trace == vadd.trace


@pytest.mark.slow
def test_damaged_weight_breaks_the_run(machine, vadd, flipped_weight):
    """Negative control: flip one used gate weight of a mid layer; the trace must differ."""
    model = machine[1]
    with flipped_weight(model):
        ids = torch.tensor([vadd.prompt + vadd.trace[:-1]])
        with torch.no_grad():
            got = model(input_ids=ids, use_cache=False).logits[0, len(vadd.prompt) - 1 :].argmax(-1).tolist()
        assert got != vadd.trace


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_kernels_beyond_the_corpus(machine, tmp_path, seed):
    """Random C expression kernels (2 blocks of 32 threads; tests/test_fuzz_kernels.py) inside the
    model, against the independent Python model of C semantics. A kernel whose program does not
    fit the ROM must be refused by name, never run wrong."""
    import random
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    import test_fuzz_kernels as fz

    n = 32  # threads 32..63 exit at once: half the work of the interpreter's fuzz test
    cu, exprs, vals = fz.write_int_kernel(tmp_path, random.Random(1000 + seed), n)
    try:
        prepare(cu)
    except MachineLimitError as exc:
        assert "ROM" in str(exc) or "instructions" in str(exc)
        pytest.skip(f"refused: {exc}")
    from qwengpu.codegen.softmem import run_weights

    budget = 8 * run_weights(cu).stats["passes"] + 10000  # tokens: ~4-5 per lane-group pass
    got = run_machine(cu, model=machine[1], max_tokens=budget).outputs["out"].tolist()
    for k, (text, f) in enumerate(exprs):
        want = [f({"a": vals["a"][i], "b": vals["b"][i], "c": vals["c"][i]}) for i in range(n)]
        assert got[k * n : (k + 1) * n] == want, f"expression {k}: {text}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "path,spec",
    [("kernels/saturate.cu", None), ("kernels/logic_ops.cu", None), ("kernels/dot.cu", None),
     ("tests/machine_weights/kernels/bar.cu", None), ("kernels/int_divmod.cu", None),
     ("kernels/div_rn.cu", None),
     ("tests/machine_weights/kernels/banks.cu", "tests/machine_weights/kernels/banks_one_thread.json")],
)  # fmt: skip
def test_corpus_trace_reproduced_by_one_prefill(machine, path, spec):
    """Replay: the trace written token by token (recurrent path) equals the stock model's argmax at
    every position of one teacher-forced prefill over prompt + trace (chunked path): a float kernel
    with an atomic (dot), two blocks with barriers (bar), integer and float division loops
    (int_divmod, div_rn), and a 618-row program whose passes cross the ROM's halves (BANK tokens)."""
    run = run_machine(
        ROOT / path, None if spec is None else ROOT / spec, model=machine[1], max_tokens=60000
    )
    assert run.passed, run.mismatches
    if "banks" in path:
        assert sum(P.decode(t).kind == "BANK" for t in run.trace) >= 3  # 0 -> 1 -> 0 -> 1: two trips
    ids = torch.tensor([run.prompt + run.trace[:-1]])
    with torch.no_grad():
        got = machine[1](input_ids=ids, use_cache=False).logits[0, len(run.prompt) - 1 :].argmax(-1).tolist()
    assert got == run.trace


def dpmatch_expected(a: list[int], b: list[int]) -> dict[str, list[int]]:
    """kernels/dpmatch.cu's outputs from the PTX ISA's definitions (dp4a.s32.s32 plus the lane
    index, match.any over 8 lanes of ``a & 3``, sad.s32 plus 1), in plain Python."""

    def byte(v: int, k: int) -> int:
        x = (v >> (8 * k)) & 0xFF
        return x - 256 if x >= 128 else x

    def s32(v: int) -> int:
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v

    keys = [x & 3 for x in a]
    return {"dot": [s32(i + sum(byte(x, k) * byte(y, k) for k in range(4)))
                    for i, (x, y) in enumerate(zip(a, b, strict=True))],
            "grp": [sum(1 << j for j in range(len(a)) if keys[j] == keys[i]) for i in range(len(a))],
            "sad": [(abs(x - y) + 1) & 0xFFFFFFFF for x, y in zip(a, b, strict=True)]}


def test_dpmatch_expected_values_are_the_definitions():
    import json

    spec = json.loads((K / "dpmatch.json").read_text())
    data = {x["name"]: x.get("data") for x in spec["args"]}
    assert spec["expected"] == dpmatch_expected(data["a"], data["b"])


@pytest.mark.slow
def test_dp4a_match_and_sad_in_the_weights(machine):
    """dp4a, match.any and sad, lowered to the machine's ops (issue 26), inside the model: outputs
    equal the interpreter, the weights' ISA program and the spec's Python values, bit for bit."""
    run = run_machine(K / "dpmatch.cu", model=machine[1], max_tokens=60000)
    sim = _weights_sim(K / "dpmatch.cu")
    _same(run.outputs, sim.outputs)
    _same(run.outputs, run_kernel(K / "dpmatch.cu").outputs)
    assert run.passed, run.mismatches
    assert run.stats["warp_instructions"] == sim.stats["warp_instructions"]


@pytest.mark.slow
def test_trap_is_written_by_the_model(machine):
    """PTX ``trap`` (``__trap()`` in thread 5): the model writes the FAULT token for that lane, and
    the host's message names the same fault, thread and instruction as the interpreter's."""
    from qwengpu.errors import ExecutionError
    from qwengpu.simt.core import TRAP_MESSAGE

    with pytest.raises(ExecutionError) as info:
        run_machine(K / "trap.cu", model=machine[1], max_tokens=20000)
    msg = str(info.value)
    assert msg.startswith(TRAP_MESSAGE) and "thread (5, 0, 0) of block (0, 0, 0)" in msg, msg
    assert "trap.cu:5" in msg, msg
    with pytest.raises(ExecutionError) as ref:
        run_kernel(K / "trap.cu")
    assert TRAP_MESSAGE in str(ref.value) and "thread (5, 0, 0)" in str(ref.value)


@pytest.mark.slow
def test_a_trap_in_a_block_taken_in_turns_names_the_kernels_thread(machine):
    """Thread 69 of a 128-thread block in turns traps: the model's trace names machine thread 37
    (logical warp 2 is machine warp 1 in turn 0), so the message is the interpreter's, naming
    thread 69 and the source line, with the machine's thread and how the block runs beside it."""
    from qwengpu.errors import ExecutionError
    from qwengpu.simt.core import TRAP_MESSAGE

    with pytest.raises(ExecutionError) as info:
        run_machine(K / "turns_trap.cu", model=machine[1], max_tokens=40000)
    msg = str(info.value)
    assert msg.startswith(TRAP_MESSAGE) and "thread (69, 0, 0)" in msg and "turns_trap.cu:7" in msg, msg
    assert "the machine's thread (37, 0, 0) of block (0, 0, 0)" in msg, msg
    assert "each of the machine's 64 threads takes 2 of a block's threads in turns" in msg, msg
    with pytest.raises(ExecutionError) as ref:
        run_kernel(K / "turns_trap.cu")
    assert str(ref.value) in msg


VADD_RO = """extern "C" __global__ void vadd_ro(const int* a, const int* b, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (a[i] + b[i]) ^ (i << 3);
}
"""


def _vadd_ro(tmp_path, n: int):
    """A vector add of ``n`` ints (64-thread blocks) and what it means, computed with NumPy."""
    import json

    rng = np.random.default_rng(n)
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    with np.errstate(over="ignore"):
        want = (a + b) ^ (np.arange(n, dtype=np.int32) << 3)
    (tmp_path / "vadd_ro.cu").write_text(VADD_RO)
    (tmp_path / "vadd_ro.json").write_text(json.dumps({
        "kernel": "vadd_ro", "grid": n // 64, "block": 64,
        "args": [{"name": "a", "type": "i32*", "data": a.tolist()},
                 {"name": "b", "type": "i32*", "data": b.tolist()},
                 {"name": "out", "type": "i32*", "data": [0] * n}, {"name": "n", "type": "i32", "value": n}],
        "outputs": ["out"]}))
    return tmp_path / "vadd_ro.cu", want


@pytest.fixture(scope="module")
def ro_machine():
    """(shape, model): the test shape with read-only words (``configs.read_only_test_shape``: not the
    default test shape, whose mounts must stay at width 2048); compiled once (~80 s), so slow."""
    from qwengpu.model.configs import read_only_test_shape

    shape = read_only_test_shape()
    return shape, machine_model(machine_config("test"), shape)[1]


@pytest.mark.slow
def test_inputs_no_store_reaches_take_the_read_only_words_when_the_writable_are_full(ro_machine, tmp_path):
    """Read-only words (``MachineShape.ro_words``, four to a DeltaNet row): a vector add of 768 ints
    needs 2,316 words with its guards, more than the test shape's 2,048 writable ones; its two inputs,
    which no store reaches (``ptx.readonly``), go above them, loaded a row (MEMADDR + 12 chunks) per
    four words, and the model reads them through the one read port: the output is what the kernel
    means, bit for bit. A launch that fits the writable words keeps its placement (and its prompt)."""
    from qwengpu.simt.memory import GLOBAL_BASE

    shape, model = ro_machine
    cu, want = _vadd_ro(tmp_path, 768)
    _, _, prompt, gmem, _ = prepare(cu, shape=shape)
    placed = {b.name: (b.start - GLOBAL_BASE) // 4 for b in gmem.buffers}
    assert placed["out"] < shape.gmem_words <= placed["a"] < placed["b"] < shape.gmem_words + shape.ro_words
    assert {b.name for b in gmem.buffers if b.readonly} == {"a", "b"}
    r = P.Reader()
    toks = [r.read(t) for t in prompt]
    rows = [i for i, t in enumerate(toks) if t.kind == "MEMADDR" and toks[i + 12].kind == "DATA"
            and toks[i + 12].a == 11]
    assert len(rows) == 2 * 768 // 4  # every input row: one MEMADDR and 12 chunks
    run = run_machine(cu, model=model, shape=shape, max_tokens=80_000)
    assert run.passed and run.outputs["out"].tolist() == want.tolist()
    small, _ = _vadd_ro(tmp_path, 64)
    assert not any(b.readonly for b in prepare(small, shape=shape)[3].buffers)


@pytest.mark.slow
def test_a_store_into_a_read_only_input_is_refused_by_the_bounds_watch(ro_machine, tmp_path, monkeypatch):
    """The backstop behind the proof: were an input the kernel stores to placed in the read-only
    words (here forced, by replacing the proof), the circuit would drop the store; the bounds watch
    stops the launch first, naming the thread, the instruction and the buffer."""
    from qwengpu.errors import ExecutionError
    from qwengpu.ptx import readonly

    cu, _ = _vadd_ro(tmp_path, 768)
    cu.write_text(VADD_RO.replace("^ (i << 3);", "^ (i << 3); ((int*)b)[i] = 7;"))
    assert readonly.read_only_args.__name__ == "read_only_args"
    monkeypatch.setattr(readonly, "read_only_args", lambda spec, fn: ["a", "b"])
    with pytest.raises(ExecutionError, match=r"thread \d+, pc \d+: a store into 'b'.*read-only"):
        run_machine(cu, model=ro_machine[1], shape=ro_machine[0], max_tokens=80_000)
