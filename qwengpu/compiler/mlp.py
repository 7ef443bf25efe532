"""Formulas -> SwiGLU neurons, and why each neuron is exact in float32.

Stage 6. The stock MLP is ``down(silu(gate x) * up x)`` with no biases; the residual contract
makes the MLP input equal the residual exactly, with every used dimension at -1/+1 and
``one_dim`` at +1 (the bias input). So every gate and up pre-activation is an exact small integer
(weights are integers or halves; all partial sums stay far below 2**24). Measured facts used:

* ``silu(g) == g`` exactly in float32 for ``g >= 16.75`` and ``silu(g) == -0.0`` exactly for
  ``g <= -88.75`` (see :mod:`qwengpu.compiler.numerics`). Every gate we build is either ``>= 32``
  or ``<= -96``: an off neuron contributes exactly zero, an on neuron exactly ``g * up``.

Neuron shapes (``U`` is an integer form over the input bits, ``e = (L - theta*) / grain``):

* single step ``[L >= theta] * U`` when ``L`` is never above ``theta``: gate ``128 e + 32`` is
  exactly 32 when on and <= -96 when off, so ``h = 32 U`` or 0 -> down weight ``2 coef / 32``;
* step pair when ``L`` can overshoot: gates ``160 e + 64`` and ``160 e + 32`` differ by exactly
  32 in the linear range (both >= 32 when on) and are both <= -96 when off;
* product ``L * U``: gate ``L + beta >= 32`` always, ``h = (L + beta) U``; ``beta * U`` is removed
  by the linear neuron;
* the linear neuron: gate ``32`` (one_dim), up ``= lin + corrections``, down ``2 / 32``.

Each output dimension receives ``2 * value`` (from -1 to +1 when the bit is 1). Every ``h`` is an
integer and every down weight a power-of-two multiple, so the down projection is exact too;
:func:`certify` checks the 2**24 bounds for a whole layer. Identical neurons in one layer (same
gate and up rows) are merged, which is how an adder's neighbouring bits share carry thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Formula, Lin, Prod, Signal, Step
from .numerics import SILU_IDENTITY_MIN, SILU_ZERO_MAX

ON_MIN = SILU_IDENTITY_MIN  # silu(g) == g exactly above this; our on-gates are >= 32
OFF_MAX = SILU_ZERO_MAX  # silu(g) == -0.0 exactly below this; our off-gates are <= -96
STEP = 32  # on-height of a step in pre-activation units: a power of two
SINGLE_SLOPE = 128  # 32 - 128 = -96
PAIR_SLOPE = 160  # 64 - 160 = -96
EXACT_INT = 1 << 24  # float32 integers are exact below this


@dataclass(frozen=True)
class Reset:
    """Down-projection target: the dimension of a dead signal, returned to -1."""

    sig: Signal


@dataclass
class NeuronSpec:
    """One MLP neuron in signal space: ``down_t += w_t * silu(gate) * up`` for each target."""

    gate: Lin
    up: Lin
    kind: str
    down: dict = field(default_factory=dict)  # target (Signal | Reset) -> float

    def key(self) -> tuple:
        return (self.gate.key(), self.up.key())


def _step_neurons(t: Step, out: Signal) -> tuple[list[NeuronSpec], Lin]:
    """Neurons for ``coef [L >= theta] U``; returns (neurons, linear part when the step is constant)."""
    L, U = t.L, t.U
    if U.is_const and U.const == 0:
        return [], Lin()
    g = L.grain()
    # smallest attainable value >= theta (L only takes values const + k*g)
    theta = t.theta + ((L.const - t.theta) % g)
    if L.hi() < theta:
        return [], Lin()
    if L.lo() >= theta:
        return [], U * t.coef
    e = Lin({s: w // g for s, w in L.coeffs.items()}, (L.const - theta) // g)
    w = 2.0 * t.coef / STEP
    if L.hi() == theta:
        return [NeuronSpec(e * SINGLE_SLOPE + STEP, U, "step", {out: w})], Lin()
    hi = NeuronSpec(e * PAIR_SLOPE + 2 * STEP, U, "step+", {out: w})
    lo = NeuronSpec(e * PAIR_SLOPE + STEP, U, "step-", {out: -w})
    return [hi, lo], Lin()


def lower_formula(f: Formula, out: Signal) -> list[NeuronSpec]:
    """All neurons of one output bit (before merging with the rest of its layer)."""
    lam = f.lin
    specs: list[NeuronSpec] = []
    for t in f.terms:
        if isinstance(t, Step):
            neurons, extra = _step_neurons(t, out)
            specs += neurons
            lam = lam + extra
        elif isinstance(t, Prod):
            if t.L.is_const:
                lam = lam + t.U * (t.L.const * t.coef)
            elif t.U.is_const:
                lam = lam + t.L * (t.U.const * t.coef)
            else:
                beta = STEP - t.L.lo()
                specs.append(NeuronSpec(t.L + beta, t.U, "prod", {out: 2.0 * t.coef}))
                lam = lam - t.U * (beta * t.coef)
        else:  # pragma: no cover
            raise TypeError(t)
    if not (lam.is_const and lam.const == 0):
        specs.append(NeuronSpec(Lin({}, STEP), lam, "lin", {out: 2.0 / STEP}))
    return specs


def reset_neuron(sig: Signal) -> NeuronSpec:
    """``-2 * bit``: returns a dead signal's dimension to -1 so it can be reused."""
    return NeuronSpec(Lin({}, STEP), Lin({sig: 1}), "reset", {Reset(sig): -2.0 / STEP})


class LayerNeurons:
    """The merged neurons of one MLP: identical (gate, up) rows share one neuron."""

    def __init__(self) -> None:
        self.neurons: dict[tuple, NeuronSpec] = {}

    def cost(self, specs: list[NeuronSpec]) -> int:
        """New neurons ``specs`` would add (rows already present are shared). Looks each key up
        instead of building the set of the layer's neurons: this runs for every reset slot tried,
        and the set made it 30 of the test machine's 55 s of compile."""
        return sum(1 for k in {s.key() for s in specs} if k not in self.neurons)

    def add(self, specs: list[NeuronSpec]) -> None:
        for s in specs:
            k = s.key()
            cur = self.neurons.get(k)
            if cur is None:
                self.neurons[k] = NeuronSpec(s.gate, s.up, s.kind, dict(s.down))
            else:
                for t, w in s.down.items():
                    cur.down[t] = cur.down.get(t, 0.0) + w

    def __len__(self) -> int:
        return len(self.neurons)


def x_domain(form: Lin, dim_of: dict[Signal, int], one_dim: int) -> dict[int, float]:
    """A bits-domain form as weights on +-1 residual dims: b = (x + 1) / 2."""
    out: dict[int, float] = {}
    bias = float(form.const)
    for s, w in form.coeffs.items():
        d = dim_of[s]
        out[d] = out.get(d, 0.0) + w / 2.0
        bias += w / 2.0
    if bias:
        out[one_dim] = out.get(one_dim, 0.0) + bias
    return {d: w for d, w in out.items() if w != 0.0}


@dataclass
class Certificate:
    """Worst-case magnitudes of one MLP (all must stay below 2**24 for exact float32 sums)."""

    max_gate: float = 0.0
    max_up: float = 0.0
    max_hidden: float = 0.0
    max_down_sum: float = 0.0

    def ok(self) -> bool:
        return max(self.max_gate, self.max_up, self.max_hidden, self.max_down_sum) < EXACT_INT


def certify(rows: list[tuple[dict[int, float], dict[int, float], dict[int, float]]]) -> Certificate:
    """Bound every partial sum of one MLP from its (gate, up, down) rows in the x domain."""
    cert = Certificate()
    per_dim: dict[int, float] = {}
    for gate, up, down in rows:
        g = sum(abs(w) for w in gate.values())
        u = sum(abs(w) for w in up.values())
        cert.max_gate = max(cert.max_gate, g)
        cert.max_up = max(cert.max_up, u)
        cert.max_hidden = max(cert.max_hidden, g * u)
        for d, w in down.items():
            per_dim[d] = per_dim.get(d, 0.0) + abs(w) * g * u
    cert.max_down_sum = max(per_dim.values(), default=0.0)
    return cert


def margin(gate_value: float) -> float:
    """Distance of a gate pre-activation from the inexact SiLU band; negative inside the band."""
    return max(gate_value - ON_MIN, OFF_MAX - gate_value)
