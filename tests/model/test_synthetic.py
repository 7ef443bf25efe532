"""Synthetic Qwen3.5 bases: the real on-disk layouts, loadable by stock transformers, with a
tokenizer and a chat template that renders tool calls the way Qwen3.5's does."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from qwengpu.errors import QwenGPUError  # noqa: E402
from qwengpu.model.synthetic import make_synthetic_base  # noqa: E402


@pytest.fixture(scope="module")
def synthetic_bases(tmp_path_factory):
    """One small base per layout (causal tied, conditional untied in float32)."""
    root = tmp_path_factory.mktemp("synthetic")
    return {
        "causal": make_synthetic_base(root / "causal", layout="causal"),
        "conditional": make_synthetic_base(root / "conditional", layout="conditional", tied=False,
                                           dtype="float32", seed=1),
    }


def _index(path):
    return json.loads((path / "model.safetensors.index.json").read_text())


def test_causal_layout_on_disk(synthetic_bases):
    path = synthetic_bases["causal"]
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3_5ForCausalLM"]
    assert cfg["model_type"] == "qwen3_5_text"
    assert cfg["dtype"] == "bfloat16"
    assert cfg["layer_types"] == ["linear_attention", "full_attention"]
    # the machine's test layer shape with a small hidden
    assert (cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]) == (256, 2048, 4096)
    assert (cfg["linear_num_key_heads"], cfg["linear_key_head_dim"]) == (16, 128)
    assert (cfg["linear_num_value_heads"], cfg["linear_value_head_dim"]) == (16, 64)
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]) == (4, 2, 64)
    names = set(_index(path)["weight_map"])
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names  # tied
    assert any(n.startswith("mtp.") for n in names)
    assert len(set(_index(path)["weight_map"].values())) == 2
    assert all(n.startswith(("model.", "mtp.")) for n in names)


def test_conditional_layout_on_disk(synthetic_bases):
    path = synthetic_bases["conditional"]
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert cfg["model_type"] == "qwen3_5"
    assert cfg["vision_config"]["out_hidden_size"] == cfg["text_config"]["hidden_size"] == 256
    assert cfg["tie_word_embeddings"] is False and cfg["text_config"]["tie_word_embeddings"] is False
    names = set(_index(path)["weight_map"])
    assert "lm_head.weight" in names and "model.language_model.embed_tokens.weight" in names
    assert any(n.startswith("model.visual.") for n in names)
    assert {n.split(".")[0] for n in names} == {"model", "lm_head", "mtp"}
    for tid in ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"):
        assert cfg[tid] < cfg["text_config"]["vocab_size"]


def test_index_matches_shards(synthetic_bases):
    """Every tensor the index names is in the shard it names, and the total size is right."""
    from safetensors import safe_open

    for path in synthetic_bases.values():
        index = _index(path)
        total = 0
        for fname in set(index["weight_map"].values()):
            with safe_open(str(path / fname), framework="pt") as f:
                keys = set(f.keys())
                assert keys == {n for n, v in index["weight_map"].items() if v == fname}
                total += sum(f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in keys)
        assert total == index["metadata"]["total_size"]


def test_both_layouts_load_with_stock_classes(synthetic_bases):
    """AutoModelForCausalLM loads either layout (the conditional one as its language model), the
    ConditionalGeneration class loads the official layout, and both give the same logits; the
    weights are not flat (logits spread)."""
    from transformers import AutoModelForCausalLM, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration

    ids = torch.tensor([[5, 17, 99, 300, 2, 41, 8]])
    for layout, path in synthetic_bases.items():
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        assert isinstance(m, Qwen3_5ForCausalLM)
        with torch.no_grad():
            logits = m(ids).logits
        assert logits.shape == (1, 7, 4096)
        assert float(logits.std()) > 1.0
        if layout == "conditional":
            mc = Qwen3_5ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
            with torch.no_grad():
                assert torch.equal(mc(input_ids=ids).logits, logits)
            assert not torch.equal(mc.lm_head.weight, mc.model.language_model.embed_tokens.weight)
        else:
            assert m.lm_head.weight.data_ptr() == m.model.embed_tokens.weight.data_ptr()


def test_loaded_weights_are_the_written_ones(synthetic_bases):
    """The loader maps every written text tensor to a parameter (nothing silently re-initialised)."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    path = synthetic_bases["causal"]
    m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    sd = m.state_dict()
    index = _index(path)
    for name, fname in index["weight_map"].items():
        if name.startswith("mtp."):
            assert name not in sd
            continue
        with safe_open(str(path / fname), framework="pt") as f:
            assert torch.equal(f.get_tensor(name).float(), sd[name]), name


def test_seed_changes_weights_and_is_reproducible(tmp_path):
    from safetensors.torch import load_file

    a = make_synthetic_base(tmp_path / "a", layers=1, hidden=64, vocab=1024, shards=1, mtp=False)
    b = make_synthetic_base(tmp_path / "b", layers=1, hidden=64, vocab=1024, shards=1, mtp=False)
    c = make_synthetic_base(tmp_path / "c", layers=1, hidden=64, vocab=1024, shards=1, mtp=False, seed=3)
    ta, tb, tc = (load_file(str(p / "model-00001-of-00001.safetensors")) for p in (a, b, c))
    assert ta.keys() == tb.keys() == tc.keys()
    assert all(torch.equal(ta[k], tb[k]) for k in ta)
    assert not torch.equal(ta["model.embed_tokens.weight"], tc["model.embed_tokens.weight"])
    cfg = json.loads((a / "config.json").read_text())
    assert cfg["layer_types"] == ["full_attention"]


def test_tokenizer_round_trips(synthetic_bases):
    from transformers import AutoTokenizer

    text = 'extern "C" __global__ void k(int *out) { out[0] = 42; }\nThe answer is 5050. Ünïcödé ✓ 漢字'
    for path in synthetic_bases.values():
        tok = AutoTokenizer.from_pretrained(path)
        assert len(tok) <= 4096
        ids = tok(text).input_ids
        assert max(ids) < len(tok)
        assert tok.decode(ids) == text
        for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>",
                        "<think>", "</think>", "<tool_response>", "</tool_response>"):
            sid = tok.convert_tokens_to_ids(special)
            assert tok(special).input_ids == [sid]
        assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_chat_template_renders_a_tool_call(synthetic_bases):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(synthetic_bases["causal"])
    tools = [{"type": "function", "function": {
        "name": "run_cuda", "description": "Run a CUDA kernel exactly.",
        "parameters": {"type": "object", "properties": {"source": {"type": "string"},
                                                         "launch": {"type": "object"}},
                       "required": ["source", "launch"]}}}]
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is [1,2,3].[4,5,6]?"},
        {"role": "assistant", "content": "I will run it.", "tool_calls": [{"type": "function", "function": {
            "name": "run_cuda", "arguments": {"source": "__global__ void k() {}", "launch": {"grid": 1}}}}]},
        {"role": "tool", "content": '{"out": [32]}'},
    ]
    text = tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
                                   enable_thinking=False)
    assert text.startswith("<|im_start|>system\n# Tools\n")
    assert '"name": "run_cuda"' in text and "<tools>\n" in text and "\n</tools>" in text
    assert ("You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nWhat is [1,2,3].[4,5,6]?<|im_end|>\n") in text
    assert ("<|im_start|>assistant\n<think>\n\n</think>\n\nI will run it.\n\n"
            "<tool_call>\n<function=run_cuda>\n"
            "<parameter=source>\n__global__ void k() {}\n</parameter>\n"
            '<parameter=launch>\n{"grid": 1}\n</parameter>\n</function>\n</tool_call><|im_end|>\n') in text
    assert "<|im_start|>user\n<tool_response>\n{\"out\": [32]}\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # thinking on: the prompt opens a think block; no tools: a plain system turn
    plain = tok.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
    assert plain == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                     "<|im_start|>user\nWhat is [1,2,3].[4,5,6]?<|im_end|>\n<|im_start|>assistant\n<think>\n")
    # the rendered call is what the host's parser reads back
    from qwengpu.host.toolcall import parse_reply

    reply = text.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    calls = parse_reply(reply).calls
    assert [c.name for c in calls] == ["run_cuda"]
    assert calls[0].arguments["source"] == "__global__ void k() {}"


def test_generation_config(synthetic_bases):
    from transformers import AutoTokenizer, GenerationConfig

    path = synthetic_bases["conditional"]
    gc = GenerationConfig.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    ids = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert gc.eos_token_id == ids


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(QwenGPUError, match="layout"):
        make_synthetic_base(tmp_path / "x", layout="vision")
    with pytest.raises(QwenGPUError, match="vocab"):
        make_synthetic_base(tmp_path / "x", vocab=100)
    with pytest.raises(QwenGPUError, match="multiple of 16"):
        make_synthetic_base(tmp_path / "x", hidden=100)
    (tmp_path / "exists").mkdir()
    with pytest.raises(QwenGPUError, match="exists"):
        make_synthetic_base(tmp_path / "exists")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists"]  # nothing half-written


def test_2b_shape_config_without_writing_weights():
    """The 2B shape's config fields come from the shipped 2B text config (weights are ~4 GB: the
    device checks write them)."""
    from qwengpu.model.synthetic import _tensor_specs, _text_config_dict

    text = _text_config_dict("2b", None, None, None, True)
    assert (text["hidden_size"], text["num_hidden_layers"], text["vocab_size"]) == (2048, 24, 248320)
    assert text["layer_types"].count("full_attention") == 6
    from transformers import Qwen3_5TextConfig

    cfg = Qwen3_5TextConfig(**text)
    specs = dict(_tensor_specs(cfg, "causal", True, False))
    n = sum(int(torch.tensor(s).prod()) for s in specs.values())
    assert 1.8e9 < n < 1.9e9  # Qwen3.5-2B's text parameters, tied
