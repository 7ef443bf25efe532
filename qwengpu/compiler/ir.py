"""Circuit description: named bit signals, integer forms over them, and the three node kinds.

This is stage 1 of the compiler (read the stages in order: ``ir`` -> ``ops`` -> ``evaluator`` ->
``schedule`` -> ``residual`` -> ``mlp`` -> ``build`` -> ``checkpoint``).

A circuit is a graph of *nodes*. Every node output is a :class:`Signal`: one bit that will live in
one residual dimension (as -1/+1) while it is needed. There are three node kinds:

* :class:`InputNode`   - bits set by the token embedding;
* :class:`MlpNode`     - bits computed by one SwiGLU MLP; each output bit is a :class:`Formula`,
  an integer expression ``lin + sum(coef * [L >= theta] * U) + sum(coef * L * U)`` over the
  input bits, whose value must be 0 or 1 (see :mod:`qwengpu.compiler.mlp` for why every such term
  is exact in the stock float32 MLP);
* :class:`MemoryNode`  - a DeltaNet memory bank: one write port and any number of read ports.

Users never build nodes by hand: they write formulas with :class:`Word` / :class:`Bit` values
and Python operators (``a + b``, ``a < b``, ``c.mux(p, a, b)``); :mod:`qwengpu.compiler.ops`
turns each operator into formulas (its ``Circuit`` is this module's :class:`CircuitGraph` plus
those operations, so this module imports nothing downstream). All state lives in the circuit
object, so two circuits can be built side by side in one process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from math import gcd


class CircuitError(ValueError):
    """A malformed circuit: width mismatch, a cycle, a second write port, a duplicate name."""


# ---------------------------------------------------------------------------------------------
# Signals and integer affine forms over them
# ---------------------------------------------------------------------------------------------


class Signal:
    """One materialized bit: the ``index``-th output of ``node``. Hashed by identity."""

    __slots__ = ("node", "index", "name")

    def __init__(self, node: Node, index: int, name: str):
        self.node = node
        self.index = index
        self.name = name

    def __repr__(self) -> str:
        return f"Signal({self.name})"


class Lin:
    """An integer affine form ``const + sum(w * s)`` over signals (bits are 0/1 here).

    Coefficients are kept in insertion order so that lowering is deterministic.
    """

    __slots__ = ("coeffs", "const")

    def __init__(self, coeffs: dict[Signal, int] | None = None, const: int = 0):
        self.coeffs: dict[Signal, int] = {s: int(w) for s, w in (coeffs or {}).items() if w != 0}
        self.const = int(const)

    @staticmethod
    def of(x: LinLike) -> Lin:
        if isinstance(x, Lin):
            return x
        if isinstance(x, Bit):
            return x.lin()
        if isinstance(x, int):
            return Lin({}, x)
        raise TypeError(f"cannot use {type(x).__name__} in an integer form")

    def __add__(self, other: LinLike) -> Lin:
        o = Lin.of(other)
        d = dict(self.coeffs)
        for s, w in o.coeffs.items():
            d[s] = d.get(s, 0) + w
        return Lin(d, self.const + o.const)

    __radd__ = __add__

    def __neg__(self) -> Lin:
        return Lin({s: -w for s, w in self.coeffs.items()}, -self.const)

    def __sub__(self, other: LinLike) -> Lin:
        return self + (-Lin.of(other))

    def __rsub__(self, other: LinLike) -> Lin:
        return Lin.of(other) - self

    def __mul__(self, k: int) -> Lin:
        if not isinstance(k, int):
            raise TypeError("forms scale by integers only")
        return Lin({s: w * k for s, w in self.coeffs.items()}, self.const * k)

    __rmul__ = __mul__

    @property
    def is_const(self) -> bool:
        return not self.coeffs

    def lo(self) -> int:
        """Smallest value over all 0/1 assignments (bits treated as independent)."""
        return self.const + sum(min(0, w) for w in self.coeffs.values())

    def hi(self) -> int:
        return self.const + sum(max(0, w) for w in self.coeffs.values())

    def grain(self) -> int:
        """gcd of the coefficients: the form only takes values ``const + k * grain``."""
        g = 0
        for w in self.coeffs.values():
            g = gcd(g, abs(w))
        return g or 1

    def key(self) -> tuple:
        return (tuple(sorted((id(s), w) for s, w in self.coeffs.items())), self.const)

    def __repr__(self) -> str:
        parts = [f"{w}*{s.name}" for s, w in self.coeffs.items()]
        return " + ".join(parts + [str(self.const)]) if parts else str(self.const)




@dataclass(frozen=True, eq=False)
class Step:
    """``coef * [L >= theta] * U``: a threshold neuron (pair) gating a linear form."""

    L: Lin
    theta: int
    U: Lin
    coef: int = 1


@dataclass(frozen=True, eq=False)
class Prod:
    """``coef * L * U``: an exact product of two integer forms (one neuron kept in SiLU's linear range)."""

    L: Lin
    U: Lin
    coef: int = 1


Term = Step | Prod


@dataclass(eq=False)
class Formula:
    """One output bit: ``lin + sum(terms)``; the value must be 0 or 1 for every input."""

    lin: Lin = field(default_factory=Lin)
    terms: list[Term] = field(default_factory=list)

    def signals(self) -> list[Signal]:
        out: dict[Signal, None] = {}
        forms: list[Lin] = [self.lin]
        for t in self.terms:
            forms += [t.L, t.U]
        for f in forms:
            for s in f.coeffs:
                out[s] = None
        return list(out)


# ---------------------------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------------------------


class Node:
    """A graph node; ``outputs`` are its signals, ``inputs()`` the signals it reads."""

    kind = "node"

    def __init__(self, circuit: CircuitGraph, name: str):
        self.circuit = circuit
        self.name = name
        self.outputs: list[Signal] = []

    def inputs(self) -> list[Signal]:
        return []

    def deps(self) -> list[Signal]:
        """What must be computed before this node (its inputs; a bank's ``after`` too)."""
        return [*self.inputs(), *getattr(self, "after", [])]

    def _new_outputs(self, names: Sequence[str]) -> list[Signal]:
        self.outputs = [Signal(self, i, n) for i, n in enumerate(names)]
        return self.outputs

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class InputNode(Node):
    """Bits of one named input word, set by the embedding of every token."""

    kind = "input"

    def __init__(self, circuit: CircuitGraph, name: str, width: int):
        super().__init__(circuit, name)
        self.width = width
        self._new_outputs([f"{name}[{i}]" if width > 1 else name for i in range(width)])


class MlpNode(Node):
    """Bits computed by one MLP: ``formulas[i]`` defines ``outputs[i]``."""

    kind = "mlp"

    def __init__(self, circuit: CircuitGraph, name: str, formulas: Sequence[Formula], names: Sequence[str]):
        super().__init__(circuit, name)
        self.formulas = list(formulas)
        self._new_outputs(names)

    def inputs(self) -> list[Signal]:
        seen: dict[Signal, None] = {}
        for f in self.formulas:
            for s in f.signals():
                seen[s] = None
        return list(seen)


@dataclass(eq=False)
class ReadPortSpec:
    addr: list[Signal]
    out: list[Signal]


class MemoryNode(Node):
    """A DeltaNet memory bank: ``rows`` keyed rows of ``width`` bits.

    Per token: if ``enable`` (or always, when ``enable`` is None) row ``write_addr`` := ``write_data``;
    then every read port returns its row (a never-written row reads as all zeros).
    """

    kind = "memory"

    def __init__(self, circuit: CircuitGraph, name: str, rows: int, width: int):
        super().__init__(circuit, name)
        self.rows = rows
        self.width = width
        self.addr_bits = max(1, (rows - 1).bit_length())
        self.write_addr: list[Signal] | None = None
        self.write_data: list[Signal] | None = None
        self.write_enable: Signal | None = None
        self.ports: list[ReadPortSpec] = []
        #: signals the bank is placed after without reading them (``Memory.place_after``)
        self.after: list[Signal] = []

    def inputs(self) -> list[Signal]:
        out: list[Signal] = []
        if self.write_addr is not None:
            out += self.write_addr + list(self.write_data or [])
            if self.write_enable is not None:
                out.append(self.write_enable)
        for p in self.ports:
            out += p.addr
        return out


# ---------------------------------------------------------------------------------------------
# User-facing values
# ---------------------------------------------------------------------------------------------


class Bit:
    """A one-bit value: a signal, its negation (free: folded into consumers), or a constant."""

    __slots__ = ("circuit", "sig", "neg", "const")

    def __init__(self, circuit: CircuitGraph | None, sig: Signal | None = None, neg: bool = False,
                 const: int | None = None):
        if sig is None and const not in (0, 1):
            raise CircuitError("a Bit is a signal or the constant 0/1")
        self.circuit = circuit
        self.sig = sig
        self.neg = neg
        self.const = const

    def lin(self) -> Lin:
        if self.sig is None:
            return Lin({}, int(self.const or 0))
        return Lin({self.sig: -1}, 1) if self.neg else Lin({self.sig: 1})

    @property
    def is_const(self) -> bool:
        return self.sig is None

    def _c(self, other: object = None) -> CircuitGraph:
        c = self.circuit or (other.circuit if isinstance(other, (Bit, Word)) else None)
        if c is None:
            raise CircuitError("an operation on constants only: fold it in Python")
        return c

    def __invert__(self) -> Bit:
        if self.sig is None:
            return Bit(self.circuit, const=1 - int(self.const or 0))
        return Bit(self.circuit, self.sig, not self.neg)

    def __and__(self, other: BitLike) -> Bit:
        return self._c(other).all_of([self, other])

    __rand__ = __and__

    def __or__(self, other: BitLike) -> Bit:
        return self._c(other).any_of([self, other])

    __ror__ = __or__

    def __xor__(self, other: BitLike) -> Bit:
        return self._c(other).parity([self, other])

    __rxor__ = __xor__

    def __eq__(self, other: object) -> Bit:  # type: ignore[override]
        return ~(self ^ other)  # type: ignore[operator]

    def __ne__(self, other: object) -> Bit:  # type: ignore[override]
        return self ^ other  # type: ignore[operator]

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("a circuit Bit has no truth value while building; use circuit.mux(...)")

    def __repr__(self) -> str:
        if self.sig is None:
            return f"Bit({self.const})"
        return f"Bit({'~' if self.neg else ''}{self.sig.name})"


BitLike = Bit | int | bool
LinLike = Lin | Bit | int


class Word:
    """A little-endian vector of bits (bit 0 = LSB). ``signed`` views change <, <=, >, >= and >>."""

    __slots__ = ("circuit", "bits", "signed")

    def __init__(self, circuit: CircuitGraph, bits: Sequence[Bit], signed: bool = False):
        self.circuit = circuit
        self.bits = tuple(bits)
        self.signed = signed

    # -- structure (free: no computation) --------------------------------------------------
    @property
    def width(self) -> int:
        return len(self.bits)

    def __len__(self) -> int:
        return len(self.bits)

    def __getitem__(self, i: int | slice) -> Bit | Word:
        if isinstance(i, slice):
            return Word(self.circuit, self.bits[i], False)
        return self.bits[i]

    def __iter__(self):
        return iter(self.bits)

    def as_signed(self) -> Word:
        return Word(self.circuit, self.bits, True)

    def as_unsigned(self) -> Word:
        return Word(self.circuit, self.bits, False)

    def zext(self, n: int) -> Word:
        return Word(self.circuit, self.bits[:n] + (Bit(self.circuit, const=0),) * (n - self.width))

    def sext(self, n: int) -> Word:
        return Word(self.circuit, self.bits[:n] + (self.bits[-1],) * (n - self.width), self.signed)

    def _other(self, other: WordLike) -> Word:
        if isinstance(other, Word):
            if other.width != self.width:
                raise CircuitError(f"width mismatch: {self.width} vs {other.width}")
            return other
        if isinstance(other, bool) or not isinstance(other, int):
            raise TypeError(f"cannot combine a Word with {type(other).__name__}")
        return self.circuit.const(other, self.width)

    # -- arithmetic and logic (see ops.py) ----------------------------------------------------
    def __add__(self, other: WordLike) -> Word:
        return self.circuit.add(self, self._other(other))

    __radd__ = __add__

    def __sub__(self, other: WordLike) -> Word:
        return self.circuit.sub(self, self._other(other))

    def __rsub__(self, other: WordLike) -> Word:
        return self.circuit.sub(self._other(other), self)

    def __neg__(self) -> Word:
        return self.circuit.sub(self.circuit.const(0, self.width), self)

    def __mul__(self, other: WordLike) -> Word:
        return self.circuit.mul(self, other if isinstance(other, int) else self._other(other))

    __rmul__ = __mul__

    def __and__(self, other: WordLike) -> Word:
        o = self._other(other)
        return self.circuit.bitwise("and", self, o)

    __rand__ = __and__

    def __or__(self, other: WordLike) -> Word:
        return self.circuit.bitwise("or", self, self._other(other))

    __ror__ = __or__

    def __xor__(self, other: WordLike) -> Word:
        return self.circuit.bitwise("xor", self, self._other(other))

    __rxor__ = __xor__

    def __invert__(self) -> Word:
        return Word(self.circuit, [~b for b in self.bits], self.signed)

    def __lshift__(self, k: int | Word) -> Word:
        return self.circuit.shift(self, k, "shl")

    def __rshift__(self, k: int | Word) -> Word:
        return self.circuit.shift(self, k, "sar" if self.signed else "shr")

    def rotl(self, k: int | Word) -> Word:
        return self.circuit.shift(self, k, "rotl")

    def rotr(self, k: int | Word) -> Word:
        return self.circuit.shift(self, k, "rotr")

    def __eq__(self, other: object) -> Bit:  # type: ignore[override]
        return self.circuit.equal(self, self._other(other))  # type: ignore[arg-type]

    def __ne__(self, other: object) -> Bit:  # type: ignore[override]
        return ~self.circuit.equal(self, self._other(other))  # type: ignore[arg-type]

    __hash__ = object.__hash__

    def __lt__(self, other: WordLike) -> Bit:
        return self.circuit.less(self, self._other(other), self.signed)

    def __gt__(self, other: WordLike) -> Bit:
        return self.circuit.less(self._other(other), self, self.signed)

    def __le__(self, other: WordLike) -> Bit:
        return ~self.circuit.less(self._other(other), self, self.signed)

    def __ge__(self, other: WordLike) -> Bit:
        return ~self.circuit.less(self, self._other(other), self.signed)

    def decode(self) -> Word:
        """One-hot decode: bit j of the result is ``self == j``."""
        return self.circuit.decode(self)

    def __bool__(self) -> bool:
        raise TypeError("a circuit Word has no truth value while building; use circuit.mux(...)")

    def __repr__(self) -> str:
        return f"Word({self.width}{', signed' if self.signed else ''})"


WordLike = Word | int


# ---------------------------------------------------------------------------------------------
# The circuit
# ---------------------------------------------------------------------------------------------


class Memory:
    """Handle for a memory bank: ``write`` once, ``read`` any number of times (one port each)."""

    def __init__(self, node: MemoryNode):
        self.node = node

    @property
    def rows(self) -> int:
        return self.node.rows

    @property
    def width(self) -> int:
        return self.node.width

    def _addr(self, addr: Word) -> list[Signal]:
        if not isinstance(addr, Word):
            raise TypeError("a memory address is a Word")
        if addr.width != self.node.addr_bits:
            raise CircuitError(f"memory {self.node.name}: address has {addr.width} bits, "
                               f"{self.node.rows} rows need {self.node.addr_bits}")
        return [self.node.circuit.materialize(b) for b in addr.bits]

    def write(self, addr: Word, data: Word, enable: BitLike | None = None) -> None:
        node = self.node
        if node.write_addr is not None:
            raise CircuitError(f"memory {node.name}: one write port per bank (a DeltaNet head writes one "
                               "row per token); use a second bank for a second writer")
        if data.width != node.width:
            raise CircuitError(f"memory {node.name}: data has {data.width} bits, rows have {node.width}")
        node.write_addr = self._addr(addr)
        node.write_data = [node.circuit.materialize(b) for b in data.bits]
        if enable is not None:
            en = node.circuit.bit(enable)
            if en.is_const:
                if not en.const:
                    node.write_addr, node.write_data = None, None
                    return
            else:
                node.write_enable = node.circuit.materialize(en)

    def place_after(self, *bits: BitLike) -> None:
        """Place the bank no earlier than the layer after ``bits`` (it does not read them). Why: a
        bank whose inputs are ready early is placed early, and its outputs then cross every layer
        up to their reader; one read late is placed beside it (its few inputs cross instead)."""
        c = self.node.circuit
        for b in bits:
            bit = c.bit(b)
            if not bit.is_const:
                self.node.after.append(c.materialize(bit))

    def read(self, addr: Word) -> Word:
        node = self.node
        k = len(node.ports)
        outs = [Signal(node, len(node.outputs) + i, f"{node.name}.r{k}[{i}]") for i in range(node.width)]
        node.outputs += outs
        node.ports.append(ReadPortSpec(self._addr(addr), outs))
        c = node.circuit
        return Word(c, [Bit(c, s) for s in outs])


class CircuitGraph:
    """A circuit's graph under construction: inputs, nodes, outputs, memories. Build circuits with
    :class:`qwengpu.compiler.Circuit` (this graph plus the operations of :mod:`ops`); every later
    stage reads only this graph.
    """

    def __init__(self, name: str = "circuit", chunk: int = 8):
        self.name = name
        self.chunk = chunk  # carry-lookahead chunk width for add / compare (see ops.add)
        self.nodes: list[Node] = []
        self.inputs: dict[str, InputNode] = {}
        self.outputs: dict[str, list[Signal]] = {}
        self.memories: dict[str, MemoryNode] = {}
        self._names: dict[str, int] = {}

    # -- naming -----------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        return f"{base}#{n}"

    # -- declarations -------------------------------------------------------------------------
    def input(self, name: str, width: int = 1, signed: bool = False) -> Word:
        if name in self.inputs or name in self.outputs:
            raise CircuitError(f"duplicate name {name!r}")
        if width < 1:
            raise CircuitError("an input has at least one bit")
        node = InputNode(self, name, width)
        self.inputs[name] = node
        self.nodes.append(node)
        return Word(self, [Bit(self, s) for s in node.outputs], signed)

    def bit_input(self, name: str) -> Bit:
        return self.input(name, 1).bits[0]

    def output(self, name: str, value: Word | BitLike) -> None:
        if name in self.outputs or name in self.inputs:
            raise CircuitError(f"duplicate name {name!r}")
        bits = value.bits if isinstance(value, Word) else (self.bit(value),)
        self.outputs[name] = [self.materialize(b) for b in bits]

    def const(self, value: int, width: int) -> Word:
        return Word(self, [Bit(self, const=(value >> i) & 1) for i in range(width)])

    def bit(self, x: BitLike | Word) -> Bit:
        """A Bit from a Bit, a 1-bit Word, or the constants 0/1."""
        if isinstance(x, Bit):
            return x
        if isinstance(x, Word) and x.width == 1:
            return x.bits[0]
        if isinstance(x, (bool, int)) and int(x) in (0, 1):
            return Bit(self, const=int(x))
        raise TypeError(f"not a bit: {x!r}")

    def memory(self, name: str, rows: int, width: int) -> Memory:
        if name in self.memories:
            raise CircuitError(f"duplicate memory {name!r}")
        if rows < 1 or width < 1:
            raise CircuitError("a memory has at least one row and one bit per row")
        node = MemoryNode(self, name, rows, width)
        self.memories[name] = node
        self.nodes.append(node)
        return Memory(node)

    # -- the node constructor every op goes through ---------------------------------------------
    def formulas(self, op: str, formulas: Sequence[Formula], names: Sequence[str] | None = None) -> list[Bit]:
        """Add one MLP node computing ``formulas``; returns its bits (constant formulas fold away)."""
        out: list[Bit | None] = [None] * len(formulas)
        live: list[tuple[int, Formula]] = []
        for i, f in enumerate(formulas):
            if not f.terms and f.lin.is_const:
                if f.lin.const not in (0, 1):
                    raise CircuitError(f"{op}: constant formula with value {f.lin.const}")
                out[i] = Bit(self, const=f.lin.const)
            elif not f.terms and len(f.lin.coeffs) == 1:
                # a bare signal or its negation is a free view, not a node
                (s, w), = f.lin.coeffs.items()
                if (w, f.lin.const) == (1, 0):
                    out[i] = Bit(self, s)
                elif (w, f.lin.const) == (-1, 1):
                    out[i] = Bit(self, s, neg=True)
                else:
                    live.append((i, f))
            else:
                live.append((i, f))
        if live:
            nm = self.fresh(op)
            labels = [names[i] if names is not None else (f"{nm}[{i}]" if len(formulas) > 1 else nm)
                      for i, _ in live]
            node = MlpNode(self, nm, [f for _, f in live], labels)
            self.nodes.append(node)
            for (i, _), s in zip(live, node.outputs, strict=True):
                out[i] = Bit(self, s)
        return out  # type: ignore[return-value]

    def materialize(self, b: BitLike) -> Signal:
        """A signal holding ``b``. A negated MLP output is recomputed as ``1 - formula`` from the
        same inputs (same layer, shared neurons); other negations and constants get a copy neuron."""
        b = self.bit(b)
        if b.sig is not None and not b.neg:
            return b.sig
        if b.sig is not None and isinstance(b.sig.node, MlpNode):
            f = b.sig.node.formulas[b.sig.index]
            neg = Formula(1 - f.lin, [Step(t.L, t.theta, t.U, -t.coef) if isinstance(t, Step)
                                      else Prod(t.L, t.U, -t.coef) for t in f.terms])
            nm = self.fresh("not")
            node = MlpNode(self, nm, [neg], [f"~{b.sig.name}"])
        else:
            nm = self.fresh("copy")
            node = MlpNode(self, nm, [Formula(b.lin())], [nm])
        self.nodes.append(node)
        return node.outputs[0]

    # -- the operations Bit and Word operators call: declared here, implemented by ops.Circuit --------
    # (ir is the bottom stage and imports nothing downstream; ops binds its library to the graph)
    def all_of(self, bits: Iterable[BitLike]) -> Bit:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def any_of(self, bits: Iterable[BitLike]) -> Bit:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def parity(self, bits: Iterable[BitLike]) -> Bit:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def add(self, a: Word, b: Word, carry_in: BitLike = 0) -> Word:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def sub(self, a: Word, b: Word) -> Word:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def mul(self, a: Word, b: Word | int) -> Word:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def bitwise(self, op: str, a: Word, b: Word) -> Word:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def shift(self, a: Word, k: int | Word, kind: str) -> Word:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def equal(self, a: Word, b: Word) -> Bit:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def less(self, a: Word, b: Word, signed: bool = False) -> Bit:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def decode(self, a: Word) -> Word:
        raise NotImplementedError("build circuits with qwengpu.compiler.Circuit")

    def concat(self, *parts: Word | Bit) -> Word:
        bits: list[Bit] = []
        for p in parts:
            bits += list(p.bits) if isinstance(p, Word) else [p]
        return Word(self, bits)

    def topo_nodes(self) -> list[Node]:
        """Nodes in dependency order; a cycle (e.g. a write fed by a read of itself) is an error."""
        producer = {}
        for n in self.nodes:
            for s in n.outputs:
                producer[s] = n
        order: list[Node] = []
        state: dict[int, int] = {}
        for root in self.nodes:
            if state.get(id(root)) == 2:
                continue
            stack = [(root, iter(root.deps()))]
            state[id(root)] = 1
            while stack:
                node, it = stack[-1]
                advanced = False
                for s in it:
                    p = s.node
                    st = state.get(id(p), 0)
                    if st == 1:
                        raise CircuitError(f"cycle through {p.name} -> {node.name}: a memory write cannot "
                                           "depend on a read of the same memory in the same token")
                    if st == 0:
                        state[id(p)] = 1
                        stack.append((p, iter(p.deps())))
                        advanced = True
                        break
                if not advanced:
                    stack.pop()
                    state[id(node)] = 2
                    order.append(node)
        return order
