"""The machine's instruction set: a small RISC ISA on 32-bit words for a 4-lane SIMT datapath.

Why this shape: every operation must be an exact circuit on 32-bit words that the transformer
compiler can build in stock MLP / Gated DeltaNet layers, and every instruction is fed to the
model as tokens, so instructions are few fixed fields (opcode, modifier bits, guard, register
numbers, at most a few 32-bit immediates). Whatever is rare or wide (64-bit integers, bit-field
ops, byte permutes) is *not* an op: the lowering (``lower.py``) expands it into sequences of
these ops. 32-bit integer and float division, the square root and ``ex2.approx`` ARE ops
(``idiv irem fdiv fsqrt fex2``): one instruction each, so the weight lowering can expand them
into short integer loops and share one body per program (``soft.py``, ``softfloat.py``) instead
of repeating a sequence built on float estimates at every use.

State per thread: 32 general registers ``r0..r31`` (32-bit) and 8 one-bit predicates ``p0..p7``;
``PT`` is the constant-true predicate (``!PT`` is false). Every instruction may carry a guard
``@p``/``@!p``: lanes whose guard is false do nothing (no write, no memory access, no fault).

Subroutines: ``call d, L`` writes pc + 1 into ``d`` and jumps to ``L``; ``ret a`` jumps to the pc
held in ``a`` -- per lane, like ``bra`` (lanes may return to different pcs; per-lane PCs and min-PC
scheduling reconverge them). ``soft.py`` uses them to share long expansions (one body per
program, placed BEFORE the kernel's code, so a lane inside a routine always has a smaller pc than
any lane waiting past its call site: min-PC scheduling runs the call to completion first, exactly
as for an inline sequence).

See ``qwengpu/codegen/DESIGN.md`` for the op table with the datapath requirements of each op.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

PT = -1  # index of the constant-true predicate (encoded as predicate field 7 with the "true" bit)
POISON = 0x80000000  # window register value meaning "address out of the machine's 32-bit window"
NREGS = 32
NPREDS = 8


@dataclass(frozen=True, slots=True)
class R:
    """A general register (virtual before allocation, r0..r31 after)."""

    n: int

    def __str__(self) -> str:
        return f"r{self.n}"


@dataclass(frozen=True, slots=True)
class P:
    """A predicate register (``n == PT`` is the constant true), optionally negated."""

    n: int
    neg: bool = False

    def __str__(self) -> str:
        name = "PT" if self.n == PT else f"p{self.n}"
        return ("!" if self.neg else "") + name

    def inv(self) -> P:
        return P(self.n, not self.neg)


@dataclass(frozen=True, slots=True)
class Imm:
    """A 32-bit immediate operand (stored as its unsigned bit pattern)."""

    v: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "v", self.v & 0xFFFFFFFF)

    def __str__(self) -> str:
        return f"0x{self.v:x}" if self.v > 9 else str(self.v)


@dataclass(frozen=True, slots=True)
class SR:
    """A special register read directly as operand a of a machine row (the ROM's ``a_sr`` field:
    ``circuit.register_file`` selects it instead of the register file). ``name``: ``tid.x``,
    ``laneid``, ``warpid`` or ``ctaid.x`` (the machine's linear indices, constant for a thread in
    a block). Only ``codegen.softmem.fold_special_reads`` makes them, after expansion: an ``s2r``
    whose every reader takes it as operand a costs no pass and no result tokens."""

    name: str

    def __str__(self) -> str:
        return f"%{self.name}"


Src = R | P | Imm | SR
TRUE = P(PT)
FALSE = P(PT, True)


# ---------------------------------------------------------------------------------------------
# the op table
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OpSpec:
    """What an op reads and writes and which modifiers it takes (the decoder's view)."""

    name: str
    unit: str  # alu | fpu | mem | warp | pred | ctl
    dsts: str  # "r", "p", "" (kinds of destinations, in order)
    srcs: str  # operand kinds: r = register or immediate, p = predicate
    mods: tuple[str, ...] = ()
    doc: str = ""


_SPECS = [
    # ---- integer ALU (all on 32-bit words, wrap-around)
    OpSpec("mov", "alu", "r", "r", (), "d = a"),
    OpSpec("add", "alu", "r", "rr", (), "d = a + b"),
    OpSpec("sub", "alu", "r", "rr", (), "d = a - b"),
    OpSpec("mul", "alu", "r", "rr", (), "d = low 32 bits of a * b"),
    OpSpec("mulhi", "alu", "r", "rr", ("sign",), "d = high 32 bits of the 64-bit product (s or u)"),
    OpSpec("mad", "alu", "r", "rrr", (), "d = low 32 bits of a * b + c"),
    OpSpec(
        "idiv", "alu", "r", "rr", ("sign",),
        "d = a / b truncated toward zero (s|u); b != 0 (the lowering traps first); INT_MIN / -1 = INT_MIN",
    ),
    OpSpec("irem", "alu", "r", "rr", ("sign",), "d = a - b * (a / b) (s|u, the sign of a); b != 0"),
    OpSpec("and", "alu", "r", "rr", (), "d = a & b"),
    OpSpec("or", "alu", "r", "rr", (), "d = a | b"),
    OpSpec("xor", "alu", "r", "rr", (), "d = a ^ b"),
    OpSpec("not", "alu", "r", "r", (), "d = ~a"),
    OpSpec("shl", "alu", "r", "rr", (), "d = a << b; b read as u32, b >= 32 gives 0"),
    OpSpec(
        "shr", "alu", "r", "rr", ("sign",), "d = a >> b; u: b >= 32 gives 0; s: sign fill, b clamped to 31"
    ),
    OpSpec("min", "alu", "r", "rr", ("sign",), "d = min(a, b) (s or u)"),
    OpSpec("max", "alu", "r", "rr", ("sign",), "d = max(a, b) (s or u)"),
    OpSpec("popc", "alu", "r", "r", (), "d = number of one bits"),
    OpSpec("clz", "alu", "r", "r", (), "d = number of leading zeros (32 for 0)"),
    OpSpec("brev", "alu", "r", "r", (), "d = bits of a reversed"),
    OpSpec("sel", "alu", "r", "rrp", (), "d = c ? a : b"),
    OpSpec(
        "setp",
        "alu",
        "p",
        "rrp",
        ("cmp", "sign", "bop"),
        "pd = (a cmp b) [bop c]; cmp eq ne lt le gt ge, sign s|u, optional bop and|or|xor with pred c",
    ),
    OpSpec(
        "addw",
        "alu",
        "r",
        "rr",
        ("sa", "sb"),
        "window add: a, b read as s32 (0x80000000 = POISON) or u32; d = a + b, or POISON when an "
        "input is POISON or the exact sum leaves [-2^31+1, 2^31-1] (address arithmetic)",
    ),
    OpSpec("subw", "alu", "r", "rr", ("sa", "sb"), "window subtract (as addw)"),
    OpSpec("mulw", "alu", "r", "rr", ("sa", "sb"), "window multiply (as addw)"),
    OpSpec("s2r", "alu", "r", "", ("sr",), "d = special register (tid.x, ctaid.y, laneid, ...)"),
    # ---- float32 unit (raw IEEE bits in registers)
    OpSpec("fadd", "fpu", "r", "rr", ("rnd", "ftz", "sat", "odd"),
           "d = a + b rounded (rn rz rm rp; odd: to odd, the weights' adder only), ftz, sat"),
    OpSpec("fsub", "fpu", "r", "rr", ("rnd", "ftz", "sat", "odd"),
           "d = a - b (= a + (-b)); odd: to odd, the weights' adder only"),
    OpSpec("fmul", "fpu", "r", "rr", ("rnd", "ftz", "sat"), "d = a * b"),
    OpSpec("ffma", "fpu", "r", "rrr", ("rnd", "ftz", "sat"), "d = a * b + c with one rounding"),
    OpSpec("fmin", "fpu", "r", "rr", ("ftz",), "PTX min: NaN operand ignored, -0 < +0"),
    OpSpec("fmax", "fpu", "r", "rr", ("ftz",), "PTX max"),
    OpSpec(
        "fsetp",
        "fpu",
        "p",
        "rrp",
        ("cmp", "ftz", "bop"),
        "pd = (a cmp b) [bop c]; cmp eq ne lt le gt ge (ordered) equ neu ltu leu gtu geu num nan",
    ),
    OpSpec("i2f", "fpu", "r", "r", ("sign", "rnd"), "d = float32 of the s32/u32 a, rounded"),
    OpSpec(
        "f2i",
        "fpu",
        "r",
        "r",
        ("sign", "irnd", "ftz"),
        "d = s32/u32 of float a rounded rni rzi rmi rpi, saturating, NaN -> 0",
    ),
    OpSpec(
        "frnd",
        "fpu",
        "r",
        "r",
        ("irnd", "ftz", "sat"),
        "float -> float: round to integral (irnd), else clamp to [0,1] (sat), else flush (ftz)",
    ),
    OpSpec("fdiv", "fpu", "r", "rr", ("rnd", "ftz"), "d = a / b correctly rounded (rn rz rm rp), ftz"),
    OpSpec("fsqrt", "fpu", "r", "r", ("rnd", "ftz"), "d = sqrt(a) correctly rounded, ftz (sqrt(-0) = -0)"),
    OpSpec("fex2", "fpu", "r", "r", ("ftz",), "d = 2^a correctly rounded (rn; ex2.approx), ftz"),
    # ---- memory
    OpSpec(
        "ld",
        "mem",
        "r",
        "r",
        ("space", "size", "sign", "amode", "base", "off", "chk"),
        "d = mem[addr]; addr = base + ext(a) + off; size 1 2 4 (sub-words extended by sign)",
    ),
    OpSpec("st", "mem", "", "rr", ("space", "size", "amode", "base", "off", "chk"), "mem[addr] = b"),
    OpSpec(
        "atom",
        "mem",
        "r",
        "rrr",
        ("space", "aop", "type", "amode", "base", "off"),
        "d = old mem[addr]; mem[addr] = aop(old, b, c), lane by lane in lane order",
    ),
    # ---- warp (cross-lane)
    OpSpec(
        "shfl",
        "warp",
        "r",
        "rrr",
        ("mode",),
        "d = a of the source lane (up down bfly idx; b lane/offset, "
        "c clamp|segmask<<8); reads inactive lanes' registers",
    ),
    OpSpec("shflp", "warp", "p", "rr", ("mode",), "pd = whether the source lane of shfl(b, c) is in range"),
    OpSpec("vote", "warp", "p", "p", ("vmode",), "pd = any|all|uni of pa over the active lanes"),
    OpSpec("ballot", "warp", "r", "p", (), "d = bit mask of the active lanes whose pa is true"),
    # ---- predicates
    OpSpec("plop", "pred", "p", "pp", ("bop",), "pd = a bop b (and or xor), operands may be negated or PT"),
    # ---- control
    OpSpec("bra", "ctl", "", "", (), "per-lane branch (guarded: lanes split, min-PC reconverges)"),
    OpSpec("exit", "ctl", "", "", (), "the active lanes finish"),
    OpSpec("bar", "ctl", "", "", (), "block-wide barrier (bar.sync)"),
    OpSpec("trap", "ctl", "", "", ("code",), "fault (e.g. integer division by zero) for the active lanes"),
    # ---- subroutines (shared sequences: soft.py emits each once per program)
    OpSpec(
        "call",
        "ctl",
        "r",
        "",
        (),
        "d = pc + 1 and jump to the target, per lane (bra plus the link write; guarded: lanes split)",
    ),
    OpSpec(
        "ret",
        "ctl",
        "",
        "r",
        (),
        "jump to the pc held in register a, per lane (lanes may return to different pcs; min-PC reconverges)",
    ),
    # ---- float64 unit, on register pairs (lo, hi): appended last, so the opcodes above keep
    # their numbers (the weights never see these: softfloat64.py expands them). min/max, neg/abs,
    # testp and round-to-integral of f64 are plain integer sequences of the lowering (bits only)
    OpSpec("dadd", "fpu", "rr", "rrrr", ("rnd",), "d = a + b (f64 pairs lo,hi) rounded rn rz rm rp"),
    OpSpec("dmul", "fpu", "rr", "rrrr", ("rnd",), "d = a * b (f64)"),
    OpSpec("dfma", "fpu", "rr", "rrrrrr", ("rnd",), "d = a * b + c (f64) with one rounding"),
    OpSpec("ddiv", "fpu", "rr", "rrrr", ("rnd",), "d = a / b (f64) correctly rounded"),
    OpSpec("dsqrt", "fpu", "rr", "rr", ("rnd",), "d = sqrt(a) (f64) correctly rounded (sqrt(-0) = -0)"),
    OpSpec(
        "dsetp", "fpu", "p", "rrrrp", ("cmp", "bop"),
        "pd = (a cmp b) [bop c] on f64 pairs; cmp as fsetp (ordered, unordered, num, nan)",
    ),
    OpSpec("d2f", "fpu", "r", "rr", ("rnd", "ftz"), "d = float32 of the f64 a, rounded; ftz flushes it"),
    OpSpec("f2d", "fpu", "rr", "r", ("ftz",), "d = f64 of the float32 a (exact); ftz flushes a subnormal a"),
    OpSpec("i2d", "fpu", "rr", "rr", ("sign", "rnd"), "d = f64 of the s64/u64 pair a, rounded"),
    OpSpec(
        "d2i", "fpu", "r", "rr", ("sign", "irnd"),
        "d = s32/u32 of the f64 a rounded rni rzi rmi rpi, saturating, NaN -> 0",
    ),
    OpSpec("d2l", "fpu", "rr", "rr", ("sign", "irnd"), "d = s64/u64 pair of the f64 a (as d2i)"),
    # ---- the weights' one-lane unit (last, so the op codes before it stay as they were)
    OpSpec(
        "fmulf", "fpu", "r", "rr", ("lane", "err"),
        "d = a * b by the weights' fast-range multiplier (fp32.mul_fast: mul.rn of normal factors whose "
        "exponent fields sum to 174..377, a fixed function of the bits elsewhere); lane k: only the "
        "threads at position k of their lane group (laneid % 4 == k) write, the others keep d; err: "
        "d = a * b - fmulf(a, b) instead (fp32.mul_fast_err: exact in the range)",
    ),
    OpSpec(
        "frange", "fpu", "p", "rr", ("ftz",),
        "pd = fmulf(a, b) is mul.rn(a, b) [.ftz] (fp32.mul_fast_ok: both finite, and a factor zero or "
        "both normal with exponent fields summing to 174..377)",
    ),
    # ---- appended last, so the op codes before it stay as they were
    OpSpec("frsqrt", "fpu", "r", "r", ("ftz",), "d = 1/sqrt(a) correctly rounded (rn; rsqrt.approx), ftz"),
]
#: ops a ROM row may run in ONE lane of its lane group, the ``lane`` modifier (0-3): the lanes at
#: another position keep their registers and emit nothing, as under a false guard (the weights:
#: ``circuit.one_lane_guard``). Every op the weights run that is not a branch; the lowering's lane
#: loops (``codegen.softmem._lane_turn``) take a lane's turn in such rows instead of a predicate
#: the loop computes. ``fmulf`` always names its lane (its own rule in the weights)
LANE_OPS = frozenset({
    "mov", "add", "sub", "and", "or", "xor", "not", "shl", "shr", "min", "max", "popc", "clz", "brev",
    "sel", "setp", "addw", "subw", "mulw", "s2r", "mul", "ld", "st", "fadd", "fsub", "frange",
})
_SPECS = [replace(s, mods=(*s.mods, "lane")) if s.name in LANE_OPS else s for s in _SPECS]
SPECS: dict[str, OpSpec] = {s.name: s for s in _SPECS}
OPCODES: dict[str, int] = {s.name: i for i, s in enumerate(_SPECS)}

# modifier value tables (index = encoded value)
MOD_VALUES: dict[str, tuple[Any, ...]] = {
    "sign": ("u", "s"),
    "sa": ("u", "s"),
    "sb": ("u", "s"),
    "cmp": ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"),
    "bop": (None, "and", "or", "xor"),
    "rnd": ("rn", "rz", "rm", "rp"),
    "irnd": (None, "rni", "rzi", "rmi", "rpi"),
    "ftz": (False, True),
    "sat": (False, True),
    "odd": (False, True),
    "lane": (None, 0, 1, 2, 3),
    "err": (False, True),
    "space": ("global", "shared", "local", "param", "callparam", "const", "generic", "spill"),
    "size": (1, 2, 4),
    "amode": ("z", "s"),
    "chk": (0, 8, 1, 2),  # bytes the bounds/alignment check covers, when not ``size`` (see DESIGN.md)
    "aop": ("add", "min", "max", "inc", "dec", "cas", "exch", "and", "or", "xor"),
    "type": ("u32", "s32", "f32", "b32"),
    "mode": ("up", "down", "bfly", "idx"),
    "vmode": ("any", "all", "uni"),
    "sr": (
        "tid.x", "tid.y", "tid.z", "ntid.x", "ntid.y", "ntid.z", "ctaid.x", "ctaid.y", "ctaid.z",
        "nctaid.x", "nctaid.y", "nctaid.z", "laneid", "warpid", "nwarpid", "lanemask_eq", "lanemask_lt",
        "lanemask_le", "lanemask_ge", "lanemask_gt", "dynamic_smem_size", "total_smem_size", "clock",
    ),
    "code": ("divzero", "limit", "trap"),  # host-side only: the ROM holds the op
}  # fmt: skip
# 32-bit modifier values carried as immediates in the encoding
WIDE_MODS = ("base", "off")
MOD_DEFAULTS: dict[str, Any] = {
    "rnd": "rn",
    "ftz": False,
    "sat": False,
    "odd": False,
    "lane": None,
    "err": False,
    "bop": None,
    "irnd": None,
    "amode": "z",
    "base": 0,
    "off": 0,
    "chk": 0,
    "sign": "u",
}


@dataclass(slots=True)
class MInstr:
    """One machine instruction.

    ``d``: destinations (``R`` or ``P``); ``s``: sources; ``m``: modifiers; ``guard``: optional
    predicate; ``target``: branch target (a label id before layout, a pc after); ``ptx``: index of
    the PTX instruction it came from (for messages), -1 if none.
    """

    op: str
    d: tuple[Any, ...] = ()
    s: tuple[Any, ...] = ()
    m: dict[str, Any] = field(default_factory=dict)
    guard: P | None = None
    target: int | None = None
    ptx: int = -1

    def mod(self, key: str) -> Any:
        return self.m.get(key, MOD_DEFAULTS.get(key))

    def __str__(self) -> str:
        g = f"@{self.guard} " if self.guard is not None else ""
        mods = []
        for k, v in self.m.items():
            if k in ("off", "base"):
                continue
            if v is True:
                mods.append(k)
            elif v not in (None, False):
                mods.append(str(v))
        name = ".".join([self.op, *mods])
        ops = [str(x) for x in self.d]
        if self.op in ("ld", "st", "atom"):
            a = self.s[0]
            addr = f"[{a}"
            if self.m.get("base"):
                addr = f"[0x{self.m['base']:x}+{a}"
            if self.m.get("off"):
                addr += f"{self.m['off']:+d}"
            addr += "]"
            ops.append(addr)
            ops += [str(x) for x in self.s[1:]]
        else:
            ops += [str(x) for x in self.s]
        if self.target is not None:
            ops.append(f"L{self.target}")
        return f"{g}{name} {', '.join(ops)}".rstrip()


# ---------------------------------------------------------------------------------------------
# encoding: fixed fields, cheap to feed as tokens
# ---------------------------------------------------------------------------------------------
# word 0: opcode (7 bits; 65 ops since the weights' one-lane unit's fmulf and frange) | guard (5 bits:
# enable, neg, 3-bit index) | modifier fields (packed)
# then one 6-bit operand field per destination and source: 0-31 register, 32-39 predicate,
# 40 PT, bit 6 (64) negation for predicates, 63 = "the next immediate"; immediates follow as
# 32-bit words, then the wide modifiers (address base/offset) and the branch target.
OPERAND_IMM = 63


def _mod_bits(ins: MInstr) -> list[tuple[str, int, int]]:
    """(name, value index, bit width) for each packed modifier of the op."""
    out = []
    for name in SPECS[ins.op].mods:
        if name in WIDE_MODS:
            continue
        table = MOD_VALUES[name]
        v = ins.mod(name)
        out.append((name, table.index(v), max(1, (len(table) - 1).bit_length())))
    return out


def encode(ins: MInstr) -> list[int]:
    """The instruction as a list of small integers: header, operand fields, 32-bit immediates."""
    if ins.op not in OPCODES:
        raise ValueError(f"unknown machine op {ins.op!r}")
    words = [OPCODES[ins.op]]
    g = 0
    if ins.guard is not None:
        g = 0b10000 | (0b1000 if ins.guard.neg else 0) | (ins.guard.n & 7)
    words.append(g)
    modword, shift = 0, 0
    for _, idx, width in _mod_bits(ins):
        modword |= idx << shift
        shift += width
    words.append(modword)
    imms: list[int] = []
    for x in (*ins.d, *ins.s):
        if isinstance(x, R):
            words.append(x.n)
        elif isinstance(x, P):
            words.append((32 + (8 if x.n == PT else x.n)) | (64 if x.neg else 0))
        else:
            words.append(OPERAND_IMM)
            imms.append(x.v)
    words += imms
    for name in WIDE_MODS:
        if name in SPECS[ins.op].mods:
            words.append(ins.mod(name) & 0xFFFFFFFFFFFFFFFF)
    if ins.target is not None:
        words.append(ins.target)
    return words


def mod_bits_total(op: str) -> int:
    """Bits of the packed modifier word of an op (for the encoding table in DESIGN.md)."""
    total = 0
    for name in SPECS[op].mods:
        if name in WIDE_MODS:
            continue
        total += max(1, (len(MOD_VALUES[name]) - 1).bit_length())
    return total


def validate(ins: MInstr) -> None:
    """Check an instruction against the op table (kinds of operands, known modifiers)."""
    spec = SPECS.get(ins.op)
    if spec is None:
        raise ValueError(f"unknown machine op {ins.op!r}")
    if len(ins.d) != len(spec.dsts):
        raise ValueError(f"{ins}: expected {len(spec.dsts)} destination(s)")
    for kind, x in zip(spec.dsts, ins.d, strict=True):
        if (kind == "r") != isinstance(x, R) or (kind == "p" and not isinstance(x, P)):
            raise ValueError(f"{ins}: destination {x} is not a {kind}")
        if isinstance(x, P) and (x.n == PT or x.neg):
            raise ValueError(f"{ins}: cannot write {x}")
    nsrc = len(spec.srcs)
    if not (
        len(ins.s) == nsrc
        or (ins.op == "setp" or ins.op == "fsetp")
        and len(ins.s) == 2
        or ins.op == "dsetp"
        and len(ins.s) == 4
        or ins.op == "atom"
        and len(ins.s) == 2
    ):
        raise ValueError(f"{ins}: expected {nsrc} source(s)")
    for kind, x in zip(spec.srcs, ins.s, strict=False):
        if kind == "p" and not isinstance(x, P):
            raise ValueError(f"{ins}: operand {x} must be a predicate")
        if kind == "r" and isinstance(x, P):
            raise ValueError(f"{ins}: operand {x} must be a register or immediate")
    for k in ins.m:
        if k not in spec.mods:
            raise ValueError(f"{ins}: op {ins.op} takes no modifier {k!r}")
        if k in MOD_VALUES and ins.m[k] not in MOD_VALUES[k]:
            raise ValueError(f"{ins}: bad value {ins.m[k]!r} for modifier {k!r}")
    if ins.op == "ret" and not isinstance(ins.s[0], R):
        raise ValueError(f"{ins}: ret reads its return pc from a register")
    if ins.op in ("bra", "call") and ins.target is None:
        raise ValueError(f"{ins}: a branch target is required")
    if ins.op in ("shfl", "vote", "ballot", "shflp"):
        # cross-lane ops: a 4-lane pass must not overwrite a source that a later pass still reads
        if any(x in ins.s for x in ins.d):
            raise ValueError(f"{ins}: a cross-lane op's destination must differ from its sources")


def op_table() -> list[tuple[str, str, str, str, int, str]]:
    """(op, unit, dsts, srcs, modifier bits, meaning) for every op, for docs and `machine info`."""
    return [(s.name, s.unit, s.dsts or "-", s.srcs or "-", mod_bits_total(s.name), s.doc) for s in _SPECS]
