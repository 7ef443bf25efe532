"""Flatten ``.func`` calls into the calling kernel (the interpreter and the machine run flat code).

NVRTC emits ``call.uni (retval0), f, (param0, ...)`` for ``__noinline__`` device functions, with
the arguments passed through per-thread ``.param`` variables. Inlining renames the callee's
registers, labels and local variables, binds its formal parameters to the caller's argument
variables and turns its ``ret`` into a branch to the call's continuation. Recursion cannot be
flattened and is reported, as are indirect calls and calls of external functions; ``vprintf``
(printf) becomes one ``vprintf`` instruction; a predicated call becomes a branch around the
inlined body.
"""

from __future__ import annotations

from dataclasses import replace

from qwengpu.errors import PTXError
from qwengpu.ptx.ir import (
    Addr,
    Function,
    Instr,
    Label,
    Module,
    Neg,
    Operand,
    Pair,
    Reg,
    Sink,
    Sym,
    Var,
    Vec,
    demangle_identifier,
)

MAX_INLINE_DEPTH = 16


def _rename(op: Operand, regs: dict[str, str], syms: dict[str, str], labels: dict[str, str]) -> Operand:
    if isinstance(op, Reg):
        return Reg(regs.get(op.name, op.name))
    if isinstance(op, Sym):
        return Sym(syms.get(op.name, op.name))
    if isinstance(op, Label):
        return Label(labels.get(op.name, op.name))
    if isinstance(op, Addr):
        base = op.base
        if base is not None:
            base = _rename(base, regs, syms, labels)  # type: ignore[assignment]
        return Addr(base, op.offset)  # type: ignore[arg-type]
    if isinstance(op, Vec):
        return Vec(tuple(_rename(o, regs, syms, labels) for o in op.items))
    if isinstance(op, Neg):
        return Neg(_rename(op.inner, regs, syms, labels))  # type: ignore[arg-type]
    if isinstance(op, Pair):
        return Pair(_rename(op.first, regs, syms, labels), _rename(op.second, regs, syms, labels))
    return op


def inline_calls(module: Module, kernel: Function) -> Function:
    """Return a copy of ``kernel`` with every ``call`` to a module function inlined."""
    counter = [0]
    regs = dict(kernel.regs)
    vars_ = list(kernel.vars)
    body: list[Instr] = []
    labels: dict[str, int] = {}

    def emit(fn_body: list[Instr], fn_labels: dict[str, int], stack: tuple[str, ...]) -> None:
        by_index: dict[int, list[str]] = {}
        for lb, idx in fn_labels.items():
            by_index.setdefault(idx, []).append(lb)
        for idx, ins in enumerate(fn_body):
            for lb in by_index.get(idx, ()):
                labels[lb] = len(body)
            if ins.op != "call":
                body.append(ins)
                continue
            rets, target, args = ins.operands
            assert isinstance(rets, Vec) and isinstance(args, Vec)
            if not isinstance(target, Sym):
                raise PTXError(
                    f"{ins.where()}: indirect call through a function pointer (`{ins.text}`) is not "
                    "supported: only calls of named device functions can be inlined"
                )
            if target.name == "vprintf" and target.name not in module.functions and len(args.items) == 2:
                # printf: one instruction the interpreter formats (the machine refuses it by name)
                ret = rets.items[0] if rets.items else Sink()
                body.append(replace(ins, op="vprintf", mods=(), operands=(ret, *args.items)))
                continue
            if target.name not in module.functions:
                if target.name in module.externs:
                    what = {"vprintf": " (printf)", "malloc": " (device malloc)", "free": " (device free)"}
                    raise PTXError(
                        f"{ins.where()}: call of external function {target.name}"
                        f"{what.get(target.name, '')} is not supported: it has no body in the PTX"
                    )
                raise PTXError(f"{ins.where()}: call of unknown function {target.name}")
            callee = module.functions[target.name]
            if callee.name in stack or len(stack) >= MAX_INLINE_DEPTH:
                chain = " -> ".join(demangle_identifier(f) for f in (*stack, callee.name))
                raise PTXError(
                    f"{ins.where()}: recursive call of {callee.plain_name} ({chain}) is not supported: "
                    "calls are inlined and the machine has no call stack"
                )
            counter[0] += 1
            tag = f"{callee.name}#{counter[0]}"
            skip_label = f"$skip@{tag}"
            if ins.guard is not None:  # @p call f: branch around the inlined body when !p
                body.append(
                    replace(
                        ins, op="bra", mods=(), operands=(Label(skip_label),), guard_neg=not ins.guard_neg
                    )
                )
            reg_map = {r: f"{r}@{tag}" for r in callee.regs}
            for r, t in callee.regs.items():
                regs[reg_map[r]] = t
            sym_map: dict[str, str] = {}
            for formal, actual in zip(callee.params, args.items, strict=False):
                if isinstance(actual, Sym):
                    sym_map[formal.name] = actual.name
            for formal, actual in zip(callee.returns, rets.items, strict=False):
                if isinstance(actual, Sym):
                    sym_map[formal.name] = actual.name
            for v in callee.vars:
                sym_map[v.name] = f"{v.name}@{tag}"
                vars_.append(Var(sym_map[v.name], v.space, v.type, v.size, v.align, v.extern, v.init))
            end_label = f"$ret@{tag}"
            label_map = {lb: f"{lb}@{tag}" for lb in callee.labels}
            sub: list[Instr] = []
            for cins in callee.body:
                ops = tuple(_rename(o, reg_map, sym_map, label_map) for o in cins.operands)
                guard = Reg(reg_map.get(cins.guard.name, cins.guard.name)) if cins.guard else None
                if cins.op == "ret":
                    sub.append(
                        replace(cins, op="bra", mods=("uni",), operands=(Label(end_label),), guard=guard)
                    )
                else:
                    sub.append(replace(cins, operands=ops, guard=guard))
            sub_labels = {label_map[lb]: i for lb, i in callee.labels.items()}
            sub_labels[end_label] = len(sub)
            emit(sub, sub_labels, (*stack, callee.name))
            if ins.guard is not None:
                labels[skip_label] = len(body)

        for lb in by_index.get(len(fn_body), ()):
            labels[lb] = len(body)

    emit(kernel.body, kernel.labels, (kernel.name,))
    return Function(
        kernel.name,
        kernel.is_entry,
        kernel.params,
        kernel.returns,
        regs,
        vars_,
        body,
        labels,
        kernel.line,
        dict(kernel.directives),
    )
