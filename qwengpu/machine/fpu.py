"""The float adder in the weights: ``add.rn.f32`` (optionally ``.ftz``) as one exact circuit.

Why: the float add family (``fma``, ``add``/``sub.f32``, the float ``atomicAdd``) is 42 % of the
tokens the model writes for the corpus (docs/machine-in-weights.md 8.3), because its integer
sequence writes about forty full 32-bit results per lane. As a unit it is one machine instruction.

The circuit follows the usual add: order the operands by magnitude, align the smaller significand
(three extra bits, the lowest a sticky bit), add or subtract, normalise (one place right on a
carry, else left by the leading-zero count, but never below the smallest exponent: a sum in the
subnormal range is packed as it is), round to nearest even, pack, and overflow to infinity.
Depth is what the machine pays for (every layer of it delays the result latch), so the steps
that do not depend on the order (exponent differences both ways, hidden bits, the
exponent-limited leading-zero count's sentinel) are computed beside the comparison, not after it.

Semantics are the interpreter's (``simt.fp32.add`` with ``rnd="rn"``): NaN results are the
canonical ``0x7fffffff``; an exact zero from operands of opposite signs is ``+0``; with ``ftz``
subnormal operands count as zeros of their sign and a subnormal result becomes a zero of its sign.
"""

from __future__ import annotations

from qwengpu.compiler import Circuit, Word
from qwengpu.compiler.ir import Bit

INF = 0x7F800000
CNAN = 0x7FFFFFFF
_W = 27  # significand with hidden bit (24) and three bits below it (guard, round, sticky)


def _popcount(c: Circuit, bits: list[Bit], width: int) -> Word:
    """The number of set bits among ``bits`` as a ``width``-bit word."""
    from qwengpu.compiler.ops import sum_columns

    cnt = sum_columns(c, [list(bits)] + [[] for _ in range(width - 1)])
    return Word(c, (cnt + [Bit(c, const=0)] * width)[:width])


def _unpack(c: Circuit, w: Word, ftz: Bit) -> tuple[Word, Word, Bit, Bit]:
    """(24-bit significand with its hidden bit, max(exponent field, 1) as 8 bits, exponent field
    all ones, any fraction bit set) of the float word ``w``; with ``ftz`` a subnormal's significand
    is 0."""
    e = w[23:31]
    h = c.any_of(e.bits)
    keep = h | ~ftz
    frac = Word(c, [c.all_of([x, keep]) for x in w.bits[:23]])
    m = Word(c, [*frac.bits, h])
    e1 = Word(c, [e.bits[0] | ~h] + list(e.bits[1:]))
    return m, e1, c.all_of(e.bits), c.any_of(w.bits[:23])


def fadd(c: Circuit, a: Word, b: Word, ftz: Bit, probe: dict | None = None) -> Word:
    """``a + b`` rounded to nearest even, as float32 bit patterns (32-bit words). ``probe``: filled
    with the intermediate words by name (``bench/fadd_unit.py`` reads their layers)."""
    zero = Bit(c, const=0)
    pdiff = a[31] ^ b[31]
    swap = Word(c, list(a.bits[:31])) < Word(c, list(b.bits[:31]))  # |a| < |b|: b is the larger
    ma, ea, infa, fra = _unpack(c, a, ftz)
    mb, eb, infb, frb = _unpack(c, b, ftz)
    dab = (ea - eb)[:8]
    dba = (eb - ea)[:8]
    mx, my = c.mux(swap, mb, ma), c.mux(swap, ma, mb)
    ex = c.mux(swap, eb, ea)
    d = c.mux(swap, dba, dab)  # ex - ey >= 0
    sx = c.mux(swap, b[31], a[31])
    xinf, yinf = c.mux(swap, infb, infa), c.mux(swap, infa, infb)
    xnan = c.mux(swap, c.all_of([infb, frb]), c.all_of([infa, fra]))
    # align: MY = my << 3 shifted right by d; the bits shifted out fold into bit 0 (sticky)
    MX = Word(c, [zero] * 3 + list(mx.bits) + [zero])  # 28 bits (a carry out at bit 27)
    MY = Word(c, [zero] * 3 + list(my.bits))
    MYs = c.shift(MY, d, "shr")
    # bit j of my is lost when d >= j + 4: one threshold each
    dw = [1 << i for i in range(8)]
    lost = [c.threshold([my.bits[j], *d.bits], [256, *dw], 256 + j + 4) for j in range(24)]
    sticky = c.any_of(lost)
    T = Word(c, [MYs.bits[0] | sticky] + list(MYs.bits[1:]) + [zero])
    T = Word(c, [x ^ pdiff for x in T.bits])
    S = c.add(MX, T, pdiff)  # |x| + |y| or |x| - |y| (never negative), 28 bits
    top = S[27]
    # leading zeros of S[0:27], at most ex - 1: a sentinel one at bit 27 - ex (when ex <= 27),
    # folded into the thermometer "no one at or above i" (i = 0..26)
    therm = [
        c.all_of([~S.bits[j] for j in range(i, 27)] + [c.threshold(ex.bits, dw, 28 - i)])
        for i in range(27)
    ]
    z = _popcount(c, therm, 8)
    Sl = c.shift(Word(c, list(S.bits[:27])), z, "shl")
    Sr = Word(c, [S.bits[1] | S.bits[0]] + list(S.bits[2:28]))
    S1 = c.mux(top, Sr, Sl)  # leading one at bit 26 (or a subnormal / zero)
    em1 = c.mux(top, ex, (ex + ~z)[:8])  # the result's exponent field minus one: ex - z - 1
    q = Word(c, list(S1.bits[3:27]))
    up = c.all_of([S1.bits[2], c.any_of([S1.bits[1], S1.bits[0], q.bits[0]])])
    packed = c.add(Word(c, [zero] * 23 + list(em1.bits) + [zero]), Word(c, [*q.bits] + [zero] * 8), up)
    ovf = packed[31] | c.all_of(packed.bits[23:31])
    tiny = c.all_of([~x for x in packed.bits[23:32]] + [ftz])
    sz = ~c.any_of(S.bits)
    nan = xnan | c.all_of([yinf, xinf, pdiff])
    # magnitude: NaN, infinity (an infinite operand or overflow), zero (exact, or flushed), the sum
    big = xinf | ovf
    clear = sz | tiny
    mag = []
    for i in range(31):
        hi_bit = i >= 23
        mag.append(
            c.lut(
                [packed.bits[i], nan, big, clear],
                lambda p, n, g, z_, hb=hi_bit: int(n or (g and hb) or (not g and not z_ and p)),
            )
        )
    sign = c.lut([sx, nan, sz, pdiff], lambda s_, n, z_, pd: int(not n and s_ and not (z_ and pd)))
    if probe is not None:
        probe.update(swap=swap, d=d, MYs=MYs, sticky=sticky, T=T, S=S, therm=therm, z=z, Sl=Sl, S1=S1,
                     em1=em1,
                     up=up, packed=packed, ovf=ovf, big=big, nan=nan, sz=sz, mag=mag, mx=mx)
    return Word(c, mag + [sign])
