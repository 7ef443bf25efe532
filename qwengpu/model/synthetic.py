"""Random Qwen3.5 checkpoints in the real on-disk layouts, for tests and benchmarks.

Why: no model weights can be downloaded here, yet the mount, ``qwengpu kl`` and the device checks
must meet the same files a user's Qwen3.5 directory holds. ``make_synthetic_base`` writes one:

* ``layout="causal"`` -- ``Qwen3_5ForCausalLM`` (``model_type`` ``qwen3_5_text``, tensors ``model.*``,
  ``lm_head.weight`` only when untied);
* ``layout="conditional"`` -- the official ``Qwen3_5ForConditionalGeneration`` layout (``model_type``
  ``qwen3_5``, ``text_config`` + a tiny ``vision_config`` whose ``out_hidden_size`` is the text hidden,
  tensors ``model.language_model.*``, ``model.visual.*``, ``lm_head.weight`` when untied);
* ``mtp.*`` tensors (one multi-token-prediction layer, as the official checkpoints and vLLM's
  ``qwen3_5_mtp.py`` name them); transformers drops them on load (``_keys_to_ignore_on_load_unexpected``);
* sharded safetensors + ``model.safetensors.index.json``, written shard by shard (a 2B-shaped base
  never sits in memory whole), into a temporary folder that is renamed at the end;
* a byte-level BPE tokenizer trained here with ``tokenizers`` (Qwen's pre-tokenizer regex, Qwen's
  special tokens appended after the merges, as in the official vocabulary), a Qwen3.5-style chat
  template with tool calling, and ``generation_config.json``.

Shapes: ``shape="test"`` is the machine's test layer shape (``qwengpu.model.configs.test_config``)
with a small hidden, layer count and vocabulary; ``shape="2b"`` is the published Qwen3.5-2B text
shape (``qwengpu/compiler/configs/qwen3_5_2b_text.json``). Weights are random with a realistic
scale (std 0.02, zero-centred norm weights near 0, the final norm sized so logits have a spread of
a few units rather than being flat).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from qwengpu.errors import QwenGPUError

LAYOUTS = ("causal", "conditional")
SHAPES = ("test", "2b")
DTYPES = ("bfloat16", "float32")

# Qwen's special tokens in the order the official Qwen3.5 vocabulary appends them after its BPE
# merges; the second group are added tokens that decode as text (``special: false`` upstream).
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
TEXT_ADDED_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]

# Qwen2/3/3.5's pre-tokenizer split (transformers' ``tokenization_qwen3_5.PRETOKENIZE_REGEX``).
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# A small equivalent of Qwen3.5's chat template (the official ``chat_template.jinja`` of the
# Qwen/Qwen3.5 checkpoints; seen quoted as the Qwen3.5 fallback template in alibaba/rtp-llm's
# tokenizer factory, rtp_llm/frontend/tokenizer_factory/tokenizers/tokenization_qwen.py). What it
# keeps of the convention: tools listed as JSON lines inside <tools></tools> in the system turn
# (before the user's system text); calls written as XML
# ``<tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>``
# (Qwen3-Coder style, not Hermes JSON); consecutive tool results grouped into one user turn, each
# in <tool_response></tool_response>; assistant turns after the last user query keep their
# reasoning in <think>...</think>; the generation prompt opens ``<think>\n`` or, with
# ``enable_thinking=False``, an empty think block. Images and videos are not rendered.
CHAT_TEMPLATE = r"""{%- if not messages %}{{- raise_exception('No messages provided.') }}{%- endif %}
{%- if tools %}
{{- '<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>' }}
{%- for tool in tools %}{{- '\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n' }}
{{- '<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n' }}
{{- '</parameter>\n</function>\n</tool_call>' }}
{%- if messages[0].role == 'system' and messages[0].content | trim %}
{{- '\n\n' + messages[0].content | trim }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content | trim + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(last_query=-1) %}
{%- for message in messages %}
{%- if message.role == 'user' and not (message.content is string
      and message.content.startswith('<tool_response>')) %}
{%- set ns.last_query = loop.index0 %}
{%- endif %}
{%- endfor %}
{%- for message in messages %}
{%- set content = message.content if message.content is string else '' %}
{%- if message.role == 'system' %}
{%- if not loop.first %}{{- raise_exception('System message must be at the beginning.') }}{%- endif %}
{%- elif message.role == 'user' %}
{{- '<|im_start|>user\n' + content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{%- set reasoning = message.reasoning_content if message.reasoning_content is string else '' %}
{%- if '</think>' in content %}
{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] %}
{%- set content = content.split('</think>')[-1].lstrip('\n') %}
{%- endif %}
{%- if loop.index0 > ns.last_query %}
{{- '<|im_start|>assistant\n<think>\n' + reasoning | trim + '\n</think>\n\n' + content | trim }}
{%- else %}
{{- '<|im_start|>assistant\n' + content | trim }}
{%- endif %}
{%- if message.tool_calls %}
{%- for tc in message.tool_calls %}
{%- set tc = tc.function if tc.function is defined else tc %}
{%- if not loop.first or content | trim %}{{- '\n\n' if loop.first else '\n' }}{%- endif %}
{{- '<tool_call>\n<function=' + tc.name + '>\n' }}
{%- for name, value in (tc.arguments or {}) | items %}
{{- '<parameter=' + name + '>\n' }}
{{- value if value is string else value | tojson }}
{{- '\n</parameter>\n' }}
{%- endfor %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + content + '\n</tool_response>' }}
{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- else %}
{{- raise_exception('Unexpected message role.') }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}
{%- else %}{{- '<think>\n' }}{%- endif %}
{%- endif %}"""

# Text the tokenizer is trained on: English prose, CUDA, JSON and digits, so that the merges cover
# what the tests feed (kernels, launch specs, tool calls).
_TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. A language model reads tokens and writes tokens.
Every decoder layer adds its mixer and its MLP to the residual stream; the final norm scales it,
and the head turns it into one score per token of the vocabulary. The answer is 42.
What is the sum of the integers from 1 to 100? It is 5050. Compute the dot product of [1, 2, 3]
and [4, 5, 6]: the result is 32. Please call the tool run_cuda with the kernel and its launch.
You are a helpful assistant. The user asked a question; think first, then answer briefly.
extern "C" __global__ void dot(const float *a, const float *b, int n, float *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, a[i] * b[i]);
}
__shared__ float tile[64]; __syncthreads(); for (int k = 0; k < 32; ++k) { acc += x[k]; }
{"kernel": "dot", "grid": 1, "block": [4, 1, 1], "args": [{"name": "a", "type": "f32*",
"data": [1, 2, 3]}, {"name": "n", "type": "i32", "value": 3}], "outputs": ["out"]}
0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 100 1000 3.14159 2.71828 -1 0x3f800000 1e-6
Numbers in docs are measured; floats compare by their bits. The model writes every step itself.
In the beginning the weights were random, and the logits were not flat. Good morning, world!
"""


def _seed_for(seed: int, name: str) -> int:
    """A per-tensor seed: the same tensor gets the same values whatever the shard order, and both
    layouts get the same text weights for one seed (``model.language_model.X`` seeds as ``model.X``)."""
    name = name.replace("model.language_model.", "model.", 1)
    return (zlib.crc32(name.encode()) ^ (seed * 0x9E3779B1)) & 0x7FFFFFFF


def _text_config_dict(shape: str, hidden: int | None, layers: int | None, vocab: int | None,
                      tied: bool) -> dict:
    """The text config's fields: the machine's test layer shape or the published 2B shape."""
    if shape == "2b":
        src = Path(__file__).resolve().parent.parent / "compiler" / "configs" / "qwen3_5_2b_text.json"
        base = {k: v for k, v in json.loads(src.read_text()).items() if not k.startswith("_")}
        base.pop("full_attention_interval", None)
        base.pop("model_type", None)
        base.pop("partial_rotary_factor", None)
    else:
        from qwengpu.model.configs import test_config

        tc = test_config()
        base = {
            k: getattr(tc, k)
            for k in (
                "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                "linear_value_head_dim", "linear_conv_kernel_dim", "rms_norm_eps",
            )
        }
        base.update(hidden_size=256, num_hidden_layers=2, vocab_size=4096)
    if hidden is not None:
        base["hidden_size"] = hidden
    if layers is not None:
        base["num_hidden_layers"] = layers
    if vocab is not None:
        base["vocab_size"] = vocab
    n = base["num_hidden_layers"]
    # Qwen3.5's pattern (three DeltaNet layers, then full attention); a short stack still gets one
    # full-attention layer, last, so both mixers are always present.
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)]
    if "full_attention" not in types:
        types[-1] = "full_attention"
    base["layer_types"] = types
    base["tie_word_embeddings"] = tied
    half = int(base["head_dim"] * 0.25) // 2
    a = round(half * 11 / 32)
    base["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 10_000_000,
        "partial_rotary_factor": 0.25,
        "mrope_interleaved": True,
        "mrope_section": [a, a, half - 2 * a],
    }
    base["max_position_embeddings"] = 262_144
    base["attn_output_gate"] = True
    base["mtp_num_hidden_layers"] = 1
    base["mtp_use_dedicated_embeddings"] = False
    return base


def _check_args(layout: str, shape: str, dtype: str, hidden: int | None, layers: int | None,
                vocab: int | None, shards: int | None) -> None:
    """Refuse bad arguments with a message before anything is written."""
    if layout not in LAYOUTS:
        raise QwenGPUError(f"unknown layout {layout!r} (expected one of {', '.join(LAYOUTS)})")
    if shape not in SHAPES:
        raise QwenGPUError(f"unknown shape {shape!r} (expected one of {', '.join(SHAPES)})")
    if dtype not in DTYPES:
        raise QwenGPUError(f"unknown dtype {dtype!r} (expected one of {', '.join(DTYPES)})")
    if hidden is not None and (hidden < 16 or hidden % 16):
        raise QwenGPUError(f"hidden must be a positive multiple of 16 (got {hidden})")
    if layers is not None and layers < 1:
        raise QwenGPUError(f"layers must be at least 1 (got {layers})")
    n_special = len(SPECIAL_TOKENS) + len(TEXT_ADDED_TOKENS)
    if vocab is not None and vocab < 256 + n_special + 16:
        raise QwenGPUError(f"vocab must be at least {256 + n_special + 16} (256 byte tokens, "
                           f"{n_special} special tokens and a few merges; got {vocab})")
    if shards is not None and shards < 1:
        raise QwenGPUError(f"shards must be at least 1 (got {shards})")


def _configs(layout: str, text: dict, dtype: str, tok_ids: dict[str, int]):
    """The transformers config object of the checkpoint (text config, or the multimodal one)."""
    from transformers import Qwen3_5Config, Qwen3_5TextConfig

    eos = tok_ids["<|endoftext|>"]
    text = dict(text, eos_token_id=eos, pad_token_id=None, bos_token_id=None)
    if layout == "causal":
        cfg = Qwen3_5TextConfig(**text)
        cfg.architectures = ["Qwen3_5ForCausalLM"]
    else:
        h = text["hidden_size"]
        vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, in_channels=3,
                      patch_size=16, spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=h,
                      num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
        cfg = Qwen3_5Config(
            text_config=text,
            vision_config=vision,
            image_token_id=tok_ids["<|image_pad|>"],
            video_token_id=tok_ids["<|video_pad|>"],
            vision_start_token_id=tok_ids["<|vision_start|>"],
            vision_end_token_id=tok_ids["<|vision_end|>"],
            tie_word_embeddings=text["tie_word_embeddings"],
        )
        cfg.architectures = ["Qwen3_5ForConditionalGeneration"]
        cfg.text_config.dtype = dtype
    cfg.dtype = dtype
    return cfg


def _tensor_specs(cfg, layout: str, tied: bool, mtp: bool) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor name and shape of the checkpoint, in the order the model declares them (from a
    model built on the meta device: no memory, and the names the stock loader expects)."""
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer

    cls = Qwen3_5ForCausalLM if layout == "causal" else Qwen3_5ForConditionalGeneration
    with torch.device("meta"):
        model = cls(cfg)
    specs = [(n, tuple(t.shape)) for n, t in model.state_dict().items()]
    if tied:
        specs = [(n, s) for n, s in specs if n != "lm_head.weight"]
    if mtp:
        text = cfg if layout == "causal" else cfg.text_config
        h = text.hidden_size
        full = text.layer_types.index("full_attention")
        with torch.device("meta"):
            layer = Qwen3_5DecoderLayer(text, full)
        specs.append(("mtp.fc.weight", (h, 2 * h)))
        specs += [(f"mtp.layers.0.{n}", tuple(t.shape)) for n, t in layer.state_dict().items()]
        specs += [(f"mtp.{n}.weight", (h,)) for n in ("norm", "pre_fc_norm_embedding", "pre_fc_norm_hidden")]
    return specs


def _random_tensor(name: str, shape: tuple[int, ...], seed: int, dtype, hidden: int):
    """One tensor with a realistic scale for what it is (see the module docstring)."""
    import torch

    g = torch.Generator().manual_seed(_seed_for(seed, name))
    leaf = name.rsplit(".", 1)[-1]
    is_vision = ".visual." in name
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=g).log_().to(dtype)
    if name.endswith("dt_bias"):
        return (1.0 + 0.1 * torch.randn(shape, generator=g)).to(dtype)
    if leaf == "bias":
        return torch.zeros(shape, dtype=dtype)
    if is_vision and len(shape) == 1:  # LayerNorm weights of the vision tower
        return torch.ones(shape, dtype=dtype)
    if name.endswith("linear_attn.norm.weight"):  # RMSNormGated: a plain multiplicative weight
        return (1.0 + 0.05 * torch.randn(shape, generator=g)).to(dtype)
    if name in ("model.norm.weight", "model.language_model.norm.weight"):
        # zero-centred: (1 + w) sized so the tied/untied head gives logits a std of about 3
        scale = 3.0 / (0.02 * math.sqrt(hidden))
        return (scale - 1.0 + 0.05 * torch.randn(shape, generator=g)).to(dtype)
    if len(shape) == 1:  # zero-centred RMSNorm weights (layers, q/k norms, mtp norms): near 0
        return (0.05 * torch.randn(shape, generator=g)).to(dtype)
    if name.endswith("conv1d.weight"):
        return (0.2 * torch.randn(shape, generator=g)).to(dtype)
    out = torch.empty(shape, dtype=dtype)
    rows = max(1, (1 << 24) // max(1, math.prod(shape[1:])))  # ~64 MB of float32 at a time
    for r in range(0, shape[0], rows):
        block = out[r:r + rows]
        block.copy_(0.02 * torch.randn(block.shape, generator=g))
    return out


def _split(specs: list[tuple[str, tuple[int, ...]]], shards: int) -> list[list[tuple[str, tuple[int, ...]]]]:
    """Contiguous groups of tensors of about equal size (never an empty shard)."""
    sizes = [math.prod(s) for _, s in specs]
    total = sum(sizes)
    shards = max(1, min(shards, len(specs)))
    groups: list[list] = [[] for _ in range(shards)]
    acc = 0
    for spec, size in zip(specs, sizes, strict=True):
        k = min(shards - 1, int(acc * shards / total)) if total else 0
        groups[k].append(spec)
        acc += size
    return [g for g in groups if g]


def train_tokenizer(vocab: int):
    """A byte-level BPE tokenizer with Qwen's pre-tokenizer and special tokens, at most ``vocab``
    entries (the base vocabulary and Qwen's specials come first in the budget)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    n_added = len(SPECIAL_TOKENS) + len(TEXT_ADDED_TOKENS)
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(vocab, 4096) - n_added,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        min_frequency=1,
    )
    tk.train_from_iterator(_TRAINING_TEXT.splitlines(keepends=True) * 8, trainer=trainer)
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tk.add_tokens([AddedToken(t, special=False, normalized=False) for t in TEXT_ADDED_TOKENS])
    if tk.get_vocab_size() > vocab:  # the trainer's budget above makes this unreachable; say so if not
        raise QwenGPUError(f"the trained tokenizer has {tk.get_vocab_size()} tokens, over {vocab}")
    return tk


def _save_tokenizer(tk, out: Path) -> dict[str, int]:
    """tokenizer.json + tokenizer_config.json (+ the chat template) loadable by AutoTokenizer;
    returns the ids of the added tokens."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        model_max_length=262_144,
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)
    return {t: tk.token_to_id(t) for t in SPECIAL_TOKENS + TEXT_ADDED_TOKENS}


def _save_generation_config(out: Path, ids: dict[str, int]) -> None:
    """Qwen3.5's sampling defaults (thinking mode) with this vocabulary's stop tokens."""
    from transformers import GenerationConfig

    GenerationConfig(
        do_sample=True,
        temperature=0.6,
        top_p=0.95,
        top_k=20,
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
    ).save_pretrained(out)


def _write_shards(tmp: Path, specs, shards: int, seed: int, dtype: str, hidden: int) -> None:
    """Generate and write one shard at a time, then the index."""
    import torch
    from safetensors.torch import save_file

    tdtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    groups = _split(specs, shards)
    n = len(groups)
    weight_map: dict[str, str] = {}
    total = 0
    for i, group in enumerate(groups, 1):
        fname = f"model-{i:05d}-of-{n:05d}.safetensors"
        tensors = {name: _random_tensor(name, shape, seed, tdtype, hidden) for name, shape in group}
        total += sum(t.numel() * t.element_size() for t in tensors.values())
        save_file(tensors, str(tmp / fname), metadata={"format": "pt"})
        weight_map.update({name: fname for name in tensors})
        del tensors
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (tmp / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def make_synthetic_base(
    out_dir: str | os.PathLike,
    *,
    layout: str = "causal",
    shape: str = "test",
    hidden: int | None = None,
    layers: int | None = None,
    vocab: int | None = None,
    dtype: str = "bfloat16",
    tied: bool = True,
    shards: int | None = None,
    seed: int = 0,
    mtp: bool = True,
    overwrite: bool = False,
) -> Path:
    """Write a random Qwen3.5 checkpoint to ``out_dir`` and return its path.

    ``hidden``/``layers``/``vocab`` default to 256/2/4096 for ``shape="test"`` and to the 2B's
    2048/24/248,320 for ``shape="2b"``; ``shards`` defaults to 2, or one per ~1 GB for the 2B."""
    _check_args(layout, shape, dtype, hidden, layers, vocab, shards)
    out = Path(out_dir)
    if out.exists() and not overwrite:
        raise QwenGPUError(f"{out} exists (pass overwrite=True to replace it)")
    text = _text_config_dict(shape, hidden, layers, vocab, tied)
    tk = train_tokenizer(text["vocab_size"])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        ids = _save_tokenizer(tk, tmp)
        cfg = _configs(layout, text, dtype, ids)
        specs = _tensor_specs(cfg, layout, tied, mtp)
        if shards is None:
            nbytes = sum(math.prod(s) for _, s in specs) * (2 if dtype == "bfloat16" else 4)
            shards = 2 if shape == "test" else max(2, math.ceil(nbytes / 1e9))
        _write_shards(tmp, specs, shards, seed, dtype, text["hidden_size"])
        cfg.save_pretrained(tmp)
        _save_generation_config(tmp, ids)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def iter_checkpoint_tensors(path: str | os.PathLike) -> Iterator[tuple[str, object]]:
    """Every tensor of a sharded checkpoint, one at a time (name, tensor), in index order."""
    from safetensors import safe_open

    path = Path(path)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    by_file: dict[str, list[str]] = {}
    for name, fname in index["weight_map"].items():
        by_file.setdefault(fname, []).append(name)
    for fname, names in by_file.items():
        with safe_open(str(path / fname), framework="pt") as f:
            for name in names:
                yield name, f.get_tensor(name)


def main(argv: list[str] | None = None) -> int:
    """``python -m qwengpu.model.synthetic --out DIR [...]``: for scripts (the device checks)."""
    p = argparse.ArgumentParser(prog="python -m qwengpu.model.synthetic", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--layout", choices=LAYOUTS, default="causal")
    p.add_argument("--shape", choices=SHAPES, default="test")
    p.add_argument("--hidden", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument("--untied", action="store_true")
    p.add_argument("--shards", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-mtp", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    a = p.parse_args(argv)
    try:
        path = make_synthetic_base(a.out, layout=a.layout, shape=a.shape, hidden=a.hidden, layers=a.layers,
                                   vocab=a.vocab, dtype=a.dtype, tied=not a.untied, shards=a.shards,
                                   seed=a.seed, mtp=not a.no_mtp, overwrite=a.overwrite)
    except QwenGPUError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
