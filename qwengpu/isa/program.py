"""A machine program and the static memory layout it was lowered for: what the code generator hands
to the register allocator, the machine-ISA simulator and the launch encoder.

Why its own module: the program is the ISA's unit of work, so it lives beside the instructions
(``qwengpu.isa``) and every reader (``isa.sim``, ``runtime``) needs no part of the code generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qwengpu.isa.instr import MInstr
from qwengpu.ptx.ir import Instr


@dataclass
class Layout:
    """Static memory layout of a kernel (per-thread local, per-block shared, kernel parameters)."""

    local_off: dict[str, int]
    local_size: int
    shared_off: dict[str, int]
    shared_init: list[tuple[int, bytes]]
    static_shared: int
    dynamic_shared_syms: list[str]
    param_off: dict[str, int]
    param_size: int
    global_vars: list  # module .global/.const variables, allocated at launch after the spec's buffers


@dataclass
class Program:
    """A machine program: code, the PTX it came from, memory layout and launch-constant slots.

    ``bank_slots``: words appended to the kernel parameter bank at launch, each ``(kind, arg)``:
    ``("window", (param_offset, base))`` — a 64-bit pointer parameter as a window value;
    ``("global", name)`` — the window value of a module global variable's address.
    ``rodata``: constant tables a sequence reads (ex2's 2^(j/256)), placed by the code generator
    at the top of the machine's read-only words.
    ``ptx_ranges[i]``: the machine pcs ``[start, end)`` of PTX instruction i's sequence (empty
    when the instruction needs no machine instruction); with ``ptx_labels`` it lets the simulator
    count PTX-level warp instructions exactly as the interpreter does (its step limit).
    """

    name: str
    code: list[MInstr]
    ptx: list[Instr]
    layout: Layout
    bank_slots: list[tuple[str, object]]
    nregs: int
    npreds: int
    allocated: bool = False
    pinned: set[int] = field(default_factory=set)  # vregs read across lanes (shfl sources)
    kinds: dict[str, tuple] = field(default_factory=dict)
    ptx_ranges: list[tuple[int, int]] = field(default_factory=list)  # machine [start, end) per PTX instr
    ptx_labels: dict[str, int] = field(default_factory=dict)  # PTX label -> PTX instruction index
    spill_words: int = 0  # per-thread spill slots the allocator added
    uses_approx: list[str] = field(default_factory=list)
    #: read-only data the program's sequences read (constant tables): (first word address in the
    #: machine's global memory, the words). The weights hold it in read-only words (the prompt loads
    #: it as it loads the ROM); the simulator writes it at launch (``GlobalMemory.place_program_data``)
    rodata: tuple[tuple[int, tuple[int, ...]], ...] = ()

    def rodata_low(self, top: int) -> int:
        """The first word of the constant tables (``rodata``), or ``top`` (the word after the
        machine's read-only words) without any: a launch's read-only inputs must end below it."""
        return min((base for base, _ in self.rodata), default=top)

    def rodata_rows(self) -> list[tuple[int, list[int]]]:
        """The constant tables as the prompt loads them: (first word, its four words) per read-only
        row (the machine's read-only words hold four to a row); all-zero rows left out (a blank
        row reads 0)."""
        words: dict[int, int] = {}
        for base, ws in self.rodata:
            words.update((base + i, int(w)) for i, w in enumerate(ws))
        rows = [(r, [words.get(r + i, 0) for i in range(4)]) for r in sorted({w // 4 * 4 for w in words})]
        return [(r, ws) for r, ws in rows if any(ws)]

    def listing(self) -> str:
        """Human-readable assembly with the PTX each sequence came from."""
        out = []
        last = -2
        for pc, ins in enumerate(self.code):
            if ins.ptx != last and ins.ptx >= 0:
                out.append(f"        // {self.ptx[ins.ptx].text}")
                last = ins.ptx
            out.append(f"{pc:5d}:  {ins}")
        return "\n".join(out)


def local_words_used(prog: Program) -> int:
    """The words of per-thread local memory the program really addresses: its ``.local`` frame,
    or 0 when nothing loads or stores there (call parameters promoted to registers leave a
    frame but no access). Spill slots are not counted: they take as many words as the launch's
    memory holds (``codegen.softmem``)."""
    if not any(x.op in ("ld", "st", "atom") and x.mod("space") in ("local", "callparam") for x in prog.code):
        return 0
    return (prog.layout.local_size + 3) // 4
