"""Tiny kernels and the replies a model would write around them (a handful of warp instructions
each: a warp instruction is ~100 tokens the model must write, median over the corpus)."""

from __future__ import annotations

import json

ADD = 'extern "C" __global__ void add(int a, int b, int *out) { out[0] = a + b; }'


def add_spec(a: int, b: int, block: int = 1, **extra) -> str:
    spec = {
        "kernel": "add",
        "grid": 1,
        "block": block,
        "args": [
            {"name": "a", "type": "i32", "value": a},
            {"name": "b", "type": "i32", "value": b},
            {"name": "out", "type": "i32*", "data": [0]},
        ],
        "outputs": ["out"],
        **extra,
    }
    return json.dumps(spec)


def xml_call(source: str, launch: str, preface: str = "I will compute this exactly on the GPU.") -> str:
    """A reply in Qwen3.5's XML tool-call convention."""
    return (
        f"{preface}\n<tool_call>\n<function=run_cuda>\n<parameter=source>\n{source}\n</parameter>\n"
        f"<parameter=launch>\n{launch}\n</parameter>\n</function>\n</tool_call>"
    )


def json_call(source: str, launch: str) -> str:
    """A reply in the Hermes JSON convention (Qwen2.5 / Qwen3)."""
    body = json.dumps({"name": "run_cuda", "arguments": {"source": source, "launch": launch}})
    return f"<tool_call>\n{body}\n</tool_call>"
