"""Lowering for the weights: rewrite a lowered program so every instruction is one the circuit has.

This is the framework (registry, ``Fresh``/``Seq``, routines, call sites, windows, the expansion
driver) and the integer expanders. Imports flow one way: ``softcore`` <- ``softfloat``,
``softfloat64`` (register the float ops here when imported) <- ``softmem`` (memory, warp ops,
launch shapes; imports the float modules, so its launch pipeline expands everything) <- ``soft``
(the entry point: imports them all and re-exports this module's names). Code that expands or
runs programs imports ``soft`` (or ``softmem``), so every expander is registered.

The circuit compiled into the transformer weights (``circuit.py``) implements only a subset of the
machine ISA, ``WEIGHT_OPS`` (a 4-lane 32x32 multiplier does not fit beside the rest of the datapath
in the residual stream, so integer multiplication is a sequence). ``expand_for_weights(prog)``
rewrites a program over VIRTUAL registers (as returned by ``lower.lower_kernel``, before
``regalloc.allocate``) so that every instruction with a registered expander becomes a sequence of
``WEIGHT_OPS``; ``unsupported_ops(prog)`` names what is left (float, warp, atomic, shared-memory
ops, ``trap``, ``bar``, sub-word stores ... : other expanders' work).

What this module expands (measured costs: ``bench/mul_lowering.py`` and DESIGN.md, "Lowering for
the weights"):

* ``mul`` / ``mad`` by an immediate: the shortest shift/add/sub tree a small search finds
  (``x*10`` = 3 instructions, ``x*-3`` = 2, ``x*45`` = 4).
* ``mul`` / ``mad`` of two registers: MSB-first radix-16 Horner over the bits of the smaller
  operand (``min.u``; or the operand with a static bound, e.g. ``%ctaid`` < the launch's blocks), each bit a
  ``shl`` + ``setp`` + guarded ``add`` (3.25 machine instructions per multiplier bit). Two shapes:
  ``unrolled`` (branch-free digits, entered past the leading zero digits by a few forward
  branches, Duff's-device style: lanes of a warp with different operands re-converge for free
  under min-PC scheduling, so a warp costs its longest lane) and ``loop`` (the same digit step in
  a loop that exits when the rest of the multiplier is zero: ~28 instructions of program instead
  of ~115). ``auto`` (default) unrolls while the program fits ``budget`` instructions (the ROM of
  the machine in the weights), else loops. Measured per warp: 21 / 36 / 64 / 114 machine
  instructions for a 6 / 8 / 16 / 32-bit multiplier (branch-free: 105 always). In the remainder
  ``q * -d + n`` of integer division the multiplier is the shortest of a, b, -a, -b (``negmin``).
* ``mulhi`` (s, u): LSB-first shift-right accumulation ``S = (S + bit*c) >> 1`` kept within 32
  bits by splitting ``c = 2*(c>>1) + (c&1)`` (5 instructions per multiplier bit, no carries),
  with early exits for short multipliers; by an immediate only the set bits cost (3-4 each).
  Signed = unsigned minus the usual two guarded corrections.
* ``mulw`` (window multiply, POISON semantics of isa.py) by a non-power-of-two: the product as
  above plus an exact range check (compile-time bounds for an immediate; high word otherwise).
* ``plop`` (predicate logic): ``sel`` + ``setp`` with a ``bop`` (or one ``setp``).
* sub-word GLOBAL loads (``ld`` size 1/2, sign or zero extended): one 4-byte ``ld`` of the aligned
  word containing the byte (``chk`` = the original size, so bounds and alignment are checked and
  reported exactly as before; the circuit's memory is word-addressed and reads that word anyway)
  and a shift by ``8 * (address & 3)``.

Interface for per-op expanders (used by ``softfloat.py`` too)
-------------------------------------------------------------
``EXPANDERS: dict[str, Expander]`` maps a machine op name to a function

    def expand_xxx(ins: MInstr, fr: Fresh) -> list[MInstr] | None

* ``ins`` is a COPY of the instruction with its guard removed (``ins.guard is None``); the original
  guard is applied by the framework (below). Return ``None`` to leave the instruction as it is,
  or the replacement sequence. Only instructions for which ``in_weights`` is false are offered.
* ``fr.r()`` / ``fr.p()`` hand out fresh virtual registers / predicates (``R`` / ``P``); values in
  them are temporaries of this one expansion. ``fr.label()`` gives a fresh label id and
  ``fr.place(lbl)`` the pseudo-instruction ``MInstr("@label", target=lbl)`` that marks its
  position; a ``bra`` inside a sequence may target only labels of the same sequence.
  ``Seq(fr)`` is a small builder (``op``, ``into``, ``setp``, ``sel``, ``bra``, ``place``,
  ``pand`` ...) in the style of ``lower.Lowerer``; ``fr.bounds`` maps vregs to a static bound on
  their bit length (single definitions by ``s2r`` etc.), ``fr.opts`` holds the ``Options``.
* A sequence may read ``ins``'s sources at any point, and sources may alias destinations: write
  the instruction's destinations (``ins.d``) LAST, after the last read of a source, or only
  write temporaries before that. Every instruction returned must be in ``WEIGHT_OPS`` or have
  an expander: sequences are expanded again, recursively (an expander may emit ``mul`` and let
  the ``mul`` expander handle it).
* ``ptx`` of every returned instruction is set to ``ins.ptx`` by the framework (fault messages and
  PTX-level counting stay right).
* Register with ``@expander("op")`` or ``EXPANDERS["op"] = fn``. Predicate logic must not use
  ``plop`` (not a weight op): use ``Seq.pand/por/pxor/pcopy`` or ``Fresh.pand/...`` (setp-based).
* Sequences with loops must terminate for every input value (lanes whose guard is false may run
  them on arbitrary values when the framework guards writes instead of branching around).

Guards (done by the framework): a guarded instruction ``@g X`` expanded into ``seq`` behaves
exactly like ``@g X``: when ``seq`` has no internal branches, every instruction of ``seq`` that
writes a non-temporary register or has a side effect (``ld``/``st``/...) gets the guard (an
instruction already guarded by ``q`` gets ``q && g`` computed into a fresh predicate), and ``g``
is copied first when the sequence overwrites it; a sequence with internal branches is skipped
with ``@!g bra end``.

Subroutines: shared expansions (the 1024-row ROM)
------------------------------------------------
Inline expansions are long (a 32-bit multiply ~115 instructions, ``fmul`` ~130, ``ffma`` ~220), so
an expansion can instead be a CALL of a routine whose body is emitted ONCE per program (ISA ops
``call d, L`` / ``ret a``):

* ``Routine(name, params, results, body)``: ``name`` identifies the body (equal names share it);
  ``params`` / ``results`` are kind strings ("r" register, "p" predicate), e.g. "rr" / "r";
  ``body(s, params, results)`` emits into the ``Seq`` ``s`` code computing the results from the
  parameter vregs (any ops with expanders, branches to its own labels, calls of other routines;
  no recursion; it writes only its results and its own temporaries). An expander uses one with
  ``Seq.call(routine, *args) -> result regs`` (or puts ``call(routine, args, dsts)`` in its list).
* ``routable(*ops)``: THE ONE-LINE WAY to route whole expansions of ops through routines (e.g.
  ``soft.routable("fadd", "fsub", "fmul", "ffma")``). Every instruction of such an op gets a
  routine name from its op, modifiers and operand shape (a register with its static bit bound,
  a predicate, or the immediate's VALUE: immediates are folded into the body, so ``fmul x, 2.0``
  and ``fmul x, 3.0`` are different routines); the body is the op's own expander applied to the
  parameter vregs. Besides this SPECIALIZED routine every instruction has a GENERIC one (op and
  modifiers only, every operand a parameter: one body for all instances). The expander must
  always expand (never return None) and may not depend on anything but the instruction and
  ``fr.opts``/``fr.bounds``. This module makes ``mul`` and ``mulhi`` routable (``mad``, ``mulw``
  and lower.py's division sequences reach them); ``route_floats()`` (run by ``softfloat.py`` and
  ``softfloat64.py`` when imported) their float ops. Parts shared by DIFFERENT ops or modifiers
  (a float op's significand product or unpacking is the same in every rounding mode) can be
  shared by calling an explicit ``Routine`` for them from the expanders (``Seq.call``): routed
  or inlined by the same rules. softfloat.py does so for ``fadd``/``fmul``/``ffma``
  (``softfloat._shared``: a ``*.core`` routine per op computes everything but the rounding,
  ``fprod`` the significand product that fmul and ffma share): such PARTS are routed only by
  name (``Fresh.route(name, "part")``: ``auto`` picks them by their measured saving;
  ``always``/``generic`` leave them inline). An inline part records the routable expansions it
  lies in (``Fresh.enclosing``), so once one of those is routed it is no longer counted as a
  separate saving.
* Calling convention: per routine FIXED virtual registers: its parameters, its results and a
  link register. A call site is ``mov`` into each parameter (a ``setp`` copy for a predicate),
  ``call link, entry``, ``mov`` out of each result; the body ends with ``ret link``. A guarded
  instruction guards the ``call`` and the moves out (lanes whose guard is false skip the routine).
  The allocator (``regalloc.py``) follows ``call`` into the routine and ``ret`` back to every
  return site, so values live across a call never share a register with the routine's
  temporaries; most moves coalesce away (predicate copies too; a move that cannot be coalesced
  still vanishes when colouring can give both sides one register: biased colouring).
* Layout: ``bra kernel`` at pc 0, then the bodies (callees before callers), then the kernel.
  Routines sit BELOW the kernel on purpose: a lane inside a routine then has a smaller pc than
  every lane waiting in the kernel, so min-PC scheduling finishes the call before any lane runs
  the next PTX instruction, exactly as for an inline sequence (DESIGN.md, "Divergence"): visible
  effects keep the interpreter's order and PTX-level counting stays exact. (Bodies after the
  kernel would let lanes that skip a call run ahead to later stores, shuffles and barriers.)
* Outlined windows (``find_windows``): lower.py's own sequences repeat too (seven identical
  ``div.rn.f32`` in layernorm, the reciprocal estimate shared by ``div``/``rem``, f64 pieces of
  sin_cos). A window is a run of lowered instructions inside ONE PTX instruction's sequence,
  equal to another up to a consistent renaming of registers, without memory, cross-lane or
  control ops (a fault must name its own PTX instruction; branches stay inside the window or go
  to its end, none enters it from outside); its parameters are the registers it reads before
  writing, its results the registers it writes that are used elsewhere. It becomes a routine
  whose body (expanded once) is the window on the routine's registers. Found by extending every
  pair of same-shaped starts as far as the renaming stays consistent, then trimming to the
  longest valid window.
* When: ``Options.routines``: ``auto`` (default) inlines everything when the program fits
  ``budget``; otherwise it routes the names (op routines, specialized or generic, and windows,
  ``Options.outline``) with the largest estimated saving (sum of the inline sizes - one body -
  the call sites), re-expands and repeats until the program fits (near the budget it is
  allocated to decide: coalesced moves vanish), then tries the ``loop`` multiply shape the same
  way, and last every op generic + every window. ``never``: all inline; ``always``: every
  routable expansion calls its specialized routine, ``generic``: its generic one (the tests'
  options; ``outline="always"`` outlines every window). ``Options.routed``: names routed.

Program invariants kept: branch targets are re-mapped, ``ptx_ranges`` cover the inserted
instructions (an expansion belongs to the PTX instruction of the instruction it replaces; a
routine's body and the branch over the bodies lie outside every range: the simulator counts
them for the calling PTX instruction), ``nregs``/``npreds`` grow by the fresh registers,
everything else is unchanged. The result is
again a program over virtual registers, ready for ``regalloc.allocate`` and ``sim.MachineSim``;
``simulate_for_weights`` / ``run_for_weights`` are ``sim.simulate`` / ``run_machine_sim`` with
the expansion in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from qwengpu.isa.instr import FALSE, POISON, PT, TRUE, Imm, MInstr, P, R, validate
from qwengpu.isa.limits import LIMITS
from qwengpu.isa.program import Program

#: ops the circuit in the weights implements (``addw``/``subw`` run as add/sub, ``mulw`` only by a
#: power of two, as shl; ``call``/``ret`` for the shared routines; ``setp`` with cmp eq ne lt le
#: gt ge, s/u, bop and|or|xor; ``ld``/``st``
#: whole words of global memory, ``ld`` of parameters).
WEIGHT_OPS: frozenset[str] = frozenset(
    {
        "mov", "add", "sub", "and", "or", "xor", "not", "shl", "shr", "min", "max", "popc", "clz",
        "brev", "sel", "setp", "ld", "st", "bra", "exit", "addw", "subw", "mulw", "s2r", "call", "ret",
        "mul",  # only with the multiplier (``weight_name(ins, native_mul=True)``)
        "fmulf", "frange",  # only emitted with the one-lane float multiplier (``Options.native_fmulf``)
    }
)  # fmt: skip
WEIGHT_CMPS = ("eq", "ne", "lt", "le", "gt", "ge")
SIDE_EFFECTS = ("ld", "st", "atom", "trap", "bar", "exit", "vote", "ballot", "shfl", "shflp", "call")
#: the ops this module expands (``softfloat.py`` registers more in ``EXPANDERS``)
INTEGER_EXPANDED = ("mul", "mad", "mulhi", "mulw", "plop", "ld", "idiv", "irem")
#: the program rows the lowering aims for (inline expansions while the program fits, shared routines
#: past it). Not the ROM (4,096 rows on the 2B shape): a row costs 12 prompt tokens and the fast
#: runtime's prefill is a step per token, so inlining to 4,096 rows cost more wall time than it saved
#: (measured: docs/machine-in-weights.md 9.9). A program that does not fit it even with routines
#: runs as long as it fits the ROM (``engine.prepare``)
ROM_BUDGET = 1024
MUL_VARIANTS = ("auto", "unrolled", "loop", "bitloop", "straight")
ROUTINE_MODES = ("auto", "never", "always", "generic")
OUTLINE_MODES = ("auto", "never", "always")
M32 = 0xFFFFFFFF
WMAX = 2**31 - 1  # window values lie in [-WMAX, WMAX]
#: the most read-only words constant tables may take (``Fresh.table``): a launch's read-only
#: inputs must end below them (``engine.prepare``), so they stay a small share of the 49,152
MAX_RODATA = 1024


@dataclass(frozen=True)
class Options:
    """How to expand. ``mul``: the general (register x register) multiply and mul-high shape:
    ``auto`` = ``unrolled`` while the program fits ``budget`` instructions, else ``loop``;
    ``bitloop`` (one bit per iteration) and ``straight`` (32 branch-free digits, no dispatch)
    are kept for the measurements. ``entries``: multiplier bit lengths at which the unrolled
    shapes can be entered / left early. ``only``: expand only these ops (None: every expander).
    ``negmin``: pick the multiplier among a, b, -a, -b (7 more instructions; True: always; None:
    when exactly one operand is defined as a negation, as in the remainder ``q * -d + n`` of
    integer division; False: never). ``routines``: ``auto`` (shared routines only when the
    program would not fit ``budget``), ``never``, ``always`` (every routable expansion is a call
    of its specialized routine), ``generic`` (... of its generic routine); ``routed``: the
    routine names called in ``auto`` mode (``expand_for_weights`` chooses them). ``outline``:
    repeated windows of the lowered code (``find_windows``) become routines: ``auto`` (only
    while the program does not fit, chosen like ``routed``), ``never``, ``always`` (every one).
    ``parts``: ``auto`` may choose shared parts of expansions (softfloat's rounding-independent
    cores) as routines (it fits the program with and without them and keeps the shorter); parts
    named in ``routed`` are routed either way. ``native_mul``: the machine has the multiplier
    (``circuit.multiplier``, ``MachineShape.multiplier``): a multiply is one ``mul`` row unless
    its constant's shift-and-add is one instruction, and mul-high is four of them
    (:func:`mulhi_into`). ``native_fadd``: the machine has the float adders (``circuit.float_adder``,
    ``MachineShape.fadd``): ``add``/``sub.rn.f32`` without ``.sat`` (and the float ``atomicAdd``'s
    add) are one ``fadd`` row."""

    mul: str = "auto"
    budget: int = ROM_BUDGET
    entries: tuple[int, ...] = (4, 8, 16)
    only: frozenset[str] | None = None
    negmin: bool | None = None
    routines: str = "auto"
    routed: frozenset[str] = frozenset()
    outline: str = "auto"
    parts: bool = True
    native_mul: bool = False
    native_fadd: bool = False
    #: with both: ``mul``/``fma.rn.f32`` take softfloat's fast path on the adders (its slow path a
    #: cold routine); off only when a program does not fit the ROM with it (the fast path and the
    #: slow routine together are longer than the integer sequence alone)
    fast_floats: bool = True
    #: the machine has the one-lane fast-range float multiplier (``circuit.float_multiplier``,
    #: ``MachineShape.fmulf``): the fast path's product of ``mul.rn.f32`` is one ``fmulf`` row,
    #: four rows (one per lane) after register allocation (``softmem.expand_one_lane``), and its
    #: range checks (of ``fma.rn.f32`` too) one ``frange`` row
    native_fmulf: bool = False
    #: the launch's scalar parameter words, (byte offset in the parameter bank, value): launch
    #: constants the ROM carries anyway; ``value_bounds`` bounds a ``ld.param`` of one by its value
    #: (a small ``n`` makes ``(float)(n + i)`` the short conversion). Only bounds, never folded
    #: into results: the model still computes every value from them
    param_words: tuple[tuple[int, int], ...] = ()
    #: the launch's whole parameter bank (``isa.sim.param_bank``: parameters and launch-constant
    #: slots; empty: unknown). After expansion each ``ld.param`` of it becomes the ``mov`` of its
    #: word that the ROM row is anyway, so register allocation's constant propagation puts the
    #: word into its readers as an immediate and the load's pass and result tokens go
    #: (``softmem.fold_param_loads``). Substituted, never folded: the model computes every value
    param_bank: bytes = b""
    #: the machine's rows read ``tid``/``laneid``/``warpid``/``ctaid`` as operand a (every
    #: ``MachineShape``: ``circuit.register_file``'s ``a_sr``): an ``s2r`` all of whose readers
    #: can take it there is folded into them (``softmem.fold_special_reads``)
    special_operands: bool = False
    #: a conditional branch over a few straight rows becomes those rows guarded, and a launch of
    #: one machine block drops the zeros its registers already hold (``softmem.guard_short_skips``,
    #: ``drop_first_zeros``)
    guard_short_skips: bool = False
    #: what the tests on every path decide about a division's operands (``codegen.nonzero``): a
    #: division-by-zero check no lane can fire is dropped, the divisor's clamp after a check, and
    #: the magnitude and sign rows of an operand known non-negative (Euclid's loop: 19 -> 16 rows)
    decided_zero_checks: bool = False
    #: lane-serialised loops (atomics, sub-word stores) as one copy per lane group of the warp
    #: (``softmem._lane_loop``): fewer passes, more ROM rows; off only when a program does not
    #: fit the ROM with them
    group_loops: bool = True
    #: the machine runs one-lane rows of any op but a branch (``MachineShape.lane_rows``): within
    #: a lane group's copy of a lane loop, each lane's turn is its own rows, without the loop's
    #: predicate, count and branch (``softmem._lane_turn``, ``_shared_turns``)
    lane_rows: bool = False
    #: the word after the machine's read-only words (``MachineShape``: ``gmem_words + ro_words``;
    #: 0: it has none): sequences may place constant tables just below it (``Fresh.table``,
    #: ``Program.rodata``), e.g. ``ex2``'s 2^(j/256), which replaces its first eight
    #: shift-and-add steps by two loads
    rodata_top: int = 0
    #: a thread's reload of the word it stored, across barriers only, is the stored register when no
    #: other thread's store can reach that word (``softmem.forward_own_words``)
    forward_own_words: bool = False
    #: ``add d, x, 0`` and the like (the program's own immediates) are copies the allocator drops
    #: (``rowfold.drop_identity_ops``, ``rowfold.fold_constant_rows``)
    drop_identity_rows: bool = False


def unit_options(shape: object) -> dict[str, bool | int]:
    """The ``Options`` fields a machine shape (``machine.shape.MachineShape``) decides: its units
    and its one-lane rows (every lowering for a machine passes them)."""
    ro = int(shape.ro_words)  # type: ignore[attr-defined]
    return {"native_mul": bool(shape.multiplier), "native_fadd": bool(shape.fadd),  # type: ignore[attr-defined]
            "native_fmulf": bool(shape.fmulf), "lane_rows": bool(shape.lane_rows),  # type: ignore[attr-defined]
            "special_operands": True, "guard_short_skips": True, "decided_zero_checks": True,
            "forward_own_words": True, "drop_identity_rows": True,
            "rodata_top": int(shape.gmem_words) + ro if ro else 0}  # type: ignore[attr-defined]


class Fresh:
    """Hands out fresh virtual registers, predicates and labels for one program's expansion."""

    def __init__(self, prog: Program, opts: Options | None = None) -> None:
        self.nr = prog.nregs
        self.np = prog.npreds
        self.first_r = prog.nregs
        self.first_p = prog.npreds
        self.nlabels = 0
        self.ptx = -1
        self.opts = opts or Options()
        self.bounds: dict[int, int] = value_bounds(prog, self.launch_blocks(), dict(self.opts.param_words))
        self.params: dict[int, int] = param_values(prog, dict(self.opts.param_words))
        self.negated: set[int] = negations(prog)
        # subroutines: name -> instance, bodies in emission order (callees first), names being
        # built, the routines' fixed vregs, and the measurements ``auto`` decides by
        self.routines: dict[str, RoutineInstance] = {}
        self.bodies: list[list[MInstr]] = []
        self.building: list[str] = []
        self.shared_r: set[int] = set()
        self.shared_p: set[int] = set()
        # inline instances of routable expansions: (specialized name, generic name, size)
        # and, for softfloat's shared parts, the routine names whose inline expansion it lies in
        # (routing one of those moves it into that routine's single body)
        self.instances: list[tuple[str, str, int, frozenset[str]]] = []
        self.enclosing: list[str] = []  # names of the routable expansions being built inline
        self.site_cost: dict[str, int] = {}  # routine name -> instructions of one call site
        self.pc_sizes: list[int] = []  # expanded size of each instruction of the program
        self.rodata: list[tuple[int, tuple[int, ...]]] = list(prog.rodata)  # constant tables

    def table(self, words: tuple[int, ...]) -> int | None:
        """The first word address of a constant table holding ``words`` in the machine's read-only
        words (placed below the tables already there, from ``Options.rodata_top`` down; one copy
        of equal tables), or None when the machine has no read-only words or they are too few."""
        top = self.opts.rodata_top
        if not top:
            return None
        for base, ws in self.rodata:
            if ws == words:
                return base
        base = min((b for b, _ in self.rodata), default=top) - len(words)
        if base < top - MAX_RODATA:
            return None
        self.rodata.append((base, tuple(words)))
        return base

    def launch_blocks(self) -> int | None:
        """The machine's block count (``s2r ctaid.x``'s range: the launch's blocks times its parts)
        when the options carry the launch's memory plan (None: any launch)."""
        plan = getattr(self.opts, "plan", None)
        return None if plan is None else plan.mblocks

    def route(self, name: str, level: str = "special") -> bool:
        """Whether an expansion with this routine name becomes a call (``Options.routines``;
        ``level``: the name is an instruction's ``special`` or ``generic`` routine, or a ``part``
        of expansions, e.g. softfloat's mode-independent cores: routed only by name)."""
        mode = self.opts.routines
        if name in self.building:
            return False  # the body of that routine itself
        if name in self.opts.routed:
            return True
        if mode == "always":
            return level == "special"
        if mode == "generic":
            return level == "generic"
        return False

    def r(self) -> R:
        self.nr += 1
        return R(self.nr - 1)

    def p(self) -> P:
        self.np += 1
        return P(self.np - 1)

    def label(self) -> int:
        """A fresh label id (negative, so it never collides with a pc of the program)."""
        self.nlabels += 1
        return -self.nlabels

    @staticmethod
    def place(lbl: int) -> MInstr:
        return MInstr("@label", target=lbl)

    def is_temp(self, x: object) -> bool:
        """Whether ``x`` is a register handed out by this object."""
        if isinstance(x, R):
            return x.n >= self.first_r
        if isinstance(x, P):
            return x.n != PT and x.n >= self.first_p
        return False

    def bits(self, x: R | Imm) -> int:
        """A static bound on the bit length of an operand's value (32 when unknown)."""
        if isinstance(x, Imm):
            return x.v.bit_length()
        return self.bounds.get(x.n, 32)

    def emit(self, op: str, d: tuple = (), s: tuple = (), guard: P | None = None, **m: object) -> MInstr:
        return MInstr(op, tuple(d), tuple(s), dict(m), guard, None, self.ptx)

    # predicate logic with setp only (plop is not a weight op); each returns instructions
    def pcopy(self, d: P, a: P) -> list[MInstr]:
        """d = a (a may be negated or PT)."""
        return [self.emit("setp", (d,), (Imm(0), Imm(0), a), cmp="eq", sign="u", bop="and")]

    def pand(self, d: P, a: P, b: P) -> list[MInstr]:
        """d = a && b (either may be negated)."""
        return self._pbop(d, a, b, "and")

    def por(self, d: P, a: P, b: P) -> list[MInstr]:
        """d = a || b."""
        return self._pbop(d, a, b, "or")

    def pxor(self, d: P, a: P, b: P) -> list[MInstr]:
        """d = a ^ b."""
        return self._pbop(d, a, b, "xor")

    def _pbop(self, d: P, a: P, b: P, bop: str) -> list[MInstr]:
        t = self.r()
        return [
            self.emit("sel", (t,), (Imm(1), Imm(0), a)),
            self.emit("setp", (d,), (t, Imm(0), b), cmp="ne", sign="u", bop=bop),
        ]


class Seq:
    """Builds one expansion (``s = Seq(fr); t = s.op("add", a, b); ...; return s.code``)."""

    def __init__(self, fr: Fresh) -> None:
        self.fr = fr
        self.code: list[MInstr] = []

    def emit(
        self, op: str, d: tuple = (), s: tuple = (), guard: P | None = None, target: int | None = None, **m
    ) -> MInstr:
        ins = MInstr(op, tuple(d), tuple(s), dict(m), guard, target, self.fr.ptx)
        self.code.append(ins)
        return ins

    def op(self, op: str, *s: object, guard: P | None = None, **m: object) -> R:
        d = self.fr.r()
        self.emit(op, (d,), s, guard, **m)
        return d

    def into(self, d: R, op: str, *s: object, guard: P | None = None, **m: object) -> R:
        self.emit(op, (d,), s, guard, **m)
        return d

    def mov(self, d: R, a: R | Imm, guard: P | None = None) -> None:
        if d != a or guard is not None:
            self.emit("mov", (d,), (a,), guard)

    def sel(self, a: R | Imm, b: R | Imm, p: P) -> R:
        return self.op("sel", a, b, p)

    def setp(
        self,
        cmp: str,
        a: R | Imm,
        b: R | Imm,
        sign: str = "u",
        bop: str | None = None,
        c: P | None = None,
        guard: P | None = None,
    ) -> P:
        return self.setp_into(self.fr.p(), cmp, a, b, sign, bop, c, guard)

    def setp_into(
        self,
        p: P,
        cmp: str,
        a: R | Imm,
        b: R | Imm,
        sign: str = "u",
        bop: str | None = None,
        c: P | None = None,
        guard: P | None = None,
    ) -> P:
        m: dict[str, object] = {"cmp": cmp, "sign": sign}
        s: tuple = (a, b)
        if bop is not None:
            m["bop"] = bop
            s = (a, b, c)
        self.emit("setp", (p,), s, guard, **m)
        return p

    def label(self) -> int:
        return self.fr.label()

    def place(self, lbl: int) -> None:
        self.code.append(self.fr.place(lbl))

    def bra(self, lbl: int, guard: P | None = None) -> None:
        self.emit("bra", guard=guard, target=lbl)

    def pcopy(self, d: P, a: P) -> None:
        self.code += self.fr.pcopy(d, a)

    def pand(self, d: P, a: P, b: P) -> None:
        self.code += self.fr.pand(d, a, b)

    def por(self, d: P, a: P, b: P) -> None:
        self.code += self.fr.por(d, a, b)

    def pxor(self, d: P, a: P, b: P) -> None:
        self.code += self.fr.pxor(d, a, b)

    def call(self, routine: Routine, *args: object, guard: P | None = None) -> tuple:
        """Results (fresh registers/predicates) of ``routine(*args)``: a call of the shared body,
        or the body inline, as ``Options.routines`` decides."""
        dsts = tuple(self.fr.p() if k == "p" else self.fr.r() for k in routine.results)
        self.code.append(call(routine, args, dsts, guard))
        return dsts


Expander = Callable[[MInstr, Fresh], "list[MInstr] | None"]
EXPANDERS: dict[str, Expander] = {}


def expander(*ops: str) -> Callable[[Expander], Expander]:
    """Decorator: register ``fn`` as the expander of the machine ops ``ops``."""

    def reg(fn: Expander) -> Expander:
        for op in ops:
            EXPANDERS[op] = fn
        return fn

    return reg


# ---------------------------------------------------------------------------------------------
# subroutines (module docstring: "Subroutines")
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Routine:
    """A shared subroutine: ``body(s, params, results)`` emits into ``s`` the code computing the
    results (kinds ``results``: "r"/"p" each) from the parameters (kinds ``params``)."""

    name: str
    params: str
    results: str
    body: Callable[[Seq, tuple, tuple], None]
    top: bool = False  # the body is kernel code (outlined window): ``Options.only`` applies to it
    #: a cold path (e.g. softfloat's slow path behind a fast one): always a call unless
    #: ``Options.routines`` is ``never``, so the rarely run code sits once in the ROM
    cold: bool = False


@dataclass
class RoutineInstance:
    """A routine in one program: its entry label and its fixed virtual registers."""

    entry: int
    params: tuple
    results: tuple
    link: R


def call(routine: Routine, args: tuple | list, dsts: tuple | list, guard: P | None = None) -> MInstr:
    """The pseudo-instruction ``dsts = routine(args)`` for an expander's sequence (the framework
    turns it into a call site, or into the body inline)."""
    if len(args) != len(routine.params) or len(dsts) != len(routine.results):
        raise ValueError(f"routine {routine.name}: {len(args)} arguments / {len(dsts)} results")
    return MInstr("@call", tuple(dsts), tuple(args), {"routine": routine}, guard)


#: op -> function ``(ins, fr, generic) -> (routine, args, dsts) | None`` giving an instruction's
#: specialized or generic routine (None: not routable)
ROUTERS: dict[str, Callable[[MInstr, Fresh, bool], tuple[Routine, tuple, tuple] | None]] = {}


def routable(*ops: str) -> None:
    """Make the expansions of ``ops`` shareable: each instruction may become a call of a routine
    whose body is the op's expander applied to parameter vregs (the one-line way for expanders).
    An instruction has two routines: the SPECIALIZED one (immediates folded into the body, static
    operand bounds kept: as short as the inline code) and the GENERIC one (every operand a
    parameter: one body serves every instance of the op and modifiers)."""
    for op in ops:
        ROUTERS[op] = _op_routine


def _op_routine(ins: MInstr, fr: Fresh, generic: bool = False) -> tuple[Routine, tuple, tuple] | None:
    """The routine for a whole instruction: named by op, modifiers and operand shape."""
    specs: list[str] = []
    args: list[object] = []
    if all(isinstance(x, Imm) or isinstance(x, P) and x.n == PT for x in ins.s):
        return None  # constants: folded inline
    for x in ins.s:
        if isinstance(x, Imm) and generic:
            specs.append("r")
            args.append(x)
        elif isinstance(x, Imm):
            specs.append(f"#{x.v:x}")
        elif isinstance(x, P):
            if x.n == PT:
                specs.append("F" if x.neg else "T")
            else:
                specs.append("p")
                args.append(x)
        elif generic:
            specs.append("r")
            args.append(x)
        else:
            b = fr.bits(x)
            specs.append(("r" if b >= 32 else f"r{b}") + ("n" if x.n in fr.negated else ""))
            args.append(x)
    mods = ",".join(f"{k}={v}" for k, v in sorted(ins.m.items()))
    name = f"{ins.op}[{mods}]({','.join(specs)})"
    kinds = "".join("p" if isinstance(a, P) else "r" for a in args)
    dkinds = "".join("p" if isinstance(d, P) else "r" for d in ins.d)
    template = replace(ins, m=dict(ins.m), guard=None)

    def body(s: Seq, ps: tuple, rs: tuple) -> None:
        it = iter(ps)
        srcs = []
        for x, sp in zip(template.s, specs, strict=True):
            if sp.startswith("#") or sp in ("T", "F"):
                srcs.append(x)
                continue
            q = next(it)
            srcs.append(q)
            if isinstance(q, R):
                b = sp[1:].rstrip("n")
                if b:
                    s.fr.bounds[q.n] = int(b)
                if sp.endswith("n"):
                    s.fr.negated.add(q.n)
        canon = replace(template, d=tuple(rs), s=tuple(srcs), m=dict(template.m), ptx=s.fr.ptx)
        seq = EXPANDERS[template.op](canon, s.fr)
        if seq is None:
            raise ValueError(f"routable op {template.op}: its expander left `{canon}` as it is")
        s.code += seq

    return Routine(name, kinds, dkinds, body), tuple(args), tuple(ins.d)


def _routine_instance(rt: Routine, fr: Fresh, depth: int) -> RoutineInstance:
    """The routine's instance in this program; its body is built (and expanded) on first use."""
    inst = fr.routines.get(rt.name)
    if inst is not None:
        if rt.name in fr.building:
            raise ValueError(f"routine {rt.name} calls itself: routines may not recurse")
        return inst
    saved = fr.ptx
    params = tuple(fr.p() if k == "p" else fr.r() for k in rt.params)
    results = tuple(fr.p() if k == "p" else fr.r() for k in rt.results)
    link = fr.r()
    for x in (*params, *results, link):
        (fr.shared_p if isinstance(x, P) else fr.shared_r).add(x.n)
    inst = RoutineInstance(fr.label(), params, results, link)
    fr.routines[rt.name] = inst
    fr.building.append(rt.name)
    s = Seq(fr)
    rt.body(s, params, results)
    body = [fr.place(inst.entry)]
    for y in s.code:
        if y.op == "@label":
            body.append(y)
            continue
        y.ptx = saved
        body += expand_one(y, fr, 0 if rt.top else depth + 1)
    fr.ptx = saved
    body.append(MInstr("ret", (), (link,), ptx=saved))
    fr.building.pop()
    fr.bodies.append(body)
    return inst


def _copy(fr: Fresh, d: object, a: object, guard: P | None = None) -> list[MInstr]:
    if isinstance(d, P):
        out = fr.pcopy(d, a)  # type: ignore[arg-type]
        if guard is not None:
            out[0].guard = guard
        return out
    return [fr.emit("mov", (d,), (a,), guard)]


def _call_site(x: MInstr, fr: Fresh, depth: int) -> list[MInstr]:
    """``@call`` -> moves into the parameters, ``call``, moves out of the results (guarded like
    ``x``); or, when the framework keeps it inline, the body on fresh registers."""
    rt: Routine = x.m["routine"]
    g = x.guard
    cold = rt.cold and fr.opts.routines != "never" and rt.name not in fr.building
    if not (cold or fr.route(rt.name) or fr.route(rt.name, "generic")):
        r0, p0 = fr.nr, fr.np
        params = tuple(fr.p() if k == "p" else fr.r() for k in rt.params)
        results = tuple(fr.p() if k == "p" else fr.r() for k in rt.results)
        s = Seq(fr)
        for q, a in zip(params, x.s, strict=True):
            s.code += _copy(fr, q, a)
        fr.enclosing.append(rt.name)
        try:
            rt.body(s, params, results)
            for d, q in zip(x.d, results, strict=True):
                s.code += _copy(fr, d, q)
            out: list[MInstr] = []
            for y in s.code:
                if y.op != "@label":
                    y.ptx = fr.ptx
                out += [y] if y.op == "@label" else expand_one(y, fr, depth + 1)
        finally:
            fr.enclosing.pop()
        fr.instances.append((rt.name, rt.name, sum(1 for y in out if y.op != "@label"), frozenset()))
        fr.site_cost[rt.name] = len(rt.params) + 1 + len(rt.results)
        return out if g is None else _apply_guard(out, g, fr, r0, p0, fr.ptx)
    inst = _routine_instance(rt, fr, depth)
    out = []
    if g is not None and g.n != PT and any(isinstance(d, P) and d.n == g.n for d in x.d):
        gg = fr.p()
        out += fr.pcopy(gg, g)
        g = gg
    for q, a in zip(inst.params, x.s, strict=True):
        out += _copy(fr, q, a)
    out.append(MInstr("call", (inst.link,), (), {}, g, inst.entry, fr.ptx))
    for d, q in zip(x.d, inst.results, strict=True):
        out += _copy(fr, d, q, g)
    return out


# ---------------------------------------------------------------------------------------------
# what the weights run
# ---------------------------------------------------------------------------------------------
def _pow2_operand(ins: MInstr) -> int | None:
    """The power-of-two immediate of a ``mulw`` (the weights run it as a shift), or None; a
    signed 0x80000000 is POISON, not 2^31. None when both operands are immediates (constants
    propagated into both): the expander folds the product to a ``mov``."""
    if all(isinstance(x, Imm) for x in ins.s):
        return None
    for x, sg in zip(ins.s, (ins.mod("sa"), ins.mod("sb")), strict=False):
        if isinstance(x, Imm) and x.v and x.v & (x.v - 1) == 0 and not (x.v == POISON and sg == "s"):
            return x.v
    return None


def weight_name(ins: MInstr, native_mul: bool = False, native_fadd: bool = False) -> str | None:
    """None when the circuit in the weights runs ``ins`` as it is, else the name that says why
    not (``mul``, ``setp.equ``, ``ld.global.1`` for a sub-word load, ``st.shared`` ...).
    ``native_mul``: the machine has the multiplier (``MachineShape.multiplier``); ``native_fadd``:
    the float adders (``MachineShape.fadd``: ``add``/``sub.rn.f32`` and the add rounded to odd,
    ftz or not, no sat)."""
    op = ins.op
    if op in ("fadd", "fsub"):
        return None if native_fadd and ins.mod("rnd") == "rn" and not ins.mod("sat") else op
    if op not in WEIGHT_OPS:
        return op
    if op == "setp":
        return None if ins.mod("cmp") in WEIGHT_CMPS else f"setp.{ins.mod('cmp')}"
    if op == "mulw":
        return None if _pow2_operand(ins) is not None else "mulw"
    if op == "mul":  # the multiplier's row, on a machine that has it (``Options.native_mul``)
        return None if native_mul else "mul"
    if op in ("ld", "st"):
        space, size = ins.mod("space"), ins.mod("size")
        if space not in ("global", "param"):
            return f"{op}.{space}"
        if size != 4:
            return f"{op}.{space}.{size}"
    return None


def in_weights(ins: MInstr, native_mul: bool = False, native_fadd: bool = False) -> bool:
    """Whether the circuit in the weights runs ``ins`` as it is."""
    return weight_name(ins, native_mul, native_fadd) is None


def unsupported_ops(prog: Program, native_mul: bool = False) -> list[str]:
    """Sorted names (``weight_name``) of what in ``prog`` the circuit in the weights does not run."""
    return sorted({n for n in (weight_name(x, native_mul) for x in prog.code) if n is not None})


# ---------------------------------------------------------------------------------------------
# static bounds: registers whose value provably has few bits
# ---------------------------------------------------------------------------------------------
#: the block bound the lowering assumed when the machine ran at most 64 blocks: kept as a floor
#: for a launch's own bound, so the programs of every launch that fitted then are unchanged
CTAID_BOUND_FLOOR = 64


def special_bits(nblocks: int | None = None) -> dict[str, int]:
    """Bit length bounds of special registers for every launch the machine accepts (LIMITS), or,
    given the launch's block count (the lowering with a memory plan), for that launch: ``ctaid``
    below max(nblocks, 64) (a 16-bit bound for every launch would make each multiply by
    ``%ctaid`` on a machine without the multiplier 2.5x longer)."""
    t = LIMITS.resident_threads  # ``s2r tid.x`` of the machine: the thread in its (part of a) block
    b = LIMITS.blocks_per_launch if nblocks is None else max(nblocks, CTAID_BOUND_FLOOR)
    nw = -(-t // 32)
    out = {}
    for ax in "xyz":
        out[f"tid.{ax}"] = (t - 1).bit_length()
        out[f"ntid.{ax}"] = t.bit_length()
        out[f"ctaid.{ax}"] = (b - 1).bit_length()
        out[f"nctaid.{ax}"] = b.bit_length()
    out.update(laneid=5, warpid=(nw - 1).bit_length(), nwarpid=nw.bit_length())
    return out


def _def_bits(ins: MInstr, sb: dict[str, int], src: Callable[[object], int],
              params: Mapping[int, int] | None = None) -> int | None:
    """A bound on the bit length of what ``ins`` writes (None: unknown); ``src`` bounds operands,
    ``params`` are the launch's scalar parameter words by byte offset."""
    op, s = ins.op, ins.s
    if op == "s2r":
        return sb.get(ins.mod("sr"))
    if op == "mov":
        return src(s[0])
    if op == "and" or op == "min" and ins.mod("sign") == "u":
        return min(src(s[0]), src(s[1]))
    if op in ("or", "xor", "max") and (op != "max" or ins.mod("sign") == "u"):
        return max(src(s[0]), src(s[1]))
    if op == "add":
        return max(src(s[0]), src(s[1])) + 1
    if op == "shr" and ins.mod("sign") == "u" and isinstance(s[1], Imm):
        return max(0, src(s[0]) - s[1].v)
    if op == "shl" and isinstance(s[1], Imm):
        return src(s[0]) + s[1].v if s[1].v < 32 else 0
    if op == "sel":
        return max(src(s[0]), src(s[1]))
    if op in ("popc", "clz"):
        return 6
    if op == "ld" and ins.mod("size") < 4 and ins.mod("sign") == "u":
        return 8 * ins.mod("size")
    word = param_word(ins, params)
    return None if word is None else word.bit_length()


def param_word(ins: MInstr, params: Mapping[int, int] | None) -> int | None:
    """The launch's word that ``ins`` loads when it is a ``ld.param`` of a known scalar word
    (``Options.param_words``), else None."""
    if (ins.op == "ld" and params and ins.mod("space") == "param" and ins.mod("size") == 4
            and isinstance(ins.s[0], Imm)):
        return params.get(ins.s[0].v + (ins.mod("off") or 0))
    return None


def definitions(prog: Program) -> dict[int, list[MInstr]]:
    """vreg -> the instructions that write it, in program order (the single-definition analyses
    below: bounds, launch words, negations)."""
    defs: dict[int, list[MInstr]] = {}
    for ins in prog.code:
        for d in ins.d:
            if isinstance(d, R):
                defs.setdefault(d.n, []).append(ins)
    return defs


def param_values(prog: Program, params: Mapping[int, int] | None) -> dict[int, int]:
    """vreg -> the launch's word, for registers whose one definition is an unguarded ``ld.param``
    of a known scalar word. Read before that definition a register still holds its entry 0, so a
    lowering may rely on the word only where 0 cannot reach (a divisor: the ``trap.divzero`` the
    lowering puts before every division stops a lane whose divisor is 0)."""
    defs = definitions(prog)
    out = {}
    for n, ds in defs.items():
        word = param_word(ds[0], params) if len(ds) == 1 and ds[0].guard is None else None
        if word is not None:
            out[n] = word
    return out


def value_bounds(prog: Program, nblocks: int | None = None,
                 params: Mapping[int, int] | None = None) -> dict[int, int]:
    """vreg -> bound (< 32) on the bit length of every value it holds, for registers with exactly
    one definition whose result is bounded: ``s2r`` of a special register bounded by the machine's
    LIMITS (tid, ntid, ctaid, nctaid, laneid ...), immediates, sub-word loads, and mov/and/or/add/
    shifts/sel of bounded values. A guarded definition, or a read before it, leaves the old value:
    the entry value 0 or an earlier value of the same definition, so the bound still holds.
    ``nblocks``: the launch's block count (``special_bits``); ``params``: the launch's scalar
    parameter words by byte offset (``Options.param_words``): a ``ld.param`` of one is bounded by
    its value."""
    sb = special_bits(nblocks)
    defs = definitions(prog)
    memo: dict[int, int] = {}

    def bound(n: int) -> int:
        if n not in memo:
            memo[n] = 32  # cycles (a register defined from itself) stay unbounded
            ds = defs.get(n, [])
            b = _def_bits(ds[0], sb, src, params) if len(ds) == 1 else None
            memo[n] = 32 if b is None else min(b, 32)
        return memo[n]

    def src(x: object) -> int:
        if isinstance(x, Imm):
            return x.v.bit_length()
        if isinstance(x, R):
            return bound(x.n)
        return 32

    out = {}
    for n in defs:
        if bound(n) < 32:
            out[n] = memo[n]
    return out


def negations(prog: Program) -> set[int]:
    """vregs whose only definition is ``sub r, 0, x`` (a hint: their value is a negation)."""
    defs = definitions(prog)
    return {
        n
        for n, ds in defs.items()
        if len(ds) == 1 and ds[0].op == "sub" and isinstance(ds[0].s[0], Imm) and ds[0].s[0].v == 0
    }


# ---------------------------------------------------------------------------------------------
# the framework
# ---------------------------------------------------------------------------------------------
def expand_for_weights(
    prog: Program,
    *,
    mul: str = "auto",
    budget: int = ROM_BUDGET,
    only: Collection[str] | None = None,
    routines: str = "auto",
    outline: str = "auto",
    options: Options | None = None,
) -> Program:
    """The program with every instruction the weights cannot run and that has an expander
    replaced by its sequence (see the module docstring). ``only`` restricts the expanders used;
    ``routines`` (auto/never/always/generic) decides which expansions become calls of shared
    routines, ``outline`` (auto/never/always) which repeated windows of the lowered code do."""
    opts = options or Options(
        mul=mul,
        budget=budget,
        only=None if only is None else frozenset(only),
        routines=routines,
        outline=outline,
    )
    if opts.mul not in MUL_VARIANTS:
        raise ValueError(f"unknown multiply variant {opts.mul!r}; one of {MUL_VARIANTS}")
    if opts.routines not in ROUTINE_MODES:
        raise ValueError(f"unknown routines mode {opts.routines!r}; one of {ROUTINE_MODES}")
    if opts.outline not in OUTLINE_MODES:
        raise ValueError(f"unknown outline mode {opts.outline!r}; one of {OUTLINE_MODES}")
    out = _expand_best(prog, opts)
    if opts.group_loops and not _fits(out, opts.budget) and any(
        ins.op == "atom" or ins.op == "st" and (ins.mod("size") or 4) < 4 for ins in prog.code
    ):  # the lane loops' copies take ROM rows: without them, if that fits (or is shorter)
        slim = _expand_best(prog, replace(opts, group_loops=False))
        if _fits(slim, opts.budget) or len(slim.code) < len(out.code):
            return slim
    return out


def _expand_best(prog: Program, opts: Options) -> Program:
    """``expand_for_weights`` for checked options: the shortest expansion that fits the ROM."""
    windows = _Windows(prog, opts.outline != "never")  # found only when needed
    if opts.outline == "always":
        opts = replace(opts, routed=opts.routed | frozenset(windows.get()))
    best = None
    shapes = ("unrolled", "loop") if opts.mul == "auto" else (opts.mul,)
    for shape in shapes:
        # with and without shared parts (the greedy choice of routines differs; keep the shorter)
        outs = [_fit(prog, replace(opts, mul=shape, parts=False), windows)]
        if opts.parts and opts.routines == "auto" and not _fits(outs[0], opts.budget, alloc=False):
            outs.append(_fit(prog, replace(opts, mul=shape), windows))
        fit = [o for o in outs if _fits(o, opts.budget)]
        if fit:
            return min(fit, key=lambda o: len(o.code))
        for out in outs:
            if best is None or len(out.code) < len(best.code):
                best = out
    if opts.fast_floats and opts.native_fadd and opts.native_mul and opts.routines == "auto":
        slim = expand_for_weights(prog, options=replace(opts, fast_floats=False))
        if _fits(slim, opts.budget) or len(slim.code) < len(best.code):  # type: ignore[union-attr]
            return slim
    if opts.routines == "auto" and opts.outline != "never":  # last resort: share all there is
        wins = windows.get()
        out, _ = _expand(
            prog, replace(opts, mul=shapes[-1], routines="generic", routed=frozenset(wins)), wins
        )
        if _fits(out, opts.budget) or len(out.code) < len(best.code):  # type: ignore[union-attr]
            best = out
    return best  # type: ignore[return-value]


def _fits(prog: Program, budget: int, alloc: bool = True) -> bool:
    """Whether the expanded program fits ``budget`` once allocated: surely when it is no longer
    before allocation; near the budget it is allocated to see (coalesced moves vanish) unless
    ``alloc`` is off."""
    n = len(prog.code)
    if n <= budget:
        return True
    if n > budget * 13 // 10 or not alloc:
        return False
    from qwengpu.codegen.regalloc import allocate
    from qwengpu.errors import MachineLimitError

    try:
        return len(allocate(prog).code) <= budget
    except MachineLimitError:
        return False


class _Windows:
    """``find_windows(prog)``, computed on first use (only programs that do not fit need it)."""

    def __init__(self, prog: Program, enabled: bool) -> None:
        self.prog, self.enabled = prog, enabled
        self.found: dict[str, Window] | None = None if enabled else {}

    def get(self) -> dict[str, Window]:
        if self.found is None:
            self.found = find_windows(self.prog)
        return self.found


def _fit(prog: Program, opts: Options, lazy: _Windows) -> Program:
    """Inline when the program fits the budget; else (``auto``) route the routine names (and
    outline the windows) with the largest estimated saving, re-expand, and repeat while the
    program does not fit."""
    out, fr = _expand(prog, opts, lazy.found or {})
    if opts.routines != "auto" and opts.outline != "auto" or _fits(out, opts.budget):
        return out
    windows = lazy.get()
    best = out
    routed = set(opts.routed)
    for _ in range(24):
        excess = len(best.code) - opts.budget
        if excess <= 0 or _fits(best, opts.budget):
            break
        got = 0
        insts = list(fr.instances) if opts.routines == "auto" else []
        covered = {
            pc
            for name in routed
            if name in windows
            for st, ln, _, _ in windows[name].occ
            for pc in range(st, st + ln)
        }
        while got < excess:
            pick = _best_routine(insts, fr.site_cost)
            if opts.outline == "auto":
                wpick = _best_window(windows, routed, covered, fr.pc_sizes)
                if wpick is not None and (pick is None or wpick[0] > pick[0]):
                    pick = wpick
            if pick is None:
                break
            saving, name = pick
            routed.add(name)
            got += saving
            if name in windows:
                covered |= {pc for st, ln, _, _ in windows[name].occ for pc in range(st, st + ln)}
            insts = [x for x in insts if name not in x[:2] and name not in x[3]]
        if not got:
            break
        out, fr = _expand(prog, replace(opts, routed=frozenset(routed)), windows)
        if len(out.code) < len(best.code):
            best = out
    return best


def _best_routine(
    insts: list[tuple[str, str, int, frozenset[str]]], site_cost: dict[str, int]
) -> tuple[int, str] | None:
    """(estimated saving, name) of the routine that saves the most instructions over the inline
    instances ``insts`` (specialized name, generic name, inline size): their sizes minus one body
    (estimated by the largest instance; a generic body by its own instances when there are any)
    minus the call sites; None when nothing saves."""
    groups: dict[str, list[int]] = {}
    exact: dict[str, list[int]] = {}
    for sp, gen, size, _ in insts:
        groups.setdefault(sp, []).append(size)
        if gen != sp:
            groups.setdefault(gen, []).append(size)
        else:
            exact.setdefault(gen, []).append(size)
    best = None
    for name, sizes in groups.items():
        body = max(exact.get(name) or sizes) + 1
        saving = sum(sizes) - body - len(sizes) * site_cost[name]
        if saving > 0 and (best is None or (saving, name) > best):
            best = (saving, name)
    return best


def _expand(prog: Program, opts: Options, windows: dict[str, Window] | None = None) -> tuple[Program, Fresh]:
    if prog.allocated:
        raise ValueError("expand_for_weights works on virtual registers: call it before allocate()")
    fr = Fresh(prog, opts)
    at: dict[int, tuple[Window, tuple, tuple, int]] = {}
    for name, w in (windows or {}).items():
        if name in opts.routed:
            for st, ln, args, dsts in w.occ:
                at.setdefault(st, (w, args, dsts, ln))
    groups: list[list[MInstr]] = []
    skip = 0
    for pc, ins in enumerate(prog.code):
        fr.ptx = ins.ptx
        if pc < skip:
            groups.append([])  # inside an outlined window
        elif pc in at:
            w, args, dsts, ln = at[pc]
            groups.append(expand_one(call(w.routine, args, dsts), fr, 0))
            skip = pc + ln
        else:
            groups.append(expand_one(ins, fr, 0))
    fr.pc_sizes = [sum(1 for x in g if x.op != "@label") for g in groups]
    n = len(prog.code)
    mapping = [0] * (n + 1)
    label_pc: dict[int, int] = {}
    flat: list[MInstr] = []

    def put(seq: list[MInstr]) -> None:
        for x in seq:
            if x.op == "@label":
                label_pc[x.target] = len(flat)  # type: ignore[index]
            else:
                flat.append(x)

    if fr.bodies:  # the routines first (below the kernel: see "Subroutines"), jumped over
        start = fr.label()
        put([MInstr("bra", target=start, ptx=prog.code[0].ptx)])
        for body in fr.bodies:
            put(body)
        put([fr.place(start)])
    for pc, g in enumerate(groups):
        mapping[pc] = len(flat)
        put(g)
    mapping[n] = len(flat)
    code = []
    for x in flat:
        y = replace(x, m=dict(x.m))
        if y.target is not None:
            y.target = label_pc[y.target] if y.target < 0 else mapping[y.target]
        validate(y)
        code.append(y)
    ranges = [(mapping[a], mapping[b]) for a, b in prog.ptx_ranges]
    code, ranges = local_value_numbering(code, ranges, prog.pinned)
    out = replace(
        prog,
        code=code,
        nregs=fr.nr,
        npreds=fr.np,
        ptx_ranges=ranges,
        pinned=set(prog.pinned),
        kinds=dict(prog.kinds),
        rodata=tuple(fr.rodata),
    )
    return out, fr


# ---------------------------------------------------------------------------------------------
# local value numbering: one copy of a value that expansions recompute
# ---------------------------------------------------------------------------------------------
#: pure ops whose repeated computation (same op, modifiers and sources in one basic block) is
#: reused (``mov`` of a constant is not: sharing constants only lengthens live ranges)
CSE_OPS = frozenset({"add", "sub", "and", "or", "xor", "not", "shl", "shr", "min", "max", "popc", "clz",
                     "brev", "sel", "s2r", "addw", "subw", "mulw"})  # fmt: skip
CSE_REACH = 24
_BLOCK_ENDS = frozenset({"bra", "ret", "exit", "trap"})  # a call returns to the next pc: no block end


def local_value_numbering(
    code: list[MInstr], ranges: list[tuple[int, int]], pinned: set[int]
) -> tuple[list[MInstr], list[tuple[int, int]]]:
    """Delete an instruction that recomputes, in the same basic block, a value an earlier one
    computed from the same unchanged sources, and read the earlier register instead.

    Why: expansions are built one instruction at a time, so e.g. every local-memory access
    recomputes its thread's slot address (``s2r``, two shifts, an add) and nearby ones are equal.
    Only single-definition registers are merged (the kept one's value then holds wherever the
    deleted one was read: its definition comes first in the block and is never redone); guarded
    instructions, predicates and cross-lane (pinned) registers are left alone, and only values
    computed at most ``CSE_REACH`` instructions before are reused (a longer live range costs
    registers: programs near the 32-register limit would spill or no longer fit)."""
    ndefs: dict[R, int] = {}
    for x in code:
        for d in x.d:
            if isinstance(d, R):
                ndefs[d] = ndefs.get(d, 0) + 1
    starts = {x.target for x in code if x.target is not None}
    rename: dict[R, R] = {}
    keep = [True] * len(code)
    table: dict[tuple, tuple[R, int]] = {}

    def ren(v: object) -> object:
        return rename.get(v, v) if isinstance(v, R) else v

    for i, x in enumerate(code):
        if i in starts:
            table.clear()
        elif i % CSE_REACH == 0 and table:  # entries too old to be reused: dropping them changes
            # nothing and keeps the invalidation scan below short in long blocks (unrolled code)
            table = {k: v for k, v in table.items() if i - v[1] <= CSE_REACH}
        srcs = tuple(ren(v) for v in x.s)
        d = x.d[0] if len(x.d) == 1 else None
        key = None
        if (
            x.op in CSE_OPS
            and x.guard is None
            and isinstance(d, R)
            and ndefs.get(d) == 1
            and d.n not in pinned
            and not any(isinstance(v, R) and v.n in pinned for v in srcs)
        ):
            key = (x.op, tuple(sorted((k, str(v)) for k, v in x.m.items())), srcs)
            prev = table.get(key)
            if prev is not None and i - prev[1] <= CSE_REACH:
                rename[d] = prev[0]
                keep[i] = False
                continue
        for dv in x.d:  # a redefinition invalidates what was computed from (or into) it
            hit = {dv} if isinstance(dv, R) else {P(dv.n), P(dv.n, True)}  # !p reads p too
            for k in [k for k, v in table.items() if v[0] == dv or hit & set(k[2])]:
                del table[k]
        if key is not None and d not in srcs:
            table[key] = (d, i)  # type: ignore[assignment]
        if x.op in _BLOCK_ENDS:
            table.clear()
    if not rename:
        return code, ranges
    new_pc = [0] * (len(code) + 1)
    out: list[MInstr] = []
    for i, x in enumerate(code):
        new_pc[i] = len(out)
        if keep[i]:
            out.append(x)
    new_pc[len(code)] = len(out)
    fixed = []
    for x in out:
        y = replace(x, s=tuple(ren(v) for v in x.s), guard=x.guard, m=dict(x.m))
        if y.target is not None:
            y.target = new_pc[y.target]
        fixed.append(y)
    return fixed, [(new_pc[a], new_pc[b]) for a, b in ranges]


# ---------------------------------------------------------------------------------------------
# outlining: repeated windows of the lowered code become routines
# ---------------------------------------------------------------------------------------------
#: ops a window may not contain: memory (faults name their PTX instruction), cross-lane, control
#: beyond local branches
IMPURE = ("ld", "st", "atom", "trap", "bar", "exit", "shfl", "shflp", "vote", "ballot", "call", "ret")
MIN_WINDOW = 4


@dataclass
class Window:
    """A repeated window of the lowered program: ``occ`` = (start pc, length, args, dsts) per
    non-overlapping occurrence; ``routine`` its shared body."""

    routine: Routine
    occ: list[tuple[int, int, tuple, tuple]]
    size: int  # lowered instructions


def _shape(ins: MInstr) -> tuple:
    def k(x: object) -> object:
        if isinstance(x, R):
            return "r"
        if isinstance(x, P):
            return ("P", x.neg) if x.n == PT else ("p", x.neg)
        return ("i", x.v)  # type: ignore[attr-defined]

    g = None if ins.guard is None else k(ins.guard)
    return (ins.op, tuple(sorted(ins.m.items())), g, tuple(map(k, ins.d)), tuple(map(k, ins.s)))


def _regs_of(ins: MInstr) -> list[object]:
    return [
        x
        for x in (*ins.d, *ins.s, ins.guard)
        if isinstance(x, (R, P)) and not (isinstance(x, P) and x.n == PT)
    ]


def find_windows(prog: Program, min_len: int = MIN_WINDOW) -> dict[str, Window]:
    """Repeated windows of ``prog`` (virtual registers): equal code up to a consistent renaming of
    registers, inside one PTX instruction's sequence, without memory, cross-lane or control ops
    (branches only within the window or to its end, none from outside into it), with the same
    parameters (registers read before written) and results (registers written and used outside).
    The longest match of each pair of starts, grouped by canonical form; name -> Window."""
    code = prog.code
    n = len(code)
    rid = [-1] * n
    for k, (a, b) in enumerate(prog.ptx_ranges):
        for pc in range(a, min(b, n)):
            rid[pc] = k
    ok = [
        rid[pc] >= 0
        and code[pc].op not in IMPURE
        and not (code[pc].op == "s2r" and code[pc].mod("sr") == "clock")
        for pc in range(n)
    ]
    inc: dict[int, list[int]] = {}
    for pc, ins in enumerate(code):
        if ins.target is not None:
            inc.setdefault(ins.target, []).append(pc)
    shapes = [_shape(x) for x in code]
    refs: dict[tuple[type, int], int] = {}
    for ins in code:
        for x in _regs_of(ins):
            key = (type(x), x.n)  # type: ignore[attr-defined]
            refs[key] = refs.get(key, 0) + 1
    by_shape: dict[tuple, list[int]] = {}
    for pc in range(n):
        if ok[pc]:
            by_shape.setdefault(shapes[pc], []).append(pc)

    def match(i: int, j: int) -> int:
        fa: dict[tuple, int] = {}
        fb: dict[tuple, int] = {}
        k = 0
        while (
            j + k < n
            and i + k < j
            and ok[i + k]
            and ok[j + k]
            and rid[i + k] == rid[i]
            and rid[j + k] == rid[j]
        ):
            a, b = code[i + k], code[j + k]
            if shapes[i + k] != shapes[j + k]:
                break
            if (
                (a.target is None) != (b.target is None)
                or a.target is not None
                and a.target - i != b.target - j
            ):  # type: ignore[operator]
                break
            good = True
            for x, y in zip(_regs_of(a), _regs_of(b), strict=True):
                kx, ky = (type(x), x.n), (type(y), y.n)  # type: ignore[attr-defined]
                if fa.setdefault(kx, ky) != ky or fb.setdefault(ky, kx) != kx:  # type: ignore[arg-type]
                    good = False
                    break
            if not good:
                break
            k += 1
        return k

    def closed(st: int, ln: int) -> bool:
        end = st + ln
        for pc in range(st, end):
            t = code[pc].target
            if t is not None and not st <= t <= end:
                return False
            if pc > st and any(not st <= q < end for q in inc.get(pc, ())):
                return False
        return True

    ud = [_use_kill(ins) for ins in code]
    memo: dict[tuple[int, int], object] = {}

    def info_of(st: int, ln: int):  # noqa: ANN202
        if (st, ln) not in memo:
            memo[(st, ln)] = _window_info(code, st, ln, refs, prog.pinned, ud)
        return memo[(st, ln)]

    found: dict[str, list] = {}
    tmpl: dict[str, tuple] = {}
    pairs = sorted((i, j) for pcs in by_shape.values() for x, i in enumerate(pcs) for j in pcs[x + 1 :])
    mlen: dict[tuple[int, int], int] = {}
    for i, j in pairs:
        if mlen.get((i - 1, j - 1), 0) >= 2:
            mlen[(i, j)] = mlen[(i - 1, j - 1)] - 1
            continue  # inside the match from (i - 1, j - 1), whose windows were tried
        full = mlen[(i, j)] = match(i, j)
        for a in range(full - min_len + 1):  # the longest valid window, trimming the left then the right
            ln = full - a
            while ln >= min_len and not (closed(i + a, ln) and closed(j + a, ln)):
                ln -= 1
            if ln < min_len:
                continue
            infos = [info_of(st + a, ln) for st in (i, j)]
            if any(x is None for x in infos) or infos[0][0] != infos[1][0]:  # type: ignore[index]
                continue
            for st, (key, args, dsts, canon) in zip((i + a, j + a), infos, strict=True):  # type: ignore[misc]
                found.setdefault(key, []).append((st, ln, args, dsts))
                tmpl.setdefault(key, canon)
            break
    out: dict[str, Window] = {}
    for key, occs in found.items():
        occs = sorted(set((st, ln) for st, ln, _, _ in occs))
        chosen = []
        last = -1
        for st, ln in occs:
            if st >= last:
                info = info_of(st, ln)
                chosen.append((st, ln, info[1], info[2]))  # type: ignore[index]
                last = st + ln
        if len(chosen) < 2:
            continue
        canon, params, results = tmpl[key]
        import hashlib

        name = f"win[{prog.ptx[code[chosen[0][0]].ptx].form if prog.ptx else '?'}:{chosen[0][1]}:" \
               f"{hashlib.sha1(key.encode()).hexdigest()[:10]}]"  # fmt: skip
        out[name] = Window(_window_routine(name, canon, params, results), chosen, chosen[0][1])
    return out


def _use_kill(ins: MInstr) -> tuple[frozenset, frozenset]:
    """(registers read, registers surely written) as (class, number), regalloc's rules."""
    from qwengpu.codegen.regalloc import use_def

    uses, kills = set(), set()
    for cls in (R, P):
        u, kl, _ = use_def(ins, cls)
        uses |= {(cls, v) for v in u}
        kills |= {(cls, v) for v in kl}
    return frozenset(uses), frozenset(kills)


def _window_info(code: list[MInstr], st: int, ln: int, refs: dict, pinned: set[int], ud: list | None = None):
    """(key, args, dsts, (canonical code, params, results)) of one occurrence, or None when a
    register used only inside it is read before written. ``ud``: ``_use_kill`` per pc."""
    canon: dict[tuple, int] = {}
    rows = []
    inside: dict[tuple, int] = {}
    for pc in range(st, st + ln):
        ins = code[pc]
        for x in _regs_of(ins):
            kx = (type(x), x.n)  # type: ignore[attr-defined]
            canon.setdefault(kx, len(canon))
            inside[kx] = inside.get(kx, 0) + 1

        def c(x: object) -> object:
            if isinstance(x, R):
                return ("r", canon[(R, x.n)])
            if isinstance(x, P):
                return ("P", x.neg) if x.n == PT else ("p", canon[(P, x.n)], x.neg)
            return ("i", x.v)  # type: ignore[attr-defined]

        g = None if ins.guard is None else c(ins.guard)
        t = None if ins.target is None else ins.target - st
        rows.append((ins.op, tuple(sorted(ins.m.items())), g, tuple(map(c, ins.d)), tuple(map(c, ins.s)), t))
    external = {kx for kx, cnt in inside.items() if refs[kx] > cnt or kx[0] is R and kx[1] in pinned}
    # registers read before written (guarded writes read the old value), by backward liveness
    ue: list[set[tuple]] = [set() for _ in range(ln + 1)]
    ue[ln] = set(external)
    changed = True
    while changed:
        changed = False
        for k in range(ln - 1, -1, -1):
            ins = code[st + k]
            succ = []
            if ins.op == "bra":
                succ.append(ins.target - st)  # type: ignore[operator]
                if ins.guard is not None:
                    succ.append(k + 1)
            else:
                succ.append(k + 1)
            out_ = set().union(*(ue[q] for q in succ))
            uses, kills = ud[st + k] if ud is not None else _use_kill(ins)
            new = uses | (out_ - kills)
            if new != ue[k]:
                ue[k] = new
                changed = True
    if ue[0] - external:
        return None  # an internal register read before written: not a self-contained window
    written = {(type(x), x.n) for pc in range(st, st + ln) for x in code[pc].d}  # type: ignore[attr-defined]
    params = sorted(ue[0], key=lambda kx: canon[kx])
    results = sorted(external & written, key=lambda kx: canon[kx])
    key = repr((rows, [canon[kx] for kx in params], [canon[kx] for kx in results]))
    mk = lambda kx: R(kx[1]) if kx[0] is R else P(kx[1])  # noqa: E731
    cparams = tuple((canon[kx], "r" if kx[0] is R else "p") for kx in params)
    cresults = tuple((canon[kx], "r" if kx[0] is R else "p") for kx in results)
    return key, tuple(map(mk, params)), tuple(map(mk, results)), (rows, cparams, cresults)


def _window_routine(name: str, rows: list, params: tuple, results: tuple) -> Routine:
    """The routine of a window: its canonical code on the routine's registers."""

    def body(s: Seq, ps: tuple, rs: tuple) -> None:
        fr = s.fr
        reg: dict[int, object] = {}
        for (ci, _), q in zip(results, rs, strict=True):
            reg[ci] = q
        for (ci, _), q in zip(params, ps, strict=True):
            if ci in reg:
                s.code += _copy(fr, reg[ci], q)  # read and written: the result starts as the argument
            else:
                reg[ci] = q
        labels: dict[int, int] = {}
        for row in rows:
            if row[5] is not None:
                labels.setdefault(row[5], fr.label())

        def m(x: tuple) -> object:
            if x[0] == "i":
                return Imm(x[1])
            if x[0] == "P":
                return P(PT, x[1])
            if x[1] not in reg:
                reg[x[1]] = fr.r() if x[0] == "r" else fr.p()
            q = reg[x[1]]
            return P(q.n, x[2]) if x[0] == "p" else q  # type: ignore[attr-defined]

        code: list[MInstr] = []
        for k, (op, mods, g, d, src, tgt) in enumerate(rows):
            if k in labels:
                code.append(fr.place(labels[k]))
            guard = None if g is None else m(g)
            target = None if tgt is None else labels[tgt]
            code.append(MInstr(op, tuple(map(m, d)), tuple(map(m, src)), dict(mods), guard, target, fr.ptx))  # type: ignore[arg-type]
        if len(rows) in labels:
            code.append(fr.place(labels[len(rows)]))
        body_prog = _CodeOnly(code)
        fr.bounds.update(value_bounds(body_prog, fr.launch_blocks(), dict(fr.opts.param_words)))  # type: ignore[arg-type]
        fr.negated |= negations(body_prog)  # type: ignore[arg-type]
        s.code += code

    kinds = "".join(k for _, k in params)
    rkinds = "".join(k for _, k in results)
    return Routine(name, kinds, rkinds, body, top=True)


class _CodeOnly:
    """A stand-in Program for ``value_bounds``/``negations`` (they read only ``.code``)."""

    def __init__(self, code: list[MInstr]) -> None:
        self.code = [x for x in code if x.op != "@label"]


def _best_window(
    windows: dict[str, Window], routed: set[str], covered: set[int], pc_sizes: list[int]
) -> tuple[int, str] | None:
    """(estimated saving, name) of the window whose outlining saves the most expanded instructions
    (occurrences not overlapping windows already chosen)."""
    best = None
    for name, w in windows.items():
        if name in routed:
            continue
        occ = [(st, ln) for st, ln, _, _ in w.occ if not any(pc in covered for pc in range(st, st + ln))]
        if len(occ) < 2:
            continue
        sizes = [sum(pc_sizes[pc] for pc in range(st, st + ln)) for st, ln in occ]
        site = len(w.routine.params) + len(w.routine.results) + 1
        saving = sum(sizes) - (max(sizes) + 1 + len(w.routine.params)) - len(occ) * site
        if saving > 0 and (best is None or (saving, name) > best):
            best = (saving, name)
    return best


def expand_one(ins: MInstr, fr: Fresh, depth: int) -> list[MInstr]:
    if ins.op == "@call":
        return _call_site(ins, fr, depth)
    if ins.op == "@label" or in_weights(ins, fr.opts.native_mul, fr.opts.native_fadd):
        return [ins]
    fn = EXPANDERS.get(ins.op)
    if fn is None or (depth == 0 and fr.opts.only is not None and ins.op not in fr.opts.only):
        return [ins]
    if depth > 16:
        raise RecursionError(f"expansion of `{ins}` does not reach weight ops")
    g = ins.guard
    if g is not None and g.n == PT:
        if g.neg:
            return []  # never runs
        g = None
    r0, p0 = fr.nr, fr.np
    bare = replace(ins, m=dict(ins.m), guard=None)
    special = generic = None
    if ins.op in ROUTERS:
        special = ROUTERS[ins.op](bare, fr, False)
        generic = ROUTERS[ins.op](bare, fr, True) if special is not None else None
    if special is not None and fr.route(special[0].name):
        seq: list[MInstr] | None = [call(*special)]
    elif generic is not None and fr.route(generic[0].name, "generic"):
        seq = [call(*generic)]
    else:
        seq = None
    inline = special is not None and seq is None
    if inline:  # instances of routines met inside lie in this expansion
        fr.enclosing += [special[0].name, generic[0].name]  # type: ignore[index]
    try:
        if seq is None:
            seq = fn(bare, fr)
        if seq is None:
            return [ins]
        out: list[MInstr] = []
        for x in seq:
            if x.op == "@label":
                out.append(x)
                continue
            x.ptx = ins.ptx
            out += expand_one(x, fr, depth + 1)
    finally:
        if inline:
            del fr.enclosing[-2:]
    if g is not None:
        out = _apply_guard(out, g, fr, r0, p0, ins.ptx)
    if special is not None and generic is not None and seq[0].op != "@call":  # for routines=auto
        fr.instances.append(
            (special[0].name, generic[0].name, sum(1 for x in out if x.op != "@label"), frozenset())
        )
        for rt, args, dsts in (special, generic):
            fr.site_cost[rt.name] = len(args) + 1 + len(dsts)
    return out


def _apply_guard(seq: list[MInstr], g: P, fr: Fresh, r0: int, p0: int, ptx: int) -> list[MInstr]:
    """Make ``seq`` (the expansion of an instruction guarded by ``g``) behave like it."""

    def temp(x: object) -> bool:  # a routine's parameters and link count as temporaries
        if isinstance(x, R):
            return x.n >= r0 or x.n in fr.shared_r
        if isinstance(x, P):
            return x.n != PT and (x.n >= p0 or x.n in fr.shared_p)
        return False

    if any(x.op in ("bra", "@label") for x in seq):
        end = fr.label()
        return [MInstr("bra", guard=g.inv(), target=end, ptx=ptx), *seq, fr.place(end)]
    needs = [x for x in seq if x.op in SIDE_EFFECTS or any(not temp(d) for d in x.d)]
    writes_g = any(isinstance(d, P) and d.n == g.n for x in seq for d in x.d)
    out: list[MInstr] = []
    gg = g
    fr.ptx = ptx
    if writes_g and len(needs) > 1:
        gg = fr.p()
        out += fr.pcopy(gg, g)
    ids = {id(x) for x in needs}
    for x in seq:
        if id(x) in ids:
            if x.guard is None:
                x.guard = gg
            else:
                c = fr.p()
                out += fr.pand(c, x.guard, gg)
                x.guard = c
        out.append(x)
    return out


# ---------------------------------------------------------------------------------------------
# multiplication by a constant: the shortest shift/add/sub tree a small search finds
# ---------------------------------------------------------------------------------------------
X = ("x",)
ZERO = ("zero",)


@lru_cache(maxsize=8192)
def const_plan(c: int) -> tuple[int, tuple]:
    """(instructions, tree) computing ``x * c mod 2^32`` from ``x`` with shl/add/sub; the tree's
    nodes are ``("x",)``, ``("zero",)``, ``("shl", t, k)``, ``("add"|"sub", t, u)`` (a DAG: equal
    subtrees are computed once)."""
    c &= M32
    if c == 0:
        return (0, ZERO)
    if c == 1:
        return (0, X)
    cands: list[tuple[int, tuple]] = []
    neg = -c & M32
    if neg < c:  # -(x * neg)
        k, t = const_plan(neg)
        cands.append((k + 1, ("sub", ZERO, t)))
    tz = (c & -c).bit_length() - 1
    if tz:
        k, t = const_plan(c >> tz)
        cands.append((k + 1, ("shl", t, tz)))
    else:
        k, t = const_plan(c - 1)
        cands.append((k + 1, ("add", t, X)))
        k, t = const_plan((c + 1) & M32)
        cands.append((k + 1, ("sub", t, X)))
        one_minus = (1 - c) & M32
        if one_minus < c:  # x - x * (1 - c)
            k, t = const_plan(one_minus)
            cands.append((k + 1, ("sub", X, t)))
        for j in range(2, 32):
            for f, op in (((1 << j) - 1, "sub"), ((1 << j) + 1, "add")):
                if f < c and c % f == 0:
                    k, t = const_plan(c // f)
                    cands.append((k + 2, (op, ("shl", t, j), t)))
    return min(cands, key=lambda kt: (kt[0], _depth(kt[1])))


def _depth(t: tuple) -> int:
    return 0 if len(t) == 1 else 1 + max(_depth(x) for x in t[1:] if isinstance(x, tuple))


def _const_mul(s: Seq, d: R, x: R | Imm, c: int) -> None:
    """d = x * c (mod 2^32), c a constant."""
    c &= M32
    if isinstance(x, Imm):
        s.into(d, "mov", Imm(x.v * c))
        return
    _, tree = const_plan(c)
    memo: dict[tuple, R | Imm] = {X: x, ZERO: Imm(0)}

    def ev(t: tuple, dst: R | None) -> R | Imm:
        if t in memo:
            return memo[t]
        args = [ev(a, None) if isinstance(a, tuple) else Imm(a) for a in t[1:]]
        r = dst if dst is not None else s.fr.r()
        s.into(r, t[0], *args)
        memo[t] = r
        return r

    v = ev(tree, d)
    if v != d:
        s.into(d, "mov", v)


# ---------------------------------------------------------------------------------------------
# general multiplication
# ---------------------------------------------------------------------------------------------
def _operands(s: Seq, a: R, b: R, low: bool) -> tuple[R, R, int, bool, str]:
    """(multiplier m, multiplicand c, static bit bound of m, m/c are fresh temps, variant): the
    operand with the smaller static bound multiplies; without bounds the smaller value (min.u),
    except for ``straight`` (branch-free: nothing to gain from a smaller multiplier). ``low``: only
    the low word is wanted, so the pair (-a, -b) may be multiplied instead (``Options.negmin``)."""
    ba, bb = max(s.fr.bits(a), 1), max(s.fr.bits(b), 1)
    v = s.fr.opts.mul
    if v == "auto":
        v = "unrolled"
    if min(ba, bb) <= 8 and v in ("loop", "bitloop"):
        v = "unrolled"  # a short static multiplier: the unrolled digits are as small as a loop
    if min(ba, bb) < 32:
        return (a, b, ba, False, v) if ba <= bb else (b, a, bb, False, v)
    if v == "straight":
        return b, a, 32, False, v
    neg = False  # (-a)*(-b) has a*b's low word only
    if low:  # by default when one operand is a negation (q * -d in a division)
        neg = s.fr.opts.negmin
        if neg is None:
            neg = (a.n in s.fr.negated) != (b.n in s.fr.negated)
    m1, c1 = s.op("min", a, b, sign="u"), s.op("max", a, b, sign="u")
    if not neg:
        return m1, c1, 32, True, v
    # a*b = (-a)*(-b): the shorter multiplier of the two pairs
    na, nb = s.op("sub", Imm(0), a), s.op("sub", Imm(0), b)
    m2, c2 = s.op("min", na, nb, sign="u"), s.op("max", na, nb, sign="u")
    p = s.setp("lt", m2, m1, "u")
    return s.op("min", m1, m2, sign="u"), s.op("sel", c2, c1, p), 32, True, v


def _bit_at_sign(s: Seq, m: R, i: int) -> P:
    """A predicate = bit i of m."""
    t = m if i == 31 else s.op("shl", m, Imm(31 - i))
    return s.setp("lt", t, Imm(0), "s")


def _digits(nbits: int) -> list[tuple[int, int]]:
    """Radix-16 digits (top bit, bottom bit) of an nbits multiplier, most significant first."""
    out = []
    lo = (max(nbits, 1) - 1) // 4 * 4
    while lo >= 0:
        out.append((min(nbits - 1, lo + 3), lo))
        lo -= 4
    return out


def _multiples(s: Seq, c: R, n: int) -> list[R | Imm]:
    return [c] + [s.op("shl", c, Imm(j)) for j in range(1, n)]


def _mul_unrolled(s: Seq, d: R, m: R, c: R, nb: int, entries: tuple[int, ...]) -> None:
    """Horner over the radix-16 digits of m (nb bits), entered past the leading zero digits."""
    ents = sorted(t for t in entries if t < nb and t % 4 == 0)
    cs = _multiples(s, c, min(4, nb))
    acc = s.fr.r()
    labels = {t: s.label() for t in ents}
    if ents:
        s.into(acc, "mov", Imm(0))  # entered lanes read acc: it must be a real 0
        for t in ents:
            s.bra(labels[t], s.setp("lt", m, Imm(1 << t), "u"))
    written = bool(ents)  # acc holds a value (not only "0 so far")
    zero = True  # acc is 0 on every path that reaches this point
    for hi, lo in _digits(nb):
        if lo + 4 in labels:
            s.place(labels[lo + 4])
        if not zero:
            s.into(acc, "shl", acc, Imm(hi - lo + 1))
        for i in range(hi, lo - 1, -1):
            p = _bit_at_sign(s, m, i)
            if not written:
                s.into(acc, "sel", cs[i - lo], Imm(0), p)
            else:
                s.into(acc, "add", acc, cs[i - lo], guard=p)
            written, zero = True, False
    s.into(d, "mov", acc)


def _mul_loop(s: Seq, d: R, m: R, c: R) -> None:
    """The radix-16 digit step in a loop over the digits of m (stripped of its trailing zeros
    and aligned so that the loop ends exactly when the rest of the multiplier is zero)."""
    cs = _multiples(s, c, 4)
    tz = s.op("clz", s.op("brev", m))
    m1 = s.op("shr", m, tz)  # odd (or 0)
    t = s.op("shl", m1, s.op("and", s.op("clz", m1), Imm(0x1C)))
    acc = s.op("mov", Imm(0))
    top = s.label()
    s.place(top)
    s.into(acc, "shl", acc, Imm(4))
    for j in range(4):
        p = s.setp("lt", t if j == 0 else s.op("shl", t, Imm(j)), Imm(0), "s")
        s.into(acc, "add", acc, cs[3 - j], guard=p)
    s.into(t, "shl", t, Imm(4))
    s.bra(top, s.setp("ne", t, Imm(0)))
    s.into(d, "shl", acc, tz)


def _mul_bitloop(s: Seq, d: R, m: R, c: R, fresh: bool) -> None:
    """One bit per iteration, LSB first, until the rest of the multiplier is zero."""
    if not fresh:
        m, c = s.op("mov", m), s.op("mov", c)
    acc = s.op("mov", Imm(0))
    top = s.label()
    s.place(top)
    s.into(acc, "add", acc, c, guard=_bit_at_sign(s, m, 0))
    s.into(c, "shl", c, Imm(1))
    s.into(m, "shr", m, Imm(1))
    s.bra(top, s.setp("ne", m, Imm(0)))
    s.into(d, "mov", acc)


def mul_into(s: Seq, d: R, a: R | Imm, b: R | Imm) -> None:
    """d = low 32 bits of a * b (d written last)."""
    if isinstance(a, Imm) and isinstance(b, Imm):
        s.into(d, "mov", Imm(a.v * b.v))
        return
    if isinstance(a, Imm):
        a, b = b, a
    if isinstance(b, Imm) and (not s.fr.opts.native_mul or const_plan(b.v)[0] <= 1):
        _const_mul(s, d, a, b.v)
        return
    if s.fr.opts.native_mul:
        s.into(d, "mul", a, b)
        return
    m, c, nb, fresh, v = _operands(s, a, b, True)
    if v == "straight":
        _mul_unrolled(s, d, m, c, nb, ())
    elif v == "loop":
        _mul_loop(s, d, m, c)
    elif v == "bitloop":
        _mul_bitloop(s, d, m, c, fresh)
    else:
        _mul_unrolled(s, d, m, c, nb, s.fr.opts.entries)


@expander("mul")
def _x_mul(ins: MInstr, fr: Fresh) -> list[MInstr]:
    s = Seq(fr)
    mul_into(s, ins.d[0], *ins.s)
    return s.code


@expander("mad")
def _x_mad(ins: MInstr, fr: Fresh) -> list[MInstr]:
    s = Seq(fr)
    a, b, c = ins.s
    t = s.op("mul", a, b)  # expanded (or called as a shared routine) by the mul expander
    s.into(ins.d[0], "add", t, c)
    return s.code


# ---------------------------------------------------------------------------------------------
# integer division
# ---------------------------------------------------------------------------------------------
def udivmod_into(s: Seq, n: R | Imm, d: R | Imm, want_q: bool = True,
                 nonzero: bool = False) -> tuple[R, R]:
    """(n / d, n % d) unsigned, d != 0: the divisor aligned under the dividend's top bit, then one
    compare-and-subtract per quotient bit (7 instructions each, as many as the quotient has bits:
    a few for the small quotients of index arithmetic, at most 32). ``want_q=False`` skips the
    quotient (5 per bit). A lane with d == 0 (the lowering traps first) still ends: d is clamped
    to 1 unless ``nonzero`` says no lane reaching here has d == 0 (``codegen.nonzero``)."""
    if not (isinstance(d, Imm) and d.v) and not nonzero:
        d = s.op("max", d, Imm(1), sign="u")
    q = s.op("mov", Imm(0))
    r = s.op("mov", n)
    done = s.label()
    s.bra(done, s.setp("lt", r, d))
    cd = Imm(32 - d.v.bit_length()) if isinstance(d, Imm) else s.op("clz", d)
    dd = s.op("shl", d, s.op("sub", cd, s.op("clz", r)))
    top = s.label()
    s.place(top)
    if want_q:
        s.into(q, "add", q, q)
    p = s.setp("ge", r, dd)
    s.into(r, "sub", r, dd, guard=p)
    if want_q:
        s.into(q, "or", q, Imm(1), guard=p)
    s.into(dd, "shr", dd, Imm(1))
    s.bra(top, s.setp("ge", dd, d))
    s.place(done)
    return q, r


def _pow2_divisor(b: R | Imm, fr: Fresh, signed: bool) -> int | None:
    """log2 of a divisor known to be a power of two for this launch (an immediate, or a register
    loaded from a scalar parameter word: ``Fresh.params``), else None; a signed divisor only
    below 2^31 (0x80000000 is negative)."""
    v = b.v & M32 if isinstance(b, Imm) else fr.params.get(b.n) if isinstance(b, R) else None
    if not v or v & (v - 1) or (signed and v >> 31):
        return None
    return v.bit_length() - 1


def _pow2_divmod(s: Seq, n: R | Imm, d: R | Imm, k: int, quotient: bool) -> R | Imm:
    """``n / d`` or ``n % d`` unsigned for ``d == 2^k``: one shift or one AND. An immediate
    divisor gives the shift or the mask as an immediate (a constant of the program, like a
    multiply by a constant's shifts); a divisor from the launch's parameters has the model compute
    them from the parameter's word (``d - 1``; ``31 - clz d``): the host never folds a launch
    value into a result (``Options.param_words``)."""
    if quotient:
        sh = Imm(k) if isinstance(d, Imm) else s.op("sub", Imm(31), s.op("clz", d))
        return s.op("shr", n, sh)
    mask = Imm((1 << k) - 1) if isinstance(d, Imm) else s.op("sub", d, Imm(1))
    return s.op("and", n, mask)


@expander("idiv", "irem")
def _x_idiv(ins: MInstr, fr: Fresh) -> list[MInstr]:
    """C division on 32-bit words: unsigned by :func:`udivmod_into`; signed on the magnitudes,
    the quotient negated when the signs differ and the remainder given the dividend's sign
    (INT_MIN / -1 = INT_MIN, as the interpreter's wrap)."""
    s = Seq(fr)
    a, b = ins.s
    quotient = ins.op == "idiv"
    nonzero = bool(ins.m.get("nz"))  # codegen.nonzero: every lane reaching here has b != 0
    if ins.mod("sign") != "s":
        k = _pow2_divisor(b, s.fr, signed=False)
        if k is not None:
            s.into(ins.d[0], "mov", _pow2_divmod(s, a, b, k, quotient))
            return s.code
        q, r = udivmod_into(s, a, b, quotient, nonzero)
        s.into(ins.d[0], "mov", q if quotient else r)
        return s.code

    def mag(x: R | Imm, nonneg: bool) -> tuple[R | Imm, R | Imm]:
        """(|x|, its sign mask): x itself and 0 when every lane reaching here has x >= 0
        (``codegen.nonzero``'s ``nna``/``nnb``, or a static bound below 2^31)."""
        if isinstance(x, Imm):
            v = _s32(x.v)
            return Imm(abs(v)), Imm(M32 if v < 0 else 0)
        if nonneg or s.fr.bits(x) < 32:
            return x, Imm(0)
        sx = s.op("shr", x, Imm(31), sign="s")
        return s.op("sub", s.op("xor", x, sx), sx), sx

    k = _pow2_divisor(b, s.fr, signed=True)
    (an, sn), (ad, sd) = mag(a, bool(ins.m.get("nna"))), mag(b, bool(ins.m.get("nnb")) or k is not None)
    if k is not None:
        v = _pow2_divmod(s, an, b, k, quotient)
    else:
        q, r = udivmod_into(s, an, ad, quotient, nonzero)
        v = q if quotient else r
    sg: R | Imm  # the result's sign mask: the dividend's for a remainder, both for a quotient
    if not quotient:
        sg = sn
    elif isinstance(sn, Imm) and isinstance(sd, Imm):
        sg = Imm(sn.v ^ sd.v)
    elif sn == Imm(0) or sd == Imm(0):
        sg = sd if sn == Imm(0) else sn
    else:
        sg = s.op("xor", sn, sd)
    if isinstance(sg, Imm) and sg.v == 0:
        s.into(ins.d[0], "mov", v)
    elif isinstance(sg, Imm):  # every lane's result negated (a negative constant operand)
        s.into(ins.d[0], "sub", Imm(0), v)
    else:
        s.into(ins.d[0], "sub", s.op("xor", v, sg), sg)
    return s.code


# ---------------------------------------------------------------------------------------------
# high word of the product
# ---------------------------------------------------------------------------------------------
def _hi_step(s: Seq, S: R, p: P, c0: R, ch: R) -> None:
    """S = floor((S + p*c) / 2) with c = 2*ch + c0, never leaving 32 bits (S < c throughout)."""
    s.into(S, "add", S, c0, guard=p)
    s.into(S, "shr", S, Imm(1))
    s.into(S, "add", S, ch, guard=p)


def _mulhi_unrolled(s: Seq, S: R, m: R, c: R, nb: int, entries: tuple[int, ...]) -> None:
    """S = high word of m * c (unsigned), LSB first, leaving early once m's bits are done."""
    c0, ch = s.op("and", c, Imm(1)), s.op("shr", c, Imm(1))
    exits = sorted(t for t in entries if t < nb)
    end = s.label()
    s.into(S, "sel", ch, Imm(0), _bit_at_sign(s, m, 0))
    for i in range(1, nb):
        if i in exits:
            q = s.setp("lt", m, Imm(1 << i), "u")
            s.into(S, "shr", S, Imm(32 - i), guard=q)
            s.bra(end, q)
        _hi_step(s, S, _bit_at_sign(s, m, i), c0, ch)
    if nb < 32:
        s.into(S, "shr", S, Imm(32 - nb))
    s.place(end)


def _mulhi_loop(s: Seq, S: R, m: R, c: R, fresh: bool) -> None:
    c0, ch = s.op("and", c, Imm(1)), s.op("shr", c, Imm(1))
    if not fresh:
        m = s.op("mov", m)
    s.into(S, "mov", Imm(0))
    k = s.op("mov", Imm(32))
    top = s.label()
    s.place(top)
    for j in range(4):
        _hi_step(s, S, _bit_at_sign(s, m, j), c0, ch)
    s.into(m, "shr", m, Imm(4))
    s.into(k, "sub", k, Imm(4))
    s.bra(top, s.setp("ne", m, Imm(0)))
    s.into(S, "shr", S, k)


def _mulhi_const(s: Seq, S: R, x: R, c: int) -> None:
    """S = high word of x * c (unsigned): only the set bits of the constant cost."""
    bits = [i for i in range(32) if c >> i & 1]
    if not bits:
        s.into(S, "mov", Imm(0))
        return
    c0, ch = (s.op("and", x, Imm(1)), s.op("shr", x, Imm(1))) if len(bits) > 1 else (x, x)
    nxt = [*bits[1:], 32]
    first = True
    for i, j in zip(bits, nxt, strict=True):
        if first:
            s.into(S, "shr", x, Imm(j - i))  # S = 0: (0 + x) >> 1, then the zero bits
            first = False
            continue
        s.into(S, "add", S, c0)
        s.into(S, "shr", S, Imm(1))
        s.into(S, "add", S, ch)
        if j - i > 1:
            s.into(S, "shr", S, Imm(j - i - 1))


def _mulhi_halves(s: Seq, S: R, a: R | Imm, b: R | Imm) -> None:
    """S = high word of a * b (unsigned) from four products of 16-bit halves on the multiplier
    (each below 2^32, so the low word the circuit gives is the whole product):
    hi = ah*bh + ((ah*bl + (al*bl >> 16) + al*bh) >> 16), the middle sum's carry out of 32 bits
    adding 2^16."""

    def halves(x: R | Imm) -> tuple[R | Imm, R | Imm]:
        if isinstance(x, Imm):
            return Imm(x.v >> 16 & 0xFFFF), Imm(x.v & 0xFFFF)
        return s.op("shr", x, Imm(16)), s.op("and", x, Imm(0xFFFF))

    def prod(x: R | Imm, y: R | Imm) -> R | Imm:
        if isinstance(x, Imm) and isinstance(y, Imm):
            return Imm(x.v * y.v)
        if isinstance(x, Imm):
            x, y = y, x
        if isinstance(y, Imm) and y.v == 0:
            return Imm(0)
        return s.op("mul", x, y)

    def op(name: str, x: R | Imm, y: R | Imm) -> R | Imm:
        if isinstance(x, Imm) and isinstance(y, Imm):
            v = {"add": x.v + y.v, "shr": x.v >> y.v, "and": x.v & y.v}[name]
            return Imm(v & M32)
        if name == "add" and isinstance(x, Imm) and x.v == 0:
            return y
        if name == "add" and isinstance(y, Imm) and y.v == 0:
            return x
        return s.op(name, x, y)

    ba, bb = s.fr.bits(a), s.fr.bits(b)
    if ba + bb <= 32:  # the whole product fits the low word (static bounds: tid, ntid, bytes)
        s.into(S, "mov", Imm(0))
        return
    if min(ba, bb) <= 16:  # a < 2^16: hi = (a*bh + (a*bl >> 16)) >> 16
        x, y = (a, b) if ba <= bb else (b, a)
        yh, yl = halves(y)
        t = op("add", prod(x, yh), op("shr", prod(x, yl), Imm(16)))
        s.into(S, "shr", t, Imm(16))
        return
    (ah, al), (bh, bl) = halves(a), halves(b)
    hl, lh = prod(ah, bl), prod(al, bh)
    # the middle column hl + lh + (al*bl >> 16) in a word and a carry: hl + (al*bl >> 16) fits
    # (hl <= (2^16 - 1)^2), adding lh may wrap once, which the compare sees (9.28: four rows fewer
    # than masking both products' low halves)
    m1 = op("add", hl, op("shr", prod(al, bl), Imm(16)))
    m2 = op("add", m1, lh)
    s.into(S, "add", prod(ah, bh), op("shr", m2, Imm(16)))
    if isinstance(m2, R) and not (isinstance(lh, Imm) and lh.v == 0):  # lh = 0: nothing wraps
        s.into(S, "add", S, Imm(0x10000), guard=s.setp("lt", m2, lh))


def mulhi_into(s: Seq, d: R, a: R | Imm, b: R | Imm, sign: str) -> None:
    """d = high 32 bits of the 64-bit product (s or u)."""
    if isinstance(a, Imm) and isinstance(b, Imm):
        x, y = a.v, b.v
        if sign == "s":
            x, y = _s32(x), _s32(y)
        s.into(d, "mov", Imm((x * y) >> 32))
        return
    S = s.fr.r()
    k = a if isinstance(a, Imm) else b if isinstance(b, Imm) else None
    if s.fr.opts.native_mul and (k is None or bin(k.v & M32).count("1") > 2):
        _mulhi_halves(s, S, a, b)
    elif isinstance(a, Imm) or isinstance(b, Imm):
        x, k = (b, a) if isinstance(a, Imm) else (a, b)
        _mulhi_const(s, S, x, k.v)  # type: ignore[arg-type, union-attr]
    else:
        m, c, nb, fresh, v = _operands(s, a, b, False)
        if v in ("loop", "bitloop"):
            _mulhi_loop(s, S, m, c, fresh)
        else:
            _mulhi_unrolled(s, S, m, c, nb, () if v == "straight" else s.fr.opts.entries)
    if sign == "s":  # hi_s = hi_u - (a < 0 ? b : 0) - (b < 0 ? a : 0)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Imm):
                if x.v >> 31:
                    s.into(S, "sub", S, y)
            elif not (isinstance(y, Imm) and y.v == 0):
                s.into(S, "sub", S, y, guard=s.setp("lt", x, Imm(0), "s"))
    s.into(d, "mov", S)


def _s32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


@expander("mulhi")
def _x_mulhi(ins: MInstr, fr: Fresh) -> list[MInstr]:
    s = Seq(fr)
    mulhi_into(s, ins.d[0], *ins.s, ins.mod("sign"))
    return s.code


# ---------------------------------------------------------------------------------------------
# window multiply (POISON semantics)
# ---------------------------------------------------------------------------------------------
def _wval(v: int, sign: str) -> int | None:
    """A window operand's value (None = POISON)."""
    if sign == "s":
        return None if v == POISON else _s32(v)
    return v


def _cdiv(a: int, b: int) -> int:
    return -((-a) // b)


@expander("mulw")
def _x_mulw(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    s = Seq(fr)
    d = ins.d[0]
    a, b = ins.s
    sa, sb = ins.mod("sa"), ins.mod("sb")
    if isinstance(a, Imm) and isinstance(b, Imm):
        x, y = _wval(a.v, sa), _wval(b.v, sb)
        r = None if x is None or y is None or abs(x * y) > WMAX else (x * y) & M32
        s.into(d, "mov", Imm(POISON if r is None else r))
        return s.code
    if isinstance(a, Imm):
        a, b, sa, sb = b, a, sb, sa
    if isinstance(b, Imm):
        y = _wval(b.v, sb)
        if y is None:
            s.into(d, "mov", Imm(POISON))
            return s.code
        dom = (-WMAX, WMAX) if sa == "s" else (0, M32)
        if y == 0:
            lo, hi = dom
        elif y > 0:
            lo, hi = max(dom[0], _cdiv(-WMAX, y)), min(dom[1], WMAX // y)
        else:
            lo, hi = max(dom[0], _cdiv(WMAX, y)), min(dom[1], (-WMAX) // y)
        if lo > hi:
            s.into(d, "mov", Imm(POISON))
            return s.code
        t = fr.r()
        _const_mul(s, t, a, b.v)
        if sa == "s":
            p = s.setp("ge", a, Imm(lo), "s")
            p = s.setp("le", a, Imm(hi), "s", "and", p)
        else:
            p = s.setp("le", a, Imm(hi), "u") if hi < M32 else TRUE
        s.into(d, "sel", t, Imm(POISON), p)
        return s.code
    # two registers: the exact 64-bit product from its low and (corrected) high words
    lo = s.op("mul", a, b)
    hi = s.op("mulhi", a, b, sign="u")
    if sa == "s":
        s.into(hi, "sub", hi, b, guard=s.setp("lt", a, Imm(0), "s"))
    if sb == "s":
        s.into(hi, "sub", hi, a, guard=s.setp("lt", b, Imm(0), "s"))
    p = s.setp("eq", hi, s.op("shr", lo, Imm(31), sign="s"))
    p = s.setp("ne", lo, Imm(POISON), "u", "and", p)
    for x, sg in ((a, sa), (b, sb)):
        if sg == "s":
            p = s.setp("ne", x, Imm(POISON), "u", "and", p)
    s.into(d, "sel", lo, Imm(POISON), p)
    return s.code


# ---------------------------------------------------------------------------------------------
# predicate logic
# ---------------------------------------------------------------------------------------------
def _const_pred(p: P) -> bool | None:
    if p.n == PT:
        return not p.neg
    return None


@expander("plop")
def _x_plop(ins: MInstr, fr: Fresh) -> list[MInstr]:
    s = Seq(fr)
    d = ins.d[0]
    a, b = ins.s
    bop = ins.mod("bop")
    ka, kb = _const_pred(a), _const_pred(b)
    if ka is not None and kb is None:
        a, b, ka, kb = b, a, kb, ka
    if kb is not None:  # b constant
        if ka is not None:
            v = {"and": ka and kb, "or": ka or kb, "xor": ka != kb}[bop]
            s.setp_into(d, "eq" if v else "ne", Imm(0), Imm(0))
        elif bop == "and":
            s.pcopy(d, a) if kb else s.setp_into(d, "ne", Imm(0), Imm(0))
        elif bop == "or":
            s.setp_into(d, "eq", Imm(0), Imm(0)) if kb else s.pcopy(d, a)
        else:
            s.pcopy(d, a.inv() if kb else a)
        return s.code
    t = s.op("sel", Imm(1), Imm(0), a)
    s.setp_into(d, "ne", t, Imm(0), "u", bop, b)
    return s.code


# ---------------------------------------------------------------------------------------------
# sub-word global loads
# ---------------------------------------------------------------------------------------------
@expander("ld")
def _x_ld(ins: MInstr, fr: Fresh) -> list[MInstr] | None:
    size, space = ins.mod("size"), ins.mod("space")
    if size == 4 or space != "global":
        return None
    s = Seq(fr)
    d = ins.d[0]
    a = ins.s[0]
    m = dict(ins.m)
    m.update(size=4, chk=size, sign="u")
    w = s.op("ld", a, **m)
    k = (ins.mod("base") + ins.mod("off")) & 3
    bits = 8 * size
    if isinstance(a, Imm):
        sh: R | Imm = Imm(8 * ((a.v + k) & 3))
    else:
        t = s.op("add", a, Imm(k)) if k else a
        sh = s.op("and", s.op("shl", t, Imm(3)), Imm(24))
    if ins.mod("sign") == "s":
        left = Imm(32 - bits - sh.v) if isinstance(sh, Imm) else s.op("sub", Imm(32 - bits), sh)
        s.into(d, "shr", s.op("shl", w, left), Imm(32 - bits), sign="s")
    else:
        s.into(d, "and", s.op("shr", w, sh), Imm((1 << bits) - 1))
    return s.code


# ---------------------------------------------------------------------------------------------
# running expanded programs (sim.simulate / run_machine_sim with the expansion in between)
# ---------------------------------------------------------------------------------------------
def simulate_for_weights(
    module: object,
    spec: object,
    *,
    max_steps: int | None = None,
    allocate: bool = True,
    trace: Callable[[str], None] | None = None,
    transform: Callable[[Program], Program] | None = None,
    **expand: object,
) -> tuple[dict, object, Program]:
    """Lower, expand for the weights, allocate and run on the ISA simulator: (outputs, stats,
    program). ``expand`` goes to ``expand_for_weights``; ``transform`` (tests) edits the lowered
    program before the expansion."""
    from qwengpu.codegen.lower import lower_kernel
    from qwengpu.codegen.regalloc import allocate as regalloc
    from qwengpu.isa.sim import (
        DEFAULT_MAX_STEPS,
        MachineSim,
        check_launch_limits,
        check_memory_limits,
        check_program_limits,
    )
    from qwengpu.ptx.inline import inline_calls
    from qwengpu.ptx.readonly import read_only_args
    from qwengpu.simt.interp import _find_kernel
    from qwengpu.spec import bind, read_outputs

    fn = _find_kernel(module, spec.kernel)  # type: ignore[arg-type, attr-defined]
    prog = lower_kernel(module, fn.name, [a.is_ptr for a in spec.args])  # type: ignore[arg-type, attr-defined]
    check_memory_limits(prog)
    if transform is not None:
        prog = transform(prog)
    prog = expand_for_weights(prog, **expand)  # type: ignore[arg-type]
    if allocate:
        prog = regalloc(prog)
    check_program_limits(prog)
    bound = bind(spec, inline_calls(module, fn))  # type: ignore[arg-type]
    check_launch_limits(prog, spec.grid, spec.block, bound.gmem, spec.shared_bytes,  # type: ignore[attr-defined]
                        read_only_args(spec, inline_calls(module, fn)))  # type: ignore[arg-type]
    sim = MachineSim(prog, max_steps=max_steps or DEFAULT_MAX_STEPS, trace=trace)
    st = sim.launch(
        spec.grid,  # type: ignore[attr-defined]
        spec.block,  # type: ignore[attr-defined]
        bound.param_bytes,
        bound.gmem,
        dynamic_shared=spec.shared_bytes,  # type: ignore[attr-defined]
    )
    return read_outputs(spec, bound.gmem), st, prog  # type: ignore[arg-type]


def run_for_weights(cu_path: str | Path, spec_path: str | Path | None = None, **expand: object):
    """``sim.run_machine_sim`` with ``expand_for_weights`` between lowering and allocation."""
    from qwengpu.cuda import COMPILE_OPTIONS, compile_file
    from qwengpu.isa.sim import MachineResult
    from qwengpu.ptx.parser import parse_ptx
    from qwengpu.spec import compare, default_spec_path, load_spec

    cu = Path(cu_path)
    spec = load_spec(spec_path if spec_path is not None else default_spec_path(cu))
    module = parse_ptx(compile_file(cu, options=COMPILE_OPTIONS), source_name=f"{cu.name} (PTX)")
    t0 = time.perf_counter()
    outputs, st, prog = simulate_for_weights(module, spec, **expand)
    sd = st.as_dict()  # type: ignore[attr-defined]
    sd["seconds"] = round(time.perf_counter() - t0, 6)
    return MachineResult(spec.kernel, outputs, sd, compare(spec, outputs), prog, spec)


__all__ = [
    "WEIGHT_OPS",
    "EXPANDERS",
    "INTEGER_EXPANDED",
    "Options",
    "Fresh",
    "Seq",
    "expander",
    "expand_for_weights",
    "unsupported_ops",
    "in_weights",
    "weight_name",
    "value_bounds",
    "const_plan",
    "mul_into",
    "mulhi_into",
    "Routine",
    "call",
    "routable",
    "route_floats",
    "register_floats",
    "FLOAT_OPS",
    "ROUTERS",
    "simulate_for_weights",
    "run_for_weights",
    "FALSE",
    "TRUE",
]


# shared routines: the multiplies (what mad, mulw and lower.py's division sequences reduce to)
routable("mul", "mulhi", "idiv", "irem")

#: the float ops ``route_floats`` makes routable (``softfloat.py``/``softfloat64.py`` add theirs)
FLOAT_OPS: list[str] = []


def register_floats(table: Mapping[str, Callable[..., list[MInstr]]]) -> None:
    """Join a float module's expanders to the registry and route them (its import does this: the
    float modules depend on this one, never the other way)."""
    EXPANDERS.update(table)  # type: ignore[arg-type]
    FLOAT_OPS.extend(op for op in table if op not in FLOAT_OPS)
    route_floats()


def route_floats() -> None:
    """Let every float op of ``softfloat.py`` and ``softfloat64.py`` become a call of a shared
    routine (one body per op, modifiers and operand shape), decided like the multiplies by
    ``Options.routines``."""
    routable(*FLOAT_OPS)
