"""The deep tier end to end: every service a process (the launcher `make up` uses), real HTTP.

The shared stack runs the llm service with no configuration, i.e. the embedded SmolLM2 model;
a second stack runs a three-provider chain of loopback OpenAI-compatible servers."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest
from meshward.devstack.launcher import Console, Stack
from meshward.devstack.nats_server import free_port

from tests.fake_openai import FakeOpenAI, Reply, dead_url
from tests.sse import sse_events

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OPEN_QUESTION = "Why would load average be high while CPU usage is low?"
CHAIN_ANSWER = "A high load average with low CPU usage means tasks are waiting on disk or network I/O, which the load average counts."


async def llm_ready(http: httpx.AsyncClient, timeout_s: float = 180.0) -> None:
    """/healthz does not wait for the optional llm service (the fast tier works without it): poll it here."""
    import asyncio
    import time

    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        body = (await http.get("/healthz")).json()
        if body["services"].get("llm", {}).get("ready"):
            return
        await asyncio.sleep(0.5)
    pytest.fail(f"the llm service did not become ready: {body['services'].get('llm')}")


async def test_the_embedded_model_answers_an_open_question_in_the_deep_tier(system):
    async with httpx.AsyncClient(base_url=system["url"], timeout=300) as http:
        await llm_ready(http)
        r = await http.post("/v1/ask", json={"question": OPEN_QUESTION})
        assert r.status_code == 200
        body = r.json()
        assert body["status"] == "answered", body["answer"]
        assert body["tier"] == "deep" and body["intent"] == "ops_knowledge"
        assert body["model"].startswith("embedded/")
        assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 0
        assert 0.0 <= body["confidence"] <= 1.0
        route = body["route"]
        assert route[:6] == ["security", "intent", "assess", "retrieve", "reason", "validate"] and route[-1] == "output_check"
        assert body["answer"].strip()

        # the same question streamed: steps, then the answer's tokens, then the response
        async with http.stream("POST", "/v1/ask", json={"question": OPEN_QUESTION, "stream": True}) as s:
            assert s.status_code == 200
            text = "".join([chunk async for chunk in s.aiter_text()])
    events = sse_events(text)
    assert events[-1][0] == "answer"
    final = events[-1][1]
    assert final["tier"] == "deep" and final["status"] == "answered"
    assert [d["node"] for e, d in events if e == "step"] == final["route"]
    assert any(e == "token" and d["delta"] for e, d in events)


async def test_fast_tier_questions_still_skip_the_model(http):
    body = (await http.post("/v1/ask", json={"question": "Calculate 15 * 23 + 7"})).json()
    assert (body["status"], body["tier"], body["model"]) == ("answered", "fast", None)
    assert "352" in body["answer"]


@pytest.fixture(scope="module")
async def chain(upstreams):
    """A stack whose llm service has three providers: nothing listening, one that answers 503, one that works."""
    with FakeOpenAI(default=Reply(kind="status", status=503)) as failing, FakeOpenAI(default=Reply(text=CHAIN_ANSWER)) as good:
        providers = [
            {"name": "p1", "base_url": dead_url(), "model": "m1", "timeout_s": 5},
            {"name": "p2", "base_url": failing.base_url, "model": "m2", "timeout_s": 5},
            {"name": "p3", "base_url": good.base_url, "model": "fake-model", "timeout_s": 5},
        ]
        data_dir = Path(tempfile.mkdtemp(prefix="meshward-e2e-chain-"))
        port = free_port()
        env = {"MESHWARD_MCP_PORT": str(free_port()), "MESHWARD_LLM_PROVIDERS": json.dumps(providers), **upstreams.env()}
        with open(data_dir / "stack.log", "w") as log:
            stack = Stack(data_dir, port, None, Console(log), extra_env=env)
            await stack.start()
            try:
                if not await stack.wait_healthy(timeout=180):
                    log.flush()
                    pytest.fail("the chain stack did not become healthy:\n" + (data_dir / "stack.log").read_text()[-5000:])
                yield {"url": f"http://127.0.0.1:{port}", "failing": failing, "good": good}
            finally:
                await stack.stop()
        if os.environ.get("MESHWARD_KEEP_E2E") is None:
            shutil.rmtree(data_dir, ignore_errors=True)


async def test_a_chain_whose_first_two_providers_fail_is_answered_by_the_third(chain):
    async with httpx.AsyncClient(base_url=chain["url"], timeout=120) as http:
        await llm_ready(http)
        body = (await http.post("/v1/ask", json={"question": OPEN_QUESTION})).json()
    assert body["status"] == "answered" and body["tier"] == "deep", body["answer"]
    assert body["model"] == "p3/fake-model"
    assert body["answer"] == CHAIN_ANSWER
    assert chain["failing"].requests and chain["good"].requests
    # the good provider was offered the intent's tools only
    offered = {t["function"]["name"] for t in chain["good"].requests[0].get("tools", [])}
    assert offered <= {"cli_execute"}


@pytest.mark.parametrize("question", ["Explain how TCP congestion control works", "calculate the sum of the first ten primes"])
async def test_ops_knowledge_and_unreadable_math_reach_the_deep_tier(chain, question):
    """An explanation question is in scope (ops_knowledge, no template); a math question the calculator's grammar
    cannot read goes from the calculator's "No calculation found" to the deep tier instead of a dead end."""
    async with httpx.AsyncClient(base_url=chain["url"], timeout=120) as http:
        await llm_ready(http)
        body = (await http.post("/v1/ask", json={"question": question})).json()
    assert body["status"] == "answered" and body["tier"] == "deep" and body["model"] == "p3/fake-model", body
    assert body["intent"] in ("ops_knowledge", "calculation")
    if body["intent"] == "calculation":
        assert body["route"][:4] == ["security", "intent", "assess", "tools"] and "reason" in body["route"]
        assert "no calculation" in body["tier_reason"]


async def test_scope_boundary_after_the_retrain(chain):
    async with httpx.AsyncClient(base_url=chain["url"], timeout=60) as http:
        weather = (await http.post("/v1/ask", json={"question": "What is the weather like?"})).json()
        where = (await http.post("/v1/ask", json={"question": "where am I?"})).json()
        off = (await http.post("/v1/ask", json={"question": "Why are flamingos pink?"})).json()
    assert (weather["intent"], weather["status"]) == ("weather", "answered"), weather
    assert (where["intent"], where["status"]) == ("location", "answered") and where["tools_used"] == ["public_ip", "ip_geolocate"], where
    assert off["status"] == "refused" and off["refusal_reason"] == "out_of_scope", off


async def test_every_provider_down_is_a_clear_error_and_the_fast_tier_still_answers(chain):
    chain["good"].default = Reply(kind="status", status=503)
    try:
        async with httpx.AsyncClient(base_url=chain["url"], timeout=120) as http:
            body = (await http.post("/v1/ask", json={"question": "What causes a disk to fill up with inodes but not bytes?"})).json()
            fast = (await http.post("/v1/ask", json={"question": "Calculate 15 * 23 + 7"})).json()
    finally:
        chain["good"].default = Reply(text=CHAIN_ANSWER)
    assert body["status"] == "error" and body["tier"] == "deep"
    assert "language model" in body["answer"] and "p3" in body["answer"]
    assert (fast["status"], fast["tier"]) == ("answered", "fast") and "352" in fast["answer"]
