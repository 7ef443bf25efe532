"""``match.any.sync`` / ``match.all.sync`` on the machine: the ISA simulator and the weights form give
the interpreter's bits, and both equal an independent Python reference of the PTX ISA's definition
(over the active lanes that the member mask names), with partial masks and divergence."""

from __future__ import annotations

import random

import numpy as np
import pytest
from machine_helpers import assert_same, run_interp

from qwengpu.codegen.pipeline import simulate
from qwengpu.codegen.soft import Options, simulate_for_weights
from qwengpu.cuda import compile_cuda
from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

SOURCE = r"""
extern "C" __global__ void k(const unsigned *v, const unsigned *mask, unsigned *any, unsigned *all,
                             int *pred, int cut) {
    unsigned i = threadIdx.x;
    unsigned x = v[i];
    if ((int)i < cut) {                      // divergence: only lanes below cut take part
        any[i] = __match_any_sync(mask[0], x);
        int p;
        all[i] = __match_all_sync(mask[0], x, &p);
        pred[i] = p;
    }
}
"""


def reference(v: list[int], mask: int, cut: int) -> tuple[list[int], list[int], list[int]]:
    """The PTX ISA's match over the active lanes (i < cut) whose bit is set in the member mask."""
    n = len(v)
    members = [j for j in range(n) if j < cut and (mask >> j) & 1]
    any_, all_, pred = [0] * n, [0] * n, [0] * n
    uni = len({v[j] for j in members}) <= 1
    mmask = sum(1 << j for j in members)
    for i in range(min(n, cut)):
        any_[i] = sum(1 << j for j in members if v[j] == v[i])
        all_[i] = mmask if uni else 0
        pred[i] = int(uni)
    return any_, all_, pred


def _spec(v: list[int], mask: int, cut: int) -> dict:
    n = len(v)
    return {"kernel": "k", "grid": 1, "block": n,
            "args": [{"name": "v", "type": "u32*", "data": v},
                     {"name": "mask", "type": "u32*", "data": [mask]},
                     {"name": "any", "type": "u32*", "size": n},
                     {"name": "all", "type": "u32*", "size": n},
                     {"name": "pred", "type": "i32*", "size": n},
                     {"name": "cut", "type": "i32", "value": cut}],
            "outputs": ["any", "all", "pred"]}


CASES = [
    ([7] * 32, 0xFFFFFFFF, 32),                         # one value: all match
    (list(range(32)), 0xFFFFFFFF, 32),                  # all distinct: 32 loop trips
    ([i % 3 for i in range(32)], 0xFFFFFFFF, 32),       # three groups
    ([i % 3 for i in range(32)], 0x0000FFF0, 32),       # a partial member mask
    ([i % 5 for i in range(32)], 0xFFFFFFFF, 13),       # divergence: lanes 13.. inactive
    ([5, 5, 5, 9] * 8, 0xAAAAAAAA, 32),                 # odd lanes only
    ([1] * 32, 0x00000000, 32),                         # no members
]


@pytest.fixture(scope="module")
def module():
    return parse_ptx(compile_cuda(SOURCE, filename="match.cu"))


@pytest.mark.parametrize("case", range(len(CASES) + 2))
def test_match_on_the_machine_equals_the_definition(module, case: int) -> None:
    if case < len(CASES):
        v, mask, cut = CASES[case]
    else:
        rng = random.Random(case)
        v = [rng.choice([0, 1, 2, 0xFFFFFFFF, rng.getrandbits(32)]) for _ in range(32)]
        mask, cut = rng.getrandbits(32), rng.randint(1, 32)
    spec = parse_spec(_spec(v, mask, cut))
    ref = run_interp(module, spec)
    want = reference(v, mask, cut)
    assert [int(x) for x in ref["any"]] == want[0]
    assert [int(x) for x in ref["all"]] == want[1]
    assert [int(x) for x in ref["pred"]] == want[2]
    got, _, _ = simulate(module, spec)
    assert_same(ref, got)
    weights, _, _ = simulate_for_weights(module, spec, options=Options())
    assert_same(ref, weights)


def test_match_64_bit_is_a_named_machine_limit() -> None:
    src = SOURCE.replace("unsigned x = v[i];", "unsigned long long x = v[i];")
    mod = parse_ptx(compile_cuda(src, filename="match64.cu"))
    spec = parse_spec(_spec([1] * 32, 0xFFFFFFFF, 32))
    with pytest.raises(Exception, match="64-bit match"):
        simulate(mod, spec)
    assert np.array_equal(run_interp(mod, spec)["all"], np.full(32, 0xFFFFFFFF, dtype=np.uint32))
