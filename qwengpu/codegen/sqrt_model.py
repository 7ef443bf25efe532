"""``fsqrt`` on a machine with the multiplier: the integer square root of its significand, as a
NumPy model of the machine's sequence (``softfloat._fsqrt_digits``) word for word.

Why a model: the root's exactness rests on estimates (a reciprocal square root by Newton steps)
whose error is argued nowhere; instead ``root_rem`` runs on every significand the sequence can
see (``tests/machine/test_softfloat.py``: all 50,331,648 of them, a few seconds), and a test ties
the model to the expanded machine code bit for bit, so the exhaustive result transfers.

The algorithm, for S' in [2^24, 2^26) (``Y = S' << 6`` in [2^30, 2^32), ``X = Y * 2^20``):

* ``y ~ 2^31 / sqrt(Y)``: the line ``K0 - Yh K2 / 2^16`` (``Yh = Y >> 16``; relative error 8.7 %),
  then three Newton steps ``y (3 - Yh y^2 / 2^46) / 2`` in 16-bit words (2^-14);
* one Newton step in full words: ``c ~ Y y^2 / 2^32`` (``hiap``: three half products),
  ``y2 = y (3 2^30 - c) / 2^16 ~ 2^46 / sqrt(Y)`` (2^-27);
* ``root = (Y y2 / 2^32) >> 4``, within one of floor(sqrt(X)) on every S' (the exhaustive check);
* the remainder ``X - root^2`` modulo 2^32 (its true value is below 2^27 in magnitude) and one
  correction each way: the exact floor root and remainder.
"""

from __future__ import annotations

import numpy as np

from qwengpu.codegen.words import halves as _halves
from qwengpu.codegen.words import hiap as _hiap
from qwengpu.codegen.words import mul as _mul

#: the seed line: y0 = K0 - (Yh * K2 >> 16) ~ 2^31 / sqrt(Y) (minimax on a grid: 8.7 %)
K0, K2 = 69800, 39800
THREE = 3 << 30  # 1.5 in units of 2^31

_U = np.uint64
_M = _U(0xFFFFFFFF)


def root_rem(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(floor(sqrt(S' 2^26)), S' 2^26 - root^2) for S' in [2^24, 2^26), as the sequence computes."""
    yw = (np.asarray(s, dtype=_U) << _U(6)) & _M
    yh, yl = _halves(yw)
    y = (_U(K0) - (_mul(yh, K2) >> _U(16))) & _M
    for _ in range(3):
        w = (_U(THREE) - _mul(yh, _mul(y, y) >> _U(16))) & _M
        y = _mul(y, w >> _U(16)) >> _U(15)
    eh, el = _halves((_U(THREE) - _hiap((yh, yl), _halves(_mul(y, y)))) & _M)
    y2 = (_mul(y, eh) + (_mul(y, el) >> _U(16))) & _M
    root = _hiap((yh, yl), _halves(y2)) >> _U(4)
    rem = ((yw << _U(20)) - _mul(root, root)) & _M
    neg = (rem >> _U(31)) == 1  # one too high
    root = np.where(neg, root - _U(1), root) & _M
    rem = np.where(neg, rem + (root << _U(1)) + _U(1), rem) & _M
    t2 = (root << _U(1)) & _M
    up = rem > t2  # one too low
    rem = np.where(up, rem - (t2 + _U(1)), rem) & _M
    root = np.where(up, root + _U(1), root) & _M
    return root, rem


__all__ = ["K0", "K2", "THREE", "root_rem"]
