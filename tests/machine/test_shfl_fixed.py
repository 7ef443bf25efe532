"""Shuffles by constant operands over a whole warp (``softmem._shfl_fixed``): the source word's
address from the thread index, a guarded pair of loads instead of the source lane's select.

Checked on the ISA simulator as the weights run it (``simulate_weights``) against the interpreter
and against the PTX rule written out here (``_src``: the source lane, or the lane itself when the
source is out of range; a lane past the launch's threads reads 0): every mode (``down``, ``up``,
``bfly``, ``idx``), offsets 0, 1, 5, 16 and 31, clamps 31, 0 and in between (``c`` = 15, 3: a
bound inside the warp), under divergence (only some lanes shuffle) and in a partial second warp;
a shuffle of a full warp takes fewer rows and passes than the general sequence."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from qwengpu.codegen.softmem import simulate_weights
from qwengpu.spec import parse_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_helpers import HEADER, run_interp  # noqa: E402

from qwengpu.ptx.parser import parse_ptx  # noqa: E402

M32 = 0xFFFFFFFF
FORMS = [("down", 1, 31), ("down", 16, 31), ("down", 5, 15), ("down", 0, 31), ("down", 31, 31),
         ("up", 1, 0), ("up", 16, 0), ("up", 5, 3), ("up", 31, 0),
         ("bfly", 1, 31), ("bfly", 16, 31), ("bfly", 5, 31), ("bfly", 7, 15),
         ("idx", 0, 31), ("idx", 5, 31), ("idx", 31, 31), ("idx", 9, 15)]  # fmt: skip
BLOCK, GRID = 40, 2  # the second warp of a block has 8 lanes: the missing ones read 0


def _src(mode: str, lane: int, b: int, c: int) -> int:
    """PTX ``shfl.sync`` with no segment bits: the lane ``lane`` reads."""
    if mode == "up":
        j, ok = lane - b, lane - b >= c
    elif mode == "down":
        j, ok = lane + b, lane + b <= c
    elif mode == "bfly":
        j, ok = lane ^ b, (lane ^ b) <= c
    else:
        j, ok = b, b <= c
    return j if ok else lane


def _ptx(forms: list[tuple[str, int, int]], every_lane: bool) -> str:
    """out[k * n + t] = shfl(mode_k, v, b_k, c_k) with v = 3 t + 1 (0x5a5a5a5a where the lane does
    not shuffle: only lanes with t % 3 != 0 when not ``every_lane``)."""
    body = []
    for k, (mode, b, c) in enumerate(forms):
        body += ["    mov.u32 %r10, 0x5a5a5a5a;",
                 f"    @%p1 shfl.sync.{mode}.b32 %r10, %r3, {b}, {c}, -1;",
                 f"    add.u32 %r11, %r4, {k * GRID * BLOCK};",
                 "    mul.wide.u32 %rd2, %r11, 4;",
                 "    add.s64 %rd3, %rd1, %rd2;",
                 "    st.global.u32 [%rd3], %r10;"]
    guard = ("    setp.eq.u32 %p1, 0, 0;" if every_lane
             else "    rem.u32 %r12, %r1, 3;\n    setp.ne.u32 %p1, %r12, 0;")
    return HEADER + """
.visible .entry shfix(.param .u64 p0)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mad.lo.s32 %r3, %r1, 3, 1;
    mad.lo.s32 %r4, %r2, """ + str(BLOCK) + """, %r1;
""" + guard + "\n" + "\n".join(body) + """
    ret;
}
"""


def _want(forms: list[tuple[str, int, int]], every_lane: bool) -> list[int]:
    out = []
    for mode, b, c in forms:
        for _block in range(GRID):
            for t in range(BLOCK):
                if not every_lane and t % 3 == 0:
                    out.append(0x5A5A5A5A)
                    continue
                base = t - t % 32
                j = base + _src(mode, t % 32, b, c)
                out.append((3 * j + 1) & M32 if j < BLOCK else 0)
    return out


@pytest.mark.parametrize("every_lane", [True, False])
def test_constant_shuffles_read_the_ptx_source_lane(every_lane: bool) -> None:
    module = parse_ptx(_ptx(FORMS, every_lane))
    n = len(FORMS) * GRID * BLOCK
    spec = parse_spec({"kernel": "shfix", "grid": GRID, "block": BLOCK,
                       "args": [{"name": "out", "type": "u32*", "size": n}], "outputs": ["out"]})
    ref = run_interp(module, spec)
    got, _, prog, _ = simulate_weights(module, spec)
    assert [int(x) for x in ref["out"].view("uint32")] == _want(FORMS, every_lane)
    assert got["out"].tobytes() == ref["out"].tobytes()


def test_a_full_warp_shuffle_takes_fewer_rows_than_the_general_sequence() -> None:
    """A segmented shuffle (``c`` with segment bits: ``__shfl_down_sync(..., width 16)``) keeps the
    general sequence; the same shuffle over the full warp is shorter."""
    def rows(c: int) -> tuple[int, int]:
        module = parse_ptx(_ptx([("down", 1, c)], True))
        spec = parse_spec({"kernel": "shfix", "grid": GRID, "block": BLOCK,
                           "args": [{"name": "out", "type": "u32*", "size": GRID * BLOCK}],
                           "outputs": ["out"]})
        got, st, prog, _ = simulate_weights(module, spec)
        assert got["out"].tobytes() == run_interp(module, spec)["out"].tobytes()
        return len(prog.code), st.passes

    (fixed, fixed_passes), (general, general_passes) = rows(31), rows((16 << 8) | 31)
    assert fixed < general and fixed_passes < general_passes
