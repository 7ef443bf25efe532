"""Lanes waiting at a barrier keep their PC while the other lanes of the warp diverge.

Found with Rodinia's Needleman-Wunsch (see test_addresses.py): the interpreter materialized the
converged PC into *every* lane when a branch diverged, so lanes parked at a barrier resumed at the
branch instead of after the barrier."""

from __future__ import annotations

from .conftest import run_ptx

PTX = r"""
.version 8.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
    setp.lt.u32 %p1, %r1, 2;
    @%p1 bra WORK;
    bar.sync 0;
    add.u32 %r2, %r2, 100;
    bra.uni DONE;
WORK:
    setp.eq.u32 %p2, %r1, 0;
    @%p2 bra W0;
    add.u32 %r2, %r2, 10;
W0:
    add.u32 %r2, %r2, 1;
    bar.sync 0;
DONE:
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""


def test_waiting_lanes_keep_their_pc_when_others_diverge():
    spec = {
        "kernel": "k",
        "grid": 1,
        "block": 4,
        "args": [{"name": "out", "type": "u32*", "size": 4}],
        "outputs": ["out"],
    }
    # lanes 2 and 3 wait at the first barrier, then add 100; lane 0 adds 1, lane 1 adds 10 + 1
    assert run_ptx(PTX, spec)["out"].tolist() == [1, 11, 100, 100]
