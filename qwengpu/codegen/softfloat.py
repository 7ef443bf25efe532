"""Float ops as sequences of integer machine instructions (a soft-float library in machine code).

Why: the circuit in the transformer weights implements only the integer subset of the ISA
(``soft.WEIGHT_OPS``); a float unit does not fit in the residual stream next to the datapath. So
every float op of a lowered program (``fadd fsub fmul ffma fmin fmax fsetp i2f f2i frnd``) is
rewritten into straight-line integer code that gives the same bits as ``qwengpu.simt.fp32`` (the
interpreter's semantics) for every input: all four rounding modes, ``.ftz``, ``.sat``, PTX NaN
rules (canonical NaN 0x7FFFFFFF, min/max ignore a NaN operand, -0 < +0), saturating conversions.

Interface: ``FLOAT_EXPANDERS[op](ins, fr) -> list[MInstr]`` with ``fr`` a ``soft.Fresh``; the
expanders join ``softcore.EXPANDERS`` when this module is imported (``softcore.py`` states the
framework's rules: the destination is written last, guards are applied by the framework).
``expand_floats(prog)`` applies only these expanders (used by the tests and ``bench/softfloat_cost.py``).

Design (all sequences are branch-free unless ``MUL_SHAPE`` picks the fixed-trip product loop,
so SIMT lanes with different data never diverge):

* Values are unpacked with integer ops (``clz`` normalizes subnormals), computed exactly on
  integer significands, and rounded by one routine, :meth:`_B.round_pack`: the significand has its
  leading one at bit 30 with every bit below the kept ones folded ("sticky") into bit 0, so one
  add and one shift round in any mode; subnormal results shift further right; the exponent is
  added to the packed word so a carry out of the significand bumps the exponent, and a
  ``min`` with the overflow value (inf or max-finite, depending on mode and sign) saturates.
* ``fadd``: magnitudes sorted with ``max``/``min``, the smaller aligned with a sticky bit
  (round-to-odd at the last bit, exact because the larger is even there), added or subtracted
  in one word, normalized with ``clz``.
* ``fmul``: the 24x24-bit significand product is built from three 8-bit chunks of one
  significand: a chunk sits in the top byte of a register whose low 24 bits accumulate the
  partial product, and one doubling both shifts the next multiplier bit into the sign position
  and doubles the accumulator (3 instructions per bit: ``setp``, ``add``, guarded ``add``), so no
  ``mul`` is needed (``MUL_SHAPE`` selects a looped variant, or ``mulhi``+``mul``).
* ``ffma``: the exact 48-bit product and the addend are placed in a 64-bit window (two words),
  the smaller shifted right with a sticky bit, added or subtracted with carries, negated when
  negative, normalized (``clz`` over two words) and rounded once.
* On a machine with the multiplier and the float adders (``Options.native_mul`` and
  ``native_fadd``, the Qwen3.5-2B layer shape), ``mul.rn`` and ``fma.rn`` (``.ftz`` or not, no
  ``.sat``) first try a fast path: the exact 48-bit significand product from 12 × 12 ``mul`` rows
  (``_product_words``); ``mul`` rounds it in integer (``_round_product``: in the fast range the
  result is always normal), ``fma`` makes it two exact floats X + L (``_product_pieces``) and
  rounds X + L + c once on ``fadd``/``fsub`` rows, one of them rounding to odd (the adder's two
  modes; ``_ffma_on_adders``). Lanes whose operands are out of
  its range (a subnormal, infinite or NaN operand, a product below 2^-80 or above 2^125, an addend
  at or above 2^126) branch to the integer sequence, a cold routine: a warp that has none pays
  one ``bra``.
* ``fsetp``: signed compare of order keys (x >= +0: x; else 0x80000000 - x, so -0 = +0), a
  NaN replacing one key by a value that forces the result; ``fmin/fmax`` on the raw words
  (signed order, reversed for two negatives), a NaN replaced by the value that loses.
* Immediate operands are folded while the sequence is built (constant unpacking, constant
  multipliers become shift-and-add), so e.g. ``fmul x, 2^25`` is much shorter.

Cost (``python bench/softfloat_cost.py``; machine instructions, = warp instructions issued;
with the multiplier and the adders: fmul.rn 56 and ffma.rn 85 on the fast path, 71 / 154 for the
integer sequence): fadd 47-52, fmul 127-141, ffma 210-226, fmin/fmax 11-21, fsetp 4-16, i2f 11-20, f2i 18-25,
frnd 3-21. ``fdiv``/``fsqrt``: restoring loops; ``fex2`` (ex2.approx, rn(2^x)): shift-and-add
(BKM) steps and, for the last 31, one product: ~330 rows and ~830 issued on the multiplier
(``ex2_model.py``; exact on all 2^32 inputs, ``bench/ex2_exhaustive.py``). Not here:
lg2/sin/cos/tanh.approx, which the lowering refuses.
"""

from __future__ import annotations

from collections.abc import Callable

from qwengpu.codegen import ex2_model as em
from qwengpu.codegen import sqrt_model as sm
from qwengpu.codegen.softcore import Fresh, Routine, call, register_floats
from qwengpu.isa.instr import PT, Imm, MInstr, P, R
from qwengpu.simt.memory import GLOBAL_BASE

SIGN = 0x80000000
ABS = 0x7FFFFFFF
INF = 0x7F800000
CNAN = 0x7FFFFFFF
MAXF = 0x7F7FFFFF
ONE = 0x3F800000
M32 = 0xFFFFFFFF
TRUE = P(PT)
FALSE = P(PT, True)

#: how the 24x24-bit significand product is built: ``unrolled`` (branch-free shift-and-add,
#: 3 instructions per bit), ``loop`` (the same steps for the three multiplier bytes interleaved in
#: an 8-trip loop: a fixed trip count, so lanes never diverge; ~57 instructions less program, ~27
#: more issued), ``mul`` (``mulhi`` + ``mul``, expanded by softcore.py: longer), or ``auto``
#: (default): ``loop`` when softcore.py expands with ``Options.mul`` = loop/bitloop (its ``auto``
#: falls back to that when the program does not fit the ROM), else ``unrolled``
MUL_SHAPE = "auto"
MUL_SHAPES = ("auto", "unrolled", "loop", "mul")

Val = R | Imm


def _s32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v & SIGN else v


def _fold(op: str, xs: list[int], m: dict) -> int | None:
    """The value of an integer op on constants, exactly as sim.py computes it."""
    sign = m.get("sign", "u")
    if op == "mov":
        return xs[0]
    if op == "add":
        return (xs[0] + xs[1]) & M32
    if op == "sub":
        return (xs[0] - xs[1]) & M32
    if op == "and":
        return xs[0] & xs[1]
    if op == "or":
        return xs[0] | xs[1]
    if op == "xor":
        return xs[0] ^ xs[1]
    if op == "not":
        return ~xs[0] & M32
    if op == "shl":
        return 0 if xs[1] >= 32 else (xs[0] << xs[1]) & M32
    if op == "shr":
        if sign == "s":
            return (_s32(xs[0]) >> min(xs[1], 31)) & M32
        return 0 if xs[1] >= 32 else xs[0] >> xs[1]
    if op in ("min", "max"):
        f = min if op == "min" else max
        if sign == "s":
            return f(_s32(xs[0]), _s32(xs[1])) & M32
        return f(xs[0], xs[1])
    if op == "clz":
        return 32 - xs[0].bit_length()
    if op == "mul":
        return (xs[0] * xs[1]) & M32
    if op == "mulhi":
        if sign == "s":
            return ((_s32(xs[0]) * _s32(xs[1])) >> 32) & M32
        return (xs[0] * xs[1]) >> 32
    return None


def _cmp(cmp: str, x: int, y: int) -> bool:
    return {
        "eq": x == y,
        "ne": x != y,
        "lt": x < y,
        "le": x <= y,
        "gt": x > y,
        "ge": x >= y,
    }[cmp]


def _pconst(p: P) -> bool | None:
    """The value of a constant predicate (PT / !PT), else None."""
    if p.n == PT:
        return not p.neg
    return None


class _B:
    """Builds one expansion: integer ops over fresh temporaries, folding constants."""

    def __init__(self, fr: object) -> None:
        self.fr = fr
        self.out: list[MInstr] = []
        self.owned: set[int] = set()  # temporaries created here ...
        self.shared: set[int] = set()  # ... minus those that got a second name (identity folds)

    def _same(self, v: Val) -> Val:
        """``v`` returned unchanged by an identity fold: it may now have two names, so it must not
        be updated in place any more."""
        if isinstance(v, R):
            self.shared.add(v.n)
        return v

    # ---- emitting
    def _emit(self, op: str, d: tuple, s: tuple, guard: P | None = None, **m: object) -> MInstr:
        ins = self.fr.emit(op, d, s, guard, **m)  # type: ignore[attr-defined]
        self.out.append(ins)
        return ins

    def reg(self) -> R:
        r = self.fr.r()  # type: ignore[attr-defined]
        self.owned.add(r.n)
        return r

    def op(self, op: str, *s: Val, **m: object) -> Val:
        """d = op(s...) in a fresh temporary, or the folded immediate."""
        if all(isinstance(x, Imm) for x in s):
            v = _fold(op, [x.v for x in s], m)  # type: ignore[union-attr]
            if v is not None:
                return Imm(v)
        d = self.reg()
        self._emit(op, (d,), s, **m)
        return d

    def setp(
        self, cmp: str, a: Val, b: Val, sign: str = "u", bop: str | None = None, c: P | None = None
    ) -> P:
        """pd = (a cmp b) [bop c] in a fresh predicate (or a constant / ``c`` when it folds)."""
        if isinstance(a, Imm) and isinstance(b, Imm):
            x, y = (_s32(a.v), _s32(b.v)) if sign == "s" else (a.v, b.v)
            r = _cmp(cmp, x, y)
            if bop is None:
                return TRUE if r else FALSE
            assert c is not None
            if bop == "and":
                return c if r else FALSE
            if bop == "or":
                return TRUE if r else c
            return c.inv() if r else c  # xor
        if bop is not None:
            assert c is not None
            cc = _pconst(c)
            if cc is not None:
                if bop == "and" and not cc:
                    return FALSE
                if bop == "or" and cc:
                    return TRUE
                if bop in ("and", "or"):  # (x and T) = x, (x or F) = x
                    bop, c = None, None
                elif cc:  # x xor T = !x
                    return self.setp(_NEG_CMP[cmp], a, b, sign)
                else:
                    bop, c = None, None
        p = self.fr.p()  # type: ignore[attr-defined]
        m: dict[str, object] = {"cmp": cmp, "sign": sign}
        s: tuple = (a, b)
        if bop is not None:
            m["bop"] = bop
            s = (a, b, c)
        self._emit("setp", (p,), s, **m)
        return p

    def sel(self, a: Val, b: Val, p: P) -> Val:
        """p ? a : b."""
        pc = _pconst(p)
        if pc is not None:
            return self._same(a if pc else b)
        if a == b:
            return self._same(a)
        return self.op("sel", a, b, p)  # type: ignore[arg-type]

    def cond(self, p: P, x: Val, op: str, *s: Val, **m: object) -> Val:
        """p ? op(s...) : x. ``x`` must not be used after this call (it may be updated in place by
        a guarded instruction when it is a temporary of this sequence)."""
        pc = _pconst(p)
        if pc is not None:
            return self.op(op, *s, **m) if pc else self._same(x)
        if isinstance(x, R) and x.n in self.owned and x.n not in self.shared:
            if all(isinstance(y, Imm) for y in s) and op != "mov":
                v = _fold(op, [y.v for y in s], m)  # type: ignore[union-attr]
                if v is not None:
                    op, s, m = "mov", (Imm(v),), {}
            self._emit(op, (x,), s, guard=p, **m)
            return x
        return self.sel(self.op(op, *s, **m), x, p)

    # ---- shorthands
    def add(self, a: Val, b: Val) -> Val:
        if isinstance(b, Imm) and b.v == 0:
            return self._same(a)
        if isinstance(a, Imm) and a.v == 0:
            return self._same(b)
        return self.op("add", a, b)

    def sub(self, a: Val, b: Val) -> Val:
        if isinstance(b, Imm) and b.v == 0:
            return self._same(a)
        return self.op("sub", a, b)

    def and_(self, a: Val, b: Val) -> Val:
        if isinstance(b, Imm) and b.v == M32:
            return self._same(a)
        if isinstance(b, Imm) and b.v == 0 or isinstance(a, Imm) and a.v == 0:
            return Imm(0)
        return self.op("and", a, b)

    def or_(self, a: Val, b: Val) -> Val:
        if isinstance(b, Imm) and b.v == 0:
            return self._same(a)
        if isinstance(a, Imm) and a.v == 0:
            return self._same(b)
        return self.op("or", a, b)

    def xor(self, a: Val, b: Val) -> Val:
        if isinstance(b, Imm) and b.v == 0:
            return self._same(a)
        return self.op("xor", a, b)

    def shl(self, a: Val, b: Val) -> Val:
        if isinstance(b, Imm) and b.v == 0:
            return self._same(a)
        if isinstance(a, Imm) and a.v == 0:
            return Imm(0)
        return self.op("shl", a, b)

    def shr(self, a: Val, b: Val, sign: str = "u") -> Val:
        if isinstance(b, Imm) and b.v == 0:
            return self._same(a)
        if isinstance(a, Imm) and a.v == 0:
            return Imm(0)
        return self.op("shr", a, b, sign=sign)

    # ---- products of 16-bit halves on the multiplier (one ``mul`` row each, exact in a word; a 32 x 32
    # ``mulhi`` is 13 rows there): ex2's polynomial tail and the root's Newton steps
    def mul(self, x: Val, y: Val) -> Val:
        """The low word of x * y: one row of the multiplier."""
        return self.op("mul", x, y)

    def halves(self, x: Val) -> tuple[Val, Val]:
        """(x >> 16, x & 0xFFFF)."""
        return self.shr(x, Imm(16)), self.and_(x, Imm(0xFFFF))

    def hi16(self, x: Val, y: tuple[Val, Val]) -> Val:
        """The high word of x * y for x <= 2^16 (y as its halves): exact."""
        hh = self.mul(x, y[0])
        return self.shr(self.add(hh, self.shr(self.mul(x, y[1]), Imm(16))), Imm(16))

    def hiap(self, x: tuple[Val, Val], y: tuple[Val, Val]) -> Val:
        """The high word of two full words (as halves) from three half products: 0 to 3 below."""
        hh = self.mul(x[0], y[0])
        hl = self.shr(self.mul(x[0], y[1]), Imm(16))
        return self.add(hh, self.add(hl, self.shr(self.mul(x[1], y[0]), Imm(16))))

    def add_c(self, x: Val, y: Val) -> tuple[Val, P]:
        """(x + y mod 2^32, its carry): the add and one compare of the sum with y."""
        s = self.add(x, y)
        return s, self.setp("lt", s, y)

    def plus(self, x: Val, *carries: P) -> Val:
        """x plus each carry that holds (a guarded add of 1 for each)."""
        for c in carries:
            x = self.cond(c, x, "add", x, Imm(1))
        return x

    def minu(self, a: Val, b: Val) -> Val:
        return self.op("min", a, b, sign="u")

    def maxu(self, a: Val, b: Val) -> Val:
        return self.op("max", a, b, sign="u")

    def mins(self, a: Val, b: Val) -> Val:
        return self.op("min", a, b, sign="s")

    def maxs(self, a: Val, b: Val) -> Val:
        return self.op("max", a, b, sign="s")

    def fresh_copy(self, v: Val) -> R:
        """A new temporary holding ``v`` that may be updated in place (loop-carried)."""
        if isinstance(v, R) and v.n in self.owned and v.n not in self.shared:
            return v
        d = self.reg()
        self._emit("mov", (d,), (v,))
        return d

    def label(self) -> int:
        return self.fr.label()  # type: ignore[attr-defined]

    def place(self, lbl: int) -> None:
        self.out.append(MInstr("@label", target=lbl, ptx=self.fr.ptx))  # type: ignore[attr-defined]

    def bra(self, lbl: int, guard: P) -> None:
        self._emit("bra", (), (), guard=guard).target = lbl

    def finish(self, d: R | P, v: Val | P) -> list[MInstr]:
        """Write the value to the destination (the last instruction of the sequence)."""
        if isinstance(d, P):
            assert isinstance(v, P)
            last = self.out[-1] if self.out else None
            if (
                last is not None
                and last.op == "setp"
                and last.guard is None
                and last.d == (v,)
                and not v.neg
                and v.n != PT
                and not any(isinstance(y, P) and y.n == v.n for x in self.out for y in (*x.s, x.guard))
            ):
                last.d = (d,)
            else:
                self.out.append(
                    self.fr.emit("setp", (d,), (Imm(0), Imm(0), v), cmp="eq", sign="u", bop="and")  # type: ignore[attr-defined]
                )
            return self.out
        assert not isinstance(v, P)
        last = self.out[-1] if self.out else None
        if (
            isinstance(v, R)
            and last is not None
            and last.guard is None
            and last.d == (v,)
            and sum(1 for x in self.out if v in x.d) == 1
            and not any(v in x.s for x in self.out)
        ):
            last.d = (d,)
        else:
            self._emit("mov", (d,), (v,))
        return self.out

    # =========================================================================================
    # shared pieces
    # =========================================================================================
    def flush_mag(self, aa: Val) -> Val:
        """ftz on a magnitude: subnormal -> 0."""
        return self.sel(Imm(0), aa, self.setp("lt", aa, Imm(0x800000)))

    def flush_word(self, a: Val) -> Val:
        """ftz on a float word: subnormal -> zero of the same sign (NaN payload kept)."""
        aa = self.and_(a, Imm(ABS))
        return self.sel(self.and_(a, Imm(SIGN)), a, self.setp("lt", aa, Imm(0x800000)))

    def unpack_top(self, mag: Val) -> tuple[Val, Val]:
        """(M, x) for a finite nonzero magnitude: M in [2^31, 2^32) with 8 zero low bits and
        value = M * 2^(x - 150) (subnormals normalized). Garbage for zero/inf/NaN."""
        k = self.op("clz", mag)
        s8 = self.maxu(k, Imm(8))
        m = self.or_(self.shl(mag, s8), Imm(SIGN))
        e1 = self.maxu(self.shr(mag, Imm(23)), Imm(1))
        return m, self.sub(e1, s8)

    def round_pack(
        self, sgn: Val, e: Val, mn: Val, rnd: str, ftz: bool, subnormal: bool = True, ovf: bool = True
    ) -> Val:
        """The magnitude bits (no sign) of ``mn * 2^(e - 156)`` rounded to float32 in mode ``rnd``.

        ``mn``: leading one at bit 30 (or 0), sticky information folded into bit 0 (at least 7
        bits lie below the rounding point). ``e`` (signed) is the biased exponent minus one:
        the result is normal when e >= 0. ``sgn`` (0 or 0x80000000) decides directed rounding
        and the overflow value. ``subnormal=False``: the caller guarantees e >= 0 (``mn`` may then
        have its leading one below bit 30 when e == 0: a subnormal result packed as it is);
        ``ovf=False``: it guarantees no overflow."""
        if subnormal:
            sh = self.maxs(self.sub(Imm(7), e), Imm(7))
            if rnd in ("rp", "rm"):
                sh = self.minu(sh, Imm(31))  # round-up must survive a shift by >= 32
        else:
            sh = Imm(7)
        if rnd == "rn":
            halfm1 = self.shr(Imm(0x7FFFFFFF), self.sub(Imm(32), sh))
            odd = self.and_(self.shr(mn, sh), Imm(1))
            r = self.shr(self.add(mn, self.add(halfm1, odd)), sh)
        elif rnd == "rz":
            r = self.shr(mn, sh)
        else:
            mask = self.shr(Imm(M32), self.sub(Imm(32), sh))
            neg = self.shr(sgn, Imm(31), sign="s")  # all ones when negative
            up = neg if rnd == "rm" else self.op("not", neg)
            r = self.shr(self.add(mn, self.and_(mask, up)), sh)
        ep = self.maxs(e, Imm(0)) if subnormal else e
        p = self.add(self.shl(ep, Imm(23)), r)
        if ovf:
            if rnd == "rn":
                lim: Val = Imm(INF)
            elif rnd == "rz":
                lim = Imm(MAXF)
            elif rnd == "rp":
                lim = self.add(Imm(INF), neg)
            else:
                lim = self.sub(Imm(MAXF), neg)
            p = self.minu(p, lim)
        if ftz:
            p = self.sel(Imm(0), p, self.setp("lt", p, Imm(0x800000)))
        return p

    def saturate(self, res: Val) -> Val:
        """.sat on a result whose NaN was already replaced by 0: clamp to [+0, 1]."""
        return self.maxs(self.mins(res, Imm(ONE)), Imm(0))

    # ---- significand product
    def chunk_mul(self, c: Val, ma: Val, top_one: bool = False) -> Val:
        """ma * (c >> 24) for ma < 2^24 and c with zero low 24 bits, by MSB-first shift-and-add in
        one register (the multiplier byte above the growing partial product)."""
        if isinstance(c, Imm):
            v = c.v >> 24
            acc: Val = Imm(0)
            for j in range(8):
                if v >> j & 1:
                    acc = self.add(acc, self.shl(ma, Imm(j)))
            return acc
        r = c
        for j in range(8):
            if j == 0 and top_one:
                r = self.add(self.add(r, r), ma)
                continue
            p = self.setp("lt", r, Imm(0), sign="s")
            r = self.add(r, r)
            r = self.cond(p, r, "add", r, ma)
        return r

    def mant_product(self, ma_top: Val, mb_top: Val) -> tuple[Val, Val, Val, Val]:
        """Exact product of two top-aligned significands (bit 31 set, low 8 bits zero):
        (T, S, p0, ma) with P = ma*mb in [2^46, 2^48), T = P >> 16, and the low 16 bits of P
        = ((S & 0xFF) << 8) | (p0 & 0xFF)."""
        if isinstance(ma_top, Imm) and not isinstance(mb_top, Imm):
            ma_top, mb_top = mb_top, ma_top
        ma = self.shr(ma_top, Imm(8))
        shape = MUL_SHAPE
        if shape == "auto":
            opts = getattr(self.fr, "opts", None)
            if getattr(opts, "native_mul", False):
                shape = "mul"  # the multiplier in the weights: mul + mulhi (a few rows)
            else:
                shape = "loop" if getattr(opts, "mul", None) in ("loop", "bitloop") else "unrolled"
        if isinstance(mb_top, Imm) and shape != "mul":
            shape = "unrolled"  # a constant multiplier: shift-and-add of its set bits
        if shape == "mul":
            mb = self.shr(mb_top, Imm(8))
            lo = self.op("mul", ma, mb)  # P mod 2^32
            if isinstance(mb_top, Imm):  # a constant: mulhi's expansion folds it (fewer rows)
                return self.op("mulhi", ma_top, mb_top, sign="u"), self.shr(lo, Imm(8)), lo, ma
            # P >> 16 from 16 × 16 and 16 × 8 products (each below 2^32): with ma = ah·2^8 + al,
            # mb = bh·2^8 + bl, P >> 16 = ah·bh + (ah·bl + al·bh) >> 8 + R, R in {0, 1} (the
            # rest is below 2^17), and (P >> 16) mod 2^16 = lo >> 16 fixes R by its parity
            ah, bh = self.shr(ma_top, Imm(16)), self.shr(mb_top, Imm(16))
            q = self.op("mul", ah, bh)
            c1 = self.op("mul", ah, self.and_(mb, Imm(0xFF)))
            c2 = self.op("mul", self.and_(ma, Imm(0xFF)), bh)
            base = self.add(q, self.shr(self.add(c1, c2), Imm(8)))
            t = self.add(base, self.and_(self.xor(self.shr(lo, Imm(16)), base), Imm(1)))
            # express the low 16 bits of P as (S & 0xFF) << 8 | (p0 & 0xFF)
            return t, self.shr(lo, Imm(8)), lo, ma

        def chunk(k: int) -> Val:  # multiplier byte k (bits 8k+7..8k of mb) in the top byte
            return (
                self.and_(self.shl(mb_top, Imm(16 - 8 * k)), Imm(0xFF000000))
                if k < 2
                else self.and_(mb_top, Imm(0xFF000000))
            )

        if shape == "loop":
            rs = [self.fresh_copy(chunk(k)) for k in range(3)]
            j = self.fresh_copy(Imm(8))
            top = self.label()
            self.place(top)
            for r in rs:
                p = self.setp("lt", r, Imm(0), sign="s")
                self._emit("add", (r,), (r, r))
                self._emit("add", (r,), (r, ma), guard=p)
            self._emit("sub", (j,), (j, Imm(1)))
            self.bra(top, self.setp("ne", j, Imm(0)))
            p0, p1, p2 = rs
            s = self.add(p1, self.shr(p0, Imm(8)))
        else:  # one byte at a time (fewer live registers)
            p0 = self.chunk_mul(self.shl(mb_top, Imm(16)), ma)  # low 8 bits of mb_top are zero
            s = self.add(self.chunk_mul(chunk(1), ma), self.shr(p0, Imm(8)))
            p2 = self.chunk_mul(chunk(2), ma, top_one=True)
        t = self.add(p2, self.shr(s, Imm(8)))
        return t, s, p0, ma


def _shared(
    b: _B, name: str, args: tuple, kinds: str, fn: Callable[..., tuple], late_kinds: str = ""
) -> tuple:
    """The part of a float op that does not depend on the rounding mode, so the instances of one
    op in DIFFERENT modes (or of different ops) can share it as a routine named ``name`` (softcore.py,
    "Subroutines": routed when ``routines=auto`` measures a saving, else inline exactly as before;
    every inline instance is recorded for that measurement). Only register arguments are shared
    (immediates fold inline).

    ``fn(b, *args, shared) -> (values, late)``: ``values`` of kinds ``kinds`` ("r" register, "p"
    predicate), and ``late`` (None: none) giving the values of kinds ``late_kinds``: inline, the
    caller emits ``late`` where it wants it (e.g. after the rounding, so fewer predicates are live);
    ``shared``: building the routine's body, which must compute every result (inline code may
    leave out what its mode does not use). Returns ``(values, late)`` the same way."""
    fr = b.fr
    route = getattr(fr, "route", None)
    if route is None or not all(isinstance(a, R) for a in args):
        vals, late = fn(b, *args, False)
        return vals, late or (lambda: ())
    if route(name, "part"):  # only when chosen by name (``Options.routed``), not by a mode

        def body(s: object, ps: tuple, rs: tuple) -> None:
            bb = _B(s.fr)  # type: ignore[attr-defined]
            vals, late = fn(bb, *ps, True)
            for r, v in zip(rs, (*vals, *(late() if late else ())), strict=True):
                if isinstance(r, P):
                    bb.out += s.fr.pcopy(r, v)  # type: ignore[attr-defined]
                else:
                    bb._emit("mov", (r,), (v,))
            s.code += bb.out  # type: ignore[attr-defined]

        every = kinds + late_kinds
        dsts = tuple(fr.p() if k == "p" else b.reg() for k in every)  # type: ignore[attr-defined]
        b.out.append(call(Routine(name, "r" * len(args), every, body), args, dsts))
        return dsts[: len(kinds)], lambda: dsts[len(kinds) :]
    if not getattr(getattr(fr, "opts", None), "parts", True):  # not to be chosen: plain inline
        vals, late = fn(b, *args, False)
        return vals, late or (lambda: ())
    enclosing = getattr(fr, "enclosing", None)

    def measured(run: Callable[[], tuple]) -> tuple:
        n0 = len(b.out)
        if enclosing is not None:
            enclosing.append(name)
        try:
            got = run()
        finally:
            if enclosing is not None:
                enclosing.pop()
        size[0] += sum(1 for x in b.out[n0:] if x.op != "@label")
        fr.instances[at] = (name, name, size[0], outer)  # type: ignore[attr-defined]
        return got

    size = [0]
    outer = frozenset(enclosing or ())
    at = len(fr.instances)  # type: ignore[attr-defined]
    fr.instances.append((name, name, 0, outer))  # type: ignore[attr-defined]
    fr.site_cost[name] = len(args) + 1 + len(kinds) + len(late_kinds)  # type: ignore[attr-defined]
    vals, late = measured(lambda: fn(b, *args, False))
    return vals, (lambda: measured(late)) if late else (lambda: ())


_NEG_CMP = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "gt": "le", "le": "gt"}


def _srcs(ins: MInstr) -> list[Val]:
    return list(ins.s)


# =============================================================================================
# add / sub
# =============================================================================================
def _fadd(b: _B, a: Val, c: Val, rnd: str, ftz: bool, sat: bool) -> Val:
    name = f"fadd.core[ftz={ftz},sat={sat}]"
    (sx, pz, e, mn), late = _shared(
        b, name, (a, c), "rprr", lambda bb, x, y, _: _fadd_core(bb, x, y, ftz, sat), late_kinds="rp"
    )
    sgn = b.cond(pz, sx, "mov", Imm(SIGN if rnd == "rm" else 0))
    res = b.or_(b.round_pack(sgn, e, mn, rnd, ftz, subnormal=False), sgn)
    spec, pspec = late()
    res = b.sel(spec, res, pspec)  # inf / NaN operands
    return b.saturate(res) if sat else res


def _fadd_core(b: _B, a: Val, c: Val, ftz: bool, sat: bool) -> tuple:
    """The rounding-independent part of an add: (sign of the larger operand, exact zero from
    opposite signs, exponent, normalized significand, the result for inf/NaN operands, whether
    an operand is inf/NaN)."""
    aa, ac = b.and_(a, Imm(ABS)), b.and_(c, Imm(ABS))
    if ftz:
        aa, ac = b.flush_mag(aa), b.flush_mag(ac)
    ax, ay = b.maxu(aa, ac), b.minu(aa, ac)
    x = b.sel(c, a, b.setp("lt", aa, ac))  # the operand of larger magnitude (its sign wins)
    sx = b.and_(x, Imm(SIGN))
    pdiff = b.setp("lt", b.xor(a, c), Imm(0), sign="s")

    def mant(mag: Val) -> tuple[Val, Val]:
        # significand << 6 (leading one at bit 29 when normal) and max(exponent field, 1)
        e1 = b.maxu(b.shr(mag, Imm(23)), Imm(1))
        m = b.add(b.sub(b.shl(mag, Imm(6)), b.shl(e1, Imm(29))), Imm(0x20000000))
        return m, e1

    mx, ex = mant(ax)
    my, ey = mant(ay)
    d = b.sub(ex, ey)
    mys = b.shr(my, d)
    lost = b.sub(my, b.shl(mys, d))
    mys = b.or_(mys, b.minu(lost, Imm(1)))  # sticky: round-to-odd at bit 0 (mx is even there)
    mys = b.cond(pdiff, mys, "sub", Imm(0), mys)
    m = b.add(mx, mys)
    # normalize, but not below the smallest exponent: a sum in the subnormal range is exact
    # (then d <= 1: no sticky), so it is packed as it is and rounding never sees a subnormal
    k1 = b.minu(b.sub(b.op("clz", m), Imm(1)), ex)
    mn = b.shl(m, k1)
    e = b.sub(ex, k1)
    # exact zero from opposite signs: +0, or -0 when rounding down (the caller's sign)
    pz = b.setp("eq", m, Imm(0), bop="and", c=pdiff)
    e = b.cond(pz, e, "mov", Imm(0))

    def late() -> tuple:  # inf / NaN operands: the larger operand, or NaN (inf - inf, a NaN)
        pspec = b.setp("ge", ax, Imm(INF))
        pn = b.setp("eq", ay, Imm(INF), bop="and", c=pdiff)
        pn = b.setp("gt", ax, Imm(INF), bop="or", c=pn)
        return b.sel(Imm(0 if sat else CNAN), x, pn), pspec

    return (sx, pz, e, mn), late


def _native_fadd(fr: object) -> bool:
    """Whether the machine has the float adders in the weights (``Options.native_fadd``)."""
    return bool(getattr(getattr(fr, "opts", None), "native_fadd", False))


def _fadd_row(b: _B, a: Val, c: Val, ftz: object = False, odd: bool = False) -> Val:
    """One ``fadd`` row of the float adders: a + c rounded to nearest even (``.ftz`` optional), or
    to odd (``odd``: ``fp32.add_odd``)."""
    if odd:
        return b.op("fadd", a, c, rnd="rn", ftz=ftz, sat=False, odd=True)
    return b.op("fadd", a, c, rnd="rn", ftz=ftz, sat=False)


def _fsub_row(b: _B, a: Val, c: Val, ftz: object = False, odd: bool = False) -> Val:
    """One ``fsub`` row of the float adders (their ``fadd`` with c's sign flipped): a - c rounded to
    nearest even, or to odd (``odd``: ``fp32.add_odd(a, -c)``, both of the adder's ROM bits)."""
    if odd:
        return b.op("fsub", a, c, rnd="rn", ftz=ftz, sat=False, odd=True)
    return b.op("fsub", a, c, rnd="rn", ftz=ftz, sat=False)


def expand_fadd(ins: MInstr, fr: object) -> list[MInstr]:
    if ins.mod("odd"):
        raise ValueError(f"{ins}: rounding to odd is the float adders' mode (a machine with native_fadd)")
    b = _B(fr)
    a, c = _srcs(ins)
    if ins.op == "fsub":
        c = b.xor(c, Imm(SIGN))
    rnd, ftz, sat = ins.mod("rnd"), ins.mod("ftz"), ins.mod("sat")
    if _native_fadd(fr) and rnd == "rn" and not sat:
        return b.finish(ins.d[0], _fadd_row(b, a, c, ftz))
    if not ftz and _native_fmulf(fr) and _on_the_adders(fr, ins, a, c, ("rz", "rm", "rp")):
        # add.rz/rm/rp: the sum rounded to nearest, its exact error, one step toward the mode
        # (``_directed``, the fma's); both operands below 2^126 (no overflow, the step stays
        # finite; a sum whose error is nonzero is far above the subnormals)
        def fast() -> Val:
            return _directed(b, _fadd_row(b, a, c), a, b.xor(c, Imm(SIGN)), a, c, rnd)

        res = _slow_path_first(b, _below_126(b, None, a, c), fast, f"fadd.slow[{rnd},sat={sat}]", (a, c),
                               lambda bb, x, y: _fadd(bb, x, y, rnd, ftz, sat))
        return b.finish(ins.d[0], res)
    res = _fadd(b, a, c, rnd, ftz, sat)
    return b.finish(ins.d[0], res)


# =============================================================================================
# mul
# =============================================================================================
def _fmul(b: _B, a: Val, c: Val, rnd: str, ftz: bool, sat: bool) -> Val:
    name = f"fmul.core[ftz={ftz},sat={sat}]"
    (s, e, mn), late = _shared(
        b, name, (a, c), "rrr", lambda bb, x, y, _: _fmul_core(bb, x, y, ftz, sat), late_kinds="rp"
    )
    res = b.or_(b.round_pack(s, e, mn, rnd, ftz), s)
    spec, pspec = late()
    res = b.sel(spec, res, pspec)  # zero, inf or NaN operands
    return b.saturate(res) if sat else res


def _fprod(b: _B, aa: Val, ac: Val) -> tuple:
    """The exact significand product of two finite nonzero magnitudes (``fmul`` and ``ffma``
    share it): (T, S, p0) of :meth:`_B.mant_product` and the sum of the unpacked exponents."""
    ma, xa = b.unpack_top(aa)
    mc, xc = b.unpack_top(ac)
    t, sm, p0, _ = b.mant_product(ma, mc)
    return (t, sm, p0, b.add(xa, xc)), None


def _fmul_core(b: _B, a: Val, c: Val, ftz: bool, sat: bool) -> tuple:
    """The rounding-independent part of a multiply: (sign, exponent, normalized significand, the
    result for zero/inf/NaN operands, whether an operand is one)."""
    s = b.and_(b.xor(a, c), Imm(SIGN))
    aa, ac = b.and_(a, Imm(ABS)), b.and_(c, Imm(ABS))
    if ftz:
        aa, ac = b.flush_mag(aa), b.flush_mag(ac)
    (t, sm, p0, xs), _ = _shared(b, "fprod", (aa, ac), "rrrr", lambda bb, x, y, _: _fprod(bb, x, y))
    # fold the 16 low product bits into bit 0 of T, then normalize T to a leading one at bit 30
    st = b.shl(b.or_(sm, p0), Imm(24))
    t = b.or_(t, b.minu(st, Imm(1)))
    u = b.shr(t, Imm(31))
    mn = b.or_(b.shr(t, u), b.and_(t, Imm(1)))
    e = b.sub(b.add(xs, u), Imm(112))

    def late() -> tuple:
        mx, my = b.maxu(aa, ac), b.minu(aa, ac)
        pz = b.setp("eq", my, Imm(0))
        spec = b.sel(s, b.or_(s, Imm(INF)), pz)  # zero, or inf
        pspec = b.setp("ge", mx, Imm(INF), bop="or", c=pz)
        pn = b.setp("eq", mx, Imm(INF), bop="and", c=pz)  # inf * 0
        pn = b.setp("gt", mx, Imm(INF), bop="or", c=pn)
        return b.sel(Imm(0 if sat else CNAN), spec, pn), pspec

    return (s, e, mn), late


def expand_fmul(ins: MInstr, fr: object) -> list[MInstr]:
    b = _B(fr)
    a, c = _srcs(ins)
    rnd, ftz, sat = ins.mod("rnd"), ins.mod("ftz"), ins.mod("sat")
    if _on_the_adders(fr, ins, a, c) and _native_fmulf(fr):
        # the one-lane multiplier rounds the product of the range's factors itself (zeros included)
        res = _slow_path_first(
            b, _range_row(b, a, c, ftz), lambda: b.op("fmulf", a, c), f"fmul.slow[ftz={ftz}]", (a, c),
            lambda bb, x, y: _fmul(bb, x, y, rnd, ftz, sat))
    elif not ftz and _native_fmulf(fr) and _on_the_adders(fr, ins, a, c, ("rz", "rm", "rp")):
        # mul.rz/rm/rp: the unit's product and its exact error (its range: every product normal and
        # finite, a zero product exact), one step toward the mode (``_step_toward``)
        res = _slow_path_first(
            b, _range_row(b, a, c, ftz),
            lambda: _step_toward(b, b.op("fmulf", a, c), b.op("fmulf", a, c, err=True), rnd),
            f"fmul.slow[{rnd},ftz={ftz}]", (a, c), lambda bb, x, y: _fmul(bb, x, y, rnd, ftz, sat))
    elif _on_the_adders(fr, ins, a, c):
        ok, zero, s0, es, h, low = _product_words(b, a, c, ftz)
        fast = b.sel(s0, _round_product(b, s0, es, h, low), zero)
        res = _or_slow_path(
            b, ok, fast, f"fmul.slow[ftz={ftz}]", (a, c), lambda bb, x, y: _fmul(bb, x, y, rnd, ftz, sat)
        )
    else:
        res = _fmul(b, a, c, rnd, ftz, sat)
    return b.finish(ins.d[0], res)


# =============================================================================================
# mul / fma on the adders: the exact product from mul rows; mul rounds it in integer, fma adds it
# as two exact floats on fadd rows
# =============================================================================================
def _on_the_adders(fr: object, ins: MInstr, a: Val, c: Val, modes: tuple[str, ...] = ("rn",)) -> bool:
    """Whether a float multiply or fma takes the adders' fast path: the machine has the adders and
    the multiplier, the op rounds to nearest (or by a mode in ``modes``) without ``.sat``, a factor
    is a register and a constant factor is a normal float (a zero, infinite or subnormal one would
    always take the slow path)."""
    opts = getattr(fr, "opts", None)
    return (
        _native_fadd(fr)
        and bool(getattr(opts, "native_mul", False) and getattr(opts, "fast_floats", True))
        and ins.mod("rnd") in modes
        and not ins.mod("sat")
        and (isinstance(a, R) or isinstance(c, R))
        and all(isinstance(x, R) or 0 < (x.v >> 23) & 0xFF < 255 for x in (a, c))
    )


#: the fast path's range of the factors' exponent fields' sum (both fields in 1..254): from 174
#: (|a·b| >= 2^-80: both pieces normal or zero, every result normal) to 377 (|a·b| < 2^125: no
#: sum below can overflow)
ES_MIN, ES_MAX = 174, 377


def _native_mul(fr: object) -> bool:
    """Whether the machine has the integer multiplier (``Options.native_mul``): ex2, the division
    and the root then take products instead of the test shape's shift-and-subtract loops."""
    return bool(getattr(getattr(fr, "opts", None), "native_mul", False))


def _native_fmulf(fr: object) -> bool:
    """Whether the machine has the one-lane float multiplier and its range row (``Options.native_fmulf``)."""
    return bool(getattr(getattr(fr, "opts", None), "native_fmulf", False))


def _range_row(b: _B, a: Val, c: Val, ftz: bool) -> P:
    """One ``frange`` row: the fast path's ``ok`` of ``_product_checks`` (``fp32.mul_fast_ok``)."""
    p = b.fr.p()  # type: ignore[attr-defined]
    b._emit("frange", (p,), (a, c), ftz=bool(ftz))
    return p


def _product_checks(b: _B, a: Val, c: Val, ftz: bool) -> tuple[P, P, Val, Val]:
    """(ok, zero, s0, es): the fast path's checks (``_product_words``) without the product; ``ok``
    from one ``frange`` row on a machine with it."""
    # the checks are chains of predicates (one token per lane group each, where a full word is
    # three per lane): ok = (in range and both normal, or a zero factor) and both finite
    aa, ac = b.and_(a, Imm(ABS)), b.and_(c, Imm(ABS))
    lim = Imm(0x800000 if ftz else 1)  # below it a factor is a zero
    zero = b.setp("lt", ac, lim, bop="or", c=b.setp("lt", aa, lim))
    es = b.add(b.shr(aa, Imm(23)), b.shr(ac, Imm(23)))  # the exponent fields' sum
    if _native_fmulf(b.fr):
        return _range_row(b, a, c, ftz), zero, b.and_(b.xor(a, c), Imm(SIGN)), es
    ok = b.setp("lt", b.sub(es, Imm(ES_MIN)), Imm(ES_MAX + 1 - ES_MIN))
    if not ftz:  # no subnormal factor (with ftz one is a zero)
        for x in (aa, ac):
            ok = b.setp("ge", x, Imm(0x800000), bop="and", c=ok)
    for x in (aa, ac):
        ok = b.setp("lt", x, lim, bop="or", c=ok)
    for x in (aa, ac):
        ok = b.setp("lt", x, Imm(INF), bop="and", c=ok)
    s0 = b.and_(b.xor(a, c), Imm(SIGN))
    return ok, zero, s0, es


def _product_words(b: _B, a: Val, c: Val, ftz: bool) -> tuple[P, P, Val, Val, Val, Val]:
    """(ok, zero, s0, es, H, low). ``ok``: both factors finite and either one is zero (``zero``:
    the product is the signed zero ``s0``; with ``ftz`` a subnormal factor is a zero) or both are
    normal with exponent fields summing to ES_MIN..ES_MAX. Then the 48-bit significand product is
    P = H·2^24 + (low mod 2^24) (H < 2^24, from four 12 × 12 products; ``low`` = P mod 2^32) and
    a·c = P · 2^(es - 300), ``es`` the exponent fields' sum (small values: one token per lane,
    where full words cost three). Outside ``ok`` and for a zero product the words are garbage
    (the caller takes the slow path, or ``s0``)."""
    ok, zero, s0, es = _product_checks(b, a, c, ftz)
    ma = b.or_(b.and_(a, Imm(0x7FFFFF)), Imm(0x800000))
    mc = b.or_(b.and_(c, Imm(0x7FFFFF)), Imm(0x800000))
    ah, al = b.shr(ma, Imm(12)), b.and_(a, Imm(0xFFF))
    ch, cl = b.shr(mc, Imm(12)), b.and_(c, Imm(0xFFF))
    hh = b.op("mul", ah, ch)
    mid = b.add(b.op("mul", ah, cl), b.op("mul", al, ch))
    ll = b.op("mul", al, cl)
    low = b.op("mul", ma, mc)  # P mod 2^32
    h = b.add(hh, b.shr(b.add(mid, b.shr(ll, Imm(12))), Imm(12)))  # P >> 24 (nested floors)
    return ok, zero, s0, es, h, low


def _product_pieces(b: _B, s0: Val, es: Val, h: Val, low: Val) -> tuple[Val, Val]:
    """(X, L): two floats with X + L = a·c EXACTLY (``_product_words``' range): X = H·2^(es-276),
    L = (low mod 2^24)·2^(es-300). Each piece becomes a float without normalising: OR-ing its low
    23 bits into the significand of 2^k gives 2^k + piece (bit 23 clear) or the piece itself (bit
    23 set), and one exact ``fadd`` of -2^k (or of 0) leaves the piece."""
    ebx = b.or_(b.shl(b.sub(es, Imm(126)), Imm(23)), s0)  # sign | 2^k for X's unit 2^(es-276)
    zx = b.or_(ebx, b.and_(h, Imm(0x7FFFFF)))
    x = _fsub_row(b, zx, b.sel(ebx, Imm(0), b.setp("lt", h, Imm(0x800000))))
    ebl = b.sub(ebx, Imm(24 << 23))  # L's unit: 2^24 below X's
    zl = b.or_(ebl, b.and_(low, Imm(0x7FFFFF)))
    clear = b.setp("ge", b.shl(low, Imm(8)), Imm(0), sign="s")  # bit 23 of L' clear
    lf = _fsub_row(b, zl, b.sel(ebl, Imm(0), clear))
    return x, lf


def _round_product(b: _B, s0: Val, es: Val, h: Val, low: Val) -> Val:
    """a·c rounded to nearest even for ``_product_words``' range, where it is a normal float: the
    significand M is H (P >= 2^47) or P >> 23, the rest below it decides the rounding, and adding
    M to the exponent word lets a carry out of the significand bump the exponent."""
    big = b.setp("ge", h, Imm(0x800000))
    rb = b.shl(low, Imm(8))  # the 24 bits below H at the top of a word
    m = b.sel(h, b.add(b.add(h, h), b.shr(rb, Imm(31))), big)
    rest = b.sel(rb, b.shl(rb, Imm(1)), big)  # the bits below M, from the top
    up = b.setp("eq", rest, Imm(SIGN))  # exactly half: to even
    up = b.setp("ne", b.and_(m, Imm(1)), Imm(0), bop="and", c=up)
    up = b.setp("gt", rest, Imm(SIGN), bop="or", c=up)
    e = b.sub(es, Imm(127))
    e = b.cond(big.inv(), e, "sub", e, Imm(1))
    res = b.add(b.or_(b.shl(e, Imm(23)), s0), m)  # sign | exponent + M (its bit 23 adds one)
    return b.cond(up, res, "add", res, Imm(1))


def _two_sum(b: _B, x: Val, y: Val) -> tuple[Val, Val]:
    """(s, e): s = x + y rounded, e = x + y - s exactly (Knuth's TwoSum on fadd/fsub rows)."""
    s = _fadd_row(b, x, y)
    nbb = _fsub_row(b, x, s)  # -(s - x)
    da = _fsub_row(b, x, _fadd_row(b, s, nbb))  # x - (s - (s - x))
    return s, _fadd_row(b, da, _fadd_row(b, y, nbb))  # + (y - (s - x))


def _ffma_on_adders(b: _B, a: Val, c: Val, z: Val, ftz: bool) -> tuple[P, Val]:
    """(ok, a·c + z rounded once) for the fast path's operands (``_product_pieces`` and a finite
    addend below 2^126): the correctly rounded sum of three floats X + L + z by Boldo and
    Melquiond's algorithm (IEEE Trans. Computers 57(4), 2008): (uh, ul) = Fast2Sum(X, L) (|X| >
    |L|), (th, tl) = TwoSum(z, uh), v = tl + ul rounded to ODD (one row: the adder's ``odd`` mode),
    result = th + v rounded to nearest even. Negations ride on ``fsub`` rows (the adder's ``neg``)."""
    ok, zero, s0, es, h, low = _product_words(b, a, c, ftz)
    x, lf = _product_pieces(b, s0, es, h, low)
    az = b.and_(z, Imm(ABS))
    ok = b.setp("lt", az, Imm(0x7E800000), bop="and", c=ok)
    zsum = _fadd_row(b, s0, z, ftz)  # a zero product: ±0 + z (the signed-zero rules of an add)
    if ftz:  # a subnormal addend is a zero of its sign
        z = b.sel(b.and_(z, Imm(SIGN)), z, b.setp("lt", az, Imm(0x800000)))
    uh = _fadd_row(b, x, lf)
    ul = _fadd_row(b, lf, _fsub_row(b, x, uh))
    th, tl = _two_sum(b, z, uh)
    v = _fadd_row(b, tl, ul, odd=True)  # the adder's round-to-odd mode
    return ok, b.sel(zsum, _fadd_row(b, th, v), zero)


def _ffma_on_the_unit(
    b: _B, a: Val, c: Val, z: Val, ftz: bool, rnd: str = "rn"
) -> tuple[P, Callable[[], Val]]:
    """``_ffma_on_adders`` with the one-lane multiplier: X = fmulf(a, c) = RN(a·c) and L = the
    unit's error a·c - X, exact (``fp32.mul_fast_err``), so (X, L) is already Fast2Sum's pair and
    Boldo and Melquiond's sum starts at TwoSum(z, X). The range is one ``frange`` row. A zero
    product (X = ±0) needs X + z's signed zero, which is TwoSum's first row th (z + X rounds to
    the same word: addition commutes, and under ``.ftz`` the flushed addend is what the ftz add
    would have used); the sum as written would turn th = -0 into +0, so the rows after th compute
    the negations of TwoSum's error and of the odd sum (exact: rounding is symmetric) and end
    with th - (-v), where every zero is +0 and th's sign stays (9.27; until then two compare rows
    and a guarded copy of th). Returns (ok, the fast path: emits its rows when called, after the
    slow path's call, ``_slow_path_first``)."""
    ok = _below_126(b, _range_row(b, a, c, ftz), z)  # and |z| < 0x7E800000
    az = b.and_(z, Imm(ABS)) if ftz else z

    def fast() -> Val:
        x = b.op("fmulf", a, c)
        lf = b.op("fmulf", a, c, err=True)
        zz = b.sel(b.and_(z, Imm(SIGN)), z, b.setp("lt", az, Imm(0x800000))) if ftz else z  # .ftz: a
        # TwoSum(zz, x) with its error negated (each row the exact negation of TwoSum's, the
        # operands of a subtraction swapped), then -v = RO(-tl - L) and th - (-v): the same
        # words up to the signs of zeros, and those make a zero product's result th itself
        # (-0 * 1 + -0: every later zero is +0, and th - +0 keeps -0), so no zero-product check
        th = _fadd_row(b, zz, x)  # subnormal addend is a zero of its sign
        nbb = _fsub_row(b, zz, th)
        nda = _fsub_row(b, _fadd_row(b, th, nbb), zz)
        ntl = _fsub_row(b, nda, _fadd_row(b, x, nbb))
        nv = _fsub_row(b, ntl, lf, odd=True)  # the adder's subtract and round-to-odd modes
        r = _fsub_row(b, th, nv)
        return r if rnd == "rn" else _directed(b, r, th, nv, x, zz, rnd)

    return ok, fast


def _directed(b: _B, r: Val, th: Val, nv: Val, x: Val, zz: Val, rnd: str) -> Val:
    """``rnd``(th + v) (rm, rp, rz) from r = RN(th + v), v = -nv: Boldo and Melquiond's sum rounded
    by the directed mode (their algorithm holds for any rounding of its last step; the fma's slow
    path rounds the same way). TwoSum's rows give the exact error e = th + v - r; where e points
    away from the mode's direction, r steps one unit toward it (the bits -1 or +1 by r's sign: on
    the fast path no result is subnormal, zero or beyond the finite range). An exact zero is +0
    as in RN, but -0 under rm unless the product and the addend are both +0."""
    bb = _fsub_row(b, r, th)
    da = _fsub_row(b, th, _fsub_row(b, r, bb))
    e = _fsub_row(b, da, _fadd_row(b, nv, bb))  # da + (v - bb)
    r = _step_toward(b, r, e, rnd)
    if rnd == "rm":  # an exact zero: -0 unless both zeros are +0
        pz = b.setp("ne", zz, Imm(0), bop="or", c=b.setp("ne", x, Imm(0)))
        pz = b.setp("eq", r, Imm(0), bop="and", c=pz)
        r = b.cond(pz, r, "mov", Imm(SIGN))
    return r


def _step_toward(b: _B, r: Val, e: Val, rnd: str) -> Val:
    """``rnd`` (rm, rp, rz) of the exact value r + e, from r = its rounding to nearest and e its
    exact error (a float): where e points away from the mode's direction, r moves one unit toward
    it (the bits -1 or +1 by r's sign; r normal and finite, as on the fast paths)."""
    below = lambda: b.setp("gt", e, Imm(SIGN))  # noqa: E731  # e < 0: r is above the value
    above = lambda: b.setp("gt", e, Imm(0), sign="s")  # noqa: E731  # e > 0: r is below it
    if rnd == "rz":  # toward zero: the magnitude one unit down where |r| is above |value|
        p = b.setp("ge", r, Imm(0), sign="s", bop="and", c=below())
        q = b.setp("lt", r, Imm(0), sign="s", bop="and", c=above())
        r = b.cond(p, r, "sub", r, Imm(1))
        return b.cond(q, r, "sub", r, Imm(1))
    p = below() if rnd == "rm" else above()
    up = b.setp("lt" if rnd == "rm" else "ge", r, Imm(0), sign="s", bop="and", c=p)  # magnitude +1
    dn = b.setp("ge" if rnd == "rm" else "lt", r, Imm(0), sign="s", bop="and", c=p)  # magnitude -1
    r = b.cond(up, r, "add", r, Imm(1))
    return b.cond(dn, r, "sub", r, Imm(1))


def _below_126(b: _B, ok: P | None, *xs: Val) -> P:
    """``ok`` and |x| < 0x7E800000 for each x, as predicate rows (a token per lane group each, where
    |x| is a word per lane): as s32 x < 0x7E800000 holds for every negative x, as u32 x <
    0xFE800000 then leaves out the negative ones from -0x7E800000's bits on."""
    for x in xs:
        ok = b.setp("lt", x, Imm(0x7E800000), sign="s", bop=None if ok is None else "and", c=ok)
        ok = b.setp("lt", x, Imm(0xFE800000), bop="and", c=ok)
    assert ok is not None
    return ok


def _or_slow_path(b: _B, ok: P, fast: Val, name: str, args: tuple, slow: Callable[..., Val]) -> Val:
    """``fast`` where ``ok``; lanes without it run the integer sequence ``slow(b, *args)``,
    branched around (a warp whose lanes all pass pays one ``bra``) and kept once per program as a
    cold routine ``name`` (softcore ``Routine.cold``: a call, inline only with ``routines=never``)."""
    res = b.fresh_copy(fast)
    end = b.label()
    b.bra(end, ok)
    b.out.append(call(_slow_routine(name, len(args), slow), args, (res,)))
    b.place(end)
    return res


def _slow_path_first(b: _B, ok: P, fast: Callable[[], Val], name: str, args: tuple,
                     slow: Callable[..., Val]) -> Val:
    """``_or_slow_path`` with the slow path's call first and the fast path (``fast()`` emits it)
    after it: ``@ok bra F; call slow; bra E; F: fast; E:``. Min-PC scheduling runs the slow lanes'
    call, then the fast lanes' rows, and they meet at E; a warp whose lanes all pass pays one
    ``bra`` as before and never runs the fast rows for nothing. Why: the routine reads the
    operands after the fast path's rows in the other order, so a result that replaces an operand
    (``acc = fma(a, c, acc)``) could not share its register and cost a copy of every lane's word
    after each fma; in this order the fast path is the operands' last reader."""
    res = b.reg()
    fast_lbl, end = b.label(), b.label()
    b.bra(fast_lbl, ok)
    b.out.append(call(_slow_routine(name, len(args), slow), args, (res,)))
    b._emit("bra", (), ()).target = end
    b.place(fast_lbl)
    b._emit("mov", (res,), (fast(),))
    b.place(end)
    return res


def _slow_routine(name: str, nargs: int, slow: Callable[..., Val]) -> Routine:
    """The cold routine ``name`` running ``slow(b, *params)`` (softcore ``Routine.cold``: kept once
    per program, a call; inline only with ``routines=never``)."""

    def body(s: object, ps: tuple, rs: tuple) -> None:
        bb = _B(s.fr)  # type: ignore[attr-defined]
        bb._emit("mov", (rs[0],), (slow(bb, *ps),))
        s.code += bb.out  # type: ignore[attr-defined]

    return Routine(name, "r" * nargs, "r", body, cold=True)


# =============================================================================================
# fma
# =============================================================================================
def _ffma(b: _B, a: Val, c: Val, z: Val, rnd: str, ftz: bool, sat: bool) -> Val:
    name = f"ffma.core[ftz={ftz},sat={sat}]"
    (sgn, e, top, pzd, spec, pspec), _ = _shared(
        b, name, (a, c, z), "rrrprp", lambda bb, x, y, w, full: _ffma_core(bb, x, y, w, ftz, sat, full, rnd)
    )
    if rnd == "rm":  # an exact zero from addends of different signs is -0 when rounding down
        sgn = b.cond(pzd, sgn, "mov", Imm(SIGN))
    res = b.or_(b.round_pack(sgn, e, top, rnd, ftz), sgn)
    res = b.sel(spec, res, pspec)
    return b.saturate(res) if sat else res


def _ffma_core(b: _B, a: Val, c: Val, z: Val, ftz: bool, sat: bool, shared: bool, rnd: str) -> tuple:
    """The rounding-independent part of a fused multiply-add: (sign, exponent, normalized
    significand (an exact zero: +0, or -0 when both addends are -0), whether the result is an
    exact zero from addends of different signs, the result for inf/NaN operands, whether an
    operand is inf/NaN)."""
    # (ordered to keep few temporaries live: the sources a and c are dead after the first lines)
    axc = b.xor(a, c)  # sign bit: the product's
    aa, ac = b.and_(a, Imm(ABS)), b.and_(c, Imm(ABS))
    if ftz:
        aa, ac = b.flush_mag(aa), b.flush_mag(ac)
    mx, my = b.maxu(aa, ac), b.minu(aa, ac)
    # windows (hi, lo), 64 bits, both below 2^62: the product P << 14 and the addend's
    # significand << 38; tp, tz: the exponents of their bit 0, both offset by +188
    (t, sm, p0, xs), _ = _shared(b, "fprod", (aa, ac), "rrrr", lambda bb, x, y, _: _fprod(bb, x, y))
    tp = b.sub(xs, Imm(110))
    ph = b.shr(t, Imm(2))
    pl = b.or_(
        b.or_(b.shl(t, Imm(30)), b.shr(b.shl(sm, Imm(24)), Imm(2))), b.shr(b.shl(p0, Imm(24)), Imm(10))
    )
    pzp = b.setp("eq", my, Imm(0))  # the product is zero
    ph = b.cond(pzp, ph, "mov", Imm(0))
    pl = b.cond(pzp, pl, "mov", Imm(0))
    tp = b.cond(pzp, tp, "mov", Imm(-1000))
    az = b.and_(z, Imm(ABS))
    if ftz:
        az = b.flush_mag(az)
    mz, xz = b.unpack_top(az)
    zh = b.shr(mz, Imm(2))
    tz = b.add(xz, Imm(8))
    pzz = b.setp("eq", az, Imm(0))
    zh = b.cond(pzz, zh, "mov", Imm(0))
    tz = b.cond(pzz, tz, "mov", Imm(-1000))
    sp = b.and_(axc, Imm(SIGN))  # sign of the product
    xs = b.xor(axc, z)  # sign bit: product and addend have different signs
    pdiff = b.setp("lt", xs, Imm(0), sign="s")
    # the result when an operand is inf or NaN, decided now (fewer values live through the rest)
    pinfp = b.setp("eq", mx, Imm(INF))
    spec = b.sel(b.or_(sp, Imm(INF)), z, pinfp)  # an infinite product, else the (inf) addend
    pn = b.setp("eq", az, Imm(INF), bop="and", c=pinfp)
    pn = b.setp("lt", xs, Imm(0), sign="s", bop="and", c=pn)  # inf - inf
    pn = b.setp("gt", mx, Imm(INF), bop="or", c=pn)
    pn = b.setp("gt", az, Imm(INF), bop="or", c=pn)
    pn = b.setp("eq", b.sub(mx, my), Imm(INF), bop="or", c=pn)  # inf * 0 (or a NaN)
    spec = b.sel(Imm(0 if sat else CNAN), spec, pn)
    pspec = b.setp("ge", mx, Imm(INF))
    pspec = b.setp("ge", az, Imm(INF), bop="or", c=pspec)
    sz = b.and_(z, Imm(SIGN))
    d = b.sub(tp, tz)
    ew = b.maxs(tp, tz)
    pd = b.setp("ge", d, Imm(0), sign="s")  # the product's window is the larger
    bh, bl = b.sel(ph, zh, pd), b.sel(pl, Imm(0), pd)
    sh_, sl = b.sel(zh, ph, pd), b.sel(Imm(0), pl, pd)
    sgn = b.sel(sp, sz, pd)
    # the sign of an exact zero (shared: rounding down fixes it with pzd)
    zs = b.or_(sp, sz) if rnd == "rm" and not shared else b.and_(sp, sz)
    # shift the smaller window right by |d| with a sticky bit
    s = b.minu(b.maxs(d, b.sub(Imm(0), d)), Imm(63))
    p32 = b.setp("ge", s, Imm(32))
    st0 = b.sel(sl, Imm(0), p32)
    sl = b.sel(sh_, sl, p32)
    sh_ = b.sel(Imm(0), sh_, p32)
    s = b.and_(s, Imm(31))
    cs = b.sub(Imm(32), s)
    lost = b.or_(b.shl(sl, cs), st0)
    sl = b.or_(b.or_(b.shr(sl, s), b.shl(sh_, cs)), b.minu(lost, Imm(1)))
    sh_ = b.shr(sh_, s)
    # different signs: negate the smaller (64-bit two's complement), then add
    sl = b.cond(pdiff, sl, "sub", Imm(0), sl)
    sh_ = b.cond(pdiff, sh_, "not", sh_)
    sh_ = b.cond(b.setp("eq", sl, Imm(0), bop="and", c=pdiff), sh_, "add", sh_, Imm(1))
    lo = b.add(bl, sl)
    hi = b.add(bh, sh_)
    hi = b.cond(b.setp("lt", lo, bl), hi, "add", hi, Imm(1))
    # negative: negate, flip the sign
    pneg = b.setp("lt", hi, Imm(0), sign="s")
    lo = b.cond(pneg, lo, "sub", Imm(0), lo)
    hi = b.cond(pneg, hi, "not", hi)
    hi = b.cond(b.setp("eq", lo, Imm(0), bop="and", c=pneg), hi, "add", hi, Imm(1))
    sgn = b.cond(pneg, sgn, "xor", sgn, Imm(SIGN))
    # normalize: the top word with its leading one at bit 30, the rest folded into bit 0
    ph0 = b.setp("eq", hi, Imm(0))
    hi = b.sel(b.shr(lo, Imm(1)), hi, ph0)
    lo = b.sel(b.shl(lo, Imm(31)), lo, ph0)
    ew = b.cond(ph0, ew, "sub", ew, Imm(31))
    n = b.sub(b.op("clz", hi), Imm(1))
    top = b.or_(b.shl(hi, n), b.shr(lo, b.sub(Imm(32), n)))
    top = b.or_(top, b.minu(b.shl(lo, n), Imm(1)))
    e = b.sub(ew, n)
    # exact zero: +0 (-0 when rounding down) unless both addends are zeros of one sign
    pz = b.setp("eq", top, Imm(0))
    e = b.cond(pz, e, "mov", Imm(0))
    sgn = b.sel(zs, sgn, pz)
    pzd = b.setp("eq", top, Imm(0), bop="and", c=pdiff) if shared else FALSE
    return (sgn, e, top, pzd, spec, pspec), None


def expand_ffma(ins: MInstr, fr: object) -> list[MInstr]:
    b = _B(fr)
    a, c, z = _srcs(ins)
    rnd, ftz, sat = ins.mod("rnd"), ins.mod("ftz"), ins.mod("sat")
    if _on_the_adders(fr, ins, a, c, ("rn", "rm", "rp", "rz")) and _native_fmulf(fr):
        ok, fast_rows = _ffma_on_the_unit(b, a, c, z, ftz, rnd)
        # one cold routine per rounding mode: a program that takes several (``__fmaf_rz`` beside
        # ``__fmaf_rn``) must not call the first mode's body for the others
        name = f"ffma.slow[ftz={ftz}]" if rnd == "rn" else f"ffma.slow[{rnd},ftz={ftz}]"
        res = _slow_path_first(b, ok, fast_rows, name, (a, c, z),
                               lambda bb, x, y, w: _ffma(bb, x, y, w, rnd, ftz, sat))
    elif _on_the_adders(fr, ins, a, c):
        ok, fast = _ffma_on_adders(b, a, c, z, ftz)
        res = _or_slow_path(
            b, ok, fast, f"ffma.slow[ftz={ftz}]", (a, c, z),
            lambda bb, x, y, w: _ffma(bb, x, y, w, rnd, ftz, sat),
        )  # fmt: skip
    else:
        res = _ffma(b, a, c, z, rnd, ftz, sat)
    return b.finish(ins.d[0], res)


# =============================================================================================
# divide / square root: restoring loops on the integer significands
# =============================================================================================
def _fdiv(b: _B, a: Val, c: Val, rnd: str, ftz: bool) -> Val:
    name = f"fdiv.core[ftz={ftz}]"
    (s, e, mn), late = _shared(
        b, name, (a, c), "rrr", lambda bb, x, y, _: _fdiv_core(bb, x, y, ftz), late_kinds="rp"
    )
    res = b.or_(b.round_pack(s, e, mn, rnd, ftz), s)
    spec, pspec = late()
    return b.sel(spec, res, pspec)  # zero, inf or NaN operands


def _fdiv_core(b: _B, a: Val, c: Val, ftz: bool) -> tuple:
    """The rounding-independent part of a divide: (sign, exponent, the quotient significand with
    its leading one at bit 30 and the remainder folded into bit 0) and, late, (the result for
    zero/inf/NaN operands, whether there is one).

    The significands A, C (24 bits, A doubled when A < C so that C <= A < 2C) are divided by a
    restoring loop, two quotient bits per trip and a fixed trip count (lanes never diverge):
    q = floor(A * 2^30 / C), 31 bits; the remainder stays below 2^25."""
    s = b.and_(b.xor(a, c), Imm(SIGN))
    aa, ac = b.and_(a, Imm(ABS)), b.and_(c, Imm(ABS))
    if ftz:
        aa, ac = b.flush_mag(aa), b.flush_mag(ac)
    ma, xa = b.unpack_top(aa)
    mc, xc = b.unpack_top(ac)
    num, den = b.shr(ma, Imm(8)), b.shr(mc, Imm(8))
    e = b.add(b.sub(xa, xc), Imm(126))
    plt = b.setp("lt", num, den)
    num = b.cond(plt, num, "add", num, num)
    e = b.cond(plt, e, "sub", e, Imm(1))
    if _native_mul(b.fr):
        q, r = _fdiv_digits(b, num, den)
        return (s, e, b.or_(q, b.minu(r, Imm(1)))), lambda: _fdiv_specials(b, s, aa, ac)
    r = b.fresh_copy(b.sub(num, den))  # the first quotient bit is one
    q = b.fresh_copy(Imm(1))
    top = b.label()
    b.place(top)
    for _ in range(2):
        b._emit("add", (r,), (r, r))
        p = b.setp("ge", r, den)
        b._emit("sub", (r,), (r, den), guard=p)
        b._emit("add", (q,), (q, q))
        b._emit("add", (q,), (q, Imm(1)), guard=p)
    b.bra(top, b.setp("lt", q, Imm(1 << 30)))
    mn = b.or_(q, b.minu(r, Imm(1)))
    return (s, e, mn), lambda: _fdiv_specials(b, s, aa, ac)


def _fdiv_specials(b: _B, s: Val, aa: Val, ac: Val) -> tuple:
    """(the result for zero/inf/NaN operands, whether there is one). NaN: a NaN operand, 0/0,
    inf/inf; inf: x/0, inf/x; zero: 0/x, x/inf."""
    pnan = b.setp("gt", b.maxu(aa, ac), Imm(INF))
    pnan = b.setp("eq", b.or_(aa, ac), Imm(0), bop="or", c=pnan)
    pnan = b.setp("eq", b.and_(aa, ac), Imm(INF), bop="or", c=pnan)
    pinf = b.setp("eq", aa, Imm(INF))
    pinf = b.setp("eq", ac, Imm(0), bop="or", c=pinf)
    spec = b.sel(Imm(CNAN), b.sel(b.or_(s, Imm(INF)), s, pinf), pnan)
    pspec = b.setp("ge", b.maxu(aa, ac), Imm(INF))
    pspec = b.setp("eq", b.minu(aa, ac), Imm(0), bop="or", c=pspec)
    return spec, pspec


#: the reciprocal's seed, 2^31 / v ~ FDIV_K0 - v * FDIV_K2 / 2^16 for v in (2^15, 2^16]: the line
#: 48/17 - 32/17 x (x = v / 2^16; relative error at most 1/17) scaled by 2^15
FDIV_K0, FDIV_K2 = 92521, 61681


def _fdiv_digits(b: _B, num: Val, den: Val) -> tuple[Val, Val]:
    """(q, r) = (floor(num * 2^30 / den), the remainder) for den in [2^23, 2^24) and num in [den,
    2 den), on a machine with the multiplier: long division in base 1,024 (three digits of 10 bits
    after the leading one), each digit estimated from a reciprocal and corrected once, so q and r
    are exact integer division whatever the estimate (within one below the digit).

    The reciprocal R ~ 2^39 / den: the seed line on v = (den >> 8) + 1, then two Newton steps
    R' = R (2^32 - v R) / 2^31 (the factor's low 17 bits dropped so every product fits a word).
    Checked on every den (``tests/machine/test_softfloat.py``): R <= 2^39 / den and R >= 2^39 /
    den (1 - 2^-13). A digit's estimate ((r >> 8) R) >> 21 is then below r 2^10 / den by less
    than 2^-5 + 1,024 2^-13 < 1, never above: the digit or one less, and one compare-and-subtract
    makes it the digit. r 2^10 and est den leave 32 bits, but r' = r 2^10 - est den is below
    2 den, so the words' wrap-around gives it exactly. 48 rows; the restoring loop, 2 bits a
    trip, ran 15 trips of 12 (``docs/machine-in-weights.md`` 9.27)."""
    v = b.add(b.shr(den, Imm(8)), Imm(1))
    rcp = b.sub(Imm(FDIV_K0), b.shr(b.op("mul", v, Imm(FDIV_K2)), Imm(16)))
    for _ in range(2):
        err = b.sub(Imm(0), b.op("mul", v, rcp))  # 2^32 - v R (v R < 2^32)
        rcp = b.shr(b.op("mul", rcp, b.shr(err, Imm(17))), Imm(14))
    r: Val = b.sub(num, den)  # the first quotient bit is one
    q: Val = Imm(1)
    for bits in (10, 10, 10):
        est = b.shr(b.op("mul", b.shr(r, Imm(8)), rcp), Imm(31 - bits))
        r = b.sub(b.shl(r, Imm(bits)), b.op("mul", est, den))
        p = b.setp("ge", r, den)
        r = b.cond(p, r, "sub", r, den)
        est = b.cond(p, est, "add", est, Imm(1))
        q = b.or_(b.shl(q, Imm(bits)), est)
    return q, r


def expand_fdiv(ins: MInstr, fr: object) -> list[MInstr]:
    b = _B(fr)
    a, c = _srcs(ins)
    return b.finish(ins.d[0], _fdiv(b, a, c, ins.mod("rnd"), ins.mod("ftz")))


def _fsqrt_core(b: _B, a: Val, ftz: bool) -> tuple:
    """The rounding-independent part of a square root: (exponent, the root significand with its
    leading one at bit 30 and a nonzero remainder folded into bit 0) and, late, (the result for
    zero, negative, inf and NaN operands, whether there is one).

    The significand S is scaled to S' in [2^24, 2^26) with an even exponent left over; the
    integer root of X = S' * 2^26 (26 bits, in [2^25, 2^26)) is found digit by digit: each step
    brings down two bits of X (those of S', then zeros) and tries 4 * root + 1 against the
    remainder (below 2^27), two steps per trip and a fixed trip count."""
    if ftz:
        a = b.flush_word(a)
    aa = b.and_(a, Imm(ABS))
    m, x = b.unpack_top(aa)
    u = b.sub(x, Imm(142))  # value = (m >> 8) * 2^u
    sh = b.sub(Imm(2), b.and_(u, Imm(1)))  # 2 when u is even, 1 when odd: S' in [2^24, 2^26)
    e = b.add(b.shr(b.sub(u, sh), Imm(1), sign="s"), Imm(138))
    if _native_mul(b.fr):
        root, r = _fsqrt_digits(b, b.shl(b.shr(m, Imm(8)), b.add(sh, Imm(6))))
        return (e, b.or_(b.shl(root, Imm(5)), b.minu(r, Imm(1)))), lambda: _fsqrt_specials(b, a, aa)
    xs = b.fresh_copy(b.shl(b.shr(m, Imm(8)), b.add(sh, Imm(6))))  # S' << 6: its top pair first
    r = b.fresh_copy(Imm(0))
    root = b.fresh_copy(Imm(0))
    t = b.reg()
    top = b.label()
    b.place(top)
    for _ in range(2):
        b._emit("shl", (r,), (r, Imm(2)))
        b._emit("shr", (t,), (xs, Imm(30)), sign="u")
        b._emit("or", (r,), (r, t))
        b._emit("shl", (xs,), (xs, Imm(2)))
        b._emit("shl", (t,), (root, Imm(2)))
        b._emit("or", (t,), (t, Imm(1)))
        p = b.setp("ge", r, t)
        b._emit("sub", (r,), (r, t), guard=p)
        b._emit("add", (root,), (root, root))
        b._emit("add", (root,), (root, Imm(1)), guard=p)
    b.bra(top, b.setp("lt", root, Imm(1 << 25)))
    mn = b.or_(b.shl(root, Imm(5)), b.minu(r, Imm(1)))
    return (e, mn), lambda: _fsqrt_specials(b, a, aa)


def _fsqrt_specials(b: _B, a: Val, aa: Val) -> tuple:
    """sqrt(+-0) = +-0, sqrt(+inf) = +inf, NaN for NaN and every negative (-inf too)."""
    spec = b.sel(a, b.sel(Imm(INF), Imm(CNAN), b.setp("eq", a, Imm(INF))), b.setp("eq", aa, Imm(0)))
    pspec = b.setp("ge", a, Imm(INF))
    pspec = b.setp("eq", aa, Imm(0), bop="or", c=pspec)
    return spec, pspec


def _fsqrt_recip(b: _B, yh: Val, yl: Val) -> Val:
    """y2 ~ 2^46 / sqrt(Y) for Y = (yh, yl) = S' << 6 in [2^30, 2^32) (``sqrt_model.recip``): a
    line, three Newton steps in 16-bit words, one in full words (relative error about 2^-27)."""
    mul = b.mul
    y = b.sub(Imm(sm.K0), b.shr(mul(yh, Imm(sm.K2)), Imm(16)))
    for _ in range(3):
        w = b.sub(Imm(sm.THREE), mul(yh, b.shr(mul(y, y), Imm(16))))
        y = b.shr(mul(y, b.shr(w, Imm(16))), Imm(15))
    eh, el = b.halves(b.sub(Imm(sm.THREE), b.hiap((yh, yl), b.halves(mul(y, y)))))
    return b.add(mul(y, eh), b.shr(mul(y, el), Imm(16)))


def _frsqrt_sig(b: _B, s: Val) -> Val:
    """R = rn(2^36 / sqrt(S')) in [2^23, 2^24] for S' in [2^24, 2^26): ``sqrt_model.rsqrt_sig``
    word for word (exact on every S': checked on all of them), i.e. the reciprocal root's estimate
    within one, then one exact test B^2 S' <= 2^78 modulo 2^64 at the rounding boundary B nearest
    it."""
    mul = b.mul
    yw = b.shl(s, Imm(6))
    q4 = b.add(b.shr(_fsqrt_recip(b, *b.halves(yw)), Imm(4)), Imm(4))  # q + 4
    k = b.shr(q4, Imm(3))
    up = b.setp("ge", b.and_(q4, Imm(7)), Imm(4))  # the boundary above q (else the one below)
    bnd = b.add(b.and_(q4, Imm(M32 ^ 7)), b.sel(Imm(4), Imm(M32 - 3), up))  # B = 8k -+ 4
    bh, bl = b.halves(bnd)
    a0, a1 = mul(bl, bl), mul(bh, bl)
    w0 = b.add(a0, b.shl(a1, Imm(17)))  # B^2 = (w1, w0)
    w1 = b.add(mul(bh, bh), b.shr(a1, Imm(15)))
    w1 = b.cond(b.setp("lt", w0, a0), w1, "add", w1, Imm(1))
    s1, s0 = b.halves(s)
    w0h = b.halves(w0)
    l0, l1 = mul(w0, s0), mul(w0, s1)
    xl = b.add(l0, b.shl(l1, Imm(16)))  # B^2 S' mod 2^64 = (xh, xl)
    xh = b.add(b.add(b.hi16(s0, w0h), b.shl(b.hi16(s1, w0h), Imm(16))), b.add(b.shr(l1, Imm(16)), mul(w1, s)))
    xh = b.cond(b.setp("lt", xl, l0), xh, "add", xh, Imm(1))
    le = b.setp("eq", xl, Imm(0), bop="and", c=b.setp("eq", xh, Imm(0)))
    le = b.setp("lt", xh, Imm(0), sign="s", bop="or", c=le)  # B^2 S' - 2^78 <= 0
    r = b.cond(up.inv(), k, "sub", k, Imm(1))  # (B + 4) / 8 - 1 = k - 1 + [up]
    return b.cond(le, r, "add", r, Imm(1))


def expand_frsqrt(ins: MInstr, fr: object) -> list[MInstr]:
    """rsqrt.approx{.ftz}.f32: rn(1 / sqrt(x)), bit-exact with ``fp32.rsqrt_approx``: the significand
    S' of ``_fsqrt_core`` (in [2^24, 2^26), an even exponent left), R = ``_frsqrt_sig`` and the
    exponent added to R (a carry out of its 24 bits, R = 2^24, bumps it); never subnormal or
    overflowing. ±0 (a subnormal with ftz) gives ±inf, +inf +0, a negative or NaN operand NaN."""
    b = _B(fr)
    (a,) = _srcs(ins)
    if ins.mod("ftz"):
        a = b.flush_word(a)
    aa = b.and_(a, Imm(ABS))
    m, x = b.unpack_top(aa)
    u = b.sub(x, Imm(142))  # value = (m >> 8) * 2^u
    sh = b.sub(Imm(2), b.and_(u, Imm(1)))  # S' = (m >> 8) << sh in [2^24, 2^26), u - sh even
    r = _frsqrt_sig(b, b.shl(b.shr(m, Imm(8)), sh))
    # 1/sqrt(x) = R * 2^(-36 - (u - sh) / 2): the biased exponent E = 114 - (u - sh) / 2, and the
    # word (E - 1) << 23 plus R (its bit 23 is the hidden one)
    e1 = b.sub(Imm(113), b.shr(b.sub(u, sh), Imm(1), sign="s"))
    res = b.add(b.shl(e1, Imm(23)), r)
    pz = b.setp("eq", aa, Imm(0))
    spec = b.sel(b.or_(b.and_(a, Imm(SIGN)), Imm(INF)), Imm(CNAN), pz)  # ±0: ±inf; else NaN
    spec = b.sel(Imm(0), spec, b.setp("eq", a, Imm(INF)))  # +inf: +0
    pspec = b.setp("lt", a, Imm(0), sign="s", bop="or", c=pz)  # zero, negative (NaN too)
    pspec = b.setp("ge", aa, Imm(INF), bop="or", c=pspec)  # inf, NaN
    return b.finish(ins.d[0], b.sel(spec, res, pspec))


def _fsqrt_digits(b: _B, yw: Val) -> tuple[Val, Val]:
    """(root, remainder) = (floor(sqrt(Y 2^20)), Y 2^20 - root^2) for Y = S' << 6 in [2^30, 2^32),
    on a machine with the multiplier: ``sqrt_model.root_rem`` word for word (a reciprocal square
    root by Newton steps of half-word products, the root from it within one, then the exact
    remainder modulo 2^32 and one correction each way): one fsqrt.rn 322 -> 98 machine warp
    instructions (the digit-by-digit loop issued 13 trips of 22 rows). Exact on every S'
    (``sqrt_model``, checked on all of them)."""

    mul = b.mul
    yh, yl = b.halves(yw)
    root = b.shr(b.hiap((yh, yl), b.halves(_fsqrt_recip(b, yh, yl))), Imm(4))
    rem = b.sub(b.shl(yw, Imm(20)), mul(root, root))
    neg = b.setp("lt", rem, Imm(0), sign="s")  # one too high
    root = b.cond(neg, root, "sub", root, Imm(1))
    rem = b.cond(neg, rem, "add", rem, b.add(b.shl(root, Imm(1)), Imm(1)))
    t2 = b.shl(root, Imm(1))
    up = b.setp("gt", rem, t2)  # one too low
    rem = b.cond(up, rem, "sub", rem, b.add(t2, Imm(1)))
    return b.cond(up, root, "add", root, Imm(1)), rem


def expand_fsqrt(ins: MInstr, fr: object) -> list[MInstr]:
    b = _B(fr)
    (a,) = _srcs(ins)
    rnd, ftz = ins.mod("rnd"), ins.mod("ftz")
    name = f"fsqrt.core[ftz={ftz}]"
    (e, mn), late = _shared(b, name, (a,), "rr", lambda bb, x, _: _fsqrt_core(bb, x, ftz), late_kinds="rp")
    # never subnormal, never overflowing, never negative
    res = b.round_pack(Imm(0), e, mn, rnd, ftz, subnormal=False, ovf=False)
    spec, pspec = late()
    return b.finish(ins.d[0], b.sel(spec, res, pspec))


# =============================================================================================
# ex2.approx: rn(2^x) by shift-and-add (BKM) and a last product, see ``ex2_model.py``
# =============================================================================================
def _fex2_core(b: _B, a: Val) -> tuple:
    """The rounding-independent part of ``fex2`` (the same for ftz: a subnormal operand acts as
    0 anyway): (e = n + 126, the significand of 2^f with its leading one at bit 30 and
    ``f != 0`` in bit 0) and, late, (the result for |x| >= 256, inf and NaN, whether it applies).
    Step for step what ``ex2_model`` computes (there with uint64 for the register pairs)."""
    aa = b.and_(a, Imm(ABS))
    # |x| * 2^63 = mt << s (64 bits; every count "negative", i.e. huge, for |x| < 2^-32: 0)
    mt = b.or_(b.shl(aa, Imm(8)), Imm(SIGN))
    s = b.sub(b.shr(aa, Imm(23)), Imm(95))
    fl = b.shl(mt, s)
    fh = b.or_(b.shr(mt, b.sub(Imm(32), s)), b.shl(mt, b.sub(s, Imm(32))))
    ip = b.shr(mt, b.sub(Imm(63), s))  # the integer part
    # x < 0: f = 1 - G (mod 1), n = -I - 1 (n = -I when G = 0); F = f * 2^63 in (fh, fl)
    pneg = b.setp("lt", a, Imm(0), sign="s")
    fl = b.cond(pneg, fl, "sub", Imm(0), fl)
    pz = b.setp("eq", fl, Imm(0), bop="and", c=pneg)
    fh = b.cond(pneg, fh, "not", fh)
    fh = b.cond(pz, fh, "add", fh, Imm(1))
    fh = b.and_(fh, Imm(0x7FFFFFFF))
    fo = b.or_(fh, fl)
    pf0 = b.setp("eq", fo, Imm(0), bop="and", c=pneg)
    e = b.add(ip, Imm(126))
    e = b.cond(pneg, e, "sub", Imm(251), e)
    e = b.cond(pf0, e, "add", e, Imm(1))
    sticky = b.minu(fo, Imm(1))

    def gadd(p: P, x: Val, y: Val) -> Val:  # p ? x + y : x
        if isinstance(x, Imm):
            return b.sel(b.add(x, y), x, p)
        return b.cond(p, x, "add", x, y)

    # k = 1..15 unrolled: if F >= L_k: F -= L_k, z += 2^(64-k) + (z >> k)
    zh: Val = Imm(0)
    zl: Val = Imm(0)
    poly = _native_mul(b.fr)
    bases = _ex2_tables(b.fr) if poly else None
    if bases is not None:  # two table lookups for F's top 16 bits, the polynomial for the rest
        (zh, zl), fh = _ex2_lookup(b, fh, 23, bases[0])  # z for the top 8 bits; F < 2^55 left
        (wh, wl), fh = _ex2_lookup(b, fh, 15, bases[1])  # the factor for the next 8; F < 2^47
        zh, zl = _ex2_times(b, zh, zl, wh, wl)
        zh, zl = _fex2_poly_tail(b, fh, fl, zh, zl)
        mn = b.or_(b.or_(b.shr(zh, Imm(2)), Imm(0x40000000)), sticky)
        return (e, mn), lambda: _fex2_specials(b, a, aa)
    for k in range(1, 17 if poly else 16):  # k = 16 too before the polynomial (F < 2^47.53)
        lk = em.STEPS[k - 1]
        lh, ll = lk >> 32, lk & M32
        if k <= em.K_HI:
            p = b.setp("gt", fh, Imm(lh))
        else:
            p = b.setp("ge", fl, Imm(ll))
            p = b.setp("eq", fh, Imm(lh), bop="and", c=p)
            p = b.setp("gt", fh, Imm(lh), bop="or", c=p)
        bw = b.setp("lt", fl, Imm(ll), bop="and", c=p)
        fl = b.cond(p, fl, "sub", fl, Imm(ll))
        fh = b.cond(p, fh, "sub", fh, Imm(lh))
        fh = b.cond(bw, fh, "sub", fh, Imm(1))
        t1 = b.or_(b.shr(zl, Imm(k)), b.shl(zh, Imm(32 - k)))
        t3 = b.add(b.shr(zh, Imm(k)), Imm(1 << (32 - k)))
        carry = not (isinstance(zl, Imm) and zl.v == 0)
        zl = gadd(p, zl, t1)
        if carry:
            c = b.setp("lt", zl, t1, bop="and", c=p)
            zh = gadd(p, zh, t3)
            zh = b.cond(c, zh, "add", zh, Imm(1))
        else:
            zh = gadd(p, zh, t3)

    zh, zl = (_fex2_poly_tail if poly else _fex2_loop_tail)(b, fh, fl, zh, zl)
    mn = b.or_(b.or_(b.shr(zh, Imm(2)), Imm(0x40000000)), sticky)
    return (e, mn), lambda: _fex2_specials(b, a, aa)


def _ex2_tables(fr: object) -> tuple[int, int] | None:
    """The first words of ``ex2_model.TABLE_WORDS`` and ``TABLE2_WORDS`` in the machine's read-only
    words (``Fresh.table``), or None on a machine without them (the steps k = 1..16 are then
    computed)."""
    place = getattr(fr, "table", None)
    if place is None:
        return None
    first = place(em.TABLE_WORDS)
    second = None if first is None else place(em.TABLE2_WORDS)
    return None if second is None else (first, second)


def _ex2_lookup(b: _B, fh: Val, low: int, base: int) -> tuple[tuple[Val, Val], Val]:
    """((high, low word) of entry j of the table at word ``base``, fh without j), j = fh's 8 bits
    from bit ``low`` up (all of fh's bits above them are 0): an AND, an XOR, a shift to the
    entry's byte offset and two loads (the high words, then the low words, 256 apart)."""
    top = b.and_(fh, Imm(0xFF << low))
    fh = b.op("xor", fh, top)
    ix = b.shr(top, Imm(low - 2))  # 4 j: the byte offset of entry j
    hi, lo = (b.op("ld", ix, size=4, sign="u", space="global", amode="z", base=GLOBAL_BASE,
                   off=4 * (base + half)) for half in (0, 1 << em.TABLE_BITS))
    return (hi, lo), fh


def _ex2_times(b: _B, zh: Val, zl: Val, wh: Val, wl: Val) -> tuple[Val, Val]:
    """``ex2_model.times``: z + w + z w / 2^64 for w below 2^56 (wh below 2^24), word for word."""
    mul, halves, hiap, add_c = b.mul, b.halves, b.hiap, b.add_c
    zhh, whh = halves(zh), halves(wh)
    al = mul(zh, wh)
    x = mul(zhh[0], whh[1])
    t = b.add(b.add(b.and_(x, Imm(0xFFFF)), mul(zhh[1], whh[0])), b.shr(mul(zhh[1], whh[1]), Imm(16)))
    ah = b.add(b.add(mul(zhh[0], whh[0]), b.shr(x, Imm(16))), b.shr(t, Imm(16)))
    lo, c1 = add_c(zl, wl)
    lo, c2 = add_c(lo, al)
    lo, c3 = add_c(lo, hiap(zhh, halves(wl)))
    lo, c4 = add_c(lo, hiap(halves(zl), whh))
    return b.plus(b.add(b.add(zh, wh), ah), c1, c2, c3, c4), lo


def _fex2_loop_tail(b: _B, fh: Val, fl: Val, zh: Val, zl: Val) -> tuple[Val, Val]:
    """The steps after k = 15 on a machine without the multiplier (``ex2_model.bkm``): the loop of
    the steps k = 16..32, then the rest as one product (two ``mulhi``, each a sequence there)."""
    # k = 16..32: a loop, L_k = (C >> k) - (B_k - D_k)
    fh, fl, zh, zl = (b.fresh_copy(v) for v in (fh, fl, zh, zl))
    k = b.fresh_copy(Imm(16))
    ck = b.fresh_copy(Imm(16))  # 32 - k
    oh = b.fresh_copy(Imm(1 << 16))  # 2^(32-k)
    bq = b.fresh_copy(Imm(em.B16))
    dq = b.fresh_copy(Imm(em.D16))
    top = b.label()
    b.place(top)
    al = b.or_(b.shr(Imm(em.C & M32), k), b.shl(Imm(em.C >> 32), ck))
    ah = b.shr(Imm(em.C >> 32), k)
    u = b.sub(bq, dq)
    wl = b.add(fl, u)  # F + u - A in (dh, dl)
    c1 = b.setp("lt", wl, u)
    dl = b.sub(wl, al)
    b1 = b.setp("lt", wl, al)
    dh = b.sub(fh, ah)
    b._emit("add", (dh,), (dh, Imm(1)), guard=c1)
    b._emit("sub", (dh,), (dh, Imm(1)), guard=b1)
    p = b.setp("ge", dh, Imm(0), sign="s")
    b._emit("mov", (fl,), (dl,), guard=p)
    b._emit("mov", (fh,), (dh,), guard=p)
    t1 = b.or_(b.shr(zl, k), b.shl(zh, ck))
    t3 = b.add(b.shr(zh, k), oh)
    b._emit("add", (zl,), (zl, t1), guard=p)
    c = b.setp("lt", zl, t1, bop="and", c=p)
    b._emit("add", (zh,), (zh, t3), guard=p)
    b._emit("add", (zh,), (zh, Imm(1)), guard=c)
    b._emit("shr", (bq,), (bq, Imm(2)), sign="u")
    b._emit("shr", (dq,), (dq, Imm(3)), sign="u")
    b._emit("add", (k,), (k, Imm(1)))
    b._emit("sub", (ck,), (ck, Imm(1)))
    b._emit("shr", (oh,), (oh, Imm(1)), sign="u")
    b.bra(top, b.setp("ne", oh, Imm(0)))

    # the rest as one product (F < 2^32, in fl): z += t1 + t2, t1 = F * 2 ln 2 = fl + mulhi(fl, K1)
    # (33 bits: c1 its carry), t2 = mulhi(t1 mod 2^32, zh) + c1 * zh (33 bits: c2 its carry)
    m = b.op("mulhi", fl, Imm(em.K1), sign="u")
    t1 = b.add(fl, m)
    c1 = b.setp("lt", t1, m)
    t2 = b.op("mulhi", t1, zh, sign="u")
    t2 = b.cond(c1, t2, "add", t2, zh)
    c2 = b.setp("lt", t2, zh, bop="and", c=c1)
    zl = b.add(zl, t1)
    a1 = b.setp("lt", zl, t1)
    zl = b.add(zl, t2)
    a2 = b.setp("lt", zl, t2)
    for carry in (c1, c2, a1, a2):
        zh = b.cond(carry, zh, "add", zh, Imm(1))
    return zh, zl


def _fex2_specials(b: _B, a: Val, aa: Val) -> tuple:
    """(the result for |x| >= 256, inf and NaN, whether it applies): +inf, or +0 for x < 0; NaN:
    the canonical NaN."""
    spec = b.sel(Imm(0), Imm(INF), b.setp("lt", a, Imm(0), sign="s"))
    spec = b.sel(Imm(CNAN), spec, b.setp("gt", aa, Imm(INF)))
    return spec, b.setp("ge", aa, Imm(em.BIG))


def _fex2_poly_tail(b: _B, fh: Val, fl: Val, zh: Val, zl: Val) -> tuple[Val, Val]:
    """``ex2_model.poly_tail`` on a machine with the multiplier: after the step k = 16 (F <
    2^47.53), z += W + z W / 2^64 with W = (e^u - 1) 2^64 = T + T^2 / 2^65 + T^3 / (6 2^128),
    T = F 2 ln 2 (two words; T^2 / 2^65 and the cubic term one word each). Every product is of
    16-bit halves, one row of the multiplier (a full ``mulhi`` would be 13 rows); with the step
    k = 16 it replaces the loop of the steps k = 16..32 (17 trips of 24 rows) and the one-product
    tail: one fex2 829 -> 350 machine warp instructions. Word for word the model's."""

    mul, halves, hi16, hiap, add_c, plus = b.mul, b.halves, b.hi16, b.hiap, b.add_c, b.plus

    # T = F + fh K1 + fl K1 / 2^32 + fh K1F / 2^32
    k1 = (Imm(em.K1 >> 16), Imm(em.K1 & 0xFFFF))
    e = b.add(hiap(halves(fl), k1), b.shr(mul(fh, Imm(em.K1F >> 16)), Imm(16)))
    tl, c1 = add_c(fl, mul(fh, Imm(em.K1)))
    tl, c2 = add_c(tl, e)
    th = plus(b.add(fh, hi16(fh, k1)), c1, c2)
    # S2 = T^2 / 2^65, S3 = S2 T / (3 2^64) + the bias; W = T + S2 + S3
    s2 = b.add(b.shr(mul(th, th), Imm(1)), hi16(th, halves(tl)))
    s3 = b.add(b.shr(mul(hi16(th, halves(s2)), Imm(0x5556)), Imm(16)), Imm(em.TAIL_BIAS))
    wl, c3 = add_c(tl, b.add(s2, s3))
    wh = plus(th, c3)
    # z += W + z W / 2^64
    zhh = halves(zh)
    dl, c4 = add_c(wl, mul(zh, wh))
    dl, c5 = add_c(dl, hiap(zhh, halves(wl)))
    dl, c6 = add_c(dl, hi16(wh, halves(zl)))
    dh = plus(b.add(wh, hi16(wh, zhh)), c4, c5, c6)
    zl, c7 = add_c(zl, dl)
    return plus(b.add(zh, dh), c7), zl


def expand_fex2(ins: MInstr, fr: object) -> list[MInstr]:
    """ex2.approx{.ftz}.f32: rn(2^x), bit-exact with ``fp32.ex2_approx`` (checked on all 2^32
    inputs by ``bench/ex2_exhaustive.py`` through ``ex2_model``)."""
    b = _B(fr)
    (a,) = _srcs(ins)
    ftz = ins.mod("ftz")
    (e, mn), late = _shared(b, "fex2.core", (a,), "rr", lambda bb, x, _: _fex2_core(bb, x), late_kinds="rp")
    res = b.round_pack(Imm(0), e, mn, "rn", ftz)
    spec, pspec = late()
    return b.finish(ins.d[0], b.sel(spec, res, pspec))


# =============================================================================================
# min / max
# =============================================================================================
def expand_fminmax(ins: MInstr, fr: object) -> list[MInstr]:
    """PTX min/max: a NaN operand is ignored (both NaN: canonical NaN), -0 < +0. On the raw
    words: non-negative floats order like signed integers, two negative ones in reverse."""
    b = _B(fr)
    a, c = _srcs(ins)
    is_min = ins.op == "fmin"
    if ins.mod("ftz"):
        a, c = b.flush_word(a), b.flush_word(c)
    # a NaN becomes the value that loses: 0x7FFFFFFF for min, 0xFFFFFFFF (-1 as s32) for max
    nanv = Imm(CNAN if is_min else M32)
    a = b.sel(nanv, a, b.setp("gt", b.and_(a, Imm(ABS)), Imm(INF)))
    c = b.sel(nanv, c, b.setp("gt", b.and_(c, Imm(ABS)), Imm(INF)))
    lo, hi = b.mins(a, c), b.maxs(a, c)
    both_neg = b.setp("lt", b.and_(a, c), Imm(0), sign="s")
    res = b.sel(hi, lo, both_neg) if is_min else b.sel(lo, hi, both_neg)
    if not is_min:
        res = b.sel(Imm(CNAN), res, b.setp("eq", res, Imm(M32)))
    return b.finish(ins.d[0], res)


# =============================================================================================
# compare
# =============================================================================================
# per comparison: (integer comparison on the order keys, which key a NaN replaces, with what)
_FSETP = {
    "eq": ("eq", "a", SIGN),
    "ne": ("ne", "a", "b"),
    "lt": ("lt", "a", 0x7FFFFFFF),
    "le": ("le", "b", SIGN),
    "gt": ("gt", "b", 0x7FFFFFFF),
    "ge": ("ge", "a", SIGN),
    "equ": ("eq", "a", "b"),
    "neu": ("ne", "a", SIGN),
    "ltu": ("lt", "a", SIGN),
    "leu": ("le", "a", SIGN),
    "gtu": ("gt", "b", SIGN),
    "geu": ("ge", "b", SIGN),
}


def expand_fsetp(ins: MInstr, fr: object) -> list[MInstr]:
    """Float compare on order keys: key(x) = x for x >= +0, 0x80000000 - x for negative x (so
    -0 and +0 are both 0 and signed integer order is float order); a NaN operand replaces one
    key by a value that forces the result (false for ordered, true for unordered compares)."""
    b = _B(fr)
    a, c = ins.s[0], ins.s[1]
    cmp, bop = ins.mod("cmp"), ins.mod("bop")
    pc = ins.s[2] if len(ins.s) > 2 else None
    if bop is None:
        pc = None
    aa, ac = b.and_(a, Imm(ABS)), b.and_(c, Imm(ABS))
    if cmp in ("num", "nan"):
        r = b.setp("le" if cmp == "num" else "gt", b.maxu(aa, ac), Imm(INF), bop=bop, c=pc)
        return b.finish(ins.d[0], r)
    icmp, who, repl = _FSETP[cmp]

    def key(x: Val, mag: Val) -> Val:
        if ins.mod("ftz"):
            x = b.sel(Imm(0), x, b.setp("lt", mag, Imm(0x800000)))
        return b.sel(b.sub(Imm(SIGN), x), x, b.setp("lt", x, Imm(0), sign="s"))

    ka, kc = key(a, aa), key(c, ac)
    pnan = b.setp("gt", b.maxu(aa, ac), Imm(INF))
    if who == "a":
        ka = b.sel(kc if repl == "b" else Imm(repl), ka, pnan)  # type: ignore[arg-type]
    else:
        kc = b.sel(Imm(repl), kc, pnan)  # type: ignore[arg-type]
    r = b.setp(icmp, ka, kc, sign="s", bop=bop, c=pc)
    return b.finish(ins.d[0], r)


# =============================================================================================
# conversions
# =============================================================================================
def expand_i2f(ins: MInstr, fr: object) -> list[MInstr]:
    """cvt.rnd.f32.{s32,u32}: normalize with clz, round once (no subnormal, no overflow)."""
    b = _B(fr)
    (x,) = _srcs(ins)
    rnd = ins.mod("rnd")
    if rnd == "rn" and _native_fadd(fr):
        return b.finish(ins.d[0], _i2f_by_fadd(b, x, ins.mod("sign") == "s", fr))
    if ins.mod("sign") == "s":
        sgn = b.and_(x, Imm(SIGN))
        m = b.shr(x, Imm(31), sign="s")
        mag = b.sub(b.xor(x, m), m)
    else:
        sgn, mag = Imm(0), x
        if rnd == "rm":
            rnd = "rz"
    k = b.op("clz", mag)
    mm = b.shl(mag, k)
    mn = b.or_(b.shr(mm, Imm(1)), b.and_(mm, Imm(1)))
    e = b.sub(Imm(157), k)
    p = b.round_pack(sgn, e, mn, rnd, False, subnormal=False, ovf=False)
    p = b.sel(Imm(0), p, b.setp("eq", mag, Imm(0)))
    return b.finish(ins.d[0], b.or_(p, sgn))


#: float bits of 2^23 and 2^39: a value v < 2^23 (< 2^16 scaled by 2^16) OR-ed into their
#: significands is the float 2^23 + v (2^39 + v * 2^16), exactly
_F2_23, _F2_39 = 0x4B000000, 0x53000000
#: -(2^39 + 2^23) and -(2^39 + 2^31 + 2^23) (signed: the high half carries the offset 2^15)
_NEG_HI_U, _NEG_HI_S = 0xD3000080, 0xD3008080


def _i2f_by_fadd(b: _B, x: Val, signed: bool, fr: object) -> Val:
    """cvt.rn.f32.{s32,u32} on the float adders (``Options.native_fadd``): x = hi * 2^16 + lo
    with both halves exact floats, one rounding in the last ``fadd``. hi * 2^16 - 2^23 comes from
    2^39 + hi' * 2^16 (the high half OR-ed into 2^39's significand; for s32 hi' = hi + 2^15, the
    high half of x ^ 2^31) minus a constant, exactly (a multiple of 2^16 below 2^32 in
    magnitude); 2^23 + lo from OR-ing the low half into 2^23; their sum is x, rounded once, and
    +0 for x = 0. A value known to be below 2^23 (``value_bounds``) is one OR and one exact add."""
    bounds = getattr(fr, "bounds", {})
    if isinstance(x, R) and bounds.get(x.n, 32) <= 23:
        return _fadd_row(b, b.or_(x, Imm(_F2_23)), Imm(_F2_23 | SIGN))
    u = b.xor(x, Imm(SIGN)) if signed else x
    hi = _fadd_row(b, b.or_(b.shr(u, Imm(16)), Imm(_F2_39)), Imm(_NEG_HI_S if signed else _NEG_HI_U))
    lo = b.or_(b.and_(x, Imm(0xFFFF)), Imm(_F2_23))
    return _fadd_row(b, hi, lo)


_IRND = {"rni": "rn", "rzi": "rz", "rmi": "rm", "rpi": "rp"}


def expand_f2i(ins: MInstr, fr: object) -> list[MInstr]:
    """cvt.irnd{.ftz}.{s32,u32}.f32: round the significand to an integer in the mode, saturate,
    NaN -> 0."""
    b = _B(fr)
    (a,) = _srcs(ins)
    rnd = _IRND[ins.mod("irnd") or "rzi"]
    signed = ins.mod("sign") == "s"
    mag = b.and_(a, Imm(ABS))
    if ins.mod("ftz"):
        mag = b.flush_mag(mag)
    neg = b.shr(a, Imm(31), sign="s")  # all ones when negative
    e1 = b.maxu(b.shr(mag, Imm(23)), Imm(1))
    # significand with its leading one at bit 30 (none for subnormals and zero)
    mn = b.and_(b.shl(b.or_(mag, b.minu(mag, Imm(0x800000))), Imm(7)), Imm(0x7FFFFFFF))
    # value = mn * 2^(e1 - 157): integer part = mn >> (157 - e1)
    sh = b.maxs(b.sub(Imm(157), e1), Imm(0))
    if rnd == "rn":
        halfm1 = b.shr(Imm(0x7FFFFFFF), b.sub(Imm(32), sh))
        odd = b.and_(b.shr(mn, sh), b.minu(sh, Imm(1)))
        q = b.shr(b.add(mn, b.add(halfm1, odd)), sh)
    elif rnd == "rz":
        q = b.shr(mn, sh)
    else:
        sh = b.minu(sh, Imm(31))
        mask = b.shr(Imm(M32), b.sub(Imm(32), sh))
        up = neg if rnd == "rm" else b.op("not", neg)
        q = b.shr(b.add(mn, b.and_(mask, up)), sh)
    if signed:
        q = b.sub(b.xor(q, neg), neg)  # apply the sign
        sat = b.xor(neg, Imm(0x7FFFFFFF))  # INT_MAX, or INT_MIN when negative
        q = b.sel(sat, q, b.setp("ge", e1, Imm(158)))
    else:
        q = b.shl(q, b.maxs(b.sub(e1, Imm(157)), Imm(0)))  # 2^31 <= |a| < 2^32: one more bit
        q = b.sel(Imm(M32), q, b.setp("ge", e1, Imm(159)))
        q = b.sel(Imm(0), q, b.setp("lt", a, Imm(0), sign="s"))
    q = b.sel(Imm(0), q, b.setp("gt", mag, Imm(INF)))
    return b.finish(ins.d[0], q)


def expand_frnd(ins: MInstr, fr: object) -> list[MInstr]:
    """cvt.f32.f32: round to integral (irnd), else saturate (sat), else flush (ftz)."""
    b = _B(fr)
    (a,) = _srcs(ins)
    irnd, ftz, sat = ins.mod("irnd"), ins.mod("ftz"), ins.mod("sat")
    if ftz:
        a = b.flush_word(a)
    if irnd is None:
        if sat:  # NaN and every negative (sign bit set: > INF as u32) -> +0
            a = b.sel(Imm(0), b.minu(a, Imm(ONE)), b.setp("gt", a, Imm(INF)))
        return b.finish(ins.d[0], a)
    rnd = _IRND[irnd]
    mag = b.and_(a, Imm(ABS))
    sgn = b.and_(a, Imm(SIGN))
    # |a| >= 1: clear the fraction bits of the word, rounding through the packed bits
    fb = b.maxs(b.sub(Imm(150), b.shr(mag, Imm(23))), Imm(0))
    if rnd == "rn":
        halfm1 = b.shr(Imm(0x7FFFFFFF), b.sub(Imm(32), fb))
        odd = b.and_(b.shr(mag, fb), b.minu(fb, Imm(1)))
        t = b.add(mag, b.add(halfm1, odd))
    elif rnd == "rz":
        t = mag
    else:
        mask = b.shr(Imm(M32), b.sub(Imm(32), fb))
        neg = b.shr(a, Imm(31), sign="s")
        up = neg if rnd == "rm" else b.op("not", neg)
        t = b.add(mag, b.and_(mask, up))
    r = b.shl(b.shr(t, fb), fb)
    # |a| < 1: 0 or 1 by mode
    if rnd == "rn":
        small: Val = b.sel(Imm(ONE), Imm(0), b.setp("gt", mag, Imm(0x3F000000)))
    elif rnd == "rz":
        small = Imm(0)
    else:
        pup = b.setp("ne", mag, Imm(0))
        pup = b.setp("lt" if rnd == "rm" else "ge", a, Imm(0), sign="s", bop="and", c=pup)
        small = b.sel(Imm(ONE), Imm(0), pup)
    r = b.sel(small, r, b.setp("lt", mag, Imm(ONE)))
    r = b.or_(r, sgn)
    r = b.sel(Imm(CNAN), r, b.setp("gt", mag, Imm(INF)))
    return b.finish(ins.d[0], r)


FLOAT_EXPANDERS: dict[str, Callable[[MInstr, object], list[MInstr]]] = {
    "fadd": expand_fadd,
    "fsub": expand_fadd,
    "fmul": expand_fmul,
    "ffma": expand_ffma,
    "fmin": expand_fminmax,
    "fmax": expand_fminmax,
    "fsetp": expand_fsetp,
    "i2f": expand_i2f,
    "f2i": expand_f2i,
    "frnd": expand_frnd,
    "fdiv": expand_fdiv,
    "fsqrt": expand_fsqrt,
    "fex2": expand_fex2,
    "frsqrt": expand_frsqrt,
}


def expand_floats(prog: object, ops: dict | None = None, options: object = None) -> object:
    """``prog`` (virtual registers, before allocation) with every float op replaced by its integer
    sequence, by the rules of softcore.py's framework (a self-contained copy, so the float sequences
    can be measured and tested alone): a guarded op guards the sequence's writes of
    non-temporaries (its destination), or is branched around when the sequence has a branch.
    ``options``: softcore's ``Options`` (e.g. a machine with the multiplier and the adders)."""
    from dataclasses import replace

    from qwengpu.codegen.softcore import Options, _call_site

    table = FLOAT_EXPANDERS if ops is None else ops
    opts = replace(options or Options(), routines="never")  # a routine's body inline
    fr = Fresh(prog, opts)  # type: ignore[arg-type]
    groups: list[list[MInstr]] = []
    for ins in prog.code:  # type: ignore[attr-defined]
        fn = table.get(ins.op)
        if fn is None:
            groups.append([ins])
            continue
        fr.ptx = ins.ptx
        seq = [
            y
            for x in fn(replace(ins, m=dict(ins.m), guard=None), fr)
            for y in (_call_site(x, fr, 0) if x.op == "@call" else [x])
        ]
        for x in seq:
            x.ptx = ins.ptx
        g = ins.guard
        if g is not None and any(x.op == "bra" for x in seq):
            end = fr.label()
            seq = [MInstr("bra", guard=g.inv(), target=end, ptx=ins.ptx), *seq, MInstr("@label", target=end)]
        elif g is not None:
            for x in seq:
                if any(not fr.is_temp(d) for d in x.d):
                    assert x.guard is None, f"guarded write of a non-temporary: {x}"
                    x.guard = g
        groups.append(seq)
    new_pc: list[int] = []
    label_pc: dict[int, int] = {}
    code: list[MInstr] = []
    for seq in groups:
        new_pc.append(len(code))
        for x in seq:
            if x.op == "@label":
                label_pc[x.target] = len(code)  # type: ignore[index]
            else:
                code.append(x)
    new_pc.append(len(code))
    out = []
    for x in code:
        if x.target is not None:
            x = replace(x, m=dict(x.m), target=label_pc[x.target] if x.target < 0 else new_pc[x.target])
        out.append(x)
    ranges = [(new_pc[a], new_pc[b]) for a, b in prog.ptx_ranges]  # type: ignore[attr-defined]
    return replace(prog, code=out, nregs=fr.nr, npreds=fr.np, ptx_ranges=ranges,  # type: ignore[call-overload]
                   rodata=tuple(fr.rodata))


__all__ = ["FLOAT_EXPANDERS", "MUL_SHAPE", "MUL_SHAPES", "expand_floats"]

# the registry of the framework: every float op expanded (and routable) wherever this module is loaded
register_floats(FLOAT_EXPANDERS)
