"""Fast token-by-token runtimes for the stock Qwen3.5 models our compiler writes (see :mod:`.fast`)."""

from .fast import FastModel, UnsupportedModel, run_trace_fast

__all__ = ["FastModel", "UnsupportedModel", "run_trace_fast"]
