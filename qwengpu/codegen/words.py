"""NumPy models of the machine's word arithmetic on the multiplier: 32-bit words held in uint64,
as the sequences of ``softfloat._B`` (``mul``, ``halves``, ``hi16``, ``hiap``) compute them.

Why a module: the exhaustive checks of ex2 (``ex2_model``) and of the square root (``sqrt_model``)
run NumPy models of their sequences, and both need the same products of 16-bit halves."""

from __future__ import annotations

import numpy as np

_U64 = np.uint64
M32 = 0xFFFFFFFF


def mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """The low word of a * b (32-bit words held in uint64): the machine's ``mul`` row."""
    return (a * _U64(b)) & _U64(M32)


def halves(a: np.ndarray | int) -> tuple:
    """(a >> 16, a & 0xFFFF): ``softfloat._B.halves``."""
    return (a >> 16, a & 0xFFFF) if isinstance(a, int) else (a >> _U64(16), a & _U64(0xFFFF))


def hi16(x: np.ndarray, y: tuple) -> np.ndarray:
    """The high word of x * y for x <= 2^16, y as halves (``_B.hi16``): exact."""
    return ((mul(x, y[0]) + (mul(x, y[1]) >> _U64(16))) & _U64(M32)) >> _U64(16)


def hiap(x: tuple, y: tuple) -> np.ndarray:
    """The high word of two full words as halves, from three half products (``_B.hiap``): 0 to 3
    below."""
    w16 = _U64(16)
    return (mul(x[0], y[0]) + (mul(x[0], y[1]) >> w16) + (mul(x[1], y[0]) >> w16)) & _U64(M32)


__all__ = ["mul", "halves", "hi16", "hiap"]
