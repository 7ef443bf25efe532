"""Float facts the compiler relies on, measured on this stack (torch 2.13 CPU, float32).

Every constant below was measured with the same torch ops the stock Qwen3.5 modules use, over
tensors of several lengths (the vectorised body and the scalar tail of a CPU kernel must agree);
``measure_activation_thresholds`` re-measures them and the tests compare.

* ``SiLU(x) == x`` exactly for ``x >= 16.75`` (``1 + exp(-x)`` rounds to 1), and
  ``SiLU(x) == -0.0`` exactly for ``x <= -88.75`` (``exp(-x)`` overflows to inf, ``x / inf``).
  In between SiLU is never exact: ``SiLU(-32) = -4e-13``.  For tiny ``0 < x <= 2**-27``,
  ``exp(-x)`` rounds to 1 and ``SiLU(x) == x / 2`` exactly.
* ``sigmoid(x) == 1.0`` exactly for ``x >= 16.75``; ``sigmoid(x) == 0.0`` for ``x <= -88.75``.
* ``softplus(x) == 0.0`` exactly for ``x <= -104`` (``log1p(exp(x))``, exp underflows).
* ``rsqrt`` of an exact power of four is an exact power of two; ``rsqrt(2.0)`` is ``fl(2**-0.5)``.
  ``torch.rsqrt(fl32(1e-6))`` is ``999.99994`` here (1/sqrt with two roundings), while a
  correctly rounded rsqrt gives ``1000.0``: never build on the value of an inexact rsqrt without
  checking both.
* The chunked and recurrent gated-delta kernels scale queries differently: ``q * d**-0.5`` (the
  Python double is rounded to float32 first) versus ``q / d**0.5``.  For ``d = 2 * 4**k`` both give
  ``fl32(d**-0.5)`` for a unit query, but ``fl(2**-0.5) * fl32(128**-0.5) != 2**-4``: a two-hot
  query does NOT reach a power of two on the chunked path.  ``query_scales`` measures both.
* The RMSNorm epsilon (``1e-6``) is absorbed by a mean square ``>= 32`` (half an ulp of 32 is
  1.9e-6); at 16 it is not.  ``rsqrt(64.0) == 0.125`` exactly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SILU_IDENTITY_MIN = 16.75
SILU_ZERO_MAX = -88.75
SILU_HALF_MAX = 2.0**-27
SIGMOID_ONE_MIN = 16.75
SIGMOID_ZERO_MAX = -88.75
SOFTPLUS_ZERO_MAX = -104.0

def round_to(x: float, dtype: torch.dtype = torch.float32) -> float:
    """``x`` rounded to ``dtype`` (round to nearest even), back as a Python float."""
    return float(torch.tensor(x, dtype=torch.float64).to(dtype).to(torch.float64))


def representable(x: float, dtype: torch.dtype = torch.float32) -> bool:
    return round_to(x, dtype) == x


def next_float(x: float, steps: int = 1, dtype: torch.dtype = torch.float32) -> float:
    """The float ``steps`` places above ``x`` (below when negative) in ``dtype``."""
    t = torch.tensor(round_to(x, dtype), dtype=dtype)
    toward = torch.tensor(math.inf if steps > 0 else -math.inf, dtype=dtype)
    for _ in range(abs(steps)):
        t = torch.nextafter(t, toward)
    return float(t.to(torch.float64))


def is_power_of_two(x: float) -> bool:
    return x > 0 and math.frexp(x)[0] == 0.5


def half_ulp(x: float, dtype: torch.dtype = torch.float32) -> float:
    """Half the gap from ``|x|`` to the next float above it."""
    x = abs(round_to(x, dtype))
    return (next_float(x, 1, dtype) - x) / 2


def float_bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit patterns of a float tensor (for bit-exact comparisons: ``torch.equal`` on these)."""
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.float64: torch.int64}[t.dtype]
    return t.contiguous().view(view)


def query_scales(head_k_dim: int) -> tuple[float, float]:
    """The factor a unit query entry gets on (chunked, recurrent) paths, measured with their own ops."""
    one = torch.ones(17, dtype=torch.float32)
    chunked = one * (head_k_dim**-0.5)
    recurrent = one / (head_k_dim**0.5)
    return float(chunked[-1]), float(recurrent[-1])


def snap_factor(t: float, dtype: torch.dtype = torch.float32, search: int = 64) -> tuple[float, float] | None:
    """A float ``x`` in [1, 2) * 2**k with ``fl(t * x)`` an exact power of two, or None.

    Returns ``(x, fl(t * x))``.  Used to turn a long-mantissa factor (the query scale
    ``fl32(128**-0.5)``) back into a power of two with one correctly rounded multiplication."""
    tt = torch.tensor(t, dtype=dtype)
    x0 = 1.0 / t
    for k in sorted(range(-search, search + 1), key=abs):
        x = next_float(x0, k, dtype) if k else round_to(x0, dtype)
        y = float((tt * torch.tensor(x, dtype=dtype)).to(torch.float64))
        if is_power_of_two(y):
            return x, y
    return None


def measure_activation_thresholds(lengths: tuple[int, ...] = (1, 7, 8, 9, 16, 33)) -> dict[str, float]:
    """Re-measure the exactness thresholds above (step 0.25) on every kernel path length."""
    xs = torch.arange(-120.0, 30.0, 0.25, dtype=torch.float32)

    def per_value(fn):
        rows = []
        for n in lengths:
            rows.append(torch.stack([fn(torch.full((n,), float(v)))[-1] for v in xs]))
        return rows

    silu_rows, sig_rows, sp_rows = per_value(F.silu), per_value(torch.sigmoid), per_value(F.softplus)
    pos, neg = xs > 0, xs < 0
    out = {
        "silu_identity_min": min(float(xs[pos & (r == xs)].min()) for r in silu_rows),
        "silu_identity_last_bad": max(float(xs[pos & (r != xs)].max()) for r in silu_rows),
        "silu_zero_max": min(float(xs[neg & (r == 0)].max()) for r in silu_rows),
        "silu_zero_first_bad": max(float(xs[neg & (r != 0)].min()) for r in silu_rows),
        "sigmoid_one_min": max(float(xs[r == 1].min()) for r in sig_rows),
        "sigmoid_zero_max": min(float(xs[r == 0].max()) for r in sig_rows),
        "softplus_zero_max": min(float(xs[r == 0].max()) for r in sp_rows),
    }
    tiny = torch.full((33,), SILU_HALF_MAX)
    out["silu_tiny_halves"] = float(bool(torch.equal(F.silu(tiny), tiny / 2)))
    return out
