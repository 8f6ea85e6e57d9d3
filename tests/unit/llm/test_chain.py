"""The provider chain's fallback logic against loopback OpenAI-compatible servers (tests/fake_openai.py)."""
from __future__ import annotations

import contextlib
import json
import time

import pytest
from meshward.contracts import AttemptOutcome, ChatMessage, ChatRequest, ChatRole, ToolSpec
from meshward.llm.backend import LLMError
from meshward.llm.chain import ProviderChain, retry_after_seconds
from meshward.llm.settings import LLMSettings

from tests.fake_openai import FakeOpenAI, Reply, dead_url

QUESTION = [ChatMessage(role=ChatRole.USER, content="Why would load average be high while CPU usage is low?")]
STATUS_TOOL = ToolSpec(name="system_status", description="disk, memory or uptime of this machine", input_schema={
    "type": "object", "properties": {"metric": {"type": "string", "enum": ["disk", "memory", "uptime"]}},
    "required": ["metric"], "additionalProperties": False})


def chain(*urls: str, timeout_s: float = 5.0, **settings) -> ProviderChain:
    providers = [{"name": f"p{i}", "base_url": url, "model": f"model-{i}", "timeout_s": timeout_s}
                 for i, url in enumerate(urls)]
    return ProviderChain(LLMSettings(providers=providers, **settings))


@contextlib.asynccontextmanager
async def started(c: ProviderChain):
    await c.start()
    try:
        yield c
    finally:
        await c.close()


class Collect:
    def __init__(self):
        self.chunks: list[tuple[str, str, bool]] = []

    async def __call__(self, delta: str, provider: str, restart: bool) -> None:
        self.chunks.append((delta, provider, restart))

    def text_from(self, provider: str) -> str:
        return "".join(d for d, p, _ in self.chunks if p == provider)


def outcomes(attempts) -> list[tuple[str, AttemptOutcome]]:
    return [(a.provider, a.outcome) for a in attempts]


async def test_first_provider_answers():
    with FakeOpenAI() as a:
        async with started(chain(a.base_url)) as c:
            r = await c.chat(ChatRequest(messages=QUESTION), None)
    assert r.provider == "p0" and r.model == "fake-model" and "Load average" in r.message.content
    assert r.usage.prompt_tokens == 11 and r.usage.completion_tokens == 7
    assert outcomes(r.attempts) == [("p0", AttemptOutcome.OK)]
    assert a.requests[0]["model"] == "model-0"


@pytest.mark.parametrize(("reply", "outcome"), [
    (Reply(kind="status", status=503), AttemptOutcome.SERVER_ERROR),
    (Reply(kind="status", status=500), AttemptOutcome.SERVER_ERROR),
    (Reply(kind="status", status=429), AttemptOutcome.RATE_LIMITED),
    (Reply(kind="malformed"), AttemptOutcome.MALFORMED),
    (Reply(kind="empty"), AttemptOutcome.MALFORMED),
    (Reply(tool_calls=[("rm_rf", "{}")]), AttemptOutcome.MALFORMED),
    (Reply(tool_calls=[("system_status", '{"metric": "cpu"}')]), AttemptOutcome.MALFORMED),
    (Reply(tool_calls=[("system_status", "{not json")]), AttemptOutcome.MALFORMED),
])
async def test_falls_through_on_provider_failures(reply, outcome):
    with FakeOpenAI(default=reply) as bad, FakeOpenAI(model="good") as good:
        async with started(chain(bad.base_url, good.base_url)) as c:
            r = await c.chat(ChatRequest(messages=QUESTION, tools=[STATUS_TOOL]), None)
    assert r.provider == "p1" and r.model == "good"
    assert outcomes(r.attempts) == [("p0", outcome), ("p1", AttemptOutcome.OK)]


async def test_connection_refused_and_timeout_fall_through():
    with FakeOpenAI(default=Reply(kind="hang")) as hang, FakeOpenAI() as good:
        c = chain(dead_url(), hang.base_url, good.base_url, timeout_s=0.5)
        async with started(c):
            r = await c.chat(ChatRequest(messages=QUESTION), None)
    assert outcomes(r.attempts) == [("p0", AttemptOutcome.CONNECT_ERROR), ("p1", AttemptOutcome.TIMEOUT),
                                    ("p2", AttemptOutcome.OK)]


async def test_other_4xx_does_not_fall_through():
    with FakeOpenAI(default=Reply(kind="status", status=400)) as bad, FakeOpenAI() as good:
        async with started(chain(bad.base_url, good.base_url)) as c:
            with pytest.raises(LLMError) as e:
                await c.chat(ChatRequest(messages=QUESTION), None)
    assert outcomes(e.value.attempts) == [("p0", AttemptOutcome.CLIENT_ERROR)]
    assert "HTTP 400" in e.value.message and good.requests == []


async def test_retry_after_skips_the_provider_until_it_passes():
    with FakeOpenAI(script=[Reply(kind="status", status=429, headers={"Retry-After": "120"})]) as limited, \
            FakeOpenAI() as good:
        async with started(chain(limited.base_url, good.base_url)) as c:
            first = await c.chat(ChatRequest(messages=QUESTION), None)
            second = await c.chat(ChatRequest(messages=QUESTION), None)
    assert outcomes(first.attempts)[0] == ("p0", AttemptOutcome.RATE_LIMITED)
    assert outcomes(second.attempts)[0] == ("p0", AttemptOutcome.CIRCUIT_OPEN)
    assert "Retry-After" in second.attempts[0].detail
    assert len(limited.requests) == 1  # the second request never reached it


def test_retry_after_header_forms():
    assert retry_after_seconds("7", 300) == 7
    assert retry_after_seconds("100000", 300) == 300
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", 300) == 0  # in the past
    assert retry_after_seconds("soon", 300) is None and retry_after_seconds(None, 300) is None
    assert retry_after_seconds("nan", 300) is None


async def test_circuit_opens_after_repeated_failures():
    with FakeOpenAI(default=Reply(kind="status", status=503)) as bad, FakeOpenAI() as good:
        async with started(chain(bad.base_url, good.base_url, breaker_threshold=2, breaker_ttl_s=600)) as c:
            for _ in range(2):
                r = await c.chat(ChatRequest(messages=QUESTION), None)
                assert outcomes(r.attempts)[0] == ("p0", AttemptOutcome.SERVER_ERROR)
            r = await c.chat(ChatRequest(messages=QUESTION), None)
    assert outcomes(r.attempts) == [("p0", AttemptOutcome.CIRCUIT_OPEN), ("p1", AttemptOutcome.OK)]
    assert len(bad.requests) == 2


async def test_every_provider_down_is_a_typed_error_naming_each():
    with FakeOpenAI(default=Reply(kind="status", status=502)) as bad:
        async with started(chain(dead_url(), bad.base_url)) as c:
            with pytest.raises(LLMError) as e:
                await c.chat(ChatRequest(messages=QUESTION), None)
    assert outcomes(e.value.attempts) == [("p0", AttemptOutcome.CONNECT_ERROR), ("p1", AttemptOutcome.SERVER_ERROR)]
    assert "p0: connect_error" in e.value.message and "p1: server_error (HTTP 502)" in e.value.message


async def test_valid_tool_call_is_returned_parsed():
    reply = Reply(text="", tool_calls=[("system_status", '{"metric": "disk"}')])
    with FakeOpenAI(default=reply) as a:
        async with started(chain(a.base_url)) as c:
            plain = await c.chat(ChatRequest(messages=QUESTION, tools=[STATUS_TOOL]), None)
            sink = Collect()
            streamed = await c.chat(ChatRequest(messages=QUESTION, tools=[STATUS_TOOL]), sink)
    for r in (plain, streamed):
        assert r.finish_reason == "tool_calls"
        assert [(t.name, t.arguments) for t in r.message.tool_calls] == [("system_status", {"metric": "disk"})]
    assert a.requests[0]["tools"][0]["function"]["name"] == "system_status"


async def test_streams_deltas_and_usage():
    with FakeOpenAI() as a:
        async with started(chain(a.base_url)) as c:
            sink = Collect()
            r = await c.chat(ChatRequest(messages=QUESTION), sink)
    assert sink.text_from("p0") == r.message.content == Reply().text
    assert r.first_token_ms is not None and r.usage.prompt_tokens == 11
    assert a.requests[0]["stream"] is True


@pytest.mark.parametrize(("kind", "outcome"), [
    ("stream_hang", AttemptOutcome.TIMEOUT),
    ("stream_broken", AttemptOutcome.CONNECT_ERROR),
    ("garbage_stream", AttemptOutcome.MALFORMED),
])
async def test_a_stream_that_fails_midway_restarts_on_the_next_provider(kind, outcome):
    with FakeOpenAI(default=Reply(kind=kind)) as bad, FakeOpenAI(default=Reply(text="second answer")) as good:
        async with started(chain(bad.base_url, good.base_url, stream_idle_timeout_s=0.5)) as c:
            sink = Collect()
            r = await c.chat(ChatRequest(messages=QUESTION), sink)
    assert outcomes(r.attempts) == [("p0", outcome), ("p1", AttemptOutcome.OK)]
    assert r.message.content == "second answer" and sink.text_from("p1") == "second answer"
    first_of_p1 = next(c for c in sink.chunks if c[1] == "p1")
    assert first_of_p1[2] is True  # the reader is told to drop p0's partial answer
    assert sink.text_from("p0")  # p0 did send something before failing


async def test_api_key_comes_from_the_named_variable_and_stays_out_of_attempts(monkeypatch):
    monkeypatch.setenv("FAKE_PROVIDER_KEY", "sk-test-secret-123")
    with FakeOpenAI(default=Reply(kind="status", status=503)) as a:
        providers = [{"name": "p0", "base_url": a.base_url, "model": "m", "api_key_env": "FAKE_PROVIDER_KEY"}]
        c = ProviderChain(LLMSettings(providers=providers))
        async with started(c):
            with pytest.raises(LLMError) as e:
                await c.chat(ChatRequest(messages=QUESTION), None)
    assert a.headers[0]["authorization"] == "Bearer sk-test-secret-123"
    assert "sk-test" not in e.value.message and "sk-test" not in json.dumps([x.model_dump() for x in e.value.attempts])


def test_provider_settings_are_validated(monkeypatch):
    monkeypatch.setenv("MESHWARD_LLM_PROVIDERS", json.dumps([{"name": "a", "base_url": "http://x/v1", "model": "m"},
                                                             {"name": "a", "base_url": "http://y/v1", "model": "m"}]))
    with pytest.raises(ValueError, match="unique"):
        LLMSettings()
    monkeypatch.setenv("MESHWARD_LLM_PROVIDERS", '[{"name": "a", "base_url": "not a url", "model": "m"}]')
    with pytest.raises(ValueError):
        LLMSettings()


async def test_the_callers_deadline_bounds_the_chain_and_the_error_names_each_provider():
    from meshward.bus import context

    with FakeOpenAI(default=Reply(kind="hang")) as hang, FakeOpenAI() as good:
        async with started(chain(hang.base_url, good.base_url, timeout_s=60)) as c:
            token = context.set_deadline(time.time() + 1.0)
            try:
                with pytest.raises(LLMError) as e:
                    await c.chat(ChatRequest(messages=QUESTION), None)
            finally:
                context.reset_deadline(token)
    assert outcomes(e.value.attempts) == [("p0", AttemptOutcome.TIMEOUT), ("p1", AttemptOutcome.TIMEOUT)]
    assert "no time left" in e.value.attempts[1].detail and good.requests == []
