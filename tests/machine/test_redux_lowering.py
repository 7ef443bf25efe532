"""``redux.sync`` (``__reduce_{add,min,max,and,or,xor}_sync``, sm_80) on the machine: the ISA
simulator and the weights form give the interpreter's bits, and all equal a Python reduction over
the active member lanes, with partial member masks and divergence."""

from __future__ import annotations

import random

import pytest
from machine_helpers import assert_same, run_interp

from qwengpu.codegen.pipeline import simulate
from qwengpu.codegen.soft import Options, simulate_for_weights
from qwengpu.cuda import compile_cuda
from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

SOURCE = r"""
extern "C" __global__ void k(const unsigned *v, const unsigned *mask, unsigned *out, int cut) {
    unsigned i = threadIdx.x;
    unsigned x = v[i];
    int s = (int)x;
    if ((int)i < cut && ((mask[0] >> i) & 1)) {
        out[8 * i + 0] = __reduce_add_sync(mask[0], x);
        out[8 * i + 1] = __reduce_min_sync(mask[0], x);
        out[8 * i + 2] = __reduce_max_sync(mask[0], x);
        out[8 * i + 3] = (unsigned)__reduce_min_sync(mask[0], s);
        out[8 * i + 4] = (unsigned)__reduce_max_sync(mask[0], s);
        out[8 * i + 5] = __reduce_and_sync(mask[0], x);
        out[8 * i + 6] = __reduce_or_sync(mask[0], x);
        out[8 * i + 7] = __reduce_xor_sync(mask[0], x);
    }
}
"""


def reference(v: list[int], mask: int, cut: int) -> list[int]:
    members = [j for j in range(32) if j < cut and (mask >> j) & 1]
    vals = [v[j] for j in members]
    sv = [x - (1 << 32) if x >= 1 << 31 else x for x in vals]
    a, o, x = 0xFFFFFFFF, 0, 0
    for y in vals:
        a, o, x = a & y, o | y, x ^ y
    row = [sum(vals) & 0xFFFFFFFF, min(vals), max(vals), min(sv) & 0xFFFFFFFF, max(sv) & 0xFFFFFFFF, a, o, x]
    out = [0] * (8 * 32)
    for i in members:
        out[8 * i: 8 * i + 8] = row
    return out


@pytest.fixture(scope="module")
def module():
    return parse_ptx(compile_cuda(SOURCE, filename="redux.cu", arch="compute_80"))


CASES = [
    (list(range(32)), 0xFFFFFFFF, 32),
    ([0xFFFFFFFF - i for i in range(32)], 0x0F0F0F0F, 32),
    ([(i * 0x9E3779B9) & 0xFFFFFFFF for i in range(32)], 0xFFFFFFFF, 17),
    ([7] * 32, 0x00000001, 32),
]


@pytest.mark.parametrize("case", range(len(CASES) + 2))
def test_redux_on_the_machine_equals_the_definition(module, case: int) -> None:
    if case < len(CASES):
        v, mask, cut = CASES[case]
    else:
        rng = random.Random(case)
        v = [rng.getrandbits(32) for _ in range(32)]
        mask, cut = rng.getrandbits(32) | 1, rng.randint(1, 32)
    spec = parse_spec({"kernel": "k", "grid": 1, "block": 32,
                       "args": [{"name": "v", "type": "u32*", "data": v},
                                {"name": "mask", "type": "u32*", "data": [mask]},
                                {"name": "out", "type": "u32*", "size": 256},
                                {"name": "cut", "type": "i32", "value": cut}],
                       "outputs": ["out"]})
    ref = run_interp(module, spec)
    assert [int(x) for x in ref["out"]] == reference(v, mask, cut)
    got, _, _ = simulate(module, spec)
    assert_same(ref, got)
    weights, _, _ = simulate_for_weights(module, spec, options=Options())
    assert_same(ref, weights)
