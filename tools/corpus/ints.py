"""Fixed-width integer semantics (two's complement wraparound, C truncating division) and
deterministic inputs. Pure Python; no project code."""

from __future__ import annotations

import random

import numpy as np

INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1
UINT_MAX = (1 << 32) - 1
LLONG_MIN = -(1 << 63)
LLONG_MAX = (1 << 63) - 1
ULLONG_MAX = (1 << 64) - 1


def wrap(n: int, bits: int, signed: bool) -> int:
    n &= (1 << bits) - 1
    if signed and n >> (bits - 1):
        n -= 1 << bits
    return n


def s8(n: int) -> int:
    return wrap(n, 8, True)


def u8(n: int) -> int:
    return wrap(n, 8, False)


def s16(n: int) -> int:
    return wrap(n, 16, True)


def s32(n: int) -> int:
    return wrap(n, 32, True)


def u32(n: int) -> int:
    return wrap(n, 32, False)


def s64(n: int) -> int:
    return wrap(n, 64, True)


def u64(n: int) -> int:
    return wrap(n, 64, False)


def cdiv(a: int, b: int) -> int:
    """C integer division: truncates toward zero."""
    if b == 0:
        raise ZeroDivisionError
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def crem(a: int, b: int) -> int:
    """C remainder: sign of the dividend."""
    return a - b * cdiv(a, b)


def asr(x: int, k: int, bits: int = 32) -> int:
    """Arithmetic shift right of a signed value."""
    return wrap(x, bits, True) >> k


def lsr(x: int, k: int, bits: int = 32) -> int:
    return wrap(x, bits, False) >> k


def shl(x: int, k: int, bits: int = 32, signed: bool = False) -> int:
    return wrap(x << k, bits, signed)


def popc(x: int) -> int:
    return bin(x).count("1")


def clz(x: int, bits: int = 32) -> int:
    x = wrap(x, bits, False)
    return bits - x.bit_length()


def ffs(x: int, bits: int = 32) -> int:
    """1-based index of the least significant set bit; 0 for 0."""
    x = wrap(x, bits, False)
    return (x & -x).bit_length()


def brev(x: int, bits: int = 32) -> int:
    x = wrap(x, bits, False)
    return int(format(x, f"0{bits}b")[::-1], 2)


class Rng:
    """Deterministic inputs built on random.Random (stable across Python and NumPy versions)."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def ints(self, n: int, lo: int, hi: int) -> list[int]:
        """n integers uniformly in [lo, hi]."""
        span = hi - lo + 1
        out = []
        for _ in range(n):
            out.append(lo + self.r.getrandbits(max(span.bit_length() + 8, 8)) % span)
        return out

    def int(self, lo: int, hi: int) -> int:
        return self.ints(1, lo, hi)[0]

    def bits(self, n: int, width: int = 32) -> list[int]:
        return [self.r.getrandbits(width) for _ in range(n)]

    def floats(self, n: int, lo: float, hi: float) -> list[np.float32]:
        """float32 values from a uniform float64 in [lo, hi), rounded to nearest."""
        return [np.float32(lo + (hi - lo) * self.r.random()) for _ in range(n)]

    def grid_floats(self, n: int, lo: int, hi: int, scale: float) -> list[np.float32]:
        """Exact small values k * scale, k integer in [lo, hi]."""
        return [np.float32(k * scale) for k in self.ints(n, lo, hi)]

    def choice(self, seq):
        return seq[self.r.getrandbits(32) % len(seq)]

    def shuffle(self, seq: list) -> list:
        out = list(seq)
        for i in range(len(out) - 1, 0, -1):
            j = self.r.getrandbits(32) % (i + 1)
            out[i], out[j] = out[j], out[i]
        return out
