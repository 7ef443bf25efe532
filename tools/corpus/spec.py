"""Launch-spec building and deterministic JSON writing for the corpus (format: shared/DESIGN.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from . import f32 as F

INT_RANGES = {
    "i8": (-(1 << 7), (1 << 7) - 1),
    "u8": (0, (1 << 8) - 1),
    "i16": (-(1 << 15), (1 << 15) - 1),
    "u16": (0, (1 << 16) - 1),
    "i32": (-(1 << 31), (1 << 31) - 1),
    "u32": (0, (1 << 32) - 1),
    "i64": (-(1 << 63), (1 << 63) - 1),
    "u64": (0, (1 << 64) - 1),
}
FLOAT_TYPES = ("f32", "f64")
SCALAR_TYPES = tuple(INT_RANGES) + FLOAT_TYPES
WORD_COST = {"i8": 0.25, "u8": 0.25, "i16": 0.5, "u16": 0.5, "i32": 1, "u32": 1, "f32": 1,
             "i64": 2, "u64": 2, "f64": 2}


@dataclass
class Arg:
    name: str
    type: str
    value: Any = None  # scalar
    data: Sequence | None = None  # buffer contents

    @property
    def is_pointer(self) -> bool:
        return self.type.endswith("*")


def buf(name: str, type_: str, data) -> Arg:
    if not type_.endswith("*"):
        type_ += "*"
    return Arg(name, type_, data=list(data))


def val(name: str, type_: str, value) -> Arg:
    return Arg(name, type_, value=value)


# ---------------------------------------------------------------------------------------------
# value encoding


def f32_token(x) -> str:
    """JSON text for a float32: shortest decimal that round-trips (integers without a fraction),
    "inf"/"-inf", and NaN as its raw bits."""
    v = np.float32(x)
    if math.isnan(float(v)):
        return json.dumps(f"0x{F.bits(v):08x}")
    if math.isinf(float(v)):
        return json.dumps("inf" if v > 0 else "-inf")
    if float(v) == 0.0:
        return "-0.0" if F.sign_bit(v) else "0"
    fv = float(v)
    if fv == int(fv) and abs(fv) < 1e16:
        text = str(int(fv))
    else:
        text = str(v)  # numpy: shortest repr that round-trips to this float32
        if "e" in text:
            mant, _, exp = text.partition("e")
            text = f"{mant}e{int(exp)}"
    if not _round_trips(text, v):
        text = repr(fv)  # float64 repr of a float32: reads back exactly either way
        assert _round_trips(text, v), text
    return text


def _round_trips(text: str, v: np.float32) -> bool:
    """The decimal reads back as v both through float64 (json.loads + cast) and when rounded
    directly from the decimal to float32."""
    via_double = np.float32(float(text))
    direct = F.round_f32(Fraction(Decimal(text)))
    return F.bits(via_double) == F.bits(v) and F.bits(direct) == F.bits(v)


def coerce_f32(x) -> np.float32:
    if isinstance(x, str):
        s = x.strip().lower()
        if s in ("inf", "+inf"):
            return F.inf(False)
        if s == "-inf":
            return F.inf(True)
        if s.startswith("0x"):
            return F.from_bits(int(s, 16))
        raise ValueError(f"bad f32 string {x!r}")
    if isinstance(x, np.floating):
        return np.float32(x)
    v = np.float32(x)
    if not math.isnan(float(x)) and Fraction(float(v)) != Fraction(x):
        raise ValueError(f"{x!r} is not exactly a float32")
    return v


def value_token(type_: str, x) -> str:
    t = type_.rstrip("*")
    if t == "f32":
        return f32_token(coerce_f32(x))
    if t == "f64":
        v = float(x)
        if math.isnan(v):
            raise ValueError("f64 NaN not supported in specs")
        if math.isinf(v):
            return json.dumps("inf" if v > 0 else "-inf")
        if v == int(v) and abs(v) < 1e16:
            return "-0.0" if v == 0 and math.copysign(1, v) < 0 else str(int(v))
        return repr(v)
    lo, hi = INT_RANGES[t]
    n = int(x)
    if n != x:
        raise ValueError(f"{x!r} is not an integer")
    if not lo <= n <= hi:
        raise ValueError(f"{n} out of range for {t}")
    return str(n)


def _list(type_: str, data) -> str:
    return "[" + ", ".join(value_token(type_, x) for x in data) + "]"


# ---------------------------------------------------------------------------------------------
# launch spec


@dataclass
class Launch:
    kernel: str
    grid: int | list[int]
    block: int | list[int]
    args: list[Arg]
    outputs: list[str]
    expected: dict[str, Sequence]
    description: str | None = None
    shared_bytes: int | None = None
    tolerance_ulp: int | None = None

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    def to_json(self) -> str:
        lines = ["{", f'  "kernel": {json.dumps(self.kernel)},']
        if self.description:
            lines.append(f'  "description": {json.dumps(self.description)},')
        lines.append(f'  "grid": {json.dumps(self.grid)},')
        lines.append(f'  "block": {json.dumps(self.block)},')
        if self.shared_bytes is not None:
            lines.append(f'  "shared_bytes": {int(self.shared_bytes)},')
        lines.append('  "args": [')
        for k, a in enumerate(self.args):
            head = f'{{"name": {json.dumps(a.name)}, "type": {json.dumps(a.type)}, '
            if a.is_pointer:
                body = f'"data": {_list(a.type, a.data)}}}'
            else:
                body = f'"value": {value_token(a.type, a.value)}}}'
            lines.append("    " + head + body + ("," if k + 1 < len(self.args) else ""))
        lines.append("  ],")
        lines.append(f'  "outputs": {json.dumps(self.outputs)},')
        if self.tolerance_ulp is not None:
            lines.append(f'  "tolerance_ulp": {int(self.tolerance_ulp)},')
        types = {a.name: a.type for a in self.args}
        if len(self.outputs) == 1:
            o = self.outputs[0]
            lines.append(f'  "expected": {{{json.dumps(o)}: {_list(types[o], self.expected[o])}}}')
        else:
            lines.append('  "expected": {')
            for k, o in enumerate(self.outputs):
                sep = "," if k + 1 < len(self.outputs) else ""
                lines.append(f"    {json.dumps(o)}: {_list(types[o], self.expected[o])}{sep}")
            lines.append("  }")
        lines.append("}")
        text = "\n".join(lines) + "\n"
        json.loads(text)  # well-formed
        return text

    def validate(self) -> None:
        names = [a.name for a in self.args]
        assert len(set(names)) == len(names), f"{self.kernel}: duplicate arg names"
        for a in self.args:
            t = a.type.rstrip("*")
            assert t in SCALAR_TYPES, f"{self.kernel}: bad type {a.type}"
            if a.is_pointer:
                assert a.data is not None and len(a.data) > 0, f"{self.kernel}: empty buffer {a.name}"
        for o in self.outputs:
            a = self.arg(o)
            assert a.is_pointer, f"{self.kernel}: output {o} is not a buffer"
            assert len(self.expected[o]) == len(a.data), f"{self.kernel}: expected {o} has wrong length"
        assert set(self.expected) == set(self.outputs), f"{self.kernel}: expected keys != outputs"


# ---------------------------------------------------------------------------------------------
# registry helpers


class Registry:
    """Collects the functions that build each kernel's launch (one per kernel)."""

    def __init__(self) -> None:
        self.builders: dict[str, Callable[[], Launch]] = {}

    def __call__(self, fn: Callable[[], Launch]) -> Callable[[], Launch]:
        name = fn.__name__
        if name in self.builders:
            raise ValueError(f"duplicate kernel {name}")
        self.builders[name] = fn
        return fn
