"""The kernel's memory layout: identical to the interpreter's, so addresses and fault messages
agree bit for bit."""

from __future__ import annotations

from qwengpu.codegen.lowering.common import _align
from qwengpu.isa.program import Layout
from qwengpu.ptx.ir import TYPE_SIZES, Function, Module


def compute_layout(module: Module, fn: Function) -> Layout:
    """The interpreter's layout algorithm (same order, same alignment)."""
    local_off: dict[str, int] = {}
    off = 0
    for v in fn.vars:
        if v.space in ("local", "param"):
            off = _align(off, max(v.align, 1))
            local_off[v.name] = off
            off += v.size
    local_size = _align(off, 8)
    shared_off: dict[str, int] = {}
    shared_init: list[tuple[int, bytes]] = []
    dyn: list[str] = []
    off = 0
    shared_vars = [v for v in fn.vars if v.space == "shared"] + [
        v for v in module.globals if v.space == "shared"
    ]
    for v in shared_vars:
        if v.extern or v.size == 0:
            dyn.append(v.name)
            continue
        off = _align(off, max(v.align, 1))
        shared_off[v.name] = off
        if v.init:
            shared_init.append((off, v.init))
        off += v.size
    static_shared = off
    param_off: dict[str, int] = {}
    off = 0
    for p in fn.params:
        off = _align(off, max(p.align, TYPE_SIZES[p.type] if p.size == TYPE_SIZES[p.type] else 1))
        param_off[p.name] = off
        off += p.size
    gvars = [v for v in module.globals if v.space in ("global", "const")]
    return Layout(local_off, local_size, shared_off, shared_init, static_shared, dyn, param_off, off, gvars)
