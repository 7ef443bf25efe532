"""qwenGPU: a SIMT GPU compiled into stock Qwen3.5 decoder layers.

Data flows one way: ``.cu -> cuda -> ptx -> {simt | machine program -> model}``.
"""

__version__ = "0.1.0"
