"""The Agent Protocol's request validation and state views (logic only; the routes run in
tests/integration/test_agent_protocol.py and tests/e2e/test_agent_protocol.py)."""
from __future__ import annotations

import pytest
from langgraph.types import Interrupt
from meshward.supervisor.agent_protocol import views
from meshward.supervisor.agent_protocol.models import MAX_MESSAGES, RunCreate, ThreadCreate, ThreadSearch
from pydantic import ValidationError


def run(**fields) -> RunCreate:
    return RunCreate.model_validate({"assistant_id": "meshward", **fields})


def ask(text="hello", **fields) -> RunCreate:
    return run(input={"messages": [{"role": "user", "content": text}]}, **fields)


def test_the_question_is_the_last_user_message_in_either_content_form():
    body = run(input={"messages": [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer"},
        {"type": "human", "content": [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": "x"}], "id": "m1"},
    ]})
    assert body.question() == "second"


@pytest.mark.parametrize("fields, message", [
    ({"input": {"messages": []}}, "at least 1"),
    ({"input": {"messages": [{"role": "assistant", "content": "hi"}]}}, "no user message"),
    ({"input": {"messages": [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)}}, "at most"),
    ({}, "exactly one of input"),
    ({"input": {"messages": [{"role": "user", "content": "x"}]}, "command": {"resume": True}}, "exactly one of input"),
    ({"command": {"resume": None}}, "must not be null"),
    ({"command": {"goto": "act", "resume": 1}}, "only command.resume"),
    ({"command": {"resume": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}}}, "deeper"),
    ({"input": {"messages": [{"role": "user", "content": "x"}]}, "stream_mode": "debug"}, "stream_mode"),
    ({"input": {"messages": [{"role": "user", "content": "x"}]}, "multitask_strategy": "rollback"}, "multitask_strategy"),
    ({"input": {"messages": [{"role": "user", "content": "x"}]}, "webhook": "http://x"}, "not supported"),
    ({"input": {"messages": [{"role": "user", "content": "x"}]}, "stream_resumable": True}, "not supported"),
    ({"input": {"messages": [{"role": "user", "content": "x"}]}, "surprise": 1}, "Extra inputs"),
])
def test_bad_run_bodies_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        run(**fields)


def test_stream_modes_and_defaults():
    body = ask(stream_mode=["updates", "messages-tuple", "updates"])
    assert body.modes == ["updates", "messages-tuple"]
    assert (ask().multitask_strategy, ask().on_disconnect, ask().modes) == ("enqueue", "continue", ["values"])


def test_metadata_and_search_are_bounded():
    with pytest.raises(ValidationError, match="bytes"):
        ThreadCreate(metadata={"k": "x" * 20_000})
    with pytest.raises(ValidationError):
        ThreadSearch(limit=1_000)
    with pytest.raises(ValidationError, match="pattern"):
        ThreadCreate(thread_id="bad id with spaces")


def test_values_end_with_the_answer_and_hide_internals():
    state = {
        "history": [{"question": "Calculate 2+2", "answer": "4"}], "question": "Calculate 2+2", "next": "finish",
        "status": "answered", "answer": "4", "route": ["security", "intent"], "tier": "fast", "tools_used": ["calculator"],
        "tool_results": [{"secret": "never shown"}], "security": {"layer": "rules"}, "intent": {"intent": "calculation"},
    }
    v = views.values(state, "t1")
    assert [(m["type"], m["content"]) for m in v["messages"]] == [("human", "Calculate 2+2"), ("ai", "4")]
    assert (v["status"], v["tier"], v["intent"], v["model"]) == ("answered", "fast", "calculation", None)
    assert "tool_results" not in v and "security" not in v
    assert views.values(state, "t1")["messages"][1]["id"] == v["messages"][1]["id"]  # stable ids


def test_a_paused_run_shows_its_question_and_the_interrupt():
    state = {"history": [], "question": "restart nginx", "next": "tools",
             "__interrupt__": (Interrupt(value={"kind": "approval"}, id="i1"),)}
    v = views.values(state, "t1")
    assert [m["content"] for m in v["messages"]] == ["restart nginx"]
    assert v["__interrupt__"] == [{"value": {"kind": "approval"}, "id": "i1"}]
    assert views.update({"__interrupt__": state["__interrupt__"], "tools": {"route": ["tools"], "tool_results": []}}) == {
        "__interrupt__": [{"value": {"kind": "approval"}, "id": "i1"}], "tools": {"route": ["tools"]}}
