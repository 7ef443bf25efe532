"""The terminal view of advanced mode (``rich``): the reply streamed as it is written, the kernel
with syntax highlighting, compile status, a live line while the model executes the launch, the
numbers that came back, and the answer with how it came about.

The raw tool-call markup is not echoed while it streams (a status line counts its tokens
instead); the kernel and the spec are shown once the call is complete.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.panel import Panel
from rich.status import Status
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from qwengpu.host.launcher import HINTS
from qwengpu.host.session import STATUS_TEXT, Attempt, Events, Turn

ENGINE_LABEL = {
    "interp": "DRY RUN on the reference interpreter (not inside the model)",
    "machine": "inside the standalone machine model (its own sequence)",
    "model": "inside the mounted model (the launch is its own sequence)",
}
ENGINE_SHORT = {
    "interp": "on the reference interpreter (a dry run)",
    "machine": "inside the standalone machine model",
    "model": "inside the mounted model",
}
_MARKERS = ("<tool_call>", "<function=")


class ConsoleView(Events):
    """Renders a session's events on a ``rich`` console."""

    def __init__(self, console: Console | None = None, show_trace: bool = False) -> None:
        if console is None:
            console = Console(highlight=False)
            if not console.is_terminal:  # piped: a fixed, readable width
                console = Console(highlight=False, width=100)
        self.console = console
        self.show_trace = show_trace
        self._buf = ""
        self._hidden = False
        self._call_tokens = 0
        self._status: Status | None = None
        self._last_outcome = None

    # -- the reply, streamed
    def reply_start(self, n: int) -> None:
        self._buf, self._hidden, self._call_tokens = "", False, 0
        self.console.print(Text("Qwen", style="bold magenta") + Text(f"  (reply {n})", style="dim"))

    def text(self, chunk: str) -> None:
        if self._hidden:
            self._call_tokens += 1
            if self._status is not None:
                self._status.update(f"writing a kernel … {self._call_tokens} tokens")
            return
        self._buf += chunk
        cut = min((i for i in (self._buf.find(m) for m in _MARKERS) if i >= 0), default=-1)
        if cut >= 0:
            self.console.out(self._buf[:cut].rstrip(), end="", highlight=False)
            self._hidden = True
            if self.console.is_terminal:
                self._status = self.console.status("writing a kernel …")
                self._status.start()
            return
        # hold back a tail that could be the start of a marker
        keep = max((k for m in _MARKERS for k in range(1, len(m)) if self._buf.endswith(m[:k])), default=0)
        out, self._buf = (self._buf[:-keep], self._buf[-keep:]) if keep else (self._buf, "")
        self.console.out(out, end="", highlight=False)

    def reply_end(self, stats: dict) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        if not self._hidden and self._buf:
            self.console.out(self._buf, end="", highlight=False)
        self.console.out("")
        bits = [f"{stats.get('tokens', 0)} tokens"]
        if stats.get("tokens_per_second"):
            bits.append(f"{stats['tokens_per_second']:,} tokens/s")
        if stats.get("mode") in ("teacher-forced", "scripted"):
            bits.append(f"{stats['mode']} reply")
        if stats.get("cut_off"):
            bits.append("cut off by --max-new-tokens")
        self.console.print(Text("  " + " · ".join(bits), style="dim"))

    # -- the call
    def call(self, att: Attempt) -> None:
        self.console.print(
            Panel(
                Syntax(att.source or "", "cuda", theme="monokai", line_numbers=True),
                title=f"kernel (attempt {att.index}, {att.style} tool call)",
                title_align="left",
                border_style="cyan",
            )
        )
        try:
            spec = json.dumps(json.loads(att.launch), indent=None)
        except (TypeError, ValueError):
            spec = att.launch or ""
        self.console.print(Text("launch ", style="bold") + Text(spec, style="yellow"))

    def launch_event(self, name: str, data: dict) -> None:
        if name == "compiled":
            self.console.print(
                Text(
                    f"✓ compiled with NVRTC ({data['ptx_lines']} PTX lines, {data['seconds'] * 1000:.0f} ms)",
                    style="green",
                )
            )
            if self.console.is_terminal:
                self._status = self.console.status("launching …")
                self._status.start()
        elif name == "compile_failed":
            self.console.print(Text("✗ compile error", style="bold red"))
        elif name == "progress" and self._status is not None:
            if "tokens" in data:
                self._status.update(
                    f"the model is executing the launch: {data['tokens']:,} tokens · "
                    f"{data['tokens_per_second']:,.0f} tokens/s · {data['passes']:,} passes"
                )
            else:
                self._status.update(f"interpreter: {data['warp_instructions']:,} warp instructions")

    def outcome(self, att: Attempt) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
        o = att.outcome
        if o is None:
            return
        if not o.ok:
            self.console.print(
                Panel(
                    Text(o.message),
                    title=f"✗ {o.kind.replace('_', ' ')}",
                    title_align="left",
                    border_style="red",
                )
            )
            self.console.print(
                Text("  → sent back to Qwen as the tool result. " + HINTS.get(o.kind, ""), style="dim")
            )
            return
        self._last_outcome = o
        st = o.stats
        label = ENGINE_LABEL.get(o.engine, o.engine)
        self.console.print(Text(f"✓ ran {label}", style="bold green"))
        tab = Table(show_header=True, header_style="bold")
        tab.add_column("output")
        tab.add_column("values (exact)")
        for k, v in o.outputs.items():
            shown = v if len(v) <= 32 else [*v[:32], f"… {len(v)} values"]
            tab.add_row(k, json.dumps(shown))
        self.console.print(tab)
        if "tokens" in st:
            line = (
                f"  the model wrote {st['tokens']:,} tokens after a {st.get('prompt_tokens', 0):,}-token "
                f"prompt: {st.get('warp_instructions', 0):,} warp instructions, {st.get('passes', 0):,} "
                f"lane-group passes, {st.get('seconds', 0):.2f} s "
                f"({st['tokens'] / max(st.get('seconds', 0), 1e-9):,.0f} tokens/s)"
            )
        else:
            line = f"  {st.get('warp_instructions', 0):,} warp instructions in {st.get('seconds', 0):.3f} s"
        self.console.print(Text(line, style="dim"))
        if self.show_trace and o.trace:
            self.console.print(Text("trace (one line per lane-group pass):", style="bold"))
            for t in o.trace[:400]:
                self.console.print(Text("  " + t, style="dim"))
            if len(o.trace) > 400:
                self.console.print(Text(f"  … {len(o.trace) - 400} more lines", style="dim"))

    # -- the answer
    def answer(self, turn: Turn) -> None:
        style = {"computed": "green", "no_gpu": "blue"}.get(turn.status, "yellow")
        self.console.print(
            Panel(Text(turn.answer or "(no answer)"), title="answer", title_align="left", border_style=style)
        )
        c = turn.computed
        if c is not None:
            vals = "; ".join(
                f"{k} = {json.dumps(v if len(v) <= 16 else [*v[:16], '…'])}" for k, v in c.outputs.items()
            )
            self.console.print(Text(f"GPU result: {vals}", style="bold"))
            self.console.print(
                Text(
                    "  the GPU ran the program exactly; whether the program computes what was "
                    "asked is not checked",
                    style="dim",
                )
            )
            if turn.quoted is False:
                self.console.print(
                    Text("  ⚠ the answer does not quote the kernel's result", style="bold yellow")
                )
        n = len(turn.attempts)
        tries = f"{n} attempt{'s' if n != 1 else ''}" if n else "no kernel"
        where = f" {ENGINE_SHORT.get(turn.engine, turn.engine)}" if turn.status == "computed" else ""
        self.console.print(
            Text(
                f"[{turn.status}] {STATUS_TEXT.get(turn.status, '')}{where} · {tries} · {turn.seconds:.1f} s",
                style=f"bold {style}",
            )
        )

    def show_last_trace(self) -> None:
        o = self._last_outcome
        if o is None or not o.trace:
            self.console.print("no trace: no launch has run in this chat yet")
            return
        for t in o.trace:
            self.console.print(Text(t, style="dim"))
