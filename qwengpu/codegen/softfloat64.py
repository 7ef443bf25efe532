"""float64 ops as sequences of integer machine instructions on register pairs (for the weights).

Why: the lowering (``lower.py``) turns PTX f64 arithmetic into pair ops of the ISA (``dadd dmul
dfma ddiv dsqrt dsetp d2f f2d i2d d2i d2l``), which the simulator executes exactly
(``qwengpu.isa.f64``); the circuit in the weights has no float unit, so each op becomes integer
code here, giving the same bits for every input and rounding mode. The tests prove each
expansion equal to the simulator's op on edge values and random bits
(``tests/machine/test_softfloat64.py``).

Building blocks: the lowering's pair helpers (``qwengpu.codegen.lowering.int64`` / ``floatseq``:
64-bit add/sub/shift/compare/clz,
``unpack64``: the significand normalized to bit 52 and a biased exponent that drops below 1 for
subnormals, ``round_pack64``: one rounding of a significand with its leading bit at 63 in any
mode, subnormal results and overflow included) run here over a ``soft.Seq`` (``_L``), so the
lowering's own f64 code (``i2d``, ``d2f``, ``f2d``, ``dmul``, ``drnd``) is reused unchanged.

Algorithms (all exact; the loops have fixed trip counts, so lanes never diverge):

* ``dadd``: operands ordered by magnitude; the smaller significand, aligned to the larger
  (leading bit at 62, 10 guard bits), keeps a sticky bit in its last place (the result's
  rounding position stays >= 2 bits above it whenever bits were lost); add or subtract in two
  words, normalize with ``clz``, round once. Exact zero: +0 (-0 in rm, or for two -0).
* ``dmul``: the lowering's ``dmul``: the 106-bit product of the significands (``mul64x64``),
  rounded once (its fixed 64-bit windows keep sin_cos inside the 1024-row ROM).
* ``dfma``: the exact product and the addend in a 128-bit frame (leading bits at 125), the one
  with the smaller top exponent shifted right with a sticky bit, added or subtracted (negated
  when the difference is negative), normalized by a 128-bit ``clz`` shift, rounded once.
* ``ddiv``: restoring division of the significands, 56 quotient bits (one per trip) and the
  remainder as sticky bit.
* ``dsqrt``: digit-by-digit (restoring) square root of the significand scaled to an even
  exponent: 56 root bits, two operand bits per trip, the remainder as sticky bit.
* ``dsetp``: signed 64-bit order keys (x >= +0: its bits; else -|x|, so -0 = +0) compared
  with ``cmp64``; NaN makes ordered comparisons false and unordered ones true.
* ``d2i``/``d2l``: ``drnd`` (round to integral on the bits), then the integral value's
  significand shifted into place, saturated by its exponent, negated for negative values.
* ``d2f``, ``f2d``, ``i2d``: the lowering's sequences.
"""

from __future__ import annotations

from collections.abc import Callable

from qwengpu.codegen.lowering import floatseq, int64
from qwengpu.codegen.softcore import Seq, register_floats
from qwengpu.isa.instr import Imm, MInstr, P, R

M32 = 0xFFFFFFFF
SIGN = 0x80000000
Val = R | Imm
Pair = tuple


class _L:
    """The lowering context's emitting interface over a ``soft.Seq``, plus its pair helpers."""

    def __init__(self, s: Seq) -> None:
        self.s = s
        self.fr = s.fr

    # the emitting primitives the borrowed helpers call
    def tmp(self) -> R:
        return self.fr.r()

    def ptmp(self) -> P:
        return self.fr.p()

    def _label(self) -> int:
        return self.fr.label()

    def emit(
        self,
        op: str,
        d: tuple = (),
        s: tuple = (),
        guard: P | None = None,
        target: int | None = None,
        **m: object,
    ) -> MInstr:
        return self.s.emit(op, d, s, guard, target, **m)

    def op(self, op: str, *a: object, **m: object) -> R:
        return self.s.op(op, *a, **m)

    def into(self, d: R, op: str, *a: object, guard: P | None = None, **m: object) -> R:
        return self.s.into(d, op, *a, guard=guard, **m)

    def mov(self, d: R, a: Val) -> None:
        self.s.mov(d, a)

    def sel(self, a: object, b: object, p: P) -> R:
        return self.s.sel(a, b, p)  # type: ignore[arg-type]

    def setp(
        self,
        cmp: str,
        a: object,
        b: object,
        sign: str = "u",
        bop: str | None = None,
        c: P | None = None,
        guard: P | None = None,
    ) -> P:
        return self.s.setp(cmp, a, b, sign, bop, c, guard)  # type: ignore[arg-type]

    def setp_into(
        self,
        p: P,
        cmp: str,
        a: object,
        b: object,
        sign: str = "u",
        bop: str | None = None,
        c: P | None = None,
        guard: P | None = None,
    ) -> P:
        return self.s.setp_into(p, cmp, a, b, sign, bop, c, guard)  # type: ignore[arg-type]

    def plop(self, bop: str, a: P, b: P) -> P:
        """Predicate logic with setp only (plop is not a weight op)."""
        p = self.fr.p()
        {"and": self.s.pand, "or": self.s.por, "xor": self.s.pxor}[bop](p, a, b)
        return p

    def place(self, lbl: int) -> None:
        self.s.place(lbl)

    def bra(self, lbl: int, guard: P | None = None) -> None:
        self.s.bra(lbl, guard)

    # the lowering's pair helpers and f64 sequences, reused as they are
    add64 = int64.add64
    sub64 = int64.sub64
    _addc = int64.addc
    shl64 = int64.shl64
    shr64 = int64.shr64
    cmp64 = int64.cmp64
    clz64 = int64.clz64
    neg64 = int64.neg64
    mul64x64 = int64.mul64x64
    round_pack64 = floatseq.round_pack64
    unpack64 = floatseq.unpack64
    round_pack = floatseq.round_pack
    flush = floatseq.flush
    unpack_norm = floatseq.unpack_norm
    dmul = floatseq.dmul
    i2d = floatseq.i2d
    d2f = floatseq.d2f
    f2d = floatseq.f2d
    dkey = floatseq.dkey
    dnan = floatseq.dnan
    drnd = floatseq.drnd

    # ---- new helpers
    def pair_zero(self, x: Pair) -> P:
        return self.setp("eq", self.op("or", x[0], x[1]), Imm(0))

    def loop(self, trips: int, body: Callable[[], None]) -> None:
        """``body`` emitted once, run ``trips`` times (a counter; the same count in every lane)."""
        k = self.tmp()
        self.mov(k, Imm(trips))
        top = self._label()
        self.place(top)
        body()
        self.into(k, "sub", k, Imm(1))
        self.bra(top, self.setp("ne", k, Imm(0)))

    def cls(self, x: Pair) -> dict[str, P]:
        """nan / inf / zero predicates of an f64."""
        lo, hi = x
        mh = self.op("and", hi, Imm(0x7FFFFFFF))
        pz = self.setp("eq", lo, Imm(0))
        return {
            "nan": self.dnan(x),
            "inf": self.setp("eq", mh, Imm(0x7FF00000), bop="and", c=pz),
            "zero": self.setp("eq", mh, Imm(0), bop="and", c=pz),
        }

    def clsr(self, x: Pair) -> dict[str, R]:
        """nan / inf / zero of an f64 as 0/1 words (predicates are scarce: 8 per thread)."""
        return {k: self.sel(Imm(1), Imm(0), p) for k, p in self.cls(x).items()}

    def special(self, cases: list[tuple[P | Val, Val, Val]]) -> tuple[Val, Val, Val]:
        """(lo, hi, flag) of the first-computed special results (later cases override earlier):
        held in three registers, so the class predicates die before the long main path (the
        machine has 8 predicates)."""
        lo: Val = Imm(0)
        hi: Val = Imm(0)
        flag: Val = Imm(0)
        for p, cl, ch in cases:
            if not isinstance(p, P):  # a 0/1 word
                p = self.setp("ne", p, Imm(0))
            lo, hi, flag = self.sel(cl, lo, p), self.sel(ch, hi, p), self.sel(Imm(1), flag, p)
        return lo, hi, flag

    def apply(self, sp: tuple[Val, Val, Val], lo: Val, hi: Val) -> tuple[R, R]:
        p = self.setp("ne", sp[2], Imm(0))
        return self.sel(sp[0], lo, p), self.sel(sp[1], hi, p)

    def selp2(self, a: Pair, b: Pair, p: P) -> tuple[R, R]:
        return self.sel(a[0], b[0], p), self.sel(a[1], b[1], p)

    # n-word integers (lists of words, least significant first)
    def shr_n(self, w: list, k: Val) -> tuple[list, P]:
        """w >> k (k >= 0, any size) and whether nonzero bits were shifted out."""
        n = len(w)
        q = self.op("shr", k, Imm(5))
        r = self.op("and", k, Imm(31))
        moved: list = []
        qs = [self.setp("eq", q, Imm(j)) for j in range(n)]
        for i in range(n):
            v: Val = Imm(0)
            for j in range(n - i):
                v = self.sel(w[i + j], v, qs[j])
            moved.append(v)
        rb = self.op("sub", Imm(32), r)
        out = []
        for i in range(n):
            x = self.op("shr", moved[i], r)
            if i + 1 < n:
                x = self.op("or", x, self.op("shl", moved[i + 1], rb))  # shl by 32 gives 0
            out.append(x)
        lost: Val = Imm(0)
        for i in range(n):
            kk = self.op("sub", k, Imm(32 * i))
            part = self.op("sub", self.op("shl", Imm(1), kk), Imm(1))  # kk in [1, 31]
            part = self.sel(part, Imm(0), self.setp("gt", kk, Imm(0), sign="s"))
            part = self.sel(Imm(M32), part, self.setp("ge", kk, Imm(32), sign="s"))
            lost = self.op("or", lost, self.op("and", w[i], part))
        return out, self.setp("ne", lost, Imm(0))

    def shl_n(self, w: list, k: Val) -> list:
        """w << k (0 <= k < 32 * len(w))."""
        n = len(w)
        q = self.op("shr", k, Imm(5))
        r = self.op("and", k, Imm(31))
        qs = [self.setp("eq", q, Imm(j)) for j in range(n)]
        moved: list = []
        for i in range(n):
            v: Val = Imm(0)
            for j in range(i + 1):
                v = self.sel(w[i - j], v, qs[j])
            moved.append(v)
        rb = self.op("sub", Imm(32), r)
        out = []
        for i in range(n):
            x = self.op("shl", moved[i], r)
            if i > 0:
                x = self.op("or", x, self.op("shr", moved[i - 1], rb))
            out.append(x)
        return out

    def addsub_n(self, a: list, b: list, sub: P) -> list:
        """a + b, or a - b where ``sub`` holds (modulo 2^(32n))."""
        nb = [self.sel(self.op("not", x), x, sub) for x in b]  # a - b = a + ~b + 1
        carry: Val = self.sel(Imm(1), Imm(0), sub)
        out = []
        for i in range(len(a)):
            s1 = self.op("add", a[i], nb[i])
            c1 = self.setp("lt", s1, a[i])
            s2 = self.op("add", s1, carry)
            c2 = self.setp("lt", s2, s1)
            out.append(s2)
            carry = self.sel(Imm(1), Imm(0), self.plop("or", c1, c2))
        return out

    def neg_n(self, a: list) -> list:
        return self.addsub_n([Imm(0)] * len(a), a, P(-1))

    def clz_n(self, w: list) -> R:
        """Leading zeros of an n-word value (32n for zero)."""
        n = len(w)
        c: Val = Imm(32 * n)
        for i in range(n):  # from the least significant word up: the highest nonzero word wins
            ci = self.op("add", self.op("clz", w[i]), Imm(32 * (n - 1 - i)))
            c = self.sel(ci, c, self.setp("ne", w[i], Imm(0)))
        return c  # type: ignore[return-value]


def _pairs(ins: MInstr) -> list[Pair]:
    s = ins.s
    return [(s[i], s[i + 1]) for i in range(0, len(s) - (len(s) % 2), 2)]


def _out(L: _L, ins: MInstr, lo: Val, hi: Val) -> None:
    L.s.mov(ins.d[0], lo)
    L.s.mov(ins.d[1], hi)


# ---------------------------------------------------------------------------------------------
# the expanders
# ---------------------------------------------------------------------------------------------
def _dadd(L: _L, a: Pair, b: Pair, rnd: str) -> tuple[R, R]:
    ka = (a[0], L.op("and", a[1], Imm(0x7FFFFFFF)))
    kb = (b[0], L.op("and", b[1], Imm(0x7FFFFFFF)))
    swap = L.cmp64("lt", ka, kb, False)
    x, y = L.selp2(b, a, swap), L.selp2(a, b, swap)  # |x| >= |y|
    zs = Imm(SIGN if rnd == "rm" else 0)
    cx, cy = L.cls(x), L.cls(y)
    sub = L.setp("lt", L.op("xor", x[1], y[1]), Imm(0), sign="s")
    nan = L.plop("or", L.plop("or", cx["nan"], cy["nan"]), L.plop("and", cy["inf"], sub))
    both0 = L.plop("and", cx["zero"], cy["zero"])
    sp = L.special(
        [
            (cy["zero"], x[0], x[1]),  # x + 0 = x
            (L.plop("and", both0, sub), Imm(0), zs),  # +0 + -0
            (cx["inf"], x[0], x[1]),  # x is the infinite one
            (nan, Imm(M32), Imm(0x7FFFFFFF)),  # NaN, inf - inf
        ]
    )
    mx, ex, _ = L.unpack64(*x)
    my, ey, _ = L.unpack64(*y)
    X = L.shl64(mx, Imm(10))  # leading bit at 62
    Y = L.shl64(my, Imm(10))
    d = L.op("min", L.op("sub", ex, ey), Imm(64), sign="u")
    ys, lost = L.shr_n(list(Y), d)
    ys[0] = L.op("or", ys[0], L.sel(Imm(1), Imm(0), lost))
    sub2 = L.setp("lt", L.op("xor", x[1], y[1]), Imm(0), sign="s")
    S = L.addsub_n(list(X), ys, sub2)
    c = L.clz64((S[0], S[1]))
    N = L.shl64((S[0], S[1]), c)
    be = L.op("sub", L.op("add", ex, Imm(1)), c)
    sx = L.op("and", x[1], Imm(SIGN))
    lo, hi = L.round_pack64(sx, be, N, Imm(0), rnd)
    zero = L.pair_zero((S[0], S[1]))  # exact cancellation: +0 (-0 in rm)
    lo, hi = L.sel(Imm(0), lo, zero), L.sel(zs, hi, zero)
    return L.apply(sp, lo, hi)


def expand_dadd(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    a, b = _pairs(ins)
    _out(L, ins, *_dadd(L, a, b, ins.mod("rnd")))
    return L.s.code


def expand_dmul(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    a, b = _pairs(ins)
    _out(L, ins, *L.dmul(a, b, ins.mod("rnd")))
    return L.s.code


def _dfma(L: _L, a: Pair, b: Pair, c: Pair, rnd: str) -> tuple[R, R]:
    psg = L.op("and", L.op("xor", a[1], b[1]), Imm(SIGN))
    csg = L.op("and", c[1], Imm(SIGN))
    zs = Imm(SIGN if rnd == "rm" else 0)
    ca, cb, cc = L.clsr(a), L.clsr(b), L.clsr(c)
    subr = L.op("shr", L.op("xor", psg, csg), Imm(31))
    pz = L.op("or", ca["zero"], cb["zero"])
    pinf = L.op("or", ca["inf"], cb["inf"])
    nan = L.op("or", L.op("or", ca["nan"], cb["nan"]), cc["nan"])
    nan = L.op("or", nan, L.op("and", pinf, pz))
    nan = L.op("or", nan, L.op("and", L.op("and", pinf, cc["inf"]), subr))
    czero = cc["zero"]
    zsign = L.sel(zs, psg, L.setp("ne", subr, Imm(0)))
    sp = L.special(
        [
            (pz, c[0], c[1]),  # a zero product: exactly c ...
            (L.op("and", pz, czero), Imm(0), zsign),  # ... two zeros: the sum's sign
            (cc["inf"], c[0], c[1]),
            (pinf, Imm(0), L.op("or", psg, Imm(0x7FF00000))),
            (nan, Imm(M32), Imm(0x7FFFFFFF)),
        ]
    )
    ma, ea, _ = L.unpack64(*a)
    mb, eb, _ = L.unpack64(*b)
    mc, ec, _ = L.unpack64(*c)
    w = list(L.mul64x64(ma, mb))  # < 2^106, leading bit at 104 or 105
    top105 = L.setp("ne", L.op("and", w[3], Imm(0x200)), Imm(0))
    sp_ = L.sel(Imm(20), Imm(21), top105)
    w20 = [L.op("shl", w[0], Imm(20))] + [
        L.op("or", L.op("shl", w[i], Imm(20)), L.op("shr", w[i - 1], Imm(12))) for i in range(1, 4)
    ]
    w21 = [L.op("shl", w20[0], Imm(1))] + [
        L.op("or", L.op("shl", w20[i], Imm(1)), L.op("shr", w20[i - 1], Imm(31))) for i in range(1, 4)
    ]
    P4 = [L.sel(x, y, top105) for x, y in zip(w20, w21, strict=True)]  # leading bit at 125
    # the weight of each frame's bit 125, biased by 1023: the product's is ea + eb - 1002 - sp
    # (a * b = P4 * 2^(ea + eb - 2150 - sp)), the addend's (mc << 73) is ec
    tp = L.op("sub", L.op("add", ea, eb), L.op("add", sp_, Imm(1002)))
    tc = ec
    hi73 = L.op("or", L.op("shl", mc[1], Imm(9)), L.op("shr", mc[0], Imm(23)))
    C4 = [Imm(0), Imm(0), L.op("shl", mc[0], Imm(9)), hi73]  # mc << 73 (= 64 + 9)
    p_big = L.setp("ge", tp, tc, sign="s")
    p_big = L.setp("ne", czero, Imm(0), bop="or", c=p_big)  # a zero addend never leads
    d = L.op("sub", tp, tc)
    d = L.sel(d, L.op("sub", Imm(0), d), p_big)
    d = L.op("min", d, Imm(128), sign="u")
    big = [L.sel(x, y, p_big) for x, y in zip(P4, C4, strict=True)]
    small = [L.sel(y, x, p_big) for x, y in zip(P4, C4, strict=True)]
    bsg = L.sel(psg, csg, p_big)
    tb = L.sel(tp, tc, p_big)
    small, lost = L.shr_n(small, d)
    small[0] = L.op("or", small[0], L.sel(Imm(1), Imm(0), lost))
    sub2 = L.setp("ne", L.op("xor", psg, csg), Imm(0))
    S = L.addsub_n(big, small, sub2)
    neg = L.setp("lt", S[3], Imm(0), sign="s")  # only a subtraction can go negative
    NS = L.neg_n(S)
    S = [L.sel(x, y, neg) for x, y in zip(NS, S, strict=True)]
    rsg = L.op("xor", bsg, L.sel(Imm(SIGN), Imm(0), neg))
    cz = L.clz_n(S)
    N = L.shl_n(S, L.op("min", cz, Imm(127), sign="u"))
    sticky = L.op("or", N[0], N[1])
    # S = N * 2^-cz in units of 2^(max(tp, tc) - 1023 - 125); N's top pair carries the leading bit
    # at 63, so its rounding exponent is max(tp, tc) + 2 - cz
    be = L.op("sub", L.op("add", tb, Imm(2)), cz)
    lo, hi = L.round_pack64(rsg, be, (N[2], N[3]), sticky, rnd)
    zero = L.setp("eq", cz, Imm(128))  # exact cancellation: +0 (-0 in rm)
    lo, hi = L.sel(Imm(0), lo, zero), L.sel(zs, hi, zero)
    return L.apply(sp, lo, hi)


def expand_dfma(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    a, b, c = _pairs(ins)
    _out(L, ins, *_dfma(L, a, b, c, ins.mod("rnd")))
    return L.s.code


def _ddiv(L: _L, a: Pair, b: Pair, rnd: str) -> tuple[R, R]:
    sgn = L.op("and", L.op("xor", a[1], b[1]), Imm(SIGN))
    ca, cb = L.cls(a), L.cls(b)
    to_inf = L.plop("or", ca["inf"], cb["zero"])
    to_zero = L.plop("or", ca["zero"], cb["inf"])
    nan = L.plop("or", ca["nan"], cb["nan"])
    nan = L.plop("or", nan, L.plop("and", ca["inf"], cb["inf"]))
    nan = L.plop("or", nan, L.plop("and", ca["zero"], cb["zero"]))
    sp = L.special(
        [
            (to_inf, Imm(0), L.op("or", sgn, Imm(0x7FF00000))),  # x/0, inf/x
            (to_zero, Imm(0), sgn),  # 0/x, x/inf
            (nan, Imm(M32), Imm(0x7FFFFFFF)),  # 0/0, inf/inf, NaN
        ]
    )
    ma, ea, _ = L.unpack64(*a)
    mb, eb, _ = L.unpack64(*b)
    lt = L.cmp64("lt", ma, mb, False)
    r0 = L.selp2(L.shl64(ma, Imm(1)), ma, lt)  # mb <= r < 2 mb
    be = L.op("sub", L.op("add", L.op("sub", ea, eb), Imm(1023)), L.sel(Imm(1), Imm(0), lt))
    rl, rh, ql, qh = L.tmp(), L.tmp(), L.tmp(), L.tmp()
    L.mov(rl, r0[0])
    L.mov(rh, r0[1])
    L.mov(ql, Imm(0))
    L.mov(qh, Imm(0))
    dl, dh = mb

    def step() -> None:
        ge = L.cmp64("ge", (rl, rh), (dl, dh), False)
        bw = L.setp("lt", rl, dl, bop="and", c=ge)
        L.into(rl, "sub", rl, dl, guard=ge)
        L.into(rh, "sub", rh, dh, guard=ge)
        L.into(rh, "sub", rh, Imm(1), guard=bw)
        L.into(qh, "or", L.op("shl", qh, Imm(1)), L.op("shr", ql, Imm(31)))
        L.into(ql, "shl", ql, Imm(1))
        L.into(ql, "or", ql, Imm(1), guard=ge)
        L.into(rh, "or", L.op("shl", rh, Imm(1)), L.op("shr", rl, Imm(31)))
        L.into(rl, "shl", rl, Imm(1))

    L.loop(56, step)  # q has its leading bit at 55
    m = L.shl64((ql, qh), Imm(8))
    sticky = L.op("or", rl, rh)
    lo, hi = L.round_pack64(sgn, be, m, sticky, rnd)
    return L.apply(sp, lo, hi)


def expand_ddiv(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    a, b = _pairs(ins)
    _out(L, ins, *_ddiv(L, a, b, ins.mod("rnd")))
    return L.s.code


def _dsqrt(L: _L, a: Pair, rnd: str) -> tuple[R, R]:
    ca = L.cls(a)
    keep = L.plop("or", ca["zero"], ca["inf"])  # +-0, +inf: themselves
    neg = L.setp("lt", a[1], Imm(0), sign="s")
    nan = L.plop("or", ca["nan"], L.plop("and", neg, ca["zero"].inv()))
    sp = L.special([(keep, a[0], a[1]), (nan, Imm(M32), Imm(0x7FFFFFFF))])
    ma, ea, _ = L.unpack64(*a)  # a = ma * 2^(ea - 1075)
    odd = L.setp("eq", L.op("and", ea, Imm(1)), Imm(0))  # ea - 1075 odd
    M = L.selp2(L.shl64(ma, Imm(1)), ma, odd)  # a = M * 2^E, E even, M < 2^54
    E = L.op("sub", L.op("sub", ea, Imm(1075)), L.sel(Imm(1), Imm(0), odd))
    Y = L.shl64(M, Imm(10))  # M's bit 53 at bit 63
    yl, yh, rl, rh, ql, qh = (L.tmp() for _ in range(6))
    L.mov(yl, Y[0])
    L.mov(yh, Y[1])
    for x in (rl, rh, ql, qh):
        L.mov(x, Imm(0))

    def step() -> None:
        # r = 4 r + the next two bits of the operand
        L.into(rh, "or", L.op("shl", rh, Imm(2)), L.op("shr", rl, Imm(30)))
        L.into(rl, "or", L.op("shl", rl, Imm(2)), L.op("shr", yh, Imm(30)))
        L.into(yh, "or", L.op("shl", yh, Imm(2)), L.op("shr", yl, Imm(30)))
        L.into(yl, "shl", yl, Imm(2))
        tl = L.op("or", L.op("shl", ql, Imm(2)), Imm(1))  # t = 4 q + 1
        th = L.op("or", L.op("shl", qh, Imm(2)), L.op("shr", ql, Imm(30)))
        ge = L.cmp64("ge", (rl, rh), (tl, th), False)
        bw = L.setp("lt", rl, tl, bop="and", c=ge)
        L.into(rl, "sub", rl, tl, guard=ge)
        L.into(rh, "sub", rh, th, guard=ge)
        L.into(rh, "sub", rh, Imm(1), guard=bw)
        L.into(qh, "or", L.op("shl", qh, Imm(1)), L.op("shr", ql, Imm(31)))
        L.into(ql, "shl", ql, Imm(1))
        L.into(ql, "or", ql, Imm(1), guard=ge)

    L.loop(56, step)  # q = isqrt(M * 2^58) in [2^55, 2^56)
    m = L.shl64((ql, qh), Imm(8))
    sticky = L.op("or", rl, rh)
    be = L.op("add", L.op("shr", E, Imm(1), sign="s"), Imm(1049))
    lo, hi = L.round_pack64(Imm(0), be, m, sticky, rnd)
    return L.apply(sp, lo, hi)


def expand_dsqrt(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    (a,) = _pairs(ins)
    _out(L, ins, *_dsqrt(L, a, ins.mod("rnd")))
    return L.s.code


_ORDER = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def expand_dsetp(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    a, b = _pairs(ins)
    cmp, bop = ins.mod("cmp"), ins.mod("bop")
    nan = L.plop("or", L.dnan(a), L.dnan(b))
    if cmp == "num":
        r = nan.inv()
    elif cmp == "nan":
        r = nan
    else:
        base = cmp[:2]
        k = L.cmp64(_ORDER[base], L.dkey(a), L.dkey(b), True)
        r = L.plop("or", k, nan) if len(cmp) == 3 else L.plop("and", k, nan.inv())
    t = L.sel(Imm(1), Imm(0), r)
    if bop is None:
        L.setp_into(ins.d[0], "ne", t, Imm(0))
    else:
        L.setp_into(ins.d[0], "ne", t, Imm(0), bop=bop, c=ins.s[4])
    return L.s.code


def expand_d2f(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    (a,) = _pairs(ins)
    L.s.mov(ins.d[0], L.d2f(a, ins.mod("rnd"), ins.mod("ftz")))
    return L.s.code


def expand_f2d(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    _out(L, ins, *L.f2d(ins.s[0], ins.mod("ftz")))
    return L.s.code


def expand_i2d(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    (a,) = _pairs(ins)
    _out(L, ins, *L.i2d(a, ins.mod("sign") == "s", ins.mod("rnd")))
    return L.s.code


def _d2int(L: _L, a: Pair, irnd: str, signed: bool, bits: int) -> tuple[R, R]:
    """(lo, hi) of cvt.irnd.{s,u}bits.f64: rounded, saturated, NaN -> 1 << (bits - 1)."""
    rl, rh = L.drnd(a, irnd)  # integral (or inf/NaN)
    e = L.op("shr", L.op("and", rh, Imm(0x7FFFFFFF)), Imm(20))
    mh = L.op("and", rh, Imm(0xFFFFF))
    L.into(mh, "or", mh, Imm(0x100000), guard=L.setp("ne", e, Imm(0)))
    left = L.shl64((rl, mh), L.op("max", L.op("sub", e, Imm(1075)), Imm(0), sign="s"))
    right = L.shr64((rl, mh), L.op("max", L.op("sub", Imm(1075), e), Imm(0), sign="s"), False)
    mag = L.selp2(left, right, L.setp("ge", e, Imm(1075)))
    neg = L.setp("lt", rh, Imm(0), sign="s")
    lim = 1023 + bits - (1 if signed else 0)  # |r| >= 2^(bits-1) (signed) / 2^bits: out of range
    over = L.setp("ge", e, Imm(lim))
    if signed:
        nv = L.neg64(mag)
        vl, vh = L.selp2(nv, mag, neg)
        # -2^(bits-1) exactly is in range; anything larger in magnitude saturates to the minimum
        frac0 = L.setp("eq", L.op("or", rl, L.op("and", rh, Imm(0xFFFFF))), Imm(0))
        exact_min = L.plop("and", L.setp("eq", e, Imm(lim), bop="and", c=frac0), neg)
        mn = (Imm(0), Imm(SIGN)) if bits == 64 else (Imm(SIGN), Imm(M32))
        mx = (Imm(M32), Imm(0x7FFFFFFF)) if bits == 64 else (Imm(0x7FFFFFFF), Imm(0))
        sat = L.selp2(mn, mx, neg)
        vl, vh = L.selp2(sat, (vl, vh), L.plop("and", over, exact_min.inv()))
        if bits == 32:
            vh = L.op("shr", vl, Imm(31), sign="s")
    else:
        mx = (Imm(M32), Imm(M32)) if bits == 64 else (Imm(M32), Imm(0))
        vl, vh = L.selp2(mx, mag, over)
        vl, vh = L.sel(Imm(0), vl, neg), L.sel(Imm(0), vh, neg)
    nan = L.dnan(a)
    nan_lo, nan_hi = (Imm(0), Imm(SIGN)) if bits == 64 else (Imm(SIGN), Imm(M32 if signed else 0))
    return L.sel(nan_lo, vl, nan), L.sel(nan_hi, vh, nan)


def expand_d2i(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    (a,) = _pairs(ins)
    lo, _ = _d2int(L, a, ins.mod("irnd") or "rzi", ins.mod("sign") == "s", 32)
    L.s.mov(ins.d[0], lo)
    return L.s.code


def expand_d2l(ins: MInstr, fr: object) -> list[MInstr]:
    L = _L(Seq(fr))  # type: ignore[arg-type]
    (a,) = _pairs(ins)
    _out(L, ins, *_d2int(L, a, ins.mod("irnd") or "rzi", ins.mod("sign") == "s", 64))
    return L.s.code


F64_EXPANDERS: dict[str, Callable[[MInstr, object], list[MInstr]]] = {
    "dadd": expand_dadd,
    "dmul": expand_dmul,
    "dfma": expand_dfma,
    "ddiv": expand_ddiv,
    "dsqrt": expand_dsqrt,
    "dsetp": expand_dsetp,
    "d2f": expand_d2f,
    "f2d": expand_f2d,
    "i2d": expand_i2d,
    "d2i": expand_d2i,
    "d2l": expand_d2l,
}

# joins the framework's registry (and its routines) when imported, after softfloat.py's ops
register_floats(F64_EXPANDERS)
