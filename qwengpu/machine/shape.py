"""The machine's capacities and units as a plain record (:class:`MachineShape`).

Why a module of its own: the CLI, the runner and the interpreter engine ask which launches the
machine would refuse without building (or importing) the circuit compiler, which needs torch: this
module imports nothing heavy (``qwengpu run --engine interp`` stays well under a second of imports).
``machine/circuit.py`` builds the circuit of a shape and re-exports these names."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineShape:
    """Capacities compiled into the circuit (the engine refuses launches beyond them)."""

    rom_rows: int = 4096
    #: global memory: 16,384 words on the 2B shape, one copy (one read port) in 8 banks of 2,048
    #: rows (one layer's 16 key heads each) that sit beside the scheduler (docs/machine-in-weights.md,
    #: 9.13 and 9.15)
    gmem_words: int = 16384
    gmem_bank_rows: int = 2048
    #: read-only words above the writable ones (inputs no store can reach: ``ptx.readonly``), four
    #: to a DeltaNet row in banks of ``ro_bank_rows`` rows (9.16): 49,152 on the 2B shape (65,536
    #: words in all), 2,048 on the test shape; 0 (none) for a record that does not name them
    ro_words: int = 0
    ro_bank_rows: int = 2048
    #: global memory built after the scheduler and the units (the 2B shape: its banks take idle
    #: layers, 39 layers) or before the datapath, as in version 1 (the test shape: 48 fewer
    #: residual slots, so a mount on a 128-wide base keeps the width 2,048 and c = 4)
    gmem_late: bool = True
    nregs: int = 32
    npreds: int = 8
    threads: int = 64
    blocks: int = 65535  # 16-bit block latches (BLOCK / BLOCKHI tokens: protocol.py)
    #: the multiplier (``multiplier``): fits layer shapes with MLP room for it (the Qwen3.5-2B
    #: shape, intermediate 6144, at the same 37 layers); not the test shape (intermediate 2048)
    multiplier: bool = False
    #: four float adders (``fpu.fadd``: ``add.rn.f32``, ``.ftz`` by the row's ``csign`` bit); they
    #: fit beside the multiplier on the 2B shape when placement leaves ``FADD_MLP_RESERVE`` neurons
    #: per MLP to the residual's resets (``bench/fadd_unit.py``)
    fadd: bool = False
    #: one fast-range float multiplier (``fpu.fmul_fast``: ``mul.rn.f32`` of normal factors whose
    #: product is normal), one lane per row (``float_multiplier``); it needs the residual of a
    #: machine wider than 2,048 (``bench/late_units.py``: it fits at 3,072, 43 layers)
    fmulf: bool = False
    #: one-lane rows of any op but a branch (``target`` bit 2 set: ``circuit.one_lane_guard``), so
    #: the lowering's lane loops (atomics, sub-word stores) take each lane's turn without a
    #: predicate, a count or a branch of their own (``codegen.softmem._lane_turns``)
    lane_rows: bool = False


#: the fields of ``MachineShape`` that name units beside the integer datapath (``machine info``)
MACHINE_UNITS = ("multiplier", "fadd", "fmulf")
