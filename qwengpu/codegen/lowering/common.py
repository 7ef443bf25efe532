"""Constants and type helpers shared by every part of the lowering."""

from __future__ import annotations

from qwengpu.errors import PTXError
from qwengpu.ptx.ir import TYPE_SIZES, TYPES, Instr

M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF
ROUNDING = ("rn", "rz", "rm", "rp")
INT_ROUNDING = ("rni", "rzi", "rmi", "rpi")
APPROX_ONLY = {"ex2", "lg2", "sin", "cos", "tanh", "rsqrt"}
SPACES = ("global", "shared", "local", "const", "param")
SR32 = {
    "tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
    "nctaid.x", "nctaid.y", "nctaid.z", "laneid", "warpid", "nwarpid", "lanemask_eq", "lanemask_lt",
    "lanemask_le", "lanemask_ge", "lanemask_gt", "dynamic_smem_size", "total_smem_size",
}  # fmt: skip


def _bits(t: str) -> int:
    """The width of a PTX type in bits."""
    return TYPE_SIZES[t] * 8


def _signed(t: str) -> bool:
    """Is the PTX type signed (``s8`` ... ``s64``)?"""
    return t.startswith("s")


def _type_of(ins: Instr) -> str:
    """The instruction's operand type: its last type modifier."""
    for m in reversed(ins.mods):
        if m in TYPES:
            return m
    raise PTXError(f"{ins.where()}: `{ins.text}` has no type")


def _align(x: int, a: int) -> int:
    """``x`` rounded up to a multiple of ``a``."""
    return (x + a - 1) // a * a if a > 1 else x
