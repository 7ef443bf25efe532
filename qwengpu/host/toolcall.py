"""Find a ``run_cuda`` call in an assistant reply, in either convention a Qwen chat template uses.

Qwen3.5's own template (like Qwen3-Coder's) asks for XML::

    <tool_call>
    <function=run_cuda>
    <parameter=source>
    extern "C" __global__ void k(int *out) { ... }
    </parameter>
    <parameter=launch>
    {"kernel": "k", ...}
    </parameter>
    </function>
    </tool_call>

Qwen2.5/Qwen3 (Hermes style) ask for ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.
A small model mixes them, forgets closing tags or is cut off by the token limit, so the parser
accepts both, tolerates a missing ``</parameter>``/``</function>`` where the meaning is clear, and
reports a call that was opened but never finished as *cut off* (never as "no call"): a reply that
stops mid-kernel must not be taken for a final answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_FUNC = re.compile(r"<function\s*=\s*([\w.\-]+)\s*>")
_PARAM = re.compile(r"<parameter\s*=\s*([\w.\-]+)\s*>")
_FENCE = re.compile(r"^\s*```[\w+-]*\s*\n(.*?)\n?\s*```\s*$", re.S)


@dataclass
class ToolCall:
    """One parsed call: the function name, its arguments and the convention it was written in."""

    name: str
    arguments: dict[str, object]
    style: str  # "xml" or "json"
    raw: str = ""


@dataclass
class Parsed:
    """A reply split into its text (outside any call) and the calls in it.

    ``problem`` is set when a call was started but cannot be read (cut off, malformed): the host
    sends the message back to the model instead of treating the reply as an answer."""

    text: str
    calls: list[ToolCall] = field(default_factory=list)
    problem: str | None = None

    @property
    def has_call(self) -> bool:
        return bool(self.calls) or self.problem is not None


def _strip_value(v: str) -> str:
    """Parameter values are wrapped in one newline on each side by the template; a model may also
    put the kernel in a markdown fence."""
    if v.startswith("\n"):
        v = v[1:]
    if v.endswith("\n"):
        v = v[:-1]
    m = _FENCE.match(v)
    return m.group(1) if m else v


def _parse_xml(body: str) -> tuple[ToolCall | None, str | None]:
    fm = _FUNC.search(body)
    if fm is None:
        return None, None
    name = fm.group(1)
    rest = body[fm.end() :]
    end = rest.find("</function>")
    if end >= 0:
        rest = rest[:end]
    args: dict[str, object] = {}
    starts = list(_PARAM.finditer(rest))
    for i, pm in enumerate(starts):
        stop = starts[i + 1].start() if i + 1 < len(starts) else len(rest)
        chunk = rest[pm.end() : stop]
        close = chunk.rfind("</parameter>")
        if close >= 0:
            chunk = chunk[:close]
        args[pm.group(1)] = _strip_value(chunk)
    return ToolCall(name, args, "xml", body), None


def _parse_json(body: str) -> tuple[ToolCall | None, str | None]:
    text = _strip_value(body.strip())
    if not text.startswith("{"):
        return None, None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"the tool call is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
    if not isinstance(obj, dict) or "name" not in obj:
        return None, 'a JSON tool call needs {"name": ..., "arguments": {...}}'
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None, "the tool call's arguments are a string that is not a JSON object"
    if not isinstance(args, dict):
        return None, "the tool call's arguments must be a JSON object"
    return ToolCall(str(obj["name"]), args, "json", body), None


def parse_reply(reply: str) -> Parsed:
    """Split ``reply`` into text and tool calls (both conventions); see the module docstring."""
    text_parts: list[str] = []
    calls: list[ToolCall] = []
    pos = 0
    while True:
        i = reply.find(OPEN, pos)
        if i < 0:
            # no <tool_call> opener: a bare <function=...> block still counts (some models drop it)
            tail = reply[pos:]
            fm = _FUNC.search(tail)
            if fm is not None and not calls:
                text_parts.append(tail[: fm.start()])
                call, _ = _parse_xml(tail[fm.start() :])
                if "</function>" not in tail[fm.start() :]:
                    return Parsed(
                        "".join(text_parts).strip(),
                        calls,
                        "the reply was cut off inside a function call (no </function>)",
                    )
                calls.append(call)
            else:
                text_parts.append(tail)
            break
        text_parts.append(reply[pos:i])
        j = reply.find(CLOSE, i)
        body = reply[i + len(OPEN) : j if j >= 0 else len(reply)]
        call, err = _parse_xml(body)
        if call is None and err is None:
            call, err = _parse_json(body)
        if j < 0:
            # cut off: accept it only when the XML is complete up to </function>
            if call is not None and call.style == "xml" and "</function>" in body:
                calls.append(call)
                break
            return Parsed(
                "".join(text_parts).strip(),
                calls,
                "the reply was cut off inside the tool call (no </tool_call>); "
                "write the whole call again, shorter if needed",
            )
        if err is not None:
            return Parsed("".join(text_parts).strip(), calls, err)
        if call is None:
            return Parsed(
                "".join(text_parts).strip(),
                calls,
                "could not read the tool call: use <function=run_cuda> with "
                "<parameter=source> and <parameter=launch>",
            )
        calls.append(call)
        pos = j + len(CLOSE)
    return Parsed("".join(text_parts).strip(), calls)


def strip_thinking(text: str) -> str:
    """Drop a ``<think>...</think>`` block (Qwen3.5 may think before it answers)."""
    if "</think>" in text:
        return text.split("</think>", 1)[1].lstrip("\n")
    return text
