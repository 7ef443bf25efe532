"""Predefined identifiers of the PTX ISA: WARP_SZ is an immediate, every special register the
interpreter models has the value the launch geometry gives, and the others are refused by name."""

from __future__ import annotations

import pytest

from qwengpu.errors import PTXError

from .conftest import run_ptx

READS = [
    "%tid.x", "%tid.y", "%ntid.x", "%ntid.y", "%ctaid.x", "%nctaid.x", "%laneid", "%warpid", "%nwarpid",
    "%lanemask_lt", "%lanemask_ge", "%lanemask_eq", "%clusterid.x", "%nclusterid.x", "%cluster_ctaid.x",
    "%cluster_nctaid.x", "%cluster_ctarank", "%cluster_nctarank", "%dynamic_smem_size", "%total_smem_size",
    "%smid", "%nsmid",
    "%current_graph_exec", "WARP_SZ",
]  # fmt: skip


def _kernel(reads: list[str]) -> str:
    k = len(reads) + 1
    lines = [
        ".version 8.0", ".target sm_90", ".address_size 64",
        ".extern .shared .align 4 .b8 dyn[];",
        ".visible .entry k(.param .u64 k_param_0)", "{",
        ".reg .b32 %r<64>;", ".reg .b64 %rd<8>;", ".reg .pred %p<2>;", ".shared .align 4 .b8 st[12];",
        "ld.param.u64 %rd1, [k_param_0];", "cvta.to.global.u64 %rd1, %rd1;",
        # linear thread id across the grid: (ctaid.x * ntid.y + tid.y) * ntid.x + tid.x
        "mov.u32 %r1, %ctaid.x;", "mov.u32 %r2, %ntid.y;", "mov.u32 %r3, %tid.y;",
        "mad.lo.s32 %r4, %r1, %r2, %r3;",
        "mov.u32 %r5, %ntid.x;", "mov.u32 %r6, %tid.x;", "mad.lo.s32 %r7, %r4, %r5, %r6;",
        f"mul.lo.s32 %r8, %r7, {4 * k};", "cvt.u64.u32 %rd2, %r8;", "add.s64 %rd3, %rd1, %rd2;",
    ]  # fmt: skip
    for j, name in enumerate(reads):
        lines += [f"mov.u32 %r{20 + j}, {name};", f"st.global.u32 [%rd3+{4 * j}], %r{20 + j};"]
    lines += [
        "mov.pred %p1, %is_explicit_cluster;", "selp.u32 %r9, 1, 0, %p1;",
        f"st.global.u32 [%rd3+{4 * len(reads)}], %r9;", "ret;", "}",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_special_registers_follow_the_launch():
    grid, bx, by, dyn = 3, 4, 10, 24  # 40 threads per block: two warps, the second one partial
    static = 12  # the kernel's .shared st[12]; the dynamic part starts 16-byte aligned after it
    k = len(READS) + 1
    spec = {
        "kernel": "k",
        "grid": grid,
        "block": [bx, by, 1],
        "shared_bytes": dyn,
        "args": [{"name": "out", "type": "u32*", "size": grid * bx * by * k}],
    }
    out = run_ptx(_kernel(READS), spec)["out"].reshape(-1, k).tolist()
    for b in range(grid):
        for ty in range(by):
            for tx in range(bx):
                lin = ty * bx + tx
                lane = lin % 32
                want = {
                    "%tid.x": tx, "%tid.y": ty, "%ntid.x": bx, "%ntid.y": by, "%ctaid.x": b,
                    "%nctaid.x": grid,
                    "%laneid": lane, "%warpid": lin // 32, "%nwarpid": 2, "%lanemask_lt": (1 << lane) - 1,
                    "%lanemask_ge": (0xFFFFFFFF << lane) & 0xFFFFFFFF, "%lanemask_eq": 1 << lane,
                    "%clusterid.x": b, "%nclusterid.x": grid, "%cluster_ctaid.x": 0, "%cluster_nctaid.x": 1,
                    "%cluster_ctarank": 0, "%cluster_nctarank": 1, "%dynamic_smem_size": 16 - static + dyn,
                    "%total_smem_size": 16 + dyn,
                    "%smid": 0, "%nsmid": 1, "%current_graph_exec": 0,
                    "WARP_SZ": 32,
                }  # fmt: skip
                row = out[(b * by + ty) * bx + tx]
                assert dict(zip(READS, row[:-1], strict=True)) == want
                assert row[-1] == 0  # %is_explicit_cluster: no cluster launch


@pytest.mark.parametrize(
    "name, why",
    [
        ("%pm3", "performance-monitoring"),
        ("%envreg5", "environment"),
        ("%reserved_smem_offset_begin", "reserved"),
    ],
)
def test_unmodelled_special_registers_are_refused(name: str, why: str):
    with pytest.raises(
        PTXError, match=rf"PTX line \d+: special register {name} is not supported \({'.*' + why}"
    ):
        run_ptx(
            _kernel([name]),
            {"kernel": "k", "grid": 1, "block": 1, "args": [{"name": "out", "type": "u32*", "size": 2}]},
        )
