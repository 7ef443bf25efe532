"""Exact keyed bit-row memories in a stock ``Qwen3_5GatedDeltaNet`` (the ``linear_attn`` mixer).

A *bank* is an array of ``rows`` rows of ``width`` bits.  Every token may write one row (the
address and data come from residual dims, gated by a write-enable dim) and every *read port*
reads one row into its own output dims, in the same token, after the write (DeltaNet writes
before it reads, so a read of the row just written sees the new data).  Each read port is a
separate copy of the bank in its own heads; all copies are written identically.

Residual contract (shared with the circuits compiler): the mixer sees exactly the residual ``x``
(signal dims ``+-1``, ``one_dim`` = +1, unused dims 0); it returns a delta that is exactly 0 on
every dim except read-port outputs, which get ``bit + 1`` in {0, 2} (they hold -1 on entry).  A
never-written row, or an address ``>= rows``, reads as all zeros; a write to an address
``>= rows`` is dropped.

Why each setting is what it is (the float argument; thresholds in ``numerics``):

* **Conv taps** ``[0, 0, 0, 1]``: q/k/v see only the current token (0 * x adds exact zeros).
* **Keys and queries: one-hot, pre-activation +128 / <= -128.**  Row ``j``'s key unit gets
  ``128 * (sum_i s_ji b_i - (n - 1))`` (``s_ji`` the +-1 pattern of ``j``, ``b_i`` the address
  bits, the bias through ``one_dim``): +128 on the addressed row, ``<= -128`` elsewhere.  Integer
  sums are exact in any order.  SiLU(128) == 128 and SiLU(x <= -88.75) == -0.0 *exactly* (exp
  overflows), so the key is exactly one-hot with no -4e-13 leakage; l2norm of a one-hot power of
  two is exactly 1.0.  An address with no row in a head gives the zero vector, and l2norm(0) = 0:
  the write is a no-op and the read is 0.  One-hot keys are orthonormal, so the delta rule
  ``S += k (beta (v - S^T k))^T`` replaces row ``j`` exactly and touches nothing else.
* **beta = sigmoid(+-128)** is exactly 1 or exactly 0 (exp under/overflows): a full overwrite or
  an exact no-op; no scratch row needed.
* **Decay**: ``A_log = dt_bias = -256`` make ``exp(A_log)`` and ``softplus(dt_bias)`` both exactly
  0, so ``g = -0.0`` and every decay factor, cumulative or pairwise, is exactly ``exp(0) = 1``.
* **Queries** stay one-hot (no dummy row): both kernels turn the unit entry into the *same* float
  ``T`` (chunked ``1 * fl32(d**-0.5)``, recurrent ``1 / fl32(d**0.5)``; measured equal for every
  power-of-two ``d_k``).  A two-hot query does not help: ``fl(2**-.5) * fl(128**-.5)`` rounds to
  ``2**-4 - ulp`` on the chunked path but ``2**-4`` on the recurrent one.  ``T`` is a power of two
  when ``d_k`` is a power of 4, else it has a full mantissa (0.0883883... for 128).
* **Values** are ``{0, V}`` per bit with ``V`` a power of two, so every product ``T * (+-V)`` is
  exact even under FMA, and every sum the chunked kernel forms (triangular solve, ``k_cumdecay @
  S``, ``key^T @ v_new``) is a small integer multiple of ``V`` or a single term: exact.  The one
  sum that involves ``T`` with several terms is the intra-chunk read ``(q k^T) @ v_new``: its
  terms are the successive changes of one bit of the read row, which alternate in sign, so every
  *contiguous* partial sum is ``-x, 0`` or ``+x`` (``x = T V``): exact for any accumulation order
  that adds contiguous runs (sequential, blocked or pairwise); when ``d_k`` is a power of 4, ``x``
  is a power of two and any order is exact.  The recurrent kernel reads a single product.
* **The gated RMSNorm** multiplies each read row by ``rsqrt(mean(o^2) + eps)``, which would
  depend on the row's popcount.  Two encodings make it constant:

  - ``"dense"`` (default; every value dim is a data bit): ``V = 2**-30`` (the in_proj emits
    ``2**-29``, and SiLU of a tiny ``x`` is exactly ``x / 2``).  Then ``mean(o^2) <= 2**-60`` is
    absorbed by ``eps`` (half an ulp of fl32(1e-6) is 2**-44), so the factor is the constant
    ``rsqrt(fl32(eps))`` whatever the data.  That constant is 999.99994 here (1/sqrt, two
    roundings) and 1000.0 under a correctly rounded rsqrt; the weight search prefers a ``W`` that
    snaps both (``read_chain_robustness`` reports it; true for d_k = 32..512).
  - ``"robust"``: ``F = d_v / 4**j`` filler dims (2 of 128) always store a value ``Fv`` with
    ``fl(T * Fv) = 2**m`` exactly and ``V = 32``; the data's squares are below half an ulp of the
    fillers' in any summation order, so ``mean = F 4**m / d_v`` is an exact power of four and the
    factor an exact power of two on every implementation of rsqrt.  Costs ``F`` bits per head.

  Either way a stored 1 reads as one constant ``n`` (measured with the stock norm module on rows
  of different popcounts); ``norm.weight`` (shared by all heads) is a float ``W`` near ``1/n``
  found by search so that one correctly rounded multiplication ``fl(W * n)`` is an exact power of
  two (the same trick picks the robust filler: ``fl(fl32(128**-.5) * 11.3137093) == 1.0``),
  ``z = 32`` (SiLU(32) = 32), and ``out_proj`` an exact power of two mapping it to 2.  A stored 0
  or an unwritten row reads ``o = 0`` and contributes exact zeros; ``out_proj`` is zero on every
  other dim.  Padding tokens (inputs zeroed by the attention mask) have zero keys and queries:
  no-ops.
* **dtype**: the constants are calibrated for the module's dtype when it is programmed; program a
  bfloat16 module after converting it (measured exact in bf16 too: every pre-activation is an
  exact bf16 number, the kernels compute in fp32, the read value is rounded to bf16 once).

Capacity: a key head holds ``d_k`` rows; each of its ``num_v_heads / num_k_heads`` value heads
holds ``d_v`` bits (dense) or ``d_v - F`` (robust).  A (bank, read port) takes whole key heads:
``ceil(rows / d_k) * ceil(width / (bits per key head))``.  Supported: width split across value
heads and key heads, rows split across key heads (address decode in the keys), any number of
ports.  Not supported: two banks or ports sharing one key head.  In practice the residual is the
other limit: every port needs ``width`` output dims.

Paths: without ``fla`` and ``causal-conv1d`` (absent here) transformers runs its torch fallbacks
``torch_chunk_gated_delta_rule`` / ``torch_recurrent_gated_delta_rule`` /
``causal_conv1d_fn`` / ``causal_conv1d_update``; these are what the exactness argument and the
tests cover.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .ir import MemoryNode, Signal
from .numerics import (
    SIGMOID_ONE_MIN,
    SIGMOID_ZERO_MAX,
    SILU_HALF_MAX,
    SILU_IDENTITY_MIN,
    SILU_ZERO_MAX,
    SOFTPLUS_ZERO_MAX,
    half_ulp,
    is_power_of_two,
    next_float,
    query_scales,
    representable,
    round_to,
    snap_factor,
)

KEY_GAIN = 128.0  # pre-activation of the selected key/query unit; power of two, >= -SILU_ZERO_MAX
BETA_GAIN = 128.0  # |beta logit|: sigmoid is exactly 1 / exactly 0
DECAY_OFF = -256.0  # A_log and dt_bias: exp(A_log) == 0 and softplus(dt_bias) == 0, so g == -0.0
GATE = 32.0  # z pre-activation: SiLU(32) == 32
DENSE_VALUE_PRE = 2.0**-29  # in_proj output of a stored 1 (dense); SiLU halves it exactly
ROBUST_VALUE_PRE = 32.0  # in_proj output of a stored 1 (robust); SiLU(32) == 32
ENCODINGS = ("dense", "robust")


class FitError(ValueError):
    """The banks do not fit the layer (names the resource: key heads, rows, value width, ...)."""


@dataclass(frozen=True)
class ReadPort:
    addr: tuple[int, ...]  # residual dims holding the read address bits (LSB first)
    out: tuple[int, ...]  # residual dims (hold -1 on entry) receiving the row, len == bank width


@dataclass(frozen=True)
class MemoryBank:
    name: str
    rows: int  # number of addressable rows
    width: int  # bits per row
    write_addr: tuple[int, ...]  # residual dims of the write address (LSB first)
    write_data: tuple[int, ...]  # residual dims of the data bits, len == width
    write_enable: int | None  # residual dim: +1 = write this token, -1 = don't; None = always write
    read_ports: tuple[ReadPort, ...]


def placeholder_bank(node: MemoryNode, dim_of: dict[Signal, int] | None = None, counter=None) -> MemoryBank:
    """The :class:`MemoryBank` of a circuit's ``node``: dims from ``dim_of``, or distinct placeholder
    dims drawn from ``counter`` (only the bank's shape matters for fitting). It lives here, beside
    the bank it builds, so scheduling, the report and the weight writer share it one way."""
    counter = counter if counter is not None else iter(range(1 << 30))

    def dims(sigs: list[Signal] | None) -> tuple[int, ...]:
        if sigs is None:
            return ()
        return tuple(dim_of[s] if dim_of is not None else next(counter) for s in sigs)

    en = None
    if node.write_enable is not None:
        en = dim_of[node.write_enable] if dim_of is not None else next(counter)
    ports = tuple(ReadPort(addr=dims(p.addr), out=dims(p.out)) for p in node.ports)
    return MemoryBank(name=node.name, rows=node.rows, width=node.width, write_addr=dims(node.write_addr),
                      write_data=dims(node.write_data), write_enable=en, read_ports=ports)


@dataclass(frozen=True)
class HeadUse:
    """A value head holding rows [row_start, +row_count) x bits [bit_start, +bit_count) of a port's copy."""

    bank: str
    port: int  # index into the bank's read_ports
    key_head: int
    value_head: int
    row_start: int
    row_count: int
    bit_start: int
    bit_count: int


@dataclass(frozen=True)
class ReadChain:
    """The float constants of the encoding (see module docstring)."""

    encoding: str
    dtype: torch.dtype
    query_scale: float  # T: a unit query entry after l2norm and the kernel's 1/sqrt(d_k)
    value_pre: float  # in_proj_qkv output for a stored 1
    value: float  # V: the stored value of a 1 (after SiLU)
    filler_slots: tuple[int, ...]  # value-dim slots (within a head) holding the filler
    filler_pre: float  # in_proj_qkv output (= stored value) of the filler; 0.0 if none
    read_value: float  # n: the gated norm's output for a stored 1, before weight and gate
    norm_weight: float  # W: norm.weight on data slots (0 on filler slots)
    gate: float  # z pre-activation (= SiLU(z)) on data slots
    out_weight: float  # out_proj weight: fl(fl(W*n)*gate) * out_weight == 2
    absorb_ratio: float  # largest data mean square / half an ulp of what absorbs it (must be < 1)


@dataclass(frozen=True)
class MemoryPlan:
    hidden_size: int
    num_k_heads: int
    num_v_heads: int
    head_k_dim: int
    head_v_dim: int
    rows_per_key_head: int
    bits_per_value_head: int
    data_slots: tuple[int, ...]  # value-dim slots that hold data bits, in bit order
    chain: ReadChain
    banks: tuple[MemoryBank, ...]
    heads: tuple[HeadUse, ...]

    @property
    def value_heads_per_key_head(self) -> int:
        return self.num_v_heads // self.num_k_heads

    @property
    def key_heads_used(self) -> tuple[int, ...]:
        return tuple(sorted({h.key_head for h in self.heads}))

    @property
    def free_key_heads(self) -> int:
        return self.num_k_heads - len(self.key_heads_used)

    def heads_for(self, bank: str, port: int) -> tuple[HeadUse, ...]:
        return tuple(h for h in self.heads if h.bank == bank and h.port == port)

    def describe(self) -> str:
        c = self.chain
        lines = [
            f"linear_attn memory plan ({c.encoding}, {str(c.dtype).removeprefix('torch.')}): "
            f"{self.num_k_heads} key heads x {self.rows_per_key_head} rows, "
            f"{self.value_heads_per_key_head} value heads per key head x {self.bits_per_value_head} bits; "
            f"{len(self.key_heads_used)} key heads used, {self.free_key_heads} free",
            f"  T={c.query_scale!r} V={c.value!r} n={c.read_value!r} W={c.norm_weight!r} z={c.gate!r} "
            f"out={c.out_weight!r} filler={c.filler_pre!r} x{len(c.filler_slots)} "
            f"absorb={c.absorb_ratio:.3g}",
        ]
        for bank in self.banks:
            for p in range(len(bank.read_ports)):
                uses = self.heads_for(bank.name, p)
                kh = sorted({u.key_head for u in uses})
                lines.append(
                    f"  {bank.name}[{bank.rows}x{bank.width}] port {p}: key heads {kh}, "
                    f"value heads {[u.value_head for u in uses]}"
                )
        return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# planning


def _geometry(config) -> tuple[int, int, int, int, int]:
    hidden = int(config.hidden_size)
    nk, nv = int(config.linear_num_key_heads), int(config.linear_num_value_heads)
    dk, dv = int(config.linear_key_head_dim), int(config.linear_value_head_dim)
    if nv % nk:
        raise FitError(f"linear_num_value_heads={nv} is not a multiple of linear_num_key_heads={nk}")
    return hidden, nk, nv, dk, dv


def filler_count(head_v_dim: int) -> int:
    """Robust encoding: fewest filler slots F with head_v_dim / F a power of four."""
    f = head_v_dim
    while f % 4 == 0:
        f //= 4
    return f


def head_capacity(config, encoding: str = "dense") -> dict[str, int]:
    """What one linear_attn offers: key heads, rows per key head, value heads per key head, bits each."""
    _, nk, nv, dk, dv = _geometry(config)
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    bits = dv if encoding == "dense" else dv - filler_count(dv)
    return {"key_heads": nk, "rows_per_key_head": dk, "value_heads_per_key_head": nv // nk,
            "bits_per_value_head": max(bits, 0)}


def _check_bank(bank: MemoryBank, hidden: int) -> None:
    def dims_ok(what: str, dims: Sequence[int]) -> None:
        for d in dims:
            if not (isinstance(d, int) and 0 <= d < hidden):
                raise ValueError(f"bank {bank.name!r}: {what} dim {d!r} outside the residual "
                                 f"(hidden_size={hidden})")

    if bank.rows < 1 or bank.width < 1:
        raise ValueError(f"bank {bank.name!r}: rows={bank.rows} and width={bank.width} must be >= 1")
    n = len(bank.write_addr)
    if bank.rows > 2**n:
        raise ValueError(f"bank {bank.name!r}: {bank.rows} rows need >= {math.ceil(math.log2(bank.rows))} "
                         f"address bits, write_addr has {n}")
    if len(bank.write_data) != bank.width:
        raise ValueError(f"bank {bank.name!r}: write_data has {len(bank.write_data)} dims, "
                         f"width is {bank.width}")
    dims_ok("write_addr", bank.write_addr)
    dims_ok("write_data", bank.write_data)
    if bank.write_enable is not None:
        dims_ok("write_enable", (bank.write_enable,))
    if not bank.read_ports:
        raise ValueError(f"bank {bank.name!r} has no read ports")
    for p, port in enumerate(bank.read_ports):
        if len(port.addr) != n:
            raise ValueError(f"bank {bank.name!r} port {p}: {len(port.addr)} address dims, "
                             f"write_addr has {n}")
        if len(port.out) != bank.width:
            raise ValueError(f"bank {bank.name!r} port {p}: {len(port.out)} out dims, width is {bank.width}")
        dims_ok(f"port {p} addr", port.addr)
        dims_ok(f"port {p} out", port.out)


def _read_value(n_probe: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    return norm(n_probe, torch.full_like(n_probe, GATE))


def _dense_chain(x_one: float, eps: float, ulps: int, w: float, z: float) -> float:
    """fl(fl(fl(x * R') * w) * z) with R' = rsqrt(fl32(eps)) moved by ``ulps`` (float32, IEEE ops)."""
    r = float(torch.rsqrt(torch.tensor([round_to(eps)], dtype=torch.float32))[0])
    r = next_float(r, ulps) if ulps else r
    f32 = torch.float32
    n = torch.tensor(x_one, dtype=f32) * torch.tensor(r, dtype=f32)
    return float((torch.tensor(w, dtype=f32) * n) * torch.tensor(z, dtype=f32))


def _calibrate_chain(encoding: str, config, dtype: torch.dtype) -> tuple[ReadChain, tuple[int, ...]]:
    """Choose V, the filler, W, z and the out_proj weight; measured with the stock norm module."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5RMSNormGated

    _, _, _, dk, dv = _geometry(config)
    eps = float(config.rms_norm_eps)
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {ENCODINGS}, got {encoding!r}")
    t_chunk, t_rec = query_scales(dk)
    if t_chunk != t_rec:
        raise FitError(f"linear_key_head_dim={dk}: the chunked ({t_chunk!r}) and recurrent ({t_rec!r}) "
                       "kernels scale a unit query differently, so reads cannot be exact on both paths")
    t = t_chunk
    if encoding == "dense":
        value_pre = DENSE_VALUE_PRE
        value = float(F.silu(torch.full((9,), value_pre))[-1])
        if value != value_pre / 2:
            raise FitError(f"SiLU({value_pre!r}) is not exactly half of it here; dense encoding unavailable")
        slots = tuple(range(dv))
        fillers: tuple[int, ...] = ()
        filler_pre = 0.0
        if eps <= 0:
            raise FitError(f"dense encoding needs rms_norm_eps > 0 to absorb the row norm (got {eps})")
        absorb_ratio = (t * value) ** 2 / half_ulp(round_to(eps))
    else:
        value_pre = value = ROBUST_VALUE_PRE
        f = filler_count(dv)
        if f >= dv:
            raise FitError(f"robust encoding: linear_value_head_dim={dv} leaves no data slot "
                           f"(needs d_v / fillers to be a power of four; fillers={f})")
        slots = tuple(range(dv - f))
        fillers = tuple(range(dv - f, dv))
        snap = snap_factor(t, dtype)
        if snap is None:
            raise FitError(f"robust encoding: no {dtype} filler value makes fl(T*Fv) a power of two "
                           f"(T={t!r})")
        x, y = snap  # fl(t*x) == y
        data_sq = len(slots) * (t * value) ** 2
        m = 0
        while True:
            filler_pre = x * 2.0**m
            o_f = y * 2.0**m
            absorb_ratio = data_sq / half_ulp(f * o_f * o_f)
            if absorb_ratio < 2.0**-4 and filler_pre >= 2 * SILU_IDENTITY_MIN:
                break
            m += 1
        if not representable(filler_pre, dtype):
            raise FitError(f"robust encoding: filler value {filler_pre!r} is not representable in {dtype}")
    if absorb_ratio >= 1:
        raise FitError(f"{encoding} encoding: the data's mean square is not absorbed (ratio {absorb_ratio})")

    # The gated norm's output for a stored 1, measured with the stock module on rows of several
    # popcounts (all must agree: that is the point of the encoding).
    norm = Qwen3_5RMSNormGated(dv, eps=eps).to(dtype)
    x_one = float(torch.tensor(t * value, dtype=torch.float32).to(dtype))
    with torch.no_grad():
        norm.weight.fill_(1.0)
        probes = torch.zeros(4, dv, dtype=torch.float64)
        for row, pattern in enumerate(("all", "one", "alt", "last")):
            for i, s in enumerate(slots):
                if {"all": True, "one": i == 0, "alt": i % 2 == 0, "last": i == len(slots) - 1}[pattern]:
                    probes[row, s] = x_one
        for s in fillers:
            probes[:, s] = t * filler_pre
        probes = probes.to(torch.float32).to(dtype)
        out = _read_value(probes, norm).to(torch.float64) / GATE
    ones = out[probes.to(torch.float64) == x_one]
    if not bool((ones == ones[0]).all()):
        raise FitError(f"{encoding} encoding: the read value depends on the row's popcount: "
                       f"{ones.unique().tolist()}")
    n = float(ones[0])

    # Search W (norm weight) and, if needed, z near 32 so that fl(fl(W*n)*SiLU(z)) is a power of two.
    w_cands = sorted({next_float(1.0 / n, k, dtype) for k in range(-24, 25)}, key=lambda w: abs(w * n - 1))
    z_cands = [GATE] + [next_float(GATE, k, dtype) for k in (1, -1, 2, -2, 3, -3, 4, -4)]
    found = []  # (w, z, y), in order of preference: z = 32 first, then w nearest 1/n
    with torch.no_grad():
        for z in z_cands:
            for i0 in range(0, len(w_cands), len(slots)):
                batch = w_cands[i0: i0 + len(slots)]
                weight = torch.zeros(dv, dtype=torch.float64)
                weight[list(slots[: len(batch)])] = torch.tensor(batch, dtype=torch.float64)
                norm.weight.copy_(weight.to(dtype))
                y = norm(probes[:1], torch.full_like(probes[:1], z))[0].to(torch.float64)
                found += [(w, z, float(y[slots[i]])) for i, w in enumerate(batch)
                          if is_power_of_two(float(y[slots[i]]))]
            if found:
                break
    if not found:
        raise FitError(f"{encoding} encoding: no norm weight / gate makes the read value {n!r} "
                       "a power of two")
    # Dense: the factor rsqrt(fl32(eps)) is the one inexact rsqrt in the chain. Prefer a weight that
    # also snaps the read value another rsqrt implementation (one ulp either side) would give.
    chosen = found[0]
    if encoding == "dense" and dtype == torch.float32:
        def neighbours_ok(cand):
            w, z, y = cand
            return sum(_dense_chain(x_one, eps, k, w, z) == y for k in (-1, 1))

        chosen = max(found, key=neighbours_ok)
    w, z, y = chosen
    # Re-measure with the chosen weight on the real probes (fillers get weight 0).
    with torch.no_grad():
        weight = torch.zeros(dv, dtype=torch.float64)
        weight[list(slots)] = w
        norm.weight.copy_(weight.to(dtype))
        res = norm(probes, torch.full_like(probes, z)).to(torch.float64)
    expect = torch.where(probes.to(torch.float64) == x_one, y, 0.0)
    expect[:, list(fillers)] = 0.0
    if not torch.equal(res, expect):
        raise FitError(f"{encoding} encoding: calibrated read chain is not exact on probe rows")
    chain = ReadChain(
        encoding=encoding, dtype=dtype, query_scale=t, value_pre=value_pre, value=value,
        filler_slots=fillers, filler_pre=filler_pre, read_value=n, norm_weight=w, gate=z,
        out_weight=2.0 / y, absorb_ratio=absorb_ratio,
    )
    return chain, slots


def plan_memory(config, banks: Sequence[MemoryBank], *, encoding: str = "dense",
                dtype: torch.dtype = torch.float32) -> MemoryPlan:
    """Assign heads, rows and value slots to every (bank, read port); raise FitError if they do not fit."""
    hidden, nk, nv, dk, dv = _geometry(config)
    banks = tuple(banks)
    names = [b.name for b in banks]
    if len(set(names)) != len(names):
        raise ValueError(f"bank names must be unique: {names}")
    for bank in banks:
        _check_bank(bank, hidden)
    outs: dict[int, str] = {}
    for bank in banks:
        for p, port in enumerate(bank.read_ports):
            for d in port.out:
                if d in outs:
                    raise ValueError(f"residual dim {d} is an out dim of both {outs[d]} "
                                     f"and {bank.name!r} port {p}")
                outs[d] = f"{bank.name!r} port {p}"
    chain, slots = _calibrate_chain(encoding, config, dtype)
    r = nv // nk
    bits = len(slots)
    per_key_head = r * bits

    demand = []
    for bank in banks:
        row_groups = math.ceil(bank.rows / dk)
        width_groups = math.ceil(bank.width / per_key_head)
        demand.append((bank, row_groups, width_groups, len(bank.read_ports) * row_groups * width_groups))
    total = sum(d[3] for d in demand)
    if total > nk:
        detail = "; ".join(
            f"{b.name!r} {b.rows}x{b.width}, {len(b.read_ports)} ports: {len(b.read_ports)} x {rg} "
            f"row groups x {wg} width groups = {n}" for b, rg, wg, n in demand)
        raise FitError(
            f"memory does not fit one linear_attn: needs {total} key heads, the layer has {nk} "
            f"(linear_num_key_heads). Each key head holds {dk} rows (linear_key_head_dim) x {r} value heads "
            f"x {bits} bits (linear_value_head_dim={dv}, {chain.encoding} encoding). Demand: {detail}")

    heads = []
    kh = 0
    for bank, row_groups, width_groups, _ in demand:
        for p in range(len(bank.read_ports)):
            for rg in range(row_groups):
                row_start = rg * dk
                row_count = min(dk, bank.rows - row_start)
                for wg in range(width_groups):
                    for i in range(r):
                        bit_start = wg * per_key_head + i * bits
                        bit_count = min(bits, bank.width - bit_start)
                        if bit_count <= 0:
                            break
                        heads.append(HeadUse(bank.name, p, kh, kh * r + i, row_start, row_count,
                                             bit_start, bit_count))
                    kh += 1
    return MemoryPlan(
        hidden_size=hidden, num_k_heads=nk, num_v_heads=nv, head_k_dim=dk, head_v_dim=dv,
        rows_per_key_head=dk, bits_per_value_head=bits, data_slots=slots, chain=chain,
        banks=banks, heads=tuple(heads),
    )


# ----------------------------------------------------------------------------------------------
# programming


def _decode_row(weight: torch.Tensor, row: int, addr: Sequence[int], j: int, one_dim: int) -> None:
    """weight[row] . x = KEY_GAIN * (sum_i s_ji b_i - (n - 1)): +128 iff the address bits spell j."""
    n = len(addr)
    for i, d in enumerate(addr):
        weight[row, d] += KEY_GAIN if (j >> i) & 1 else -KEY_GAIN
    weight[row, one_dim] += -KEY_GAIN * (n - 1)


def program_linear_attention(module, config, banks: Sequence[MemoryBank], one_dim: int, *,
                             encoding: str = "dense") -> MemoryPlan:
    """Write every weight of a stock Qwen3_5GatedDeltaNet so that it serves ``banks`` exactly."""
    dtype = module.in_proj_qkv.weight.dtype
    plan = plan_memory(config, banks, encoding=encoding, dtype=dtype)
    hidden, nk, nv = plan.hidden_size, plan.num_k_heads, plan.num_v_heads
    dk, dv = plan.head_k_dim, plan.head_v_dim
    if not (module.num_k_heads == nk and module.num_v_heads == nv and module.head_k_dim == dk
            and module.head_v_dim == dv and module.hidden_size == hidden):
        raise ValueError("module shape does not match config")
    if not 0 <= one_dim < hidden:
        raise ValueError(f"one_dim={one_dim} outside the residual")
    for bank in plan.banks:
        for p, port in enumerate(bank.read_ports):
            if one_dim in port.out:
                raise ValueError(f"bank {bank.name!r} port {p} writes into one_dim {one_dim}")
    if getattr(module, "activation", "silu") != "silu":
        raise FitError(f"linear_attn activation is {module.activation!r}; the encoding relies on SiLU")
    c = plan.chain
    key_dim, value_dim = nk * dk, nv * dv
    w_qkv = torch.zeros(2 * key_dim + value_dim, hidden, dtype=torch.float64)
    w_z = torch.zeros(value_dim, hidden, dtype=torch.float64)
    w_b = torch.zeros(nv, hidden, dtype=torch.float64)
    w_out = torch.zeros(hidden, value_dim, dtype=torch.float64)
    w_b[:, one_dim] = -BETA_GAIN  # unused heads never write (their keys are zero anyway)
    by_name = {b.name: b for b in plan.banks}
    keyed: dict[int, tuple] = {}
    for use in plan.heads:
        bank = by_name[use.bank]
        port = bank.read_ports[use.port]
        sig = (use.bank, use.port, use.row_start)
        if keyed.setdefault(use.key_head, sig) != sig:
            raise AssertionError("two ports share a key head")  # plan_memory never does this
        if not w_qkv[key_dim + use.key_head * dk: key_dim + (use.key_head + 1) * dk].any():
            for local in range(use.row_count):
                j = use.row_start + local
                _decode_row(w_qkv, use.key_head * dk + local, port.addr, j, one_dim)
                _decode_row(w_qkv, key_dim + use.key_head * dk + local, bank.write_addr, j, one_dim)
        base = use.value_head * dv
        for b in range(use.bit_count):
            slot = plan.data_slots[b]
            bit = use.bit_start + b
            w_qkv[2 * key_dim + base + slot, bank.write_data[bit]] += c.value_pre / 2
            w_qkv[2 * key_dim + base + slot, one_dim] += c.value_pre / 2
            w_out[port.out[bit], base + slot] = c.out_weight
        for slot in c.filler_slots:
            w_qkv[2 * key_dim + base + slot, one_dim] = c.filler_pre
        w_z[base: base + dv, one_dim] = c.gate
        w_b[use.value_head, one_dim] = 0.0
        if bank.write_enable is None:
            w_b[use.value_head, one_dim] = BETA_GAIN
        else:
            w_b[use.value_head, bank.write_enable] = BETA_GAIN
    norm_w = torch.zeros(dv, dtype=torch.float64)
    norm_w[list(plan.data_slots)] = c.norm_weight

    for name, t in (("in_proj_qkv", w_qkv), ("in_proj_z", w_z), ("in_proj_b", w_b), ("out_proj", w_out),
                    ("norm", norm_w)):
        if not torch.equal(t.to(dtype).to(torch.float64), t):
            raise FitError(f"a {name} weight is not representable in {dtype}")
    with torch.no_grad():
        module.in_proj_qkv.weight.copy_(w_qkv.to(dtype))
        module.in_proj_z.weight.copy_(w_z.to(dtype))
        module.in_proj_b.weight.copy_(w_b.to(dtype))
        module.in_proj_a.weight.zero_()
        module.dt_bias.fill_(DECAY_OFF)
        module.A_log.fill_(DECAY_OFF)
        conv = torch.zeros_like(module.conv1d.weight)
        conv[..., -1] = 1.0
        module.conv1d.weight.copy_(conv)
        if module.conv1d.bias is not None:
            module.conv1d.bias.zero_()
        module.norm.weight.copy_(norm_w.to(module.norm.weight.dtype))
        module.out_proj.weight.copy_(w_out.to(dtype))
        linears = (module.in_proj_qkv, module.in_proj_z, module.in_proj_b, module.in_proj_a, module.out_proj)
        for lin in linears:
            if lin.bias is not None:
                lin.bias.zero_()
    return plan


# ----------------------------------------------------------------------------------------------
# reference model and diagnostics


class ReferenceMemory:
    """Plain-Python model of the banks: the oracle the compiled layer must match bit for bit."""

    def __init__(self, banks: Sequence[MemoryBank]):
        self.banks = tuple(banks)
        self.rows: dict[str, dict[int, tuple[int, ...]]] = {b.name: {} for b in self.banks}

    @staticmethod
    def _addr(x: Sequence[float], dims: Sequence[int]) -> int:
        return sum(1 << i for i, d in enumerate(dims) if x[d] > 0)

    def step(self, x: Sequence[float]) -> dict[int, float]:
        """Apply one token (residual values ``x``); return the delta on every read-port out dim."""
        delta: dict[int, float] = {}
        for bank in self.banks:
            mem = self.rows[bank.name]
            if bank.write_enable is None or x[bank.write_enable] > 0:
                a = self._addr(x, bank.write_addr)
                if a < bank.rows:
                    mem[a] = tuple(int(x[d] > 0) for d in bank.write_data)
            for port in bank.read_ports:
                row = mem.get(self._addr(x, port.addr), (0,) * bank.width)
                for d, bit in zip(port.out, row, strict=True):
                    delta[d] = 2.0 * bit
        return delta


def read_chain_robustness(plan: MemoryPlan, eps: float) -> dict[str, bool]:
    """Would a stored 1 still read as exactly 2 if rsqrt were implemented differently?

    Robust encoding: rsqrt only ever sees exact powers of four, so yes.  Dense: the chain uses
    rsqrt(fl32(eps)); report whether the read stays exact if that value is one ulp lower or higher
    (here 999.99994 from 1/sqrt; a correctly rounded rsqrt gives 1000.0, one ulp higher)."""
    c = plan.chain
    if c.encoding == "robust":
        o_f = round_to(round_to(c.query_scale * c.filler_pre), c.dtype)
        ok = is_power_of_two(o_f)  # then mean(o^2) is an exact power of four
        return {"rsqrt-1ulp": ok, "rsqrt": True, "rsqrt+1ulp": ok}
    x_one = c.query_scale * c.value
    y = 2.0 / c.out_weight
    return {name: _dense_chain(x_one, eps, k, c.norm_weight, c.gate) == y
            for name, k in (("rsqrt-1ulp", -1), ("rsqrt", 0), ("rsqrt+1ulp", 1))}


def margin_report(module, plan: MemoryPlan, hidden_states: torch.Tensor) -> dict[str, float]:
    """Smallest distances to every exactness threshold seen on ``hidden_states`` (all must be > 0).

    Keys: ``key_on`` / ``query_on`` (selected unit - 16.75), ``key_off`` / ``query_off`` (-88.75 -
    largest unselected pre-activation), ``value`` (robust: smallest stored 1 - 16.75; dense: how many
    times below 2**-27 the largest value pre-activation is, as log2), ``value_levels`` (number of
    distinct value pre-activations outside {0, V}: must be 0), ``beta_on`` / ``beta_off``,
    ``gate``, ``decay`` (-104 - largest softplus input), ``absorb`` (log2 of half-ulp / data mean
    square), ``filler`` (robust: stored filler - 16.75)."""
    nk, dk, dv = plan.num_k_heads, plan.head_k_dim, plan.head_v_dim
    key_dim = nk * dk
    c = plan.chain
    with torch.no_grad():
        x = hidden_states.reshape(-1, hidden_states.shape[-1]).to(module.in_proj_qkv.weight.dtype)
        qkv = module.in_proj_qkv(x).double()
        b = module.in_proj_b(x).double()
        a = module.in_proj_a(x).double() + module.dt_bias.double()
        z = module.in_proj_z(x).double()
    used_k = sorted({u.key_head for u in plan.heads})
    used_v = sorted({u.value_head for u in plan.heads})
    kcols = [h * dk + i for h in used_k for i in range(dk)]
    q, k = qkv[:, kcols], qkv[:, [key_dim + i for i in kcols]]
    inf = float("inf")

    def on_off(t):
        on = t[t > 0]
        off = t[t < 0]  # exact zeros stay exact zeros
        return (float(on.min()) - SILU_IDENTITY_MIN if on.numel() else inf,
                SILU_ZERO_MAX - float(off.max()) if off.numel() else inf)

    rep = {}
    rep["key_on"], rep["key_off"] = on_off(k)
    rep["query_on"], rep["query_off"] = on_off(q)
    vcols = [2 * key_dim + h * dv + s for h in used_v for s in plan.data_slots]
    v = qkv[:, vcols]
    rep["value_levels"] = float(((v != 0) & (v != c.value_pre)).sum())
    if c.encoding == "robust":
        rep["value"] = c.value_pre - SILU_IDENTITY_MIN
        fcols = [2 * key_dim + h * dv + s for h in used_v for s in c.filler_slots]
        rep["filler"] = float(qkv[:, fcols].min()) - SILU_IDENTITY_MIN if fcols else inf
    else:
        rep["value"] = math.log2(SILU_HALF_MAX / c.value_pre)
    bu = b[:, used_v]
    rep["beta_on"] = float(bu[bu > 0].min()) - SIGMOID_ONE_MIN if (bu > 0).any() else inf
    rep["beta_off"] = SIGMOID_ZERO_MAX - float(bu[bu <= 0].max()) if (bu <= 0).any() else inf
    zcols = [h * dv + s for h in used_v for s in plan.data_slots]
    rep["gate"] = float(z[:, zcols].min()) - SILU_IDENTITY_MIN
    rep["decay"] = SOFTPLUS_ZERO_MAX - float(a.max())
    rep["absorb"] = -math.log2(c.absorb_ratio)
    return rep
