"""A typed IR for the PTX that NVRTC emits: what the interpreter and the machine lowering consume.

Instructions keep the opcode and its dotted modifiers separately (``cvt.rzi.s32.f32`` is
``op="cvt"``, ``mods=("rzi", "s32", "f32")``), operands are small typed records, and every
instruction remembers its PTX line and, where ``.loc`` exists, its CUDA ``file:line`` so errors
can point at the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# PTX fundamental types and their byte sizes.
TYPE_SIZES: dict[str, int] = {
    "pred": 1,
    "b8": 1, "u8": 1, "s8": 1,
    "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4,
    "b64": 8, "u64": 8, "s64": 8, "f64": 8,
    "b128": 16,
}  # fmt: skip
TYPES = frozenset(TYPE_SIZES)


@dataclass(frozen=True)
class Reg:
    """A virtual register such as ``%r3``, ``%rd1``, ``%p2``, ``%SPL``."""

    name: str


@dataclass(frozen=True)
class Special:
    """A special register such as ``%tid.x``, ``%laneid``, ``%lanemask_lt``."""

    name: str


@dataclass(frozen=True)
class Imm:
    """An integer immediate (Python int, as written) or a float immediate given by its bits.

    ``kind`` is ``"int"``, ``"f32"`` (``0f...`` literal, ``value`` = uint32 bits) or ``"f64"``
    (``0d...`` literal, ``value`` = uint64 bits).
    """

    value: int
    kind: str = "int"


@dataclass(frozen=True)
class Sym:
    """A named symbol used as a value: a variable's address, a parameter, a function name."""

    name: str


@dataclass(frozen=True)
class Label:
    """A branch target."""

    name: str


@dataclass(frozen=True)
class Addr:
    """A memory operand ``[base+offset]``: base is a Reg, a Sym, or None for an absolute address."""

    base: Reg | Sym | None
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    """A vector operand ``{%r1, %r2, ...}`` (elements may be ``Sink``)."""

    items: tuple[Operand, ...]


@dataclass(frozen=True)
class Neg:
    """A negated predicate operand ``!%p1``."""

    inner: Reg


@dataclass(frozen=True)
class Pair:
    """A two-destination operand ``%r1|%p1`` (e.g. ``shfl.sync`` result and predicate)."""

    first: Operand
    second: Operand


@dataclass(frozen=True)
class Sink:
    """The bit-bucket operand ``_``."""


Operand = Reg | Special | Imm | Sym | Label | Addr | Vec | Neg | Pair | Sink


@dataclass(frozen=True)
class SourceLoc:
    """A CUDA source position from a ``.loc`` directive.

    For code NVRTC inlined from a device function, ``file:line`` is the line inside that function
    (what the user wants to see), ``function`` its name and ``inlined_at`` the call site.
    """

    file: str
    line: int
    col: int = 0
    function: str = ""
    inlined_at: SourceLoc | None = None

    def __str__(self) -> str:
        s = f"{self.file}:{self.line}"
        if self.inlined_at is not None:
            fn = f"in {self.function}, " if self.function else ""
            s += f" ({fn}inlined at {self.inlined_at})"
        return s


@dataclass
class Instr:
    """One PTX instruction with its guard predicate and source positions."""

    op: str
    mods: tuple[str, ...]
    operands: tuple[Operand, ...]
    guard: Reg | None = None
    guard_neg: bool = False
    line: int = 0
    loc: SourceLoc | None = None
    text: str = ""

    @property
    def form(self) -> str:
        """The full opcode form, e.g. ``setp.lt.s32`` (what the census counts)."""
        return ".".join((self.op, *self.mods))

    def where(self) -> str:
        """Human-readable position: PTX line and CUDA line when known."""
        s = f"PTX line {self.line}"
        if self.loc is not None:
            s += f", {self.loc}"
        return s

    def __str__(self) -> str:
        return self.text or self.form


@dataclass
class Var:
    """A variable in a state space (``.shared``, ``.local``, ``.global``, ``.const``, ``.param``)."""

    name: str
    space: str
    type: str
    size: int  # bytes; 0 for an unsized extern array (dynamic shared memory)
    align: int = 4
    extern: bool = False
    init: bytes | None = None


@dataclass
class Param:
    """A kernel or function parameter."""

    name: str
    type: str
    size: int
    align: int = 0
    is_ptr_hint: bool = False  # ``.ptr`` attribute present


@dataclass
class Function:
    """An ``.entry`` kernel or a ``.func`` device function."""

    name: str
    is_entry: bool
    params: list[Param]
    returns: list[Param]
    regs: dict[str, str]  # register name -> declared type
    vars: list[Var]  # function-scope .shared/.local/.param variables
    body: list[Instr]
    labels: dict[str, int]  # label -> instruction index
    line: int = 0
    directives: dict[str, tuple[int, ...]] = field(default_factory=dict)  # .maxntid etc.

    @property
    def plain_name(self) -> str:
        """The identifier a user writes: demangles simple Itanium names (``_Z3dotPfS_i`` -> ``dot``)."""
        return demangle_identifier(self.name)


@dataclass
class Module:
    """A parsed PTX module."""

    version: str
    target: str
    address_size: int
    functions: dict[str, Function]
    globals: list[Var]
    files: dict[int, str]
    externs: dict[str, Function] = field(default_factory=dict)  # declared, never defined (vprintf, ...)

    @property
    def kernels(self) -> dict[str, Function]:
        return {n: f for n, f in self.functions.items() if f.is_entry}


def demangle_identifier(name: str) -> str:
    """Return the unqualified identifier of a (simple) Itanium-mangled name, else the name itself."""
    if not name.startswith("_Z"):
        return name
    s = name[2:]
    if s.startswith("N"):  # nested name: take the last component
        s = s[1:]
        ident = name
        while s and s[0].isdigit():
            i = 0
            while s[i].isdigit():
                i += 1
            n = int(s[:i])
            ident = s[i : i + n]
            s = s[i + n :]
        return ident
    i = 0
    while i < len(s) and s[i].isdigit():
        i += 1
    if i == 0:
        return name
    n = int(s[:i])
    return s[i : i + n] or name
