"""Lowering: PTX IR (after ``.func`` inlining) -> a machine program over virtual registers.

Why a separate lowering: the machine's ops are only what is plausible as an exact 32-bit circuit
(``isa.py``); everything else becomes a SEQUENCE of those ops here: 64-bit integers as register
pairs, integer and float division, square roots, bit-field ops, byte permutes, 64-bit
conversions. Each PTX instruction becomes a contiguous sequence in program order, so the
per-lane-PC min-PC scheduling of the machine reconverges exactly where the interpreter's does
(see DESIGN.md, "Divergence").

Addresses. PTX computes 64-bit pointers; the machine keeps a value that is only ever used to form
addresses in ONE register, as a *window* value w meaning ``base + sext(w)``, where ``base`` is a
compile-time constant (the global arena's generic base, or 0 for a .shared/.local offset). The
window arithmetic ops (``addw``/``subw``/``mulw``) compute exactly while the value lies within
+-(2^31-1) of the base and otherwise give POISON (0x80000000), which every memory op reports as
an out-of-bounds access. A kind analysis (``analyze_kinds``) decides, for every 64-bit PTX
register, whether it is a window value (only address uses), an exact sign/zero-extended 32-bit
value, or a general 64-bit value held in a register pair.

This module is the entry point; the lowering itself lives in ``qwengpu.codegen.lowering``, one
module per instruction family, with the opcode -> rule table in ``lowering/table.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from qwengpu.codegen.lowering.context import LowerCtx
from qwengpu.codegen.lowering.driver import lower
from qwengpu.codegen.lowering.kinds import KindAnalysis
from qwengpu.codegen.lowering.layout import compute_layout
from qwengpu.codegen.lowering.operands import V64
from qwengpu.isa.program import Program
from qwengpu.ptx.ir import Module

__all__ = ["KindAnalysis", "V64", "compute_layout", "lower_kernel"]


def lower_kernel(module: Module, kernel: str, pointer_params: Sequence[bool] | None = None) -> Program:
    """Lower a kernel of a parsed PTX module to a machine program over virtual registers."""
    return lower(LowerCtx(module, kernel, pointer_params))
