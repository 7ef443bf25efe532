"""The whole mount through stock ``transformers`` (``AutoModelForCausalLM.from_pretrained``): text is
the base's, and a launch is the standalone machine's trace on the recurrent and the chunked path.

A module of its own so that the stock mount (~5.5 GB in float32) is released when it ends."""

from __future__ import annotations

import json

import pytest
import torch

TEXT = [5, 100, 200, 300, 17, 999, 3, 64, 1000, 512, 7, 8]


# ---------------------------------------------------------------------------------------------
def test_text_unchanged_and_machine_adds_exact_zeros(small_mount, small_base, stock_mount):
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(small_base), dtype=torch.float32).eval()
    ids = torch.tensor([TEXT])
    lm = json.loads((small_mount / "qwengpu_mount.json").read_text())["layers"]["machine"][1]
    with torch.no_grad():
        lb = base(ids).logits[0]
        out = stock_mount(ids, output_hidden_states=True)
    logits, hs = out.logits[0], out.hidden_states
    # prefill (chunked path): the base's logits bit for bit (c = 4: every scaling is exact)
    assert torch.equal(logits[:, :1024].view(torch.int32), lb.view(torch.int32))
    # the machine layers add exactly zero to text: the residual after them is the embedding
    assert torch.equal(hs[lm].view(torch.int32), hs[0].view(torch.int32))
    assert torch.equal(hs[0][0, :, :128], base.model.embed_tokens(ids)[0] * 4)
    # machine tokens score far below text: their softmax weight is exactly 0
    assert float(logits[:, 1024:].max()) < -1e6
    p = torch.softmax(logits.double(), -1)
    assert float(p[:, 1024:].max()) == 0.0
    # decode (recurrent path): within float32 summation-order noise (not claimed bit-exact)
    with torch.no_grad():
        ob, om = base(ids[:, :4], use_cache=True), stock_mount(ids[:, :4], use_cache=True)
        for k in range(4, len(TEXT)):
            ob = base(ids[:, k:k + 1], cache=ob.cache, use_cache=True)
            om = stock_mount(ids[:, k:k + 1], cache=om.cache, use_cache=True)
            a, b = ob.logits[0, -1].double(), om.logits[0, -1].double()
            assert float((a - b[:1024]).abs().max()) < 1e-4
            la, lb = torch.log_softmax(a, -1), torch.log_softmax(b, -1)[:1024]
            kl = torch.sum(la.exp() * (la - lb))
            assert abs(float(kl)) < 1e-9  # float64 rounding can make it -1e-16
            assert float(b[1024:].max()) < -1e6



def test_stock_prefill_and_decode_reproduce_the_trace(stock_mount, standalone_vadd):
    """The whole mount through stock transformers: one teacher-forced prefill of prompt + trace
    (the chunked path) predicts every trace token, and greedy ``generate`` (the recurrent path)
    writes the trace's first tokens (all of them: the slow test below)."""
    V = 1024
    prompt = [t + V for t in standalone_vadd.prompt]
    trace = [t + V for t in standalone_vadd.trace]
    with torch.no_grad():
        logits = stock_mount(torch.tensor([prompt + trace[:-1]])).logits[0]
    assert logits[len(prompt) - 1:].argmax(-1).tolist() == trace
    n = 16
    with torch.no_grad():
        gen = stock_mount.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False,
                                   pad_token_id=None, eos_token_id=None)
    assert gen[0, len(prompt):].tolist() == trace[:n]


@pytest.mark.slow
def test_stock_generate_writes_the_whole_trace(stock_mount, standalone_vadd):
    V = 1024
    prompt = [t + V for t in standalone_vadd.prompt]
    trace = [t + V for t in standalone_vadd.trace]
    with torch.no_grad():
        gen = stock_mount.generate(torch.tensor([prompt]), max_new_tokens=len(trace), do_sample=False,
                                   pad_token_id=None, eos_token_id=None)
    assert gen[0, len(prompt):].tolist() == trace
