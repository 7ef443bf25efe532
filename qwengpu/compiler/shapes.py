"""Layer shapes: read a ``Qwen3_5TextConfig`` from a shipped JSON, a checkpoint, or a dict.

Why: the compiler never hard-codes a model's numbers; it reads them from a config. The shipped
``configs/qwen3_5_2b_text.json`` holds the *published* Qwen3.5-2B text-config values so the 2B
layer shape can be targeted offline; :func:`check_against` compares them with a user's checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
SHAPE_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
              "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
              "linear_num_key_heads", "linear_num_value_heads", "rms_norm_eps")


def _text_dict(d: dict[str, Any]) -> dict[str, Any]:
    """The text part of a config dict (official checkpoints nest it under ``text_config``)."""
    if "text_config" in d and isinstance(d["text_config"], dict):
        d = d["text_config"]
    return {k: v for k, v in d.items() if not k.startswith("_")}


def text_config(source: str | Path | dict[str, Any], **overrides: Any):
    """A ``Qwen3_5TextConfig`` from a shipped name (``"qwen3_5_2b_text"``), a JSON file, a
    checkpoint directory, or a dict; ``overrides`` replace fields (e.g. ``num_hidden_layers``)."""
    from transformers import Qwen3_5TextConfig

    if isinstance(source, dict):
        d = dict(source)
    else:
        p = Path(source)
        if not p.exists() and (CONFIG_DIR / f"{source}.json").exists():
            p = CONFIG_DIR / f"{source}.json"
        if p.is_dir():
            p = p / "config.json"
        d = json.loads(p.read_text())
    d = _text_dict(d)
    d.pop("model_type", None)
    d.update(overrides)
    return Qwen3_5TextConfig(**d)


def shipped_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def check_against(shipped: str, checkpoint: str | Path | dict[str, Any]) -> list[str]:
    """Differences in layer-shape fields between a shipped config and a user's checkpoint config."""
    a = _text_dict(json.loads((CONFIG_DIR / f"{shipped}.json").read_text()))
    if isinstance(checkpoint, dict):
        b = _text_dict(checkpoint)
    else:
        p = Path(checkpoint)
        b = _text_dict(json.loads((p / "config.json" if p.is_dir() else p).read_text()))
    return [f"{k}: shipped {a.get(k)!r}, checkpoint {b.get(k)!r}" for k in SHAPE_KEYS if a.get(k) != b.get(k)]
