"""The exact evaluator: runs a circuit description on integers (numpy int64, never floats).

Stage 3: the second oracle. It evaluates exactly what the compiler lowers -- every MLP node's
formulas, term by term -- so a wrong formula in :mod:`ops` shows up here as a value that is not
0/1 or as a disagreement with plain Python semantics, before any float is involved. Memory banks
are simulated row by row, token by token (write before read, unwritten rows read as zero).

Inputs are ``{name: array}`` of shape ``(batch, seq)`` or ``(seq,)`` with integer values (negative
values are taken two's complement); outputs come back in the same shape as unsigned integers
(``dtype=object`` beyond 63 bits).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .ir import CircuitGraph, InputNode, Lin, MemoryNode, MlpNode, Prod, Signal, Step


class EvaluationError(AssertionError):
    """A formula produced a value other than 0/1: a compiler bug, never a user error."""


def to_bits(values: Any, width: int) -> np.ndarray:
    """Integers -> bits, shape ``values.shape + (width,)``, two's complement for negatives."""
    arr = np.asarray(values, dtype=object)
    masked = arr & ((1 << width) - 1) if arr.size else arr
    if width <= 63:
        ints = np.asarray(masked, dtype=np.int64).reshape(arr.shape)
        return (ints[..., None] >> np.arange(width, dtype=np.int64)) & 1
    out = np.zeros(arr.shape + (width,), dtype=np.int64)
    for j in range(width):
        out[..., j] = np.asarray((masked >> j) & 1, dtype=np.int64)
    return out


def from_bits(bits: np.ndarray) -> np.ndarray:
    """Bits (last axis, LSB first) -> unsigned integers (int64 up to 63 bits, else object)."""
    width = bits.shape[-1]
    if width <= 63:
        weights = (np.int64(1) << np.arange(width, dtype=np.int64))
        return (bits.astype(np.int64) * weights).sum(-1)
    out = np.zeros(bits.shape[:-1], dtype=object)
    for j in range(width):
        out = out + bits[..., j].astype(object) * (1 << j)
    return out


def lin_value(form: Lin, values: dict[Signal, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    acc = np.full(shape, form.const, dtype=np.int64)
    for s, w in form.coeffs.items():
        acc = acc + w * values[s]
    return acc


def eval_formula(f, values: dict[Signal, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    v = lin_value(f.lin, values, shape)
    for t in f.terms:
        u = lin_value(t.U, values, shape)
        if isinstance(t, Step):
            v = v + t.coef * (lin_value(t.L, values, shape) >= t.theta).astype(np.int64) * u
        elif isinstance(t, Prod):
            v = v + t.coef * lin_value(t.L, values, shape) * u
        else:  # pragma: no cover
            raise TypeError(t)
    return v


def evaluate(circuit: CircuitGraph, inputs: dict[str, Any], signals: bool = False):
    """Evaluate ``circuit`` exactly; returns ``{output: ints}`` (and all signal bits if ``signals``)."""
    shape: tuple[int, ...] | None = None
    values: dict[Signal, np.ndarray] = {}
    missing = [n for n in circuit.inputs if n not in inputs]
    if missing:
        raise KeyError(f"missing inputs: {missing}")
    for name, node in circuit.inputs.items():
        arr = np.asarray(inputs[name], dtype=object)
        if arr.ndim == 1:
            arr = arr[None, :]
        if shape is None:
            shape = arr.shape
        elif arr.shape != shape:
            raise ValueError(f"input {name}: shape {arr.shape} != {shape}")
        bits = to_bits(arr, node.width)
        for i, s in enumerate(node.outputs):
            values[s] = bits[..., i]
    if shape is None:
        raise ValueError("a circuit without inputs has nothing to evaluate")
    squeeze = np.asarray(next(iter(inputs.values())), dtype=object).ndim == 1
    for node in circuit.topo_nodes():
        if isinstance(node, InputNode):
            continue
        if isinstance(node, MlpNode):
            for f, s in zip(node.formulas, node.outputs, strict=True):
                v = eval_formula(f, values, shape)
                bad = (v != 0) & (v != 1)
                if bad.any():
                    idx = tuple(int(i[0]) for i in np.nonzero(bad))
                    raise EvaluationError(f"{s.name} evaluated to {int(v[idx])} at {idx}: not a bit")
                values[s] = v
        elif isinstance(node, MemoryNode):
            _eval_memory(node, values, shape)
    out = {}
    for name, sigs in circuit.outputs.items():
        bits = np.stack([values[s] for s in sigs], axis=-1)
        ints = from_bits(bits)
        out[name] = ints[0] if squeeze else ints
    if signals:
        return out, values
    return out


def _eval_memory(node: MemoryNode, values: dict[Signal, np.ndarray], shape: tuple[int, ...]) -> None:
    batch, seq = shape
    # rows past ``rows`` (when rows is not a power of two) are never written and read as zeros
    state = np.zeros((batch, (1 << node.addr_bits) + 1, node.width), dtype=np.int64)
    b_idx = np.arange(batch)

    def addr_of(sigs: list[Signal]) -> np.ndarray:
        return sum((values[s] << i for i, s in enumerate(sigs)), np.zeros(shape, dtype=np.int64))

    waddr = addr_of(node.write_addr) if node.write_addr is not None else None
    wdata = (np.stack([values[s] for s in node.write_data], -1) if node.write_data is not None else None)
    wen = values[node.write_enable] if node.write_enable is not None else np.ones(shape, dtype=np.int64)
    raddrs = [addr_of(p.addr) for p in node.ports]
    outs = [np.zeros(shape + (node.width,), dtype=np.int64) for _ in node.ports]
    for t in range(seq):
        if waddr is not None:
            en = (wen[:, t] == 1) & (waddr[:, t] < node.rows)
            if en.any():
                state[b_idx[en], waddr[en, t]] = wdata[en, t]  # type: ignore[index]
        for p, ra in enumerate(raddrs):
            outs[p][:, t] = state[b_idx, ra[:, t]]
    for p, port in enumerate(node.ports):
        for i, s in enumerate(port.out):
            values[s] = outs[p][..., i]
