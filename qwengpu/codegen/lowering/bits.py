"""Bit-operation rules: logic, shifts, funnel shifts, population count, clz, brev, bfind,
bit-field extract/insert and byte permutes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.arith import int_bin
from qwengpu.codegen.lowering.common import M32, _bits, _signed, _type_of
from qwengpu.codegen.lowering.int64 import clz64, cmp64, shl64, shr64
from qwengpu.codegen.lowering.operands import (
    V64,
    as_pair,
    as_w,
    dest64,
    read32,
    read64,
    readp,
    to_window,
    write32,
    write32v,
    write64,
    writep,
)
from qwengpu.isa.instr import POISON, TRUE, Imm, R
from qwengpu.ptx.ir import Imm as PImm
from qwengpu.ptx.ir import Instr, Reg

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def logic(cx: LowerCtx, ins: Instr, op: str) -> None:
    """and/or/xor by form: predicates, a small mask on a window offset (stays a window, POISON
    kept), an sx/zx word, a 64-bit pair, else one word op."""
    t = _type_of(ins)
    d, a, b = ins.operands
    if t == "pred":
        pa, pb = readp(cx, a, ins), readp(cx, b, ins)
        writep(cx, d, lambda p: cx.emit("plop", (p,), (pa, pb), bop=op), ins)
        return
    if _bits(t) == 64:
        va, vb = read64(cx, a, t, ins), read64(cx, b, t, ins)
        kind = dest64(cx, d, ins)[0] if isinstance(d, Reg) else "pair"
        if kind == "zx" and op == "and" and va.kind in ("sx", "zx"):
            _, dlo, _ = dest64(cx, d, ins)
            cx.into(dlo, "and", va.lo, vb.lo)
            return
        if kind == "w":  # a window offset with a small non-negative mask: stays in the window
            _, dlo, _ = dest64(cx, d, ins)
            w = to_window(cx, va, 0, ins)
            r = cx.op(op, w, vb.lo)
            cx.into(dlo, "sel", Imm(POISON), r, cx.setp("eq", w, Imm(POISON)))
            return
        (al, ah), (bl, bh) = as_pair(cx, va, ins), as_pair(cx, vb, ins)
        write64(cx, d, V64("pair", cx.op(op, al, bl), cx.op(op, ah, bh)), ins)
        return
    int_bin(cx, ins, op)


def ptx_and(cx: LowerCtx, ins: Instr) -> None:
    """and: see ``logic``."""
    logic(cx, ins, "and")


def ptx_or(cx: LowerCtx, ins: Instr) -> None:
    """or: see ``logic``."""
    logic(cx, ins, "or")


def ptx_xor(cx: LowerCtx, ins: Instr) -> None:
    """xor: see ``logic``."""
    logic(cx, ins, "xor")


def ptx_not(cx: LowerCtx, ins: Instr) -> None:
    """not: predicates, 64-bit pairs, words."""
    t = _type_of(ins)
    d, a = ins.operands
    if t == "pred":
        pa = readp(cx, a, ins)
        writep(cx, d, lambda p: cx.emit("plop", (p,), (pa.inv(), TRUE), bop="and"), ins)
        return
    if _bits(t) == 64:
        al, ah = as_pair(cx, read64(cx, a, t, ins), ins)
        write64(cx, d, V64("pair", cx.op("not", al), cx.op("not", ah)), ins)
        return
    va = read32(cx, a, t, ins, "raw")
    write32(cx, d, t, lambda r: cx.into(r, "not", va), ins)


def ptx_cnot(cx: LowerCtx, ins: Instr) -> None:
    """cnot: 1 if the operand is zero, else 0."""
    t = _type_of(ins)
    d, a = ins.operands
    if _bits(t) == 64:
        al, ah = as_pair(cx, read64(cx, a, t, ins), ins)
        p = cmp64(cx, "eq", (al, ah), (Imm(0), Imm(0)), False)
        write64(cx, d, V64("zx", cx.sel(Imm(1), Imm(0), p)), ins)
        return
    va = read32(cx, a, t, ins, "zext")
    p = cx.setp("eq", va, Imm(0))
    write32(cx, d, t, lambda r: cx.into(r, "sel", Imm(1), Imm(0), p), ins)


def ptx_lop3(cx: LowerCtx, ins: Instr) -> None:
    """lop3.b32: the truth table as a Shannon expansion on a (sums of products over b, c)."""
    d, a, b, c, lut = ins.operands
    if not isinstance(lut, PImm):
        raise cx.fail(ins, "lop3 needs an immediate truth table")
    va, vb, vc = (read32(cx, x, "b32", ins) for x in (a, b, c))
    table = lut.value & 0xFF
    if table in (0, 0xFF):
        write32v(cx, d, "b32", Imm(M32 if table else 0), ins)
        return

    # Shannon expansion on a: f = (a & f1(b, c)) | (~a & f0(b, c))
    def two(tab: int) -> R | Imm:  # 4-entry truth table over (b, c): bit k = f(b=k>>1, c=k&1)
        terms: list[R | Imm] = []
        for k in range(4):
            if (tab >> k) & 1:
                tb = vb if k & 2 else cx.op("not", vb)
                tc = vc if k & 1 else cx.op("not", vc)
                terms.append(cx.op("and", tb, tc))
        if not terms:
            return Imm(0)
        acc = terms[0]
        for x in terms[1:]:
            acc = cx.op("or", acc, x)
        return acc

    f1 = two(table >> 4)
    f0 = two(table & 0xF)
    hi = cx.op("and", va, f1)
    lo = cx.op("and", cx.op("not", va), f0)
    write32(cx, d, "b32", lambda r: cx.into(r, "or", hi, lo), ins)


def shift(cx: LowerCtx, ins: Instr, left: bool) -> None:
    """shl/shr: a constant left shift of a window offset is a ``mulw``; 64-bit pairs; words."""
    t = _type_of(ins)
    d, a, b = ins.operands
    vb = read32(cx, b, "u32", ins)
    if _bits(t) == 64:
        va = read64(cx, a, t, ins)
        kind = dest64(cx, d, ins)[0] if isinstance(d, Reg) else "pair"
        if left and kind == "w":
            wa, sa, _ = as_w(cx, va, ins)
            _, dlo, _ = dest64(cx, d, ins)
            assert isinstance(vb, Imm)
            cx.into(dlo, "mulw", wa, Imm(1 << vb.v), sa=sa, sb="s")
            return
        pa = as_pair(cx, va, ins)
        lo, hi = shl64(cx, pa, vb) if left else shr64(cx, pa, vb, _signed(t))
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    if left:
        va = read32(cx, a, t, ins, "raw")
        write32(cx, d, t, lambda r: cx.into(r, "shl", va, vb), ins)
    else:
        va = read32(cx, a, t, ins, "ext")
        sg = "s" if _signed(t) else "u"
        write32(cx, d, t, lambda r: cx.into(r, "shr", va, vb, sign=sg), ins, clean=True)


def ptx_shl(cx: LowerCtx, ins: Instr) -> None:
    """shl: see ``shift``."""
    shift(cx, ins, True)


def ptx_shr(cx: LowerCtx, ins: Instr) -> None:
    """shr: see ``shift``."""
    shift(cx, ins, False)


def ptx_shf(cx: LowerCtx, ins: Instr) -> None:
    """shf.{l,r}.{wrap,clamp}: a funnel shift of b:a."""
    left = "l" in ins.mods
    wrap = "wrap" in ins.mods
    d, a, b, c = ins.operands
    va, vb, vc = read32(cx, a, "b32", ins), read32(cx, b, "b32", ins), read32(cx, c, "u32", ins)
    n = cx.op("and", vc, Imm(31)) if wrap else cx.op("min", vc, Imm(32), sign="u")
    # 64-bit value b:a; left -> high word of (b:a) << n, right -> low word of (b:a) >> n
    m = cx.op("sub", Imm(32), n)
    if left:
        hi = cx.op("or", cx.op("shl", vb, n), cx.op("shr", va, m))
    else:
        hi = cx.op("or", cx.op("shr", va, n), cx.op("shl", vb, m))
    write32v(cx, d, "b32", hi, ins)


def unary_bits(cx: LowerCtx, ins: Instr, op: str) -> None:
    """popc/clz/brev on words or 64-bit pairs."""
    t = _type_of(ins)
    d, a = ins.operands
    if _bits(t) == 64:
        al, ah = as_pair(cx, read64(cx, a, t, ins), ins)
        if op == "popc":
            v = cx.op("add", cx.op("popc", al), cx.op("popc", ah))
        elif op == "clz":
            v = clz64(cx, (al, ah))
        else:  # brev
            write64(cx, d, V64("pair", cx.op("brev", ah), cx.op("brev", al)), ins)
            return
        write32v(cx, d, "u32", v, ins)
        return
    va = read32(cx, a, t, ins, "zext")
    if _bits(t) != 32:
        raise cx.fail(ins, f"unsupported {op}.{t}")
    out_t = t if op == "brev" else "u32"
    write32(cx, d, out_t, lambda r: cx.into(r, op, va), ins)


def ptx_popc(cx: LowerCtx, ins: Instr) -> None:
    """popc: see ``unary_bits``."""
    unary_bits(cx, ins, "popc")


def ptx_clz(cx: LowerCtx, ins: Instr) -> None:
    """clz: see ``unary_bits``."""
    unary_bits(cx, ins, "clz")


def ptx_brev(cx: LowerCtx, ins: Instr) -> None:
    """brev: see ``unary_bits``."""
    unary_bits(cx, ins, "brev")


def ptx_bfind(cx: LowerCtx, ins: Instr) -> None:
    """bfind: the most significant non-sign bit from clz (-1 when none; ``.shiftamt``: the count)."""
    t = _type_of(ins)
    sa = "shiftamt" in ins.mods
    d, a = ins.operands
    if _bits(t) == 64:
        al, ah = as_pair(cx, read64(cx, a, t, ins), ins)
        if _signed(t):
            s = cx.op("shr", ah, Imm(31), sign="s")
            al, ah = cx.op("xor", al, s), cx.op("xor", ah, s)
        c = clz64(cx, (al, ah))
        width = 63
    else:
        va = read32(cx, a, t, ins)
        if _signed(t):
            va = cx.op("xor", va, cx.op("shr", va, Imm(31), sign="s"))
        c = cx.op("clz", va)
        width = 31
    if sa:
        none = cx.setp("eq", c, Imm(width + 1))
        v = cx.sel(Imm(M32), c, none)
    else:
        v = cx.op("sub", Imm(width), c)  # -1 (0xFFFFFFFF) when there is no set bit
    write32v(cx, d, "u32", v, ins)


def bfe32(cx: LowerCtx, x: R | Imm, pos: R | Imm, ln: R | Imm, signed: bool) -> R:
    """bfe on a 32-bit word: position and length from their low bytes, sign fill when signed."""
    p = cx.op("and", pos, Imm(0xFF))
    n = cx.op("and", ln, Imm(0xFF))
    sh = cx.op("shr", x, p)
    if not signed:
        mask = cx.op("sub", cx.op("shl", Imm(1), n), Imm(1))  # n >= 32 -> all ones
        return cx.op("and", sh, mask)
    avail = cx.op("max", cx.op("sub", Imm(32), p), Imm(0), sign="s")
    cnt = cx.op("min", n, avail, sign="u")
    mask = cx.op("sub", cx.op("shl", Imm(1), cnt), Imm(1))
    r = cx.op("and", sh, mask)
    top = cx.op("min", cx.op("sub", cx.op("add", p, n), Imm(1)), Imm(31), sign="u")
    sb = cx.op("and", cx.op("shr", x, top), Imm(1))
    fill = cx.op("and", cx.op("not", mask), cx.op("sub", Imm(0), sb))
    r = cx.op("or", r, fill)
    return cx.sel(Imm(0), r, cx.setp("eq", n, Imm(0)))


def ptx_bfe(cx: LowerCtx, ins: Instr) -> None:
    """bfe.{s32,u32} (64-bit bfe is a machine limit)."""
    t = _type_of(ins)
    d, a, b, c = ins.operands
    if _bits(t) != 32:
        raise cx.limit(ins, "64-bit bfe")
    va = read32(cx, a, t, ins)
    vb, vc = read32(cx, b, "u32", ins), read32(cx, c, "u32", ins)
    v = bfe32(cx, va, vb, vc, _signed(t))
    write32v(cx, d, t, v, ins)


def ptx_bfi(cx: LowerCtx, ins: Instr) -> None:
    """bfi: 32-bit with register position/length; 64-bit with constant ones as word masks."""
    t = _type_of(ins)
    d, a, b, c, e = ins.operands
    vc, ve = read32(cx, c, "u32", ins), read32(cx, e, "u32", ins)
    if _bits(t) == 64:
        if not (isinstance(vc, Imm) and isinstance(ve, Imm)):
            raise cx.limit(ins, "64-bit bfi with a register position or length")
        pos, ln = vc.v & 0xFF, ve.v & 0xFF
        n = max(0, min(ln, 64 - pos))
        mask = ((1 << n) - 1) << pos if pos < 64 else 0
        pa = as_pair(cx, read64(cx, a, t, ins), ins)
        pb = as_pair(cx, read64(cx, b, t, ins), ins)
        sl, sh = shl64(cx, pa, Imm(pos)) if pos < 64 else (Imm(0), Imm(0))
        words = []
        for k, (x, y) in enumerate(((sl, pb[0]), (sh, pb[1]))):
            mk = (mask >> (32 * k)) & M32
            if mk == 0:
                words.append(y)
            elif mk == M32:
                words.append(x)
            else:
                words.append(cx.op("or", cx.op("and", x, Imm(mk)), cx.op("and", y, Imm(~mk & M32))))
        write64(cx, d, V64("pair", words[0], words[1]), ins)
        return
    va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
    p = cx.op("and", vc, Imm(0xFF))
    n = cx.op("and", ve, Imm(0xFF))
    avail = cx.op("max", cx.op("sub", Imm(32), p), Imm(0), sign="s")
    cnt = cx.op("min", n, avail, sign="u")
    mask = cx.op("shl", cx.op("sub", cx.op("shl", Imm(1), cnt), Imm(1)), p)
    ins_bits = cx.op("and", cx.op("shl", va, p), mask)
    keep = cx.op("and", vb, cx.op("not", mask))
    write32(cx, d, t, lambda r: cx.into(r, "or", ins_bits, keep), ins)


def ptx_prmt(cx: LowerCtx, ins: Instr) -> None:
    """prmt.b32: every result byte picked from b:a by the selector (generic mode) or by a mode's rule."""
    mode = next((x for x in ins.mods if x in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")), None)
    d, a, b, c = ins.operands
    va, vb, vc = (read32(cx, x, "b32", ins) for x in (a, b, c))

    def src_byte(idx: R | Imm) -> R | Imm:
        """Byte number idx (0-7) of the 8-byte value b:a."""
        if isinstance(idx, Imm):
            k = idx.v & 7
            w = va if k < 4 else vb
            sh = 8 * (k & 3)
            v = cx.op("shr", w, Imm(sh)) if sh else w
            return cx.op("and", v, Imm(0xFF))
        w = cx.sel(vb, va, cx.setp("ne", cx.op("and", idx, Imm(4)), Imm(0)))
        sh = cx.op("shl", cx.op("and", idx, Imm(3)), Imm(3))
        return cx.op("and", cx.op("shr", w, sh), Imm(0xFF))

    acc: R | Imm = Imm(0)
    for i in range(4):
        if mode is None:
            if isinstance(vc, Imm):
                sel = (vc.v >> (4 * i)) & 0xF
                byte = src_byte(Imm(sel & 7))
                if sel & 8:
                    byte = cx.op("shr", cx.op("shl", byte, Imm(24)), Imm(31), sign="s")
                    byte = cx.op("and", byte, Imm(0xFF))
            else:
                sel_r = cx.op("and", cx.op("shr", vc, Imm(4 * i)), Imm(0xF))
                byte = src_byte(cx.op("and", sel_r, Imm(7)))
                rep = cx.op("and", cx.op("shr", cx.op("shl", byte, Imm(24)), Imm(31), sign="s"), Imm(0xFF))
                byte = cx.sel(rep, byte, cx.setp("ne", cx.op("and", sel_r, Imm(8)), Imm(0)))
        else:
            n = cx.op("and", vc, Imm(3))
            if mode == "f4e":
                idx = cx.op("and", cx.op("add", n, Imm(i)), Imm(7))
            elif mode == "b4e":
                idx = cx.op("and", cx.op("sub", n, Imm(i)), Imm(7))
            elif mode == "rc8":
                idx = n
            elif mode == "ecl":
                idx = cx.op("max", n, Imm(i), sign="u")
            elif mode == "ecr":
                idx = cx.op("min", n, Imm(i), sign="u")
            else:  # rc16
                odd = cx.setp("ne", cx.op("and", n, Imm(1)), Imm(0))
                idx = cx.sel(Imm(2 + (i & 1)), Imm(i & 1), odd)
            byte = src_byte(idx)
        sh_b = cx.op("shl", byte, Imm(8 * i)) if i else byte
        acc = sh_b if i == 0 else cx.op("or", acc, sh_b)
    write32v(cx, d, "b32", acc, ins)
