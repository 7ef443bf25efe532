"""The evaluation set and its exact scoring (numbers read from the answer; float32 by bits)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qwengpu.host.evaluate import extract_numbers, load_questions, run_eval, score, summarize
from qwengpu.host.repliers import ScriptedReplier
from qwengpu.host.session import Session

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "bench" / "advanced"


def test_question_set_is_in_sync_with_its_generator():
    r = subprocess.run(
        [sys.executable, str(SET / "make_questions.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_question_set_covers_the_categories_and_is_large_enough():
    qs = load_questions(SET)
    assert len(qs) >= 30 and len({q["id"] for q in qs}) == len(qs)
    cats = {q["category"] for q in qs}
    for c in ("int", "float", "reduction", "scan", "counting", "sorting", "number theory", "bits", "matrix"):
        assert c in cats
    by_id = {q["id"]: q for q in qs}
    # a few answers checked here against facts known independently of the generator
    assert by_id["sum_1_1000"]["answer"] == [500500]
    assert by_id["primes_below_1000"]["answer"] == [168]
    assert by_id["fib_40"]["answer"] == [102334155]
    assert by_id["lcm_1_20"]["answer"] == [232792560]
    assert by_id["f32_third"]["bits"] == ["0x3eaaaaab"]
    assert by_id["f32_tenth_x10"]["bits"] == ["0x3f800001"]  # 0.1f added ten times is not 1.0f


def test_every_true_answer_scores_as_right_and_an_off_by_one_as_wrong():
    for q in load_questions(SET):
        text = "Answer: " + ", ".join(str(v) for v in q["answer"])
        assert score(q, text)[0], q["id"]
        if q["type"] == "int":
            off = [*q["answer"][:-1], q["answer"][-1] + 1]
        else:
            x = np.array([int(q["bits"][0], 16) + 1], dtype=np.uint32).view(np.float32)[0]
            off = [repr(float(x))]
        assert not score(q, "Answer: " + ", ".join(str(v) for v in off))[0], q["id"]


def test_integer_reading_rules():
    q = {"id": "x", "type": "int", "answer": [500500]}
    assert score(q, "The total is **500,500**.\nAnswer: 500,500")[0]
    assert score(q, "answer: 500500.0")[0]
    assert not score(q, "Answer: 500500.5")[0]
    assert score(q, "so the sum is 500500")[0]  # no Answer: line -> the last line with a number
    assert not score(q, "Answer: 500501 (not 500500)")[0]  # the first number on the answer line counts
    assert extract_numbers("Answer: -12", 1) == ["-12"]


def test_float_answers_compare_by_float32_bits():
    q = {"id": "f", "type": "f32", "answer": ["1.0000001"], "bits": ["0x3f800001"]}
    assert score(q, "Answer: 1.0000001")[0]
    assert score(q, "Answer: 1.00000012")[0]  # another decimal naming the same float32
    assert not score(q, "Answer: 1.0")[0]
    assert not score(q, "Answer: 1.0000002")[0]  # 0x3f800002


def test_list_answers_must_match_in_order():
    q = {"id": "s", "type": "int", "answer": [1, 2, 3]}
    assert score(q, "Sorted: Answer: [1, 2, 3]")[0]
    assert not score(q, "Answer: [1, 3, 2]")[0]
    assert not score(q, "Answer: 1, 2")[0]


def test_eval_summary_counts_first_try_retries_and_ran_but_wrong():
    qs = [
        {"id": "a", "type": "int", "answer": [7], "question": "3+4?"},
        {"id": "b", "type": "int", "answer": [8], "question": "4+4?"},
    ]

    def make(q: dict, mode: str) -> Session:
        return Session(ScriptedReplier(["Answer: 7"]), None)

    res = run_eval(qs, make, ["no-gpu"])
    s = res["summary"]["no-gpu"]
    assert (s["n"], s["correct"], s["accuracy"]) == (2, 1, 0.5)
    fake = [
        {
            "mode": "gpu",
            "correct": True,
            "first_try": True,
            "ran": True,
            "ran_but_wrong": False,
            "seconds": 1.0,
            "error": None,
            "status": "computed",
        },
        {
            "mode": "gpu",
            "correct": False,
            "first_try": False,
            "ran": True,
            "ran_but_wrong": True,
            "seconds": 3.0,
            "error": None,
            "status": "computed",
        },
        {"mode": "no-gpu", "correct": False, "seconds": 0.5, "error": None},
    ]
    g = summarize(fake)
    assert g["gpu"]["first_try_accuracy"] == 0.5 and g["gpu"]["ran_but_wrong_share"] == 0.5
    assert g["gpu"]["seconds_mean"] == 2.0 and g["gpu_minus_no_gpu_accuracy"] == 0.5


@pytest.mark.parametrize("bad", ["", "{not json", '{"id": "x"}'])
def test_bad_question_files_are_refused(tmp_path, bad):
    from qwengpu.errors import QwenGPUError

    (tmp_path / "questions.jsonl").write_text(bad + "\n" if bad else "")
    if not bad:
        assert load_questions(tmp_path) == []
        return
    with pytest.raises(QwenGPUError):
        load_questions(tmp_path)


def test_reference_replies_are_in_sync_with_their_generator():
    r = subprocess.run(
        [sys.executable, str(SET / "make_reference_replies.py"), "--check"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_question_has_a_kernel_that_computes_its_true_answer(capsys):
    """The whole set through ``qwengpu eval`` with the reference replies (hand-written kernels, an
    answer that transcribes the tool result) on the interpreter: every kernel compiles, runs and
    computes the answer make_questions.py computed in plain Python; the scoring reads it back."""
    from qwengpu.cli import main

    code = main(
        [
            "eval",
            str(SET),
            "--replies",
            str(SET / "reference_replies.json"),
            "--engine",
            "interp",
            "--modes",
            "gpu",
            "--json",
        ]
    )
    assert code == 0
    res = json.loads(capsys.readouterr().out)
    g = res["summary"]["gpu"]
    n = len(load_questions(SET))
    assert (g["n"], g["first_try_correct"], g["program_right"], g["ran_but_wrong"]) == (n, n, n, 0)


def test_every_reference_kernel_fits_the_machine():
    """Lowering, register allocation and the machine's limits accept every reference kernel (the set
    asks nothing the GPU in the weights cannot run)."""
    import tempfile

    sys.path.insert(0, str(SET))
    from make_reference_replies import KERNELS

    from qwengpu.host.launcher import prepare_spec
    from qwengpu.runtime.engine import prepare

    for qid, (src, spec) in KERNELS.items():
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "k.cu").write_text(src)
            (Path(d) / "k.json").write_text(json.dumps(prepare_spec(src, spec)))
            prog = prepare(Path(d) / "k.cu", Path(d) / "k.json")[1]
            assert 0 < len(prog.code) <= 1024, qid
