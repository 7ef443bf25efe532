"""``qwengpu ask``, ``chat`` and ``eval``: argument handling and wiring (the CLI's parsers call these).

Everything a user can get wrong (no model, an unreadable replies file, an empty question) ends as
a :class:`QwenGPUError` with a message; the CLI prints it without a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from qwengpu.errors import CheckpointError, QwenGPUError

NO_MODEL = (
    "{cmd} needs --model DIR, the Qwen3.5 chat checkpoint that writes the kernel and the answer: pass "
    "--model DIR (a mount from `qwengpu build` also runs the launch inside itself), or, without a model, "
    "--replies FILE to replay fixed replies (a JSON list of reply strings) with --engine interp or "
    "--engine machine"
)

ASK_EPILOG = """how it works:
  Qwen gets the question, a system prompt (the NVRTC dialect, the machine's limits, the launch
  spec format) and a tool run_cuda(source, launch) through its own chat template. When it calls
  the tool, the host compiles the CUDA, launches it -- by default inside the mounted model, as its
  own sequence -- and the values read back from the model's tokens go back as the tool result.
  Compile errors, bad launch specs, machine limits and faults go back too, up to --retries times.
  The GPU runs the program exactly; it cannot know whether the program is the right one, so the
  computed values are always shown beside the answer.

examples:
  qwengpu ask "What is the sum of the squares of 1..100?" --model ~/models/qwen3.5-2b-gpu
  qwengpu ask "..." --model DIR --engine interp      # dry run: the kernel on the reference interpreter
  qwengpu ask "..." --model DIR --no-gpu             # the same model without the tool, for comparison
  qwengpu ask "..." --model DIR --json               # one JSON object: attempts, kernels, outputs, answer
  qwengpu ask "What is 6 * 7?" --replies replies.json --engine interp
      # no model: replay fixed replies (tests, demos); replies.json is a JSON list of reply
      # strings, {values} in a reply is filled with the launch's outputs; the kernel runs on the
      # interpreter (--engine machine: in the standalone machine model)

without --model there is no Qwen to write the kernel: pass --model DIR (a Qwen3.5 chat checkpoint;
a mount from `qwengpu build` also runs the launch inside itself), or --replies FILE as above.
"""

EVAL_EPILOG = """scoring: the number(s) on the final answer's last "Answer:" line are compared with the
true answer exactly -- integers as exact rationals, float32 answers by their 32 bits after one
correct rounding of the decimal. See bench/advanced/README.md.

examples:
  qwengpu eval bench/advanced --model DIR                  # GPU mode and --no-gpu mode, a table
  qwengpu eval bench/advanced --model DIR --modes gpu -k f32 --json
"""


def _common(p: argparse.ArgumentParser) -> None:
    from qwengpu.simt.interp import DEFAULT_MAX_STEPS

    p.add_argument(
        "--model",
        metavar="DIR",
        help="the chat checkpoint: a Qwen3.5 base with the machine "
        "mounted (its own tokenizer and chat template are used)",
    )
    p.add_argument(
        "--engine",
        default="model",
        choices=["model", "machine", "interp"],
        help="where the kernel runs: inside the mounted model (default), inside the standalone "
        "machine model, or on the reference interpreter (a quick dry run, labelled as such)",
    )
    p.add_argument(
        "--retries",
        type=int,
        default=2,
        metavar="N",
        help="how many failed attempts are sent back to Qwen to fix (default 2)",
    )
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=1024,
        metavar="N",
        help="longest reply Qwen may write (default 1024)",
    )
    p.add_argument(
        "--max-steps",
        type=int,
        default=min(DEFAULT_MAX_STEPS, 20_000),
        metavar="N",
        help="stop a runaway kernel after about N warp instructions (default 20,000)",
    )
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda", "mps"],
                   help="where Qwen's text runs (default cpu; refused when absent); launches run float32")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"],
                   help="Qwen's text dtype (default: the base's own for a mount, bfloat16 for Qwen3.5; "
                   "float16 is refused)")
    p.add_argument("--no-gpu", action="store_true", help="answer without the tool, for comparison")
    p.add_argument(
        "--replies",
        metavar="FILE",
        help="replay fixed replies instead of generating (teacher-forced through --model when "
        "given, else scripted); for tests and demos",
    )


def add_parsers(sub) -> None:
    """Register ``ask``, ``chat`` and ``eval`` on the CLI's sub-parser set."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "ask",
        help="advanced mode: Qwen writes a CUDA kernel for a question and runs it",
        description="Ask Qwen a question; it may write a CUDA kernel that runs exactly on the "
        "GPU in its own layers, then answers from the result.",
        epilog=ASK_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("question", help="the question (quote it)")
    _common(p)
    p.add_argument("--show-trace", action="store_true", help="print every lane-group pass the model wrote")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the live view")

    p = sub.add_parser(
        "chat",
        help="advanced mode as a conversation (/retry, /trace, /help, /quit)",
        description="A conversation with Qwen and its GPU; history is kept between turns.",
        epilog=ASK_EPILOG,
        formatter_class=fmt,
    )
    _common(p)
    p.add_argument("--show-trace", action="store_true", help="print every lane-group pass after each launch")

    p = sub.add_parser(
        "eval",
        help="score advanced mode on a question set (first try, after retries, no GPU)",
        description="Ask every question of a set, score the answers exactly, and compare "
        "with the same model answering without the GPU.",
        epilog=EVAL_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("dir", help="question set folder (questions.jsonl inside), e.g. bench/advanced")
    _common(p)
    p.add_argument("--modes", default="gpu,no-gpu", help="comma-separated: gpu, no-gpu (default both)")
    p.add_argument("-k", metavar="SUBSTR", help="only questions whose id contains SUBSTR")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N questions")
    p.add_argument("--out", metavar="FILE", help="also write the full results JSON here")
    p.add_argument("--json", action="store_true", help="print one JSON object (summary and every result)")


def _load_model(args):
    if not args.model:
        return None, None
    from qwengpu.host.repliers import load_chat_model

    return load_chat_model(args.model, device=getattr(args, "device", "cpu"),
                           dtype=getattr(args, "dtype", None))


def _threads() -> None:
    n = os.environ.get("OMP_NUM_THREADS")
    if n and n.isdigit():
        import torch

        torch.set_num_threads(int(n))


def _check_model_dir(model: str | None) -> None:
    """A ``--model`` that is not a model folder is a checkpoint fault (exit 7), as in ``run`` and
    ``verify``; said before anything is loaded."""
    if model is None:
        return
    m = Path(model)
    if not m.is_dir():
        raise CheckpointError(f"{model}: not a model folder (no such folder)")
    if not (m / "config.json").is_file():
        raise CheckpointError(f"{model}: not a model folder (no config.json)")


def _check_engine(engine: str, model: str | None) -> None:
    """``--engine model`` needs a mounted checkpoint: the launch runs inside it."""
    if engine != "model":
        return
    if not model:
        raise QwenGPUError(
            "--engine model runs the launch inside the mounted checkpoint given by --model DIR; "
            "with --replies and no model, use --engine interp or --engine machine"
        )
    from qwengpu.host.repliers import is_mount

    if Path(model).is_dir() and not is_mount(model):
        raise CheckpointError(
            f"{model} is not a mounted checkpoint (no qwengpu_mount.json; make one with "
            "`qwengpu build`): use --engine machine to run kernels on the standalone machine"
        )


def _launcher(args):
    from qwengpu.host.launcher import RunnerLauncher

    if args.no_gpu:
        return None
    _check_engine(args.engine, args.model)
    return RunnerLauncher(engine=args.engine, model_dir=args.model, max_steps=args.max_steps)


def _ask_replies(path: str | None, mode: str) -> list[str] | None:
    if path is None:
        return None
    p = Path(path)
    try:
        obj = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise QwenGPUError(f"{path}: cannot read the replies file: {e}") from e
    if isinstance(obj, dict):
        obj = obj.get(mode, obj.get("*", {}).get(mode) if isinstance(obj.get("*"), dict) else None)
    if not (isinstance(obj, list) and all(isinstance(x, str) for x in obj)):
        raise QwenGPUError(
            f'{path}: expected a JSON list of reply strings (or {{"gpu": [...], "no-gpu": [...]}})'
        )
    return obj


def _replier(args, model, tok, replies: list[str] | None):
    from qwengpu.host.repliers import ForcedReplier, ModelReplier, ScriptedReplier

    if replies is not None:
        return ForcedReplier(model, tok, replies) if model is not None else ScriptedReplier(replies)
    if model is None:
        raise QwenGPUError("advanced mode needs --model DIR (a Qwen3.5 chat checkpoint with its tokenizer)")
    return ModelReplier(model, tok, max_new_tokens=args.max_new_tokens)


def _check_out(path: str | None) -> None:
    """``--out FILE`` must be writable before a long evaluation starts, not found unwritable after."""
    if path is None:
        return
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise QwenGPUError(f"--out {path}: is a folder; give a file name")
    if not parent.is_dir():
        raise QwenGPUError(f"--out {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise QwenGPUError(f"--out {path}: the folder {parent} is not writable")


def _write_json(path: str, obj: dict) -> None:
    """Write ``obj`` to ``path`` atomically (a temporary file beside it, then a rename), with the
    mode a plain open() would give (mkstemp's files are private)."""
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as e:
        raise QwenGPUError(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, out)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise QwenGPUError(f"cannot write {path}: {e.strerror}") from None


def _check_args(args) -> None:
    if args.retries < 0:
        raise QwenGPUError("--retries must be 0 or more")
    if args.max_new_tokens < 1 or args.max_steps < 1:
        from qwengpu.errors import UsageError

        raise UsageError("--max-new-tokens and --max-steps must be positive integers")


def cmd_ask(args) -> int:
    from qwengpu.host.session import Events, Session

    _check_args(args)
    question = args.question.strip()
    if not question:
        raise QwenGPUError("the question is empty")
    mode = "no-gpu" if args.no_gpu else "gpu"
    replies = _ask_replies(args.replies, mode)
    if replies is None and not args.model:
        raise QwenGPUError(NO_MODEL.format(cmd="ask"))
    launcher = _launcher(args)  # a folder that is not a mount: said first, with how to make one
    _check_model_dir(args.model)
    _threads()
    model, tok = _load_model(args)
    replier = _replier(args, model, tok, replies)
    if args.json:
        sess = Session(replier, launcher, retries=args.retries, events=Events(), trace=args.show_trace)
        turn = sess.ask(question)
        print(json.dumps(turn.as_json()))
        return 0
    from qwengpu.host.view import ENGINE_LABEL, ConsoleView

    view = ConsoleView(show_trace=args.show_trace)
    if launcher is not None and launcher.engine == "interp":
        view.console.print(f"[bold yellow]{ENGINE_LABEL['interp']}[/]")
    view.console.print(f"[bold]you[/] › {question}")
    sess = Session(replier, launcher, retries=args.retries, events=view, trace=args.show_trace)
    sess.ask(question)
    return 0


CHAT_HELP = """commands:
  /retry   ask the last question again (sampled, so the model may write another kernel)
  /trace   show the trace of the last launch (every lane-group pass the model wrote)
  /help    this help
  /quit    leave (Ctrl-D too)"""


def cmd_chat(args) -> int:
    from qwengpu.host.session import Session
    from qwengpu.host.view import ENGINE_SHORT, ConsoleView

    _check_args(args)
    mode = "no-gpu" if args.no_gpu else "gpu"
    replies = _ask_replies(args.replies, mode)
    if replies is None and not args.model:
        raise QwenGPUError(NO_MODEL.format(cmd="chat"))
    launcher = _launcher(args)  # a folder that is not a mount: said first, with how to make one
    _check_model_dir(args.model)
    _threads()
    model, tok = _load_model(args)
    replier = _replier(args, model, tok, replies)
    view = ConsoleView(show_trace=args.show_trace)
    con = view.console
    sess = Session(replier, launcher, retries=args.retries, events=view, trace=True)
    where = ENGINE_SHORT.get(launcher.engine, "") if launcher is not None else "nowhere (--no-gpu)"
    con.print(f"[bold]qwenGPU chat[/] — kernels run {where}. /help for commands.")
    while True:
        try:
            line = con.input("[bold]you[/] › ").strip()
        except EOFError:
            con.print()
            return 0
        if not line:
            continue
        if line.startswith("/"):
            cmd = line.split()[0].lower()
            if cmd in ("/quit", "/exit", "/q"):
                return 0
            if cmd == "/help":
                con.print(CHAT_HELP)
            elif cmd == "/trace":
                view.show_last_trace()
            elif cmd == "/retry":
                try:
                    if sess.retry() is None:
                        con.print("nothing to retry yet")
                except QwenGPUError as e:
                    con.print(f"[red]error:[/] {e}")
            else:
                con.print(f"unknown command {cmd}; /help lists them")
            continue
        try:
            sess.ask(line)
        except QwenGPUError as e:
            con.print(f"[red]error:[/] {e}")


def cmd_eval(args) -> int:
    from qwengpu.host.evaluate import load_questions, load_replies, run_eval
    from qwengpu.host.launcher import RunnerLauncher
    from qwengpu.host.repliers import ForcedReplier, ModelReplier, ScriptedReplier
    from qwengpu.host.session import Session

    _check_args(args)
    _check_out(args.out)  # before the evaluation runs, not after
    qs = load_questions(args.dir)
    if args.k:
        qs = [q for q in qs if args.k in q["id"]]
    if args.limit is not None:
        qs = qs[: args.limit]
    if not qs:
        raise QwenGPUError("no questions selected")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.no_gpu:
        modes = ["no-gpu"]
    bad = [m for m in modes if m not in ("gpu", "no-gpu")]
    if bad or not modes:
        raise QwenGPUError(f"--modes takes gpu and/or no-gpu, not {', '.join(bad) or 'nothing'}")
    replies = load_replies(args.replies) if args.replies else None
    if replies is None and not args.model:
        raise QwenGPUError(NO_MODEL.format(cmd="eval").replace("(a JSON list of reply strings)",
                                                            "(bench/advanced/reference_replies.json)"))
    if "gpu" in modes:
        _check_engine(args.engine, args.model)
    _check_model_dir(args.model)
    _threads()
    model, tok = _load_model(args)

    def make_session(q: dict, mode: str) -> Session:
        launcher = (
            RunnerLauncher(engine=args.engine, model_dir=args.model, max_steps=args.max_steps)
            if mode == "gpu"
            else None
        )
        if replies is not None:
            if q["id"] not in replies or mode not in replies[q["id"]]:
                raise QwenGPUError(f"the replies file has no {mode!r} replies for question {q['id']!r}")
            given = replies[q["id"]][mode]
            rep = ForcedReplier(model, tok, given) if model is not None else ScriptedReplier(given)
        else:
            rep = ModelReplier(model, tok, max_new_tokens=args.max_new_tokens)
        return Session(rep, launcher, retries=args.retries)

    def show(r: dict) -> None:
        if args.json or getattr(args, "verbosity", 0) < 0:  # -q: the summary only
            return
        mark = "right" if r["correct"] else ("ERROR" if r["error"] else "wrong")
        extra = r["error"] or f"read {r['read']}, true {r['expected']}"
        tries = f"{r.get('attempts', 0)} att" if r["mode"] == "gpu" else ""
        print(
            f"{r['mode']:7s} {mark:5s} {r['id']:18s} {r.get('status', ''):10s} {tries:6s} "
            f"{r['seconds']:7.2f}s  {extra}",
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )

    res = run_eval(qs, make_session, modes, on_result=show)
    res["engine"] = args.engine
    res["model"] = args.model
    res["replies"] = args.replies
    if args.out:
        _write_json(args.out, res)
    if args.json:
        print(json.dumps(res))
        return 0
    s = res["summary"]
    print()
    if "gpu" in s:
        g = s["gpu"]
        print(
            f"gpu     ({args.engine}): first try {g['first_try_correct']}/{g['n']} = "
            f"{g['first_try_accuracy']:.1%}, after retries {g['correct']}/{g['n']} = "
            f"{g['after_retry_accuracy']:.1%}; a kernel ran in {g['ran']}, "
            f"ran but wrong {g['ran_but_wrong']} ({g['ran_but_wrong_share']:.1%}), "
            f"no kernel {g['no_kernel']}; the program computed the true answer in {g['program_right']}; "
            f"{g['seconds_mean']:.2f} s per question"
        )
    if "no-gpu" in s:
        n = s["no-gpu"]
        print(
            f"no-gpu: {n['correct']}/{n['n']} = {n['accuracy']:.1%}; {n['seconds_mean']:.2f} s per question"
        )
    if "gpu_minus_no_gpu_accuracy" in s:
        print(f"value of the GPU: {s['gpu_minus_no_gpu_accuracy']:+.1%} accuracy")
    return 0
