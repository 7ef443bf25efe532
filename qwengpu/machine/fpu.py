"""The float units in the weights: the adder, ``add.rn.f32`` (optionally ``.ftz``) as one exact
circuit, and the fast-range multiplier (``fmul_fast``, one lane wide).

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
from qwengpu.compiler.ir import Bit, Formula, Lin, Step
from qwengpu.compiler.ops import match_form, sum_columns

ONE = Lin({}, 1)


def _f(c: Circuit, name: str, forms: list[Formula]) -> list[Bit]:
    return c.formulas(name, forms)


def fadd(c: Circuit, a: Word, b: Word, ftz: Bit, probe: dict | None = None, neg: Bit | None = None,
         odd: Bit | None = None) -> Word:
    """``a + b`` rounded to nearest even, as float32 bit patterns (32-bit words). ``probe``: filled
    with the intermediate words by name (their layers: how deep each step lands). ``neg``: ``a - b``
    instead (b's sign flipped on the way in). ``odd``: round to odd instead (the significand
    truncated, its last bit set when the sum was inexact; a sum at or above 2^128 is still an
    infinity: ``isa.sim.add_odd``)."""
    zero = Bit(c, const=0)
    if neg is not None:
        b = Word(c, list(b.bits[:31]) + [b[31] ^ neg])
    pdiff = a[31] ^ b[31]
    swap = Word(c, list(a.bits[:31])) < Word(c, list(b.bits[:31]))
    dw = [1 << i for i in range(8)]

    def unpack(w: Word) -> tuple[Word, Word, Bit, Bit]:
        """(significand with hidden bit, max(exponent, 1), exponent all ones, any fraction bit)"""
        e = list(w.bits[23:31])
        h = c.any_of(e)
        # fraction bit kept unless ftz and the exponent is 0: [9 f + sum e + (1 - ftz) >= 10]
        frac = [c.threshold([w.bits[i], *e, ~ftz], [9] + [1] * 8 + [1], 10) for i in range(23)]
        e0 = c.threshold([e[0], *[~x for x in e[1:]]], [8] + [1] * 7, 7)  # max(e, 1): bit 0
        return Word(c, [*frac, h]), Word(c, [e0, *e[1:]]), c.all_of(e), c.any_of(list(w.bits[:23]))

    ma, ea, infa, fra = unpack(a)
    mb, eb, infb, frb = unpack(b)
    dab, dba = (ea - eb)[:8], (eb - ea)[:8]
    # significands XOR the sign difference (the subtrahend's one's complement)
    xa = Word(c, [x ^ pdiff for x in ma.bits])
    xb = Word(c, [x ^ pdiff for x in mb.bits])
    MX = c.mux(swap, mb, ma)
    MX = Word(c, [zero] * 3 + list(MX.bits) + [zero])  # 28 bits
    ex = c.mux(swap, eb, ea)
    sx = c.mux(swap, b[31], a[31])
    xinf, yinf = c.mux(swap, infb, infa), c.mux(swap, infa, infb)
    xnan = c.mux(swap, c.all_of([infb, frb]), c.all_of([infa, fra]))
    # T_i (i >= 1) = (MY >> d)_i ^ pdiff, MY = my << 3, with swap folded in: one formula per bit
    pd = pdiff.lin()
    sw = swap.lin()
    forms = []
    for i in range(1, 28):
        terms = []
        for dsel, src, arm in ((dab, xb, 1 - sw), (dba, xa, sw)):
            for j in range(0, 27):
                k = i + j - 3  # source bit of my
                if not 0 <= k < 24:
                    continue
                terms.append(Step(match_form(dsel.bits, j) + arm, 9, src.bits[k].lin() - pd))
        forms.append(Formula(pd, terms))
    trest = _f(c, "fadd.align", forms)
    # T_0 = sticky ^ pdiff, sticky = some bit of my lands at or below position 0 (d >= k + 3)
    lab = [c.threshold([mb.bits[k], *dab.bits], [256, *dw], 256 + k + 3) for k in range(24)]
    lba = [c.threshold([ma.bits[k], *dba.bits], [256, *dw], 256 + k + 3) for k in range(24)]
    terms = []
    for lost, arm in ((lab, sw), (lba, 1 - sw)):  # arm: 1 when this side is NOT the one
        L = sum((x.lin() for x in lost), Lin()) - arm * 25
        terms.append(Step(L - pd * 50, 1, ONE))
        terms.append(Step(L + pd * 50, 51, ONE, -1))
    t0 = _f(c, "fadd.sticky", [Formula(pd, terms)])[0]
    T = Word(c, [t0, *trest])
    S = c.add(MX, T, pdiff)  # 28 bits
    top = S[27]
    # thermometer incl. bit 27: therm_i = no one in S[i..27] and ex >= 28 - i (sentinel)
    therm = [c.all_of([~S.bits[j] for j in range(i, 28)] + [c.threshold(ex.bits, dw, 28 - i)])
             for i in range(27)]
    th = [x.lin() for x in therm] + [1 - top.lin()]  # th[27] = 1 unless top
    # S1: top ? S >> 1 (jam) : S << z, z = 26 - p, p the leading position: lead_p = th[p+1] - th[p]
    tp = top.lin()
    forms = []
    for i in range(27):
        terms = []
        for p in range(27):
            src = i - 26 + p
            if 0 <= src < 27:
                terms.append(Step(th[p + 1] - th[p] + S.bits[src].lin(), 2, ONE))
        if i == 0:
            terms.append(Step(tp * 2 + S.bits[1].lin() + S.bits[0].lin(), 3, ONE))
        else:
            terms.append(Step(tp + S.bits[i + 1].lin(), 2, ONE))
        forms.append(Formula(Lin(), terms))
    S1 = Word(c, _f(c, "fadd.norm", forms))
    # K = (top ? 0 : z + 1) = sum therm + (1 - top); em1 = ex - K
    K = Word(c, sum_columns(c, [list(therm) + [~top]] + [[] for _ in range(7)]))
    em1 = c.sub(ex, K)
    q = Word(c, list(S1.bits[3:27]))
    grs = [S1.bits[2], S1.bits[1], S1.bits[0]]  # guard, round, sticky below the significand
    if odd is None:
        up = c.lut([*grs, q.bits[0]], lambda g, r, s, l0: int(g and (r or s or l0)))
    else:
        up = c.lut([*grs, q.bits[0], odd], lambda g, r, s, l0, o: int(not o and g and (r or s or l0)))
        q0 = c.lut([*grs, q.bits[0], odd], lambda g, r, s, l0, o: int(l0 or (o and (g or r or s))))
        q = Word(c, [q0, *q.bits[1:]])
    packed = c.add(Word(c, [zero] * 23 + list(em1.bits) + [zero]), Word(c, [*q.bits] + [zero] * 8), up)
    ovf = c.threshold([packed.bits[31], *packed.bits[23:31]], [8] + [1] * 8, 8)
    tiny = c.all_of([~x for x in packed.bits[23:32]] + [ftz])
    sz = ~c.any_of(S.bits)
    nan = c.any_of([xnan, c.all_of([yinf, xinf, pdiff])])
    mag = []
    for i in range(31):
        p = packed.bits[i].lin()
        if i >= 23:
            L = (nan.lin() + xinf.lin() + ovf.lin()) * 3 + p - sz.lin() - tiny.lin()
        else:
            L = nan.lin() * 5 + p - xinf.lin() - ovf.lin() - sz.lin() - tiny.lin()
        mag.append(Formula(Lin(), [Step(L, 1, ONE)]))
    magb = _f(c, "fadd.out", mag)
    sign = c.lut([sx, nan, sz, pdiff], lambda s_, n, z_, pd_: int(not n and s_ and not (z_ and pd_)))
    if probe is not None:
        probe.update(swap=swap, dab=dab, T0=t0, Trest=trest, S=S, therm=therm, S1=S1, K=K, em1=em1, up=up,
                     packed=packed, ovf=ovf, mag=magb, xa=xa, MX=MX)
    return Word(c, [*magb, sign])


#: the fast-range multiplier's range of the factors' exponent fields' sum (both normal): from 174
#: (|a·b| >= 2^-80) to 377 (|a·b| < 2^125): the product is a normal float (``codegen.softfloat``'s
#: ``ES_MIN`` / ``ES_MAX``, whose fast path checks it before the unit's row)
FMUL_ES_MIN, FMUL_ES_MAX = 174, 377


def fmul_fast(c: Circuit, a: Word, b: Word, err: Bit | None = None) -> Word:
    """``a * b`` rounded to nearest even for normal factors whose exponent fields sum to
    FMUL_ES_MIN..FMUL_ES_MAX (the product is then a normal float), and the signed zero when a
    factor's exponent field is 0 (a zero; a subnormal under ``.ftz``). Elsewhere the word is a fixed
    function of the bits (``simt.fp32.mul_fast`` computes the same one, so the simulator and the
    weights agree on every input): the hidden bits are forced to 1, the exponent field is the low 8
    bits of ``ea + eb - 127`` plus the significand's carry.

    Why this unit: the float multiply's integer sequence (four 12 x 12 ``mul`` rows for the high
    half of the 48-bit product, one for the low word, rounding in integer) is the dot demo's
    largest cost; one lane of it is what the residual of a 3,072-wide machine has room for
    (``bench/late_units.py``), so the machine runs a group's four lanes in four rows.

    ``err``: instead the rounding's error ``a * b - fmul_fast(a, b)``, exact and normal in the
    range (the 48-bit product's bits below the rounding point, negated when it rounded up,
    normalised: a float at least 2^-126 because the range starts at 174), +0 when the product is
    exact or a factor's exponent field is 0 (``simt.fp32.mul_fast_err``). With it, the fma's
    exact product X + L is two rows of this unit, in place of the integer product's pieces."""
    one, zero = Bit(c, const=1), Bit(c, const=0)
    ma = Word(c, list(a.bits[:23]) + [one] + [zero] * 24)
    mb = Word(c, list(b.bits[:23]) + [one] + [zero] * 24)
    p = (ma * mb)[:48]
    top = p[47]
    m = c.mux(top, Word(c, list(p.bits[24:48])), Word(c, list(p.bits[23:47])))
    r = c.lut([top, p[23], p[22]], lambda t, x, y: x if t else y)
    low = c.any_of(list(p.bits[:22]))
    sticky = c.lut([low, top, p[22]], lambda s, t, y: int(s or (t and y)))
    up = c.lut([r, sticky, m[0]], lambda r_, s_, l_: int(r_ and (s_ or l_)))
    ea = Word(c, list(a.bits[23:31]) + [zero, zero])
    eb = Word(c, list(b.bits[23:31]) + [zero, zero])
    s = c.add(ea, eb, top)  # the result's exponent field is s - 127: (s - 128) mod 256 + the hidden bit
    e8 = list(s.bits[:7]) + [~s.bits[7]]
    packed = c.add(Word(c, [zero] * 23 + e8 + [zero]), Word(c, list(m.bits) + [zero] * 8), up)
    # a factor with exponent field 0: the signed zero (one neuron, then "and not" per bit)
    z = c.any_of([c.all_of([~x for x in a.bits[23:31]]), c.all_of([~x for x in b.bits[23:31]])])
    y = Word(c, [c.all_of([x, ~z]) for x in packed.bits[:31]] + [a[31] ^ b[31]])
    if err is None:
        return y
    # the error: the 24 bits below the rounding point (dd: scaled so bit 23 is the round bit),
    # negated when rounding went up (then dd >= 2^23: the magnitude is 2^24 - dd, at most 2^23)
    dd = c.mux(top, Word(c, list(p.bits[:24])), Word(c, [zero] + list(p.bits[:23])))
    neg = c.add(Word(c, [~x for x in dd.bits]), c.const(0, 24), one)[:24]
    mag = c.mux(up, neg, dd)
    # normalise as fadd does: therm_i = no one in mag[i..23]; the leading position p shifts bit
    # i - 23 + p to i (one formula per bit); lz = number of therm_i, i >= 1
    therm = [c.all_of([~mag.bits[j] for j in range(i, 24)]) for i in range(24)]
    th = [x.lin() for x in therm] + [ONE]
    forms = []
    for i in range(23):  # the fraction (bit 23, the leading one, is the hidden bit)
        terms = []
        for q in range(24):
            src = i - 23 + q
            if 0 <= src < 24:
                terms.append(Step(th[q + 1] - th[q] + mag.bits[src].lin(), 2, ONE))
        forms.append(Formula(Lin(), terms))
    frac = _f(c, "fmulf.norm", forms)
    lz = Word(c, sum_columns(c, [list(therm[1:])] + [[] for _ in range(4)]))  # 0..23: 5 bits
    t = c.add(Word(c, list(ea.bits)), Word(c, list(eb.bits)), top)  # ea + eb + top (10 bits)
    e = c.sub(c.sub(t, c.const(151, len(t))), Word(c, list(lz.bits) + [zero] * (len(t) - 5)))
    off = c.any_of([z, therm[0]])  # a zero factor, or an exact product: +0
    ev = Word(c, [c.all_of([x, ~off]) for x in [*frac, *e.bits[:8]]] + [c.all_of([a[31] ^ b[31] ^ up, ~off])])
    return c.mux(err, ev, y)


def fmul_range_ok(c: Circuit, a: Word, b: Word, ftz: Bit) -> Bit:
    """Whether ``fmul_fast(a, b)`` is ``mul.rn`` (``.ftz`` when ``ftz``) of the two words: both
    finite, and a factor zero (exponent field 0 under ``.ftz``, the word ±0 without) or both normal
    with exponent fields summing to FMUL_ES_MIN..FMUL_ES_MAX. One predicate per lane instead of the
    fast path's chain of eleven compare rows (``codegen.softfloat._product_checks``)."""
    ea, eb = list(a.bits[23:31]), list(b.bits[23:31])
    # the exponent sum's bounds as two threshold neurons on the 16 exponent bits (no adder)
    w = [1 << i for i in range(8)] * 2
    lo, hi = c.threshold(ea + eb, w, FMUL_ES_MIN), c.threshold(ea + eb, w, FMUL_ES_MAX + 1)
    e0 = [c.all_of([~x for x in e]) for e in (ea, eb)]
    inf = [c.all_of(e) for e in (ea, eb)]
    m0 = [c.all_of([~x for x in wd.bits[:23]]) for wd in (a, b)]
    def ok(lo_: int, hi_: int, za: int, zb: int, ia: int, ib: int, ma: int, mb: int, f: int) -> int:
        zero = (za and (f or ma)) or (zb and (f or mb))  # a zero factor (exponent field 0 under ftz)
        return int(not ia and not ib and (zero or (lo_ and not hi_ and not za and not zb)))

    return c.lut([lo, hi, *e0, *inf, *m0, ftz], ok)
