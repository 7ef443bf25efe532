"""``fex2`` (``ex2.approx{.ftz}.f32`` = rn(2^x)): the constants of its integer sequence and a NumPy
model of that sequence.

Why a model: the sequence (``softfloat.expand_fex2``) is checked against ``fp32.ex2_approx`` on
every one of the 2^32 inputs (``bench/ex2_exhaustive.py``), which the ISA simulator cannot run in
reasonable time. This model computes the same integers, step by step, with NumPy (``uint32`` where
the sequence works on single words, ``uint64`` for the register pairs: a 64-bit add, subtract,
shift or compare of a pair computes exactly what the sequence's two-word code computes), and
``tests/machine/test_softfloat.py`` checks that the model and the expanded machine code agree
bit for bit, so the exhaustive result transfers to the sequence.

The algorithm (everything integer; the multiplier for the last steps only):

* Decode: ``x = +-mt * 2^(E8 - 158)`` with ``mt = (|x| << 8) | 2^31``; ``|x| * 2^63`` is
  ``mt << s`` (``s = E8 - 95``, a 64-bit shift); its bits above 2^63 are the integer part ``I``,
  the rest the fraction ``G`` (exact for |x| >= 2^-32; below, every shift count is "negative" and
  gives 0: x acts as 0, and 2^x rounds to 1.0 anyway). Negative x: ``f = 1 - G`` and
  ``n = -I - 1`` (``f = 0``, ``n = -I`` when G = 0). So ``x = n + f``, ``F = f * 2^63``.
* ``2^f`` by BKM (shift-and-add): ``y = 1`` (held as ``z = (y - 1) * 2^64``, two words); for
  k = 1, 2, ...: if ``F >= L_k`` (``L_k = log2(1 + 2^-k)`` in units of 2^-63): ``F -= L_k``,
  ``y += y >> k``. Greedy choice keeps ``0 <= F < sum_{j>k} L_j``, so y -> 2^f from below.

  - k = 1..15: unrolled, ``L_k`` immediates (``P1``). For k <= 14 the choice looks at the high
    word only (``F_hi > L_hi``): never negative, and the slack ``sum_{j>k} L_j - L_k`` (about
    0.48 * 2^(63-2k)) exceeds 2^32, so the invariant holds; k = 15 compares all 64 bits.
  On a machine with the multiplier (``multiplier=True``; the 2B shape) the step k = 16 is
  unrolled too (``P16``) and the rest is a polynomial (``poly_tail``): ``F < 2^47.53`` now, so
  with ``u = F ln 2 / 2^63 < 2^-16``, ``2^(F / 2^63) - 1 = e^u - 1 = u + u^2/2 + u^3/6 + ...``
  (the next term below 0.05 units of 2^-64): ``T = F * 2 ln 2 = u * 2^64`` (two words, ``F + fh
  K1 + fl K1 / 2^32 + fh K1F / 2^32``), ``S2 = T^2 / 2^65`` and ``S3 = S2 T / (3 * 2^64)`` (one
  word each), ``W = T + S2 + S3 + TAIL_BIAS`` and ``z += W + z W / 2^64``. Every product is of
  16-bit halves, exact in one ``mul`` row (a 32 x 32 ``mulhi`` is 13 rows on the machine), the
  few full-word high halves taken from three of the four half products. The steps floor, so the
  bias centres the error: z within -6.2 .. +5.4 units of 2^-64 of 2^f on 3,000 random F (the
  loop's path below: -11.5 .. +9.3); the exhaustive check is what counts. One fex2 issues 350
  machine warp instructions where the loop's path issues 829. Without the multiplier each
  ``mul`` is a long sequence, so the test shape keeps the loop and the one-product tail:
  - k = 16..32: a loop with ``L_k = A_k - (B_k - D_k)``, the series
    ``log2(1+u) = (u - u^2/2 + u^3/3 - ...) / ln 2`` with ``A_k = C >> k`` (``C = 2^63 / ln 2``,
    64 bits), ``B_k = floor(2^(62-2k) / ln 2)`` (>> 2 per trip), ``D_k = floor(2^(63-3k) /
    (3 ln 2))`` (>> 3 per trip); the next term is below 0.2 units.
  - the rest: ``F < 2^32`` now, so ``2^(F / 2^63) = 1 + u + u^2/2 + ...`` with ``u = F ln 2 /
    2^63 < 2^-31``: one product instead of more steps. ``y (1 + u)`` adds ``dz = y u 2^64 = t1 +
    t1 z / 2^64`` with ``t1 = F (2 ln 2) = F + mulhi(F, K1)`` (``K1 = floor((2 ln 2 - 1) 2^32)``),
    the second term taken as ``mulhi(t1 mod 2^32, z_hi) + [t1 >= 2^32] z_hi``. Dropped: u^2/2
    (below 2 units of 2^-64), K1's floor and the two products' low words (below 1 unit each), and
    ``t1 z_lo / 2^64`` (below 2 units). (Until 2f5c49d this was a loop of the BKM steps k = 33..63,
    ``L_k = floor(2^(63-k) / ln 2)``: 31 trips of 11 rows.)

  On a machine with read-only words too (the 2B shape: ``table``) there are no steps at all:
  F's top 8 bits j give z = ``TABLE[j]`` (round((2^(j/256) - 1) 2^64) + 2), its next 8 bits j2 the
  factor w = ``TABLE2[j2]`` (round((2^(j2/2^16) - 1) 2^64), below 2^55.5), z becomes z + w + z w /
  2^64 (``times``: y1 y2), and ``poly_tail`` takes the remaining F < 2^47: one fex2 issues 193
  machine warp instructions (two lookups of five rows each, the product's ~40). The tables live at
  the top of the machine's read-only words (``Program.rodata``); the +2 centres the floors' error
  (-5.9 .. +6.8 units of 2^-64 on random F, the steps' path -5.8 .. +6.9).

  The result is within about 2^-59.9 (relative) of 2^f: error of the constants (floors), of the
  truncated ``y >> k``, and the residual F.
* Pack: ``mn = 2^30 | (z_hi >> 2) | sticky`` (sticky = ``f != 0``: 2^f is then irrational, so
  never exactly representable, and ``f = 0`` gives y = 1 exactly) and ``e = n + 126`` go through
  ``_B.round_pack`` (rn; subnormal results, overflow to inf, ftz). Specials: |x| >= 256 (inf
  and NaN included) gives +inf, +0 for negative x, the canonical NaN for NaN.

Whether that is exact is not argued here: it is checked on all 2^32 inputs.
"""

from __future__ import annotations

import numpy as np

from qwengpu.codegen import words

#: round(log2(1 + 2^-k) * 2^63) for k = 1..15
P1 = (
    0x4AE00D1CFDEB43D0, 0x2934F0979A3715FD, 0x15C01A39FBD687A0, 0x0B31FB7D64898B3E,
    0x05AEB4DD63BF61CC, 0x02DCF2D0B85A4531, 0x016FE50B6EF08518, 0x00B84E236BD563BA,
    0x005C3E0FFC29D593, 0x002E24CA6E87E8A8, 0x001713D62F7957C3, 0x000B8A476150DFE4,
    0x0005C53AC47E94D9, 0x0002E2A32762FA6C, 0x0001715305002E4B,
)  # fmt: skip
#: round(log2(1 + 2^-16) * 2^63): the step k = 16, unrolled before ``poly_tail``
P16 = 0xB8A9DED47C11
#: L_k of the unrolled steps k = 1..16 (k = 16 only on a machine with the multiplier)
STEPS = (*P1, P16)
#: k at which the high-word-only choice stops (k <= K_HI uses it)
K_HI = 14
#: floor(2^63 / ln 2): A_k = C >> k
C = 0xB8AA3B295C17F0BB
#: B_16 = floor(2^30 / ln 2), D_16 = floor(2^15 / (3 ln 2))
B16 = 0x5C551D94
D16 = 0x3D8E
#: K1 = floor((2 ln 2 - 1) * 2^32): F * 2 ln 2 = F + mulhi(F, K1)
K1 = 0x62E42FEF
#: the next 32 bits of (2 ln 2 - 1) * 2^32 after K1 (``poly_tail`` uses its high half)
K1F = 0xA39EF357
#: added to ``poly_tail``'s W: its steps all floor, so the error would be one-sided without it
TAIL_BIAS = 5
#: |x| >= 2^8 (exponent field >= 135): inf / +0 / NaN without computing
BIG = 0x43800000
#: bits of F the table takes (``TABLE``): the steps k = 1..TABLE_BITS become two loads
TABLE_BITS = 8
#: added to every entry of ``TABLE``: the steps after it floor, so the error would lean low without it
TABLE_BIAS = 2


#: added to every entry of ``TABLE2``: the product with it floors (three truncated high words)
TABLE2_BIAS = 0


def _table(scale: int, bias: int) -> tuple[int, ...]:
    """round((2^(j / scale) - 1) * 2^64) + bias for j = 0..255, by ``decimal`` at 80 digits (the
    tests compare it with mpmath)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 80
        two = Decimal(2)
        return tuple(int(((two ** (Decimal(j) / scale) - 1) * two**64).to_integral_value()) + bias
                     for j in range(1 << TABLE_BITS))


def _words(t: tuple[int, ...]) -> tuple[int, ...]:
    """A table as the machine holds it: the high words, then the low words."""
    return tuple(x >> 32 for x in t) + tuple(x & 0xFFFFFFFF for x in t)


#: z for F's top 8 bits j (F = f 2^63): round((2^(j / 2^8) - 1) 2^64) + TABLE_BIAS
TABLE = _table(1 << TABLE_BITS, TABLE_BIAS)
#: W for F's next 8 bits j2: round((2^(j2 / 2^16) - 1) 2^64) + TABLE2_BIAS (below 2^55.5)
TABLE2 = _table(1 << 2 * TABLE_BITS, TABLE2_BIAS)
TABLE_WORDS = _words(TABLE)
TABLE2_WORDS = _words(TABLE2)

M32 = 0xFFFFFFFF
_U32 = np.uint32
_U64 = np.uint64


def exact_constants() -> dict:
    """The constants recomputed with mpmath (the tests compare them with the table above)."""
    import mpmath as mp

    with mp.workprec(300):
        ln2 = mp.log(2)
        return {
            "P1": tuple(int(mp.nint(mp.log(1 + mp.mpf(2) ** -k, 2) * mp.mpf(2) ** 63)) for k in range(1, 16)),
            "P16": int(mp.nint(mp.log(1 + mp.mpf(2) ** -16, 2) * mp.mpf(2) ** 63)),
            "C": int(mp.floor(mp.mpf(2) ** 63 / ln2)),
            "B16": int(mp.floor(mp.mpf(2) ** 30 / ln2)),
            "D16": int(mp.floor(mp.mpf(2) ** 15 / (3 * ln2))),
            "K1": int(mp.floor((2 * ln2 - 1) * mp.mpf(2) ** 32)),
            "K1F": int(mp.floor(((2 * ln2 - 1) * mp.mpf(2) ** 32) % 1 * mp.mpf(2) ** 32)),
        }


# ---- 32-bit ISA semantics (sim.py): shift counts >= 32 give 0, words wrap
def _shl(a: np.ndarray, s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, dtype=_U32)
    return np.where(s >= 32, _U32(0), a << np.minimum(s, _U32(31))).astype(_U32)


def _shr(a: np.ndarray, s: np.ndarray) -> np.ndarray:
    s = np.asarray(s, dtype=_U32)
    return np.where(s >= 32, _U32(0), a >> np.minimum(s, _U32(31))).astype(_U32)


def _s32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=_U32).view(np.int32)


def decode(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(F as uint64 in units of 2^-63, e = n + 126 as uint32, sticky (0/1), |a|)."""
    a = np.asarray(a, dtype=_U32)
    with np.errstate(over="ignore"):
        aa = a & _U32(0x7FFFFFFF)
        e8 = aa >> _U32(23)
        mt = (aa << _U32(8)) | _U32(0x80000000)
        s2 = e8 - _U32(95)
        fl = _shl(mt, s2)
        fh = _shr(mt, _U32(32) - s2) | _shl(mt, s2 - _U32(32))
        ip = _shr(mt, _U32(63) - s2)
        pneg = _s32(a) < 0
        fl = np.where(pneg, _U32(0) - fl, fl).astype(_U32)
        pz = (fl == 0) & pneg
        fh = np.where(pneg, ~fh, fh).astype(_U32)
        fh = np.where(pz, fh + _U32(1), fh).astype(_U32)
        fh &= _U32(0x7FFFFFFF)
        fo = fh | fl
        pf0 = (fo == 0) & pneg
        e = ip + _U32(126)
        e = np.where(pneg, _U32(251) - e, e).astype(_U32)
        e = np.where(pf0, e + _U32(1), e).astype(_U32)
        sticky = np.minimum(fo, _U32(1))
    return (fh.astype(_U64) << _U64(32)) | fl.astype(_U64), e, sticky, aa


def _add(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a + b mod 2^32, the carry) on 32-bit words held in uint64 (the sequence's add and setp)."""
    s = (a + b) & _U64(M32)
    return s, (s < b).astype(_U64)


def poly_tail(F: np.ndarray, z: np.ndarray) -> np.ndarray:
    """z * e^u + (e^u - 1) * 2^64 with u = F ln 2 / 2^63 (F < 2^47.53, after the step k = 16): the
    machine's words, step by step (``softfloat._fex2_poly_tail``); uint64 arrays in and out. Every
    product is of 16-bit halves (one ``mul`` row each, exact in a word): ``hi16`` is the high word
    of x * y for x <= 2^16, exact; ``hiap`` that of two full words from three half products (the
    low halves' product and the carries between them dropped: 0 to 3 below)."""
    m = _U64(M32)
    w16, w32 = _U64(16), _U64(32)
    fh, fl, zh, zl = F >> w32, F & m, z >> w32, z & m
    mul, halves, hi16, hiap = words.mul, words.halves, words.hi16, words.hiap
    with np.errstate(over="ignore"):
        # T = F * 2 ln 2 (units of 2^-64) = F + fh K1 + fl K1 / 2^32 + fh K1F / 2^32
        k1 = halves(K1)
        e = (hiap(halves(fl), k1) + (mul(fh, K1F >> 16) >> w16)) & m
        tl, c1 = _add(fl, mul(fh, K1))
        tl, c2 = _add(tl, e)
        th = (fh + hi16(fh, k1) + c1 + c2) & m
        # S2 = T^2 / 2^65 (one word: T < 2^48), S3 = S2 T / (3 2^64) + the bias, W = T + S2 + S3
        s2 = ((mul(th, th) >> _U64(1)) + hi16(th, halves(tl))) & m
        s3 = ((mul(hi16(th, halves(s2)), 0x5556) >> w16) + _U64(TAIL_BIAS)) & m
        wl, c3 = _add(tl, (s2 + s3) & m)
        wh = (th + c3) & m
        # z += W + z W / 2^64
        zhh = halves(zh)
        dl, c4 = _add(wl, mul(zh, wh))
        dl, c5 = _add(dl, hiap(zhh, halves(wl)))
        dl, c6 = _add(dl, hi16(wh, halves(zl)))
        dh = (wh + hi16(wh, zhh) + c4 + c5 + c6) & m
        zl, c7 = _add(zl, dl)
        zh = (zh + dh + c7) & m
    return (zh << w32) | zl


def times(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """z + w + z w / 2^64 (uint64 in and out; w below 2^56, its high word below 2^24): y1 y2 of
    y = 1 + z / 2^64, word for word as ``softfloat._ex2_times``. The high word of zh wh is exact
    (four half products, the middle column split so it never leaves a word); zh wl / 2^32 and
    zl wh / 2^32 are ``hiap``'s (0 to 3 below each); zl wl / 2^64 (below 1) is dropped."""
    m = _U64(M32)
    w16 = _U64(16)
    zh, zl, wh, wl = z >> _U64(32), z & m, w >> _U64(32), w & m
    mul, halves, hiap = words.mul, words.halves, words.hiap
    with np.errstate(over="ignore"):
        (zh1, zh0), (wh1, wh0) = halves(zh), halves(wh)
        al = mul(zh, wh)
        x = mul(zh1, wh0)
        t = (x & _U64(0xFFFF)) + mul(zh0, wh1) + (mul(zh0, wh0) >> w16)
        ah = (mul(zh1, wh1) + (x >> w16) + (t >> w16)) & m
        lo, c1 = _add(zl, wl)
        lo, c2 = _add(lo, al)
        lo, c3 = _add(lo, hiap((zh1, zh0), halves(wl)))
        lo, c4 = _add(lo, hiap(halves(zl), (wh1, wh0)))
        hi = (zh + wh + ah + c1 + c2 + c3 + c4) & m
    return (hi << _U64(32)) | lo


def bkm(F: np.ndarray, multiplier: bool = False, table: bool = False) -> np.ndarray:
    """z = (y - 1) * 2^64 (uint64) with y ~ 2^(F / 2^63), step by step as the sequence;
    ``multiplier``: the sequence of a machine with the multiplier (the step k = 16, then ``poly_tail``);
    ``table`` (with it): one with read-only words, where ``TABLE`` gives z for F's top 8 bits and
    ``TABLE2`` the factor for the next 8 (``times``), and ``poly_tail`` the rest (F < 2^47 then,
    within its bound 2^47.53): no shift-and-add step at all."""
    F = np.array(F, dtype=_U64)
    z = np.zeros_like(F)
    t = np.empty_like(F)
    if table:
        assert multiplier, "the tables are used only on a machine with the multiplier"
        sh = _U64(63 - TABLE_BITS)
        z = np.array(TABLE, dtype=_U64)[(F >> sh).astype(np.int64)]
        F &= (_U64(1) << sh) - _U64(1)
        sh = _U64(63 - 2 * TABLE_BITS)
        w = np.array(TABLE2, dtype=_U64)[(F >> sh).astype(np.int64)]
        F &= (_U64(1) << sh) - _U64(1)
        return poly_tail(F, times(z, w))
    with np.errstate(over="ignore"):
        for k in range(1, 17 if multiplier else 16):
            L = _U64(STEPS[k - 1])
            p = (F >> _U64(32)) > (L >> _U64(32)) if k <= K_HI else F >= L
            np.subtract(F, L, out=F, where=p)
            np.right_shift(z, _U64(k), out=t)
            t += _U64(1 << (64 - k))
            np.add(z, t, out=z, where=p)
        if multiplier:
            return poly_tail(F, z)
        b, d = B16, D16
        for k in range(16, 33):
            # D = F + (B - D) - A, two's complement; choose when its sign bit is clear
            u = _U64((b - d) & M32)
            dd = F + u - _U64(C >> k)
            p = (dd >> _U64(63)) == 0
            np.copyto(F, dd, where=p)
            np.right_shift(z, _U64(k), out=t)
            t += _U64(1 << (64 - k))
            np.add(z, t, out=z, where=p)
            b >>= 2
            d >>= 3
        f = F & _U64(M32)  # one word from here on (the high word is 0): z += t1 + t2 (64 bits)
        t1 = f + ((f * _U64(K1)) >> _U64(32))  # F * 2 ln 2, up to 33 bits
        zh = z >> _U64(32)
        t2 = (((t1 & _U64(M32)) * zh) >> _U64(32)) + np.where(t1 >> _U64(32) != 0, zh, _U64(0))
        z += t1 + t2
    return z


def round_pack_rn(e: np.ndarray, mn: np.ndarray, ftz: bool) -> np.ndarray:
    """``softfloat._B.round_pack(0, e, mn, "rn", ftz)`` (subnormal results, overflow)."""
    with np.errstate(over="ignore"):
        sh = np.maximum(_s32(_U32(7) - e), 7).astype(_U32)
        halfm1 = _shr(_U32(0x7FFFFFFF), _U32(32) - sh)
        odd = _shr(mn, sh) & _U32(1)
        r = _shr(mn + (halfm1 + odd), sh)
        ep = np.maximum(_s32(e), 0).astype(_U32)
        p = (ep << _U32(23)) + r
        p = np.minimum(p, _U32(0x7F800000))
        if ftz:
            p = np.where(p < _U32(0x800000), _U32(0), p).astype(_U32)
    return p


def core(a: np.ndarray, multiplier: bool = False,
         table: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The rounding-independent part: (e, mn, the special result, whether it applies)."""
    a = np.asarray(a, dtype=_U32)
    F, e, sticky, aa = decode(a)
    z = np.zeros(len(a), dtype=_U64)
    # F = 0 leaves z below 2^32 (no step is taken; the table's entry 0 and the tail add a few
    # units), which mn does not see: only the others are computed, except with the table (its entry
    # is read for F = 0 too: the tests make it wrong on purpose and compare)
    nz = np.arange(len(F)) if table else np.flatnonzero(F)
    if len(nz):
        z[nz] = bkm(F[nz], multiplier, table)
    zh = (z >> _U64(32)).astype(_U32)
    mn = (zh >> _U32(2)) | _U32(0x40000000) | sticky
    pneg = _s32(a) < 0
    spec = np.where(pneg, _U32(0), _U32(0x7F800000)).astype(_U32)
    spec = np.where(aa > _U32(0x7F800000), _U32(0x7FFFFFFF), spec).astype(_U32)
    return e, mn, spec, aa >= _U32(BIG)


def ex2(a: np.ndarray, ftz: bool = False, multiplier: bool = False, table: bool = False) -> np.ndarray:
    """The bits ``fex2`` (the sequence; ``multiplier``: a machine's with the multiplier; ``table``:
    and with read-only words, the 2B shape's) returns for the float32 bits ``a``."""
    e, mn, spec, pspec = core(a, multiplier, table)
    return finish(e, mn, spec, pspec, ftz)


def finish(e: np.ndarray, mn: np.ndarray, spec: np.ndarray, pspec: np.ndarray, ftz: bool) -> np.ndarray:
    return np.where(pspec, spec, round_pack_rn(e, mn, ftz)).astype(_U32)


__all__ = [
    "P1", "P16", "STEPS", "K_HI", "C", "B16", "D16", "K1", "K1F", "TAIL_BIAS", "BIG", "TABLE_BITS",
    "TABLE_BIAS", "TABLE2_BIAS", "TABLE", "TABLE2", "TABLE_WORDS", "TABLE2_WORDS", "times",
    "exact_constants", "decode", "poly_tail", "bkm", "core", "ex2", "finish",
]  # fmt: skip
