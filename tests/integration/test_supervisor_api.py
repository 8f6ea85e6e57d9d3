"""POST /v1/ask over a real HTTP socket (uvicorn), the graph driven through in-process fake ports:
the deep tier's response fields, Server-Sent Events, and typed 4xx for bad input."""
from __future__ import annotations

import asyncio

import httpx
import pytest
import uvicorn
from meshward.contracts import ErrorCode, ErrorReply, RemoteError
from meshward.devstack.nats_server import free_port
from meshward.supervisor.api import create_app
from meshward.supervisor.settings import SupervisorSettings

from tests.sse import sse_events
from tests.unit.supervisor.fakes import FakePorts, reply

LOAD_QUESTION = "Why would load average be high while CPU usage is low?"
LOAD_ANSWER = "A high load average with low CPU usage means tasks are waiting on disk or network I/O, which the load counts."


@pytest.fixture
async def serve(tmp_path):
    servers = []

    async def start(ports: FakePorts) -> httpx.AsyncClient:
        port = free_port()
        settings = SupervisorSettings(http_port=port, checkpoint_db=tmp_path / f"cp-{port}.db")
        server = uvicorn.Server(uvicorn.Config(create_app(settings, local_ports=ports), host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
        task = asyncio.create_task(server.serve())
        servers.append((server, task))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)  # polling uvicorn's own readiness flag
        return httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10)

    yield start
    for server, task in servers:
        server.should_exit = True
        await task


async def test_deep_answer_carries_tier_model_confidence_and_usage(serve):
    client = await serve(FakePorts(intent="diagnostics", tools=("cli_execute",), chat=[reply(LOAD_ANSWER, prompt_tokens=120, completion_tokens=40)]))
    async with client:
        r = await client.post("/v1/ask", json={"question": LOAD_QUESTION})
    body = r.json()
    assert r.status_code == 200 and body["status"] == "answered"
    assert body["tier"] == "deep" and body["tier_reason"]
    assert body["model"] == "fake/tiny" and body["usage"] == {"prompt_tokens": 120, "completion_tokens": 40}
    assert 0.75 <= body["confidence"] <= 1


async def test_fast_answer_has_no_model(serve):
    async with await serve(FakePorts()) as client:
        body = (await client.post("/v1/ask", json={"question": "Calculate 15 * 23 + 7"})).json()
    assert (body["tier"], body["model"], body["confidence"]) == ("fast", None, None)
    assert body["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}


async def test_stream_sends_each_step_the_tokens_then_the_response(serve):
    async with await serve(FakePorts(intent="diagnostics", tools=("cli_execute",), chat=[reply(LOAD_ANSWER)])) as client:
        async with client.stream("POST", "/v1/ask", json={"question": LOAD_QUESTION, "stream": True}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            text = "".join([chunk async for chunk in r.aiter_text()])
    events = sse_events(text)
    kinds = [e for e, _ in events]
    assert kinds[-1] == "answer" and kinds.count("answer") == 1
    final = events[-1][1]
    assert [d["node"] for e, d in events if e == "step"] == final["route"]
    assert "".join(d["delta"] for e, d in events if e == "token").strip() == LOAD_ANSWER == final["answer"]
    # tokens arrive after reason starts and before validate finishes
    assert kinds.index("token") < [i for i, (e, d) in enumerate(events) if e == "step" and d["node"] == "validate"][0]


async def test_stream_of_a_fast_question_has_steps_and_no_tokens(serve):
    async with await serve(FakePorts()) as client:
        r = await client.post("/v1/ask", json={"question": "Calculate 15 * 23 + 7", "stream": True})
    events = sse_events(r.text)
    assert [e for e, _ in events] == ["step"] * 6 + ["answer"]
    assert events[-1][1]["answer"] == "15 * 23 + 7 = 352"


async def test_every_provider_down_answers_a_clear_error(serve):
    down = RemoteError(ErrorReply.of(ErrorCode.UNAVAILABLE, "every provider failed: p1: connect_error; p2: server_error"))
    async with await serve(FakePorts(intent="diagnostics", tools=("cli_execute",), chat=[down, down])) as client:
        body = (await client.post("/v1/ask", json={"question": LOAD_QUESTION})).json()
        fast = (await client.post("/v1/ask", json={"question": "How much disk space is left?"})).json()
    assert body["status"] == "error" and "every provider failed" in body["answer"] and body["tier"] == "deep"
    assert (fast["status"], fast["tier"]) == ("answered", "fast")


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        ({"question": "hi", "stream": "yes"}, 422, "bad_request"),
        ({"question": "hi", "stream": 1}, 422, "bad_request"),
        ({"question": "x" * 100_000}, 422, "too_large"),
        ({"question": "x" * 100_000, "stream": True}, 422, "too_large"),
    ],
)
async def test_bad_input_stays_a_typed_4xx(serve, payload, status, code):
    ports = FakePorts()
    async with await serve(ports) as client:
        r = await client.post("/v1/ask", json=payload)
    assert r.status_code == status and r.json()["error"]["code"] == code
    assert ports.calls == [] and ports.chat_requests == []  # never reached the graph, let alone a model
