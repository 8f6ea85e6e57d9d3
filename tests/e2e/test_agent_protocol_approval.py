"""An approval interrupt through the official langgraph-sdk client on the whole system: the scripted model asks for
a command off the allowlist (ask mode), the run pauses with the interrupt, `command={"resume": ...}` approves or
denies it, and the audit log names the decision."""
from __future__ import annotations

import json

import httpx
import pytest
from langgraph_sdk import get_client

from tests.e2e.test_console_browser import COMMAND, MODEL_ANSWER, OPEN_QUESTION, OUTPUT, model_stack, tool_messages  # noqa: F401 - fixture
from tests.fake_openai import Reply

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("approved", [True, False])
async def test_an_approval_interrupt_resumed_through_the_sdk(model_stack, approved):  # noqa: F811 - the fixture
    model = model_stack["model"]
    model.requests.clear()
    model.script = [Reply(text="", tool_calls=[("cli_execute", json.dumps({"command": COMMAND}))])]
    client = get_client(url=model_stack["url"])
    thread_id = (await client.threads.create())["thread_id"]
    parts = [p async for p in client.runs.stream(thread_id, "meshward", input={"messages": [{"role": "user", "content": OPEN_QUESTION}]}, stream_mode="updates")]
    paused = [p.data["__interrupt__"] for p in parts if p.event == "updates" and "__interrupt__" in (p.data or {})]
    assert paused and paused[0][0]["value"]["tool"] == "cli_execute" and paused[0][0]["value"]["arguments"] == {"command": COMMAND}
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    state = await client.threads.get_state(thread_id)
    assert state["interrupts"] or any(t["interrupts"] for t in state["tasks"])

    values = await client.runs.wait(thread_id, "meshward", command={"resume": {"approved": approved, "reason": "sdk decision", "actor": "forged"}})
    assert values["messages"][-1]["content"].startswith(MODEL_ANSWER[:40])
    assert any(OUTPUT in m for m in tool_messages(model)) is approved  # the command ran only when approved
    async with httpx.AsyncClient(base_url=model_stack["url"], timeout=30) as http:
        log = (await http.get("/v1/audit/approvals", params={"thread_id": thread_id})).json()["entries"]
    # the actor is the caller's identity (no key on loopback: local), never the body's
    assert [(e["decision"], e["actor"], e["reason"]) for e in log] == [("approved" if approved else "denied", "local", "sdk decision")]
    with pytest.raises(Exception) as nothing_pending:
        await client.runs.wait(thread_id, "meshward", command={"resume": {"approved": True}})
    assert "409" in str(nothing_pending.value)
