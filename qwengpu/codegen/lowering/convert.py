"""Conversion rules: cvt between integer and float types of every width (64-bit and f64
forms as pair sequences or pair ops) and cvta between state spaces."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwengpu.codegen.lowering.common import INT_ROUNDING, M32, ROUNDING, _bits, _signed, _type_of
from qwengpu.codegen.lowering.floats import dop_write, f64_trap
from qwengpu.codegen.lowering.floatseq import dnan, drnd, f2i64, i2f64
from qwengpu.codegen.lowering.operands import (
    V64,
    as_pair,
    dest64,
    dpair,
    read32,
    read64,
    to_window,
    write32,
    write32v,
    write64,
)
from qwengpu.isa.instr import Imm, R
from qwengpu.ptx.ir import TYPES, Instr, Reg
from qwengpu.simt.memory import LOCAL_WINDOW, SHARED_WINDOW

if TYPE_CHECKING:
    from qwengpu.codegen.lowering.context import LowerCtx


NORM = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}


def ptx_cvt(cx: LowerCtx, ins: Instr) -> None:
    """cvt: by the (destination, source) type pair."""
    types = [m for m in ins.mods if m in TYPES]
    if len(types) != 2:
        raise cx.fail(ins, "cvt needs a destination and a source type")
    dt, st = types
    rnd = next((m for m in ins.mods if m in ROUNDING or m in INT_ROUNDING), None)
    ftz = "ftz" in ins.mods
    sat = "sat" in ins.mods
    d, a = ins.operands
    if dt in ("f16", "bf16") or st in ("f16", "bf16"):
        raise cx.limit(ins, "half-precision conversion")
    if dt == "f64" or st == "f64":
        return cvt_f64(cx, ins, d, a, dt, st, rnd, ftz, sat)
    if dt == "f32" and st == "f32":
        return cvt_f32_f32(cx, ins, d, a, rnd, ftz, sat)
    if dt == "f32":
        return cvt_i2f(cx, ins, d, a, st, rnd, sat)
    if st == "f32":
        return cvt_f2i(cx, ins, d, a, dt, rnd, ftz)
    cvt_int(cx, ins, d, a, dt, st, sat)


def cvt_f32_f32(
    cx: LowerCtx, ins: Instr, d: object, a: object, rnd: str | None, ftz: bool, sat: bool
) -> None:
    """cvt.f32.f32: rounding to integral, saturation or flushing as one ``frnd``; else a move."""
    va = read32(cx, a, "f32", ins)
    if rnd in INT_ROUNDING:
        write32(cx, d, "f32", lambda r: cx.into(r, "frnd", va, irnd=rnd, ftz=ftz), ins)
    elif sat:
        write32(cx, d, "f32", lambda r: cx.into(r, "frnd", va, ftz=ftz, sat=True), ins)
    elif ftz:
        write32(cx, d, "f32", lambda r: cx.into(r, "frnd", va, ftz=True), ins)
    else:
        write32v(cx, d, "f32", va, ins)


def cvt_i2f(cx: LowerCtx, ins: Instr, d: object, a: object, st: str, rnd: str | None, sat: bool) -> None:
    """cvt.f32.{integer}: ``i2f`` (64-bit sources: a rounding sequence on the pair)."""
    sname = NORM.get(st, st)
    r0 = rnd if rnd in ROUNDING else "rn"
    if _bits(sname) == 64:
        v = i2f64(cx, as_pair(cx, read64(cx, a, st, ins), ins), _signed(sname), r0)
    else:
        va = read32(cx, a, sname, ins, "ext")
        v = cx.op("i2f", va, sign="s" if _signed(sname) else "u", rnd=r0)
    if sat:
        v = cx.op("frnd", v, sat=True)
    write32v(cx, d, "f32", v, ins)


def cvt_f2i(cx: LowerCtx, ins: Instr, d: object, a: object, dt: str, rnd: str | None, ftz: bool) -> None:
    """cvt.{integer}.f32: ``f2i`` saturating to the destination's range (64-bit: a pair sequence)."""
    dname = NORM.get(dt, dt)
    r = rnd if rnd in INT_ROUNDING else "rzi"
    va = read32(cx, a, "f32", ins)
    if _bits(dname) == 64:
        lo, hi = f2i64(cx, va, _signed(dname), r, ftz)
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    sg = "s" if _signed(dname) else "u"
    v = cx.op("f2i", va, sign=sg, irnd=r, ftz=ftz)
    if _bits(dname) < 32:
        n = _bits(dname)
        lo_, hi_ = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if sg == "s" else (0, (1 << n) - 1)
        if sg == "s":
            v = cx.op("min", cx.op("max", v, Imm(lo_), sign="s"), Imm(hi_), sign="s")
        else:
            v = cx.op("min", v, Imm(hi_), sign="u")
    write32v(cx, d, dt, v, ins, clean=True)


def cvt_int(cx: LowerCtx, ins: Instr, d: object, a: object, dt: str, st: str, sat: bool) -> None:
    """cvt between integer types: extension, truncation, saturation."""
    dn, sn = NORM.get(dt, dt), NORM.get(st, st)
    if sat:
        return cvt_sat(cx, ins, d, a, dt, st, dn, sn)
    if _bits(dt) == 64:
        if _bits(st) == 64:
            write64(cx, d, read64(cx, a, st, ins), ins)
            return
        va = read32(cx, a, st, ins, "ext")
        write64(cx, d, V64("sx" if _signed(sn) else "zx", va), ins)
        return
    if _bits(st) == 64:
        v = read64(cx, a, st, ins)
        lo = as_pair(cx, v, ins)[0]
        write32v(cx, d, dt, lo, ins)
        return
    va = read32(cx, a, st, ins, "ext")
    write32v(cx, d, dt, va, ins)


def cvt_sat(cx: LowerCtx, ins: Instr, d: object, a: object, dt: str, st: str, dn: str, sn: str) -> None:
    """Saturating integer -> integer conversion of 32 bits or fewer: a clamp."""
    bits_d = _bits(dn)
    lo = -(1 << (bits_d - 1)) if _signed(dn) else 0
    hi = (1 << (bits_d - 1)) - 1 if _signed(dn) else (1 << bits_d) - 1
    if _bits(sn) == 64 or bits_d == 64:
        raise cx.limit(ins, "saturating 64-bit integer conversion")
    va = read32(cx, a, st, ins, "ext")
    v: R | Imm = va
    if _signed(sn):
        if lo > -(2**31):
            v = cx.op("max", v, Imm(lo), sign="s")
        if hi < 2**31 - 1:
            v = cx.op("min", v, Imm(hi), sign="s")
    elif hi < M32:
        v = cx.op("min", v, Imm(hi), sign="u")
    write32v(cx, d, dt, v, ins)


def cvt_f64(
    cx: LowerCtx, ins: Instr, d: object, a: object, dt: str, st: str, rnd: str | None, ftz: bool, sat: bool
) -> None:
    """Conversions from/to f64 as the pair ops i2d, d2f, f2d, d2i, d2l (the weights expand them,
    softfloat64.py); f64 -> f64 rounding to integral is a bit sequence (``drnd``)."""
    norm = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}
    r0 = rnd if rnd in ROUNDING else "rn"
    if dt == "f64" and st not in ("f32", "f64"):
        sname = norm.get(st, st)
        if _bits(sname) == 64:
            x = as_pair(cx, read64(cx, a, st, ins), ins)
        else:
            v = read32(cx, a, sname, ins, "ext")
            x = as_pair(cx, V64("sx" if _signed(sname) else "zx", v), ins)
        dop_write(cx, ins, d, "i2d", x, sign="s" if _signed(sname) else "u", rnd=r0)
        return
    if dt == "f32" and st == "f64":
        v = cx.tmp()
        cx.emit("d2f", (v,), dpair(cx, a, ins), rnd=r0, ftz=ftz)
        if sat:
            v = cx.op("frnd", v, sat=True)
        write32v(cx, d, "f32", v, ins)
        return
    if dt == "f64" and st == "f32":
        lo, hi = cx.tmp(), cx.tmp()
        cx.emit("f2d", (lo, hi), (read32(cx, a, "f32", ins),), ftz=ftz)
        write64(cx, d, V64("pair", lo, hi), ins)
        return
    if dt == "f64" and st == "f64":
        x = dpair(cx, a, ins)
        if rnd in INT_ROUNDING:
            lo, hi = drnd(cx, x, rnd)
            write64(cx, d, V64("pair", lo, hi), ins)
        else:
            write64(cx, d, V64("pair", *x), ins)
        return
    if st == "f64" and dt not in ("f16", "bf16", "f32"):
        dname = norm.get(dt, dt)
        ir = rnd if rnd in INT_ROUNDING else "rzi"
        sg = "s" if _signed(dname) else "u"
        if _bits(dname) == 64:
            dop_write(cx, ins, d, "d2l", dpair(cx, a, ins), sign=sg, irnd=ir)
            return
        v, x = cx.tmp(), dpair(cx, a, ins)
        cx.emit("d2i", (v,), x, sign=sg, irnd=ir)
        if _bits(dname) < 32:  # saturate further to the sub-word range (s32 saturation first is the same)
            n = _bits(dname)
            lo_, hi_ = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if sg == "s" else (0, (1 << n) - 1)
            v = cx.op("min", cx.op("max", v, Imm(lo_), sign=sg), Imm(hi_), sign=sg)
            if sg == "u":  # a NaN gives 1 << (n - 1) (signed: the minimum already is)
                v = cx.sel(Imm(1 << (n - 1)), v, dnan(cx, x))
        write32v(cx, d, dt, v, ins)
        return
    f64_trap(cx, ins)


def ptx_cvta(cx: LowerCtx, ins: Instr) -> None:
    """cvta between the generic and a state space: a window value rebased, or a pair offset."""
    t = _type_of(ins)
    to = "to" in ins.mods
    space = next((m for m in ins.mods if m in ("global", "shared", "local", "const", "param")), None)
    win = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}.get(space or "", 0)
    d, a = ins.operands
    if _bits(t) != 64:
        write32v(cx, d, t, read32(cx, a, t, ins, "raw"), ins)
        return
    v = read64(cx, a, t, ins)
    kind = dest64(cx, d, ins)[0] if isinstance(d, Reg) else "pair"
    if kind == "w":
        assert isinstance(d, Reg)
        base = cx.kinds[d.name][1]
        _, dlo, _ = dest64(cx, d, ins)
        src_base = base + win if to else base - win
        if v.kind == "w" and v.base == src_base:
            cx.mov(dlo, v.lo)
        else:
            cx.mov(dlo, to_window(cx, v, src_base, ins))
        return
    if win == 0:
        write64(cx, d, v, ins)
        return
    lo, hi = as_pair(cx, v, ins)
    wh = (win >> 32) & M32
    write64(cx, d, V64("pair", lo, cx.op("sub" if to else "add", hi, Imm(wh))), ins)
