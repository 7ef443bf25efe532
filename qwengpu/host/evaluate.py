"""Score advanced mode on a question set (``bench/advanced/questions.jsonl``).

How an answer is scored (exactly; no tolerance):

1. The text of the final answer is searched for the last line that starts with ``Answer:`` (any
   case, markdown bold allowed). Without one, the last line that holds a number is used.
2. From that line, numbers are read in order (``-12``, ``3.5``, ``1e-3``). For a one-number answer
   a thousands separator (``500,500``) is allowed and the first number counts; for a list
   (sorting, scans, matrices) the numbers must be exactly the expected list, in order.
3. An integer answer is right when each number equals the true integer exactly (``500500.0`` is
   read as the rational 500500 and counts; ``500500.5`` does not).
4. A float32 answer is right when the decimal, rounded once and correctly to float32, has the same
   32 bits as the true float32 result (so ``1.0000001`` and ``1.00000012`` both name 0x3f800001).

A run "ran but wrong" when at least one kernel ran to completion and the answer is still wrong:
the share of such runs is the figure that exact execution must not hide. Separately,
"program right" says whether the last kernel that ran computed the true answer at all (one output
buffer, or all in order, equal to it; integers exactly, float32 by bits) -- whether the program
was right, whatever the final text made of it.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

from qwengpu.errors import QwenGPUError
from qwengpu.host.session import Session, Turn

_NUM = re.compile(r"[-−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_ANSWER = re.compile(r"^\W*answer\W*:\s*(.*)$", re.I | re.M)


def load_questions(path: str | Path) -> list[dict]:
    """The questions of a set folder (``questions.jsonl`` inside) or of one JSONL file."""
    p = Path(path)
    f = p / "questions.jsonl" if p.is_dir() else p
    if not f.is_file():
        raise QwenGPUError(f"{path}: no questions.jsonl (make it with bench/advanced/make_questions.py)")
    out = []
    for i, line in enumerate(f.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            raise QwenGPUError(f"{f}:{i}: not JSON ({e.msg})") from e
        for k in ("id", "question", "type", "answer"):
            if k not in q:
                raise QwenGPUError(f"{f}:{i}: a question needs {k!r}")
        out.append(q)
    return out


def extract_numbers(answer: str, count: int) -> list[str]:
    """The numbers of the answer line (see the module docstring), as text."""
    lines = _ANSWER.findall(answer)
    if lines:
        line = lines[-1]
    else:
        with_nums = [ln for ln in answer.splitlines() if _NUM.search(ln)]
        line = with_nums[-1] if with_nums else ""
    line = line.replace("−", "-").replace("**", "")
    if count == 1:
        line = re.sub(r"(?<=\d),(?=\d{3}\b)", "", line)
        nums = _NUM.findall(line)
        return nums[:1]
    return _NUM.findall(line)


def _f32_bits(text: str) -> int:
    from qwengpu.spec import decimal_to_f32_bits

    return decimal_to_f32_bits(text)


def score(question: dict, answer: str) -> tuple[bool, list[str]]:
    """Whether ``answer`` gives the question's true answer exactly, and the numbers read from it."""
    want = question["answer"]
    got = extract_numbers(answer, len(want))
    if len(got) != len(want):
        return False, got
    if question["type"] == "int":
        return all(Fraction(g) == int(w) for g, w in zip(got, want, strict=True)), got
    if question["type"] == "f32":
        bits = [int(b, 16) for b in question["bits"]]
        return all(_f32_bits(g) == b for g, b in zip(got, bits, strict=True)), got
    raise QwenGPUError(f"question {question['id']}: unknown answer type {question['type']!r}")


def _same(q: dict, got: list) -> bool:
    if q["type"] == "int":
        return all(isinstance(g, int) and g == int(w) for g, w in zip(got, q["answer"], strict=True))
    import numpy as np

    def bits(v) -> int:
        if isinstance(v, str):  # "inf", "-inf" or NaN bits "0x7fffffff"
            return int(v, 16) if v.startswith("0x") else int(np.float32(v).view(np.uint32))
        return int(np.float32(v).view(np.uint32))

    return all(bits(g) == int(b, 16) for g, b in zip(got, q["bits"], strict=True))


def program_right(question: dict, outputs: dict[str, list] | None) -> bool:
    """Whether the kernel computed the true answer, whatever the final text says: one output buffer
    (or all of them, in order) holds exactly the expected numbers; for a one-number answer, any
    output value equal to it (integers exactly, float32 by bits)."""
    if not outputs:
        return False
    n = len(question["answer"])
    flat = [v for vs in outputs.values() for v in vs]
    if n == 1:
        return any(_same(question, [v]) for v in flat)
    cands = [list(vs) for vs in outputs.values()] + [flat]
    return any(len(c) == n and _same(question, c) for c in cands)


def run_eval(
    questions: list[dict],
    make_session: Callable[[dict, str], Session],
    modes: list[str],
    on_result: Callable[[dict], None] | None = None,
) -> dict:
    """Ask every question in every mode (``gpu``, ``no-gpu``) with a fresh session; score each."""
    results = []
    for mode in modes:
        for q in questions:
            sess = make_session(q, mode)
            t0 = time.perf_counter()
            try:
                turn: Turn | None = sess.ask(q["question"])
                error = None
            except QwenGPUError as e:
                turn, error = None, str(e)
            dt = time.perf_counter() - t0
            right, got = score(q, turn.answer) if turn is not None else (False, [])
            r = {
                "id": q["id"],
                "category": q.get("category", ""),
                "mode": mode,
                "correct": right,
                "read": got,
                "expected": q["answer"],
                "seconds": round(dt, 3),
                "error": error,
            }
            if turn is not None:
                r.update(
                    {
                        "status": turn.status,
                        "attempts": len(turn.attempts),
                        "first_try": right and len(turn.attempts) == 1 and turn.attempts[0].ok,
                        "ran": turn.computed is not None,
                        "ran_but_wrong": turn.computed is not None and not right,
                        "program_right": program_right(q, turn.computed.outputs if turn.computed else None),
                        "turn": turn.as_json(),
                    }
                )
            results.append(r)
            if on_result is not None:
                on_result(r)
    return {"questions": len(questions), "modes": modes, "summary": summarize(results), "results": results}


def summarize(results: list[dict]) -> dict:
    """Per mode: first-try and after-retry accuracy, ran-but-wrong share, time per question."""
    out: dict = {}
    for mode in sorted({r["mode"] for r in results}):
        rs = [r for r in results if r["mode"] == mode]
        n = len(rs)
        secs = [r["seconds"] for r in rs]
        s = {
            "n": n,
            "correct": sum(r["correct"] for r in rs),
            "accuracy": round(sum(r["correct"] for r in rs) / n, 4) if n else 0.0,
            "seconds_mean": round(statistics.fmean(secs), 3) if secs else 0.0,
            "seconds_median": round(statistics.median(secs), 3) if secs else 0.0,
            "errors": sum(r["error"] is not None for r in rs),
        }
        if mode == "gpu":
            s.update(
                {
                    "first_try_correct": sum(r.get("first_try", False) for r in rs),
                    "first_try_accuracy": round(sum(r.get("first_try", False) for r in rs) / n, 4)
                    if n
                    else 0,
                    "after_retry_accuracy": s["accuracy"],
                    "ran": sum(r.get("ran", False) for r in rs),
                    "ran_but_wrong": sum(r.get("ran_but_wrong", False) for r in rs),
                    "ran_but_wrong_share": round(sum(r.get("ran_but_wrong", False) for r in rs) / n, 4)
                    if n
                    else 0,
                    "no_kernel": sum(r.get("status") == "no_kernel" for r in rs),
                    "program_right": sum(r.get("program_right", False) for r in rs),
                }
            )
        out[mode] = s
    if "gpu" in out and "no-gpu" in out:
        out["gpu_minus_no_gpu_accuracy"] = round(out["gpu"]["accuracy"] - out["no-gpu"]["accuracy"], 4)
    return out


def load_replies(path: str | Path) -> dict[str, dict[str, list[str]]]:
    """A fixed file of replies: ``{question id: {"gpu": [reply, ...], "no-gpu": [reply, ...]}}``.

    For ``ask``/``chat`` the key ``"*"`` (or the question text) holds the replies for any question."""
    p = Path(path)
    try:
        obj = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise QwenGPUError(f"{path}: cannot read the replies file: {e}") from e
    if not isinstance(obj, dict) or not all(isinstance(v, dict) for v in obj.values()):
        raise QwenGPUError(f'{path}: a replies file maps an id to {{"gpu": [...], "no-gpu": [...]}}')
    for k, v in obj.items():
        for mode, lst in v.items():
            if not (isinstance(lst, list) and all(isinstance(x, str) for x in lst)):
                raise QwenGPUError(f"{path}: replies for {k!r} / {mode!r} must be a list of strings")
    return obj
