"""A tiny synthetic chat model for advanced-mode tests: a random ``Qwen3_5ForCausalLM`` with a
byte-level BPE tokenizer trained here with ``tokenizers`` and a Qwen-style chat template that
renders tools (Qwen3.5's XML tool-call convention, tool results in ``<tool_response>``).

Random weights write no meaningful text; the tests teacher-force the replies through its forward.
Written with ``save_pretrained`` so it loads with stock ``AutoModelForCausalLM`` /
``AutoTokenizer`` like a real checkpoint.
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]

# Qwen3.5-style: tools listed in the system turn, calls as <function=...><parameter=...> XML,
# tool results wrapped in <tool_response> inside a user turn, an empty think block before replies.
CHAT_TEMPLATE = r"""{%- if tools %}<|im_start|>system
{%- if messages[0].role == 'system' %}
{{ messages[0].content }}
{%- endif %}

# Tools

You have access to the following functions:

<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
{{ '' }}
</tools>

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
</function>
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}<|im_start|>user
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{{ message.content }}
{%- if message.tool_calls %}
{%- for tc in message.tool_calls %}
{%- set tc = tc.function if tc.function is defined else tc %}
<tool_call>
<function={{ tc.name }}>
{%- for k, v in tc.arguments | items %}
<parameter={{ k }}>
{{ v if v is string else v | tojson }}
</parameter>
{%- endfor %}
</function>
</tool_call>
{%- endfor %}
{%- endif %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}"""

CORPUS = [
    'extern "C" __global__ void k(const int *a, int n, int *out) { int i = threadIdx.x; '
    "if (i < n) atomicAdd(out, a[i]); }",
    '{"kernel": "k", "grid": 1, "block": 4, "args": [{"name": "a", "type": "i32*", "data": [1, 2, 3]}]}',
    "The answer is 55. Answer: 3628800. What is the sum of the integers from 1 to 10?",
    "You are a helpful assistant with an exact GPU inside your own layers. Call the tool run_cuda.",
    "error compile kernel.cu(1): identifier is undefined. The kernel ran exactly. Outputs: out = [42]",
    "0123456789 +-*/%=<>!&|^~()[]{};:,.'\"\n\t ",
]


def make_chat_model(out: Path, seed: int = 0) -> Path:
    """Write a tiny random chat checkpoint (model + tokenizer + template) to ``out``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3_5ForCausalLM, Qwen3_5TextConfig

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(CORPUS * 4, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIALS[1:],
    )
    tok.chat_template = CHAT_TEMPLATE
    cfg = Qwen3_5TextConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        layer_types=["linear_attention", "full_attention"],
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
