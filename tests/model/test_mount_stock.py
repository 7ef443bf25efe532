"""The whole mount through stock ``transformers`` (``AutoModelForCausalLM.from_pretrained``): text is
the base's, a launch is the standalone machine's trace on the recurrent and the chunked path, and the
text runtime (``qwengpu/runtime/mounted_text.py``: the base layers alone, the machine layers skipped
after the checks that make them add exactly 0) equals it, logits bit for bit, on a prefill at every
position and on the one-token decode path with the cache.

A module of its own so that the stock mount (~5.5 GB in float32) is released when it ends."""

from __future__ import annotations

import json
import os
import shutil
import struct

import numpy as np
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
    # prefill (chunked path): the stock export's contract is KL <= 1e-9 against the float32 base and
    # the same top-1 (issue 24). Every c = 4 scaling is exact, but the base layers run at width 2048
    # instead of 128, and on some CPUs (seen on this project's 2026-12-05 machine) the matmul kernel
    # sums in another order there: a few ulps. Bit-identical text is the lean runtime's claim
    # (tests/model/test_lean_mount.py runs the base's own tensors).
    lp, lq = torch.log_softmax(lb.double(), -1), torch.log_softmax(logits[:, :1024].double(), -1)
    assert float((lp.exp() * (lp - lq)).sum(-1).max()) <= 1e-9
    assert torch.equal(logits[:, :1024].argmax(-1), lb.argmax(-1))
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
    n = 6  # the recurrent path; every token of it: the slow test below
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


# ---------------------------------------------------------------------------------------------
# the text runtime against the stock forward of the whole mount
# ---------------------------------------------------------------------------------------------
LONGER = [5, 100, 200, 300, 17, 999, 3, 64, 1000, 512, 77, 640, 2, 2, 301, 18]


def test_prefill_logits_equal_the_whole_mount_bit_for_bit(mount_text, stock_mount):
    assert mount_text.runtime == "mounted-text" and mount_text.fallback_reason is None
    ids = torch.tensor([LONGER])
    with torch.no_grad():
        ours = mount_text(input_ids=ids).logits
        stock = stock_mount(input_ids=ids).logits
    assert ours.shape == stock.shape and mount_text.runtime == "mounted-text"
    assert torch.equal(ours, stock)  # bit for bit, every position and every id of the vocabulary
    # two layers run instead of the mount's 41: the runtime really skips the machine
    assert len(mount_text.base.model.layers) < len(stock_mount.model.layers) // 4


def test_decode_path_with_the_cache_equals_the_whole_mount(mount_text, stock_mount):
    ids = torch.tensor([LONGER])
    with torch.no_grad():
        a = mount_text(input_ids=ids[:, :6], use_cache=True)
        b = stock_mount(input_ids=ids[:, :6], use_cache=True)
        assert torch.equal(a.logits, b.logits)
        for k in range(6, len(LONGER)):
            a = mount_text(input_ids=ids[:, k : k + 1], cache=a.cache, use_cache=True)
            b = stock_mount(input_ids=ids[:, k : k + 1], cache=b.cache, use_cache=True)
            assert torch.equal(a.logits, b.logits), f"decode step {k}"


def test_greedy_generate_writes_the_same_tokens(mount_text, stock_mount):
    ids = torch.tensor([LONGER[:8]])
    kw = {"max_new_tokens": 6, "do_sample": False, "attention_mask": torch.ones_like(ids), "pad_token_id": 0}
    with torch.no_grad():
        ours = mount_text.generate(ids, **kw)
        stock = stock_mount.generate(ids, **kw)
    assert ours.tolist() == stock.tolist() and int(ours.max()) < mount_text.V


def test_a_machine_token_runs_on_the_stock_forward(small_mount, stock_mount, mount_text):
    """The run-time check: an id of the machine's vocabulary makes the machine layers compute, so
    that call goes to the stock forward of the whole mount (here the already loaded one)."""
    from qwengpu.runtime.mounted_text import MountText

    mt = MountText(small_mount, stock=stock_mount, base=mount_text.base)
    ids = torch.tensor([LONGER[:4] + [mt.V + 7] + LONGER[4:8]])
    with torch.no_grad():
        out = mt(input_ids=ids).logits
        want = stock_mount(input_ids=ids).logits
    assert mt.runtime == "mounted-stock" and "machine token" in mt.fallback_reason
    assert torch.equal(out, want)


def _copy_with_machine_weight_on_a_base_dim(src, dst, value: float = 1.0, col: int = 0):
    """A copy of the mount (symlinks; one shard copied) where layer 0's first reading projection
    gets ``value`` in column ``col`` of row 0 (column 0 is a base dim: the machine layers would then
    compute on text)."""
    dst.mkdir(parents=True)
    index = json.loads((src / "model.safetensors.index.json").read_text())
    name = next(n for n in index["weight_map"] if n.startswith("model.layers.0.") and "in_proj_qkv" in n)
    shard = index["weight_map"][name]
    for p in src.iterdir():
        if p.name == shard:
            shutil.copy2(p, dst / p.name)
        else:
            os.symlink(p, dst / p.name)
    with open(dst / shard, "r+b") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        lo, _hi = json.loads(f.read(n))[name]["data_offsets"]
        f.seek(8 + n + lo + 4 * col)
        f.write(np.float32(value).tobytes())
    return dst, name


def test_a_machine_weight_reading_text_dims_is_caught_at_load(small_mount, tmp_path):
    from qwengpu.model.mount import Checkpoint, read_mount_sidecar
    from qwengpu.runtime.mounted_text import TextNotExact, check_machine_layers_silent

    bad, name = _copy_with_machine_weight_on_a_base_dim(small_mount, tmp_path / "bad")
    ck = Checkpoint(bad)
    try:
        with pytest.raises(TextNotExact, match=name.replace(".", r"\.")):
            check_machine_layers_silent(ck, read_mount_sidecar(bad), "model.")
    finally:
        ck.close()
    ok = Checkpoint(small_mount)
    try:
        check_machine_layers_silent(ok, read_mount_sidecar(small_mount), "model.")  # the real mount passes
    finally:
        ok.close()


def test_a_failed_load_check_falls_back_to_the_stock_forward(small_mount, stock_mount, tmp_path):
    """A machine weight reading a base dim: the text runtime is not used, every call goes to the
    stock forward (here the already loaded stock model stands for the damaged mount's)."""
    from qwengpu.runtime.mounted_text import MountText

    bad, name = _copy_with_machine_weight_on_a_base_dim(small_mount, tmp_path / "bad")
    mt = MountText(bad, stock=stock_mount)
    assert mt.base is None and mt.runtime == "mounted-stock" and name in mt.fallback_reason
    ids = torch.tensor([LONGER[:6]])
    with torch.no_grad():
        assert torch.equal(mt(input_ids=ids).logits, stock_mount(input_ids=ids).logits)


def test_a_non_finite_machine_weight_is_caught_at_load(small_mount, tmp_path):
    """inf in a machine dim of a machine weight: on text the stock forward computes 0 * inf = NaN
    there, so the machine layers would not add exact zeros; the text runtime must not skip them."""
    from qwengpu.model.mount import Checkpoint, read_mount_sidecar
    from qwengpu.runtime.mounted_text import TextNotExact, check_machine_layers_silent

    rec = read_mount_sidecar(small_mount)
    col = rec["dims"]["machine_to"][0]  # a machine dim: reading it is allowed, an inf there is not
    bad, name = _copy_with_machine_weight_on_a_base_dim(small_mount, tmp_path / "bad", float("inf"), col)
    ck = Checkpoint(bad)
    try:
        with pytest.raises(TextNotExact, match=name.replace(".", r"\.") + " holds a non-finite value"):
            check_machine_layers_silent(ck, rec, "model.")
    finally:
        ck.close()


def test_inputs_embeds_take_the_stock_path(mount_text, stock_mount):
    from qwengpu.runtime.mounted_text import MountText

    mt = MountText(mount_text.path, stock=stock_mount, base=mount_text.base)
    ids = torch.tensor([LONGER[:6]])
    emb = stock_mount.model.embed_tokens(ids).detach()
    with torch.no_grad():
        out = mt(inputs_embeds=emb).logits
        want = stock_mount(inputs_embeds=emb).logits
    assert mt.runtime == "mounted-stock" and torch.equal(out, want)
    assert mt(input_ids=ids) is not None and mt.runtime == "mounted-text"


def test_sampling_settings_are_the_mounts_generation_config(mount_text, small_base):
    """The mount copies the base's generation_config.json; a sampled reply uses its top_k (20 on
    the synthetic base), not the library default (50)."""
    want = json.loads((small_base / "generation_config.json").read_text())
    assert want["top_k"] == 20
    assert mount_text.generation_config.top_k == 20
    assert mount_text.generation_config.top_p == want.get("top_p", mount_text.generation_config.top_p)
