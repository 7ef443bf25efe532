"""User-facing errors: every bad input ends as one of these, printed without a traceback."""

from __future__ import annotations


class QwenGPUError(Exception):
    """Base class: the CLI prints ``error: <message>`` and exits with ``exit_code``."""

    exit_code = 1


class CompileError(QwenGPUError):
    """CUDA source failed to compile (message carries the compiler log with file:line)."""

    exit_code = 2


class PTXError(QwenGPUError):
    """PTX that we cannot parse or do not support (message names the PTX line)."""

    exit_code = 3


class LaunchSpecError(QwenGPUError):
    """A launch spec that does not match the kernel or is malformed."""

    exit_code = 4


class ExecutionError(QwenGPUError):
    """A fault during a launch: out-of-bounds access, division by zero, step limit, ..."""

    exit_code = 5


class MachineLimitError(QwenGPUError):
    """A launch that exceeds a machine limit (threads, registers, memory, program size)."""

    exit_code = 6


class CheckpointError(QwenGPUError):
    """A wrong, incomplete or corrupt checkpoint."""

    exit_code = 7
