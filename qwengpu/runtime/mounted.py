"""Launches through a mounted checkpoint (``qwengpu build``): the machine in front of a Qwen3.5.

A launch is its own sequence: the host feeds the standalone machine's prompt shifted into the
mount's vocabulary (machine token ``t`` is id ``V + t``) and maps every argmax token the model
writes back (``- V``). Two runtimes:

* ``stock``: ``AutoModelForCausalLM.from_pretrained`` of the whole mount, greedy with the cache
  (the recurrent path), float32 (TF32 off on CUDA). An argmax below ``V`` (a text token) during a
  launch is an error, never mapped.
* ``fast`` (default): a :class:`qwengpu.runtime.fast.FastModel` over the machine layers alone,
  restricted to the machine's dims, that skips the base layers and the base's vocabulary. That is
  exact only under conditions it checks first:

  - at load: the machine embedding rows are zero outside the machine dims; the machine layers
    write nothing outside them (so on a launch everything else stays exactly 0 through the machine
    layers, and the restricted reads drop only zero terms); the base layers have no biases and
    their reading projections are zero on the machine dims (so each base layer sees exact zeros
    and adds exactly 0); the base's ``lm_head`` rows are zero on the machine dims (so every base
    token scores exactly 0 on a launch);
  - at run time: every fed id is a machine token, and the machine's winning logit is > 0 in any
    summation order (so it beats the base tokens' zeros: the first maximum is the machine's).

  A load-time condition that fails makes :meth:`MountedModel.load` use the stock forward; a
  run-time one re-runs the launch on the stock forward. ``tests/model/test_mount.py`` proves the
  fast runtime equal to the stock forward of the whole mount, token for token, on both paths.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from qwengpu.errors import ExecutionError
from qwengpu.machine.circuit import MachineShape
from qwengpu.model.mount import MACHINE_VOCAB, NORMS, READ, WRITE, Checkpoint, read_mount_sidecar
from qwengpu.runtime import fast as _fast

OnToken = Callable[[int], None] | None


class NotExact(Exception):
    """A run-time condition of the fast mounted runtime failed (the launch goes to the stock forward)."""


class _MountHead(_fast.Head):
    """The machine's head on its dims; checks that the winner's logit is positive in any order."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.checked: dict[bytes, int] = {}  # inputs whose winner passed the check (deterministic)

    def clear_memos(self) -> None:
        super().clear_memos()
        self.checked.clear()

    def argmax_normed(self, h: np.ndarray) -> int:
        key = h.tobytes()
        hit = self.checked.get(key)
        if hit is not None:
            return hit
        idx = super().argmax_normed(h)
        p = (self.w[idx] * h).astype(np.float64)  # the stock float32 products
        s, mag = float(p.sum()), float(np.abs(p).sum())
        # any float32 summation order of n terms stays within 2 n 2^-24 sum|p| of the exact sum
        if not s > 2 * len(p) * 2.0 ** -24 * mag:
            raise NotExact(f"the machine's winning logit ({s!r}) is not safely above the base tokens' 0")
        if len(self.checked) >= _fast.HEAD_CACHE_MAX:
            self.checked.clear()
        if self.shortcuts:
            self.checked[key] = idx
        return idx


def _layer_parts(name: str) -> tuple[str, str]:
    parts = name.split(".")
    leaf = parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]
    return leaf, parts[-1]


def _text_config(cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if cfg.get("model_type") == "qwen3_5":
        return "model.language_model.", cfg["text_config"]
    return "model.", cfg


def fast_from_mount(path: str | Path, rec: dict[str, Any] | None = None, progress=None) -> _fast.FastModel:
    """Gather a :class:`FastModel` over the mount's machine layers on the machine dims, after the
    load-time checks (module doc); raises :class:`NotExact` naming the first failed condition."""
    from transformers import Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

    path = Path(path)
    rec = rec or read_mount_sidecar(path)
    ck = Checkpoint(path)
    pre, text = _text_config(ck.config)
    V, Hp = int(rec["token_offset"]), int(rec["mounted_hidden"])
    lm = int(rec["layers"]["machine"][1])
    nl = int(text["num_hidden_layers"])
    dims = rec["dims"]
    R = np.array(sorted(dims["machine_to"] + dims["fillers"]), dtype=np.int64)
    Rt = torch.from_numpy(R)
    outside = np.ones(Hp, dtype=bool)
    outside[R] = False
    out_t = torch.from_numpy(outside)
    emb_name, head_name = f"{pre}embed_tokens.weight", "lm_head.weight"
    # -- load-time checks on the embedding and the head
    memb = ck.rows(emb_name, V, V + MACHINE_VOCAB)
    if memb[:, out_t].ne(0).any():
        raise NotExact("machine embedding rows are not zero outside the machine dims")
    memb = memb[:, Rt].contiguous()
    for a in range(0, V, 16384):
        if progress is not None:
            progress(f"checking the base's lm_head rows {a:,}..{min(V, a + 16384):,} of {V:,}")
        rows = ck.rows(head_name, a, min(V, a + 16384))
        if rows[:, Rt].ne(0).any():
            raise NotExact("a base lm_head row is not zero on the machine dims")
    mhead = ck.rows(head_name, V, V + MACHINE_VOCAB)[:, Rt].contiguous()
    # -- base layers: no biases, reading projections zero on the machine dims
    for i in range(lm, nl):
        if progress is not None:
            progress(f"checking base layer {i + 1 - lm}/{nl - lm}")
        for name in [n for n in ck.names() if n.startswith(f"{pre}layers.{i}.")]:
            leaf, kind = _layer_parts(name)
            if kind == "bias" and ck.info(name)["shape"] and any(ck.get(name).ne(0).reshape(-1)):
                raise NotExact(f"base layer {i} has a non-zero bias ({name})")
            if leaf in READ and kind == "weight" and ck.get(name)[:, Rt].ne(0).any():
                raise NotExact(f"base layer {i}: {name} reads the machine dims")
    # -- machine layers, restricted to R (they write nothing outside it)
    tc = dict(text)
    tc.update(hidden_size=len(R), num_hidden_layers=lm, layer_types=text["layer_types"][:lm],
              vocab_size=MACHINE_VOCAB)
    for k in ("architectures", "dtype", "torch_dtype", "transformers_version"):
        tc.pop(k, None)
    cfg = Qwen3_5TextConfig(**tc)
    blocks = []
    for i in range(lm):
        sd = {}
        for name in [n for n in ck.names() if n.startswith(f"{pre}layers.{i}.")]:
            leaf, kind = _layer_parts(name)
            t = ck.get(name).to(torch.float32)
            if leaf in READ and kind == "weight":
                t = t[:, Rt]
            elif leaf in WRITE:
                if t[out_t].ne(0).any():
                    raise NotExact(f"machine layer {i}: {name} writes outside the machine dims")
                t = t[Rt]
            elif leaf in NORMS:
                t = t[Rt]
            sd[name[len(f"{pre}layers.{i}."):]] = t.contiguous()
        with torch.device("meta"):
            layer = Qwen3_5DecoderLayer(cfg, i)
        layer.load_state_dict(sd, assign=True, strict=True)
        layer.eval()
        mixer = None
        if layer.block_type == "linear_attention":
            mixer = _fast._delta_block(layer, Hp)
        elif layer.self_attn.o_proj.weight.ne(0).any():
            raise NotExact(f"machine layer {i}: softmax attention with a non-zero o_proj")
        blocks.append((mixer, _fast._mlp_block(layer, Hp)))
        del layer, sd
        if progress is not None:
            progress(f"machine layer {i + 1}/{lm} gathered")
    gc.collect()
    fnorm = Qwen3_5RMSNorm(len(R), eps=float(text.get("rms_norm_eps", 1e-6)))
    with torch.no_grad():
        fnorm.weight.copy_(ck.get(f"{pre}norm.weight").to(torch.float32)[Rt])
    emb = memb.numpy()
    ecols = np.nonzero((emb != emb[:1]).any(0))[0]
    base = emb[0].copy()
    head = mhead.numpy()
    hcols = _fast._nonzero_cols(head)
    full = _fast.Norm.of(fnorm, np.arange(len(R)), Hp)
    return _fast.FastModel(blocks, base, np.ascontiguousarray(emb[:, ecols]), ecols,
                           _MountHead(_fast.Norm.of(fnorm, hcols, Hp), np.ascontiguousarray(head[:, hcols])),
                           Hp, full)


class MountedModel:
    """A mounted checkpoint loaded once for many launches (``launch``) or raw greedy runs."""

    def __init__(self, path: Path, rec: dict[str, Any], runtime: str, device: str = "cpu") -> None:
        self.path, self.rec, self.runtime, self.device = path, rec, runtime, device
        # the machine's shape as compiled (a mount written before the multiplier: the default shape)
        self.machine_shape = MachineShape(**rec.get("machine_shape", {}))
        self.V = int(rec["token_offset"])
        self.fast: _fast.FastModel | None = None
        self.stock = None
        self.fallback_reason: str | None = None
        self.load_seconds = 0.0

    @classmethod
    def load(cls, path: str | Path, *, runtime: str = "fast", device: str = "cpu", dtype: str = "float32",
             progress=None, check_memory: bool = True) -> MountedModel:
        """Load a mount for launches. ``runtime="fast"`` falls back to ``"stock"`` when a load-time
        condition fails (``fallback_reason`` says which). Launches are exact in float32 only."""
        from qwengpu.errors import QwenGPUError
        from qwengpu.model.memory import check_fits

        if dtype != "float32":
            raise QwenGPUError(f"launches through the mount are exact in float32 only (asked: {dtype})")
        if runtime not in ("fast", "stock"):
            raise QwenGPUError(f"unknown runtime {runtime!r} (fast or stock)")
        path = Path(path)
        rec = read_mount_sidecar(path)
        self = cls(path, rec, runtime, device)
        t0 = time.perf_counter()
        if runtime == "fast":
            if check_memory:
                check_fits(path, runtime="fast", device="cpu", dtype=dtype)
            try:
                self.fast = fast_from_mount(path, rec, progress)
            except NotExact as e:
                self.fallback_reason = str(e)
                print(f"qwengpu: the fast mounted runtime does not apply ({e}); using the stock forward",
                      file=sys.stderr)
                self.runtime = "stock"
        if self.runtime == "stock":
            self._load_stock(check_memory, dtype)
        self.load_seconds = time.perf_counter() - t0
        return self

    def _load_stock(self, check_memory: bool = True, dtype: str = "float32") -> None:
        if self.stock is not None:
            return
        from transformers import AutoModelForCausalLM

        from qwengpu.model.memory import check_fits

        if check_memory:
            check_fits(self.path, runtime="stock", device=self.device, dtype=dtype)
        if self.device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        model = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=torch.float32)
        self.stock = model.to(self.device).eval()

    # -- greedy runs in the mount's ids ----------------------------------------------------------
    @torch.no_grad()
    def _stock_generate(self, ids: Sequence[int], max_new: int, stop: int, on_token: OnToken) -> list[int]:
        self._load_stock()
        model, dev = self.stock, self.device
        out = model(input_ids=torch.tensor([list(ids)], device=dev), use_cache=True)
        res: list[int] = []
        while True:
            nxt = int(out.logits[0, -1].argmax())
            res.append(nxt)
            if on_token is not None:
                on_token(nxt)
            if nxt == stop or len(res) >= max_new:
                return res
            out = model(input_ids=torch.tensor([[nxt]], device=dev), cache=out.cache, use_cache=True)

    def generate_ids(self, ids: Sequence[int], max_new: int, stop: int,
                     on_token: OnToken = None) -> list[int]:
        """Greedy continuation in the mount's ids (what the stock ``generate`` would write)."""
        V = self.V
        if self.fast is not None and all(V <= t < V + MACHINE_VOCAB for t in ids):
            try:
                wrap = None if on_token is None else (lambda t: on_token(t + V))
                res = self.fast.generate([t - V for t in ids], max_new, stop=stop - V, on_token=wrap)
                return [t + V for t in res]
            except NotExact as e:
                self.fallback_reason = str(e)
                print(f"qwengpu: {e}; this launch runs again on the stock forward", file=sys.stderr)
        return self._stock_generate(ids, max_new, stop, on_token)

    def generate_machine(self, prompt: list[int], max_tokens: int, on_token: OnToken = None) -> list[int]:
        """The engine's model loop: machine tokens in, machine tokens out (the host maps +-V only)."""
        from qwengpu.machine import protocol as P

        V = self.V
        pos = [0]

        def seen(t: int) -> None:
            pos[0] += 1
            if not V <= t < V + MACHINE_VOCAB:
                raise ExecutionError(f"the mounted model wrote text token {t} at step {pos[0]} of a launch "
                                     "(a launch writes only machine tokens)")
            if on_token is not None:
                on_token(t - V)

        ids = self.generate_ids([t + V for t in prompt], max_tokens, P.ctl(P.HALT) + V, seen)
        return [t - V for t in ids]

    def launch(self, cu_path: str | Path, spec_path: str | Path | None = None, *, progress=None, trace=None,
               max_tokens: int = 2_000_000, interpret=None):
        """One launch through the mount: the engine's ``ModelRun`` (outputs from the DUMP tokens)."""
        from qwengpu.runtime.engine import run_machine

        t0 = time.perf_counter()
        run = run_machine(cu_path, spec_path, max_tokens=max_tokens, progress=progress, trace=trace,
                          interpret=interpret, generate_fn=self.generate_machine, shape=self.machine_shape)
        run.stats["runtime"] = f"mounted-{'fast' if self.fast is not None else 'stock'}"
        run.stats["mount"] = str(self.path)
        run.stats["seconds_with_prepare"] = round(time.perf_counter() - t0, 3)
        if self.fallback_reason:
            run.stats["fallback"] = self.fallback_reason
        return run


_LOADED: dict[tuple[str, str, str, float], MountedModel] = {}


def mounted_model(path: str | Path, runtime: str = "fast", device: str = "cpu",
                  dtype: str = "float32") -> MountedModel:
    """:meth:`MountedModel.load`, once per process (keyed by folder, runtime, device, sidecar time);
    for a lean mount (the default build) the :class:`qwengpu.runtime.lean.LeanMount`, which has the
    same ``launch``/``generate_machine``/``load_seconds``."""
    from qwengpu.model.lean import LEAN_FORMAT, mount_format

    p = Path(path)
    if mount_format(p) == LEAN_FORMAT:  # the default build: the machine stored sparse beside the base
        from qwengpu.runtime.lean import lean_machine

        return lean_machine(p, runtime=runtime, device=device, dtype=dtype, progress=load_notes(p))
    side = p / "qwengpu_mount.json"
    key = (str(p.resolve()), runtime, f"{device}:{dtype}", side.stat().st_mtime if side.exists() else 0.0)
    if key not in _LOADED:
        _LOADED[key] = MountedModel.load(p, runtime=runtime, device=device, dtype=dtype,
                                         progress=load_notes(p))
    return _LOADED[key]


def load_notes(path: Path, every: float = 10.0) -> Callable[[str], None]:
    """A progress callback for a long mount load (a 2B mount's checks read ~31 GB): one line on
    stderr when a stage starts at least ``every`` seconds after the last line, none for fast loads."""
    t0 = time.perf_counter()
    last = [t0]

    def note(msg: str) -> None:
        now = time.perf_counter()
        if now - last[0] >= every:
            last[0] = now
            print(f"qwengpu: loading the mount {path} ({now - t0:.0f} s): {msg}", file=sys.stderr, flush=True)

    return note


def describe(path: str | Path) -> dict[str, Any]:
    """The sidecar's summary (for messages and benchmarks)."""
    rec = read_mount_sidecar(path)
    return {k: rec[k] for k in ("hidden", "mounted_hidden", "c", "layers", "token_offset")} | {
        "config": json.loads((Path(path) / "config.json").read_text()).get("model_type")}
