"""The machine: the GPU's instruction set, the lowering from PTX, register allocation, limits,
and an exact simulator of its 4-lane datapath (bit-identical to the SIMT interpreter)."""

from qwengpu.machine.limits import LIMITS, Limits, format_limits, machine_limits

__all__ = ["LIMITS", "Limits", "format_limits", "machine_limits"]
