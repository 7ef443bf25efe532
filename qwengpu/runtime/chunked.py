"""The stock *chunked* (prefill) path of a compiled ``Qwen3_5ForCausalLM``, fast enough for replays.

Why: issue 4 asks that every corpus trace, fed back in one teacher-forced prefill, reproduces every
argmax. The stock prefill costs ~15 ms a token on a 2-core CPU (dense projections that are mostly
zeros), and the corpus is ~3 M trace tokens. :class:`ChunkedModel` runs the same prefill on the
parts of the weights that are not zero, a segment of positions at a time:

* the residual stream is kept on its *live* dims only (those any embedding row, base value or layer
  output writes; the others are exact zeros in every position);
* RMSNorms, projections, the MLP and the head are the ones of :mod:`qwengpu.runtime.fast` (same
  gathering, same exactness argument: only exactly-zero weights are dropped, and the remaining sums
  are exact in any order on compiled weights), applied to every position of a segment at once;
* the DeltaNet mixing is the **stock** ``torch_chunk_gated_delta_rule`` (the function the stock
  module calls, 64-position chunks, triangular solves, cumulative decays) on the used value heads,
  with the stock gated norm module after it. A head's chunked computation reads only that head, so
  the unused heads (zero ``out_proj`` columns) are dropped.
* a prefill longer than one segment carries each block's recurrent state from one segment to the
  next (``output_final_state`` -> ``initial_state``): the stock function's scan over chunks does
  the same per chunk, since segments are whole numbers of chunks counted from position 0 and only
  the last one is padded.

Not a re-derivation: damage a weight in the stock model and this runtime changes with it. The
tests compare it with the stock model's own prefill (every argmax, and the residual after every
layer bit for bit) on machine traces that span several segments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from transformers.models.qwen3_5 import modeling_qwen3_5 as stock

from qwengpu.runtime.fast import (
    F32,
    ONE,
    DeltaBlock,
    FastModel,
    MlpBlock,
    Norm,
)

SEGMENT = 4096  # positions per batch (a multiple of the stock chunk size, 64)
CHUNK = 64


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=F32))


@dataclass
class _NormB:
    """A residual RMSNorm over a segment (rows = positions), on the live-dim positions ``at``."""

    at: np.ndarray  # positions of the norm's columns in the live residual
    w1: np.ndarray
    eps: np.float32
    n: np.float32

    @classmethod
    def of(cls, norm: Norm, live_at: np.ndarray) -> _NormB:
        return cls(live_at[norm.cols], norm.w1, norm.eps, norm.n)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        ss = np.einsum("ij,ij->i", x, x)  # exact (integer squares below 2^24 on compiled layers)
        r = ONE / np.sqrt(ss / self.n + self.eps)  # the stock roundings, as fast.Norm.factor_of
        h = x[:, self.at] * r[:, None]
        h *= self.w1
        return h


class _MlpB:
    """A used-neuron MLP over a segment: ``down(silu(gate h) * up h)``."""

    def __init__(self, blk: MlpBlock, live_at: np.ndarray) -> None:
        gu = blk.gu.dense()
        n = blk.n
        pg = gu.shape[0] - n  # gate rows are padded to a multiple of 64, then the n up rows
        self.norm = _NormB.of(blk.norm, live_at)
        self.wg = _t(gu[:n].T)
        self.wu = _t(gu[pg:].T)
        self.wd = _t(blk.down.dense().T)
        self.outs = live_at[blk.outs]

    def __call__(self, x: np.ndarray) -> None:
        h = _t(self.norm(x))
        y = (F.silu(h @ self.wg) * (h @ self.wu)) @ self.wd
        x[:, self.outs] += y.numpy()


class _DeltaB:
    """The used heads of one Gated DeltaNet over a segment, through the stock chunked rule."""

    def __init__(self, blk: DeltaBlock, module: torch.nn.Module, live_at: np.ndarray) -> None:
        nk, nv, dk, dv = blk.nk, blk.nv, blk.dk, blk.dv
        self.nk, self.nv, self.dk, self.dv = nk, nv, dk, dv
        self.norm = _NormB.of(blk.norm, live_at)
        self.qk_idx, self.vz_idx = blk.qk_idx, blk.vz_idx
        self.wqk = _t(blk.qk.csr.dense()[: 2 * nk * dk].T)
        vz = blk.vz.csr.dense()
        self.wvz = _t(vz[: 2 * nv * dv].T)
        tail = vz[blk.vz.nsilu:]
        self.wb = _t(tail[:nv].T)
        self.wa = _t(tail[nv: 2 * nv].T) if blk.a_const is None else None
        self.kmap = torch.from_numpy(np.asarray(blk.kmap if blk.kmap is not None else np.arange(nv)))
        vh = torch.from_numpy(np.asarray(blk.vheads))
        self.a_log, self.dt_bias = blk.a_log[vh].clone(), blk.dt_bias[vh].clone()
        self.gnorm = module.norm  # the stock gated RMSNorm (row-wise over dv)
        self.wout = _t(blk.outp.dense().T)
        self.outs = live_at[blk.outs]
        # conv taps other than [0, .., 0, 1]: the stock causal conv over [last K-1 inputs, segment]
        self.taps = None if blk.taps is None else _t(blk.taps)
        self.reset()

    def reset(self) -> None:
        self.state: torch.Tensor | None = None
        if self.taps is not None:
            self.hist = torch.zeros(1, self.taps.shape[0], self.taps.shape[1] - 1)

    def __call__(self, x: np.ndarray) -> None:
        t = x.shape[0]
        nk, nv, dk, dv = self.nk, self.nv, self.dk, self.dv
        h = self.norm(x)
        hq, hv = _t(h[:, self.qk_idx]), _t(h[:, self.vz_idx])
        qk = hq @ self.wqk
        vz = hv @ self.wvz
        v = vz[:, : nv * dv]
        if self.taps is None:  # taps [0, .., 0, 1]: the conv gives each position its projection
            qk, v = F.silu(qk), F.silu(v)
        else:  # the stock conv (and its SiLU) over the previous K-1 inputs and this segment
            pre = torch.cat([qk, v], dim=1).T.unsqueeze(0)
            full = torch.cat([self.hist, pre], dim=2)
            self.hist = full[:, :, full.shape[2] - self.hist.shape[2]:]
            conv = stock.causal_conv1d_fn(full, self.taps, None, activation="silu")[0, :, -t:].T
            qk, v = conv[:, : 2 * nk * dk], conv[:, 2 * nk * dk:]
        v = v.reshape(1, t, nv, dv)
        z = vz[:, nv * dv:].reshape(t * nv, dv)
        q = qk[:, : nk * dk].reshape(1, t, nk, dk)[:, :, self.kmap]
        k = qk[:, nk * dk:].reshape(1, t, nk, dk)[:, :, self.kmap]
        beta = (hv @ self.wb).sigmoid().reshape(1, t, nv)
        a = hv @ self.wa if self.wa is not None else torch.zeros(t, nv)
        g = (-self.a_log.float().exp() * F.softplus(a.float().reshape(1, t, nv) + self.dt_bias))
        o, self.state = stock.torch_chunk_gated_delta_rule(
            q, k, v, g=g, beta=beta, initial_state=self.state, output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        )
        o = self.gnorm(o.reshape(-1, dv), z).reshape(t, nv * dv)
        x[:, self.outs] += (o @ self.wout).numpy()


class ChunkedModel:
    """Teacher-forced prefill of a stock ``Qwen3_5ForCausalLM`` (float32, batch 1), chunked path."""

    def __init__(self, model: torch.nn.Module, segment: int = SEGMENT) -> None:
        if segment % CHUNK:
            raise ValueError(f"segment must be a multiple of {CHUNK}")
        self.segment = segment
        fast = FastModel.from_model(model, shortcuts=False)  # the gathering (and its refusals)
        tm = model.model
        hidden = tm.config.hidden_size
        live = np.zeros(hidden, dtype=bool)
        live[fast.embed_cols] = True
        live[np.nonzero(fast.base)[0]] = True
        for mixer, mlp in fast.blocks:
            for blk in (mixer, mlp):
                if blk is not None:
                    live[blk.outs] = True
        self.live = np.nonzero(live)[0]
        live_at = np.full(hidden, 0, dtype=np.intp)
        live_at[self.live] = np.arange(len(self.live))
        # a column read but never written is an exact zero in every position: read the zero column
        zero = len(self.live)
        live_at[~live] = zero
        self.width = zero + 1
        self.base = np.zeros(self.width, dtype=F32)
        self.base[: zero] = fast.base[self.live]
        self.embed = fast.embed
        self.embed_at = live_at[fast.embed_cols]
        self.layers: list[tuple[_DeltaB | None, _MlpB | None]] = []
        for (mixer, mlp), layer in zip(fast.blocks, tm.layers, strict=True):
            self.layers.append((
                None if mixer is None else _DeltaB(mixer, layer.linear_attn, live_at),
                None if mlp is None else _MlpB(mlp, live_at),
            ))
        self.head = fast.head
        self.final = _NormB.of(fast.head.final, live_at)

    def reset(self) -> None:
        for mixer, _ in self.layers:
            if mixer is not None:
                mixer.reset()

    @torch.no_grad()
    def _segment(self, ids: np.ndarray, record: list[list[np.ndarray]] | None = None) -> np.ndarray:
        x = np.repeat(self.base[None, :], len(ids), axis=0)
        x[:, self.embed_at] = self.embed[ids]
        for i, (mixer, mlp) in enumerate(self.layers):
            if mixer is not None:
                mixer(x)
            if mlp is not None:
                mlp(x)
            if record is not None:
                record[i].append(x[:, : len(self.live)].copy())
        return x

    def argmaxes(self, token_ids: Sequence[int], progress: Callable[[int, int], None] | None = None
                 ) -> list[int]:
        """The stock argmax at every position of one prefill over ``token_ids`` (from zero state)."""
        self.reset()
        ids = np.asarray(token_ids, dtype=np.int64)
        out: list[int] = []
        pick = self.head.argmax_normed
        for start in range(0, len(ids), self.segment):
            x = self._segment(ids[start: start + self.segment])
            h = self.final(x)
            out.extend(pick(row) for row in h)
            if progress is not None:
                progress(min(start + self.segment, len(ids)), len(ids))
        return out

    def residuals(self, token_ids: Sequence[int]) -> list[np.ndarray]:
        """For tests: per decoder layer, the residual after it (positions x live dims)."""
        self.reset()
        ids = np.asarray(token_ids, dtype=np.int64)
        rec: list[list[np.ndarray]] = [[] for _ in self.layers]
        for start in range(0, len(ids), self.segment):
            self._segment(ids[start: start + self.segment], rec)
        return [np.concatenate(r) for r in rec]


def replay(model: torch.nn.Module | ChunkedModel, prompt: Sequence[int], trace: Sequence[int],
           progress: Callable[[int, int], None] | None = None) -> dict:
    """Feed ``prompt + trace[:-1]`` in one chunked prefill; compare each model step's argmax with
    the trace. Returns ``{"equal", "tokens", "first_mismatch", "seconds"}`` (first_mismatch: the
    index in ``trace`` of the first differing token, or None)."""
    cm = model if isinstance(model, ChunkedModel) else ChunkedModel(model)
    t0 = time.perf_counter()
    ids = list(prompt) + list(trace[:-1])
    got = cm.argmaxes(ids, progress)[len(prompt) - 1:]
    bad = next((i for i, (a, b) in enumerate(zip(got, trace, strict=True)) if a != b), None)
    return {"equal": bad is None, "tokens": len(ids), "first_mismatch": bad,
            "seconds": time.perf_counter() - t0}
