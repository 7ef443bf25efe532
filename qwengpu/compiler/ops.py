"""The primitive library: every operator becomes one or more MLP nodes of :class:`Formula` bits.

:class:`Circuit` (at the end) is the graph of :mod:`ir` with these functions as methods: what users
build circuits with (``a + b`` on its words calls :func:`add` here).

Stage 2 of the compiler. Each function documents the formula it emits and how many MLP layers it
takes; :mod:`qwengpu.compiler.mlp` explains the neurons behind each term. Rules of thumb:

* a bit that is on for exactly one value of its threshold form (AND, equality with a constant,
  one-hot decode, multiplexer select) costs one neuron and is also exact in bfloat16;
* a threshold whose form can overshoot (OR-free sums, carries) costs a neuron pair;
* negation, constants, slicing and constant shifts are free: they are folded into consumers;
* 32-bit add / subtract / compare use chunked carry-lookahead: two MLP layers (one when the
  word fits one chunk), because exact float32 integers stop at 2**24.

Cost of 32-bit primitives alone (MLP layers, neurons; without slot reuse, which adds one reset
neuron per reused slot):

    and / or / xor          1    64       a == b                2     34
    mux(p, a, b)            1    64       a == constant         1      1
    select, 8 options       1   256+      a + b, a - b          2    111
    a << n, a >> n          1   528       a < b (signed too)    2     15
    signed a >> n           1   530       rotl / rotr by n      1   1024
    decode 5 -> 32          1    32       encode 32 -> 5        1      6
    a * b (low 32 bits)     4  2574       a * constant          3   1178

bfloat16 (same weights rounded to bf16): exact for every primitive whose threshold forms stay
small -- bitwise logic, mux/select, decode/encode, equality (word or constant), threshold/lut/
parity of a few bits, all shifts and rotates. Not exact: add/sub/compare/multiply (their carry
thresholds span thousands of steps, beyond bf16's 8-bit mantissa); they are float32-only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .ir import Bit, BitLike, CircuitError, CircuitGraph, Formula, Lin, Prod, Step, Word

# ---------------------------------------------------------------------------------------------
# Bit-level formulas
# ---------------------------------------------------------------------------------------------


def _fold(bits: Sequence[Bit]) -> tuple[list[Bit], list[int]]:
    live = [b for b in bits if not b.is_const]
    consts = [int(b.const or 0) for b in bits if b.is_const]
    return live, consts


def and_formula(bits: Sequence[Bit]) -> Formula:
    """``[sum(b) >= n]``: one neuron (on only at the top value)."""
    live, consts = _fold(bits)
    if 0 in consts:
        return Formula(Lin({}, 0))
    if not live:
        return Formula(Lin({}, 1))
    if len(live) == 1:
        return Formula(live[0].lin())
    return Formula(Lin(), [Step(sum((b.lin() for b in live), Lin()), len(live), Lin({}, 1))])


def or_formula(bits: Sequence[Bit]) -> Formula:
    """``1 - [sum(1 - b) >= n]``: one neuron plus the shared constant neuron."""
    live, consts = _fold(bits)
    if 1 in consts:
        return Formula(Lin({}, 1))
    if not live:
        return Formula(Lin({}, 0))
    if len(live) == 1:
        return Formula(live[0].lin())
    nor = sum(((1 - b.lin()) for b in live), Lin())
    return Formula(Lin({}, 1), [Step(nor, len(live), Lin({}, 1), -1)])


def parity_formula(bits: Sequence[Bit]) -> Formula:
    """``S - 2 * sum_j [S >= 2j]`` with ``S = sum(b)``: n/2 thresholds plus one linear neuron."""
    live, consts = _fold(bits)
    flip = sum(consts) & 1
    s = sum((b.lin() for b in live), Lin())
    steps: list[Step | Prod] = [Step(s, 2 * j, Lin({}, 1), -2) for j in range(1, len(live) // 2 + 1)]
    if flip:
        return Formula(1 - s, [Step(t.L, t.theta, t.U, 2) for t in steps])  # type: ignore[union-attr]
    return Formula(s, steps)


def match_form(bits: Sequence[Bit], value: int) -> Lin:
    """Number of bits that agree with ``value``'s bits: equals ``len(bits)`` iff they all agree."""
    out = Lin()
    for i, b in enumerate(bits):
        out = out + (b.lin() if (value >> i) & 1 else 1 - b.lin())
    return out


def all_of(c: CircuitGraph, bits: list[Bit]) -> Bit:
    return c.formulas("and", [and_formula(bits)])[0]


def any_of(c: CircuitGraph, bits: list[Bit]) -> Bit:
    return c.formulas("or", [or_formula(bits)])[0]


def parity(c: CircuitGraph, bits: list[Bit]) -> Bit:
    return c.formulas("xor", [parity_formula(bits)])[0]


def threshold(c: CircuitGraph, bits: list[Bit], weights: Sequence[int], theta: int) -> Bit:
    if len(bits) != len(weights):
        raise CircuitError("threshold: one weight per bit")
    form = sum((b.lin() * int(w) for b, w in zip(bits, weights, strict=True)), Lin())
    if form.is_const:
        return Bit(c, const=int(form.const >= theta))
    return c.formulas("threshold", [Formula(Lin(), [Step(form, int(theta), Lin({}, 1))])])[0]


def lut(c: CircuitGraph, bits: list[Bit], fn: Callable[..., int]) -> Bit:
    """A truth table as a sum of minterms (one single-neuron step each), on the sparser side."""
    k = len(bits)
    if k > 12:
        raise CircuitError("lut: at most 12 inputs (one neuron per minterm)")
    table = [int(bool(fn(*[(v >> i) & 1 for i in range(k)]))) for v in range(1 << k)]
    ones = [v for v in range(1 << k) if table[v]]
    zeros = [v for v in range(1 << k) if not table[v]]
    if len(ones) <= len(zeros):
        f = Formula(Lin(), [Step(match_form(bits, v), k, Lin({}, 1)) for v in ones])
    else:
        f = Formula(Lin({}, 1), [Step(match_form(bits, v), k, Lin({}, 1), -1) for v in zeros])
    return c.formulas("lut", [f])[0]


# ---------------------------------------------------------------------------------------------
# Word-level: bitwise, mux, select, decode, encode
# ---------------------------------------------------------------------------------------------


def bitwise(c: CircuitGraph, op: str, a: Word, b: Word) -> Word:
    make = {"and": and_formula, "or": or_formula, "xor": parity_formula}[op]
    bits = c.formulas(op, [make([x, y]) for x, y in zip(a.bits, b.bits, strict=True)])
    return Word(c, bits, a.signed)


def _same(x: Bit, y: Bit) -> bool:
    if x.is_const or y.is_const:
        return x.is_const and y.is_const and x.const == y.const
    return x.sig is y.sig and x.neg == y.neg


def mux_formula(cond: Bit, t: Bit, f: Bit) -> Formula:
    """``[cond] * t + [~cond] * f``: two single-neuron selects (one when an arm is the constant 0)."""
    if _same(t, f):
        return Formula(t.lin())
    terms: list[Step | Prod] = []
    for sel, arm in ((cond, t), (~cond, f)):
        u = arm.lin()
        if u.is_const and u.const == 0:
            continue
        terms.append(Step(sel.lin(), 1, u))
    return Formula(Lin(), terms)


def mux(c: CircuitGraph, cond: Bit, if_true: Word | Bit | int, if_false: Word | Bit | int) -> Word | Bit:
    """``if_true if cond else if_false`` (bitwise); one MLP layer."""
    if isinstance(if_true, Word) or isinstance(if_false, Word):
        ref = if_true if isinstance(if_true, Word) else if_false
        t = if_true if isinstance(if_true, Word) else ref._other(if_true)  # type: ignore[union-attr,arg-type]
        f = if_false if isinstance(if_false, Word) else ref._other(if_false)  # type: ignore[union-attr,arg-type]
        if t.width != f.width:
            raise CircuitError(f"mux: width mismatch {t.width} vs {f.width}")
        if cond.is_const:
            return t if cond.const else f
        bits = c.formulas("mux", [mux_formula(cond, x, y) for x, y in zip(t.bits, f.bits, strict=True)])
        return Word(c, bits, t.signed)
    t_bit, f_bit = c.bit(if_true), c.bit(if_false)  # type: ignore[arg-type]
    if cond.is_const:
        return t_bit if cond.const else f_bit
    return c.formulas("mux", [mux_formula(cond, t_bit, f_bit)])[0]


def select(c: CircuitGraph, index: Word, options: Sequence[Word]) -> Word:
    """``options[index]`` (0 when index is past the end): one neuron per (option, bit); one layer."""
    if not options:
        raise CircuitError("select: no options")
    if len(options) > (1 << index.width):
        raise CircuitError(f"select: {len(options)} options need more than {index.width} index bits")
    width = options[0].width
    if any(o.width != width for o in options):
        raise CircuitError("select: options differ in width")
    n = index.width
    forms = []
    for i in range(width):
        terms: list[Step | Prod] = []
        for j, o in enumerate(options):
            u = o.bits[i].lin()
            if u.is_const and u.const == 0:
                continue
            terms.append(Step(match_form(index.bits, j), n, u))
        forms.append(Formula(Lin(), terms))
    return Word(c, c.formulas("select", forms), options[0].signed)


def decode(c: CircuitGraph, a: Word) -> Word:
    """One-hot: bit j is ``[a == j]``; one neuron per output bit; one layer."""
    if a.width > 12:
        raise CircuitError("decode: at most 12 bits (4096 outputs)")
    n = a.width
    forms = [Formula(Lin(), [Step(match_form(a.bits, j), n, Lin({}, 1))]) for j in range(1 << n)]
    return Word(c, c.formulas("decode", forms))


def encode(c: CircuitGraph, onehot: Word) -> Word:
    """Index of the set bit: bit j is the OR of the inputs whose index has bit j (OR of all set
    indices when several are set); one neuron per output bit plus a shared constant; one layer."""
    k = onehot.width
    n = max(1, (k - 1).bit_length())
    forms = [or_formula([onehot.bits[i] for i in range(k) if (i >> j) & 1]) for j in range(n)]
    return Word(c, c.formulas("encode", forms))


# ---------------------------------------------------------------------------------------------
# Carry-lookahead: add, subtract, compare
# ---------------------------------------------------------------------------------------------


class _CarryChain:
    """Chunked carry-lookahead over per-bit forms ``s_i`` (each 0..2) plus a carry in.

    Layer 1 computes, for every chunk but the last, generate ``G = [S >= 2^C]`` and propagate
    ``P = [S == 2^C - 1]`` of the chunk sum ``S``. The carry into chunk k is ``[W_k >= 1]`` with
    ``W_k = sum_{j<k} 2^j (2 G_j + P_j - 1)`` (the highest non-propagating chunk decides), and
    ``|W_k| < 2^k``. So "local sum T plus carry-in reaches theta" is the single threshold
    ``2^k T + W_k >= 2^k (theta - 1) + 1`` -- small integers, exact in float32.
    """

    def __init__(self, c: CircuitGraph, s: list[Lin], cin: Lin):
        self.c = c
        self.s = s
        self.cin = cin
        n = len(s)
        C = max(1, c.chunk)
        self.chunks = [(lo, min(n, lo + C)) for lo in range(0, n, C)]
        m = len(self.chunks)
        self.G: list[Lin] = []
        self.P: list[Lin] = []
        if m > 1:
            forms: list[Formula] = []
            for k, (lo, hi) in enumerate(self.chunks[:-1]):
                S = self.local(k, hi - lo - 1) + (cin if k == 0 else 0)
                full = 1 << (hi - lo)
                forms.append(Formula(Lin(), [Step(S, full, Lin({}, 1))]))
                forms.append(Formula(Lin(), [Step(S, full - 1, Lin({}, 1)), Step(S, full, Lin({}, 1), -1)]))
            bits = c.formulas("carry.gp", forms)
            self.G = [b.lin() for b in bits[0::2]]
            self.P = [b.lin() for b in bits[1::2]]

    def local(self, k: int, r: int) -> Lin:
        """``T_r``: chunk k's weighted sum of bits 0..r (0 for r < 0)."""
        lo, _ = self.chunks[k]
        return sum((self.s[lo + q] * (1 << q) for q in range(r + 1)), Lin())

    def W(self, k: int) -> Lin:
        return sum(((2 * self.G[j] + self.P[j] - 1) * (1 << j) for j in range(k)), Lin())

    def reaches(self, k: int, r: int, theta: int) -> tuple[Lin, int]:
        """``[T_r + carry_into_chunk_k >= theta]`` as (form, threshold)."""
        if k == 0:
            return self.local(0, r) + self.cin, theta
        M = 1 << k
        return self.local(k, r) * M + self.W(k), M * (theta - 1) + 1

    def carry_into(self, k: int, r: int) -> list[Step | Prod] | Lin:
        """Carry into local bit r of chunk k: a linear form (the carry in) or one threshold."""
        if k == 0 and r == 0:
            return self.cin
        form, th = self.reaches(k, r - 1, 1 << r)
        return [Step(form, th, Lin({}, 1))]

    def carry_out(self) -> Formula:
        k = len(self.chunks) - 1
        lo, hi = self.chunks[k]
        form, th = self.reaches(k, hi - lo - 1, 1 << (hi - lo))
        return Formula(Lin(), [Step(form, th, Lin({}, 1))])

    def sum_formulas(self) -> list[Formula]:
        """Bit i = s_i + c_i - 2 c_{i+1}; neighbouring bits share the carry threshold neurons."""
        out = []
        for k, (lo, hi) in enumerate(self.chunks):
            for r in range(hi - lo):
                f = Formula(self.s[lo + r])
                cin = self.carry_into(k, r)
                if isinstance(cin, Lin):
                    f.lin = f.lin + cin
                else:
                    f.terms += cin
                form, th = self.reaches(k, r, 1 << (r + 1))
                f.terms.append(Step(form, th, Lin({}, 1), -2))
                out.append(f)
        return out


def add(c: CircuitGraph, a: Word, b: Word, carry_in: Bit | int = 0) -> tuple[Word, Bit]:
    """``(a + b + carry_in) mod 2^n`` and carry out: 2 MLP layers (1 if n <= chunk)."""
    if a.width != b.width:
        raise CircuitError(f"add: width mismatch {a.width} vs {b.width}")
    cin = c.bit(carry_in).lin()
    chain = _CarryChain(c, [x.lin() + y.lin() for x, y in zip(a.bits, b.bits, strict=True)], cin)
    forms = chain.sum_formulas() + [chain.carry_out()]
    bits = c.formulas("add", forms)
    return Word(c, bits[:-1], a.signed), bits[-1]


def _flip_sign(w: Word) -> list[Bit]:
    return list(w.bits[:-1]) + [~w.bits[-1]]


def less(c: CircuitGraph, a: Word, b: Word, signed: bool = False) -> Bit:
    """``a < b``: no carry out of ``a + ~b + 1``; signed flips both sign bits. 2 layers (1 if n <= chunk)."""
    if a.width != b.width:
        raise CircuitError(f"compare: width mismatch {a.width} vs {b.width}")
    xa = _flip_sign(a) if signed else list(a.bits)
    xb = _flip_sign(b) if signed else list(b.bits)
    chain = _CarryChain(c, [x.lin() + (1 - y.lin()) for x, y in zip(xa, xb, strict=True)], Lin({}, 1))
    cout = chain.carry_out()
    f = Formula(1 - cout.lin, [Step(t.L, t.theta, t.U, -t.coef) for t in cout.terms])  # type: ignore[union-attr]
    return c.formulas("less", [f])[0]


EQ_CHUNK = 4  # chunk differences stay within +-15: every gate value is exact in bfloat16 too


def equal(c: CircuitGraph, a: Word, b: Word) -> Bit:
    """``a == b``: one neuron against a constant; else per 4-bit chunk ``[D>=0]+[-D>=0]-1`` (D the
    chunk difference) and an AND of the chunks: 2 layers (1 up to 4 bits)."""
    if a.width != b.width:
        raise CircuitError(f"equal: width mismatch {a.width} vs {b.width}")
    for x, y in ((a, b), (b, a)):
        if all(bit.is_const for bit in y.bits):
            value = sum(int(bit.const or 0) << i for i, bit in enumerate(y.bits))
            f = Formula(Lin(), [Step(match_form(x.bits, value), x.width, Lin({}, 1))])
            return c.formulas("eq", [f])[0]
    C = EQ_CHUNK
    forms = []
    for lo in range(0, a.width, C):
        d = sum(((a.bits[i].lin() - b.bits[i].lin()) * (1 << (i - lo))
                 for i in range(lo, min(a.width, lo + C))), Lin())
        forms.append(Formula(Lin({}, -1), [Step(d, 0, Lin({}, 1)), Step(-d, 0, Lin({}, 1))]))
    chunks = c.formulas("eq.chunk", forms)
    return chunks[0] if len(chunks) == 1 else all_of(c, chunks)


# ---------------------------------------------------------------------------------------------
# Shifts and rotates
# ---------------------------------------------------------------------------------------------


def shift(c: CircuitGraph, a: Word, k: int | Word, kind: str) -> Word:
    """Shift/rotate. A constant amount is free (rewiring); a variable amount is one layer with one
    neuron per (amount, bit) pair. Amounts >= width give 0 (shl, shr) or the sign (sar), as PTX
    clamps them; rotates use the amount mod width (width must then be a power of two)."""
    n = a.width
    zero = Bit(c, const=0)
    sign = a.bits[-1]
    if isinstance(k, int):
        if k < 0:
            raise CircuitError("negative shift amount")
        if kind == "shl":
            bits = [zero] * min(k, n) + list(a.bits[: max(0, n - k)])
        elif kind == "shr":
            bits = list(a.bits[k:]) + [zero] * min(k, n)
        elif kind == "sar":
            bits = list(a.bits[k:]) + [sign] * min(k, n)
        elif kind in ("rotl", "rotr"):
            r = (k if kind == "rotl" else -k) % n
            bits = list(a.bits[n - r:]) + list(a.bits[: n - r])
        else:
            raise CircuitError(f"unknown shift {kind!r}")
        return Word(c, bits, a.signed)
    s = k
    if kind in ("rotl", "rotr"):
        if n & (n - 1):
            raise CircuitError("rotate by a variable amount needs a power-of-two width")
        low = list(s.bits[: (n - 1).bit_length()])  # the amount mod n
        amounts = range(min(n, 1 << len(low)))
        forms = []
        for i in range(n):
            terms: list[Step | Prod] = []
            for j in amounts:
                src = (i - j) % n if kind == "rotl" else (i + j) % n
                terms.append(Step(match_form(low, j), len(low), a.bits[src].lin()))
            forms.append(Formula(Lin(), terms))
        return Word(c, c.formulas(kind, forms), a.signed)
    if kind not in ("shl", "shr", "sar"):
        raise CircuitError(f"unknown shift {kind!r}")
    nb = max(1, (n - 1).bit_length())
    low, high = list(s.bits[:nb]), list(s.bits[nb:])
    hi_zero = sum(((1 - h.lin()) for h in high), Lin())
    amounts = range(min(n, 1 << len(low)))
    forms = []
    for i in range(n):
        terms = []
        for j in amounts:
            src = i - j if kind == "shl" else i + j
            if not 0 <= src < n:
                continue
            u = a.bits[src].lin()
            if u.is_const and u.const == 0:
                continue
            terms.append(Step(match_form(low, j) + hi_zero, len(low) + len(high), u))
        lin = Lin()
        if kind == "sar" and not (sign.is_const and sign.const == 0):
            # sign fill for low amounts >= n-i (one neuron per amount, shared by every output bit)
            # and for amounts >= n: [some high bit] * sign = sign - [no high bit] * sign
            for j in range(n - i, 1 << len(low)):
                terms.append(Step(match_form(low, j) + hi_zero, len(low) + len(high), sign.lin()))
            if high:
                lin = sign.lin()
                terms.append(Step(hi_zero, len(high), sign.lin(), -1))
        forms.append(Formula(lin, terms))
    return Word(c, c.formulas(kind, forms), a.signed)


# ---------------------------------------------------------------------------------------------
# Multiplication: Booth radix-4 rows, column compression, the final carry-lookahead add
# ---------------------------------------------------------------------------------------------

# Booth radix-4: digit of (b_{2j+1}, b_{2j}, b_{2j-1}) as value v = b_{2j-1} + 2 b_{2j} + 4 b_{2j+1}
_BOOTH = {0: 0, 1: 1, 2: 1, 3: 2, 4: -2, 5: -1, 6: -1, 7: 0}


def mul(c: CircuitGraph, a: Word, b: Word | int) -> Word:
    """Low ``n`` bits of ``a * b`` (the same for signed and unsigned operands).

    Variable ``b``: one layer of Booth radix-4 rows (``n/2`` rows of ``d * a``, ``d`` in -2..2, each
    bit a sum of single-neuron selects, plus a +1 correction bit per negative row: about ``n^2/4``
    residual slots instead of ``n^2/2`` AND partial products), one column-compression layer and
    the two-layer adder: 4 layers for 32 bits. Constant ``b``: shifted copies of ``a``, no row layer.
    """
    n = a.width
    cols: list[list[Bit]] = [[] for _ in range(n)]
    zero = Bit(c, const=0)
    if isinstance(b, int):
        for j in range(n):
            if (b >> j) & 1:
                for i in range(n - j):
                    cols[i + j].append(a.bits[i])
        return Word(c, sum_columns(c, cols), a.signed)
    if b.width != n:
        raise CircuitError(f"mul: width mismatch {n} vs {b.width}")

    def bb(k: int) -> Bit:
        return b.bits[k] if 0 <= k < n else zero

    forms: list[Formula] = []
    targets: list[int] = []
    for j in range((n + 1) // 2):
        t = [bb(2 * j - 1), bb(2 * j), bb(2 * j + 1)]
        sel = {v: match_form(t, v) for v in range(8)}
        for i in range(n - 2 * j):
            ai = a.bits[i].lin()
            ai1 = a.bits[i - 1].lin() if i >= 1 else Lin()
            mag = {1: ai, 2: ai1, -1: 1 - ai, -2: 1 - ai1}  # bit i of d*a (negative: of ~(|d| a))
            terms: list[Step | Prod] = []
            for v, d in _BOOTH.items():
                if d == 0 or (mag[d].is_const and mag[d].const == 0):
                    continue
                terms.append(Step(sel[v], 3, mag[d]))
            forms.append(Formula(Lin(), terms))
            targets.append(2 * j + i)
        # the +1 of a negative row's two's complement: [2 b_{2j+1} - b_{2j} - b_{2j-1} >= 1]
        neg = 2 * t[2].lin() - t[1].lin() - t[0].lin()
        forms.append(Formula(Lin(), [Step(neg, 1, Lin({}, 1))]))
        targets.append(2 * j)
    rows = c.formulas("mul.booth", forms)
    for bit, q in zip(rows, targets, strict=True):
        cols[q].append(bit)
    return Word(c, sum_columns(c, cols), a.signed)


def _digit_formula(v: Lin, r: int, full_low: bool) -> Formula:
    """Bit r of the integer form ``v`` (which only matters mod 2^(r+1)).

    r = 0 uses ``v - 2 sum_k [v >= 2k]`` (half the thresholds); higher digits alternate
    ``[v >= m 2^r]`` with signs +, -, +, ...
    """
    if r == 0 and full_low:
        return Formula(v, [Step(v, 2 * k, Lin({}, 1), -2) for k in range(1, v.hi() // 2 + 1)])
    return Formula(Lin(), [Step(v, m << r, Lin({}, 1), 1 if m % 2 else -1)
                           for m in range(1, v.hi() // (1 << r) + 1)])


def sum_columns(c: CircuitGraph, cols: list[list[Bit]]) -> list[Bit]:
    """``sum_c 2^c * sum(cols[c])`` mod ``2^len(cols)`` as bits.

    While some column holds more than two bits, one MLP layer replaces each window of ``chunk``
    columns by the binary digits of its weighted sum (digit r from the window's partial sum up to
    weight 2^r, so each digit needs about 2 * height thresholds); neighbouring windows overlap by
    the carry digits, so one layer usually leaves at most two bits per column. Then the
    carry-lookahead adder finishes.
    """
    n = len(cols)
    const = 0
    rows: list[list[Bit]] = []
    for col_i, col in enumerate(cols):
        live = []
        for bit in col:
            if bit.is_const:
                const += int(bit.const or 0) << col_i
            else:
                live.append(bit)
        rows.append(live)
    const %= 1 << n
    W = max(2, c.chunk)
    for _ in range(16):
        if max((len(r) for r in rows), default=0) <= (2 if const == 0 else 1):
            break
        new_rows: list[list[Bit]] = [[] for _ in range(n)]
        forms: list[Formula] = []
        targets: list[int] = []
        for lo in range(0, n, W):
            hi = min(n, lo + W)
            cvals = (const >> lo) & ((1 << (hi - lo)) - 1)
            if all(len(rows[q]) <= 1 for q in range(lo, hi)) and cvals == 0:
                for q in range(lo, hi):
                    new_rows[q] += rows[q]
                continue

            def partial(r: int, lo: int = lo, hi: int = hi, cvals: int = cvals,
                        rows: list[list[Bit]] = rows) -> Lin:
                top = min(hi - 1, lo + r)
                f = Lin({}, cvals & ((1 << (top - lo + 1)) - 1))
                for q in range(lo, top + 1):
                    for bit in rows[q]:
                        f = f + bit.lin() * (1 << (q - lo))
                return f

            vmax = partial(hi - lo - 1).hi()
            for r in range(vmax.bit_length()):
                if lo + r >= n:
                    break
                forms.append(_digit_formula(partial(r), r, True))
                targets.append(lo + r)
        const = 0  # every window holding constant bits was compressed this round
        bits = c.formulas("mul.compress", forms)
        for bit, t in zip(bits, targets, strict=True):
            if not bit.is_const or bit.const:
                new_rows[t].append(bit)
        rows = new_rows
    else:  # pragma: no cover - the loop always converges
        raise CircuitError("sum_columns did not converge")
    x = [rows[q][0] if len(rows[q]) > 0 else Bit(c, const=0) for q in range(n)]
    y = [rows[q][1] if len(rows[q]) > 1 else Bit(c, const=(const >> q) & 1) for q in range(n)]
    if all(bit.is_const and not bit.const for bit in y):
        return x
    return list(add(c, Word(c, x), Word(c, y))[0].bits)


class Circuit(CircuitGraph):
    """A circuit under construction: the graph of :mod:`ir` plus this library's operations as
    methods, so circuits read like formulas. Build it twice and get two circuits.

    Example::

        c = Circuit("adder")
        a, b = c.input("a", 32), c.input("b", 32)
        c.output("sum", a + b)
        compiled = compile_circuit(c, config)
    """

    # -- operations (implemented in py; thin wrappers so circuits read like formulas) ----
    def add(self, a: Word, b: Word, carry_in: BitLike = 0) -> Word:
        return add(self, a, b, carry_in)[0]

    def add_carry(self, a: Word, b: Word, carry_in: BitLike = 0) -> tuple[Word, Bit]:
        """``(a + b + carry_in) mod 2**n`` and the carry out."""
        return add(self, a, b, carry_in)

    def sub(self, a: Word, b: Word) -> Word:
        return add(self, a, ~b.as_unsigned(), 1)[0]

    def mul(self, a: Word, b: Word | int) -> Word:
        return mul(self, a, b)

    def bitwise(self, op: str, a: Word, b: Word) -> Word:
        return bitwise(self, op, a, b)

    def shift(self, a: Word, k: int | Word, kind: str) -> Word:
        return shift(self, a, k, kind)

    def equal(self, a: Word, b: Word) -> Bit:
        return equal(self, a, b)

    def less(self, a: Word, b: Word, signed: bool = False) -> Bit:
        return less(self, a, b, signed)

    def decode(self, a: Word) -> Word:
        return decode(self, a)

    def encode(self, onehot: Word) -> Word:
        return encode(self, onehot)

    def mux(self, cond: BitLike, if_true: Word | BitLike, if_false: Word | BitLike) -> Word | Bit:
        return mux(self, self.bit(cond), if_true, if_false)

    def select(self, index: Word, options: Sequence[Word]) -> Word:
        return select(self, index, options)

    def all_of(self, bits: Iterable[BitLike]) -> Bit:
        return all_of(self, [self.bit(b) for b in bits])

    def any_of(self, bits: Iterable[BitLike]) -> Bit:
        return any_of(self, [self.bit(b) for b in bits])

    def parity(self, bits: Iterable[BitLike]) -> Bit:
        return parity(self, [self.bit(b) for b in bits])

    def threshold(self, bits: Sequence[BitLike], weights: Sequence[int], theta: int) -> Bit:
        """``[sum(w_i * b_i) >= theta]`` in one MLP."""
        return threshold(self, [self.bit(b) for b in bits], weights, theta)

    def lut(self, bits: Sequence[BitLike], fn: Callable[..., int]) -> Bit:
        """Any Boolean function of a few bits in one MLP (one neuron per minterm)."""
        return lut(self, [self.bit(b) for b in bits], fn)
