"""The residual-stream contract shared by every compiled component.

Stage 5. Why: Qwen3.5 normalizes the *whole* hidden vector before every mixer and MLP
(``x * rsqrt(mean(x^2) + eps) * (1 + w)`` in float32). If that scale is not an exact power of two,
the normalized input is not exactly ``x`` and one wrong ulp poisons every later layer. So:

* every used signal dimension holds exactly +1.0 or -1.0 at every layer boundary (bit b as 2b-1);
* ``one_dim`` holds +1 always (the bias input of every projection);
* unused dimensions hold exactly 0;
* a few filler dimensions hold integer constants chosen (sum of squares) so that
  ``sum(x^2) == 4^m * hidden_size`` exactly; with ``4^m >= 64`` the eps (1e-6) vanishes in float32,
  ``rsqrt`` returns exactly ``2^-m``, and every norm weight is ``2^m - 1`` so ``(1 + w) = 2^m``;
* components only ever *add* deltas to dimensions whose current value they know.

Filler values are kept <= 256 so the embedding is also exact in bfloat16.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isqrt

import numpy as np

NORM_LOG4 = 3  # mean(x^2) = 4^3 = 64: the smallest power of four where eps=1e-6 rounds away
MAX_FILLER = 256  # bf16 represents every integer up to 256 exactly


class ContractError(AssertionError):
    """A hidden state that breaks the residual contract (a value that is not exactly as planned)."""


def sum_of_squares(n: int, max_value: int = MAX_FILLER, max_terms: int = 16) -> list[int]:
    """Few integers in [1, max_value] whose squares sum to ``n`` (depth-first, largest first)."""
    if n < 0:
        raise ValueError("negative target")
    if n == 0:
        return []

    def search(rest: int, terms: int, cap: int) -> list[int] | None:
        if rest == 0:
            return []
        if terms == 0 or rest > terms * cap * cap:
            return None
        top = min(cap, isqrt(rest))
        # try the largest few candidates; with 4+ terms left Lagrange guarantees quick success
        for v in range(top, max(0, top - 64), -1):
            sub = search(rest - v * v, terms - 1, v)
            if sub is not None:
                return [v] + sub
        return None

    need = -(-n // (max_value * max_value))
    for terms in range(max(1, need), max_terms + 1):
        found = search(n, terms, max_value)
        if found is not None:
            return found
    raise ValueError(f"cannot write {n} as a sum of {max_terms} squares <= {max_value}^2")


def filler_count(hidden_size: int) -> int:
    """Dimensions reserved for fillers: enough for 4^m * H with values <= 256, plus slack."""
    return -(-(4 ** NORM_LOG4) * hidden_size // (MAX_FILLER * MAX_FILLER)) + 4


@dataclass(frozen=True)
class ResidualLayout:
    """Where the constants live and which dimensions carry signals."""

    hidden_size: int
    one_dim: int
    filler_dims: tuple[int, ...]
    filler_values: tuple[int, ...]
    signal_dims: tuple[int, ...]
    norm_log4: int = NORM_LOG4

    @property
    def norm_weight(self) -> float:
        """The value of every RMSNorm weight: ``(1 + w) == 2^m``."""
        return float(2 ** self.norm_log4 - 1)

    def base(self) -> np.ndarray:
        """The embedding with every signal at -1 (bit 0)."""
        v = np.zeros(self.hidden_size, dtype=np.float32)
        v[list(self.signal_dims)] = -1.0
        v[self.one_dim] = 1.0
        v[list(self.filler_dims)] = np.asarray(self.filler_values, dtype=np.float32)
        return v

    def check(self, hidden: np.ndarray, where: str = "") -> None:
        """Raise ContractError unless ``hidden`` (..., H) is exactly a contract state."""
        h = np.asarray(hidden, dtype=np.float64).reshape(-1, self.hidden_size)
        expect_const = self.base()
        sig = list(self.signal_dims)
        const_dims = [self.one_dim, *self.filler_dims]
        bad_sig = ~np.isin(h[:, sig], (-1.0, 1.0))
        if bad_sig.any():
            t, j = map(int, np.argwhere(bad_sig)[0])
            raise ContractError(f"{where}token {t}: signal dim {sig[j]} holds {h[t, sig[j]]!r}, not +-1")
        diff = h[:, const_dims] != expect_const[const_dims]
        if diff.any():
            t, j = map(int, np.argwhere(diff)[0])
            d = const_dims[j]
            raise ContractError(f"{where}token {t}: constant dim {d} holds {h[t, d]!r}, "
                                f"not {expect_const[d]}")
        unused = np.ones(self.hidden_size, dtype=bool)
        unused[sig + const_dims] = False
        if unused.any() and (h[:, unused] != 0).any():
            t, j = map(int, np.argwhere(h[:, unused] != 0)[0])
            d = int(np.flatnonzero(unused)[j])
            raise ContractError(f"{where}token {t}: unused dim {d} holds {h[t, d]!r}, not 0")


def plan_residual(hidden_size: int, signal_dims: list[int], one_dim: int,
                  filler_dims: list[int]) -> ResidualLayout:
    """Choose filler values so that ``sum(x^2) == 4^m * hidden_size`` for every contract state."""
    target = 4 ** NORM_LOG4 * hidden_size - len(signal_dims) - 1
    values = sum_of_squares(target, MAX_FILLER, len(filler_dims))
    if len(values) > len(filler_dims):  # pragma: no cover - filler_count reserves enough
        raise ValueError("not enough filler dimensions")
    dims = tuple(filler_dims[: len(values)])
    return ResidualLayout(hidden_size, one_dim, dims, tuple(values), tuple(sorted(signal_dims)))
