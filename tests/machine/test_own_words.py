"""A thread's reload of the word it stored, across barriers only, is the stored register
(``softmem.forward_own_words``) when no other thread's store can reach that word.

Checked on the ISA simulator as the weights run it (``run_weights`` with the engine's options, the
2B shape's and the test shape's), every output against Python: the Hillis-Steele scan of the
corpus (each thread keeps its element in shared memory across every barrier) loses its six
reloads and passes; a kernel where a neighbour's store (one word over) or one thread's store to a
fixed word reaches another thread's word between the store and the reload keeps every reload, and
its outputs show the neighbour's value (forwarding there would be wrong)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from qwengpu.codegen.soft import Options
from qwengpu.codegen.softcore import unit_options
from qwengpu.codegen.softmem import run_weights
from qwengpu.model.configs import shape_named

SHAPES = {name: Options(**unit_options(shape_named(name))) for name in ("2b", "test")}
KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _reloads(prog) -> int:
    """Loads of shared memory (mapped to the top of the words: offsets above 0xF000 bytes)."""
    return sum(1 for x in prog.code
               if x.op == "ld" and (x.mod("base") or 0) + (x.mod("off") or 0) > 0x7F0000F000)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_scan_keeps_its_own_element_in_its_register(shape: str) -> None:
    """Six steps and the final read: seven reloads of the thread's own element go; the outputs are
    the spec's (its expected values: the same tree of float additions, in NumPy), bit for bit."""
    cu, spec = KERNELS / "scan_hillis_steele.cu", KERNELS / "scan_hillis_steele.json"
    runs = {f: run_weights(cu, spec, options=replace(SHAPES[shape], forward_own_words=f))
            for f in (False, True)}
    for r in runs.values():
        assert r.passed, r.mismatches
    out = {f: r.outputs["out"].view(np.uint32) for f, r in runs.items()}
    assert np.array_equal(out[True], out[False])
    assert _reloads(runs[True].program) == _reloads(runs[False].program) - 7
    assert runs[True].stats["passes"] < runs[False].stats["passes"]


NEIGHBOUR = """
extern "C" __global__ void k(const int* in, int* out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    if (t > 0) s[t - 1] = in[t] * 3;   // the previous thread's word
    s[t] = in[t] + 1;                  // its own word
    __syncthreads();
    out[t] = s[t];
}
"""

FIXED = """
extern "C" __global__ void k(const int* in, int* out)
{
    __shared__ int s[64];
    int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    if (t == 0) s[5] = 77;     // one thread, a fixed word
    __syncthreads();
    out[t] = s[t];
}
"""
N = 64
X = [(i * 7919) % 1000 - 500 for i in range(N)]


def _run(tmp_path: Path, src: str, shape: str):
    (tmp_path / "k.cu").write_text(src)
    (tmp_path / "k.json").write_text(json.dumps({
        "kernel": "k", "grid": 1, "block": N, "args": [
            {"name": "in", "type": "i32*", "data": X}, {"name": "out", "type": "i32*", "size": N}],
        "outputs": ["out"]}))
    return run_weights(tmp_path / "k.cu", tmp_path / "k.json", options=SHAPES[shape])


@pytest.mark.parametrize("shape", SHAPES)
def test_a_word_a_neighbour_stores_to_is_reloaded(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every store is 4 tid + K, but one is a word below (K - 4). Warps run one at a time until a
    barrier (the interpreter's order, which the machine keeps): warp 1's thread 32 writes word 31
    after warp 0's thread 31 stored its own, so thread 31 must reload it and read 3 * in[32]. The
    reload stays; forwarding it anyway (the distance check made blind: threads = 1) gives thread 31
    its own value, which the outputs catch."""
    from qwengpu.codegen import softmem

    want = [v + 1 for v in X]
    want[31] = 3 * X[32]
    assert list(_run(tmp_path, NEIGHBOUR, shape).outputs["out"]) == want
    real = softmem.forward_own_words
    monkeypatch.setattr(softmem, "forward_own_words", lambda prog, threads: real(prog, 1))
    got = list(_run(tmp_path, NEIGHBOUR, shape).outputs["out"])
    assert got[31] == X[31] + 1 and got != want  # the control: forwarded, wrong


@pytest.mark.parametrize("shape", SHAPES)
def test_a_word_one_thread_stores_to_is_reloaded(shape: str, tmp_path: Path) -> None:
    """A store at a fixed word (not 4 tid + K) may reach any thread's word: nothing is forwarded."""
    want = list(X)
    want[5] = 77
    r = _run(tmp_path, FIXED, shape)
    assert list(r.outputs["out"]) == want
