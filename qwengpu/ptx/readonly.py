"""Which pointer parameters a kernel may store through: the proof that an input is read-only.

Why: the machine in the weights can hold words that are never stored to four to a DeltaNet row
(a store replaces a row's whole value, so writable words take a row each; docs/machine-in-weights.md
9.15). An input may go there only if no ``st`` / ``atom`` / ``red`` of the kernel can reach it.

How (conservative, flow-insensitive, over the kernel with its calls inlined): every register gets
the set of parameters its value may derive from, through every instruction (a destination takes
the union of its sources, to a fixed point over loops). A value loaded from memory may be a
pointer: loads of 64 bits or more, and 64-bit values packed from loaded halves, are UNKNOWN (32-bit
loaded data used as an index is not a pointer). A store's address names the parameters it may
write; an UNKNOWN address, a ``call`` left in the body or an instruction writing through an
operand this analysis does not know makes every parameter writable, and so does a store whose
address derives from no parameter and no module variable: an address made of loaded 32-bit data
and constants (a pointer rebuilt from two loaded halves by shifts and ``or``, an integer cast to a
pointer) may point anywhere. The bounds watch at run time is the backstop: a store into a
read-only word is refused with a message, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qwengpu.errors import MachineLimitError
from qwengpu.ptx.ir import Addr, Function, Instr, Neg, Pair, Reg, Sym, Vec

T = TypeVar("T")

UNKNOWN = -1  # "may be any pointer": a value loaded from memory
SYMBOL = -2  # derives from a module variable's address (not a parameter's buffer)
STORE_OPS = ("st", "atom", "red")
#: spaces whose stores cannot reach a global buffer
OTHER_SPACES = ("shared", "local", "param", "const")


def _regs(op) -> list[str]:
    """The registers an operand reads (an address's base, a vector's items, a pair's halves)."""
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, Neg):
        return [op.inner.name]
    if isinstance(op, Addr):
        return [op.base.name] if isinstance(op.base, Reg) else []
    if isinstance(op, Vec):
        return [r for x in op.items for r in _regs(x)]
    if isinstance(op, Pair):
        return _regs(op.first) + _regs(op.second)
    return []


def _dests(ins: Instr) -> list[str]:
    """The registers an instruction writes (its first operand; a vector or pair of them)."""
    if ins.op in STORE_OPS[:1] or not ins.operands:
        return []
    d = ins.operands[0]
    if isinstance(d, Reg):
        return [d.name]
    if isinstance(d, Vec):
        return [x.name for x in d.items if isinstance(x, Reg)]
    if isinstance(d, Pair):
        return [x.name for x in (d.first, d.second) if isinstance(x, Reg)]
    return []


def _space(ins: Instr) -> str:
    for s in ("global", "shared", "local", "param", "const"):
        if s in ins.mods:
            return s
    return "generic"


def _loaded_width(ins: Instr) -> int:
    """Bits per element a load writes (its type suffix; 64 for a b64/u64/s64/f64)."""
    for m in ins.mods:
        if len(m) >= 2 and m[0] in "busf" and m[1:].isdigit():
            return int(m[1:])
    return 64


def stored_params(fn: Function) -> set[int] | None:
    """Indices of ``fn``'s parameters a store may write through; None: any of them."""
    index = {p.name: i for i, p in enumerate(fn.params)}
    taint: dict[str, set[int]] = {}
    changed = True
    while changed:
        changed = False
        for ins in fn.body:
            if ins.op == "call":
                return None
            dests = _dests(ins)
            if not dests:
                continue
            if ins.op == "ld" and ins.operands[1:] and isinstance(ins.operands[1], Addr):
                a = ins.operands[1]
                if "param" in ins.mods and isinstance(a.base, Sym):
                    new = {index[a.base.name]} if a.base.name in index else set()
                else:  # data from memory: a pointer only if it is pointer-wide
                    new = {UNKNOWN} if _loaded_width(ins) >= 64 else set()
            elif ins.op in ("atom", "ld", "ldu"):
                new = {UNKNOWN} if _loaded_width(ins) >= 64 else set()
            elif ins.op == "mov" and any(isinstance(op, Vec) for op in ins.operands[1:]):
                new = {UNKNOWN}  # a value packed from parts (a pointer from two loaded halves)
            else:
                new = set()
                for op in ins.operands[1:]:
                    for r in _regs(op):
                        new |= taint.get(r, set())
                    if isinstance(op, Sym):
                        new.add(index.get(op.name, SYMBOL))
            for d in dests:
                old = taint.setdefault(d, set())
                if not new <= old:
                    old |= new
                    changed = True
    written: set[int] = set()
    for ins in fn.body:
        if ins.op not in STORE_OPS:
            continue
        if _space(ins) in OTHER_SPACES:
            continue
        addr = next((op for op in ins.operands if isinstance(op, Addr)), None)
        if addr is None:
            return None
        if isinstance(addr.base, Sym):
            if addr.base.name in index:
                return None  # a store into the parameter space itself: not a kernel's
            continue  # a module variable: not a parameter's buffer
        reach = set().union(*(taint.get(r, set()) for r in _regs(addr)))
        if UNKNOWN in reach or not reach:  # no parameter, no module variable: any address
            return None
        written |= reach - {SYMBOL}
    return written


def read_only_args(spec, fn: Function) -> list[str]:
    """The pointer arguments of a launch that no store can reach (and not outputs), by name."""
    written = stored_params(fn)
    if written is None:
        return []
    return [a.name for i, a in enumerate(spec.args)
            if a.is_ptr and i not in written and a.name not in spec.outputs]


def writable_first(place: Callable[[list[str]], T], spec, body: Callable[[], Function],
                   has_read_only_words: bool) -> T:
    """``place([])``: every buffer in the writable words. Only when that is refused for a machine
    limit, and the machine has read-only words, ``place`` again with the inputs proven read-only
    (over ``body()``, the kernel with its calls inlined) moved there: every launch that fits the
    writable words keeps its placement and its prompt."""
    try:
        return place([])
    except MachineLimitError:
        high = read_only_args(spec, body()) if has_read_only_words else []
        if not high:
            raise
        return place(high)
