"""The chunked-path runtime (``qwengpu.runtime.chunked``) against the stock prefill.

The stock ``Qwen3_5ForCausalLM`` over a whole sequence in one forward (``use_cache=False``: the
chunked DeltaNet rule) is the oracle: every position's argmax, and the residual after every decoder
layer bit for bit. Sequences span several segments (the runtime carries the DeltaNet state and
the conv history from one segment to the next) and end in a partial chunk. Models: the walker
(one-hot keys), its two-hot and grouped-head variants, a conv tap on the previous token, and the
machine in the weights on a real launch; a damaged weight changes the replay.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from qwengpu.runtime.chunked import ChunkedModel, replay

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fast_runtime import (  # noqa: E402
    KERNELS,
    two_hot_walker,
    walker_model,
    walker_ref,
    wide_walker_model,
)


def stock_prefill(model, ids: list[int]) -> tuple[list[int], list[np.ndarray]]:
    """(argmax at every position, residual after every decoder layer) of one stock prefill."""
    caps: list[np.ndarray] = []

    def grab(_m, _i, out):
        caps.append((out[0] if isinstance(out, tuple) else out)[0].numpy().copy())

    hooks = [layer.register_forward_hook(grab) for layer in model.model.layers]
    try:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits
    finally:
        for h in hooks:
            h.remove()
    return logits[0].argmax(-1).tolist(), caps


def assert_same_as_stock(model, ids: list[int], segment: int) -> ChunkedModel:
    want, layers = stock_prefill(model, ids)
    cm = ChunkedModel(model, segment=segment)
    assert cm.argmaxes(ids) == want
    dead = np.setdiff1d(np.arange(layers[0].shape[1]), cm.live)
    for i, (s, c) in enumerate(zip(layers, cm.residuals(ids), strict=True)):
        bad = np.count_nonzero(s[:, cm.live].view(np.int32) != c.view(np.int32))
        assert bad == 0, f"layer {i}: {bad} values differ"
        assert not s[:, dead].any(), f"layer {i}: a dim the runtime drops is not zero in the stock model"
    return cm


def test_walker_equals_stock_prefill_across_segments():
    """300 positions in segments of 64 (4 whole, one of 44): state carried across segments."""
    model = walker_model()
    ids = [201] + walker_ref(201, 299)
    assert_same_as_stock(model, ids, segment=64)
    assert ChunkedModel(model, segment=128).argmaxes(ids)[:-1] == ids[1:]  # the walker's own rule


def test_two_hot_keys_and_grouped_heads_equal_stock_prefill():
    """Keys that are not one-hot (the general l2norm and triangular solve), and 16 value heads on
    8 key heads (the runtime maps value heads to their key heads)."""
    model, addr = two_hot_walker()
    ids = [201, addr, 16 + addr, 7, 16 * addr + 5, addr, 99, 32 + addr, 250, addr] * 13
    assert_same_as_stock(model, ids, segment=64)
    wide = wide_walker_model()
    assert_same_as_stock(wide, [201] + walker_ref(201, 150, times=2), segment=64)


def test_conv_taps_equal_stock_prefill():
    """A conv tap on the previous token: the stock causal conv, its history carried across segments."""
    model = walker_model()
    la = next(layer.linear_attn for layer in model.model.layers
              if layer.block_type == "linear_attention" and layer.linear_attn.out_proj.weight.any())
    with torch.no_grad():
        la.conv1d.weight[:, 0, -2] = 2.0**-40
    cm = assert_same_as_stock(model, [201] + walker_ref(201, 200), segment=64)
    assert any(m is not None and m.taps is not None for m, _ in cm.layers)


def test_segment_must_be_whole_chunks():
    with pytest.raises(ValueError, match="multiple of 64"):
        ChunkedModel(walker_model(), segment=100)


@pytest.fixture(scope="module")
def machine_vadd():
    from qwengpu.runtime.engine import machine_model, run_machine

    _, model = machine_model()
    return model, run_machine(KERNELS / "vadd.cu", model=model)


def test_machine_launch_equals_stock_prefill(machine_vadd):
    """The machine in the weights on vadd (prompt + trace, 348 positions, segments of 128): every
    argmax and every layer's residual equal the stock prefill's, and the replay reproduces the trace."""
    model, run = machine_vadd
    ids = run.prompt + run.trace[:-1]
    cm = assert_same_as_stock(model, ids, segment=128)
    rep = replay(cm, run.prompt, run.trace)
    assert rep["equal"] and rep["first_mismatch"] is None and rep["tokens"] == len(ids)


def test_damaged_weight_breaks_the_replay(machine_vadd, flipped_weight):
    """Negative control: flip one used MLP gate weight of a mid layer; the replay must fail."""
    model, run = machine_vadd
    with flipped_weight(model):
        rep = replay(model, run.prompt, run.trace)
        assert not rep["equal"] and rep["first_mismatch"] is not None
    assert replay(model, run.prompt, run.trace)["equal"]
