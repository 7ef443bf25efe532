"""Advanced mode end to end with teacher-forced replies, on a synthetic MOUNTED model (a synthetic
Qwen3.5 base with the machine built in front by ``qwengpu build``: the session fixture
``small_mount``): every reply below is fed through the mount's forward (its text runtime, proven
equal to the stock forward of the whole mount in tests/model/test_mount_stock.py) after the prompt
its own chat template renders, tools included, and every kernel really runs inside the same mount
as its own sequence: the outputs come from its argmax tokens.

Expected values come from the question's meaning (2 + 40 = 42, 1+2+3+4 = 10), never from our
interpreter. Each kernel is a handful of warp instructions.
"""

from __future__ import annotations

import io
import json

import pytest
from host_kernels import ADD, add_spec, json_call, xml_call
from rich.console import Console

from qwengpu.host.launcher import RunnerLauncher
from qwengpu.host.repliers import ForcedReplier, render_prompt
from qwengpu.host.session import NO_RETRIES_LEFT, Session
from qwengpu.host.view import ConsoleView

LOOP = (
    'extern "C" __global__ void add(int a, int b, int *out) '
    "{ while (out[0] == 0) { b = b + 1; } out[0] = b; }"
)
# sums a[0..n) with a product by mistake: exact execution of the wrong program
WRONG = 'extern "C" __global__ void sum4(const int *a, int *out) { out[0] = a[0] * a[1] * a[2] * a[3]; }'
WRONG_SPEC = json.dumps(
    {
        "kernel": "sum4",
        "grid": 1,
        "block": 1,
        "args": [
            {"name": "a", "type": "i32*", "data": [1, 2, 3, 4]},
            {"name": "out", "type": "i32*", "data": [0]},
        ],
        "outputs": ["out"],
    }
)


@pytest.fixture(scope="module")
def launcher(small_mount):
    """The launch runs inside the mounted model, as its own sequence (our runtime after its checks)."""
    return RunnerLauncher(engine="model", model_dir=str(small_mount), max_steps=2_000)


@pytest.fixture(scope="module")
def mounted_chat(small_mount):
    """(model, tokenizer) of the mount as the chat host loads it: the mount's text runtime and the
    mount's own tokenizer (the base's, extended with the machine's tokens)."""
    from qwengpu.host.repliers import load_chat_model

    return load_chat_model(str(small_mount))


def _session(chat, launcher, replies, retries=2):
    model, tok = chat
    out = io.StringIO()
    view = ConsoleView(Console(file=out, width=120, force_terminal=False, color_system=None))
    sess = Session(ForcedReplier(model, tok, replies), launcher, retries=retries, events=view)
    return sess, out


def test_success_reads_the_result_from_the_models_tokens(mounted_chat, launcher):
    sess, out = _session(mounted_chat, launcher, [xml_call(ADD, add_spec(2, 40)), "2 + 40 = 42.\nAnswer: 42"])
    turn = sess.ask("What is 2 + 40?")
    assert turn.status == "computed" and turn.first_try and len(turn.attempts) == 1
    o = turn.attempts[0].outcome
    assert o.outputs == {"out": [42]}
    assert o.engine == "model" and o.stats["tokens"] > 0 and o.stats["warp_instructions"] > 0
    assert o.stats["runtime"] == "mounted-fast" and mounted_chat[0].runtime == "mounted-text"
    assert turn.quoted and turn.answer.endswith("Answer: 42")
    # every reply went through the model's forward after the real prompt
    assert all(r["mode"] == "teacher-forced" and r["prompt_tokens"] > 500 for r in turn.replies)
    # the tool result the model read is in the conversation, in the template's tool format
    prompt = render_prompt(mounted_chat[1], sess.messages, sess.tools)
    assert "<tool_response>\nThe kernel ran exactly. Outputs:\nout = [42]\n</tool_response>" in prompt
    assert "<function=run_cuda>" in prompt and '"name": "run_cuda"' in prompt  # the call and the tool
    text = out.getvalue()
    assert "GPU result: out = [42]" in text and "[computed]" in text and "extern" in text


def _compile_error_turn(chat, launcher) -> None:
    bad = xml_call(ADD.replace("a + b", "a + c"), add_spec(5, 6))
    sess, out = _session(chat, launcher, [bad, xml_call(ADD, add_spec(5, 6)), "Answer: 11"])
    turn = sess.ask("What is 5 + 6?")
    first, second = turn.attempts
    assert first.outcome.kind == "compile_error" and 'identifier "c" is undefined' in first.outcome.message
    assert "kernel.cu(1): error" in sess.messages[3]["content"]  # NVRTC's file(line) log went back
    assert second.outcome.outputs == {"out": [11]}
    assert turn.status == "computed" and not turn.first_try
    assert "compile error" in out.getvalue()


@pytest.mark.slow  # 14 s through the mount; the default run has the same turn on the small chat model
def test_compile_error_goes_back_and_the_fix_runs(mounted_chat, launcher):
    _compile_error_turn(mounted_chat, launcher)


def test_compile_error_goes_back_and_the_fix_runs_on_the_chat_model(chat_model):
    """The retry after a compile error, on the synthetic chat model with the interpreter (the mounted
    turn above is slow): NVRTC's log goes back to the model, the fix computes the answer."""
    _compile_error_turn(chat_model, RunnerLauncher(engine="interp", max_steps=2_000))


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_bad_launch_spec_goes_back(mounted_chat, launcher):
    wrong_names = add_spec(1, 2).replace('"b"', '"bee"')
    replies = [
        xml_call(ADD, wrong_names),
        xml_call(ADD, "{not json"),
        xml_call(ADD, add_spec(1, 2)),
        "Answer: 3",
    ]
    sess, _ = _session(mounted_chat, launcher, replies)
    turn = sess.ask("What is 1 + 2?")
    kinds = [a.outcome.kind for a in turn.attempts]
    assert kinds == ["bad_launch_spec", "bad_launch_spec", "ok"]
    assert "named 'b' in the source" in turn.attempts[0].outcome.message
    assert "not valid JSON" in turn.attempts[1].outcome.message
    assert turn.computed.outputs == {"out": [3]}


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_kernel_beyond_the_machine_limits_is_refused_and_retries_run_out(mounted_chat, launcher):
    big = xml_call(ADD, add_spec(1, 2, block=2048))  # beyond CUDA's 1,024 threads per block
    sess, out = _session(mounted_chat, launcher, [big, "I could not run it.\nAnswer: 3"], retries=0)
    turn = sess.ask("What is 1 + 2?")
    (att,) = turn.attempts
    assert att.outcome.kind == "machine_limit" and "at most 1024" in att.outcome.message
    assert NO_RETRIES_LEFT in sess.messages[-2]["content"]
    assert turn.status == "failed" and turn.computed is None
    assert "not backed by a computation" in out.getvalue()


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_runaway_kernel_hits_the_step_limit(mounted_chat, launcher):
    sess, _ = _session(mounted_chat, launcher, [xml_call(LOOP, add_spec(1, 2)), "Answer: unknown"], retries=0)
    small = RunnerLauncher(engine="model", model_dir=launcher.model_dir, max_steps=10)
    sess.launcher = small
    turn = sess.ask("Count up forever?")
    o = turn.attempts[0].outcome
    assert o.kind == "step_limit" and "without halting" in o.message
    assert turn.status == "failed"


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_wrong_program_shows_the_computed_value(mounted_chat, launcher):
    from qwengpu.host.evaluate import score

    replies = [xml_call(WRONG, WRONG_SPEC), "The sum of 1, 2, 3 and 4 is 24.\nAnswer: 24"]
    sess, out = _session(mounted_chat, launcher, replies)
    turn = sess.ask("What is 1 + 2 + 3 + 4?")
    assert turn.status == "computed" and turn.computed.outputs == {"out": [24]}  # 1*2*3*4, exactly
    q = {"id": "s", "type": "int", "answer": [1 + 2 + 3 + 4], "question": turn.question}
    assert not score(q, turn.answer)[0]  # right execution, wrong program: scored as wrong
    text = out.getvalue()
    assert (
        "GPU result: out = [24]" in text
        and "whether the program computes what was asked is not checked" in text
    )


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_answer_that_hides_the_result_is_flagged(mounted_chat, launcher):
    replies = [xml_call(WRONG, WRONG_SPEC), "The sum is ten.\nAnswer: 10"]
    sess, out = _session(mounted_chat, launcher, replies)
    turn = sess.ask("What is 1 + 2 + 3 + 4?")
    assert turn.quoted is False and turn.as_json()["computed"] == {"out": [24]}
    assert (
        "does not quote the kernel's result" in out.getvalue() and "GPU result: out = [24]" in out.getvalue()
    )


def test_no_code_at_all(mounted_chat, launcher):
    sess, out = _session(mounted_chat, launcher, ["It is 42, I think.\nAnswer: 42"])
    turn = sess.ask("What is 2 + 40?")
    assert turn.status == "no_kernel" and turn.attempts == [] and turn.computed is None
    assert "nothing was computed" in out.getvalue() and "GPU result" not in out.getvalue()


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_reply_cut_off_mid_call_is_sent_back(mounted_chat, launcher):
    full = xml_call(ADD, add_spec(20, 22))
    cut = full[: full.index("<parameter=launch>") + 30]
    sess, _ = _session(mounted_chat, launcher, [cut, json_call(ADD, add_spec(20, 22)), "Answer: 42"])
    turn = sess.ask("What is 20 + 22?")
    first, second = turn.attempts
    assert first.outcome.kind == "bad_call" and "cut off" in first.outcome.message
    assert second.style == "json" and second.outcome.outputs == {"out": [42]}
    assert turn.status == "computed"


# the stock forward writes 800 tokens before the step limit: ~260 s on 2 cores; the default run has the
# fast path's control below and tests/machine_weights' damaged stock weight
@pytest.mark.slow
def test_damaged_machine_weight_breaks_the_launch(mounted_chat, launcher):
    """Negative control: the result really comes from the compiled weights. Negating the output-head
    row of the HALT token (a compiled weight) means the model never writes HALT: no result."""
    import torch

    from qwengpu.machine import protocol as P
    from qwengpu.runtime.engine import machine_model

    w = machine_model()[1].get_output_embeddings().weight
    h = P.ctl(P.HALT)
    old = w[h].clone()
    try:
        with torch.no_grad():
            w[h] = -old
        # the stock runtime runs machine_model()'s module, the one damaged here (the fast runtime
            # gathers its own copy from the lean cache: tests/runtime damage that one)
            o = RunnerLauncher(engine="machine", runtime="stock", max_steps=20).launch(ADD, add_spec(2, 40))
    finally:
        with torch.no_grad():
            w[h] = old
    assert not o.ok and o.kind == "step_limit" and o.outputs == {}
    assert launcher.launch(ADD, add_spec(2, 40)).outputs == {"out": [42]}


def test_damaged_weight_of_the_default_fast_path_breaks_the_launch():
    """Negative control of the DEFAULT path (``qwengpu run``: the fast runtime gathered from the
    machine's lean cache entry, not the stock module): negate the HALT row of the output head that
    fast model gathered (its copy of a compiled weight): the model never writes HALT, no result;
    restored, the same launch computes 42."""
    from qwengpu.machine import protocol as P
    from qwengpu.runtime.cached import machine_fast
    from qwengpu.runtime.fast import Head

    fast = machine_fast()  # the process's default fast model: what RunnerLauncher runs below
    head, h = fast.head, P.ctl(P.HALT)
    w = head.w.copy()
    w[h] = -w[h]
    fast.head = Head(head.final, w, shortcuts=head.shortcuts)
    try:
        o = RunnerLauncher(engine="machine", max_steps=20).launch(ADD, add_spec(2, 40))
    finally:
        fast.head = head
    assert not o.ok and o.kind == "step_limit" and o.outputs == {}
    ok = RunnerLauncher(engine="machine", max_steps=2_000).launch(ADD, add_spec(2, 40))
    assert ok.outputs == {"out": [42]}


def test_model_replier_streams_what_greedy_decoding_writes(chat_model):
    """The generating replier (stock ``generate``): its text is the stream's text, and its tokens are
    the argmax of the model's own forward at each step (checked here without the cache)."""
    import torch

    from qwengpu.host.prompts import RUN_CUDA_TOOL, system_prompt
    from qwengpu.host.repliers import ModelReplier

    model, tok = chat_model
    msgs = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": "What is 2 + 40?"}]
    chunks: list[str] = []
    r = ModelReplier(model, tok, max_new_tokens=6).reply(msgs, [RUN_CUDA_TOOL], on_text=chunks.append)
    assert r.stats["mode"] == "generated" and 1 <= r.stats["tokens"] <= 6
    assert "".join(chunks) == r.text
    ids = tok(render_prompt(tok, msgs, [RUN_CUDA_TOOL]), add_special_tokens=False).input_ids
    want = []
    with torch.no_grad():
        for _ in range(r.stats["tokens"]):
            nxt = int(model(input_ids=torch.tensor([ids + want]), use_cache=False).logits[0, -1].argmax())
            want.append(nxt)
    got = tok(r.text, add_special_tokens=False).input_ids
    assert tok.decode(want, skip_special_tokens=False).startswith(tok.decode(got, skip_special_tokens=False))


@pytest.mark.slow
def test_stock_forward_of_the_whole_mount_writes_the_text(small_mount):
    """The same pipeline with the replies teacher-forced through the stock forward of the whole
    mounted checkpoint (``from_pretrained``, all 41 layers; no runtime of ours for the text), the
    launch inside the same checkpoint. Minutes: the prompt is ~2,000 tokens through 41 layers."""
    import torch

    from qwengpu.host.repliers import is_mount, load_chat_model

    torch.set_num_threads(1)
    mount = str(small_mount)
    assert is_mount(mount)
    model, tok = load_chat_model(mount, shared_mount=False)  # stock AutoModelForCausalLM of the mount
    assert len(model.model.layers) > 30
    out = io.StringIO()
    view = ConsoleView(Console(file=out, width=120, force_terminal=False, color_system=None))
    replies = [xml_call(ADD, add_spec(19, 23)), "19 + 23 = 42.\nAnswer: 42"]
    sess = Session(
        ForcedReplier(model, tok, replies), RunnerLauncher(engine="model", model_dir=mount), events=view
    )
    turn = sess.ask("What is 19 + 23?")
    assert turn.status == "computed" and turn.computed.outputs == {"out": [42]}
    st = turn.attempts[0].outcome.stats
    assert (
        st["runtime"].startswith("mounted")
        and st["tokens"] > 0
        and turn.attempts[0].outcome.engine == "model"
    )
    assert all(r["mode"] == "teacher-forced" and r["prompt_tokens"] > 500 for r in turn.replies)
    assert "inside the mounted model" in out.getvalue() and "GPU result: out = [42]" in out.getvalue()


@pytest.mark.slow  # 9-22 s each; the default run keeps the success and compile-error turns
def test_unsupported_instruction_is_refused_by_name(mounted_chat, launcher):
    sin = 'extern "C" __global__ void s(float x, float *out) { out[0] = __sinf(x); }'
    spec = json.dumps(
        {
            "kernel": "s",
            "grid": 1,
            "block": 1,
            "outputs": ["out"],
            "args": [
                {"name": "x", "type": "f32", "value": 1.5},
                {"name": "out", "type": "f32*", "data": [0]},
            ],
        }
    )
    sess, _ = _session(mounted_chat, launcher, [xml_call(sin, spec), "I cannot compute it.\nAnswer: 0.997"])
    turn = sess.ask("What is sin(1.5) in float32?")
    o = turn.attempts[0].outcome
    assert o.kind == "machine_limit" and "sin.approx.f32" in o.message and "kernel.cu:1" in o.message
    assert "sin.approx.f32" in sess.messages[-2]["content"]  # the model reads which instruction
