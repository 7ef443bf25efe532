"""Blocks of more than the 64 threads the machine holds at once (issue 26: 256 threads per block,
1,024 if it fits): a kernel without block barriers runs each block as parts, machine blocks one
after another, with ``tid`` and ``ctaid`` recomputed from the machine's indices
(``codegen.softmem.block_parts``). Here on the ISA simulator exactly as the weights run it
(``softmem.run_weights``: the allocated program, the machine's 1-D launch of parts); the same
launches inside the 2B model are the slow ``tests/machine_weights/test_multiplier_2b.py::
test_blocks_of_more_than_64_threads_in_the_2b_model``, and one on the test shape's model is in the
default run (``test_machine_weights.py``). Expected values come from Python in the JSON files.
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

K = Path(__file__).resolve().parents[1] / "machine_weights" / "kernels"
CU = K / "big_blocks.cu"

# (spec, launch threads per block, parts the machine runs each block in)
LAUNCHES = [("vadd", 128, 2), ("hist", 1024, 16), ("tile2d", 256, 4), ("warpsum", 96, 3), ("odd", 100, 2)]


@pytest.mark.parametrize("name,threads,parts", LAUNCHES, ids=[x[0] for x in LAUNCHES])
def test_a_big_block_runs_in_parts_exactly(name: str, threads: int, parts: int) -> None:
    """vadd: 2 blocks of 128 threads; hist: 1,024 threads adding into 16 counters with atomics
    (every part adds to the same words); tile2d: 16 x 16 blocks of a 2 x 1 grid (tid.x/tid.y from
    the part's linear index); warpsum: 96 threads summing each warp by shuffles (parts of whole
    warps); odd: 100 threads and no warp operations (2 parts of 50). The outputs are the spec's and
    the interpreter's, bit for bit; the machine ran ``parts`` blocks of ``threads / parts`` per
    launch block."""
    js = K / f"big_blocks_{name}.json"
    spec = json.loads(js.read_text())
    run = run_weights(CU, js)
    assert not run.mismatches, run.mismatches
    ref = run_kernel(CU, js)
    for k in spec["outputs"]:
        got = np.asarray(run.outputs[k]).view(np.uint32).tolist()
        assert got == np.asarray(ref.outputs[k]).view(np.uint32).tolist(), k
        assert got == np.asarray(spec["expected"][k], dtype=np.int64).astype(np.uint32).tolist(), k
    grid = spec["grid"] if isinstance(spec["grid"], list) else [spec["grid"], 1, 1]
    assert run.stats["blocks"] == int(np.prod(grid)) * parts
    # the host feeds the machine's launch: NTHREADS = one part, NBLOCKS = every part of every block
    from qwengpu.spec import load_spec

    prompt = prepare(CU, js)[2]
    assert launch_shape(prompt, load_spec(js)) == (threads // parts, parts)


def _spec(tmp_path: Path, src: str, kernel: str, block: int, grid: int = 1, words: int = 8) -> Path:
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps({
        "kernel": kernel, "grid": grid, "block": block,
        "args": [{"name": "out", "type": "i32*", "size": words}], "outputs": ["out"]}))
    return tmp_path / "k.cu"


BARRED = ('extern "C" __global__ void barred(int* out) {\n  __shared__ int s[128];\n'
          '  s[threadIdx.x] = threadIdx.x;\n  __syncthreads();\n'
          '  out[threadIdx.x % 8] = s[127 - threadIdx.x];\n}\n')
WARP = ('extern "C" __global__ void w(int* out) {\n'
        '  out[threadIdx.x % 8] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);\n}\n')
PLAIN = 'extern "C" __global__ void plain(int* out) { out[threadIdx.x % 8] = 1; }\n'


@pytest.mark.parametrize(
    "src,kernel,block,grid,msg",
    [
        (BARRED, "barred", 112, 1, r"112 threads per block and its kernel waits at block barriers: .* "
                                   r"needs a multiple of 32 threads"),
        (WARP, "w", 100, 1, r"100 threads per block and kernel w uses warp operations or shared memory: .* "
                            r"100 is not a multiple of 32"),
        (PLAIN, "plain", 1025, 1, r"1025 threads per block; the machine runs at most 1024"),
        (PLAIN, "plain", 256, 16384, r"65536 blocks for the machine \(4 parts of 64 threads each\); it runs "
                                     r"at most 65535"),
    ],
    ids=["barrier", "warp-ops-ragged", "over-1024", "parts-over-65535-blocks"],
)
def test_what_cannot_run_in_parts_is_refused_by_name(tmp_path, src, kernel, block, grid, msg) -> None:
    """A block with barriers runs as whole warps taking turns (``codegen.turns``: a multiple of 32
    threads); warp operations need parts of whole warps; CUDA's 1,024 threads per block; and the
    machine's 65,535 blocks count every part."""
    with pytest.raises(MachineLimitError, match=msg):
        prepare(_spec(tmp_path, src, kernel, block, grid))


def test_a_block_of_64_threads_or_fewer_is_one_part(tmp_path) -> None:
    """Launches that fit the machine run as before: one machine block per block (the corpus and the
    external suite keep their programs: bench/prompt_hashes.py, 136 of 136 identical)."""
    cu = _spec(tmp_path, PLAIN, "plain", 64, grid=3)
    from qwengpu.spec import load_spec

    assert launch_shape(prepare(cu)[2], load_spec(tmp_path / "k.json")) == (64, 1)
