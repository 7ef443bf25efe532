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
from qwengpu.codegen.words import hi16 as _hi16
from qwengpu.codegen.words import hiap as _hiap
from qwengpu.codegen.words import mul as _mul

#: the seed line: y0 = K0 - (Yh * K2 >> 16) ~ 2^31 / sqrt(Y) (minimax on a grid: 8.7 %)
K0, K2 = 69800, 39800
THREE = 3 << 30  # 1.5 in units of 2^31

_U = np.uint64
_M = _U(0xFFFFFFFF)


def recip(yw: np.ndarray) -> np.ndarray:
    """y2 ~ 2^46 / sqrt(Y) (relative error about 2^-27) for Y = S' << 6 in [2^30, 2^32)."""
    yh, yl = _halves(yw)
    y = (_U(K0) - (_mul(yh, K2) >> _U(16))) & _M
    for _ in range(3):
        w = (_U(THREE) - _mul(yh, _mul(y, y) >> _U(16))) & _M
        y = _mul(y, w >> _U(16)) >> _U(15)
    eh, el = _halves((_U(THREE) - _hiap((yh, yl), _halves(_mul(y, y)))) & _M)
    return (_mul(y, eh) + (_mul(y, el) >> _U(16))) & _M


def root_rem(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(floor(sqrt(S' 2^26)), S' 2^26 - root^2) for S' in [2^24, 2^26), as the sequence computes."""
    yw = (np.asarray(s, dtype=_U) << _U(6)) & _M
    yh, yl = _halves(yw)
    y2 = recip(yw)
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


def rsqrt_sig(s: np.ndarray) -> np.ndarray:
    """R = rn(2^36 / sqrt(S')) in [2^23, 2^24] for S' in [2^24, 2^26), as ``softfloat._frsqrt_sig``
    computes it (``rsqrt.approx``'s significand; never a tie: 2^36 / sqrt(S') is irrational but for
    S' = 2^24, where it is 2^24).

    ``q = y2 >> 4`` is floor(2^39 / sqrt(S')) within one (``recip``), and ``k = (q + 4) >> 3`` the
    rounding of it. The true rounding differs from k only across the boundary B (of the form
    8j - 4) nearest q: R = (B + 4) / 8 - 1 + [2^39 / sqrt(S') >= B], and that test is B^2 S' <=
    2^78, computed modulo 2^64 (|B^2 S' - 2^78| < 2^57 for B within five of the root): B^2 as two
    words from its halves, times S' with ``hi16``, and the sign of the 64-bit result."""
    s = np.asarray(s, dtype=_U)
    q = recip((s << _U(6)) & _M) >> _U(4)
    k = (q + _U(4)) >> _U(3)
    up = ((q + _U(4)) & _U(7)) >= _U(4)  # the boundary above q (else the one below)
    bnd = ((k << _U(3)) - _U(4) + np.where(up, _U(8), _U(0))) & _M
    bh, bl = _halves(bnd)
    a0, a1, a2 = _mul(bl, bl), _mul(bh, bl), _mul(bh, bh)
    w0 = (a0 + ((a1 << _U(17)) & _M)) & _M  # B^2 = (w1, w0)
    w1 = (a2 + (a1 >> _U(15)) + (w0 < a0).astype(_U)) & _M
    s1, s0 = _halves(s)
    w0h = _halves(w0)
    l0, l1 = _mul(w0, s0), _mul(w0, s1)
    xl = (l0 + ((l1 << _U(16)) & _M)) & _M  # B^2 S' mod 2^64 = (xh, xl)
    xh = (_hi16(s0, w0h) + ((_hi16(s1, w0h) << _U(16)) & _M) + (l1 >> _U(16)) + (xl < l0).astype(_U)
          + _mul(w1, s)) & _M
    le = ((xh >> _U(31)) == _U(1)) | ((xh == _U(0)) & (xl == _U(0)))  # B^2 S' - 2^78 <= 0
    return (((bnd + _U(4)) >> _U(3)) - _U(1) + le.astype(_U)) & _M


__all__ = ["K0", "K2", "THREE", "recip", "root_rem", "rsqrt_sig"]
