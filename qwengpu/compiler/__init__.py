"""Exact circuits compiled into the weights of stock ``transformers`` Qwen3.5 decoder layers.

This package is the facade: build with :class:`Circuit`, then :func:`compile_circuit`,
:func:`evaluate`, :class:`LayoutReport` and :func:`build_model` (data flows one way, ``ir`` ->
``ops`` -> ``schedule`` / ``mlp`` / ``memory`` -> ``report`` / ``build``; no stage imports a later one).

Read the stages in order: :mod:`ir` (circuit description) -> :mod:`ops` (primitive library) ->
:mod:`evaluator` (exact integer oracle) -> :mod:`schedule` (layers and residual slots) ->
:mod:`residual` (the norm-exact residual contract) -> :mod:`mlp` (formulas -> SwiGLU neurons) ->
:mod:`memory` (DeltaNet memory banks) -> :mod:`build` (weights into ``Qwen3_5ForCausalLM``) ->
:mod:`checkpoint` (``save_pretrained`` / ``from_pretrained``).

A circuit reads like the formula it computes::

    from qwengpu.compiler import Circuit, LayoutReport, build_model, compile_circuit, run, text_config

    c = Circuit("alu")
    a, b = c.input("a", 32), c.input("b", 32)
    op = c.input("op", 2)
    c.output("y", c.select(op, [a + b, a - b, a & b, a << b[:5]]))
    c.output("lt", a.as_signed() < b.as_signed())
    compiled = compile_circuit(c, text_config("qwen3_5_2b_text"))
    print(LayoutReport.of(compiled))
    model = build_model(compiled)                       # a stock Qwen3_5ForCausalLM
    out = run(model, compiled, {"a": [...], "b": [...], "op": [...]})
"""

from .build import (
    TokenIO,
    build_model,
    embed_inputs,
    forward_hidden,
    gate_margins,
    margin_report,
    read_outputs,
    run,
    run_tokens,
)
from .checkpoint import load_compiled, save_compiled
from .evaluator import EvaluationError, evaluate
from .ir import Bit, CircuitError, CircuitGraph, Memory, Word
from .memory import FitError
from .ops import Circuit
from .report import LayoutReport
from .residual import ContractError, ResidualLayout
from .schedule import CircuitIO, CompiledCircuit, compile_circuit
from .shapes import check_against, shipped_configs, text_config

__all__ = [
    "Bit", "Circuit", "CircuitError", "CircuitGraph", "CircuitIO", "CompiledCircuit", "ContractError",
    "EvaluationError", "FitError", "LayoutReport", "Memory", "ResidualLayout", "TokenIO", "Word",
    "build_model", "check_against", "compile_circuit", "embed_inputs", "evaluate", "forward_hidden",
    "gate_margins", "load_compiled", "margin_report", "read_outputs", "run", "run_tokens", "save_compiled",
    "shipped_configs", "text_config",
]
