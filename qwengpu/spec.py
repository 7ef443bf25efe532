"""Launch specs (DESIGN.md): parse, validate against a kernel, bind to memory, compare by bits.

A spec names the kernel, the grid and block, every argument in parameter order and the buffers
to read back. Values are exact: float32 numbers are rounded from their decimal text once,
correctly (not through float64); ``"inf"``, ``"-inf"``, ``"nan"`` (the canonical GPU NaN
``0x7fffffff``) and raw bits ``"0x..."`` are accepted. Every engine shares this module, so a
spec means the same thing everywhere.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from qwengpu.errors import LaunchSpecError
from qwengpu.ptx.ir import Function
from qwengpu.simt.memory import GlobalMemory

ELEM_TYPES = {
    "i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16,
    "i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64,
    "f32": np.float32, "f64": np.float64,
}  # fmt: skip
BITS_OF = {np.float32: np.uint32, np.float64: np.uint64}
CANONICAL_NAN32 = 0x7FFFFFFF
CANONICAL_NAN64 = 0x7FFFFFFFFFFFFFFF
# PTX parameter types each spec type may bind to
PTX_COMPAT = {
    "i8": {"s8", "u8", "b8", "s16", "u16", "b16", "s32", "u32", "b32"},
    "u8": {"s8", "u8", "b8", "s16", "u16", "b16", "s32", "u32", "b32"},
    "i16": {"s16", "u16", "b16", "s32", "u32", "b32"},
    "u16": {"s16", "u16", "b16", "s32", "u32", "b32"},
    "i32": {"s32", "u32", "b32"},
    "u32": {"s32", "u32", "b32"},
    "i64": {"s64", "u64", "b64"},
    "u64": {"s64", "u64", "b64"},
    "f32": {"f32", "b32"},
    "f64": {"f64", "b64"},
    "ptr": {"u64", "b64", "s64"},
}
C_TYPES = {
    "float": "f32", "double": "f64", "int": "i32", "signed": "i32", "signed int": "i32",
    "unsigned": "u32", "unsigned int": "u32", "uint": "u32", "int32_t": "i32", "uint32_t": "u32",
    "long long": "i64", "long long int": "i64", "int64_t": "i64", "unsigned long long": "u64",
    "unsigned long long int": "u64", "uint64_t": "u64", "size_t": "u64", "char": "i8", "signed char": "i8",
    "unsigned char": "u8", "uint8_t": "u8", "int8_t": "i8", "short": "i16", "unsigned short": "u16",
    "int16_t": "i16", "uint16_t": "u16", "bool": "u8", "long": "i64", "unsigned long": "u64",
}  # fmt: skip


@dataclass
class Arg:
    """One kernel argument of a spec."""

    name: str
    type: str  # as written: "f32*", "i32", ...
    elem: str  # element type: "f32"
    is_ptr: bool
    data: np.ndarray | None = None  # pointer args: initial buffer contents
    value: np.ndarray | None = None  # scalar args: 0-d array


@dataclass
class LaunchSpec:
    """A parsed, self-consistent launch spec (not yet checked against a kernel)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Arg]
    outputs: list[str]
    expected: dict[str, np.ndarray] = field(default_factory=dict)
    shared_bytes: int = 0
    tolerance_ulp: int = 0
    description: str = ""
    source: str = "<spec>"

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)


# ---------------------------------------------------------------------- values
def decimal_to_f32_bits(text: str) -> int:
    """Correctly rounded (RN) float32 bits of a decimal literal."""
    return _decimal_to_bits(text, 24, -126, 127)


def decimal_to_f64_bits(text: str) -> int:
    return struct.unpack("<Q", struct.pack("<d", float(text)))[0]  # Python's float() is correctly rounded


def _decimal_to_bits(text: str, p: int, emin: int, emax: int) -> int:
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None
    if not d.is_finite():
        raise ValueError(f"not a finite number: {text!r}")
    sign = 1 if d.is_signed() else 0
    fr = abs(Fraction(d))
    total = 1 + (8 if p == 24 else 11) + (p - 1)
    if fr == 0:
        return sign << (total - 1)
    # exponent e with 2^e <= fr < 2^(e+1)
    e = fr.numerator.bit_length() - fr.denominator.bit_length()
    if Fraction(2) ** e > fr:
        e -= 1
    e = max(e, emin)  # subnormal range shares emin's scale
    scale = Fraction(2) ** (p - 1 - e)
    q = fr * scale
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    if n == 1 << p:  # carried into the next binade
        n >>= 1
        e += 1
    ebits = 8 if p == 24 else 11
    if e > emax:
        return (sign << (total - 1)) | (((1 << ebits) - 1) << (p - 1))  # overflow -> inf
    if n < (1 << (p - 1)):  # subnormal
        return (sign << (total - 1)) | n
    biased = e + (1 << (ebits - 1)) - 1
    return (sign << (total - 1)) | (biased << (p - 1)) | (n - (1 << (p - 1)))


def parse_value(v: Any, elem: str, where: str) -> int | float:
    """One JSON value -> the raw bits (floats) or the integer (ints) of type ``elem``."""
    if elem in ("f32", "f64"):
        nan = CANONICAL_NAN32 if elem == "f32" else CANONICAL_NAN64
        inf = 0x7F800000 if elem == "f32" else 0x7FF0000000000000
        sbit = 1 << (31 if elem == "f32" else 63)
        if isinstance(v, bool):
            raise LaunchSpecError(f"{where}: expected a number, got {v!r}")
        if isinstance(v, str):
            s = v.strip().lower()
            if s in ("inf", "+inf", "infinity"):
                return inf
            if s in ("-inf", "-infinity"):
                return inf | sbit
            if s == "nan":
                return nan
            if s.startswith("0x"):
                bits = int(s, 16)
                if bits >> (32 if elem == "f32" else 64):
                    raise LaunchSpecError(f"{where}: raw bits {v} do not fit {elem}")
                return bits
            try:
                return decimal_to_f32_bits(s) if elem == "f32" else decimal_to_f64_bits(s)
            except ValueError:
                raise LaunchSpecError(f"{where}: {v!r} is not a {elem} value") from None
        if isinstance(v, int):
            return decimal_to_f32_bits(str(v)) if elem == "f32" else decimal_to_f64_bits(str(v))
        raise LaunchSpecError(f"{where}: {v!r} is not a {elem} value")
    # integers
    if isinstance(v, str) and v.strip().lower().startswith("0x"):
        bits = int(v, 16)
        width = np.dtype(ELEM_TYPES[elem]).itemsize * 8
        if bits >> width:
            raise LaunchSpecError(f"{where}: {v} does not fit {elem}")
        return int(np.array(bits, dtype=f"u{width // 8}").view(ELEM_TYPES[elem]))
    if isinstance(v, bool) or not isinstance(v, int):
        raise LaunchSpecError(f"{where}: expected an integer for {elem}, got {v!r}")
    info = np.iinfo(ELEM_TYPES[elem])
    if not info.min <= v <= info.max:
        raise LaunchSpecError(f"{where}: {v} is out of range for {elem} [{info.min}, {info.max}]")
    return v


def to_array(values: list, elem: str, where: str) -> np.ndarray:
    if not isinstance(values, list):
        raise LaunchSpecError(f"{where}: expected a list of values")
    parsed = [parse_value(v, elem, f"{where}[{i}]") for i, v in enumerate(values)]
    dt = ELEM_TYPES[elem]
    if elem in ("f32", "f64"):
        return np.array(parsed, dtype=BITS_OF[dt]).view(dt)
    return np.array(parsed, dtype=dt)


def format_value(x: np.generic, elem: str) -> int | float | str:
    """A value for ``--json``: ints as ints; floats as numbers that round-trip to the same bits."""
    if elem == "f32":
        bits = int(np.array(x, dtype=np.float32).view(np.uint32))
        f = np.float32(x)
        if np.isnan(f):
            return f"0x{bits:08x}"
        if np.isinf(f):
            return "inf" if f > 0 else "-inf"
        s = repr(float(f))
        short = np.format_float_positional(f, unique=True, trim="-") if abs(f) >= 1e-4 or f == 0 else None
        for cand in (np.format_float_scientific(f, unique=True, trim="-"), short):
            if cand is not None and decimal_to_f32_bits(cand) == bits and len(cand) < len(s):
                s = cand
        v = float(s)
        return v if decimal_to_f32_bits(repr(v)) == bits else float(repr(float(f)))
    if elem == "f64":
        f = float(x)
        if f != f:
            return f"0x{int(np.array(x, dtype=np.float64).view(np.uint64)):016x}"
        if f in (float("inf"), float("-inf")):
            return "inf" if f > 0 else "-inf"
        return f
    return int(x)


# ---------------------------------------------------------------------- parsing
def _dim3(v: Any, what: str, where: str) -> tuple[int, int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v]
    if (
        not isinstance(v, list)
        or not 1 <= len(v) <= 3
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    ):
        raise LaunchSpecError(f'{where}: "{what}" must be an int or a list of 1-3 ints, got {v!r}')
    v = list(v) + [1] * (3 - len(v))
    if any(x < 1 for x in v):
        raise LaunchSpecError(f'{where}: "{what}" dimensions must be >= 1, got {v!r}')
    return (v[0], v[1], v[2])


def parse_spec(obj: Any, source: str = "<spec>") -> LaunchSpec:
    """Validate a spec object (from JSON) and convert its values exactly."""
    if not isinstance(obj, dict):
        raise LaunchSpecError(f"{source}: a launch spec must be a JSON object")
    known = {
        "kernel",
        "grid",
        "block",
        "args",
        "outputs",
        "expected",
        "shared_bytes",
        "tolerance_ulp",
        "description",
        "approximate",
    }
    unknown = set(obj) - known
    if unknown:
        raise LaunchSpecError(f"{source}: unknown field(s) {sorted(unknown)} (known: {sorted(known)})")
    for req in ("kernel", "grid", "block", "args"):
        if req not in obj:
            raise LaunchSpecError(f'{source}: missing required field "{req}"')
    if not isinstance(obj["kernel"], str) or not obj["kernel"]:
        raise LaunchSpecError(f'{source}: "kernel" must be a non-empty string')
    grid = _dim3(obj["grid"], "grid", source)
    block = _dim3(obj["block"], "block", source)
    if not isinstance(obj["args"], list):
        raise LaunchSpecError(f'{source}: "args" must be a list')
    args: list[Arg] = []
    seen = set()
    for i, a in enumerate(obj["args"]):
        w = f"{source}: args[{i}]"
        if not isinstance(a, dict) or "name" not in a or "type" not in a:
            raise LaunchSpecError(f'{w}: each argument needs "name" and "type"')
        name, typ = a["name"], a["type"]
        if not isinstance(name, str) or not isinstance(typ, str):
            raise LaunchSpecError(f'{w}: "name" and "type" must be strings')
        if name in seen:
            raise LaunchSpecError(f"{w}: duplicate argument name {name!r}")
        seen.add(name)
        w = f"{source}: argument '{name}'"
        is_ptr = typ.endswith("*")
        elem = typ.rstrip("*").strip()
        if elem not in ELEM_TYPES or typ.count("*") > 1:
            raise LaunchSpecError(
                f"{w}: unknown type {typ!r} (use one of {', '.join(ELEM_TYPES)} or a pointer)"
            )
        extra = set(a) - {"name", "type", "data", "value", "size"}
        if extra:
            raise LaunchSpecError(f"{w}: unknown field(s) {sorted(extra)}")
        if is_ptr:
            if "value" in a:
                raise LaunchSpecError(f'{w}: pointer arguments take "data" (a list), not "value"')
            if "data" in a:
                data = to_array(a["data"], elem, f"{w} data")
            elif "size" in a and isinstance(a["size"], int) and a["size"] >= 0:
                data = np.zeros(a["size"], dtype=ELEM_TYPES[elem])
            else:
                raise LaunchSpecError(f'{w}: pointer argument needs "data" (or "size" for a zeroed buffer)')
            args.append(Arg(name, typ, elem, True, data=data))
        else:
            if "value" not in a:
                raise LaunchSpecError(f'{w}: scalar argument needs "value"')
            val = to_array([a["value"]], elem, f"{w} value")[0]
            args.append(Arg(name, typ, elem, False, value=np.array(val)))
    outputs = obj.get("outputs")
    ptr_names = [a.name for a in args if a.is_ptr]
    if outputs is None:
        outputs = ptr_names
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise LaunchSpecError(f'{source}: "outputs" must be a list of argument names')
    for o in outputs:
        if o not in seen:
            raise LaunchSpecError(
                f"{source}: unknown output {o!r} (arguments: {', '.join(a.name for a in args)})"
            )
        if o not in ptr_names:
            raise LaunchSpecError(f"{source}: output {o!r} is not a pointer argument")
    expected: dict[str, np.ndarray] = {}
    exp = obj.get("expected", {})
    if not isinstance(exp, dict):
        raise LaunchSpecError(f'{source}: "expected" must be an object of output name -> values')
    for name, vals in exp.items():
        if name not in outputs:
            raise LaunchSpecError(f'{source}: expected values for {name!r}, which is not in "outputs"')
        arr = to_array(vals, next(a.elem for a in args if a.name == name), f"{source}: expected '{name}'")
        n = len(next(a.data for a in args if a.name == name))
        if len(arr) != n:
            raise LaunchSpecError(f"{source}: expected '{name}' has {len(arr)} values but the buffer has {n}")
        expected[name] = arr
    shared = obj.get("shared_bytes", 0)
    if not isinstance(shared, int) or shared < 0:
        raise LaunchSpecError(f'{source}: "shared_bytes" must be a non-negative int')
    tol = obj.get("tolerance_ulp", 0)
    if not isinstance(tol, int) or tol < 0:
        raise LaunchSpecError(f'{source}: "tolerance_ulp" must be a non-negative int')
    return LaunchSpec(
        obj["kernel"],
        grid,
        block,
        args,
        list(outputs),
        expected,
        shared,
        tol,
        str(obj.get("description", "")),
        source,
    )


def load_spec(path: str | Path) -> LaunchSpec:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise LaunchSpecError(f"cannot read launch spec {p}: {exc.strerror}") from None
    try:
        obj = json.loads(text, parse_float=str)
    except json.JSONDecodeError as exc:
        raise LaunchSpecError(
            f"{p}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return parse_spec(obj, str(p))


# ---------------------------------------------------------------------- C signature (for names)
def c_signature(source: str, kernel: str) -> list[tuple[str, str | None, bool]] | None:
    """Parameters of ``__global__`` function ``kernel`` in CUDA source: (name, spec elem or None, is_ptr)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    for m in re.finditer(
        r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(([^)]*)\)", text
    ):
        if m.group(1) != kernel:
            continue
        params = []
        body = m.group(2).strip()
        if not body or body == "void":
            return []
        for part in body.split(","):
            part = re.sub(r"\b(const|volatile|__restrict__|__restrict|restrict)\b", " ", part)
            is_ptr = "*" in part or "&" in part
            words = part.replace("*", " ").replace("&", " ").split()
            if not words:
                return None
            name = words[-1]
            base = " ".join(words[:-1])
            elem = C_TYPES.get(base)
            params.append((name, elem, is_ptr))
        return params
    return None


# ---------------------------------------------------------------------- binding
@dataclass
class Bound:
    """A spec bound to a kernel: parameter bytes and the global memory holding its buffers."""

    param_bytes: bytes
    gmem: GlobalMemory
    buffers: dict[str, int]  # name -> address
    #: the 4-byte words of ``param_bytes`` that lie wholly inside scalar (non-pointer) arguments, by
    #: byte offset: launch constants whose value the lowering may use for bounds (``Options.param_words``)
    scalar_words: dict[int, int] = field(default_factory=dict)

    @property
    def param_words(self) -> tuple[tuple[int, int], ...]:
        """``scalar_words`` as the lowering's hashable ``Options.param_words``."""
        return tuple(sorted(self.scalar_words.items()))


def check_against_kernel(
    spec: LaunchSpec, fn: Function, csig: list[tuple[str, str | None, bool]] | None
) -> None:
    """Reject a spec whose arguments do not match the kernel's parameters (count, types, names)."""
    where = f"{spec.source}: kernel '{spec.kernel}'"
    if len(spec.args) != len(fn.params):
        names = ""
        if csig is not None:
            names = " (" + ", ".join(n for n, _, _ in csig) + ")"
        raise LaunchSpecError(
            f"{where} takes {len(fn.params)} parameter(s){names} "
            f"but the spec gives {len(spec.args)} argument(s)"
        )
    for k, (a, p) in enumerate(zip(spec.args, fn.params, strict=True)):
        cname, celem, cptr = (
            csig[k] if csig is not None and len(csig) == len(fn.params) else (None, None, None)
        )
        label = f"{where}: parameter {k + 1}"
        if cname is not None and cname != a.name:
            raise LaunchSpecError(
                f"{label} is named '{cname}' in the source, but the spec calls it '{a.name}'"
            )
        if cptr is not None and cptr != a.is_ptr:
            kind = "a pointer" if cptr else "a scalar"
            raise LaunchSpecError(
                f"{label} ('{a.name}') is {kind} in the kernel, but the spec says {a.type!r}"
            )
        if celem is not None and cptr == a.is_ptr and celem != a.elem:
            raise LaunchSpecError(
                f"{label} ('{a.name}') has C type {celem}{'*' if cptr else ''}, but the spec says {a.type!r}"
            )
        compat = PTX_COMPAT["ptr" if a.is_ptr else a.elem]
        if p.type not in compat or (a.is_ptr and p.size != 8):
            raise LaunchSpecError(
                f"{label} ('{a.name}') is .{p.type} in the PTX, which a {a.type!r} cannot bind to"
            )


def bind(spec: LaunchSpec, fn: Function, high: Sequence[str] = (), high_at: int = 0) -> Bound:
    """Allocate buffers and pack the parameter bytes. The output buffers come first (in argument
    order), then the others: the machine reads results back as one range of words, so outputs
    placed together keep the other buffers out of it. ``high``: inputs placed from byte
    ``high_at`` on, read-only (the machine's read-only words: ``ptx.readonly`` proves no store
    reaches them)."""
    gmem = GlobalMemory()
    buffers: dict[str, int] = {}
    ptrs = [a for a in spec.args if a.is_ptr]
    if high:
        gmem.start_high(high_at)
    for a in sorted(ptrs, key=lambda a: a.name not in spec.outputs):  # stable: outputs first
        assert a.data is not None
        buffers[a.name] = gmem.alloc(a.name, a.data.tobytes(), high=a.name in high)
    gmem.finalize()
    out = bytearray()
    scalar: list[tuple[int, int]] = []  # byte ranges of the scalar arguments
    for a, p in zip(spec.args, fn.params, strict=True):
        align = max(p.align, 1 if p.size != _size(p.type) else _size(p.type))
        while len(out) % align:
            out.append(0)
        if a.is_ptr:
            out += struct.pack("<Q", buffers[a.name])
        else:
            assert a.value is not None
            raw = a.value.tobytes()
            size = p.size
            if len(raw) < size:  # widen (e.g. an i8 value into a .u32 parameter): sign/zero extend
                v = int(a.value)
                raw = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            scalar.append((len(out), len(out) + size))
            out += raw[:size]
    words = {w: int.from_bytes(out[w : w + 4], "little") for lo, hi in scalar
             for w in range((lo + 3) // 4 * 4, hi - 3, 4)}
    return Bound(bytes(out), gmem, buffers, words)


def _size(t: str) -> int:
    from qwengpu.ptx.ir import TYPE_SIZES

    return TYPE_SIZES[t]


def read_outputs(spec: LaunchSpec, gmem: GlobalMemory) -> dict[str, np.ndarray]:
    out = {}
    for name in spec.outputs:
        a = spec.arg(name)
        out[name] = np.frombuffer(gmem.read(name), dtype=ELEM_TYPES[a.elem]).copy()
    return out


def _bits(arr: np.ndarray) -> np.ndarray:
    if arr.dtype == np.float32:
        return arr.view(np.uint32)
    if arr.dtype == np.float64:
        return arr.view(np.uint64)
    return arr


def _ulp_distance32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between float32 arrays (NaN vs NaN = 0, NaN vs number = huge)."""
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(2**31) - ia, ia)
    ib = np.where(ib < 0, -(2**31) - ib, ib)
    d = np.abs(ia - ib)
    na, nb = np.isnan(a), np.isnan(b)
    return np.where(na & nb, 0, np.where(na | nb, 2**40, d))


def compare(spec: LaunchSpec, outputs: dict[str, np.ndarray], limit: int = 5) -> list[str]:
    """Mismatches between outputs and ``expected`` (bit-exact, or within ``tolerance_ulp`` if set)."""
    problems = []
    for name, exp in spec.expected.items():
        got = outputs[name]
        elem = spec.arg(name).elem
        if spec.tolerance_ulp and elem == "f32":
            bad = np.nonzero(_ulp_distance32(got, exp) > spec.tolerance_ulp)[0]
        else:
            bad = np.nonzero(_bits(got) != _bits(exp))[0]
        for i in bad[:limit]:
            problems.append(f"{name}[{i}]: got {_show(got[i], elem)}, expected {_show(exp[i], elem)}")
        if len(bad) > limit:
            problems.append(f"{name}: ... {len(bad) - limit} more mismatching element(s)")
    return problems


def _show(x: np.generic, elem: str) -> str:
    if elem == "f32":
        return f"{format_value(x, elem)} (0x{int(np.array(x, dtype=np.float32).view(np.uint32)):08x})"
    if elem == "f64":
        return f"{format_value(x, elem)} (0x{int(np.array(x, dtype=np.float64).view(np.uint64)):016x})"
    return str(int(x))


def outputs_json(spec: LaunchSpec, outputs: dict[str, np.ndarray]) -> dict[str, list]:
    return {n: [format_value(v, spec.arg(n).elem) for v in arr] for n, arr in outputs.items()}


def default_spec_path(cu: Path) -> Path:
    """The launch spec beside a kernel: ``NAME.json`` for ``NAME.cu``."""
    return Path(cu).with_suffix(".json")
