"""User-facing errors: every bad input ends as one of these, printed without a traceback.

One table of exit codes, used by every command (``qwengpu exit-codes`` prints it):

====  ==================  ===============================================================
code  name                meaning
====  ==================  ===============================================================
0     OK                  success
1     ERROR               any other bad input: a missing or unwritable file, a bad value
2     USAGE               command-line usage error (argparse; Python's convention)
3     PTX                 PTX that cannot be parsed or uses an unsupported instruction
4     LAUNCH_SPEC         a launch spec that is malformed or does not match the kernel
5     EXECUTION           a fault during a launch: out of bounds, step limit, ...
6     MACHINE_LIMIT       a launch beyond the machine's limits (threads, memory, registers)
7     CHECKPOINT          a wrong, incomplete or corrupt checkpoint or mount
8     MEMORY              loading a model would not fit in the free memory
9     MISMATCH            the command ran and found a difference: outputs differ from the
                          spec's "expected" (run, check), a mount differs from its build
                          record (verify)
10    MISSING_DEPENDENCY  an optional extra is not installed (``qwengpu[model]``)
11    COMPILE             the CUDA source does not compile
12    NO_GPU              ``hwcheck``: no NVIDIA GPU or driver
130   INTERRUPTED         Ctrl-C
====  ==================  ===============================================================
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit codes of every ``qwengpu`` command (the module docstring has the table)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    PTX = 3
    LAUNCH_SPEC = 4
    EXECUTION = 5
    MACHINE_LIMIT = 6
    CHECKPOINT = 7
    MEMORY = 8
    MISMATCH = 9
    MISSING_DEPENDENCY = 10
    COMPILE = 11
    NO_GPU = 12
    INTERRUPTED = 130


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success",
    ExitCode.ERROR: "any other bad input: a missing or unwritable file, a bad value",
    ExitCode.USAGE: "command-line usage error (a bad or missing option)",
    ExitCode.PTX: "PTX that cannot be parsed or uses an unsupported instruction",
    ExitCode.LAUNCH_SPEC: "a launch spec that is malformed or does not match the kernel",
    ExitCode.EXECUTION: "a fault during a launch: out-of-bounds access, step limit, ...",
    ExitCode.MACHINE_LIMIT: "a launch beyond the machine's limits (threads, memory, registers, ...)",
    ExitCode.CHECKPOINT: "a wrong, incomplete or corrupt checkpoint or mount",
    ExitCode.MEMORY: "loading a model would not fit in the free memory",
    ExitCode.MISMATCH: 'outputs differ from "expected" (run, check); a mount from its record (verify)',
    ExitCode.MISSING_DEPENDENCY: "an optional extra is not installed (pip install 'qwengpu[model]')",
    ExitCode.COMPILE: "the CUDA source does not compile",
    ExitCode.NO_GPU: "hwcheck: no NVIDIA GPU or driver",
    ExitCode.INTERRUPTED: "interrupted (Ctrl-C)",
}


def exit_code_table() -> str:
    """The table as aligned text (``qwengpu exit-codes``, the ``--help`` epilog)."""
    return "\n".join(f"  {int(c):>3}  {c.name:<18}  {EXIT_CODE_MEANINGS[c]}" for c in ExitCode)


class QwenGPUError(Exception):
    """Base class: the CLI prints ``error: <message>`` and exits with ``exit_code``."""

    exit_code = ExitCode.ERROR


class UsageError(QwenGPUError):
    """Options that argparse accepts one by one but not together (``--device`` with the
    interpreter): exit 2, like argparse's own usage errors."""

    exit_code = ExitCode.USAGE


class CompileError(QwenGPUError):
    """CUDA source failed to compile (message carries the compiler log with file:line)."""

    exit_code = ExitCode.COMPILE


class PTXError(QwenGPUError):
    """PTX that we cannot parse or do not support (message names the PTX line)."""

    exit_code = ExitCode.PTX


class LaunchSpecError(QwenGPUError):
    """A launch spec that does not match the kernel or is malformed."""

    exit_code = ExitCode.LAUNCH_SPEC


class ExecutionError(QwenGPUError):
    """A fault during a launch: out-of-bounds access, division by zero, step limit, ..."""

    exit_code = ExitCode.EXECUTION


class MachineLimitError(QwenGPUError):
    """A launch that exceeds a machine limit (threads, registers, memory, program size)."""

    exit_code = ExitCode.MACHINE_LIMIT


class CheckpointError(QwenGPUError):
    """A wrong, incomplete or corrupt checkpoint."""

    exit_code = ExitCode.CHECKPOINT


class MissingDependencyError(QwenGPUError):
    """A command that needs an optional extra (``qwengpu[model]``: torch, transformers, ...)
    on an install without it. ``ptx``, ``run --engine interp`` and ``check --engine interp``
    never need one."""

    exit_code = ExitCode.MISSING_DEPENDENCY


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
