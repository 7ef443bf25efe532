"""The token protocol of the machine in the weights: 16-bit tokens, what the host feeds and what
the model writes.

Why this shape: a token is the only path from the late layers of one step to the early layers of
the next (the autoregressive bottleneck), and the compiler's ``TokenIO`` packs a token into at most
16 bits. Every token is self-describing in its top bits, so the early layers know what to do with
it without counting (a counter would be a read-modify-write of one memory in one token).

    0 iiii ddddddddddd     DATA(i, d): an 11-bit chunk; i = 3*lane + j (the lane's bits 11j..),
                           12..14 uniform chunk j-12 (every lane of the group), 15 predicate
                           (4 values | 4 lane enables); in ROM / MEM load mode: chunk i of the row
                           being loaded; in DUMP mode: chunk i of the dumped word
    10 f gggg ppppppppp    PASS(g, pc, f): issue the instruction at pc (its low 9 bits; bits
                           9..11 are the bank latched by the last BANK token, 0 before any) for lane
                           group g (warp g>>3, threads 4g..4g+3 of the block); the token
                           executes. f=1: the active lanes are all the group's threads; f=0:
                           the group's sticky mask (the m of its last MASK token)
    11 ssss aaaaaaaaaa     control: ROMADDR, MEMADDR, DUMPADDR, DUMPLO, DUMPHI, STORE(lane), HALT,
                           NTHREADS(n), NBLOCKS(n), BLOCK(b), BAR(epoch), FAULT(lane),
                           MASK(m | g<<4 | r<<8 | x<<9): group g's sticky mask is now m (it
                           executes nothing; the PASS f=0 after it does; r, x: see below),
                           SHORT(lane << 8 | v): lane's result is v < 256, USHORT(v): every lane's
                           result is v < 1024 (one token instead of three chunks),
                           HIGH(lane, h) = NTHREADS(512 | lane << 7 | h): lane's result is
                           its chunk 0 (the DATA token just before) | h << 11, below 2^18 (two
                           tokens instead of three chunks),
                           BANK(b0 | r<<1 | b12<<2): the next PASS tokens name pcs 512b..512b+511,
                           b = b0 | b12<<1 (r: the pass after it starts a new round, as after
                           BLOCK/BAR); in the prompt, b12 gives ROMADDR rows 1024*b12 + a;
                           PAGE(p) = BANK(512 | p<<4), ENDPAGE(p) = BANK(512 | p<<4 | 1): the
                           1,024-word page of global memory that MEMADDR and DUMPADDR name, and
                           the page of the dump's last word (argument bit 9 tells them from BANK)

A block index (``ctaid``, up to 65,534) and the block count (up to 65,535) are 16 bits; a
control argument is 10. So BLOCK and NBLOCKS carry the index in two parts, told apart by argument
bit 9: ``BLOCK(b)`` with b < 512 sets the low 9 bits, ``BLOCKHI(h)`` = BLOCK(512 | h) the high 7
(likewise ``NBLOCKS(n)`` / ``NBLOCKSHI(h)`` = NBLOCKS(512 | h), fed by the host only when the
launch has more than 511 blocks). Every 512th block the model writes BLOCKHI(h) and then
BLOCK(0): two tokens where other block starts take one (the step after BLOCKHI sees the new high
part and no running lane, so it writes the low part; the early layers cannot count, so the high
part must come as a token). A blank latch reads 0: launches of up to 511 blocks never see BLOCKHI.

Why a bank and not a 12-bit pc in every PASS: the 16-bit token space is full (DATA takes half,
PASS with its group, f bit and 9-bit pc a quarter, control the rest). A program of up to 4,096
rows needs the bank only where the next pass leaves the current 512-row bank: the model writes
BANK there (one token, rare: routines sit low, most kernels in one bank). Its bit 0 is pc bit 9
and its bits 2..3 pc bits 10..11 (bit 1 is the restart flag r), so BANK tokens of programs of up
to 1,024 rows are those of the 10-bit machine. The host loads rows 1,024 and up of the ROM the
same way: ``BANK(b12 << 2)`` before their ``ROMADDR`` tokens (whose argument is 10 bits), and
``BANK(0)`` after the last, so the launch starts in bank 0.

Why pages: global memory has more words (16,384 on the 2B shape) than a 10-bit argument names.
Only the prompt's loads and the dump address memory by token (a pass takes its addresses from
registers), so a page latch serves both: the host writes ``PAGE(p)`` before loading words of page
p, then ``PAGE`` of the dump's first word and ``ENDPAGE`` of its last; the model, dumping, writes
``PAGE(p + 1)`` after word 1,023 of page p and then ``DUMPADDR(0)`` (as BLOCKHI before BLOCK(0)).
Blank latches read 0: a launch that keeps to page 0 has no page token.

Why a PASS does not carry its active mask: the 16-bit token space is full. A mask is sticky
instead (machine v2): the early layers keep a table of one mask per group (``mte``, written by MASK
tokens, read with the PASS token's own group bits) and the late layers a mirror of it (``mtl``,
written by the same tokens). When the scheduler's next pass runs a partial mask equal to the
group's entry, the model writes PASS f=0 alone; when it differs, MASK(g, m) first, then the PASS.
A divergent stretch of a kernel (the dot demo: lane 3 exits at the start) pays one MASK, not one
per pass. The MASK step must choose the same pass as the step that wrote it (the scheduler state
is unchanged, but the choice depends on the token): r says that step restarted the round (BLOCK,
BAR, a restarting BANK), x that it could not continue the instruction (a BANK step).

A pass whose result is dead (no instruction reads it again: ``codegen.liveness``; the ROM row's
``nowb`` bit) writes no result token: its PASS (or MASK) is followed directly by the next pass's,
as for an instruction without a result, and nothing is committed.

Why HIGH, and why in NTHREADS' argument: a lane result from 256 to 2^18 (a byte address of the
machine's 65,536 words, an index, a count) took three chunks, its chunk 2 always 0. The early
layers cannot count chunks, so a shorter form must name itself; DATA's 16 indices are taken, but
NTHREADS (host-fed once, n <= 64) leaves its argument bits 7..9 free. HIGH(lane, h) after
DATA(3 lane, chunk 0) carries bits 11..17 and commits the word, as a lane's chunk 2 does.

Host-fed prompt: ``ROMADDR(pc) DATA(0..k)`` per instruction (``rom_load``), ``[PAGE(w >> 10)]
MEMADDR(w & 1023) DATA(0..2)`` per non-zero word of global memory, ``NTHREADS(n) [NBLOCKSHI(b >> 9)]
NBLOCKS(b & 511) [PAGE(lo >> 10)] [ENDPAGE(hi >> 10)] DUMPLO(lo & 1023) DUMPHI(hi & 1023)`` and
``BLOCK(0)`` (``mem_load`` / ``dump_range``: page tokens only where the page changes).
Model-written: ``MASK`` (when a group's mask changes), ``PASS``, result chunks, ``STORE(lane)``,
``BAR`` (a barrier releases), ``BLOCK(b)`` (the next block starts; ``BLOCKHI`` before it every 512
blocks), then ``DUMPADDR(w)`` + 3 chunks per output word (``PAGE`` where the dump crosses into the
next page), ``HALT``; or ``FAULT(lane)`` + ``HALT`` when an active lane executes ``trap`` (the
host names the instruction, thread and block from the PASS and BLOCK tokens before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CHUNK = 11  # data bits per DATA token
PC_BITS = 12  # the machine's pc (4,096 ROM rows): a PASS token's 9 bits and the BANK latch's 3
PASS_PC_BITS = 9  # the pc bits a PASS token carries (bits 9..11: BANK)
ROMADDR_BITS = 10  # the ROM row bits a ROMADDR token carries (bits 10..11: BANK's b12)
GROUP_BITS = 4
ADDR_BITS = 10
BLOCK_LO_BITS = 9  # the low part of a block index / count in BLOCK / NBLOCKS; bit 9 marks the high part
BLOCK_HI_BITS = 7  # the high part (BLOCKHI / NBLOCKSHI): 16 bits in all
HI_FLAG = 1 << BLOCK_LO_BITS
PAGE_WORDS = 1 << ADDR_BITS  # global-memory words a MEMADDR / DUMPADDR argument names
PAGE_FLAG = 1 << 9  # BANK's argument bit 9: a page token (PAGE / ENDPAGE), not a ROM bank
PAGE_SHIFT = 4  # the page number's place in the argument (bits 4..8; bit 5 of it: argument bit 1)
PAGE_BITS = 6  # up to 64 pages (65,536 words)
#: the argument bit of each page bit (page bits 0..4 at argument bits 4..8, page bit 5 at bit 1)
PAGE_ARG_BITS = (4, 5, 6, 7, 8, 1)
IDX_UNIFORM = 12
IDX_PRED = 15
HIGH_FLAG = 1 << 9  # NTHREADS' argument bit 9: a HIGH token (a lane result's bits 11..17), not NTHREADS
HIGH_BITS = 7  # the value bits a HIGH token carries (bits 0..6; bits 7..8: the lane)
HIGH_LIMIT = 1 << (CHUNK + HIGH_BITS)  # a lane result below it is DATA(3 lane, chunk 0) + HIGH

# control sub-kinds (bits 10..13 of a 0b11 token)
(ROMADDR, MEMADDR, DUMPADDR, DUMPLO, DUMPHI, STORE, HALT) = range(7)
(NTHREADS, NBLOCKS, BLOCK, BAR, MASK, FAULT, SHORT, USHORT, BANK) = range(7, 16)
CTL_NAMES = (
    "ROMADDR",
    "MEMADDR",
    "DUMPADDR",
    "DUMPLO",
    "DUMPHI",
    "STORE",
    "HALT",
    "NTHREADS",
    "NBLOCKS",
    "BLOCK",
    "BAR",
    "MASK",
    "FAULT",
    "SHORT",
    "USHORT",
    "BANK",
)

# modes held by the early control latch
MODE_EXEC, MODE_ROM, MODE_MEM, MODE_DUMP = range(4)


def data(idx: int, d: int) -> int:
    """DATA(idx, d)."""
    assert 0 <= idx < 16 and 0 <= d < (1 << CHUNK)
    return (idx << CHUNK) | d


def pass_(pc: int, group: int = 0, full: bool = True) -> int:
    """PASS(group, pc, full) (pc: the low 9 bits of the machine's pc)."""
    assert 0 <= pc < (1 << PASS_PC_BITS) and 0 <= group < (1 << GROUP_BITS)
    return 0x8000 | (int(full) << 13) | (group << PASS_PC_BITS) | pc


def bank_arg(bank: int, restart: bool = False) -> int:
    """BANK's argument naming the 512-row bank ``bank`` (pc bits 9..11) and the restart flag."""
    assert 0 <= bank < 1 << (PC_BITS - PASS_PC_BITS)
    return (bank & 1) | (int(restart) << 1) | ((bank >> 1) << 2)


def bank_of(arg: int) -> int:
    """The 512-row bank a BANK argument names (pc bits 9..11)."""
    return (arg & 1) | (((arg >> 2) & 3) << 1)


def page_arg(page: int, end: bool = False) -> int:
    """The BANK argument of PAGE(page) (or ENDPAGE(page): the page of the dump's last word)."""
    assert 0 <= page < 1 << PAGE_BITS
    return PAGE_FLAG | sum(((page >> i) & 1) << b for i, b in enumerate(PAGE_ARG_BITS)) | int(end)


def mem_load(words: list[tuple[int, int]], nchunks: int,
             rows: Sequence[tuple[int, Sequence[int]]] = ()) -> list[int]:
    """The prompt tokens that load global memory: ``MEMADDR(w) DATA(0..nchunks-1)`` per (word,
    value), then ``MEMADDR(w) DATA(0..4*nchunks-1)`` per read-only row (its first word ``w``, a
    multiple of 4, and its four values: the machine's read-only words hold four to a row), a PAGE
    token before the first word of each page other than 0 (a blank latch reads 0). Returns with
    the page latch at the last word's page (``dump_range`` resets it)."""
    out: list[int] = []
    page = 0
    items = [(w, [v]) for w, v in words] + [(w, list(vs)) for w, vs in rows]
    for w, vs in items:
        if w >> ADDR_BITS != page:
            page = w >> ADDR_BITS
            out.append(ctl(BANK, page_arg(page)))
        out.append(ctl(MEMADDR, w & (PAGE_WORDS - 1)))
        out += [data(k, x) for k, x in enumerate(c for v in vs for c in chunks(v, nchunks))]
    return out


def dump_range(lo: int, last: int, page: int) -> list[int]:
    """The tokens naming the dump's words ``lo..last``: PAGE of ``lo`` (when the latch, now at
    ``page``, differs), ENDPAGE of ``last`` (when not 0), DUMPLO, DUMPHI."""
    out = []
    if lo >> ADDR_BITS != page:
        out.append(ctl(BANK, page_arg(lo >> ADDR_BITS)))
    if last >> ADDR_BITS:
        out.append(ctl(BANK, page_arg(last >> ADDR_BITS, end=True)))
    return out + [ctl(DUMPLO, lo & (PAGE_WORDS - 1)), ctl(DUMPHI, last & (PAGE_WORDS - 1))]


def rom_load(rows: list[int], nchunks: int) -> list[int]:
    """The prompt tokens that load ``rows`` into the ROM: ``ROMADDR(pc) DATA(0..nchunks-1)`` per
    row; rows from 1,024 on after ``BANK(b12 << 2)`` (ROMADDR carries 10 bits), and ``BANK(0)``
    after them, so the launch starts in bank 0."""
    out: list[int] = []
    hi = 0
    for pc, row in enumerate(rows):
        if pc >> ROMADDR_BITS != hi:
            hi = pc >> ROMADDR_BITS
            out.append(ctl(BANK, bank_arg(hi << 1)))
        out.append(ctl(ROMADDR, pc & ((1 << ROMADDR_BITS) - 1)))
        out += [data(k, v) for k, v in enumerate(chunks(row, nchunks))]
    if hi:
        out.append(ctl(BANK, 0))
    return out


def ctl(kind: int, a: int = 0) -> int:
    """A control token ``kind`` with a 10-bit argument."""
    assert 0 <= kind < 16 and 0 <= a < (1 << ADDR_BITS)
    return 0xC000 | (kind << ADDR_BITS) | a


def high(lane: int, h: int) -> int:
    """HIGH(lane, h): lane's result is the chunk 0 its DATA token just carried | h << 11."""
    assert 0 <= lane < 4 and 0 <= h < (1 << HIGH_BITS)
    return ctl(NTHREADS, HIGH_FLAG | lane << HIGH_BITS | h)


def block_tokens(kind: int, n: int) -> list[int]:
    """``kind`` (BLOCK or NBLOCKS) naming the 16-bit value n: the high part first when it is not 0
    (a blank latch reads 0), then the low part."""
    assert kind in (BLOCK, NBLOCKS) and 0 <= n < 1 << (BLOCK_LO_BITS + BLOCK_HI_BITS)
    hi, lo = n >> BLOCK_LO_BITS, n & (HI_FLAG - 1)
    return ([ctl(kind, HI_FLAG | hi)] if hi else []) + [ctl(kind, lo)]


def chunks(value: int, n: int) -> list[int]:
    """``value`` as n little-endian 11-bit chunks."""
    return [(value >> (CHUNK * j)) & ((1 << CHUNK) - 1) for j in range(n)]


@dataclass(frozen=True)
class Token:
    """A decoded token (for traces and the host's readback)."""

    kind: str  # DATA, PASS, or a control name
    a: int = 0  # DATA index / PASS pc / control argument
    b: int = 0  # DATA data / PASS group
    full: bool = False  # PASS only

    def __str__(self) -> str:
        if self.kind == "DATA":
            return f"D{self.a}:{self.b:x}"
        if self.kind == "PASS":
            return f"PASS(g={self.b},pc={self.a}{'' if self.full else ',?'})"
        if self.kind == "MASK":
            return f"MASK(g={(self.a >> 4) & 15},{self.a & 15:04b})"
        if self.kind == "HIGH":
            return f"HIGH(lane={self.a},{self.b:x})"
        return f"{self.kind}({self.a})"


def decode(t: int) -> Token:
    """The meaning of token id ``t``."""
    t = int(t)
    if t < 0x8000:
        return Token("DATA", t >> CHUNK, t & ((1 << CHUNK) - 1))
    if t < 0xC000:
        return Token("PASS", t & ((1 << PASS_PC_BITS) - 1), (t >> PASS_PC_BITS) & 15, bool(t >> 13 & 1))
    k = (t >> ADDR_BITS) & 15
    a = t & ((1 << ADDR_BITS) - 1)
    if k in (BLOCK, NBLOCKS) and a & HI_FLAG:  # the high part of a block index / count
        return Token(f"{CTL_NAMES[k]}HI", a & (HI_FLAG - 1))
    if k == NTHREADS and a & HIGH_FLAG:  # a lane result's bits 11..17 (a: the lane, b: the bits)
        return Token("HIGH", (a >> HIGH_BITS) & 3, a & ((1 << HIGH_BITS) - 1))
    if k == BANK and a & PAGE_FLAG:  # a page of global memory
        page = sum(((a >> b) & 1) << i for i, b in enumerate(PAGE_ARG_BITS))
        return Token("ENDPAGE" if a & 1 else "PAGE", page)
    return Token(CTL_NAMES[k] if k < len(CTL_NAMES) else f"CTL{k}", a)


class Reader:
    """Decodes a token stream in order: a PASS token's pc gets the bank of the last BANK token,
    a BLOCK / NBLOCKS token the high part of the last BLOCKHI / NBLOCKSHI, a MEMADDR / DUMPADDR
    token the page of the last PAGE (the host maps tokens to values this way, putting bits side by
    side; it computes nothing)."""

    def __init__(self) -> None:
        self.bank = 0
        self.page = 0
        self.hi = {"BLOCK": 0, "NBLOCKS": 0}

    def read(self, t: int) -> Token:
        tk = decode(t)
        if tk.kind == "BANK":
            self.bank = bank_of(tk.a)
        elif tk.kind == "PAGE":
            self.page = tk.a
        elif tk.kind in ("MEMADDR", "DUMPADDR") and self.page:
            return Token(tk.kind, tk.a | (self.page << ADDR_BITS))
        elif tk.kind == "PASS" and self.bank:
            return Token("PASS", tk.a | (self.bank << PASS_PC_BITS), tk.b, tk.full)
        elif tk.kind in ("BLOCKHI", "NBLOCKSHI"):
            self.hi[tk.kind[:-2]] = tk.a
        elif tk.kind in self.hi:
            return Token(tk.kind, tk.a | (self.hi[tk.kind] << BLOCK_LO_BITS))
        return tk


def read_all(tokens: list[int]) -> list[Token]:
    """``tokens`` decoded in order (PASS pcs with their bank)."""
    r = Reader()
    return [r.read(t) for t in tokens]
