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
    Head,
    MlpBlock,
    Norm,
)

SEGMENT = 4096  # positions per batch (a multiple of the stock chunk size, 64)
CHUNK = 64

try:  # CSR times dense with sequential sums per row (exact on compiled weights, as any order)
    import scipy.sparse as _sp
except ImportError:  # pragma: no cover - torch's CSR product gives the same exact sums, slower
    _sp = None


class _Map:
    """``y = A h`` for a matrix with few non-zeros (``h``: inputs x positions)."""

    def __init__(self, dense: np.ndarray) -> None:
        self.rows = dense.shape[0]
        if _sp is not None:
            self.a = _sp.csr_matrix(np.ascontiguousarray(dense, dtype=F32))
        else:  # pragma: no cover
            self.a = torch.from_numpy(np.ascontiguousarray(dense, dtype=F32)).to_sparse_csr()

    def __call__(self, h: np.ndarray) -> np.ndarray:
        if _sp is not None:
            return np.asarray(self.a @ h, dtype=F32)
        return (self.a @ torch.from_numpy(np.ascontiguousarray(h))).numpy()  # pragma: no cover


@dataclass
class _NormB:
    """A residual RMSNorm over a segment (columns = positions), on the live-dim rows ``at``."""

    at: np.ndarray  # rows of the norm's columns in the live residual
    w1: np.ndarray
    eps: np.float32
    n: np.float32

    @classmethod
    def of(cls, norm: Norm, live_at: np.ndarray) -> _NormB:
        return cls(live_at[norm.cols], norm.w1[:, None].copy(), norm.eps, norm.n)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        ss = np.einsum("ij,ij->j", x, x)  # exact (integer squares below 2^24 on compiled layers)
        r = ONE / np.sqrt(ss / self.n + self.eps)  # the stock roundings, as fast.Norm.factor_of
        h = x[self.at] * r[None, :]
        h *= self.w1
        return h


class _MlpB:
    """A used-neuron MLP over a segment: ``down(silu(gate h) * up h)``."""

    def __init__(self, blk: MlpBlock, live_at: np.ndarray) -> None:
        gu = blk.gu.dense()
        n = blk.n
        pg = gu.shape[0] - n  # gate rows are padded to a multiple of 64, then the n up rows
        self.norm = _NormB.of(blk.norm, live_at)
        self.wg, self.wu, self.wd = _Map(gu[:n]), _Map(gu[pg:]), _Map(blk.down.dense())
        self.outs = live_at[blk.outs]

    def __call__(self, x: np.ndarray) -> None:
        h = self.norm(x)
        g = torch.from_numpy(self.wg(h))
        p = (F.silu(g) * torch.from_numpy(self.wu(h))).numpy()
        x[self.outs] += self.wd(p)


class _DeltaB:
    """The used heads of one Gated DeltaNet over a segment, through the stock chunked rule."""

    def __init__(self, blk: DeltaBlock, module: torch.nn.Module, live_at: np.ndarray) -> None:
        nk, nv, dk, dv = blk.nk, blk.nv, blk.dk, blk.dv
        self.nk, self.nv, self.dk, self.dv = nk, nv, dk, dv
        self.norm = _NormB.of(blk.norm, live_at)
        self.qk_idx, self.vz_idx = blk.qk_idx, blk.vz_idx
        self.wqk = _Map(blk.qk.csr.dense()[: 2 * nk * dk])
        vz = blk.vz.csr.dense()
        self.wvz = _Map(vz[: 2 * nv * dv])
        tail = vz[blk.vz.nsilu:]
        self.wb = _Map(tail[:nv])
        self.wa = _Map(tail[nv: 2 * nv]) if blk.a_const is None else None
        self.kmap = torch.from_numpy(np.asarray(blk.kmap if blk.kmap is not None else np.arange(nv)))
        vh = torch.from_numpy(np.asarray(blk.vheads))
        self.a_log, self.dt_bias = blk.a_log[vh].clone(), blk.dt_bias[vh].clone()
        self.gnorm = module.norm  # the stock gated RMSNorm (row-wise over dv)
        self.wout = _Map(blk.outp.dense())
        self.outs = live_at[blk.outs]
        # conv taps other than [0, .., 0, 1]: the stock causal conv over [last K-1 inputs, segment]
        self.taps = None if blk.taps is None else torch.from_numpy(np.ascontiguousarray(blk.taps))
        self.reset()

    def reset(self) -> None:
        self.state: torch.Tensor | None = None
        if self.taps is not None:
            self.hist = torch.zeros(1, self.taps.shape[0], self.taps.shape[1] - 1)

    def __call__(self, x: np.ndarray) -> None:
        t = x.shape[1]
        nk, nv, dk, dv = self.nk, self.nv, self.dk, self.dv
        h = self.norm(x)
        hq, hv = h[self.qk_idx], h[self.vz_idx]
        qk = torch.from_numpy(self.wqk(hq))  # channels x positions
        vz = self.wvz(hv)
        v = torch.from_numpy(vz[: nv * dv])
        if self.taps is None:  # taps [0, .., 0, 1]: the conv gives each position its projection
            qk, v = F.silu(qk), F.silu(v)
        else:  # the stock conv (and its SiLU) over the previous K-1 inputs and this segment
            full = torch.cat([self.hist, torch.cat([qk, v]).unsqueeze(0)], dim=2)
            self.hist = full[:, :, full.shape[2] - self.hist.shape[2]:]
            conv = stock.causal_conv1d_fn(full, self.taps, None, activation="silu")[0, :, -t:]
            qk, v = conv[: 2 * nk * dk], conv[2 * nk * dk:]
        qk = qk.T.contiguous()
        q = qk[:, : nk * dk].reshape(1, t, nk, dk)[:, :, self.kmap]
        k = qk[:, nk * dk:].reshape(1, t, nk, dk)[:, :, self.kmap]
        v = v.T.contiguous().reshape(1, t, nv, dv)
        z = torch.from_numpy(np.ascontiguousarray(vz[nv * dv:].T)).reshape(t * nv, dv)
        beta = torch.from_numpy(np.ascontiguousarray(self.wb(hv).T)).sigmoid().reshape(1, t, nv)
        a = torch.zeros(t, nv) if self.wa is None else torch.from_numpy(np.ascontiguousarray(self.wa(hv).T))
        g = (-self.a_log.float().exp() * F.softplus(a.float().reshape(1, t, nv) + self.dt_bias))
        o, self.state = stock.torch_chunk_gated_delta_rule(
            q, k, v, g=g, beta=beta, initial_state=self.state, output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        )
        o = self.gnorm(o.reshape(-1, dv), z).reshape(t, nv * dv)
        x[self.outs] += self.wout(o.numpy().T)


class ChunkedModel:
    """Teacher-forced prefill of a stock ``Qwen3_5ForCausalLM`` (float32, batch 1), chunked path.

    The residual is held transposed (live dims x positions) so that every map is a sparse matrix
    times a block of rows. A prefill's last segment is padded with token 0 to whole chunks (every
    elementwise buffer then has the stock shape's alignment); the chunked rule is causal, so the
    padding changes no earlier position."""

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
        # a dim read but never written is an exact zero at every position: it reads a zero row
        zero = len(self.live)
        live_at = np.full(hidden, zero, dtype=np.intp)
        live_at[self.live] = np.arange(zero)
        self.width = zero + 1
        self.base = np.zeros(self.width, dtype=F32)
        self.base[:zero] = fast.base[self.live]
        self.embed_t = np.ascontiguousarray(fast.embed.T)  # embedding columns x vocabulary
        self.embed_at = live_at[fast.embed_cols]
        self.layers: list[tuple[_DeltaB | None, _MlpB | None]] = []
        for (mixer, mlp), layer in zip(fast.blocks, tm.layers, strict=True):
            self.layers.append((
                None if mixer is None else _DeltaB(mixer, layer.linear_attn, live_at),
                None if mlp is None else _MlpB(mlp, live_at),
            ))
        # the head's sign-code table and cache (guarded shortcuts, tests/runtime: equal to the product)
        self.head = Head(fast.head.final, fast.head.w, shortcuts=True)
        self.final = _NormB.of(fast.head.final, live_at)

    def reset(self) -> None:
        for mixer, _ in self.layers:
            if mixer is not None:
                mixer.reset()

    @torch.no_grad()
    def _segment(self, ids: np.ndarray, record: list[list[np.ndarray]] | None = None) -> np.ndarray:
        n = len(ids)
        ids = np.concatenate([ids, np.zeros(-n % CHUNK, dtype=ids.dtype)])
        x = np.repeat(self.base[:, None], len(ids), axis=1)
        x[self.embed_at] = self.embed_t[:, ids]
        for i, (mixer, mlp) in enumerate(self.layers):
            if mixer is not None:
                mixer(x)
            if mlp is not None:
                mlp(x)
            if record is not None:
                record[i].append(x[: len(self.live), :n].T.copy())
        return x[:, :n]

    def _segments(self, token_ids: Sequence[int]):
        self.reset()
        ids = np.asarray(token_ids, dtype=np.int64)
        for start in range(0, len(ids), self.segment):
            yield start, ids[start: start + self.segment]

    def argmaxes(self, token_ids: Sequence[int], progress: Callable[[int, int], None] | None = None
                 ) -> list[int]:
        """The stock argmax at every position of one prefill over ``token_ids`` (from zero state)."""
        out: list[int] = []
        pick = self.head.argmax_normed
        for start, seg in self._segments(token_ids):
            h = np.ascontiguousarray(self.final(self._segment(seg)).T)
            out.extend(pick(row) for row in h)
            if progress is not None:
                progress(start + len(seg), len(token_ids))
        return out

    def residuals(self, token_ids: Sequence[int]) -> list[np.ndarray]:
        """For tests: per decoder layer, the residual after it (positions x live dims)."""
        rec: list[list[np.ndarray]] = [[] for _ in self.layers]
        for _, seg in self._segments(token_ids):
            self._segment(seg, rec)
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
