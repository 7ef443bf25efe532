"""Scheduling: operations -> layers, signals -> residual dimensions, and the layout report.

Stage 4. Each decoder layer ``L`` offers two positions: the mixer at ``2L`` (memory banks live
in a DeltaNet's state) and the MLP at ``2L + 1``; the embedding is position -1. A unit may only
read signals produced at an earlier position (an MLP reads the residual after its own layer's
mixer). Units are placed as early as possible (longest path), one MLP formula at a time so a
wide operation spills into the next layer instead of failing when ``intermediate_size`` is full.

Dimensions: a signal occupies one dimension from its position until its last reader. A dead
dimension is reused after a one-neuron reset back to -1, placed in any MLP between the last read
and the new write (in the writer's own MLP when the new signal comes from an MLP). Inputs take
never-used dimensions (the embedding sets them). One dimension holds the constant +1 and a few
hold the RMSNorm fillers (see :mod:`residual`).
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass, field
from typing import Any

from .ir import CircuitError, CircuitGraph, InputNode, MemoryNode, MlpNode, Node, Signal
from .memory import FitError, placeholder_bank
from .mlp import LayerNeurons, NeuronSpec, lower_formula, reset_neuron
from .residual import ResidualLayout, filler_count, plan_residual
from .shapes import SHAPE_KEYS

LINEAR, FULL = "linear_attention", "full_attention"
MAX_LAYERS = 4096


@dataclass
class Shape:
    """The layer shape we compile for, read from a ``Qwen3_5TextConfig`` (never hard-coded)."""

    config: Any
    hidden_size: int
    intermediate_size: int

    @classmethod
    def of(cls, config: Any) -> Shape:
        return cls(config, int(config.hidden_size), int(config.intermediate_size))


@dataclass
class LayerPlan:
    """What one decoder layer does: memory banks in its mixer, merged neurons in its MLP."""

    index: int
    layer_type: str = LINEAR
    banks: list[MemoryNode] = field(default_factory=list)
    mlp: LayerNeurons = field(default_factory=LayerNeurons)
    formulas: list[Signal] = field(default_factory=list)
    resets: list[tuple[Signal, int]] = field(default_factory=list)  # (dead signal, its dim)


@dataclass
class Placement:
    pos: dict[Signal, int]
    unit_pos: dict[int, int]  # id(node) for memories / id(signal) for formulas -> position
    last_use: dict[Signal, int]
    n_layers: int


def _ceil_parity(p: int, odd: bool) -> int:
    if (p % 2 == 1) != odd:
        p += 1
    return p


def live_signals(circuit: CircuitGraph) -> tuple[set[int], list[Node]]:
    """Signals that reach an output or a memory write (dead code is dropped)."""
    order = circuit.topo_nodes()
    needed: set[int] = set()
    for sigs in circuit.outputs.values():
        needed.update(id(s) for s in sigs)
    for node in reversed(order):
        if isinstance(node, MemoryNode):
            if not node.ports:  # written but never read: nothing can observe it
                continue
            if node.write_addr is None:
                raise CircuitError(f"memory {node.name} is read but never written (it would read zeros)")
            needed.update(id(s) for s in [*node.inputs(), *node.after])
            needed.update(id(s) for s in node.outputs)
        elif isinstance(node, MlpNode):
            for f, s in zip(node.formulas, node.outputs, strict=True):
                if id(s) in needed:
                    needed.update(id(x) for x in f.signals())
    return needed, order


class _MemoryFit:
    """Asks memory.plan_memory whether a set of banks fits one layer's DeltaNet."""

    def __init__(self, shape: Shape):
        self.shape = shape

    def check(self, banks: list[MemoryNode]) -> None:
        from .memory import plan_memory

        need = sum(len(b.inputs()) + len(b.outputs) for b in banks)
        if need > self.shape.hidden_size - 1:
            raise FitError(f"residual: memory banks {[b.name for b in banks]} need {need} dimensions for "
                           f"addresses, data and read ports; hidden_size is {self.shape.hidden_size}")
        counter = iter(range(self.shape.hidden_size))
        plan_memory(self.shape.config, [placeholder_bank(b, counter=counter) for b in banks])


def place(circuit: CircuitGraph, shape: Shape, layer_type_at, needed: set[int], order: list[Node],
          layers: list[LayerPlan], mlp_reserve: int = 0) -> Placement:
    """Longest-path placement with per-layer neuron capacity and memory fit. ``mlp_reserve``
    neurons of every MLP are left to the allocator's reset neurons (a dead residual dimension is
    reused only behind a reset in an MLP with room)."""
    pos: dict[Signal, int] = {}
    unit_pos: dict[int, int] = {}
    memfit = _MemoryFit(shape)

    def layer(i: int) -> LayerPlan:
        while len(layers) <= i:
            layers.append(LayerPlan(len(layers), layer_type_at(len(layers))))
        return layers[i]

    for node in order:
        if isinstance(node, InputNode):
            for s in node.outputs:
                pos[s] = -1
        elif isinstance(node, MlpNode):
            for f, s in zip(node.formulas, node.outputs, strict=True):
                if id(s) not in needed:
                    continue
                specs = lower_formula(f, s)
                own = len({sp.key() for sp in specs})
                if own > shape.intermediate_size:
                    raise FitError(f"{s.name}: one output bit needs {own} MLP neurons, intermediate_size is "
                                   f"{shape.intermediate_size}")
                p = _ceil_parity(max((pos[x] for x in f.signals()), default=-1) + 1, odd=True)
                room = shape.intermediate_size - mlp_reserve
                while layer(p // 2).mlp.cost(specs) + len(layer(p // 2).mlp) > room:
                    p += 2
                    if p > 2 * MAX_LAYERS:
                        raise FitError(f"{s.name}: no layer has room (more than {MAX_LAYERS} layers)")
                lp = layer(p // 2)
                lp.mlp.add(specs)
                lp.formulas.append(s)
                pos[s] = p
                unit_pos[id(s)] = p
        elif isinstance(node, MemoryNode):
            if not node.ports:
                continue
            memfit.check([node])  # fits an empty layer at all? (raises FitError saying why not)
            p = _ceil_parity(max((pos[x] for x in [*node.inputs(), *node.after]), default=-1) + 1, odd=False)
            while True:
                lp = layer(p // 2)
                if lp.layer_type == LINEAR:
                    try:
                        memfit.check(lp.banks + [node])
                        break
                    except FitError:
                        pass
                p += 2
                if p > 2 * MAX_LAYERS:
                    raise FitError(f"memory {node.name}: no linear-attention layer can host it")
            lp.banks.append(node)
            for s in node.outputs:
                pos[s] = p
            unit_pos[id(node)] = p
    n_layers = max(1, max((p // 2 + 1 for p in unit_pos.values()), default=1))
    del layers[n_layers:]
    layer(n_layers - 1)
    end = 2 * n_layers
    last_use: dict[Signal, int] = {}
    for node in order:
        if isinstance(node, MlpNode):
            for f, s in zip(node.formulas, node.outputs, strict=True):
                if id(s) in needed:
                    for x in f.signals():
                        last_use[x] = max(last_use.get(x, -1), pos[s])
        elif isinstance(node, MemoryNode) and id(node) in unit_pos:
            for x in node.inputs():
                last_use[x] = max(last_use.get(x, -1), unit_pos[id(node)])
    for sigs in circuit.outputs.values():
        for s in sigs:
            last_use[s] = end
    for s in pos:
        last_use.setdefault(s, pos[s])
    return Placement(pos, unit_pos, last_use, n_layers)


def allocate(placement: Placement, layers: list[LayerPlan], shape: Shape, order: list[Node],
             n_reserved: int, reuse: bool = True) -> dict[Signal, int]:
    """Give every live signal a dimension, reusing dead ones behind a reset neuron."""
    pos, last_use = placement.pos, placement.last_use
    n_avail = shape.hidden_size - n_reserved
    sigs = [s for node in order for s in node.outputs if s in pos]
    rank = {id(s): i for i, s in enumerate(sigs)}
    sigs.sort(key=lambda s: (pos[s], rank[id(s)]))
    dim_of: dict[Signal, int] = {}
    holder: list[Signal] = []  # dim -> the signal it holds (or last held)
    occupied: list[tuple[int, int]] = []  # heap of (last use of the holder, dim)
    dead: list[int] = []  # heap of dims whose holder is no longer read

    def reset_slot(old: Signal, lo: int, hi: int) -> int | None:
        """The latest MLP position in [lo, hi] with room for one reset neuron."""
        reset = [reset_neuron(old)]
        for q in range(hi if hi % 2 else hi - 1, max(lo, 1) - 1, -2):
            lp = layers[q // 2]
            if len(lp.mlp) + lp.mlp.cost(reset) <= shape.intermediate_size:
                return q
        return None

    for s in sigs:
        p = pos[s]
        chosen = None
        # the old value must be read before it is reset: in the writer's own MLP at the latest,
        # and strictly before a memory read that expects -1 on entry (hi never decreases)
        hi = p - 1 if p % 2 == 0 else p
        while occupied and occupied[0][0] <= hi:
            heapq.heappush(dead, heapq.heappop(occupied)[1])
        if reuse and p >= 0:
            skipped = []
            while dead:
                d = heapq.heappop(dead)
                old = holder[d]
                q = reset_slot(old, last_use[old], hi)
                if q is not None:
                    layers[q // 2].mlp.add([reset_neuron(old)])
                    layers[q // 2].resets.append((old, d))
                    chosen = d
                    break
                skipped.append(d)  # no MLP with room in range: maybe later
            for d in skipped:
                heapq.heappush(dead, d)
        if chosen is None:
            if len(holder) >= n_avail:
                live = len(occupied)
                raise FitError(f"residual: signal {s.name} needs a dimension at position {p} but all "
                               f"{n_avail} signal dimensions are taken ({live} live; hidden_size "
                               f"{shape.hidden_size} minus {n_reserved} for the constant and fillers)")
            chosen = len(holder)
            holder.append(s)
        holder[chosen] = s
        dim_of[s] = chosen
        heapq.heappush(occupied, (last_use[s], chosen))
    return dim_of


@dataclass(frozen=True)
class CircuitIO:
    """Where a compiled circuit's inputs and outputs live in the residual (saved with checkpoints)."""

    name: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    residual: ResidualLayout
    fingerprint: str

    def input_dims(self, name: str) -> list[int]:
        return list(dict(self.inputs)[name])

    def output_dims(self, name: str) -> list[int]:
        return list(dict(self.outputs)[name])

    def to_dict(self) -> dict:
        return {"name": self.name, "inputs": [[n, list(d)] for n, d in self.inputs],
                "outputs": [[n, list(d)] for n, d in self.outputs],
                "residual": dataclasses.asdict(self.residual), "fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, d: dict) -> CircuitIO:
        r = d["residual"]
        res = ResidualLayout(int(r["hidden_size"]), int(r["one_dim"]), tuple(r["filler_dims"]),
                             tuple(r["filler_values"]), tuple(r["signal_dims"]), int(r["norm_log4"]))
        return cls(str(d["name"]), tuple((n, tuple(x)) for n, x in d["inputs"]),
                   tuple((n, tuple(x)) for n, x in d["outputs"]), res, str(d["fingerprint"]))


@dataclass
class CompiledCircuit:
    """A scheduled circuit: everything needed to write weights or explain any of them."""

    circuit: CircuitGraph
    shape: Shape
    layers: list[LayerPlan]
    placement: Placement
    dim_of: dict[Signal, int]
    residual: ResidualLayout

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def layer_types(self) -> list[str]:
        return [lp.layer_type for lp in self.layers]

    def input_dims(self, name: str) -> list[int]:
        return [self.dim_of[s] for s in self.circuit.inputs[name].outputs]

    def output_dims(self, name: str) -> list[int]:
        return [self.dim_of[s] for s in self.circuit.outputs[name]]

    @property
    def io(self):
        """Where inputs and outputs live: all a runner (or a reloaded checkpoint) needs."""
        return CircuitIO(self.circuit.name,
                         tuple((n, tuple(self.input_dims(n))) for n in self.circuit.inputs),
                         tuple((n, tuple(self.output_dims(n))) for n in self.circuit.outputs),
                         self.residual, self.fingerprint())

    def fingerprint(self) -> str:
        """A hash of everything that determines the weights (shape, layers, neurons, banks, io)."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            cached = self.__dict__["_fingerprint"] = self._fingerprint()
        return cached

    def _fingerprint(self) -> str:
        import hashlib
        import json

        desc: dict[str, Any] = {
            "shape": {k: getattr(self.shape.config, k, None) for k in SHAPE_KEYS},
            "layer_types": self.layer_types,
            "inputs": {n: self.input_dims(n) for n in self.circuit.inputs},
            "outputs": {n: self.output_dims(n) for n in self.circuit.outputs},
            "residual": dataclasses.asdict(self.residual),
            "layers": [],
        }
        for lp in self.layers:
            rows = [[sorted(g.items()), sorted(u.items()), sorted(d.items())]
                    for g, u, d in neuron_rows(self, lp)]
            banks = [dataclasses.asdict(placeholder_bank(b, self.dim_of)) for b in lp.banks]
            desc["layers"].append({"mlp": rows, "banks": banks})
        blob = json.dumps(desc, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()


def compile_circuit(circuit: CircuitGraph, config: Any, layer_types: list[str] | str | None = None,
                    reuse: bool = True, mlp_reserve: int = 0) -> CompiledCircuit:
    """Schedule ``circuit`` onto stock layers of ``config``'s shape.

    ``mlp_reserve``: MLP neurons per layer kept free during placement for the reset neurons that
    let dead residual dimensions be reused (see :func:`place`).
    ``layer_types``: None (DeltaNet everywhere, one mixer-free layer turned into full attention so
    the stock cache works), ``"config"`` (repeat ``config.layer_types``), or an explicit list.
    """
    shape = Shape.of(config)
    if isinstance(layer_types, str) and layer_types == "config":
        pattern = list(config.layer_types)
        type_at = lambda i: pattern[i % len(pattern)]  # noqa: E731
    elif isinstance(layer_types, list):
        explicit = list(layer_types)
        type_at = lambda i: explicit[i] if i < len(explicit) else LINEAR  # noqa: E731
    else:
        type_at = lambda i: LINEAR  # noqa: E731
    needed, order = live_signals(circuit)
    layers: list[LayerPlan] = []
    placement = place(circuit, shape, type_at, needed, order, layers, mlp_reserve)
    if FULL not in [lp.layer_type for lp in layers]:
        # the stock cache asks a full-attention layer for the sequence length (a model of DeltaNet
        # layers only fails on the decode path): turn a mixer-free layer into one, or add one
        free = [lp for lp in layers if not lp.banks]
        if layer_types is None and free:
            free[-1].layer_type = FULL
        else:
            layers.append(LayerPlan(len(layers), FULL))
            placement.n_layers += 1
            for sigs in circuit.outputs.values():
                for s in sigs:
                    placement.last_use[s] = 2 * placement.n_layers
    n_fill = filler_count(shape.hidden_size)
    n_reserved = 1 + n_fill
    dim_of = allocate(placement, layers, shape, order, n_reserved, reuse)
    H = shape.hidden_size
    one_dim = H - 1
    filler_dims = list(range(H - 2, H - 2 - n_fill, -1))
    residual = plan_residual(H, sorted(set(dim_of.values())), one_dim, filler_dims)
    return CompiledCircuit(circuit, shape, layers, placement, dim_of, residual)


def neuron_rows(compiled: CompiledCircuit, layer: LayerPlan) -> list[tuple[dict, dict, dict]]:
    """The MLP rows of ``layer`` in the x domain: (gate weights, up weights, down weights) per neuron."""
    from .mlp import Reset, x_domain

    rows = []
    one = compiled.residual.one_dim
    for spec in layer.mlp.neurons.values():
        gate = x_domain(spec.gate, compiled.dim_of, one)
        up = x_domain(spec.up, compiled.dim_of, one)
        down: dict[int, float] = {}
        for t, w in spec.down.items():
            d = compiled.dim_of[t.sig] if isinstance(t, Reset) else compiled.dim_of[t]
            down[d] = down.get(d, 0.0) + w
        rows.append((gate, up, {d: w for d, w in down.items() if w != 0.0}))
    return rows


__all__ = ["CompiledCircuit", "FitError", "LayerPlan", "NeuronSpec", "Shape", "compile_circuit",
           "neuron_rows"]
