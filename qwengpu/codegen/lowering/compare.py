"""Comparison and select rules (setp, set, selp, slct) and the shared ``compare`` sequence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import M32, _bits, _signed, _type_of
from qwengpu.codegen.lowering.int64 import cmp64
from qwengpu.codegen.lowering.operands import (
    V64,
    as_pair,
    dest64,
    dpair,
    read32,
    read64,
    readp,
    to_window,
    write32,
    write64,
    writep,
)
from qwengpu.errors import PTXError
from qwengpu.isa.instr import TRUE, Imm, P
from qwengpu.ptx.ir import TYPES, Instr, Pair, Reg
from qwengpu.ptx.ir import Imm as PImm

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


def int_cmp(cx: LowerCtx, cmp: str, t: str) -> tuple[str, str]:
    """A PTX integer comparison as (machine cmp, signedness): lo/ls/hi/hs are unsigned."""
    unsigned = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
    if cmp in unsigned:
        return unsigned[cmp], "u"
    if cmp not in ("eq", "ne", "lt", "le", "gt", "ge"):
        raise PTXError(f"unsupported integer comparison .{cmp}")
    return cmp, "s" if _signed(t) else "u"


def compare(
    cx: LowerCtx,
    cmp: str,
    t: str,
    a: object,
    b: object,
    ins: Instr,
    ftz: bool,
    bop: str | None = None,
    c: P | None = None,
    into: P | None = None,
) -> P:
    """(a cmp b) [bop c] as a predicate (written into ``into`` when given)."""
    p = into if into is not None else cx.ptmp()
    m: dict[str, object] = {} if bop is None else {"bop": bop}
    extra: tuple = () if bop is None else (c,)
    if t == "f32":
        va, vb = read32(cx, a, t, ins), read32(cx, b, t, ins)
        cx.emit("fsetp", (p,), (va, vb, *extra), cmp=cmp, ftz=ftz, **m)
        return p
    if t == "f64":
        cx.emit("dsetp", (p,), (*dpair(cx, a, ins), *dpair(cx, b, ins), *extra), cmp=cmp, **m)
        return p
    cc, sg = int_cmp(cx, cmp, t)
    if _bits(t) == 64:
        va, vb = read64(cx, a, t, ins), read64(cx, b, t, ins)
        kinds = {va.kind if va.const is None else "c", vb.kind if vb.const is None else "c"}
        if kinds <= {"sx", "c"} and all(v.kind == "sx" for v in (va, vb)):
            cx.emit("setp", (p,), (va.lo, vb.lo, *extra), cmp=cc, sign=sg, **m)
            return p
        if kinds <= {"zx", "c"} and all(v.kind == "zx" for v in (va, vb)):
            cx.emit("setp", (p,), (va.lo, vb.lo, *extra), cmp=cc, sign="u", **m)
            return p
        r = cmp64(cx, cc, as_pair(cx, va, ins), as_pair(cx, vb, ins), sg == "s")
        if bop is None:
            cx.emit("plop", (p,), (r, TRUE), bop="and")
        else:
            cx.emit("plop", (p,), (r, c), bop=bop)
        return p
    mode = "zext" if cc in ("eq", "ne") or sg == "u" else "ext"
    va, vb = read32(cx, a, t, ins, mode), read32(cx, b, t, ins, mode)
    cx.emit("setp", (p,), (va, vb, *extra), cmp=cc, sign=sg, **m)
    return p


def ptx_setp(cx: LowerCtx, ins: Instr) -> None:
    """setp (one or two predicate destinations, optional boolean combination)."""
    t = _type_of(ins)
    cmp = ins.mods[0]
    bop = next((x for x in ins.mods[1:] if x in ("and", "or", "xor")), None)
    ftz = "ftz" in ins.mods
    d = ins.operands[0]
    a, b = ins.operands[1], ins.operands[2]
    c = readp(cx, ins.operands[3], ins) if len(ins.operands) > 3 else None
    if bop is not None and c is None:
        raise cx.fail(ins, "setp with a boolean operation needs a predicate operand")
    if isinstance(d, Pair):
        r = compare(cx, cmp, t, a, b, ins, ftz)
        cc = c if c is not None else TRUE
        bb = bop or "and"
        writep(cx, d.first, lambda p: cx.emit("plop", (p,), (r, cc), bop=bb), ins)
        writep(cx, d.second, lambda p: cx.emit("plop", (p,), (r.inv(), cc), bop=bb), ins)
        return
    writep(cx, d, lambda p: compare(cx, cmp, t, a, b, ins, ftz, bop, c, into=p), ins)


def ptx_set(cx: LowerCtx, ins: Instr) -> None:
    """set: a compare as all-ones (f32: 1.0) or 0 in an integer/float register."""
    cmp = ins.mods[0]
    types = [m for m in ins.mods if m in TYPES]
    dt, st = types[0], types[-1]
    d, a, b = ins.operands[:3]
    r = compare(cx, cmp, st, a, b, ins, False)
    true = Imm(0x3F800000) if dt == "f32" else Imm(M32)
    write32(cx, d, dt, lambda x: cx.into(x, "sel", true, Imm(0), r), ins)


def ptx_selp(cx: LowerCtx, ins: Instr) -> None:
    """selp: pair selects, window selects (both sides made windows of the same base), words."""
    t = _type_of(ins)
    d, a, b, c = ins.operands
    p = readp(cx, c, ins)
    if _bits(t) == 64:
        va, vb = read64(cx, a, t, ins), read64(cx, b, t, ins)
        kind = dest64(cx, d, ins)[0] if isinstance(d, Reg) else "pair"
        if kind == "pair":
            (al, ah), (bl, bh) = as_pair(cx, va, ins), as_pair(cx, vb, ins)
            write64(cx, d, V64("pair", cx.sel(al, bl, p), cx.sel(ah, bh, p)), ins)
            return
        _, dlo, _ = dest64(cx, d, ins)
        if kind == "w":
            assert isinstance(d, Reg)
            base = cx.kinds[d.name][1]
            wa, wb = to_window(cx, va, base, ins), to_window(cx, vb, base, ins)
        else:
            wa, wb = va.lo, vb.lo
        cx.into(dlo, "sel", wa, wb, p)
        return
    va, vb = read32(cx, a, t, ins, "ext"), read32(cx, b, t, ins, "ext")
    write32(cx, d, t, lambda r: cx.into(r, "sel", va, vb, p), ins, clean=True)


def ptx_slct(cx: LowerCtx, ins: Instr) -> None:
    """slct: a or b by the sign of c (f32 c: c >= 0, so -0 selects a)."""
    types = [m for m in ins.mods if m in TYPES]
    dt, ct = types[0], types[-1]
    d, a, b, c = ins.operands
    ftz = "ftz" in ins.mods
    if ct == "f32":
        p = compare(cx, "ge", "f32", c, PImm(0, "f32"), ins, ftz)
    else:
        p = cx.setp("ge", read32(cx, c, ct, ins), Imm(0), sign="s")
    if _bits(dt) == 64:
        (al, ah), (bl, bh) = (
            as_pair(cx, read64(cx, a, dt, ins), ins),
            as_pair(cx, read64(cx, b, dt, ins), ins),
        )
        write64(cx, d, V64("pair", cx.sel(al, bl, p), cx.sel(ah, bh, p)), ins)
        return
    va, vb = read32(cx, a, dt, ins, "ext"), read32(cx, b, dt, ins, "ext")
    write32(cx, d, dt, lambda r: cx.into(r, "sel", va, vb, p), ins, clean=True)
