"""The prompt bound, tool-call validation and the embedded model's strict reply parsing (no model loaded)."""
from __future__ import annotations

import pytest
from meshward.contracts import ChatMessage, ChatRole, ToolCallRequestByModel, ToolSpec
from meshward.llm.backend import bound_prompt, prompt_chars
from meshward.llm.embedded import _plain_messages, parse_reply, reply_schema
from meshward.llm.toolcalls import InvalidToolCall, validate_tool_call

TOOL = ToolSpec(name="calculator", description="evaluate", input_schema={
    "type": "object", "properties": {"expression": {"type": "string", "maxLength": 50}}, "required": ["expression"]})
TOOLS = {"calculator": TOOL}


def msg(role: str, content: str, **kw) -> ChatMessage:
    return ChatMessage(role=ChatRole(role), content=content, **kw)


def test_prompt_under_the_bound_is_untouched():
    messages = [msg("system", "be brief"), msg("user", "hi")]
    assert bound_prompt(messages, 100) is messages


def test_oldest_turns_go_first_with_their_tool_answers():
    messages = [msg("system", "S" * 10),
                msg("assistant", "", tool_calls=[ToolCallRequestByModel(id="1", name="calculator")]),
                msg("tool", "T" * 50, tool_call_id="1", name="calculator"),
                msg("assistant", "A" * 30), msg("user", "Q" * 20)]
    kept = bound_prompt(messages, 70)
    assert [m.role for m in kept] == ["system", "assistant", "user"] and kept[1].content == "A" * 30


def test_one_huge_message_is_cut_in_the_middle_with_a_marker():
    question = "HEAD " + "x" * 99_000 + " TAIL?"
    kept = bound_prompt([msg("system", "rules"), msg("user", question)], 8_000)
    assert prompt_chars(kept) <= 8_000
    text = kept[-1].content
    assert text.startswith("HEAD ") and text.endswith(" TAIL?") and "characters cut" in text
    assert kept[0].content == "rules"


@pytest.mark.parametrize(("name", "arguments", "error"), [
    ("shell", {}, "not offered"),
    (None, {}, "not offered"),
    ("calculator", "{oops", "not JSON"),
    ("calculator", "[1, 2]", "not a JSON object"),
    ("calculator", {}, "required"),
    ("calculator", {"expression": "1" * 51}, "expression"),
    ("calculator", {"expression": "1", "x": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}}}}, "deeper"),
])
def test_invalid_tool_calls_are_typed(name, arguments, error):
    with pytest.raises(InvalidToolCall, match=error):
        validate_tool_call(name, arguments, TOOLS)


def test_valid_tool_call_arguments_parse():
    assert validate_tool_call("calculator", '{"expression": "2+2"}', TOOLS) == {"expression": "2+2"}
    assert validate_tool_call("calculator", {"expression": "2+2"}, TOOLS) == {"expression": "2+2"}


def test_embedded_reply_parsing_is_strict():
    assert parse_reply('{"answer": "42"}', TOOLS) == ("42", [])
    content, calls = parse_reply('{"tool_call": {"name": "calculator", "arguments": {"expression": "6*7"}}}', TOOLS)
    assert content == "" and calls[0].name == "calculator" and calls[0].arguments == {"expression": "6*7"}
    for bad in ('{"answer": "4', "plain words", '{"answer": "a", "tool_call": {}}', '{"answer": ""}',
                '{"tool_call": {"name": "rm", "arguments": {}}}', '{"tool_call": {"name": "calculator"}}',
                '{"tool_call": {"name": "calculator", "arguments": {}, "extra": 1}}', "[]"):
        with pytest.raises(InvalidToolCall):
            parse_reply(bad, TOOLS)


def test_embedded_prompt_carries_the_tool_schemas_and_tool_turns_as_text():
    messages = [msg("user", "6*7?"),
                msg("assistant", "", tool_calls=[ToolCallRequestByModel(id="1", name="calculator",
                                                                        arguments={"expression": "6*7"})]),
                msg("tool", "42", tool_call_id="1", name="calculator")]
    plain = _plain_messages(messages, [TOOL])
    assert plain[0]["role"] == "system" and '"expression"' in plain[0]["content"]
    assert [m["role"] for m in plain[1:]] == ["user", "assistant", "user"]
    assert "Result of tool calculator" in plain[3]["content"]
    schema = reply_schema([TOOL])
    assert schema["oneOf"][0]["properties"]["tool_call"]["properties"]["name"] == {"const": "calculator"}
