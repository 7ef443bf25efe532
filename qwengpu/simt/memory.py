"""Memory spaces of a launch: global (one arena of buffers), shared (per block), local (per thread).

Addresses follow the hardware model: a global pointer is a 64-bit generic address; ``.shared``
and ``.local`` addresses are offsets in their own space, and ``cvta`` maps them into windows of
the generic space. Buffers start 16-byte aligned (what ``ld.v4``/``st.v4`` need) and are separated
by a guard gap of 16 to 31 bytes, so that an access up to 4 words past the end (or before the
start) of one buffer is caught instead of landing in its neighbour. Why so tight: the machine in
the weights holds the whole arena (16,384 words on the 2B shape); the 256-byte alignment and guard
of version 1 cost every buffer and module variable a 128-word slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GLOBAL_BASE = 0x7F_0000_0000  # where the global arena starts in the generic address space
SHARED_WINDOW = 0x10_0000_0000  # generic address of shared offset 0
LOCAL_WINDOW = 0x20_0000_0000  # generic address of local offset 0
WINDOW_SIZE = 0x1_0000_0000
ALIGN = 16  # bytes: every buffer starts at a multiple (vector accesses need 16)
GUARD = 16  # bytes at least between buffers (and before the first)
PROGRAM_DATA = "(program data)"  # the buffer name of a machine program's constant tables


@dataclass
class Buffer:
    """One named allocation in global memory."""

    name: str
    start: int  # generic address
    size: int  # bytes
    readonly: bool = False


class GlobalMemory:
    """All global allocations of a launch in one byte arena (aligned, with guard gaps)."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []
        self._chunks: list[tuple[int, bytes]] = []
        self._top = GUARD
        self.arena = np.zeros(0, dtype=np.uint8)
        self._starts = np.zeros(0, dtype=np.uint64)
        self._ends = np.zeros(0, dtype=np.uint64)
        self.has_readonly = False
        #: byte offset of the machine's read-only region (``alloc(high=True)`` buffers go there,
        #: everything else below it); None: no buffer is there
        self.ro_base: int | None = None
        self._high_top = 0

    def alloc(self, name: str, data: bytes, *, size: int | None = None, readonly: bool = False,
              high: bool = False) -> int:
        """Reserve a buffer holding ``data`` (zero-padded to ``size``); returns its address.
        ``high``: in the read-only region (``start_high``), read-only."""
        size = len(data) if size is None else size
        if high:
            assert self.ro_base is not None
            off = (self._high_top + ALIGN - 1) // ALIGN * ALIGN
            self._high_top = off + size + GUARD
            readonly = True
        else:
            off = (self._top + ALIGN - 1) // ALIGN * ALIGN
            self._top = off + size + GUARD
        self._chunks.append((off, bytes(data)))
        self.buffers.append(Buffer(name, GLOBAL_BASE + off, size, readonly))
        return GLOBAL_BASE + off

    def start_high(self, offset: int) -> None:
        """Open the read-only region at byte ``offset`` (the machine's first read-only word)."""
        self.ro_base = offset
        self._high_top = offset

    def finalize(self) -> None:
        """Materialize the arena after every allocation is made."""
        total = (max(self._top, self._high_top) + 7) // 8 * 8
        self.arena = np.zeros(total, dtype=np.uint8)
        for off, data in self._chunks:
            self.arena[off : off + len(data)] = np.frombuffer(data, dtype=np.uint8)
        order = sorted(range(len(self.buffers)), key=lambda i: self.buffers[i].start)
        self.buffers = [self.buffers[i] for i in order]
        self._starts = np.array([b.start for b in self.buffers], dtype=np.uint64)
        self._ends = np.array([b.start + b.size for b in self.buffers], dtype=np.uint64)
        self.has_readonly = any(b.readonly for b in self.buffers)

    def place_program_data(self, blocks: Sequence[tuple[int, Sequence[int]]]) -> None:
        """A machine program's read-only data (``Program.rodata``: (first word, words) blocks, its
        sequences' constant tables at the top of the machine's read-only words) written at their
        word addresses, each a read-only buffer named ``PROGRAM_DATA`` (so an access is in bounds
        and a store into one is refused, as the weights drop it). Idempotent: a launch runs it
        once per placement."""
        added = False
        for word, words in blocks:
            start = GLOBAL_BASE + 4 * word
            if any(b.start == start and b.name == PROGRAM_DATA for b in self.buffers):
                continue
            off, end = 4 * word, 4 * (word + len(words))
            if len(self.arena) < end:
                self.arena = np.concatenate([self.arena, np.zeros(end - len(self.arena), dtype=np.uint8)])
            self.arena[off:end] = np.asarray(words, dtype="<u4").view(np.uint8)
            self.buffers.append(Buffer(PROGRAM_DATA, start, end - off, True))
            # the bounds of the buffers already there stay as they are (``extend_gmem`` may have
            # widened them to whole words)
            self._starts = np.append(self._starts, np.uint64(start))
            self._ends = np.append(self._ends, np.uint64(GLOBAL_BASE + end))
            added = True
        if added:
            order = np.argsort(self._starts, kind="stable")
            self._starts, self._ends = self._starts[order], self._ends[order]
            self.buffers = sorted(self.buffers, key=lambda b: b.start)
            self.has_readonly = True

    def check(self, addr: np.ndarray, size: int) -> np.ndarray:
        """Boolean mask of addresses whose ``size`` bytes lie inside one buffer."""
        if len(self._starts) == 0:
            return np.zeros(addr.shape, dtype=bool)
        idx = np.searchsorted(self._starts, addr, side="right").astype(np.int64) - 1
        ok = idx >= 0
        idx = np.maximum(idx, 0)
        return ok & (addr + np.uint64(size) <= self._ends[idx])

    def read(self, name: str) -> bytes:
        for b in self.buffers:
            if b.name == name:
                off = b.start - GLOBAL_BASE
                return self.arena[off : off + b.size].tobytes()
        raise KeyError(name)

    def describe(self, addr: int) -> str:
        """Say where an address falls relative to the buffers (for error messages)."""
        best = None
        for b in self.buffers:
            if b.start <= addr < b.start + b.size:
                return f"inside {b.name}"
            dist = addr - (b.start + b.size) if addr >= b.start + b.size else b.start - addr
            if best is None or dist < best[0]:
                where = "past the end of" if addr >= b.start + b.size else "before"
                best = (dist, f"{dist} bytes {where} buffer '{b.name}' ({b.size} bytes)")
        return best[1] if best else "no buffers allocated"


def place_module_globals(gmem: GlobalMemory, global_vars: list) -> dict[str, int]:
    """Allocate a kernel's module ``.global``/``.const`` variables (with their initializers) after
    the launch's own buffers, as the interpreter and the simulator do; name -> address. Why a
    helper: the weights' launch must place them *before* the machine's own regions are added."""
    addrs = {v.name: gmem.alloc(v.name, v.init or b"", size=v.size, readonly=v.space == "const")
             for v in global_vars}
    if addrs:
        gmem.finalize()
    return addrs
