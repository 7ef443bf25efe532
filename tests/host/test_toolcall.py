"""Reading run_cuda calls in both Qwen conventions, and preparing the model's launch spec."""

from __future__ import annotations

import json

import pytest
from host_kernels import ADD, add_spec, json_call, xml_call

from qwengpu.errors import LaunchSpecError
from qwengpu.host.launcher import prepare_spec
from qwengpu.host.toolcall import parse_reply, strip_thinking


def test_xml_call_is_read_with_text_before_it():
    p = parse_reply(xml_call(ADD, add_spec(2, 40), preface="Let me compute it."))
    assert p.problem is None and p.text == "Let me compute it."
    (c,) = p.calls
    assert (c.name, c.style) == ("run_cuda", "xml")
    assert c.arguments["source"] == ADD
    assert json.loads(c.arguments["launch"])["kernel"] == "add"


def test_json_call_is_read():
    (c,) = parse_reply(json_call(ADD, add_spec(1, 2))).calls
    assert (c.name, c.style, c.arguments["source"]) == ("run_cuda", "json", ADD)


def test_json_call_with_arguments_as_a_string():
    body = json.dumps({"name": "run_cuda", "arguments": json.dumps({"source": ADD, "launch": "{}"})})
    (c,) = parse_reply(f"<tool_call>{body}</tool_call>").calls
    assert c.arguments["source"] == ADD


def test_source_in_a_markdown_fence_is_unwrapped():
    reply = xml_call(f"```cuda\n{ADD}\n```", add_spec(1, 2))
    assert parse_reply(reply).calls[0].arguments["source"] == ADD


def test_missing_closing_tool_call_tag_is_accepted_when_the_function_is_complete():
    reply = xml_call(ADD, add_spec(1, 2)).removesuffix("</tool_call>")
    p = parse_reply(reply)
    assert p.problem is None and p.calls[0].arguments["source"] == ADD


def test_a_bare_function_block_without_tool_call_tags_counts():
    reply = xml_call(ADD, add_spec(1, 2)).replace("<tool_call>\n", "").replace("\n</tool_call>", "")
    assert parse_reply(reply).calls[0].arguments["source"] == ADD


@pytest.mark.parametrize("cut", [40, 120, 200])
def test_a_reply_cut_off_inside_the_call_is_a_problem_not_an_answer(cut):
    reply = xml_call(ADD, add_spec(1, 2))
    i = reply.index("<tool_call>")
    p = parse_reply(reply[: i + cut])
    assert p.has_call and not p.calls and "cut off" in p.problem


def test_malformed_json_call_names_the_problem():
    p = parse_reply('<tool_call>{"name": "run_cuda", "arguments": {"source": </tool_call>')
    assert p.has_call and "not valid JSON" in p.problem


def test_plain_answer_has_no_call():
    p = parse_reply("The sum is 55.\nAnswer: 55")
    assert not p.has_call and p.text == "The sum is 55.\nAnswer: 55"


def test_thinking_is_dropped():
    assert strip_thinking("<think>\nhmm\n</think>\n\nAnswer: 3") == "Answer: 3"


def test_prepare_spec_fills_the_kernel_name_and_drops_expected():
    spec = json.loads(add_spec(1, 2))
    del spec["kernel"]
    spec["expected"] = {"out": [3]}
    out = prepare_spec(ADD, json.dumps(spec))
    assert out["kernel"] == "add" and "expected" not in out


def test_prepare_spec_rejects_bad_json_and_a_missing_name_with_two_kernels():
    with pytest.raises(LaunchSpecError, match="not valid JSON"):
        prepare_spec(ADD, "{kernel: add}")
    two = ADD + "\n" + ADD.replace("add(", "sub(")
    with pytest.raises(LaunchSpecError, match='needs "kernel"'):
        prepare_spec(two, "{}")


def test_a_failing_replier_leaves_the_conversation_as_it_was():
    from qwengpu.errors import QwenGPUError
    from qwengpu.host.launcher import RunnerLauncher
    from qwengpu.host.repliers import ScriptedReplier
    from qwengpu.host.session import Session

    sess = Session(ScriptedReplier([xml_call(ADD, add_spec(1, 2))]), RunnerLauncher(engine="interp"))
    before = list(sess.messages)
    with pytest.raises(QwenGPUError, match="no more replies"):
        sess.ask("What is 1 + 2?")
    assert sess.messages == before and sess.turns == []


def test_only_the_first_of_several_calls_runs_and_the_model_is_told():
    from qwengpu.host.launcher import RunnerLauncher
    from qwengpu.host.repliers import ScriptedReplier
    from qwengpu.host.session import Session

    two = xml_call(ADD, add_spec(1, 2)) + "\n" + xml_call(ADD, add_spec(3, 4), preface="")
    sess = Session(ScriptedReplier([two, "Answer: 3"]), RunnerLauncher(engine="interp"))
    turn = sess.ask("What is 1 + 2?")
    assert turn.computed.outputs == {"out": [3]} and len(turn.attempts) == 1
    assert "only the first of your 2 calls was run" in sess.messages[-2]["content"]
