"""The token protocol of the machine in the weights: 16-bit tokens, what the host feeds and what
the model writes.

Why this shape: a token is the only path from the late layers of one step to the early layers of
the next (the autoregressive bottleneck), and the compiler's ``TokenIO`` packs a token into at most
16 bits. Every token is self-describing in its top bits, so the early layers know what to do with
it without counting (a counter would be a read-modify-write of one memory in one token).

    0 iiii ddddddddddd     DATA(i, d): an 11-bit chunk; i = 3*lane + j (lane's bits 11j..),
                           12..14 uniform chunk j-12 (all lanes), 15 predicate (4 values | 4 mask)
                           in ROM / MEM load mode: chunk i of the row being loaded;
                           in DUMP mode: chunk i of the dumped word
    10 pppppppppp mmmm     PASS(pc, mask): issue the instruction at pc for the lanes in mask
    11 ssss aaaaaaaaaa     control: ROMADDR, MEMADDR, DUMPADDR, DUMPLO, DUMPHI, STORE(lane), HALT

Host-fed prompt: ``ROMADDR(pc) DATA(0..10)`` per instruction, ``MEMADDR(w) DATA(0..2)`` per
non-zero word of global memory, ``DUMPLO(lo) DUMPHI(hi)``, then ``PASS(0, all threads)``.
Model-written: chunks, ``STORE(lane)``, the next ``PASS``, then ``DUMPADDR(w)`` + 3 chunks per
output word, then ``HALT``.
"""

from __future__ import annotations

from dataclasses import dataclass

CHUNK = 11  # data bits per DATA token
PC_BITS = 10
ADDR_BITS = 10
IDX_UNIFORM = 12
IDX_PRED = 15

# control sub-kinds (bits 10..13 of a 0b11 token)
ROMADDR, MEMADDR, DUMPADDR, DUMPLO, DUMPHI, STORE, HALT = range(7)
CTL_NAMES = ("ROMADDR", "MEMADDR", "DUMPADDR", "DUMPLO", "DUMPHI", "STORE", "HALT")

# modes held by the early control latch
MODE_EXEC, MODE_ROM, MODE_MEM, MODE_DUMP = range(4)


def data(idx: int, d: int) -> int:
    """DATA(idx, d)."""
    assert 0 <= idx < 16 and 0 <= d < (1 << CHUNK)
    return (idx << CHUNK) | d


def pass_(pc: int, mask: int) -> int:
    """PASS(pc, mask)."""
    assert 0 <= pc < (1 << PC_BITS) and 0 <= mask < 16
    return 0x8000 | (pc << 4) | mask


def ctl(kind: int, a: int = 0) -> int:
    """A control token ``kind`` with a 10-bit argument."""
    assert 0 <= kind < 16 and 0 <= a < (1 << ADDR_BITS)
    return 0xC000 | (kind << ADDR_BITS) | a


def chunks(value: int, n: int) -> list[int]:
    """``value`` as n little-endian 11-bit chunks."""
    return [(value >> (CHUNK * j)) & ((1 << CHUNK) - 1) for j in range(n)]


@dataclass(frozen=True)
class Token:
    """A decoded token (for traces and the host's readback)."""

    kind: str  # DATA, PASS, or a control name
    a: int = 0  # DATA index / PASS pc / control argument
    b: int = 0  # DATA data / PASS mask

    def __str__(self) -> str:
        if self.kind == "DATA":
            return f"D{self.a}:{self.b:x}"
        if self.kind == "PASS":
            return f"PASS(pc={self.a},m={self.b:04b})"
        return f"{self.kind}({self.a})"


def decode(t: int) -> Token:
    """The meaning of token id ``t``."""
    t = int(t)
    if t < 0x8000:
        return Token("DATA", t >> CHUNK, t & ((1 << CHUNK) - 1))
    if t < 0xC000:
        return Token("PASS", (t >> 4) & ((1 << PC_BITS) - 1), t & 15)
    k = (t >> ADDR_BITS) & 15
    return Token(CTL_NAMES[k] if k < len(CTL_NAMES) else f"CTL{k}", t & ((1 << ADDR_BITS) - 1))
