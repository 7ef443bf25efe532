"""Text and launches through a lean mount (:mod:`qwengpu.model.lean`).

* **Text** runs the base's own files with stock ``transformers``:
  ``AutoModelForCausalLM.from_pretrained(MOUNT, dtype=D)`` reads the base's verbatim config and
  tensors, so its logits are the base's, bit for bit, in the dtype the user picks (bfloat16 as
  Qwen3.5 ships, or float32), on CPU, CUDA or MPS; sampling settings come from the base's own
  ``generation_config.json``. Machine tokens are not part of the text vocabulary at all (the head
  has the base's ``V`` rows, the tokenizer is the base's): their probability on text is exactly 0,
  as in the stock single checkpoint, where they score about ``-2^40 r`` and softmax gives them an
  exact 0 (``docs/mount.md``). A machine id (``>= V``) fed as text is refused: a launch runs as its
  own sequence.
* **Launches** run the standalone machine, densified layer by layer from the sparse part (its stored
  bytes' SHA-256s checked), through the fast runtime (:class:`qwengpu.runtime.fast.FastModel`, proven
  token for token equal to the stock forward), float32 on CPU; ``runtime="stock"`` runs the stock
  ``Qwen3_5ForCausalLM`` of the machine instead (float32, TF32 off on CUDA). On a launch the mounted
  model's base layers add exact zeros (``docs/mount.md``), so this is the mount's launch:
  ``tests/model/test_lean_mount.py`` proves it equal to the stock single checkpoint's, token for token.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from qwengpu.errors import QwenGPUError
from qwengpu.machine.circuit import MachineShape
from qwengpu.model.lean import MACHINE_DIR, LeanError, check_base, read_lean_sidecar, read_machine_tensors

OnToken = Callable[[int], None] | None
TEXT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def check_device_dtype(device: str, dtype: str) -> None:
    """Refuse what the text runtime cannot honour, with a clear message (before any load)."""
    if dtype == "float16":
        raise QwenGPUError("--dtype float16 is not supported: Qwen3.5 ships in bfloat16 and its "
                           "float16 activations overflow; use bfloat16 or float32")
    if dtype not in TEXT_DTYPES:
        raise QwenGPUError(f"unknown --dtype {dtype!r} (float32 or bfloat16)")
    if device == "cuda" and not torch.cuda.is_available():
        raise QwenGPUError("--device cuda: no CUDA device is available (use --device cpu)")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise QwenGPUError("--device mps: no MPS device is available (use --device cpu)")
    if device not in ("cpu", "cuda", "mps"):
        raise QwenGPUError(f"unknown --device {device!r} (cpu, cuda or mps)")


def text_bytes(path: str | Path, dtype: str) -> int:
    """Bytes the text model holds: every base parameter in ``dtype`` (from the headers), plus 10 %
    and 256 MiB for activations, the cache and the interpreter."""
    from qwengpu.model.mount import Checkpoint

    ck = Checkpoint(path)
    n = sum(torch.Size(ck.shape(k)).numel() for k in ck.names())
    return int(n * TEXT_DTYPES[dtype].itemsize * 1.10) + (256 << 20)


def machine_bytes(rec: dict[str, Any]) -> int:
    """Bytes the fast machine runtime needs while gathering: the largest dense machine tensor twice,
    the embedding and head dense, the sparse values kept, and 256 MiB."""
    sizes = [torch.Size(v["shape"]).numel() * 4 for v in rec["machine"].values()]
    return 2 * max(sizes) + 2 * sorted(sizes)[-2] + int(rec["machine_bytes"]) + (256 << 20)


def check_fits_lean(path: str | Path, rec: dict[str, Any], device: str, dtype: str, text: bool,
                    machine: bool) -> int:
    """Refuse with the numbers, before loading, when the text model (on ``device``) or the machine
    (always CPU) would not fit; returns the estimate."""
    from qwengpu.model.memory import MemoryLimitError, available_bytes

    need_dev = text_bytes(path, dtype) if text else 0
    need_cpu = machine_bytes(rec) if machine else 0
    if device == "cpu" or device == "mps":  # mps shares the system memory
        need_cpu, need_dev = need_cpu + need_dev, 0
    free_cpu = available_bytes("cpu")
    if need_cpu > free_cpu:
        raise MemoryLimitError(f"loading {path} (text {dtype} on {device}, launches float32 on cpu) needs "
                               f"about {need_cpu / 2**30:.2f} GiB of memory; {free_cpu / 2**30:.2f} GiB are "
                               "available")
    if need_dev:
        free_dev = available_bytes(device)
        if need_dev > free_dev:
            raise MemoryLimitError(f"loading the text model of {path} ({dtype}) on {device} needs about "
                                   f"{need_dev / 2**30:.2f} GiB; {free_dev / 2**30:.2f} GiB are free there")
    return need_cpu + need_dev


# ---------------------------------------------------------------------------------------------
# the machine
# ---------------------------------------------------------------------------------------------
def _machine_config(path: Path):
    from transformers import Qwen3_5TextConfig

    cfg = json.loads((path / MACHINE_DIR / "config.json").read_text())
    for k in ("architectures", "dtype", "torch_dtype", "transformers_version"):
        cfg.pop(k, None)
    return Qwen3_5TextConfig(**cfg)


def fast_from_lean(path: str | Path, rec: dict[str, Any], progress=None):
    """The fast runtime's model of the lean mount's machine, gathered layer by layer as
    :meth:`FastModel.from_model` gathers the stock model (the same checks, the same structures), so
    no more than one dense layer is in memory at a time."""
    import numpy as np
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

    from qwengpu.runtime import fast as F

    path = Path(path)
    cfg = _machine_config(path)
    hidden, nl = int(cfg.hidden_size), int(cfg.num_hidden_layers)
    blocks = []
    for i in range(nl):
        pre = f"model.layers.{i}."
        names = [n for n in rec["machine"] if n.startswith(pre)]
        sd = {n[len(pre):]: t for n, t in read_machine_tensors(path, rec, names)}
        with torch.device("meta"):
            layer = Qwen3_5DecoderLayer(cfg, i)
        layer.load_state_dict(sd, assign=True, strict=True)
        layer.eval()
        mixer = None
        if layer.block_type == "linear_attention":
            mixer = F._delta_block(layer, hidden)
        else:
            bias = layer.self_attn.o_proj.bias
            if layer.self_attn.o_proj.weight.ne(0).any() or (bias is not None and bias.ne(0).any()):
                raise F.UnsupportedModel(f"layer {i}: softmax attention with a non-zero o_proj")
        if any(getattr(m, "bias", None) is not None for m in (layer.mlp.gate_proj, layer.mlp.up_proj,
                                                             layer.mlp.down_proj)):
            raise F.UnsupportedModel(f"layer {i}: MLP biases")
        blocks.append((mixer, F._mlp_block(layer, hidden)))
        del layer, sd
        if progress is not None:
            progress(f"machine layer {i + 1}/{nl} gathered")
    rest = dict(read_machine_tensors(path, rec, ["model.embed_tokens.weight", "lm_head.weight",
                                                 "model.norm.weight"]))
    norm = Qwen3_5RMSNorm(hidden, eps=float(cfg.rms_norm_eps))
    with torch.no_grad():
        norm.weight.copy_(rest["model.norm.weight"].float())
    emb = rest["model.embed_tokens.weight"].float()
    ecols = torch.nonzero((emb != emb[:1]).any(0)).flatten().numpy()
    base = emb[0].numpy().copy()
    emb_np = emb.numpy()
    head = F._np(rest["lm_head.weight"])
    hcols = F._nonzero_cols(head)
    full = F.Norm.of(norm, np.arange(hidden), hidden)
    head_part = F.Head(F.Norm.of(norm, hcols, hidden), np.ascontiguousarray(head[:, hcols]))
    fast = F.FastModel(blocks, base, np.ascontiguousarray(emb_np[:, ecols]), ecols, head_part, hidden, full)
    del rest, emb, emb_np, head
    gc.collect()
    return fast


def stock_machine_from_lean(path: str | Path, rec: dict[str, Any]):
    """The standalone machine as a stock ``Qwen3_5ForCausalLM`` (float32, dense: ~5 GB on the test
    layer shape), for ``--runtime stock``."""
    from transformers import Qwen3_5ForCausalLM

    cfg = _machine_config(Path(path))
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(cfg)
    sd = dict(read_machine_tensors(path, rec))
    model.load_state_dict(sd, assign=True, strict=True)
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

    model.model.rotary_emb = Qwen3_5TextRotaryEmbedding(cfg)
    return model.eval()


# ---------------------------------------------------------------------------------------------
# the mount
# ---------------------------------------------------------------------------------------------
class LeanMount:
    """A lean mount loaded once: ``launch`` (the machine, float32) and ``text`` (the base, stock)."""

    def __init__(self, path: Path, rec: dict[str, Any], runtime: str, device: str, dtype: str) -> None:
        self.path, self.rec, self.runtime, self.device, self.dtype = path, rec, runtime, device, dtype
        self.machine_shape = MachineShape(**rec.get("machine_shape", {}))
        self.V = int(rec["base_vocab"])
        self.fast = None
        self.stock = None
        self.fallback_reason: str | None = None
        self.load_seconds = 0.0

    @classmethod
    def load(cls, path: str | Path, *, runtime: str = "fast", device: str = "cpu", dtype: str = "float32",
             progress=None, check_memory: bool = True) -> LeanMount:
        """Load the machine part for launches (exact in float32 only), after checking the base part
        (cheaply: sizes and mtimes, then hashes of a changed file's tensors)."""
        if dtype != "float32":
            raise QwenGPUError(f"launches through the mount are exact in float32 only (asked: {dtype})")
        if runtime not in ("fast", "stock"):
            raise QwenGPUError(f"unknown runtime {runtime!r} (fast or stock)")
        check_device_dtype(device, dtype)
        path = Path(path)
        rec = read_lean_sidecar(path)
        check_base(path, rec)
        self = cls(path, rec, runtime, device, dtype)
        t0 = time.perf_counter()
        if check_memory:
            check_fits_lean(path, rec, "cpu", "float32", text=False, machine=True)
        if runtime == "fast":
            self.fast = fast_from_lean(path, rec, progress)
        else:
            if device == "cuda":
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
            self.stock = stock_machine_from_lean(path, rec).to(device)
        self.load_seconds = time.perf_counter() - t0
        return self

    def generate_machine(self, prompt: list[int], max_tokens: int, on_token: OnToken = None) -> list[int]:
        """The engine's model loop: machine tokens in, machine tokens out."""
        from qwengpu.machine import protocol as P

        if self.fast is not None:
            return self.fast.generate(prompt, max_tokens, stop=P.ctl(P.HALT), on_token=on_token)
        from qwengpu.runtime.engine import generate

        return generate(self.stock, prompt, max_tokens, on_token=on_token)

    def launch(self, cu_path: str | Path, spec_path: str | Path | None = None, *, progress=None, trace=None,
               max_tokens: int = 2_000_000, interpret=None):
        """One launch through the mount: the engine's ``ModelRun`` (outputs from the DUMP tokens)."""
        from qwengpu.runtime.engine import run_machine

        t0 = time.perf_counter()
        run = run_machine(cu_path, spec_path, max_tokens=max_tokens, progress=progress, trace=trace,
                          interpret=interpret, generate_fn=self.generate_machine, shape=self.machine_shape)
        run.stats["runtime"] = f"lean-{'fast' if self.fast is not None else 'stock'}"
        run.stats["mount"] = str(self.path)
        run.stats["seconds_with_prepare"] = round(time.perf_counter() - t0, 3)
        return run


class LeanText:
    """Text through a lean mount: the stock model of the base's own files in the chosen dtype.

    ``__call__`` and ``generate`` take the stock model's arguments (the chat host uses it as any
    ``transformers`` model); a machine id is refused (module doc)."""

    def __init__(self, path: str | Path, *, device: str = "cpu", dtype: str = "bfloat16",
                 check_memory: bool = True) -> None:
        from transformers import AutoModelForCausalLM

        check_device_dtype(device, dtype)
        self.path = Path(path)
        self.rec = read_lean_sidecar(self.path)
        check_base(self.path, self.rec)
        if check_memory:
            check_fits_lean(self.path, self.rec, device, dtype, text=True, machine=False)
        self.V = int(self.rec["base_vocab"])
        self.dtype, self.runtime, self.fallback_reason = dtype, "lean-text", None
        t0 = time.perf_counter()
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        self.model = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=TEXT_DTYPES[dtype]).to(device)
        self.model.eval()
        self.model.model.embed_tokens.register_forward_pre_hook(self._only_text)
        self.device = torch.device(device)
        self.load_seconds = time.perf_counter() - t0

    @property
    def config(self):
        return self.model.config

    @property
    def generation_config(self):
        return self.model.generation_config

    def _only_text(self, _module, args) -> None:
        ids = args[0]
        if ids.numel() and int(ids.max()) >= self.V:
            raise QwenGPUError(f"id {int(ids.max())} is not a text token (text ids are below {self.V}); a "
                               "launch runs as its own sequence")

    def _to_device(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Tensor arguments onto the model's device (the host builds them on the CPU)."""
        if self.device.type == "cpu":
            return args, kwargs
        move = lambda v: v.to(self.device) if isinstance(v, torch.Tensor) else v  # noqa: E731
        return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}

    def __call__(self, *args, **kwargs):
        args, kwargs = self._to_device(args, kwargs)
        return self.model(*args, **kwargs)

    def generate(self, *args, **kwargs):
        args, kwargs = self._to_device(args, kwargs)
        return self.model.generate(*args, **kwargs)

    def eval(self) -> LeanText:
        return self


_TEXT: dict[tuple, LeanText] = {}
_MACHINE: dict[tuple, LeanMount] = {}


def lean_text(path: str | Path, device: str = "cpu", dtype: str = "bfloat16") -> LeanText:
    """:class:`LeanText`, once per process (keyed by folder, device, dtype, sidecar time)."""
    p = Path(path)
    key = (str(p.resolve()), device, dtype, (p / "qwengpu_mount.json").stat().st_mtime_ns)
    if key not in _TEXT:
        _TEXT[key] = LeanText(p, device=device, dtype=dtype)
    return _TEXT[key]


def lean_machine(path: str | Path, runtime: str = "fast", device: str = "cpu", dtype: str = "float32",
                 progress=None) -> LeanMount:
    """:meth:`LeanMount.load`, once per process."""
    p = Path(path)
    key = (str(p.resolve()), runtime, device, dtype, (p / "qwengpu_mount.json").stat().st_mtime_ns)
    if key not in _MACHINE:
        _MACHINE[key] = LeanMount.load(p, runtime=runtime, device=device, dtype=dtype, progress=progress)
    return _MACHINE[key]


__all__ = ["LeanError", "LeanMount", "LeanText", "check_device_dtype", "fast_from_lean", "lean_machine",
           "lean_text"]
