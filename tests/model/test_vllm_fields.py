"""Every config field docs/vllm.md lists as read by vLLM's Qwen3.5 loader is present, with a value
of the right kind, in the configs the synthetic maker writes (both layouts).

``missing_vllm_fields(config)`` returns what a config lacks; the mount's tests can call it on a
mounted ``config.json`` too."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from qwengpu.model.synthetic import make_synthetic_base  # noqa: E402

# (field, check) pairs, as docs/vllm.md lists them.
TEXT_FIELDS: dict[str, object] = {
    "model_type": lambda v: v == "qwen3_5_text",
    "vocab_size": int,
    "hidden_size": int,
    "num_hidden_layers": int,
    "layer_types": list,
    "intermediate_size": int,
    "hidden_act": lambda v: v == "silu",
    "rms_norm_eps": float,
    "tie_word_embeddings": bool,
    "linear_num_key_heads": int,
    "linear_num_value_heads": int,
    "linear_key_head_dim": int,
    "linear_value_head_dim": int,
    "linear_conv_kernel_dim": int,
    "num_attention_heads": int,
    "num_key_value_heads": int,
    "head_dim": int,
    "attn_output_gate": lambda v: v is True,
    "rope_parameters": dict,
    "max_position_embeddings": int,
}
ROPE_FIELDS = ("rope_theta", "partial_rotary_factor")
VISION_FIELDS = ("depth", "hidden_size", "hidden_act", "intermediate_size", "num_heads", "in_channels",
                 "patch_size", "spatial_merge_size", "temporal_patch_size", "out_hidden_size",
                 "num_position_embeddings")
CONDITIONAL_FIELDS = ("architectures", "model_type", "text_config", "vision_config", "image_token_id",
                      "video_token_id", "vision_start_token_id", "vision_end_token_id",
                      "tie_word_embeddings")
ARCHITECTURES = {"qwen3_5": "Qwen3_5ForConditionalGeneration", "qwen3_5_text": "Qwen3_5ForCausalLM"}


def _ok(check, value) -> bool:
    if isinstance(check, type):
        return isinstance(value, check) and not (check is int and isinstance(value, bool))
    return bool(check(value))


def missing_vllm_fields(cfg: dict) -> list[str]:
    """The fields vLLM's Qwen3.5 loader reads that ``cfg`` (a config.json dict) lacks or holds a
    value of the wrong kind for; empty when it has them all."""
    out: list[str] = []
    top = cfg.get("model_type")
    if top not in ARCHITECTURES:
        return [f"model_type ({top!r}: expected qwen3_5 or qwen3_5_text)"]
    if cfg.get("architectures") != [ARCHITECTURES[top]]:
        out.append(f"architectures (expected [{ARCHITECTURES[top]!r}])")
    if top == "qwen3_5":
        out += [f for f in CONDITIONAL_FIELDS if f not in cfg]
        text = cfg.get("text_config") or {}
        vision = cfg.get("vision_config") or {}
        out += [f"vision_config.{f}" for f in VISION_FIELDS if f not in vision]
        if vision.get("out_hidden_size") != text.get("hidden_size"):
            out.append("vision_config.out_hidden_size (must equal text_config.hidden_size)")
        prefix = "text_config."
    else:
        text, prefix = cfg, ""
    for f, check in TEXT_FIELDS.items():
        if f not in text or not _ok(check, text[f]):
            out.append(prefix + f)
    rope = text.get("rope_parameters") or {}
    out += [f"{prefix}rope_parameters.{f}" for f in ROPE_FIELDS if f not in rope]
    types = text.get("layer_types") or []
    n = text.get("num_hidden_layers")
    if len(types) != n or not set(types) <= {"linear_attention", "full_attention"}:
        out.append(f"{prefix}layer_types (one of linear_attention/full_attention per layer)")
    return out


@pytest.fixture(scope="module")
def vllm_configs(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm")
    out = {}
    for layout, tied in (("causal", True), ("conditional", False)):
        path = make_synthetic_base(root / layout, layout=layout, tied=tied, hidden=64, layers=4, vocab=1024,
                                   shards=1)
        out[layout] = json.loads((path / "config.json").read_text())
    return out


@pytest.mark.parametrize("layout", ["causal", "conditional"])
def test_synthetic_configs_have_every_field_vllm_reads(vllm_configs, layout):
    assert missing_vllm_fields(vllm_configs[layout]) == []


def test_missing_fields_are_named(vllm_configs):
    """The checker can fail: each removed or wrong field is reported by name."""
    cfg = json.loads(json.dumps(vllm_configs["conditional"]))
    del cfg["text_config"]["linear_conv_kernel_dim"]
    cfg["text_config"]["model_type"] = "qwen3_next"
    cfg["vision_config"]["out_hidden_size"] = 7
    del cfg["video_token_id"]
    cfg["text_config"]["layer_types"] = cfg["text_config"]["layer_types"][:-1]
    got = missing_vllm_fields(cfg)
    for want in ("text_config.linear_conv_kernel_dim", "text_config.model_type", "video_token_id",
                 "vision_config.out_hidden_size (must equal text_config.hidden_size)",
                 "text_config.layer_types (one of linear_attention/full_attention per layer)"):
        assert want in got
    causal = json.loads(json.dumps(vllm_configs["causal"]))
    causal["architectures"] = ["Qwen3_5ForConditionalGeneration"]
    causal["attn_output_gate"] = False
    del causal["rope_parameters"]["rope_theta"]
    assert missing_vllm_fields(causal) == [
        "architectures (expected ['Qwen3_5ForCausalLM'])", "attn_output_gate", "rope_parameters.rope_theta"]
    want = ["model_type ('llama': expected qwen3_5 or qwen3_5_text)"]
    assert missing_vllm_fields({"model_type": "llama"}) == want


def test_config_fields_listed_in_the_doc():
    """docs/vllm.md and this test list the same text-config fields."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "vllm.md").read_text()
    for f in list(TEXT_FIELDS) + list(VISION_FIELDS) + list(CONDITIONAL_FIELDS) + list(ROPE_FIELDS):
        assert f"`{f}`" in doc, f


def test_mounted_config_has_every_field_vllm_reads(small_mount):
    """The mount's config.json (the shared hidden-128 mount, tests/model/conftest.py) keeps every
    field vLLM reads, with the mounted width, vocabulary and layer count."""
    cfg = json.loads((small_mount / "config.json").read_text())
    assert missing_vllm_fields(cfg) == []
    assert cfg["vocab_size"] == 1024 + 65536 and cfg["tie_word_embeddings"] is False
