"""A fast greedy runtime for the stock ``Qwen3_5ForCausalLM`` models the compiler writes.

Why: the stock decode loop costs ~0.4 s a token on CPU (dense 2048x4096 MLPs that are >95% zeros,
the DeltaNet torch fallbacks over every head, a dense 65536-row ``lm_head``, Python per module).
:class:`FastModel` reads the *same weights* once, keeps only what is non-zero, and runs one token
with a handful of numpy calls per layer. It re-derives nothing about the circuit: damage a weight
in the stock model and the runtime built from it changes too.

What is kept (everything else adds exact zeros, see "Exactness"):

* **MLP**: neurons whose gate row, up row and down column are all non-zero, gathered once into
  sparse row lists (values, column index, row start) over the input dims that any of them reads,
  and the down projection restricted to the output dims it writes;
* **DeltaNet**: value heads with a non-zero ``out_proj`` column block, their key heads, and the
  ``in_proj_qkv/z/b/a`` rows of those heads; its own conv history and recurrent state per used head;
* **attention**: only layers whose ``o_proj`` is all zero are supported, and skipped (they add
  exactly 0; :class:`UnsupportedModel` otherwise);
* **embedding**: the non-zero columns; **lm_head**: the non-zero columns, but *every* row (an
  all-zero row scores exactly 0, so the argmax over all rows is the stock argmax), memoized on
  the bytes of the normalized inputs it reads (deterministic, so a hit returns the same argmax).

Exactness (why fast == stock bit for bit on compiled models; the tests check every layer boundary):

* *Linear maps* (in/out projections, MLP, head) are sums of products; we skip only terms whose
  weight is exactly 0 (``0 * finite`` is a signed zero and ``y + 0 == y``). The remaining sums are
  exact in any order on compiled weights: integer partial sums below 2^24 (``mlp.certify``), and
  in the DeltaNet single-term sums or multiples of one power-of-two value (``memory`` docstring).
  Signed zeros may differ inside a mixer but never reach the residual (``+0 + -0 == +0``).
* *RMSNorm* (``x * rsqrt(mean(x^2) + eps) * (1 + w)``): ``np.dot`` for the sum of squares (exact
  under the residual contract: integer squares summing to 4^m * hidden < 2^24), then the stock
  float32 roundings in the stock order: ``/ hidden``, ``+ fl32(eps)``, ``1 / sqrt`` (torch's CPU
  ``rsqrt`` *is* ``1 / sqrt`` with two correct roundings; a test checks it on random floats),
  ``* r`` then ``* fl32(1 + w)``. Elementwise IEEE ops are correctly rounded in numpy and torch.
* *Transcendentals* (SiLU, sigmoid, softplus, exp): computed by the stock torch kernels, on
  buffers padded to a multiple of 64 (or of the stock shape), so every element takes the same
  vectorized code path as in the stock model. Where an input row is all zero (``in_proj_a`` on
  compiled layers) the value is a constant, folded once at build time with the same torch ops.
* *DeltaNet*: ``l2norm`` and the recurrent reads/writes use numpy only when every key/query row
  has at most one non-zero entry (then every reduction is a single term plus zeros: exact in any
  order); otherwise that step falls back to the stock torch expressions. ``q / d**0.5`` divides by
  ``fl32(d**0.5)`` as torch does for a Python scalar (checked in the tests). The gated RMSNorm's
  mean is exact (dense encoding: absorbed by eps; robust: an exact power of four in any order) and
  its ``rsqrt(fl32(1e-6))`` is the same ``1 / sqrt`` rounding as torch (999.99994).

Only float32 and batch 1 greedy decoding; the prefill runs the recurrent step per token (the stock
chunked prefill gives the same values on compiled models, which the stock tests establish).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

F32 = np.float32
PAD = 64  # silu/sigmoid buffers are padded to this: every element on torch's vectorized path
HEAD_CACHE_MAX = 1 << 16


class UnsupportedModel(ValueError):
    """The model uses something the fast runtime does not implement (names it)."""


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy().copy()


def _pad(n: int) -> int:
    return max(PAD, -(-n // PAD) * PAD)


try:  # scipy's C loop over CSR rows (sequential sums; exact by the same argument as any order)
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
except ImportError:  # pragma: no cover - scipy is optional: numpy reduceat does the same sums
    _csr_matvec = None


@dataclass
class SparseRows:
    """A row-sparse matrix over a gathered input: ``y[r] = sum_j vals[j] * x[idx[j]]`` for row r.

    Rows without entries give +0 (the stock dense sum of exact zeros)."""

    nrows: int
    ncols: int
    vals: np.ndarray
    idx: np.ndarray
    indptr: np.ndarray  # CSR row pointers (nrows + 1)
    starts: np.ndarray  # start of each non-empty row in vals
    nonempty: np.ndarray  # which rows are non-empty (ascending)
    full: bool  # every row non-empty

    @classmethod
    def of(cls, dense: np.ndarray) -> SparseRows:
        r, c = np.nonzero(dense)
        vals = dense[r, c].astype(F32)
        nonempty = np.unique(r)
        starts = np.searchsorted(r, nonempty).astype(np.intp)
        indptr = np.searchsorted(r, np.arange(dense.shape[0] + 1)).astype(np.int32)
        return cls(dense.shape[0], dense.shape[1], vals, c.astype(np.int32), indptr, starts,
                   nonempty.astype(np.intp), len(nonempty) == dense.shape[0])

    def mv(self, x: np.ndarray) -> np.ndarray:
        y = np.zeros(self.nrows, dtype=F32)
        if _csr_matvec is not None:
            _csr_matvec(self.nrows, self.ncols, self.indptr, self.idx, self.vals, x, y)
            return y
        if len(self.vals):
            y[self.nonempty] = np.add.reduceat(self.vals * x[self.idx], self.starts)
        return y


def _nonzero_cols(*mats: np.ndarray) -> np.ndarray:
    used = np.zeros(mats[0].shape[1], dtype=bool)
    for m in mats:
        used |= (m != 0).any(axis=0)
    return np.nonzero(used)[0]


def _silu_(buf: np.ndarray, t: torch.Tensor) -> None:
    """Stock SiLU in place on a padded float32 buffer (``t`` is ``torch.from_numpy(buf)``)."""
    F.silu(t, inplace=True)


@dataclass
class Norm:
    """The residual RMSNorm, evaluated only on the dims ``cols`` that the next map reads."""

    cols: np.ndarray
    w1: np.ndarray  # fl32(1 + weight)[cols], computed with torch like the stock module
    eps: np.float32
    n: np.float32

    @classmethod
    def of(cls, module: torch.nn.Module, cols: np.ndarray, hidden: int) -> Norm:
        w1 = (1.0 + module.weight.detach().float()).numpy()
        return cls(cols, w1[cols].copy(), F32(module.eps), F32(hidden))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        r = F32(1.0) / np.sqrt(np.dot(x, x) / self.n + self.eps)
        out = x[self.cols] * r
        out *= self.w1
        return out


@dataclass
class MlpBlock:
    norm: Norm
    gu: SparseRows  # gate rows then up rows of the used neurons, over norm.cols
    n: int
    down: SparseRows  # over the used neurons, rows = outs
    outs: np.ndarray
    buf: np.ndarray = field(init=False)
    tbuf: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.buf = np.zeros(_pad(self.n), dtype=F32)
        self.tbuf = torch.from_numpy(self.buf)

    def __getstate__(self) -> dict:  # torch views of numpy buffers do not survive pickling: rebuild
        return {k: v for k, v in self.__dict__.items() if k not in ("buf", "tbuf")}

    def __setstate__(self, d: dict) -> None:
        self.__dict__.update(d)
        self.__post_init__()

    def __call__(self, x: np.ndarray) -> None:
        gu = self.gu.mv(self.norm(x))
        n = self.n
        self.buf[:n] = gu[:n]
        self.buf[n:] = 0
        _silu_(self.buf, self.tbuf)
        h = self.buf[:n] * gu[n:]
        x[self.outs] += self.down.mv(h)


@dataclass
class DeltaBlock:
    """The used heads of one ``Qwen3_5GatedDeltaNet`` (recurrent path, batch 1)."""

    norm: Norm
    proj: SparseRows  # rows: q(nk*dk) k(nk*dk) v(nv*dv) z(nv*dv) b(nv) a(nv) of the used heads
    nk: int
    nv: int
    dk: int
    dv: int
    vheads: np.ndarray  # used value heads (indices into the stock nv heads)
    kmap: np.ndarray | None  # used value head -> row in the used key heads (None: identity)
    taps: np.ndarray | None  # conv taps (C, K) of the used channels; None: exactly [0, .., 0, 1]
    n_heads_stock: int
    a_const: np.ndarray | None  # decay factor exp(g) per used head when in_proj_a rows are zero
    a_log: torch.Tensor
    dt_bias: torch.Tensor
    norm_w: np.ndarray
    norm_eps: np.float32
    qscale: np.float32
    outp: SparseRows
    outs: np.ndarray
    conv_buf: np.ndarray = field(init=False)
    conv_t: torch.Tensor = field(init=False)
    z_buf: np.ndarray = field(init=False)
    z_t: torch.Tensor = field(init=False)
    b_np: np.ndarray = field(init=False)
    b_full: torch.Tensor = field(init=False)
    a_np: np.ndarray = field(init=False)
    a_full: torch.Tensor = field(init=False)
    decay_one: bool = field(init=False)
    hrange: np.ndarray = field(init=False)
    hist: np.ndarray = field(init=False)
    state: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        c = 2 * self.nk * self.dk + self.nv * self.dv
        self.conv_buf = np.zeros(_pad(c), dtype=F32)
        self.conv_t = torch.from_numpy(self.conv_buf)
        self.z_buf = np.zeros(_pad(self.nv * self.dv), dtype=F32)
        self.z_t = torch.from_numpy(self.z_buf)
        self.b_np = np.zeros(self.n_heads_stock, dtype=F32)
        self.b_full = torch.from_numpy(self.b_np)
        self.a_np = np.zeros(self.n_heads_stock, dtype=F32)
        self.a_full = torch.from_numpy(self.a_np)
        self.decay_one = self.a_const is not None and bool((self.a_const == 1.0).all())
        self.hrange = np.arange(self.nv)
        self.reset()

    def __getstate__(self) -> dict:  # torch views of numpy buffers do not survive pickling: rebuild
        drop = ("conv_buf", "conv_t", "z_buf", "z_t", "b_np", "b_full", "a_np", "a_full", "hist", "state",
                "hrange", "decay_one")
        return {k: v for k, v in self.__dict__.items() if k not in drop}

    def __setstate__(self, d: dict) -> None:
        self.__dict__.update(d)
        self.__post_init__()

    def reset(self) -> None:
        c = 2 * self.nk * self.dk + self.nv * self.dv
        k = 1 if self.taps is None else self.taps.shape[1]
        self.hist = np.zeros((max(k - 1, 0), c), dtype=F32)
        self.state = np.zeros((self.nv, self.dk, self.dv), dtype=F32)

    @staticmethod
    def _l2norm(x: np.ndarray) -> np.ndarray:
        """Stock ``l2norm`` (torch ops, stock order) for rows that are not one-hot."""
        t = torch.from_numpy(np.ascontiguousarray(x))
        return (t * torch.rsqrt((t * t).sum(dim=-1, keepdim=True) + 1e-6)).numpy()

    def __call__(self, x: np.ndarray) -> None:
        nk, nv, dk, dv = self.nk, self.nv, self.dk, self.dv
        p = self.proj.mv(self.norm(x))
        c = 2 * nk * dk + nv * dv
        qkv = p[:c]
        if self.taps is None:
            self.conv_buf[:c] = qkv
        else:  # stock: conv1d over [history, current] with the depthwise taps
            acc = self.taps[:, 0] * (self.hist[0] if len(self.hist) else qkv)
            for j in range(1, self.taps.shape[1]):
                acc += self.taps[:, j] * (self.hist[j] if j < len(self.hist) else qkv)
            if len(self.hist):
                self.hist[:-1] = self.hist[1:]
                self.hist[-1] = qkv
            self.conv_buf[:c] = acc
        _silu_(self.conv_buf, self.conv_t)
        act = self.conv_buf
        q = act[: nk * dk].reshape(nk, dk)
        k = act[nk * dk: 2 * nk * dk].reshape(nk, dk)
        v = act[2 * nk * dk: c].reshape(nv, dv)
        z = p[c: c + nv * dv]
        b = p[c + nv * dv: c + nv * dv + nv]
        self.b_np[self.vheads] = b
        beta = torch.sigmoid(self.b_full).numpy()[self.vheads]  # stock shape (nv heads): same code path
        if self.a_const is not None:
            decay = self.a_const
        else:
            self.a_np[self.vheads] = p[c + nv * dv + nv: c + nv * dv + 2 * nv]
            g = -self.a_log.exp() * F.softplus(self.a_full + self.dt_bias)
            decay = g.exp().numpy()[self.vheads]
        s = self.state
        if not self.decay_one or self.a_const is None:
            s *= decay[:, None, None]
        single = np.count_nonzero(q, axis=1).max() <= 1 and np.count_nonzero(k, axis=1).max() <= 1
        if single:
            # One-hot rows: every stock reduction over dk (l2norm's sum of squares, S^T k, S^T q) is one
            # product plus exact zeros, so it equals that product; only row j of each head's state is
            # read or written (the other rows get S + 0 * delta == S). Same scalar ops, same order.
            kr = np.arange(nk)
            jk = np.argmax(k != 0, axis=1)
            kap = k[kr, jk]
            kap = kap * (F32(1.0) / np.sqrt(kap * kap + F32(1e-6)))
            jq = np.argmax(q != 0, axis=1)
            qv = q[kr, jq]
            qv = qv * (F32(1.0) / np.sqrt(qv * qv + F32(1e-6)))
            qv = qv / self.qscale
            if self.kmap is not None:
                kap, jk, qv, jq = kap[self.kmap], jk[self.kmap], qv[self.kmap], jq[self.kmap]
            hr = self.hrange
            rows = s[hr, jk]
            delta = (v - rows * kap[:, None]) * beta[:, None]
            s[hr, jk] = rows + kap[:, None] * delta
            o = qv[:, None] * s[hr, jq]
        else:  # the stock expressions (torch reductions in the stock order)
            q, k = self._l2norm(q), self._l2norm(k)
            q = q / self.qscale
            if self.kmap is not None:
                q, k = q[self.kmap], k[self.kmap]
            st, kt, qt = torch.from_numpy(s), torch.from_numpy(k), torch.from_numpy(q)
            kv_t = (st * kt.unsqueeze(-1)).sum(dim=-2)
            delta_t = (torch.from_numpy(v) - kv_t) * torch.from_numpy(beta).unsqueeze(-1)
            st = st + kt.unsqueeze(-1) * delta_t.unsqueeze(-2)
            s[...] = st.numpy()
            o = (st * qt.unsqueeze(-1)).sum(dim=-2).numpy()
        var = (o * o).sum(axis=1, keepdims=True) / F32(dv)
        o = o * (F32(1.0) / np.sqrt(var + self.norm_eps))
        o = self.norm_w * o
        self.z_buf[: nv * dv] = z
        _silu_(self.z_buf, self.z_t)
        o = o * self.z_buf[: nv * dv].reshape(nv, dv)
        x[self.outs] += self.outp.mv(o.reshape(-1))


def _mlp_block(layer: torch.nn.Module, hidden: int) -> MlpBlock | None:
    mlp = layer.mlp
    gate, up, down = (m.weight.detach().float() for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj))
    used = torch.nonzero(gate.ne(0).any(1) & up.ne(0).any(1) & down.ne(0).any(0)).flatten()
    if len(used) == 0:
        return None
    g, u, d = gate[used].numpy(), up[used].numpy(), down[:, used].numpy()
    cols = _nonzero_cols(g, u)
    outs = np.nonzero((d != 0).any(1))[0]
    gu = SparseRows.of(np.concatenate([g[:, cols], u[:, cols]]))
    return MlpBlock(Norm.of(layer.post_attention_layernorm, cols, hidden), gu, len(used),
                    SparseRows.of(d[outs]), outs)


def _delta_block(layer: torch.nn.Module, hidden: int) -> DeltaBlock | None:
    la = layer.linear_attn
    if la.conv1d.bias is not None:
        raise UnsupportedModel(f"layer {la.layer_idx}: conv1d bias")
    nvs, nks, dk, dv = la.num_v_heads, la.num_k_heads, la.head_k_dim, la.head_v_dim
    out_w = _np(la.out_proj.weight)
    vheads = np.nonzero((out_w != 0).reshape(out_w.shape[0], nvs, dv).any(axis=(0, 2)))[0]
    if len(vheads) == 0:
        return None
    ratio = nvs // nks
    kheads = np.unique(vheads // ratio)
    kmap = np.searchsorted(kheads, vheads // ratio)
    kd = nks * dk
    qch = (kheads[:, None] * dk + np.arange(dk)).ravel()
    vch = (vheads[:, None] * dv + np.arange(dv)).ravel()
    channels = np.concatenate([qch, kd + qch, 2 * kd + vch])
    qkv_w, z_w = _np(la.in_proj_qkv.weight), _np(la.in_proj_z.weight)
    b_w, a_w = _np(la.in_proj_b.weight), _np(la.in_proj_a.weight)
    a_rows = a_w[vheads]
    a_zero = not a_rows.any()
    rows = [qkv_w[channels], z_w[vch], b_w[vheads]] + ([] if a_zero else [a_rows])
    stacked = np.concatenate(rows)
    cols = _nonzero_cols(stacked)
    taps = _np(la.conv1d.weight.squeeze(1))[channels]
    ident = np.zeros(taps.shape[1], dtype=F32)
    ident[-1] = 1
    taps_or_none = None if (taps == ident).all() else taps
    a_log, dt_bias = la.A_log.detach().float().clone(), la.dt_bias.detach().float().clone()
    a_const = None
    if a_zero:  # a == 0 exactly for finite inputs: the stock decay expression on zeros, folded once
        with torch.no_grad():
            g = -a_log.exp() * F.softplus(torch.zeros(1, 1, nvs) + dt_bias)
            a_const = g.reshape(1, nvs).exp().numpy()[0][vheads].copy()
    outv = out_w[:, vch]
    outs = np.nonzero((outv != 0).any(1))[0]
    qscale = F32(torch.tensor([dk ** 0.5], dtype=torch.float32).item())
    return DeltaBlock(
        norm=Norm.of(layer.input_layernorm, cols, hidden), proj=SparseRows.of(stacked[:, cols]),
        nk=len(kheads), nv=len(vheads), dk=dk, dv=dv, vheads=vheads,
        kmap=None if (kmap == np.arange(len(vheads))).all() else kmap, taps=taps_or_none,
        n_heads_stock=nvs, a_const=a_const, a_log=a_log, dt_bias=dt_bias,
        norm_w=_np(la.norm.weight), norm_eps=F32(la.norm.variance_epsilon), qscale=qscale,
        outp=SparseRows.of(outv[outs]), outs=outs)


class FastModel:
    """Greedy token-by-token execution of a stock ``Qwen3_5ForCausalLM``'s weights (see module doc).

    ``step`` returns the stock argmax token; ``prefill`` feeds a prompt; state persists across calls
    until :meth:`reset`."""

    def __init__(self, blocks: list[tuple[DeltaBlock | None, MlpBlock | None]], base: np.ndarray,
                 embed: np.ndarray, embed_cols: np.ndarray, final: Norm, head: np.ndarray, hidden: int,
                 final_w1_full: np.ndarray) -> None:
        self.blocks = blocks
        self.base = base
        self.embed = embed
        self.embed_cols = embed_cols
        self.final = final
        self.head = head
        self.hidden = hidden
        self.vocab_size = head.shape[0]
        self._head_cache: dict[bytes, int] = {}
        self.final_full = Norm(np.arange(hidden), final_w1_full, final.eps, final.n)

    # -- construction -----------------------------------------------------------------------
    @classmethod
    @torch.no_grad()
    def from_model(cls, model: torch.nn.Module) -> FastModel:
        """Gather the non-zero parts of ``model`` (a stock ``Qwen3_5ForCausalLM``, float32)."""
        if next(model.parameters()).dtype != torch.float32:
            raise UnsupportedModel("the fast runtime runs float32 models")
        tm = model.model
        hidden = tm.config.hidden_size
        blocks: list[tuple[DeltaBlock | None, MlpBlock | None]] = []
        for i, layer in enumerate(tm.layers):
            mixer: DeltaBlock | None = None
            if layer.block_type == "linear_attention":
                mixer = _delta_block(layer, hidden)
            else:
                att = layer.self_attn
                bias = att.o_proj.bias
                if att.o_proj.weight.ne(0).any() or (bias is not None and bias.ne(0).any()):
                    raise UnsupportedModel(f"layer {i}: softmax attention with a non-zero o_proj")
            if any(getattr(m, "bias", None) is not None for m in (layer.mlp.gate_proj, layer.mlp.up_proj,
                                                                 layer.mlp.down_proj)):
                raise UnsupportedModel(f"layer {i}: MLP biases")
            blocks.append((mixer, _mlp_block(layer, hidden)))
        emb = tm.embed_tokens.weight.detach().float()
        # columns equal in every row (the residual base: fillers, one_dim, idle signals) are one vector
        ecols = torch.nonzero((emb != emb[:1]).any(0)).flatten().numpy()
        base = emb[0].numpy().copy()
        emb = emb.numpy()
        head = _np(model.lm_head.weight)
        hcols = _nonzero_cols(head)
        if getattr(model.lm_head, "bias", None) is not None:
            raise UnsupportedModel("lm_head bias")
        full = Norm.of(tm.norm, np.arange(hidden), hidden)
        return cls(blocks, base, np.ascontiguousarray(emb[:, ecols]), ecols, Norm.of(tm.norm, hcols, hidden),
                   np.ascontiguousarray(head[:, hcols]), hidden, full.w1)

    @classmethod
    def from_pretrained(cls, path: str | Path) -> FastModel:
        """Load with the stock ``Qwen3_5ForCausalLM.from_pretrained`` (float32) and gather."""
        from transformers import Qwen3_5ForCausalLM

        model = Qwen3_5ForCausalLM.from_pretrained(str(path), dtype=torch.float32)
        return cls.from_model(model.eval())

    # -- running ------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget all tokens (conv history and DeltaNet states back to zero)."""
        for mixer, _ in self.blocks:
            if mixer is not None:
                mixer.reset()

    def _layers(self, token: int, record: list[np.ndarray] | None = None) -> np.ndarray:
        x = self.base.copy()
        x[self.embed_cols] = self.embed[token]
        for mixer, mlp in self.blocks:
            if mixer is not None:
                mixer(x)
            if mlp is not None:
                mlp(x)
            if record is not None:
                record.append(x.copy())
        return x

    def _argmax(self, x: np.ndarray) -> int:
        h = self.final(x)
        key = h.tobytes()
        hit = self._head_cache.get(key)
        if hit is None:
            hit = int(np.argmax(self.head @ h)) if h.size else 0
            if len(self._head_cache) >= HEAD_CACHE_MAX:
                self._head_cache.clear()
            self._head_cache[key] = hit
        return hit

    def step(self, token: int) -> int:
        """Feed one token; the stock greedy next token."""
        return self._argmax(self._layers(int(token)))

    def prefill(self, token_ids: Iterable[int]) -> int:
        """Feed a prompt (state continues from previous calls); the greedy token after it."""
        x = None
        for t in token_ids:
            x = self._layers(int(t))
        if x is None:
            raise ValueError("empty prompt")
        return self._argmax(x)

    def generate(self, prompt_ids: Sequence[int], max_new_tokens: int,
                 stop: int | Iterable[int] | None = None) -> list[int]:
        """Greedy continuation of ``prompt_ids`` from a fresh state: up to ``max_new_tokens`` tokens,
        ending with (and including) the first token in ``stop``."""
        stops = set() if stop is None else ({int(stop)} if isinstance(stop, int) else {int(s) for s in stop})
        self.reset()
        if max_new_tokens <= 0:
            return []
        nxt = self.prefill(prompt_ids)
        out = [nxt]
        while nxt not in stops and len(out) < max_new_tokens:
            nxt = self.step(nxt)
            out.append(nxt)
        return out

    def layer_states(self, token_ids: Sequence[int]) -> list[list[np.ndarray]]:
        """For tests: per token, the residual after every decoder layer, then the final norm output
        (all dims). Continues from the current state."""
        res = []
        for t in token_ids:
            rec: list[np.ndarray] = []
            x = self._layers(int(t), rec)
            rec.append(self.final_full(x))
            res.append(rec)
        return res

    def stats(self) -> dict[str, int]:
        """What survived the gathering (for reports)."""
        mlp_neurons = sum(m.n for _, m in self.blocks if m is not None)
        heads = sum(d.nv for d, _ in self.blocks if d is not None)
        nnz = sum(len(m.gu.vals) + len(m.down.vals) for _, m in self.blocks if m is not None)
        return {"layers": len(self.blocks), "mlp_neurons": mlp_neurons, "deltanet_heads": heads,
                "mlp_nonzeros": nnz,
                "head_cols": int(self.head.shape[1]), "embed_cols": int(len(self.embed_cols))}


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_trace_fast(model: torch.nn.Module, prompt: Sequence[int], max_tokens: int,
                   stop: int | None = None, fresh: bool = False) -> list[int]:
    """Drop-in for ``qwengpu.machine.engine.generate(model, prompt, max_tokens)``: the same greedy
    trace (first token after the prompt .. HALT inclusive, at most ``max_tokens``), from a
    :class:`FastModel` gathered once per model object (``fresh=True`` re-gathers, e.g. after the
    weights were edited in place)."""
    if stop is None:
        from qwengpu.machine import protocol as P

        stop = P.ctl(P.HALT)
    fast = None if fresh else _CACHE.get(model)
    if fast is None:
        fast = FastModel.from_model(model)
        _CACHE[model] = fast
    return fast.generate(prompt, max_tokens, stop=stop)
