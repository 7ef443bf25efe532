"""Shared helpers for the circuit-compiler tests.

The three-way check every model test uses: plain Python semantics == the exact evaluator ==
the stock ``Qwen3_5ForCausalLM`` (read back under the exact residual contract).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from hypothesis import strategies as st
from transformers import Qwen3_5TextConfig

from qwengpu.compiler import Circuit, CompiledCircuit, build_model, compile_circuit, evaluate, run, run_tokens

M32 = (1 << 32) - 1


def small_config(hidden: int = 512, intermediate: int = 2048, **kw) -> Qwen3_5TextConfig:
    """A small Qwen3.5 text shape: fast on CPU, same module code as the real models."""
    d = dict(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=1, num_attention_heads=4,
             num_key_value_heads=2, head_dim=64, linear_num_key_heads=8, linear_num_value_heads=8,
             linear_key_head_dim=32, linear_value_head_dim=32, vocab_size=64)
    d.update(kw)
    return Qwen3_5TextConfig(**d)


def signed(x: int, w: int = 32) -> int:
    x &= (1 << w) - 1
    return x - (1 << w) if x >> (w - 1) else x


def edge_values(w: int) -> list[int]:
    m = (1 << w) - 1
    top = 1 << (w - 1)
    alt = int("01" * w, 2) & m
    half = (1 << (w // 2)) - 1
    vals = {0, 1, 2, m, m - 1, top, top - 1, top + 1, alt, m ^ alt, half, m ^ half}
    return sorted(v & m for v in vals)


def word(w: int = 32):
    """Hypothesis: an edge value or any w-bit word."""
    return st.one_of(st.sampled_from(edge_values(w)), st.integers(0, (1 << w) - 1))


def ripple_pair(w: int = 32):
    """Hypothesis: operand pairs whose sum/difference ripples a carry through the whole word."""
    m = (1 << w) - 1
    return st.one_of(
        st.tuples(word(w), word(w)),
        word(w).map(lambda x: (x, m ^ x)),  # a + b = all ones; a + b + 1 ripples
        word(w).map(lambda x: (x, (-x) & m)),  # a + b = 2^w
        word(w).map(lambda x: (x, x)),  # equal: a - b = 0
        word(w).map(lambda x: (x, (x + 1) & m)),
        st.just((m, 1)),
        st.just((0, m)),
    )


def random_words(rng: np.random.Generator, w: int, n: int, edge_share: float = 0.2) -> np.ndarray:
    """n random w-bit words (object ints), a share of them replaced by edge values."""
    if w <= 62:
        x = rng.integers(0, 1 << w, n, dtype=np.int64).astype(object)
    else:  # pragma: no cover
        x = np.array([int(v) for v in rng.integers(0, 1 << 62, n)], dtype=object)
    k = int(n * edge_share)
    idx = rng.integers(0, n, k)
    x[idx] = rng.choice(np.array(edge_values(w), dtype=object), k)
    return x


def elementwise(fn: Callable[..., int], *arrays: np.ndarray) -> np.ndarray:
    return np.array([int(fn(*(int(v) for v in vals))) for vals in zip(*arrays, strict=True)], dtype=object)


@dataclass
class Harness:
    """One circuit, compiled and built into a stock model (kept for a whole test module)."""

    circuit: Circuit
    reference: dict[str, Callable[..., int]] | Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]
    config: Qwen3_5TextConfig
    dtype: torch.dtype = torch.float32
    compiled: CompiledCircuit = field(init=False)
    model: object = field(init=False)

    def __post_init__(self) -> None:
        self.compiled = compile_circuit(self.circuit, self.config)
        self.model = build_model(self.compiled, self.dtype)

    @property
    def input_names(self) -> list[str]:
        return list(self.circuit.inputs)

    def python(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Plain Python semantics: per token (a dict of lambdas) or per sequence (one callable)."""
        if callable(self.reference):
            rows = np.asarray(next(iter(inputs.values())), dtype=object)
            if rows.ndim == 1:
                return {k: np.asarray(v, dtype=object).reshape(-1) for k, v in self.reference(inputs).items()}
            per_row = [self.reference({n: np.asarray(inputs[n], dtype=object)[i] for n in self.input_names})
                       for i in range(rows.shape[0])]
            return {k: np.concatenate([np.asarray(r[k], dtype=object) for r in per_row]) for k in per_row[0]}
        cols = [np.asarray(inputs[n], dtype=object).reshape(-1) for n in self.input_names]
        return {k: elementwise(fn, *cols) for k, fn in self.reference.items()}

    def check(self, inputs: dict[str, np.ndarray], mode: str = "prefill", tokens: bool = False) -> None:
        """Assert Python == evaluator == stock model on every output (1-D inputs: one sequence)."""
        expect = self.python(inputs)
        exact = evaluate(self.circuit, inputs)
        got = (run_tokens if tokens else run)(self.model, self.compiled, inputs, mode=mode)
        for name, want in expect.items():
            for label, have in (("evaluator", exact[name]), (f"model/{mode}", got[name])):
                have = np.asarray(have, dtype=object).reshape(-1)
                bad = np.flatnonzero(have != want)
                if bad.size:
                    t = int(bad[0])
                    args = {n: int(np.asarray(inputs[n]).reshape(-1)[t]) for n in self.input_names}
                    raise AssertionError(f"{self.circuit.name}.{name} ({label}) wrong at token {t} of "
                                         f"{want.size} for {args}: got {have[t]}, want {want[t]} "
                                         f"({bad.size} bad)")


def batch(names_widths: Sequence[tuple[str, int]], n: int, seed: int,
          extra: dict[str, list[int]] | None = None) -> dict[str, np.ndarray]:
    """A sequence of n tokens of random inputs; ``extra`` values (edge cases) go first."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, w in names_widths:
        x = random_words(rng, w, n)
        head = list((extra or {}).get(name, []))[:n]
        x[: len(head)] = np.array(head, dtype=object)
        out[name] = x
    return out
