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


class MissingDependencyError(QwenGPUError):
    """A command that needs an optional extra (``qwengpu[model]``: torch, transformers, ...)
    on an install without it. ``ptx``, ``run --engine interp`` and ``check --engine interp``
    never need one."""

    exit_code = 10


MODEL_EXTRA_MODULES = frozenset({"torch", "transformers", "safetensors", "scipy", "tokenizers"})


def missing_extra(exc: ModuleNotFoundError) -> MissingDependencyError | None:
    """The user-facing error for an import of an optional dependency that is not installed
    (None when ``exc`` is about anything else: a bug, not the install)."""
    top = (exc.name or "").split(".")[0]
    if top not in MODEL_EXTRA_MODULES:
        return None
    return MissingDependencyError(
        f"this needs {top}, which is not installed: the model engines, the mount and advanced mode "
        "need the 'model' extra — python -m pip install 'qwengpu[model]' (tested versions: "
        "constraints.txt). `--engine interp` needs no extra.")
