"""Non-finite weights where the mount relies on exact zeros.

Why: the mount keeps the base and the machine apart by zeros: a base weight reads or writes 0 in
the machine's dims, and a machine token's residual is 0 in the base's dims. ``0 * inf`` and
``0 * nan`` are NaN in the stock forward, so a single non-finite value in a base-side tensor's
machine dims (a damaged mount) breaks text, and one in its base dims (the base's own) breaks every
launch that passes through the base's layers. These helpers find them; ``qwengpu verify`` reports
them by tensor, and a runtime's skip checks can call :func:`nonfinite_in_dims` on its own tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

# projections that read the residual (their input columns are hidden dims) / write it (their rows)
READ_LEAVES = ("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "q_proj", "k_proj", "v_proj",
               "gate_proj", "up_proj")
WRITE_LEAVES = ("out_proj", "o_proj", "down_proj")
NORM_LEAVES = ("input_layernorm", "post_attention_layernorm")


def hidden_axis(name: str, ndim: int) -> int | None:
    """The axis of a Qwen3.5 text tensor that runs over the hidden dims (``None``: none does).

    By name, not by size (a projection's output can be as wide as the hidden): reading projections,
    the embedding and ``lm_head`` along their columns; writing projections, the layer norms and the
    final norm along their rows."""
    parts = name.split(".")
    leaf = parts[-2] if parts[-1] in ("weight", "bias") else parts[-1]
    if name.endswith("embed_tokens.weight") or name == "lm_head.weight":
        return 1 if ndim == 2 else None
    if leaf in READ_LEAVES and parts[-1] == "weight" and ndim == 2:
        return 1
    if leaf in WRITE_LEAVES:
        return 0
    if leaf in NORM_LEAVES or (leaf == "norm" and parts[-1] == "weight" and "layers" not in parts):
        return 0
    return None


def nonfinite_in_dims(t: torch.Tensor, dims: Sequence[int] | slice | torch.Tensor, axis: int,
                      rows: slice | None = None) -> int:
    """How many values of ``t`` are NaN or infinite among the indices ``dims`` of ``axis``
    (optionally only the ``rows`` of axis 0, e.g. the base's rows of the embedding).

    ``dims`` is a slice (``slice(H, None)``: every dim above the base's ``H``), a list or a tensor
    of indices. Zero means the stock forward multiplies only finite numbers by those dims' zeros."""
    if rows is not None:
        t = t[rows]
    if isinstance(dims, slice):
        sel = t.narrow(axis, *_span(dims, t.shape[axis]))
    else:
        idx = dims if isinstance(dims, torch.Tensor) else torch.tensor(list(dims), dtype=torch.long)
        if idx.numel() == 0:
            return 0
        sel = t.index_select(axis, idx.to(device=t.device, dtype=torch.long))
    if not sel.is_floating_point():
        return 0
    return int((~torch.isfinite(sel)).sum())


def _span(s: slice, n: int) -> tuple[int, int]:
    a, b, step = s.indices(n)
    if step != 1:
        raise ValueError("nonfinite_in_dims: a slice of dims must have step 1")
    return a, max(0, b - a)
