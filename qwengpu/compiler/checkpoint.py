"""Compiled layers as a stock checkpoint: ``save_pretrained`` out, ``from_pretrained`` back.

Stage 8. The folder is an ordinary ``Qwen3_5ForCausalLM`` checkpoint (``config.json`` +
``*.safetensors``, no custom code), so ``AutoModelForCausalLM.from_pretrained`` loads it. Next to
it, ``qwengpu_circuit.json`` records where the circuit's inputs and outputs live, the residual
layout, the circuit fingerprint, and the SHA-256 of every weight file.

Why the extra care: a stock loader fills missing tensors with random values and never notices a
flipped bit, and one wrong ulp breaks an exact circuit. So :func:`save_compiled` writes into a
temporary folder and renames it into place (never a half-written checkpoint), and
:func:`load_compiled` checks the hashes, the loading report and the norm weights, raising
:class:`qwengpu.errors.CheckpointError` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError
from .build import IOLike, as_io
from .schedule import CircuitIO

SIDECAR = "qwengpu_circuit.json"
FORMAT = "qwengpu-circuit/1"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_sidecar(folder: Path, io: IOLike, dtype: str) -> dict[str, Any]:
    """The circuit record beside a written checkpoint: its io and the SHA-256 of every weight file
    (shared by :func:`save_compiled` and the machine's layer-by-layer writer)."""
    files = sorted(p.name for p in folder.iterdir() if p.suffix == ".safetensors")
    if not files:  # pragma: no cover - both writers always write safetensors
        raise CheckpointError(f"{folder}: no safetensors file was written")
    meta = {"format": FORMAT, "io": as_io(io).to_dict(), "files": {f: _sha256(folder / f) for f in files},
            "dtype": dtype}
    with open(folder / SIDECAR, "w") as f:
        json.dump(meta, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    return meta


def save_compiled(model, io: IOLike, path: str | Path, overwrite: bool = False) -> Path:
    """Write ``model`` (built from ``io``'s circuit) to ``path`` atomically; returns the path."""
    io = as_io(io)
    path = Path(path)
    if path.exists() and not overwrite:
        raise CheckpointError(f"{path} exists (pass overwrite=True to replace it)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex}"
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        write_sidecar(tmp, io, str(next(model.parameters()).dtype).removeprefix("torch."))
        for p in tmp.iterdir():
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(tmp)
        if path.exists():
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex}"
            os.rename(path, old)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, path)
        _fsync_dir(path.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def read_sidecar(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a checkpoint folder")
    side = path / SIDECAR
    if not side.exists():
        raise CheckpointError(f"{path}: no {SIDECAR} (not a compiled qwenGPU checkpoint)")
    try:
        meta = json.loads(side.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{side}: unreadable ({e})") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else meta
        raise CheckpointError(f"{side}: unknown format {found!r}")
    return meta


def verify_files(path: str | Path) -> dict[str, Any]:
    """Check config.json and every weight file against the sidecar; returns the sidecar."""
    path = Path(path)
    meta = read_sidecar(path)
    cfg_path = path / "config.json"
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{cfg_path}: missing or unreadable ({e})") from e
    if cfg.get("model_type") != "qwen3_5_text":
        raise CheckpointError(f"{cfg_path}: model_type {cfg.get('model_type')!r}, expected 'qwen3_5_text'")
    present = sorted(p.name for p in path.iterdir() if p.suffix == ".safetensors")
    expected = sorted(meta.get("files", {}))
    if present != expected:
        raise CheckpointError(f"{path}: weight files {present} do not match the recorded {expected}")
    for name, digest in meta["files"].items():
        if _sha256(path / name) != digest:
            raise CheckpointError(f"{path / name}: SHA-256 mismatch (corrupt or modified weights)")
    return meta


def load_compiled(path: str | Path, expect: IOLike | None = None, dtype: torch.dtype | None = None):
    """Load a compiled checkpoint with the stock loader, after checking it; returns (model, CircuitIO).

    ``expect``: the compiled circuit the caller wants; a checkpoint of another circuit (or shape)
    is rejected by fingerprint.
    """
    from transformers import AutoModelForCausalLM

    path = Path(path)
    meta = verify_files(path)
    try:
        io = CircuitIO.from_dict(meta["io"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path / SIDECAR}: malformed io record ({e})") from e
    if expect is not None and as_io(expect).fingerprint != io.fingerprint:
        raise CheckpointError(f"{path}: holds circuit {io.name!r} (fingerprint {io.fingerprint[:12]}), "
                              f"expected {as_io(expect).name!r} ({as_io(expect).fingerprint[:12]})")
    kwargs: dict[str, Any] = {"output_loading_info": True}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        model, info = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except Exception as e:  # the stock loader's many failure types
        raise CheckpointError(f"{path}: the stock loader failed: {e}") from e
    keys = ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")
    problems = {k: v for k, v in info.items() if v and k in keys}
    if problems:
        raise CheckpointError(f"{path}: incomplete checkpoint: {problems}")
    model.eval()
    model.requires_grad_(False)
    w = io.residual.norm_weight
    norms = [model.model.norm.weight]
    for layer in model.model.layers:
        norms += [layer.input_layernorm.weight, layer.post_attention_layernorm.weight]
    if any(not bool((n.float() == w).all()) for n in norms):
        raise CheckpointError(f"{path}: RMSNorm weights are not {w}: not a compiled qwenGPU model")
    if int(model.config.hidden_size) != io.residual.hidden_size:
        raise CheckpointError(f"{path}: hidden_size {model.config.hidden_size} does not match the circuit's "
                              f"{io.residual.hidden_size}")
    return model, io
