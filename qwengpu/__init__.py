"""qwenGPU: a SIMT GPU compiled into stock Qwen3.5 decoder layers.

Data flows one way: ``.cu -> cuda -> ptx -> {simt | machine program -> model}``.
"""

__version__ = "0.1.0"

__all__ = ["run", "run_spec", "load_mount", "Result", "Mount", "QwenGPUError"]


def __getattr__(name: str):
    """The API (:mod:`qwengpu.api`) loads on first use, so ``import qwengpu`` stays light (no torch)."""
    if name in ("run", "run_spec", "load_mount", "Result", "Mount"):
        from qwengpu import api

        return getattr(api, name)
    if name == "QwenGPUError":
        from qwengpu.errors import QwenGPUError

        return QwenGPUError
    raise AttributeError(f"module 'qwengpu' has no attribute {name!r}")
