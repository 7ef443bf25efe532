"""Run the kernel a model wrote: (CUDA source, launch spec) -> outputs + stats, or a message for it.

A :class:`Launcher` is the only thing the session needs from the GPU side, so the engine can
change (the reference interpreter for a dry run, the standalone machine model, the machine
mounted in front of the base) without touching the loop. Every failure a program can cause ends
as a :class:`LaunchOutcome` with a ``kind`` and the message the model gets back as the tool result.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from qwengpu.errors import (
    CompileError,
    ExecutionError,
    LaunchSpecError,
    MachineLimitError,
    PTXError,
    QwenGPUError,
)

KINDS = {
    CompileError: "compile_error",
    PTXError: "unsupported",
    LaunchSpecError: "bad_launch_spec",
    MachineLimitError: "machine_limit",
    ExecutionError: "fault",
}

HINTS = {
    "compile_error": "Fix the CUDA source (NVRTC, no #include) and call run_cuda again.",
    "unsupported": "The machine does not support this PTX: write the kernel with simpler operations.",
    "bad_launch_spec": "Fix the launch spec JSON (args in the kernel's parameter order, same names).",
    "machine_limit": "The launch exceeds a machine limit: use fewer threads, blocks or memory.",
    "fault": "The kernel faulted: fix the bug (bounds, loop exit) and call run_cuda again.",
    "step_limit": "The kernel did not finish within the step limit: it may loop forever, or it is "
    "too long; make it terminate sooner.",
    "error": "Fix the call and try again.",
}


@dataclass
class LaunchOutcome:
    """What one ``run_cuda`` call produced (``ok``) or why it did not (``kind`` + ``message``)."""

    ok: bool
    kind: str  # "ok" or one of KINDS / "step_limit" / "error"
    message: str = ""
    outputs: dict[str, list] = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    engine: str = ""
    trace: list[str] = field(default_factory=list)

    def tool_result(self) -> str:
        """The text the model reads back as the tool's answer."""
        if self.ok:
            lines = [f"{k} = {json.dumps(v)}" for k, v in self.outputs.items()]
            return "The kernel ran exactly. Outputs:\n" + "\n".join(lines)
        return f"error ({self.kind.replace('_', ' ')}):\n{self.message}\n{HINTS.get(self.kind, '')}".strip()

    def as_json(self) -> dict:
        d: dict = {"ok": self.ok, "kind": self.kind, "engine": self.engine}
        if self.ok:
            d["outputs"] = self.outputs
        else:
            d["message"] = self.message
        d["stats"] = self.stats
        return d


EventFn = Callable[[str, dict], None]  # ("compiled" | "compile_failed" | "progress", data)


class Launcher(Protocol):
    """Runs (source, launch spec text) and never raises for anything the program's author did."""

    engine: str

    def launch(
        self, source: str, launch: str | dict, events: EventFn | None = None, trace: bool = False
    ) -> LaunchOutcome: ...


_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(\w+)\s*\(")


def prepare_spec(source: str, launch: str | dict) -> dict:
    """The model's launch text as a spec dict; a missing ``kernel`` is filled in when the source
    has exactly one kernel, and ``expected`` is dropped (a model cannot know the answer to check)."""
    if isinstance(launch, dict):
        obj = launch
    else:
        text = launch.strip()
        m = re.match(r"^```[\w]*\s*\n(.*?)\n?```$", text, re.S)
        if m:
            text = m.group(1)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise LaunchSpecError(
                f"the launch spec is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
            ) from e
    if not isinstance(obj, dict):
        raise LaunchSpecError("the launch spec must be a JSON object")
    obj = dict(obj)
    obj.pop("expected", None)
    obj.pop("tolerance_ulp", None)
    if "kernel" not in obj:
        names = _KERNEL.findall(re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S))
        if len(names) != 1:
            raise LaunchSpecError('the launch spec needs "kernel": the name of the __global__ function')
        obj["kernel"] = names[0]
    return obj


def _kind(exc: QwenGPUError) -> str:
    for cls, kind in KINDS.items():
        if isinstance(exc, cls):
            if kind == "fault" and "step limit" in str(exc):
                return "step_limit"
            return kind
    return "error"


@dataclass
class RunnerLauncher:
    """A launch through :func:`qwengpu.runner.run_kernel` on ``engine``.

    ``interp``: the reference interpreter (a quick dry run; nothing runs in a model);
    ``machine``: the standalone machine model; ``model``: the machine mounted in front of the
    base (``model_dir``), where the launch is its own sequence through the same checkpoint."""

    engine: str = "model"
    model_dir: str | None = None
    max_steps: int = 50_000
    runtime: str = "fast"

    def launch(
        self, source: str, launch: str | dict, events: EventFn | None = None, trace: bool = False
    ) -> LaunchOutcome:
        from qwengpu.cuda import COMPILE_OPTIONS, compile_file
        from qwengpu.runner import run_kernel

        def emit(name: str, data: dict) -> None:
            if events is not None:
                events(name, data)

        t0 = time.perf_counter()
        lines: list[str] = []
        counts = {"passes": 0}

        def on_trace(line: str) -> None:
            if not line.startswith("--"):
                counts["passes"] += 1
            if trace and len(lines) < 20_000:
                lines.append(line)

        def on_progress(st) -> None:
            dt = max(time.perf_counter() - t0, 1e-9)
            if self.engine == "interp":
                emit("progress", {"warp_instructions": st.warp_instructions, "seconds": dt})
            else:  # the machine engines report the tokens the model has written so far
                emit(
                    "progress",
                    {
                        "tokens": st.tokens,
                        "tokens_per_second": st.tokens / dt,
                        "passes": counts["passes"],
                        "block": st.block,
                        "blocks": st.blocks,
                        "seconds": dt,
                    },
                )

        try:
            spec = prepare_spec(source, launch)
            with tempfile.TemporaryDirectory(prefix="qwengpu-ask-") as d:
                cu = Path(d) / "kernel.cu"
                cu.write_text(source)
                js = Path(d) / "kernel.json"
                js.write_text(json.dumps(spec))
                tc = time.perf_counter()
                try:
                    ptx = compile_file(cu, options=COMPILE_OPTIONS)
                except CompileError:
                    emit("compile_failed", {})
                    raise
                emit("compiled", {"ptx_lines": ptx.count("\n"), "seconds": time.perf_counter() - tc})
                t0 = time.perf_counter()
                kw = {"model_dir": self.model_dir} if self.engine == "model" else {}
                res = run_kernel(
                    cu,
                    js,
                    engine=self.engine,
                    max_steps=self.max_steps,
                    trace=on_trace if (trace or events) else None,
                    progress=on_progress,
                    runtime=self.runtime,
                    **kw,
                )
        except QwenGPUError as exc:
            msg = str(exc).replace(str(Path(tempfile.gettempdir())), "")
            msg = re.sub(r"/qwengpu-ask-\w+/", "", msg)
            return LaunchOutcome(
                False,
                _kind(exc),
                msg,
                engine=self.engine,
                stats={"seconds": round(time.perf_counter() - t0, 3)},
                trace=lines,
            )
        stats = dict(res.stats)
        stats.setdefault("passes", counts["passes"])
        stats["seconds_total"] = round(time.perf_counter() - t0, 3)
        return LaunchOutcome(
            True, "ok", outputs=res.as_json()["outputs"], stats=stats, engine=res.engine, trace=lines
        )
