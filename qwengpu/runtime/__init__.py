"""Fast runtimes for the stock Qwen3.5 models our compiler writes: token by token (:mod:`.fast`,
the recurrent path) and teacher-forced prefill (:mod:`.chunked`, the chunked path)."""

from .fast import FastModel, UnsupportedModel, run_trace_fast

__all__ = ["FastModel", "UnsupportedModel", "run_trace_fast"]
