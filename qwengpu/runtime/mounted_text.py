"""Text through a mounted checkpoint without running its machine layers.

On a text sequence the machine layers of a mount add exactly nothing (``docs/mount.md``, "Text
adds nothing in the machine layers"): text embedding rows are zero on every dim a machine weight
reads, so every machine pre-activation is an exact 0 and the residual leaves the machine layers
bit for bit as it entered. The text runtime therefore holds a stock ``Qwen3_5ForCausalLM`` of the
mount's **base layers only** (same width, same embedding, final norm and head, weights loaded from
the mount's own shards) and skips the machine layers, only after checking what makes them zero:

- at load: every text embedding row (ids below ``V``) is zero on the machine dims; every machine
  layer's reading projection is zero outside the machine dims, and no machine layer has a bias;
  the machine sits in front (layers ``0..Lm-1``), the base layers after it;
- at run time: every id fed is a text id (``< V``): a forward pre-hook on the embedding refuses a
  machine token, and the wrapper then runs that call on the stock forward of the whole mount.

``tests/model/test_mount_stock.py`` proves it equal to the stock forward of the whole mount, logits
bit for bit, on a prefill (every position) and on the one-token decode path with the cache; and
that a machine weight reading a base dim is caught at load. Why: the chat text of advanced mode and
``qwengpu kl``-style text runs pay for the base layers only (2 of 41 layers on the test mount).
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

import torch

from qwengpu.errors import QwenGPUError
from qwengpu.model.mount import MACHINE_VOCAB, READ, Checkpoint, read_mount_sidecar


class TextNotExact(Exception):
    """A condition of the text runtime failed (the call goes to the stock forward of the mount)."""


def _text_config(cfg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if cfg.get("model_type") == "qwen3_5":
        return "model.language_model.", cfg["text_config"]
    return "model.", cfg


def _machine_dims(rec: dict[str, Any]) -> torch.Tensor:
    dims = rec["dims"]
    return torch.tensor(sorted(dims["machine_to"] + dims["fillers"]), dtype=torch.int64)


def check_machine_layers_silent(ck: Checkpoint, rec: dict[str, Any], pre: str, progress=None) -> None:
    """The load-time conditions under which the machine layers add exactly 0 on text (module doc);
    raises :class:`TextNotExact` naming the first that fails."""
    V, Hp = int(rec["token_offset"]), int(rec["mounted_hidden"])
    lm = int(rec["layers"]["machine"][1])
    if int(rec["layers"]["machine"][0]) != 0 or int(rec["layers"]["base"][0]) != lm:
        raise TextNotExact("the machine layers are not in front of the base layers")
    R = _machine_dims(rec)
    outside = torch.ones(Hp, dtype=torch.bool)
    outside[R] = False
    emb = f"{pre}embed_tokens.weight"
    for a in range(0, V, 8192):
        if ck.rows(emb, a, min(V, a + 8192))[:, R].ne(0).any():
            raise TextNotExact(f"a text embedding row in {a}..{min(V, a + 8192) - 1} is not zero on the "
                               "machine dims")
    for i in range(lm):
        for name in [n for n in ck.names() if n.startswith(f"{pre}layers.{i}.")]:
            parts = name.split(".")
            leaf, kind = (parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]), parts[-1]
            t = ck.get(name)
            if kind == "bias" and t.ne(0).any():
                raise TextNotExact(f"machine layer {i} has a non-zero bias ({name})")
            if not bool(torch.isfinite(t).all()):  # 0 * inf is NaN: the stock forward would not add 0
                raise TextNotExact(f"machine layer {i}: {name} holds a non-finite value")
            if leaf in READ and kind == "weight" and t[:, outside].ne(0).any():
                raise TextNotExact(f"machine layer {i}: {name} reads a dim outside the machine's")
        if progress is not None:
            progress(f"machine layer {i + 1}/{lm} checked")


def base_layers_model(path: str | Path, rec: dict[str, Any] | None = None, progress=None):
    """The stock ``Qwen3_5ForCausalLM`` of the mount's base layers (float32, CPU), after the checks."""
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

    path = Path(path)
    rec = rec or read_mount_sidecar(path)
    ck = Checkpoint(path)
    try:
        pre, text = _text_config(ck.config)
        check_machine_layers_silent(ck, rec, pre, progress)
        b0, b1 = (int(x) for x in rec["layers"]["base"])
        tc = dict(text)
        tc.update(num_hidden_layers=b1 - b0, layer_types=list(text["layer_types"][b0:b1]),
                  tie_word_embeddings=False)
        for k in ("architectures", "dtype", "torch_dtype", "transformers_version"):
            tc.pop(k, None)
        cfg = Qwen3_5TextConfig(**tc)
        with torch.device("meta"):
            model = Qwen3_5ForCausalLM(cfg)
        # the tensors memory-mapped from the shards, as ``from_pretrained`` holds them: a BLAS kernel
        # may sum in another order for a buffer at another alignment (the one-token decode path's
        # small projections do on this CPU), so a copy would not match the stock forward bit for bit
        names = {"model.embed_tokens.weight": f"{pre}embed_tokens.weight",
                 "model.norm.weight": f"{pre}norm.weight", "lm_head.weight": "lm_head.weight"}
        for i in range(b0, b1):
            src = f"{pre}layers.{i}."
            for name in [n for n in ck.names() if n.startswith(src)]:
                names[f"model.layers.{i - b0}.{name[len(src):]}"] = name
        sd = _mapped(path, list(names.values()))
        model.load_state_dict({k: sd[v] for k, v in names.items()}, assign=True, strict=True)
        del sd
        model.model.rotary_emb = Qwen3_5TextRotaryEmbedding(cfg)  # its buffers are not in the checkpoint
        if (path / "generation_config.json").is_file():  # the base's sampling settings (top_k, ...)
            from transformers import GenerationConfig

            model.generation_config = GenerationConfig.from_pretrained(str(path))
    finally:
        ck.close()
    gc.collect()
    return model.eval()


def _mapped(path: Path, names: list[str]) -> dict[str, torch.Tensor]:
    """Float32 tensors of a checkpoint folder, memory-mapped (``safetensors.safe_open``)."""
    import json

    from safetensors import safe_open

    index = path / "model.safetensors.index.json"
    where = (json.loads(index.read_text())["weight_map"] if index.is_file()
             else dict.fromkeys(names, "model.safetensors"))
    out: dict[str, torch.Tensor] = {}
    for shard in sorted({where[n] for n in names}):
        with safe_open(str(path / shard), framework="pt") as f:
            for n in names:
                if where[n] == shard:
                    t = f.get_tensor(n)
                    if t.dtype != torch.float32:
                        raise TextNotExact(f"{n} is {t.dtype}, not float32")
                    out[n] = t
    return out


class MountText:
    """Text generation and forwards through a mount: the base layers alone when the checks hold,
    else (or for a call with a machine token) the stock forward of the whole mount.

    ``__call__`` and ``generate`` take the stock model's arguments, so the chat host uses it as it
    uses any ``transformers`` model; ``runtime`` says which path the last call took."""

    def __init__(self, path: str | Path, progress=None, stock=None, base=None) -> None:
        self.path = Path(path)
        self._stock_model = stock  # the whole mount's stock model, when the caller has one loaded
        self.rec = read_mount_sidecar(self.path)
        self.V = int(self.rec["token_offset"])
        self.fallback_reason: str | None = None
        self.runtime = "mounted-text"
        t0 = time.perf_counter()
        try:
            # ``base``: an already checked base-layers model of the same mount (shared, not re-read)
            self.base = base if base is not None else base_layers_model(self.path, self.rec, progress)
            self.base.model.embed_tokens.register_forward_pre_hook(self._only_text)
        except TextNotExact as e:
            self.base = None
            self._fallback(str(e))
        self.load_seconds = time.perf_counter() - t0
        self.device = torch.device("cpu")

    @property
    def config(self):
        return self._model().config

    @property
    def generation_config(self):
        return self._model().generation_config

    def _only_text(self, _module, args) -> None:
        ids = args[0]
        if ids.numel() and int(ids.max()) >= self.V:
            raise TextNotExact(f"id {int(ids.max())} is a machine token (text ids are below {self.V})")

    def _fallback(self, why: str) -> None:
        self.fallback_reason = why
        self.runtime = "mounted-stock"
        print(f"qwengpu: the text runtime does not apply ({why}); using the stock forward of the mount",
              file=sys.stderr)

    def _stock(self):
        if self._stock_model is None:
            from qwengpu.runtime.mounted import mounted_model

            mm = mounted_model(self.path, runtime="stock")
            self._stock_model = mm.stock
        return self._stock_model

    def _model(self):
        return self.base if self.base is not None else self._stock()

    def _run(self, method: str, *args, **kwargs):
        if self.base is not None and kwargs.get("inputs_embeds") is not None:
            # embeddings the caller made need not be zero on the machine dims: the whole mount decides
            self.runtime = "mounted-stock"
            return getattr(self._stock(), method)(*args, **kwargs)
        if self.base is not None:
            try:
                self.runtime = "mounted-text"
                return getattr(self.base, method)(*args, **kwargs)
            except TextNotExact as e:
                self._fallback(str(e))
        self.runtime = "mounted-stock"
        return getattr(self._stock(), method)(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        """The stock forward's output (``.logits`` over the mount's whole vocabulary)."""
        return self._run("__call__", *args, **kwargs)

    def generate(self, *args, **kwargs):
        """Stock ``generate`` on the base layers (greedy text never picks a machine token: those score
        about -2^40 on text; if one is fed, the call reruns on the stock mount)."""
        return self._run("generate", *args, **kwargs)

    def eval(self) -> MountText:
        return self


_LOADED: dict[tuple[str, float], MountText] = {}


def load_mount_text(path: str | Path, progress=None, device: str = "cpu", dtype: str | None = None):
    """The text runtime of a mount folder, once per process (keyed by folder and sidecar time); a
    clear error for anything else. A lean mount (the default build) runs the base's own files in
    ``dtype`` (default: the base's own, bfloat16 for Qwen3.5) on ``device``
    (:class:`qwengpu.runtime.lean.LeanText`); a stock single checkpoint runs float32 on CPU only
    (its text is exact in float32 only: the width compensation cannot be held in bfloat16)."""
    from qwengpu.model.lean import LEAN_FORMAT, mount_format

    p = Path(path)
    side = p / "qwengpu_mount.json"
    if not side.is_file():
        raise QwenGPUError(f"{path}: not a mounted checkpoint (no qwengpu_mount.json)")
    if mount_format(p) == LEAN_FORMAT:
        from qwengpu.model.lean import read_lean_sidecar
        from qwengpu.runtime.lean import lean_text

        if dtype is None:
            dtype = read_lean_sidecar(p)["base_dtype"]
            dtype = dtype if dtype in ("float32", "bfloat16") else "float32"
        return lean_text(p, device=device, dtype=dtype)
    if (dtype or "float32") != "float32" or device != "cpu":
        raise QwenGPUError(f"{path} is a stock single checkpoint (qwengpu build --stock): its text runs in "
                           f"float32 on cpu only (asked: {dtype} on {device}); build the default lean mount "
                           "for the base's own dtype and other devices")
    key = (str(p.resolve()), side.stat().st_mtime)
    if key not in _LOADED:
        _LOADED[key] = MountText(p, progress)
    return _LOADED[key]


__all__ = ["MACHINE_VOCAB", "MountText", "TextNotExact", "base_layers_model", "load_mount_text"]
