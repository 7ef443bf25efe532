"""The stock Qwen3.5 forward's bits on a fixed small model, fingerprinted.

pyproject.toml allows a range of ``transformers`` releases; every exactness claim in this
repository was measured with the versions in constraints.txt. If another release (or torch)
changes the bits of the stock Qwen3.5 forward (prefill on the chunked path and a one-token decode
on the recurrent path, both mixers), this test fails and names the versions: re-run the exactness
suites on it before adding it to the tested set."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# sha256 of the float32 logits' bytes (prefill of 24 tokens, then one decode token), measured with
# transformers 5.24.0 and torch 2.13.0+cpu. The bits also depend on the CPU's kernels (torch's
# vector ISA and the CPU model: the same wheel gave different bits on the two project machines),
# so the tested set is one fingerprint per measured platform (rounding-sensitive random weights;
# the machine's circuits compute exactly and do not depend on it).
EXPECTED_SET = {
    "d03256acdf7bc420cf46caf484134c24ab86de31f76ceb06423989c0a4109465",  # 2026-12-04's machine
    "fd980c56fd5bb7643aa8da100231f1dbcd856dbeb8ec15bafefba2f5348280f1",  # 2026-12-05's, AVX512
    "6ede2d95cb87a727cb3bb5385513e49e873d091889b384e84cd02602640fdbce",  # the same, ATEN AVX2
    "d0d45f2ebd21182f0d2717a155cfa4fd892d3bd5fb031f28dc96adc6dca47df0",  # the same, ATEN DEFAULT
}


def _fingerprint() -> str:
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    torch.manual_seed(1234)
    cfg = Qwen3_5TextConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=16, linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        tie_word_embeddings=True,
    )
    model = Qwen3_5ForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():  # larger than the init's 0.02 so every op's rounding shows
            p.copy_(torch.randn_like(p) * 0.5)
        ids = torch.randint(0, 512, (1, 24), generator=torch.Generator().manual_seed(7))
        out = model(input_ids=ids, use_cache=True)
        step = model(input_ids=ids[:, -1:], cache=out.past_key_values, use_cache=True)
    h = hashlib.sha256()
    h.update(out.logits.to(torch.float32).contiguous().numpy().tobytes())
    h.update(step.logits.to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def test_stock_qwen3_5_forward_bits_are_the_tested_ones():
    got = _fingerprint()
    cap = torch.backends.cpu.get_cpu_capability()
    assert got in EXPECTED_SET, (
        f"the stock Qwen3.5 forward's bits changed (transformers {transformers.__version__}, torch "
        f"{torch.__version__}, CPU capability {cap}; tested: transformers 5.24.0, torch 2.13.0): re-run the "
        f"exactness suites before trusting launches on this release or CPU (fingerprint {got})")
