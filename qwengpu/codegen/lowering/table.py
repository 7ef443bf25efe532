"""The lowering rules: PTX opcode -> the function ``(cx, ins) -> None`` that lowers it.

Why one explicit table: a reader scans here which family module handles an opcode (as one reads
a list of conversion patterns); every rule then dispatches on the form (type, modifiers) itself.
An opcode missing here is reported as an unsupported PTX instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from qwengpu.codegen.lowering import arith, bits, compare, control, convert, dots, floats, memory, moves, warp

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx
    from qwengpu.ptx.ir import Instr

Rule = Callable[["LowerCtx", "Instr"], None]

RULES: dict[str, Rule] = {
    # control flow, barriers, no-ops
    "bra": control.ptx_bra,
    "ret": control.ptx_ret,
    "exit": control.ptx_ret,
    "trap": control.ptx_trap,
    "brkpt": control.ptx_trap,
    "bar": control.ptx_bar,
    "barrier": control.ptx_bar,
    "membar": control.nop,
    "fence": control.nop,
    "prefetch": control.nop,
    "prefetchu": control.nop,
    "pmevent": control.nop,
    "nanosleep": control.nop,
    "griddepcontrol": control.nop,  # one launch at a time: no dependent grid to wait for or release
    # moves
    "mov": moves.ptx_mov,
    # arithmetic (integer, 64-bit, f32, f64 by type)
    "add": arith.ptx_add,
    "addc": arith.ptx_add,
    "sub": arith.ptx_sub,
    "subc": arith.ptx_sub,
    "mul": arith.ptx_mul,
    "mul24": arith.ptx_mul24,
    "mad24": arith.ptx_mad24,
    "mad": arith.ptx_mad,
    "fma": arith.ptx_fma,
    "div": arith.ptx_div,
    "rem": arith.ptx_rem,
    "abs": arith.ptx_abs,
    "neg": arith.ptx_neg,
    "min": arith.ptx_min,
    "max": arith.ptx_max,
    "sad": dots.ptx_sad,
    "dp4a": dots.ptx_dp4a,
    "dp2a": dots.ptx_dp2a,
    # float-only forms
    "copysign": floats.ptx_copysign,
    "sqrt": floats.ptx_sqrt,
    "rcp": floats.ptx_rcp,
    "ex2": floats.ptx_ex2,
    "lg2": floats.approx_limit,
    "sin": floats.approx_limit,
    "cos": floats.approx_limit,
    "tanh": floats.approx_limit,
    "rsqrt": floats.ptx_rsqrt,
    "testp": floats.ptx_testp,
    # bit operations
    "and": bits.ptx_and,
    "or": bits.ptx_or,
    "xor": bits.ptx_xor,
    "not": bits.ptx_not,
    "cnot": bits.ptx_cnot,
    "lop3": bits.ptx_lop3,
    "shl": bits.ptx_shl,
    "shr": bits.ptx_shr,
    "shf": bits.ptx_shf,
    "popc": bits.ptx_popc,
    "clz": bits.ptx_clz,
    "brev": bits.ptx_brev,
    "bfind": bits.ptx_bfind,
    "bfe": bits.ptx_bfe,
    "bfi": bits.ptx_bfi,
    "prmt": bits.ptx_prmt,
    # comparisons and selects
    "setp": compare.ptx_setp,
    "set": compare.ptx_set,
    "selp": compare.ptx_selp,
    "slct": compare.ptx_slct,
    # conversions
    "cvt": convert.ptx_cvt,
    "cvta": convert.ptx_cvta,
    # memory and atomics
    "ld": memory.ptx_ld,
    "ldu": memory.ptx_ld,
    "st": memory.ptx_st,
    "atom": memory.ptx_atom,
    "red": memory.ptx_red,
    # warp-level operations
    "shfl": warp.ptx_shfl,
    "vote": warp.ptx_vote,
    "activemask": warp.ptx_activemask,
    "match": warp.ptx_match,
    "redux": warp.ptx_redux,
    "elect": warp.ptx_elect,
}


def refused_opcodes() -> list[str]:
    """The PTX opcodes the reference interpreter runs but the machine refuses by name (no rule, or
    a rule that is a named limit): the short documented list of ``qwengpu machine info`` and the
    README. Forms beyond a rule (64-bit ``bfe``/``match``, sub-word ``sad``) are refused by the rule."""
    from qwengpu.simt.interp import Interpreter

    interp = {n[len("_op_"):] for n in dir(Interpreter) if n.startswith("_op_")}
    refused = {op for op in interp if op not in RULES}
    refused |= {op for op, rule in RULES.items() if rule is floats.approx_limit}
    return sorted(refused)
