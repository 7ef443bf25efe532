"""``elect.sync`` and ``griddepcontrol`` (sm_90) on the machine: the ISA simulator and the weights
form give the interpreter's bits, which equal the PTX ISA's definition (the lowest active member
lane leads; griddepcontrol is a no-op for a single launch)."""

from __future__ import annotations

import pytest
from machine_helpers import assert_same, run_interp

from qwengpu.codegen.pipeline import simulate
from qwengpu.codegen.soft import Options, simulate_for_weights
from qwengpu.ptx.parser import parse_ptx
from qwengpu.spec import parse_spec

PTX = """.version 9.5
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_out, .param .u32 p_mask, .param .u32 p_cut)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<6>;
    griddepcontrol.wait;
    ld.param.u64 %rd1, [p_out];
    ld.param.u32 %r1, [p_mask];
    ld.param.u32 %r2, [p_cut];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd3, %r3, 8;
    add.s64 %rd4, %rd2, %rd3;
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra DONE;
    elect.sync %r4|%p2, %r1;
    selp.u32 %r5, 1, 0, %p2;
    st.global.u32 [%rd4], %r4;
    st.global.u32 [%rd4+4], %r5;
    elect.sync _|%p3, -1;
    @%p3 st.global.u32 [%rd4+4], 7;
DONE:
    griddepcontrol.launch_dependents;
    ret;
}
"""


def reference(mask: int, cut: int) -> list[int]:
    active = [j for j in range(32) if j < cut]
    members = [j for j in active if (mask >> j) & 1]
    leader = members[0] if members else 0
    out = [0] * 64
    for i in active:
        out[2 * i] = leader
        out[2 * i + 1] = 7 if i == active[0] else int(i == leader)
    return out


@pytest.mark.parametrize("mask,cut", [(0xFFFFFFFF, 32), (0xFFFF0000, 32), (0x80000000, 20), (0, 32),
                                      (0x00F0F000, 13), (0xFFFFFFFE, 1)])
def test_elect_on_the_machine_equals_the_definition(mask: int, cut: int) -> None:
    module = parse_ptx(PTX)
    spec = parse_spec({"kernel": "k", "grid": 1, "block": 32,
                       "args": [{"name": "out", "type": "u32*", "size": 64},
                                {"name": "mask", "type": "u32", "value": mask},
                                {"name": "cut", "type": "u32", "value": cut}],
                       "outputs": ["out"]})
    ref = run_interp(module, spec)
    assert [int(x) for x in ref["out"]] == reference(mask, cut)
    got, _, _ = simulate(module, spec)
    assert_same(ref, got)
    weights, _, _ = simulate_for_weights(module, spec, options=Options())
    assert_same(ref, weights)
