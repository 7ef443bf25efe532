"""Weights into a stock ``Qwen3_5ForCausalLM``, and running it on circuit inputs.

Stage 7. Every parameter is written through the module and parameter names of
``transformers/models/qwen3_5/modeling_qwen3_5.py`` (``mlp.gate_proj``, ``linear_attn.out_proj``,
...), so anyone who knows Qwen3.5 can follow it:

* every RMSNorm weight (``input_layernorm``, ``post_attention_layernorm``, final ``norm``) is
  ``2^m - 1``, which makes each norm the exact identity on contract states (:mod:`residual`);
* a mixer without memory banks is all zeros (it adds exactly 0); a DeltaNet with banks is
  programmed by :func:`qwengpu.compiler.memory.program_linear_attention`;
* each MLP gets the merged neurons of :mod:`mlp` (gate/up rows, down columns);
* ``embed_tokens`` row v sets the input bits of token v (all inputs packed LSB-first in
  declaration order); ``lm_head`` row v scores +-1 agreement with output pattern v, so the
  argmax token is the packed output with a logit margin of 2.

Circuits too wide for a token vocabulary run through ``inputs_embeds`` (:func:`embed_inputs`) and
are read from the hidden state (:func:`read_outputs`), both on the prefill path and one token at a
time with the model's cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .evaluator import from_bits, to_bits
from .memory import placeholder_bank
from .mlp import OFF_MAX, ON_MIN, certify
from .schedule import FULL, CircuitIO, CompiledCircuit, FitError, neuron_rows

MAX_TOKEN_BITS = 16


IOLike = CircuitIO | CompiledCircuit


def as_io(x: IOLike) -> CircuitIO:
    return x.io if isinstance(x, CompiledCircuit) else x


@dataclass(frozen=True)
class TokenIO:
    """Packing of all inputs (resp. outputs) into one token id; ``enabled`` if both fit."""

    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    max_bits: int = MAX_TOKEN_BITS

    @classmethod
    def of(cls, io: IOLike, max_bits: int = MAX_TOKEN_BITS) -> TokenIO:
        io = as_io(io)
        return cls(tuple((n, len(d)) for n, d in io.inputs), tuple((n, len(d)) for n, d in io.outputs),
                   max_bits)

    @property
    def in_bits(self) -> int:
        return sum(w for _, w in self.inputs)

    @property
    def out_bits(self) -> int:
        return sum(w for _, w in self.outputs)

    @property
    def enabled(self) -> bool:
        return self.in_bits <= self.max_bits and self.out_bits <= self.max_bits

    @property
    def vocab_size(self) -> int:
        return 1 << max(1, self.in_bits, self.out_bits) if self.enabled else 2

    def encode(self, inputs: dict[str, Any]) -> torch.Tensor:
        """``{name: ints (batch, seq)}`` -> token ids."""
        if not self.enabled:
            raise ValueError(f"token IO needs <= {self.max_bits} input and output bits "
                             f"(this circuit has {self.in_bits} in, {self.out_bits} out): use inputs_embeds")
        ids: np.ndarray | None = None
        off = 0
        for name, w in self.inputs:
            v = np.asarray(inputs[name], dtype=object)
            v = np.asarray(v & ((1 << w) - 1), dtype=np.int64) << off
            ids = v if ids is None else ids + v
            off += w
        assert ids is not None
        t = torch.as_tensor(ids, dtype=torch.long)
        return t[None, :] if t.ndim == 1 else t

    def decode(self, ids: torch.Tensor) -> dict[str, np.ndarray]:
        arr = ids.detach().cpu().numpy().astype(np.int64)
        out, off = {}, 0
        for name, w in self.outputs:
            out[name] = (arr >> off) & ((1 << w) - 1)
            off += w
        return out


def model_config(compiled: CompiledCircuit, vocab_size: int):
    """A ``Qwen3_5TextConfig`` of the compiled shape with only the layers the circuit needs."""
    from transformers import Qwen3_5TextConfig

    d = compiled.shape.config.to_dict()
    for k in ("architectures", "transformers_version", "_name_or_path", "dtype", "torch_dtype",
              "full_attention_interval", "auto_map"):
        d.pop(k, None)
    d.update(num_hidden_layers=compiled.n_layers, layer_types=compiled.layer_types, vocab_size=vocab_size,
             tie_word_embeddings=False, pad_token_id=None, bos_token_id=None, eos_token_id=None,
             use_cache=True)
    cfg = Qwen3_5TextConfig(**d)
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    return cfg


def build_model(compiled: CompiledCircuit, dtype: torch.dtype = torch.float32,
                max_token_bits: int = MAX_TOKEN_BITS):
    """The stock model computing ``compiled`` (eval mode, no gradients)."""
    from transformers import Qwen3_5ForCausalLM
    from transformers.initialization import no_init_weights

    io = TokenIO.of(compiled, max_token_bits)
    cfg = model_config(compiled, io.vocab_size)
    with no_init_weights():
        model = Qwen3_5ForCausalLM(cfg)
    model.eval()
    model.to(dtype)  # weights are written in the target dtype (memory calibrates for it)
    model.config.dtype = dtype
    write_weights(model, compiled, io)
    model.requires_grad_(False)
    return model


@torch.no_grad()
def write_weights(model, compiled: CompiledCircuit, io: TokenIO) -> None:
    """Every parameter of ``model`` from ``compiled``: each layer (:func:`write_layer`), the final
    norm, the embedding and the head (:func:`embedding_rows`, :func:`head_rows`)."""
    res = compiled.residual
    tm = model.model
    tm.norm.weight.fill_(res.norm_weight)
    for lp, layer in zip(compiled.layers, tm.layers, strict=True):
        write_layer(layer, lp, compiled, model.config)
    tm.embed_tokens.weight.copy_(embedding_rows(compiled, io, tm.embed_tokens.weight.dtype))
    model.lm_head.weight.copy_(head_rows(compiled, io, model.lm_head.weight.dtype))


@torch.no_grad()
def write_layer(layer, lp, compiled: CompiledCircuit, config) -> None:
    """One decoder layer's parameters (zeroed first): norms, the DeltaNet banks, the MLP neurons.
    Separate so that a checkpoint can be written one layer at a time (the 2B-shape machine is
    ~9 GB in float32: ``qwengpu.model.machine_checkpoint`` streams it)."""
    res = compiled.residual
    for p in layer.parameters():
        p.zero_()
    w = res.norm_weight
    layer.input_layernorm.weight.fill_(w)
    layer.post_attention_layernorm.weight.fill_(w)
    if lp.layer_type == FULL:
        if lp.banks:  # pragma: no cover - the scheduler never puts banks there
            raise FitError(f"layer {lp.index}: memory banks need a linear_attention layer")
    elif lp.banks:
        from .memory import program_linear_attention

        banks = [placeholder_bank(b, compiled.dim_of) for b in lp.banks]
        program_linear_attention(layer.linear_attn, config, banks, res.one_dim)
    rows = neuron_rows(compiled, lp)
    cert = certify(rows)
    if not cert.ok():
        worst = max(cert.max_gate, cert.max_up, cert.max_hidden, cert.max_down_sum)
        raise FitError(f"layer {lp.index}: MLP magnitudes reach {worst:.3g} >= 2**24, float32 sums would "
                       "round (use a smaller Circuit(chunk=...))")
    mlp = layer.mlp
    for param, col, transpose in ((mlp.gate_proj.weight, 0, False), (mlp.up_proj.weight, 1, False),
                                  (mlp.down_proj.weight, 2, True)):
        idx = [(n, d, v) for n, row in enumerate(rows) for d, v in row[col].items()]
        if idx:
            ns, ds, vs = (list(t) for t in zip(*idx, strict=True))
            where = (ds, ns) if transpose else (ns, ds)
            param[where] = torch.tensor(vs, dtype=torch.float64).to(param.dtype)


def embedding_rows(compiled: CompiledCircuit, io: TokenIO,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``embed_tokens``: the residual's base state, and row v sets the input bits of token v."""
    base = torch.as_tensor(compiled.residual.base())
    emb = base.to(dtype).expand(io.vocab_size, -1).clone()
    if io.enabled:
        in_dims = [d for name, _ in io.inputs for d in compiled.input_dims(name)]
        ids = torch.arange(io.vocab_size)
        for j, d in enumerate(in_dims):
            emb[:, d] = torch.where(((ids >> j) & 1).bool(), 1.0, -1.0)
    return emb


def head_rows(compiled: CompiledCircuit, io: TokenIO, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``lm_head``: row v scores +-1 agreement with output pattern v; rows past the patterns read
    the one dimension negatively (never the argmax)."""
    res = compiled.residual
    head = torch.zeros(io.vocab_size, res.hidden_size, dtype=dtype)
    if io.enabled:
        ids = torch.arange(io.vocab_size)
        out_dims = [d for name, _ in io.outputs for d in compiled.output_dims(name)]
        n_pat = 1 << len(out_dims)
        for j, d in enumerate(out_dims):
            head[:n_pat, d] = torch.where(((ids[:n_pat] >> j) & 1).bool(), 1.0, -1.0)
        head[n_pat:, res.one_dim] = -float(max(1, len(out_dims)))
    return head


# ---------------------------------------------------------------------------------------------
# Running: inputs_embeds in, hidden states out (prefill or token by token)
# ---------------------------------------------------------------------------------------------


def embed_inputs(io: IOLike, inputs: dict[str, Any], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``{name: ints (batch, seq) or (seq,)}`` -> ``inputs_embeds`` (batch, seq, hidden)."""
    io = as_io(io)
    base = torch.as_tensor(io.residual.base())
    first = np.asarray(next(iter(inputs.values())), dtype=object)
    shape = first.shape if first.ndim == 2 else (1,) + first.shape
    x = base.expand(*shape, -1).clone()
    for name, dims in io.inputs:
        arr = np.asarray(inputs[name], dtype=object).reshape(shape)
        bits = torch.as_tensor(to_bits(arr, len(dims)))
        x[..., list(dims)] = bits.to(torch.float32) * 2 - 1
    return x.to(dtype)


def read_outputs(io: IOLike, hidden: torch.Tensor, check: bool = True) -> dict[str, np.ndarray]:
    """Output words from final hidden states; ``check`` enforces the exact residual contract."""
    io = as_io(io)
    h = hidden.detach().to(torch.float32).cpu().numpy()
    if check:
        io.residual.check(h)
    out = {}
    for name, dims in io.outputs:
        bits = (h[..., list(dims)] > 0).astype(np.int64)
        out[name] = from_bits(bits)
    return out


def forward_hidden(model, embeds: torch.Tensor, mode: str = "prefill") -> torch.Tensor:
    """Final hidden states for ``embeds`` on the chunked prefill path or the recurrent decode path."""
    with torch.no_grad():
        if mode == "prefill":
            return model.model(inputs_embeds=embeds, use_cache=False).last_hidden_state
        if mode != "decode":
            raise ValueError(f"mode is 'prefill' or 'decode', not {mode!r}")
        cache = None
        outs = []
        for t in range(embeds.shape[1]):
            o = model.model(inputs_embeds=embeds[:, t:t + 1], cache=cache, use_cache=True)
            cache = o.cache
            outs.append(o.last_hidden_state)
        return torch.cat(outs, dim=1)


def run(model, io: IOLike, inputs: dict[str, Any], mode: str = "prefill",
        check: bool = True) -> dict[str, np.ndarray]:
    """Run the stock model on circuit inputs (through ``inputs_embeds``) and read the outputs."""
    dtype = next(model.parameters()).dtype
    hidden = forward_hidden(model, embed_inputs(io, inputs, dtype), mode)
    out = read_outputs(io, hidden, check)
    if np.asarray(next(iter(inputs.values()))).ndim == 1:
        out = {k: v[0] for k, v in out.items()}
    return out


def run_tokens(model, io: IOLike, inputs: dict[str, Any], mode: str = "prefill",
               max_token_bits: int = MAX_TOKEN_BITS) -> dict[str, np.ndarray]:
    """Run on ``input_ids`` and read the argmax tokens of the stock ``lm_head``."""
    tio = TokenIO.of(io, max_token_bits)
    ids = tio.encode(inputs)
    with torch.no_grad():
        if mode == "prefill":
            logits = model(input_ids=ids, use_cache=False).logits
        else:
            cache, parts = None, []
            for t in range(ids.shape[1]):
                o = model(input_ids=ids[:, t:t + 1], cache=cache, use_cache=True)
                cache = o.cache
                parts.append(o.logits)
            logits = torch.cat(parts, dim=1)
    out = tio.decode(logits.argmax(-1))
    if np.asarray(next(iter(inputs.values()))).ndim == 1:
        out = {k: v[0] for k, v in out.items()}
    return out


def gate_margins(model, io: IOLike, inputs: dict[str, Any]) -> float:
    """Measured: the smallest distance of any used gate pre-activation from the inexact SiLU band
    ``(OFF_MAX, ON_MIN)`` over a prefill of ``inputs`` (negative: some neuron sits inside it).
    A neuron is used when its gate row is not all zero."""
    found: list[float] = []
    hooks = []
    for layer in model.model.layers:
        used = layer.mlp.gate_proj.weight.detach().ne(0).any(dim=1)
        if not bool(used.any()):
            continue

        def hook(_m, _i, out, used=used):
            g = out[..., used].detach().to(torch.float64)
            found.append(float(torch.maximum(g - ON_MIN, OFF_MAX - g).min()))

        hooks.append(layer.mlp.gate_proj.register_forward_hook(hook))
    try:
        dtype = next(model.parameters()).dtype
        forward_hidden(model, embed_inputs(io, inputs, dtype), "prefill")
    finally:
        for h in hooks:
            h.remove()
    return min(found, default=float("inf"))


def margin_report(model, compiled: CompiledCircuit, inputs: dict[str, Any]) -> dict[str, float]:
    """Smallest distance of every pre-activation from the threshold where it would stop being exact,
    over a prefill of ``inputs``: ``mlp_gate`` for the MLPs (see :func:`gate_margins`) and, per
    memory layer, every entry of :func:`qwengpu.compiler.memory.margin_report` (keys, queries,
    beta, decay, ...), prefixed ``L<i>.``. All values must be positive; small ones are fragile."""
    from .memory import margin_report as memory_margins
    from .memory import plan_memory

    captured: dict[int, torch.Tensor] = {}
    hooks = []
    for lp, layer in zip(compiled.layers, model.model.layers, strict=True):
        if lp.banks:
            def pre(_m, args, kwargs, i=lp.index):
                x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
                captured[i] = x.detach()

            hooks.append(layer.linear_attn.register_forward_pre_hook(pre, with_kwargs=True))
    try:
        report = {"mlp_gate": gate_margins(model, compiled, inputs)}
    finally:
        for h in hooks:
            h.remove()
    dtype = next(model.parameters()).dtype
    for lp, layer in zip(compiled.layers, model.model.layers, strict=True):
        if lp.banks:
            banks = [placeholder_bank(b, compiled.dim_of) for b in lp.banks]
            plan = plan_memory(model.config, banks, dtype=dtype)
            for k, v in memory_margins(layer.linear_attn, plan, captured[lp.index]).items():
                report[f"L{lp.index}.{k}"] = v
    return report
