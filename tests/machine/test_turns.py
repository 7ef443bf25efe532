"""Blocks of more than 64 threads that wait at block barriers (issue 26: 256 threads per block):
the machine's threads take the block's threads in turns (``codegen/turns.py``). Here on the ISA
simulator exactly as the weights run it (``softmem.run_weights``: the allocated program, one
machine block of 32 or 64 threads per launch block); one launch inside the test shape's model is
``tests/machine_weights/test_machine_weights.py::test_a_block_with_barriers_of_128_threads_runs_in_the_model``.
Expected values come from Python in the JSON files (``tests/machine_weights/kernels/turns_*.json``);
every output is also compared with the interpreter's bit for bit, which for the tickets kernel (the
values ``atomicAdd`` returns) pins the order the threads ran in.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qwengpu.codegen.softmem import run_weights
from qwengpu.errors import MachineLimitError
from qwengpu.runner import run_kernel
from qwengpu.runtime.engine import launch_shape, prepare
from qwengpu.spec import load_spec

K = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels"
CU = K / "turns.cu"

# (spec, machine threads per block, turns: logical threads per machine thread)
LAUNCHES = [("reverse", 64, 2), ("tree256", 64, 4), ("tree128", 64, 2), ("tree96", 32, 3),
            ("transpose", 64, 4), ("warpsum", 64, 3), ("tickets", 64, 2)]


@pytest.mark.parametrize("name,machine,turns", LAUNCHES, ids=[x[0] for x in LAUNCHES])
def test_a_block_with_barriers_runs_in_turns_exactly(name: str, machine: int, turns: int) -> None:
    """reverse: 128 ints reversed through shared memory across one barrier; tree256: 2 blocks of
    256 threads summing 700 ints through shared memory (8 barriers in a loop, shared memory cleared
    between blocks); tree128: one block of 128; tree96: 3 warps (32
    machine threads, 3 turns); transpose: the padded 16 x 17 tile with 2-D blocks of 16 x 16 in a
    2 x 2 grid; warpsum: 2 blocks of 192 threads (64 machine threads, 3 turns) reducing with
    shuffles, then through shared memory; tickets: 128
    threads, 28 leave before the barriers, ``atomicAdd`` tickets, a local array live across a
    barrier and ``__syncthreads_count``."""
    js = K / f"turns_{name}.json"
    spec = json.loads(js.read_text())
    run = run_weights(CU, js)
    assert not run.mismatches, run.mismatches
    ref = run_kernel(CU, js)
    outs = spec["outputs"]
    for k in outs:
        got = np.asarray(run.outputs[k]).view(np.uint32).tolist()
        assert got == np.asarray(ref.outputs[k]).view(np.uint32).tolist(), k
        if k in spec["expected"]:
            typ = next(a["type"] for a in spec["args"] if a["name"] == k)
            want = spec["expected"][k]
            bits = (np.asarray(want, dtype=np.float32).view(np.uint32) if typ == "f32*"
                    else np.asarray(want, dtype=np.int64).astype(np.uint32))
            assert got == bits.tolist(), k
    if name == "tickets":  # each thread its own ticket: a permutation of the running sums
        assert sorted(run.outputs["ticket"].tolist()) == sorted(t * (t + 1) // 2 for t in range(100))
    grid = spec["grid"] if isinstance(spec["grid"], list) else [spec["grid"], 1, 1]
    assert run.stats["blocks"] == int(np.prod(grid))  # one machine block per block
    # its bookkeeping: 3 words per machine thread and one per logical thread
    assert f"turns {3 * machine + machine * turns} words" in run.stats["plan"]
    prompt = prepare(CU, js)[2]
    assert launch_shape(prompt, load_spec(js)) == (machine, 1)


def _spec(tmp_path: Path, src: str, block: int, words: int = 8) -> Path:
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps({
        "kernel": "k", "grid": 1, "block": block,
        "args": [{"name": "out", "type": "i32*", "size": words}], "outputs": ["out"]}))
    return tmp_path / "k.cu"


LIVE = ('extern "C" __global__ void k(int* out) {\n  __shared__ int s[1024];\n  int t = threadIdx.x;\n'
        + "".join(f"  int v{k} = out[(t + {k}) & 15];\n" for k in range(16))
        + '  s[t] = t;\n  __syncthreads();\n  out[t & 15] = s[1023 - t]'
        + "".join(f" + v{2 * k} * v{2 * k + 1}" for k in range(8)) + ';\n}\n')


def test_what_the_turns_cannot_hold_is_refused_by_name(tmp_path) -> None:
    """The values live across a barrier are kept per thread in global memory (those loaded from
    memory: the thread index and what derives from it are recomputed): 1,024 threads with 16
    loaded values live do not fit the 2B machine's 16,384 words beside 1,024 words of shared memory,
    and the refusal names the regions."""
    with pytest.raises(MachineLimitError, match=r"values saved at barriers \d+ words"):
        prepare(_spec(tmp_path, LIVE, 1024, words=16))


def test_values_that_can_be_recomputed_are_not_saved() -> None:
    """In the tree sum four values are live across its barriers: the thread index, 4 x it (the
    shared address), the output pointer (a parameter) and the loop counter. Only the counter is
    saved (one word per thread of the 256); the others are recomputed after the barrier from the
    turn's thread word and the parameter bank, and the result is still the interpreter's."""
    js = K / "turns_tree256.json"
    run = run_weights(CU, js)
    assert "values saved at barriers 256 words" in run.stats["plan"], run.stats["plan"]
    assert run.outputs["out"].tolist() == run_kernel(CU, js).outputs["out"].tolist()
