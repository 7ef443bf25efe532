"""The layout report: layers, residual slots, memory heads and MLP neurons, and a slot map.

Why: the GPU is built from many circuits competing for the same three resources (layers,
residual dimensions, neurons per MLP); a report that names every dimension's tenants makes any
weight explainable and any overflow visible before a model is built.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from .ir import MemoryNode

if TYPE_CHECKING:  # pragma: no cover
    from .schedule import CompiledCircuit


def where(p: int, n_layers: int) -> str:
    """A position as text: ``embed``, ``L3.mix``, ``L3.mlp`` or ``out``."""
    if p < 0:
        return "embed"
    if p >= 2 * n_layers:
        return "out"
    return f"L{p // 2}.{'mlp' if p % 2 else 'mix'}"


@dataclass
class LayerRow:
    index: int
    layer_type: str
    banks: list[str]
    heads: int | None
    neurons: int
    intermediate_size: int
    outputs: int
    resets: int
    live_after: int


@dataclass
class LayoutReport:
    circuit: str
    hidden_size: int
    intermediate_size: int
    n_layers: int
    signal_dims: int
    available_dims: int
    peak_live: int
    one_dim: int
    filler_dims: list[int]
    filler_values: list[int]
    total_neurons: int
    max_neurons: int
    layers: list[LayerRow] = field(default_factory=list)
    slots: list[tuple[int, list[tuple[str, str, str]]]] = field(default_factory=list)

    @classmethod
    def of(cls, compiled: CompiledCircuit) -> LayoutReport:
        pl = compiled.placement
        n = compiled.n_layers
        res = compiled.residual
        # live count after each layer (at position 2L+1, inclusive of outputs)
        rows = []
        for lp in compiled.layers:
            p = 2 * lp.index + 1
            live = sum(1 for s, d in pl.pos.items() if d <= p < pl.last_use.get(s, d))
            heads = None
            if lp.banks:
                heads = _heads(compiled, lp.banks)
            rows.append(LayerRow(lp.index, lp.layer_type, [b.name for b in lp.banks], heads, len(lp.mlp),
                                 compiled.shape.intermediate_size, len(lp.formulas), len(lp.resets), live))
        tenants: dict[int, list[tuple[str, str, str]]] = {}
        for s, d in compiled.dim_of.items():
            tenants.setdefault(d, []).append((s.name, where(pl.pos[s], n), where(pl.last_use[s], n)))
        slots = sorted(tenants.items())
        peak = 0  # values that must survive past position p
        for p in range(-1, 2 * n):
            peak = max(peak, sum(1 for s, d in pl.pos.items() if d <= p < pl.last_use.get(s, d)))
        hidden = compiled.shape.hidden_size
        return cls(compiled.circuit.name, hidden, compiled.shape.intermediate_size, n, len(res.signal_dims),
                   hidden - 1 - len(res.filler_dims), peak, res.one_dim, list(res.filler_dims),
                   list(res.filler_values), sum(r.neurons for r in rows),
                   max((r.neurons for r in rows), default=0), rows, slots)

    def summary(self) -> str:
        return (f"{self.circuit}: {self.n_layers} layers, {self.signal_dims} residual slots "
                f"(peak live {self.peak_live}), {self.total_neurons} MLP neurons "
                f"(max {self.max_neurons}/{self.intermediate_size} per layer)")

    def __str__(self) -> str:
        fillers = dict(zip(self.filler_dims, self.filler_values, strict=True))
        lines = [f"layout of {self.circuit!r} on hidden_size={self.hidden_size}, "
                 f"intermediate_size={self.intermediate_size}",
                 f"  {self.summary()}",
                 f"  one_dim={self.one_dim}, fillers {fillers}",
                 "  layer  type              mixer                       MLP neurons"
                 "      outputs resets live"]
        for r in self.layers:
            mix = "-"
            if r.banks:
                mix = ",".join(r.banks) + (f" ({r.heads} heads)" if r.heads is not None else "")
            mlp = f"{r.neurons:>6}/{r.intermediate_size:<8}"
            lines.append(f"  L{r.index:<4} {r.layer_type:<17} {mix:<27} {mlp} {r.outputs:>7} {r.resets:>6}"
                         f" {r.live_after:>4}")
        return "\n".join(lines)

    def allocation_map(self) -> str:
        """Every dimension's tenants in order: ``dim: name [from..to], ...``."""
        lines = [f"allocation map of {self.circuit!r} ({self.signal_dims} dims)"]
        for d, ts in self.slots:
            lines.append(f"  {d:>5}: " + ", ".join(f"{nm} [{a}..{b}]" for nm, a, b in ts))
        lines.append(f"  {self.one_dim:>5}: +1 (bias)")
        for d, v in zip(self.filler_dims, self.filler_values, strict=True):
            lines.append(f"  {d:>5}: {v} (norm filler)")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return asdict(self)


def _heads(compiled: CompiledCircuit, banks: list[MemoryNode]) -> int | None:
    try:
        from .memory import placeholder_bank, plan_memory

        plan = plan_memory(compiled.shape.config, [placeholder_bank(b, compiled.dim_of) for b in banks])
    except (ValueError, ImportError):  # pragma: no cover - report only (FitError is a ValueError)
        return None
    return len(plan.key_heads_used)
