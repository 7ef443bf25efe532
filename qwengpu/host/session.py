"""The advanced-mode loop: the model writes a kernel, the host compiles and launches it, the result
(or the error) goes back as the tool result, and the model answers.

A 2B model's CUDA is unreliable, and exact execution makes a wrong program look trustworthy, so
the loop keeps every failure visible: each attempt (its kernel, spec, error or outputs) is kept,
an answer is labelled with how it came about (``status``), and the numbers the GPU computed are
reported beside the answer whether or not the answer quotes them.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

from qwengpu.host.launcher import Launcher, LaunchOutcome
from qwengpu.host.prompts import RUN_CUDA_TOOL, TOOL_NAME, system_prompt
from qwengpu.host.repliers import Replier
from qwengpu.host.toolcall import parse_reply, strip_thinking

NO_RETRIES_LEFT = (
    "No retries left: do not call run_cuda again. Answer the user without the GPU and "
    "say plainly that the computation did not run."
)

# how an answer came about
STATUS_TEXT = {
    "computed": "answered from a kernel that ran",
    "no_kernel": "answered without running a kernel (nothing was computed)",
    "failed": "every kernel attempt failed; the answer is not backed by a computation",
    "gave_up": "the model kept calling the tool after its last retry; no final answer",
    "no_gpu": "answered without the GPU (--no-gpu)",
}


@dataclass
class Attempt:
    """One tool call the model made, and what came of it."""

    index: int
    reply: str
    style: str | None = None
    source: str | None = None
    launch: str | None = None
    outcome: LaunchOutcome | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.outcome.ok

    def as_json(self) -> dict:
        d = {
            "attempt": self.index,
            "reply": self.reply,
            "call_style": self.style,
            "source": self.source,
            "launch": self.launch,
        }
        if self.outcome is not None:
            d.update(self.outcome.as_json())
            if self.outcome.trace:
                d["trace"] = self.outcome.trace
        return d


@dataclass
class Turn:
    """One question and everything that happened until the answer."""

    question: str
    mode: str  # "gpu" or "no-gpu"
    engine: str
    attempts: list[Attempt] = field(default_factory=list)
    answer: str = ""
    status: str = ""
    replies: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    start: int = 0  # where this turn's messages begin in the session's history

    @property
    def computed(self) -> LaunchOutcome | None:
        """The last launch that ran (the numbers the answer should rest on)."""
        for a in reversed(self.attempts):
            if a.ok:
                return a.outcome
        return None

    @property
    def first_try(self) -> bool:
        return bool(self.attempts) and self.attempts[0].ok

    @property
    def quoted(self) -> bool | None:
        """Whether the answer quotes at least one value the kernel returned (None: nothing ran)."""
        c = self.computed
        if c is None:
            return None
        nums = set(re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", self.answer))
        vals = {str(v) for vs in c.outputs.values() for v in vs}
        return bool(nums & vals)

    def as_json(self) -> dict:
        c = self.computed
        return {
            "question": self.question,
            "dry_run": self.engine == "interp",
            "mode": self.mode,
            "engine": self.engine,
            "attempts": [a.as_json() for a in self.attempts],
            "answer": self.answer,
            "status": self.status,
            "status_text": STATUS_TEXT.get(self.status, ""),
            "computed": c.outputs if c is not None else None,
            "answer_quotes_computed": self.quoted,
            "first_try_ran": self.first_try,
            "replies": self.replies,
            "seconds": round(self.seconds, 3),
        }


class Events:
    """Callbacks a view implements; the defaults do nothing (``--json``, tests)."""

    def reply_start(self, n: int) -> None: ...
    def text(self, chunk: str) -> None: ...
    def reply_end(self, stats: dict) -> None: ...
    def call(self, attempt: Attempt) -> None: ...
    def launch_event(self, name: str, data: dict) -> None: ...
    def outcome(self, attempt: Attempt) -> None: ...
    def answer(self, turn: Turn) -> None: ...


@dataclass
class Session:
    """A conversation: ``ask`` appends one turn (chat keeps the history between turns)."""

    replier: Replier
    launcher: Launcher | None  # None: --no-gpu
    retries: int = 2
    events: Events = field(default_factory=Events)
    trace: bool = False
    messages: list[dict] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages.append({"role": "system", "content": system_prompt(gpu=self.launcher is not None)})

    @property
    def tools(self) -> list[dict] | None:
        return [RUN_CUDA_TOOL] if self.launcher is not None else None

    def _reply(self, n: int, sample: bool) -> tuple[str, dict]:
        ev = self.events
        ev.reply_start(n)
        r = self.replier.reply(self.messages, self.tools, on_text=ev.text, sample=sample)
        ev.reply_end(r.stats)
        return r.text, r.stats

    def retry(self) -> Turn | None:
        """Ask the last question again (sampling, so a deterministic model can answer differently)."""
        if not self.turns:
            return None
        last = self.turns.pop()
        del self.messages[last.start :]
        return self.ask(last.question, sample=True)

    def ask(self, question: str, sample: bool = False) -> Turn:
        """One question to an answer, through up to ``retries + 1`` kernel attempts. If the replier
        fails (an error, Ctrl-C), the conversation is left as it was before the question."""
        start = len(self.messages)
        try:
            return self._ask(question, sample)
        except BaseException:
            del self.messages[start:]
            raise

    def _ask(self, question: str, sample: bool) -> Turn:
        t0 = time.perf_counter()
        turn = Turn(
            question,
            "gpu" if self.launcher is not None else "no-gpu",
            self.launcher.engine if self.launcher is not None else "none",
        )
        turn.start = len(self.messages)
        self.messages.append({"role": "user", "content": question})
        left = self.retries + 1
        n = 0
        while True:
            n += 1
            text, stats = self._reply(n, sample)
            turn.replies.append(stats)
            if self.launcher is None:
                turn.answer, turn.status = strip_thinking(text).strip(), "no_gpu"
                self.messages.append({"role": "assistant", "content": text})
                break
            parsed = parse_reply(strip_thinking(text))
            if not parsed.has_call or left == 0:
                turn.answer = parsed.text
                if parsed.has_call:
                    turn.status = "gave_up"
                elif turn.computed is not None:
                    turn.status = "computed"
                else:
                    turn.status = "failed" if turn.attempts else "no_kernel"
                self.messages.append(
                    {"role": "assistant", "content": parsed.text if parsed.has_call else text}
                )
                break
            left -= 1
            att = Attempt(len(turn.attempts) + 1, text)
            turn.attempts.append(att)
            att.outcome = self._run_call(parsed, att)
            result = att.outcome.tool_result()
            if len(parsed.calls) > 1:
                result += (
                    f"\n(only the first of your {len(parsed.calls)} calls was run: make one call at a time)"
                )
            if left == 0 and not att.ok:
                result += "\n" + NO_RETRIES_LEFT
            msg: dict = {"role": "assistant", "content": parsed.text, "raw": text}
            if parsed.calls:
                c = parsed.calls[0]
                msg["tool_calls"] = [
                    {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                ]
            else:
                msg["content"] = text
            self.messages.append(msg)
            self.messages.append({"role": "tool", "content": result})
            self.events.outcome(att)
        turn.seconds = time.perf_counter() - t0
        self.turns.append(turn)
        self.events.answer(turn)
        return turn

    def _run_call(self, parsed, att: Attempt) -> LaunchOutcome:
        """Check the call's shape, then compile and launch; every problem becomes a tool result."""
        eng = self.launcher.engine
        if parsed.problem is not None:
            return LaunchOutcome(False, "bad_call", parsed.problem, engine=eng)
        call = parsed.calls[0]
        att.style = call.style
        if call.name != TOOL_NAME:
            return LaunchOutcome(
                False,
                "bad_call",
                f"there is no tool named {call.name!r}; the only tool is {TOOL_NAME}(source, launch)",
                engine=eng,
            )
        src, spec = call.arguments.get("source"), call.arguments.get("launch")
        if not isinstance(src, str) or not src.strip():
            return LaunchOutcome(
                False, "bad_call", "run_cuda needs the parameter 'source' (the CUDA code)", engine=eng
            )
        if spec is None:
            return LaunchOutcome(
                False, "bad_call", "run_cuda needs the parameter 'launch' (the launch spec JSON)", engine=eng
            )
        att.source = src
        att.launch = spec if isinstance(spec, str) else json.dumps(spec)
        self.events.call(att)
        return self.launcher.launch(src, spec, events=self.events.launch_event, trace=self.trace)
