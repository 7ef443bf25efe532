"""``qwengpu ask`` / ``chat`` / ``eval`` from the command line: the JSON output, a scripted eval run
end to end on the synthetic model, and bad input (a message and a non-zero exit, no traceback)."""

from __future__ import annotations

import json

import pytest
from host_kernels import ADD, add_spec, xml_call

from qwengpu.cli import main


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_ask_json_with_teacher_forced_replies(tmp_path, chat_model_dir, capsys):
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps([xml_call(ADD, add_spec(3, 4)), "3 + 4 = 7.\nAnswer: 7"]))
    code, out, _ = _run(
        [
            "ask",
            "What is 3 + 4?",
            "--model",
            str(chat_model_dir),
            "--engine",
            "machine",
            "--replies",
            str(replies),
            "--json",
        ],
        capsys,
    )
    assert code == 0
    d = json.loads(out)
    assert d["status"] == "computed" and d["computed"] == {"out": [7]} and d["engine"] == "machine"
    assert d["dry_run"] is False
    (a,) = d["attempts"]
    assert a["source"] == ADD and a["ok"] and a["stats"]["tokens"] > 0
    assert all(r["mode"] == "teacher-forced" for r in d["replies"])


def test_ask_view_on_the_interpreter_is_labelled_a_dry_run(tmp_path, capsys):
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps({"gpu": [xml_call(ADD, add_spec(3, 4)), "Answer: 7"]}))
    code, out, _ = _run(["ask", "What is 3 + 4?", "--engine", "interp", "--replies", str(replies)], capsys)
    assert code == 0 and "DRY RUN" in out and "GPU result: out = [7]" in out


def _eval_three_questions(tmp_path, model_dir, engine, capsys) -> dict:
    """``qwengpu eval`` on three questions with scripted replies: one right first try, one whose
    kernel runs but computes the wrong thing, one fixed on the retry; returns the JSON summary."""
    qs = [
        {"id": "add", "category": "int", "question": "What is 3 + 4?", "type": "int", "answer": [7]},
        {
            "id": "sum4",
            "category": "reduction",
            "question": "What is 1 + 2 + 3 + 4?",
            "type": "int",
            "answer": [10],
        },
        {"id": "fix", "category": "int", "question": "What is 20 + 22?", "type": "int", "answer": [42]},
    ]
    (tmp_path / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    wrong = 'extern "C" __global__ void add(int a, int b, int *out) { out[0] = a * b; }'
    replies = {
        "add": {"gpu": [xml_call(ADD, add_spec(3, 4)), "Answer: 7"], "no-gpu": ["Answer: 7"]},
        "sum4": {"gpu": [xml_call(wrong, add_spec(3, 7)), "Answer: 21"], "no-gpu": ["Answer: 11"]},
        "fix": {
            "gpu": [
                xml_call(ADD.replace("a + b", "a + c"), add_spec(20, 22)),
                xml_call(ADD, add_spec(20, 22)),
                "Answer: 42",
            ],
            "no-gpu": ["Answer: 41"],
        },
    }
    rf = tmp_path / "replies.json"
    rf.write_text(json.dumps(replies))
    out_file = tmp_path / "res.json"
    code, out, _ = _run(
        [
            "eval",
            str(tmp_path),
            "--model",
            str(model_dir),
            "--engine",
            engine,
            "--replies",
            str(rf),
            "--json",
            "--out",
            str(out_file),
        ],
        capsys,
    )
    assert code == 0
    d = json.loads(out)
    s = d["summary"]
    g, n = s["gpu"], s["no-gpu"]
    assert (g["n"], g["first_try_correct"], g["correct"], g["ran_but_wrong"]) == (3, 1, 2, 1)
    assert n["correct"] == 1 and s["gpu_minus_no_gpu_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert json.loads(out_file.read_text())["summary"] == s
    return d


def test_eval_end_to_end_with_a_replies_file(tmp_path, chat_model_dir, capsys):
    _eval_three_questions(tmp_path, chat_model_dir, "machine", capsys)


@pytest.mark.slow
def test_eval_end_to_end_through_the_mounted_model(tmp_path, small_mount, capsys):
    """The same scripted eval on a synthetic *mount*: every reply teacher-forced through the mount's
    text forward, every launch inside the same mount as its own sequence (slow, ~28 s: the default
    run has the eval on the machine and ``ask``/``chat`` on the mount)."""
    d = _eval_three_questions(tmp_path, small_mount, "model", capsys)
    ran = [a for r in d["results"] if r["mode"] == "gpu" for a in r["turn"]["attempts"] if a["ok"]]
    assert len(ran) == 3 and all(a["stats"]["runtime"] == "mounted-fast" for a in ran)


@pytest.mark.parametrize(
    "argv, msg",
    [
        (["ask", "   ", "--engine", "interp", "--replies", "x.json"], "the question is empty"),
        (["ask", "hi", "--engine", "interp"], "needs --model"),
        (["ask", "hi"], "pass --model DIR"),
        (["ask", "hi", "--engine", "interp", "--replies", "/nonexistent.json"], "cannot read the replies"),
        (["ask", "hi", "--model", "/nonexistent", "--engine", "interp"], "not a model folder"),
        (["ask", "hi", "--engine", "interp", "--retries", "-1", "--replies", "x"], "--retries"),
        (["eval", "/nonexistent", "--replies", "x"], "no questions.jsonl"),
        (["ask", "hi", "--model", "bench/advanced"], "is not a mounted checkpoint"),
        (["eval", "bench/advanced", "--engine", "interp"], "eval needs --model"),
        (["eval", "bench/advanced", "--modes", "gpu,cpu", "--replies", "x"], "--modes takes"),
    ],
)
def test_bad_input_is_a_message_and_a_nonzero_exit(argv, msg, capsys):
    code, out, err = _run(argv, capsys)
    assert code != 0 and msg in err, err


def test_help_explains_the_commands(capsys):
    for cmd in ("ask", "chat", "eval"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        out = capsys.readouterr().out
        assert "--model" in out and "--engine" in out and "--retries" in out


def test_chat_keeps_history_and_handles_commands(tmp_path, monkeypatch, capsys):
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps([xml_call(ADD, add_spec(3, 4)), "Answer: 7", "Answer: 7"]))
    lines = iter(["/help", "What is 3 + 4?", "/trace", "/retry", "/bogus", "/quit"])
    monkeypatch.setattr("rich.console.Console.input", lambda self, prompt="": next(lines))
    code, out, _ = _run(["chat", "--engine", "interp", "--replies", str(replies)], capsys)
    assert code == 0
    assert "/retry" in out and "GPU result: out = [7]" in out and "ld.param" in out  # help, answer, trace
    assert "unknown command /bogus" in out


def test_the_live_view_on_a_terminal(tmp_path):
    """The terminal path of the view (status lines while a kernel is written and while it runs)."""
    import io

    from rich.console import Console

    from qwengpu.host.launcher import RunnerLauncher
    from qwengpu.host.repliers import ScriptedReplier
    from qwengpu.host.session import Session
    from qwengpu.host.view import ConsoleView

    loop = (
        'extern "C" __global__ void add(int a, int b, int *out) '
        "{ int s = 0; for (int i = 0; i < 3000; i++) s += a; out[0] = s + b; }"
    )
    buf = io.StringIO()
    view = ConsoleView(Console(file=buf, force_terminal=True, width=100))
    sess = Session(
        ScriptedReplier([xml_call(loop, add_spec(2, 1)), "Answer: 6001"]),
        RunnerLauncher(engine="interp"),
        events=view,
    )
    turn = sess.ask("What is 2 * 3000 + 1?")
    assert turn.computed.outputs == {"out": [6001]}
    text = buf.getvalue()
    assert "compiled with NVRTC" in text and "6001" in text and "<function=" not in text


@pytest.mark.slow  # 24 s; a turn through the mount: test_advanced_pipeline's success turn; the CLI's ask
# and chat wiring: the chat-model tests above
def test_ask_and_chat_through_the_mounted_model(tmp_path, small_mount, monkeypatch, capsys):
    """``ask`` and a ``chat`` turn on a synthetic mounted checkpoint: replies teacher-forced through
    the mount's own text forward, the launch inside the same mount (``--engine model``)."""
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps([xml_call(ADD, add_spec(30, 12)), "30 + 12 = 42.\nAnswer: 42"]))
    argv = ["ask", "What is 30 + 12?", "--model", str(small_mount), "--engine", "model",
            "--replies", str(replies), "--json"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    d = json.loads(out)
    assert d["status"] == "computed" and d["computed"] == {"out": [42]} and d["engine"] == "model"
    (a,) = d["attempts"]
    assert a["ok"] and a["stats"]["runtime"] == "mounted-fast" and a["stats"]["tokens"] > 0
    assert all(r["mode"] == "teacher-forced" and r["prompt_tokens"] > 500 for r in d["replies"])

    replies.write_text(json.dumps([xml_call(ADD, add_spec(3, 4)), "3 + 4 = 7.\nAnswer: 7"]))
    lines = iter(["What is 3 + 4?", "/quit"])
    monkeypatch.setattr("rich.console.Console.input", lambda self, prompt="": next(lines))
    code, out, _ = _run(["chat", "--model", str(small_mount), "--engine", "model", "--replies", str(replies)],
                        capsys)
    assert code == 0 and "GPU result: out = [7]" in out and "inside the mounted model" in out
