"""Control-flow rules and the no-ops: bra, ret/exit, barriers, fences and hints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.operands import readp
from qwengpu.ptx.ir import Instr, Label, Neg

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def ptx_bra(cx: LowerCtx, ins: Instr) -> None:
    """bra to a PTX label (guarded: the guard predicate is the branch's own)."""
    tgt = ins.operands[0]
    if not isinstance(tgt, Label) or tgt.name not in cx.ptx_label:
        raise cx.fail(ins, "indirect branch is not supported")
    g = None
    if ins.guard is not None:
        g = readp(cx, Neg(ins.guard) if ins.guard_neg else ins.guard, ins)
    cx.bra(cx.ptx_label[tgt.name], g)


def ptx_ret(cx: LowerCtx, ins: Instr) -> None:
    """ret/exit: the lane stops (``.func`` bodies are inlined, so ret ends the kernel)."""
    cx.emit("exit")


def ptx_bar(cx: LowerCtx, ins: Instr) -> None:
    """bar.sync/barrier: a machine barrier; ``.warp``/``.arrive`` are no-ops; ``.red`` is refused."""
    if "red" in ins.mods:
        # barred.expand_bar_red rewrites every well-formed bar.red before lowering; one that
        # reaches here has a form it does not know: lowering it as a plain barrier would leave the
        # result register unwritten (silently wrong), so refuse it by name
        raise cx.limit(ins, "`bar.red` (__syncthreads_count / __syncthreads_and / __syncthreads_or)")
    if "warp" in ins.mods or "arrive" in ins.mods:
        return
    cx.emit("bar")


def ptx_trap(cx: LowerCtx, ins: Instr) -> None:
    """trap/brkpt (``__trap()``, a failed device ``assert``): the machine's trap, reported as the
    interpreter reports it (the FAULT token names the lane; the message is the host's)."""
    cx.emit("trap", code="trap")


def nop(cx: LowerCtx, ins: Instr) -> None:
    """Fences, prefetches and hints: the machine has nothing to do for them."""
    return None
