"""The machine's capacity, in one place: every program and launch is checked against it.

Why one place: the compiled transformer is sized from these numbers (register file rows, ROM
rows, memory rows), so the lowering, the simulator and ``qwengpu machine info`` must agree.
A program or launch that exceeds a limit is refused with a ``MachineLimitError`` that names the
limit and the amount needed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from qwengpu.errors import MachineLimitError


@dataclass(frozen=True)
class Limits:
    """Capacities of the machine (the minimums the design brief asks for, or more)."""

    # threads per block a launch may have (CUDA's own limit); the machine holds 64 at once
    # (``resident_threads``): a larger block of a kernel without barriers runs as parts of whole
    # warps one after another (codegen.softmem.block_parts); one with barriers as one machine block
    # whose threads take whole warps of it in turns (codegen.turns: a multiple of 32 threads)
    threads_per_block: int = 1024
    resident_threads: int = 64  # threads the machine holds at once (registers, scheduler state)
    blocks_per_launch: int = 65535  # one after another; 16-bit block latches in the weights
    registers: int = 32  # general registers per thread, after allocation
    predicates: int = 8  # one-bit predicate registers per thread (PT is extra)
    # 32-bit words of global memory, all buffers together (the 2B machine), of which
    # ``writable_words`` may be stored to; the rest holds inputs no store reaches (ptx.readonly)
    global_words: int = 65536
    writable_words: int = 16384
    # 32-bit words of shared memory per block (static + dynamic): carved from the top of the same
    # global words as the buffers (they must fit below it), so at most 3/4 of them (12,288 words
    # = 48 KB, CUDA's own static limit per block)
    shared_words: int = 12288
    # 32-bit words of per-thread local memory (.local arrays); the register allocator's spill slots
    # are not counted here: they take the global-memory words the launch leaves (codegen.softmem)
    local_words: int = 16
    param_words: int = 64  # 32-bit words of the kernel parameter bank (with launch constants)
    program: int = 4096  # machine instructions in the program ROM

    def as_rows(self) -> list[tuple[str, int, str]]:
        """(name, value, unit) rows for printing."""
        units = {
            "threads_per_block": "threads per block (more than 64: run in parts, or with barriers in turns)",
            "resident_threads": "threads the machine holds at once (a larger block: parts or turns)",
            "blocks_per_launch": "blocks per launch",
            "registers": "32-bit registers per thread (r0..r31) after allocation",
            "predicates": "1-bit predicates per thread (p0..p7; PT is the constant true)",
            "global_words": "32-bit words of global memory (all buffers together)",
            "writable_words": "of them writable (the rest: inputs no store reaches)",
            "shared_words": "32-bit words of shared memory per block",
            "local_words": "32-bit words of local memory per thread (.local arrays; spills use free memory)",
            "param_words": "32-bit words of kernel parameters and launch constants",
            "program": "machine instructions of program",
        }
        return [(k, v, units[k]) for k, v in asdict(self).items()]


LIMITS = Limits()


def shared_words_for(gmem_words: int) -> int:
    """Shared words per block a machine of ``gmem_words`` maps: the top of its global memory, at
    most 3/4 of it (and at most ``LIMITS.shared_words``)."""
    return min(LIMITS.shared_words, gmem_words * 3 // 4)


def machine_limits() -> list[tuple[str, int, str]]:
    """The limits for printing (``qwengpu machine info``)."""
    return LIMITS.as_rows()


def format_limits() -> str:
    """The limits as aligned text lines."""
    return "\n".join(f"  {v:>6}  {unit}" for _, v, unit in machine_limits())


def need(what: str, amount: int, limit: int, unit: str) -> None:
    """Refuse when ``amount`` exceeds ``limit``: '<what> needs N <unit>; the machine has M'."""
    if amount > limit:
        raise MachineLimitError(f"{what} needs {amount} {unit}; the machine has {limit}")
