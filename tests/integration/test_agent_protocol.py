"""The Agent Protocol routes, run manager and work-queue worker on a real nats-server and real HTTP,
driven by the official langgraph-sdk client. The graph is a small real LangGraph graph over meshward's
state that pauses at interrupt() before answering, so that resume, interrupts in state and streams,
and the 409/422 rules are tested without the agents (tests/e2e/test_agent_protocol.py runs the system)."""
from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from types import SimpleNamespace

import pytest
import uvicorn
from fastapi import FastAPI
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from langgraph_sdk import get_client
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError
from meshward.devstack.nats_server import free_port
from meshward.supervisor.agent_protocol.models import RunCreate
from meshward.supervisor.agent_protocol.routes import router
from meshward.supervisor.agent_protocol.runs import RunManager, RunWorker
from meshward.supervisor.agent_protocol.store import RunStore
from meshward.supervisor.asker import Asker
from meshward.supervisor.ports import NatsPorts
from meshward.supervisor.state import AskState

pytestmark = pytest.mark.integration


def approval_graph(checkpointer, gate: asyncio.Event | None = None, started: asyncio.Event | None = None):
    """Asks for approval when the question says 'restart', then answers with the decision; a question
    saying 'hold' waits for `gate` (a run that is running until the test lets it go)."""

    async def act(state: AskState):
        if "hold" in state["question"] and gate is not None:
            started.set()
            await gate.wait()
        if "tokens" in state["question"] and state.get("stream"):
            write = get_stream_writer()
            for delta in ("tok", "ens"):  # what the deep tier's reason node writes as the model's tokens arrive
                write({"delta": delta, "draft": 0, "restart": False})
        decision = None
        if "restart" in state["question"]:
            decision = interrupt({"kind": "approval", "approval_id": "a1", "tool": "local_cli", "arguments": {"command": "restart"},
                                  "reason": "not on the allowlist", "expires_at": "2099-01-01T00:00:00+00:00"})
        answer = f"done: {state['question']}" if decision is None else f"decision {decision['approved']} by {decision['actor']}"
        return {"answer": answer, "status": "answered", "route": ["act"], "next": "finish",
                "history": [*state.get("history", []), {"question": state["question"], "answer": answer}]}

    g = StateGraph(AskState)
    g.add_node("act", act)
    g.add_edge(START, "act")
    g.add_edge("act", END)
    return g.compile(checkpointer=checkpointer)


class Principal:
    """What the keys middleware does : names the caller on request.state."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            scope.setdefault("state", {})["principal"] = "ops-key"
        await self.app(scope, receive, send)


@pytest.fixture
async def served(bus, tmp_path):
    async with AsyncExitStack() as stack:
        saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.db")))
        gate, started = asyncio.Event(), asyncio.Event()
        graph = approval_graph(saver, gate, started)
        asker = Asker(graph, NatsPorts(bus), timeout_s=20)
        store = await RunStore.open(bus.jetstream)
        worker = RunWorker(bus, store, asker, instance="test", max_concurrent=2, ack_wait_s=10)
        await worker.start()
        stack.push_async_callback(worker.stop)
        app = FastAPI()
        app.include_router(router)
        app.state.agent_protocol = RunManager(bus, store, graph, run_deadline_s=30, max_question_chars=4_000)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(Principal(app), host="127.0.0.1", port=port, log_level="warning"))
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)  # polling uvicorn's own readiness flag
        try:
            yield SimpleNamespace(client=get_client(url=f"http://127.0.0.1:{port}"), gate=gate, started=started, store=store)
        finally:
            server.should_exit = True
            await task


@pytest.fixture
def client(served):
    return served.client


async def test_interrupt_resume_through_the_sdk(client):
    thread = await client.threads.create()
    tid = thread["thread_id"]
    updates = [p async for p in client.runs.stream(tid, "meshward", input={"messages": [{"role": "user", "content": "restart nginx"}]}, stream_mode="updates")]
    assert updates[0].event == "metadata"
    paused = [p.data["__interrupt__"] for p in updates if p.event == "updates" and "__interrupt__" in p.data]
    assert paused and paused[0][0]["value"]["kind"] == "approval"

    state = await client.threads.get_state(tid)
    assert state["interrupts"][0]["value"]["tool"] == "local_cli"
    assert state["tasks"][0]["name"] == "act" and state["tasks"][0]["interrupts"]
    assert (await client.threads.get(tid))["status"] == "interrupted"

    with pytest.raises(UnprocessableEntityError):  # langgraph crashes on Command(resume=None): refused first
        await client.runs.create(tid, "meshward", command={"resume": None})

    # the body's actor is ignored: the principal decides who approved
    result = await client.runs.wait(tid, "meshward", command={"resume": {"approved": True, "actor": "the-model"}})
    assert result["messages"][-1]["content"] == "decision True by ops-key"
    assert result["status"] == "answered"
    assert (await client.threads.get(tid))["status"] == "idle"

    with pytest.raises(ConflictError):  # nothing left to resume
        await client.runs.create(tid, "meshward", command={"resume": {"approved": False}})


async def test_values_stream_and_state_end_with_the_answer(client):
    thread = await client.threads.create(metadata={"team": "ops"})
    tid = thread["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "meshward", input={"messages": [{"role": "user", "content": "what is 2+2"}]}, stream_mode=["values", "messages-tuple"])]
    values = [p.data for p in parts if p.event == "values"]
    assert values[-1]["messages"][-1] == {**values[-1]["messages"][-1], "type": "ai", "content": "done: what is 2+2"}
    messages = [p.data for p in parts if p.event == "messages"]
    assert messages and messages[-1][0]["content"] == "done: what is 2+2" and messages[-1][1]["langgraph_node"] == "act"
    found = await client.threads.search(metadata={"team": "ops"})
    assert [t["thread_id"] for t in found] == [tid]
    runs = await client.runs.list(tid)
    assert len(runs) == 1 and runs[0]["status"] == "success"


async def test_unknowns_are_404_and_bad_bodies_422(client):
    with pytest.raises(NotFoundError):
        await client.threads.get("no-such-thread")
    with pytest.raises(NotFoundError):
        await client.assistants.get("other")
    assert (await client.assistants.get("meshward"))["graph_id"] == "meshward"
    assert len(await client.assistants.search()) == 1
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, "00000000-0000-0000-0000-000000000000")
    with pytest.raises(NotFoundError):
        await client.runs.create(tid, "other", input={"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "meshward", input={"messages": []})
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(tid, "meshward", input={"messages": [{"role": "user", "content": "x" * 5_000}]})
    with pytest.raises(UnprocessableEntityError):
        await client.threads.create(metadata={"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}})
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=tid)
    await client.threads.delete(tid)
    with pytest.raises(NotFoundError):
        await client.threads.get_state(tid)


async def test_a_run_whose_replica_stops_is_finished_by_another(bus, tmp_path):
    """Replica one takes the run and stops mid-run (no ack, no more heartbeats); the work queue
    redelivers the run and replica two executes it to the end."""
    started, gate = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def act(state: AskState):
        started.set()
        await gate.wait()
        finished.append(state["question"])
        return {"answer": "finished", "status": "answered", "route": ["act"], "next": "finish",
                "history": [*state.get("history", []), {"question": state["question"], "answer": "finished"}]}

    g = StateGraph(AskState)
    g.add_node("act", act)
    g.add_edge(START, "act")
    g.add_edge("act", END)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "cp.db")) as saver:
        graph = g.compile(checkpointer=saver)
        asker = Asker(graph, NatsPorts(bus), timeout_s=30)
        store = await RunStore.open(bus.jetstream)
        manager = RunManager(bus, store, graph, run_deadline_s=60, max_question_chars=100)
        one = RunWorker(bus, store, asker, instance="one", max_concurrent=1, ack_wait_s=2)
        await one.start()
        tid = (await manager.create_thread(None, {}, "raise"))["thread_id"]
        body = RunCreate.model_validate({"assistant_id": "meshward", "input": {"messages": [{"role": "user", "content": "long job"}]}})
        run = await manager.create(tid, body, "local")
        await asyncio.wait_for(started.wait(), timeout=20)
        assert (await store.run(run["run_id"]))["worker"] == "one"
        await one.stop()  # the replica dies mid-run
        gate.set()
        two = RunWorker(bus, store, asker, instance="two", max_concurrent=1, ack_wait_s=2)
        await two.start()
        try:
            result = await asyncio.wait_for(manager.join(tid, run["run_id"]), timeout=30)
        finally:
            await two.stop()
        record = await store.run(run["run_id"])
        assert (record["status"], record["worker"], record["attempts"]) == ("success", "two", 2)
        assert result["messages"][-1]["content"] == "finished"
        assert finished == ["long job"]  # executed to the end once


async def until_status(client, thread_id: str, run_id: str, status: str, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while (await client.runs.get(thread_id, run_id))["status"] != status:
        assert loop.time() < end, f"run {run_id} never reached {status}"
        await asyncio.sleep(0.05)


async def test_interrupt_strategy_cancels_the_running_run(served):
    client = served.client
    tid = (await client.threads.create())["thread_id"]
    held = await client.runs.create(tid, "meshward", input={"messages": [{"role": "user", "content": "hold on"}]})
    await asyncio.wait_for(served.started.wait(), timeout=20)
    result = await client.runs.wait(tid, "meshward", input={"messages": [{"role": "user", "content": "next"}]}, multitask_strategy="interrupt")
    assert result["messages"][-1]["content"] == "done: next"
    assert (await client.runs.get(tid, held["run_id"]))["status"] == "interrupted"
    assert [m["content"] for m in result["messages"]] == ["next", "done: next"]  # the cancelled run left no turn


@pytest.mark.parametrize("on_disconnect, final", [("continue", "success"), ("cancel", "interrupted")])
async def test_a_dropped_stream_cancels_only_when_asked(served, on_disconnect, final):
    client = served.client
    tid = (await client.threads.create())["thread_id"]
    stream = client.runs.stream(tid, "meshward", input={"messages": [{"role": "user", "content": "hold this"}]}, stream_mode="values", on_disconnect=on_disconnect)
    first = await anext(stream)
    assert first.event == "metadata"
    run_id = first.data["run_id"]
    await asyncio.wait_for(served.started.wait(), timeout=20)
    await stream.aclose()  # the client goes away
    if on_disconnect == "cancel":
        await until_status(client, tid, run_id, "interrupted")
    served.gate.set()
    await client.runs.join(tid, run_id)
    assert (await client.runs.get(tid, run_id))["status"] == final


async def test_custom_events_and_token_messages(client):
    tid = (await client.threads.create())["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "meshward", input={"messages": [{"role": "user", "content": "tokens please"}]},
                                                 stream_mode=["custom", "events", "messages-tuple"])]
    assert [p.data["delta"] for p in parts if p.event == "custom"] == ["tok", "ens"]
    assert "".join(p.data[0]["content"] for p in parts if p.event == "messages") == "tokens"
    events = [(p.data["event"], p.data["name"]) for p in parts if p.event == "events"]
    assert events[0] == ("on_chain_start", "meshward") and events[-1] == ("on_chain_end", "meshward")
    assert ("on_chat_model_stream", "llm") in events and ("on_chain_end", "act") in events
    assert parts[-1].data["data"]["output"]["messages"][-1]["content"] == "done: tokens please"


async def test_a_second_queued_resume_finds_nothing_to_resume(client):
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "meshward", input={"messages": [{"role": "user", "content": "restart nginx"}]})
    first = await client.runs.create(tid, "meshward", command={"resume": {"approved": False}})
    second = await client.runs.create(tid, "meshward", command={"resume": {"approved": True}})  # queued behind the first
    assert (await client.runs.join(tid, first["run_id"]))["messages"][-1]["content"] == "decision False by ops-key"
    result = await client.runs.join(tid, second["run_id"])
    assert "no pending interrupt" in result["__error__"]["message"]
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "error"
