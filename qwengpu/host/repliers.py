"""Who writes the assistant's next message: the model (greedy ``generate``), the model fed a given
reply (teacher forcing, for tests without real weights), or a script (no model at all).

All three see the same chat messages, rendered by the base's own chat template with the
``run_cuda`` tool passed through ``tools=`` (so a real Qwen3.5 sees the tool in the format it was
trained on). A template without tool support gets the tool described in the system message and
tool results as user turns in ``<tool_response>`` tags (Qwen's convention).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from qwengpu.errors import QwenGPUError

OnText = Callable[[str], None]
END_MARKERS = ("<|im_end|>", "<|endoftext|>")


@dataclass
class Reply:
    """One assistant message and what producing it cost."""

    text: str
    stats: dict = field(default_factory=dict)


class Replier(Protocol):
    """Produces the assistant's next message for the conversation so far."""

    def reply(
        self,
        messages: list[dict],
        tools: list[dict] | None,
        on_text: OnText | None = None,
        sample: bool = False,
    ) -> Reply: ...


def template_has_tools(tokenizer) -> bool:
    """Whether the base's chat template renders a ``tools=`` argument (Qwen3.5's does)."""
    tpl = getattr(tokenizer, "chat_template", None) or ""
    if isinstance(tpl, dict):
        tpl = " ".join(tpl.values())
    return "tools" in tpl


def _plain_messages(messages: list[dict], tools: list[dict] | None) -> list[dict]:
    """Messages for a template that knows nothing of tools: the tool in the system text, calls kept
    as the text the model wrote, tool results as user turns."""
    out = []
    for m in messages:
        m = dict(m)
        if m["role"] == "system" and tools:
            m["content"] += (
                "\n\n# Tools\nCall a function by writing:\n<tool_call>\n<function=NAME>\n"
                "<parameter=NAME>\nVALUE\n</parameter>\n</function>\n</tool_call>\n<tools>\n"
                + "\n".join(json.dumps(t) for t in tools)
                + "\n</tools>"
            )
        if m["role"] == "tool":
            m = {"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"}
        if m["role"] == "assistant" and "tool_calls" in m:
            m = {"role": "assistant", "content": m.get("raw", m.get("content", ""))}
        out.append(m)
    return out


def render_prompt(tokenizer, messages: list[dict], tools: list[dict] | None) -> str:
    """The prompt text, through the base's own chat template, ending with the assistant's header."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise QwenGPUError("the tokenizer has no chat template (advanced mode needs a chat model)")
    kwargs = {"add_generation_prompt": True, "tokenize": False, "enable_thinking": False}
    if tools and template_has_tools(tokenizer):
        msgs = [{k: v for k, v in m.items() if k != "raw"} for m in messages]
        return tokenizer.apply_chat_template(msgs, tools=tools, **kwargs)
    return tokenizer.apply_chat_template(_plain_messages(messages, tools), **kwargs)


def _clean(text: str) -> str:
    for mark in END_MARKERS:
        i = text.find(mark)
        if i >= 0:
            text = text[:i]
    return text


def _stop_ids(tokenizer) -> list[int]:
    ids = []
    for t in END_MARKERS:
        i = tokenizer.convert_tokens_to_ids(t)
        if isinstance(i, int) and i != tokenizer.unk_token_id and i >= 0:
            ids.append(i)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


class ModelReplier:
    """Greedy generation with stock ``transformers`` ``generate``, text streamed as it decodes."""

    def __init__(self, model, tokenizer, max_new_tokens: int = 1024) -> None:
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens

    def reply(
        self,
        messages: list[dict],
        tools: list[dict] | None,
        on_text: OnText | None = None,
        sample: bool = False,
    ) -> Reply:
        import torch
        from transformers import TextStreamer

        tok = self.tokenizer
        prompt = render_prompt(tok, messages, tools)
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        shown: list[str] = []

        class _Stream(TextStreamer):
            def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
                done = "".join(shown)
                if any(m in done for m in END_MARKERS):
                    return
                shown.append(text)
                if on_text is not None:
                    on_text(_clean(text))

        t0 = time.perf_counter()
        stops = _stop_ids(tok)
        gen_kw = {"do_sample": True, "temperature": 0.7, "top_p": 0.95} if sample else {"do_sample": False}
        with torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=self.max_new_tokens,
                eos_token_id=stops,
                pad_token_id=stops[0] if stops else None,
                streamer=_Stream(tok, skip_prompt=True, skip_special_tokens=False),
                **gen_kw,
            )
        new = out[0, ids.shape[1] :].tolist()
        dt = time.perf_counter() - t0
        text = _clean(tok.decode(new, skip_special_tokens=False))
        cut = not (new and new[-1] in stops)
        return Reply(
            text,
            {
                "tokens": len(new),
                "prompt_tokens": int(ids.shape[1]),
                "seconds": round(dt, 3),
                "tokens_per_second": round(len(new) / max(dt, 1e-9), 1),
                "cut_off": cut,
                "mode": "generated",
            },
        )


class ForcedReplier:
    """Teacher forcing: each reply is the next of ``replies``, tokenized and run through the model's
    forward after the real prompt, exactly where generation would have written it.

    It proves the path a real model takes (template, tools, tokenization, the model's forward on
    the whole conversation) without real weights, whose sampled text would be noise. The returned
    text is the given text; ``stats['argmax_agreement']`` says how many of its tokens the model's
    own argmax would have written (near zero for random weights)."""

    def __init__(self, model, tokenizer, replies: list[str]) -> None:
        self.model, self.tokenizer, self.replies = model, tokenizer, list(replies)

    def reply(
        self,
        messages: list[dict],
        tools: list[dict] | None,
        on_text: OnText | None = None,
        sample: bool = False,
    ) -> Reply:
        import torch

        if not self.replies:
            raise QwenGPUError("the teacher-forced replier has no more replies for this conversation")
        text = fill_values(self.replies.pop(0), messages)
        tok = self.tokenizer
        t0 = time.perf_counter()
        prompt_ids = tok(render_prompt(tok, messages, tools), add_special_tokens=False).input_ids
        reply_ids = tok(text, add_special_tokens=False).input_ids
        stops = _stop_ids(tok)
        ids = torch.tensor([prompt_ids + reply_ids + stops[:1]])
        n = len(prompt_ids)
        with torch.no_grad():  # the head only where the reply's tokens are predicted
            logits = self.model(input_ids=ids, logits_to_keep=ids.shape[1] - n + 1).logits[0]
        if not torch.isfinite(logits).all():
            raise QwenGPUError("the model's forward gave non-finite logits on the forced reply")
        pred = logits[:-1].argmax(-1).tolist()
        agree = sum(int(p == t) for p, t in zip(pred, ids[0, n:].tolist(), strict=True))
        if on_text is not None:
            prev = ""
            for k in range(1, len(reply_ids) + 1):  # stream as decoding would: token by token
                cur = tok.decode(reply_ids[:k], skip_special_tokens=False)
                if not cur.endswith("\ufffd"):
                    on_text(cur[len(prev) :])
                    prev = cur
        dt = time.perf_counter() - t0
        return Reply(
            text,
            {
                "tokens": len(reply_ids) + 1,
                "prompt_tokens": n,
                "seconds": round(dt, 3),
                "tokens_per_second": round((len(reply_ids) + 1) / max(dt, 1e-9), 1),
                "argmax_agreement": agree,
                "cut_off": False,
                "mode": "teacher-forced",
            },
        )


def fill_values(text: str, messages: list[dict]) -> str:
    """Replace ``{values}`` in a given reply with the values of the last successful tool result in
    the conversation (comma-separated, in output order): a scripted model that transcribes what the
    GPU computed perfectly (``bench/advanced/reference_replies.json``)."""
    if "{values}" not in text:
        return text
    for m in reversed(messages):
        if m["role"] == "tool" and m["content"].startswith("The kernel ran exactly."):
            vals: list[str] = []
            for line in m["content"].splitlines()[1:]:
                name, _, rest = line.partition(" = ")
                if rest:
                    vals += [json.dumps(v) for v in json.loads(rest)]
            return text.replace("{values}", ", ".join(vals))
    return text.replace("{values}", "(no result)")


class ScriptedReplier:
    """No model: the next of ``replies``, verbatim (for ``eval`` tests and the CLI's ``--replies``)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)

    def reply(
        self,
        messages: list[dict],
        tools: list[dict] | None,
        on_text: OnText | None = None,
        sample: bool = False,
    ) -> Reply:
        if not self.replies:
            raise QwenGPUError("the scripted replier has no more replies for this conversation")
        text = fill_values(self.replies.pop(0), messages)
        if on_text is not None:
            on_text(text)
        return Reply(text, {"tokens": 0, "seconds": 0.0, "cut_off": False, "mode": "scripted"})


def is_mount(model_dir: str) -> bool:
    """Whether ``model_dir`` is a mounted checkpoint (``qwengpu build`` wrote its sidecar)."""
    from pathlib import Path

    return (Path(model_dir) / "qwengpu_mount.json").is_file()


def load_chat_model(model_dir: str, shared_mount: bool = True, device: str = "cpu", dtype: str | None = None):
    """A chat model and its tokenizer with stock ``transformers`` (no custom code), float32.

    For a mounted checkpoint (``shared_mount``) the text runs on the mount's text runtime
    (:mod:`qwengpu.runtime.mounted_text`: its base layers, the machine layers skipped after the
    checks that make them add exactly 0; proven equal to the stock forward of the whole mount),
    and each launch as its own sequence through :mod:`qwengpu.runtime.mounted`."""
    from pathlib import Path

    p = Path(model_dir)
    if not (p / "config.json").is_file():
        raise QwenGPUError(f"{model_dir}: not a model folder (no config.json)")
    if shared_mount and is_mount(model_dir):
        from transformers import AutoTokenizer

        from qwengpu.runtime.mounted_text import load_mount_text

        return load_mount_text(p, device=device, dtype=dtype), AutoTokenizer.from_pretrained(str(p))
    from qwengpu.runtime.lean import check_device_dtype

    check_device_dtype(device, dtype or "float32")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(p))
        model = AutoModelForCausalLM.from_pretrained(str(p), dtype=getattr(torch, dtype or "float32"))
        model = model.to(device)
    except (OSError, ValueError, KeyError) as e:
        raise QwenGPUError(f"{model_dir}: cannot load the model or its tokenizer: {e}") from e
    model.eval()
    return model, tok
