"""The llm service's NATS door over the real nats-server: a provider chain whose first two providers fail
(loopback OpenAI-compatible servers), streamed chunks on the caller's inbox, GenAI spans, and the real
embedded SmolLM2 model answering."""
from __future__ import annotations

import asyncio
import json

import pytest
from meshward.contracts import (
    AttemptOutcome,
    ChatChunk,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    ChatRole,
    ErrorCode,
    HealthReply,
    HealthRequest,
    RemoteError,
    ToolSpec,
    subjects,
)
from meshward.contracts.llm import MAX_PROMPT_CHARS

from tests.fake_openai import FakeOpenAI, Reply, dead_url

pytestmark = pytest.mark.integration

QUESTION = "Why would load average be high while CPU usage is low?"
# SmolLM2 writes this until max_tokens (a count stops after ~120 tokens, within 1 s on an idle machine)
LONG_ANSWER = "Write a 3000-word essay on the history of data centers."
STATUS_TOOL = ToolSpec(name="system_status", description="Report the free disk space, memory or uptime of this machine",
                       input_schema={"type": "object", "additionalProperties": False, "required": ["metric"],
                                     "properties": {"metric": {"type": "string", "enum": ["disk", "memory", "uptime"]}}})


def ask(text: str, **kw) -> ChatRequest:
    return ChatRequest(messages=[ChatMessage(role=ChatRole.USER, content=text)], **kw)


class Inbox:
    """Subscribes to a fresh inbox and collects the ChatChunks published on it."""

    def __init__(self, bus):
        self.bus = bus
        self.subject = bus.nc.new_inbox()
        self.chunks: list[ChatChunk] = []
        self.done = asyncio.Event()

    async def __aenter__(self) -> Inbox:
        async def take(msg):
            chunk = ChatChunk.model_validate_json(msg.data)
            self.chunks.append(chunk)
            if chunk.done:
                self.done.set()

        self.sub = await self.bus.nc.subscribe(self.subject, cb=take)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.sub.unsubscribe()

    def text(self) -> str:
        start = max((i for i, c in enumerate(self.chunks) if c.restart), default=0)
        return "".join(c.delta for c in self.chunks[start:])


async def test_chain_answers_from_the_third_provider_when_the_first_two_fail(service_env, bus, spans):
    from meshward.llm.handlers import create_service

    with FakeOpenAI(default=Reply(kind="status", status=503)) as down, \
            FakeOpenAI(default=Reply(text="Processes stuck in uninterruptible I/O wait count towards load."),
                       model="third-model") as third:
        service_env.setenv("MESHWARD_LLM_PROVIDERS", json.dumps([
            {"name": "refused", "base_url": dead_url(), "model": "a"},
            {"name": "overloaded", "base_url": down.base_url, "model": "b"},
            {"name": "third", "base_url": third.base_url, "model": "c"},
        ]))
        svc = create_service()
        await svc.start()
        try:
            health = await bus.request(subjects.health("llm"), HealthRequest(), HealthReply)
            assert health.ready and health.details["backend"] == "chain"
            async with Inbox(bus) as inbox:
                r = await bus.request(subjects.LLM_CHAT, ask(QUESTION, stream_subject=inbox.subject), ChatResponse,
                                      timeout=30)
                await asyncio.wait_for(inbox.done.wait(), 10)
            with pytest.raises(RemoteError) as e:
                await bus.request(subjects.LLM_CHAT, ask("hi", stream_subject="meshward.v1.tools.call"), ChatResponse)
            assert e.value.code == ErrorCode.BAD_REQUEST
            # ~100k characters: bounded (cut in the middle, head and tail kept) before any provider sees them.
            huge = "Summarize this log: " + "load average 9.5 " * 5_800 + "What stands out?"
            bounded = await bus.request(subjects.LLM_CHAT, ask(huge), ChatResponse, timeout=30)
            assert bounded.provider == "third"
            sent = third.requests[-1]["messages"][-1]["content"]
            assert len(sent) <= MAX_PROMPT_CHARS and sent.startswith("Summarize") and sent.endswith("stands out?")
        finally:
            await svc.stop()
    assert r.provider == "third" and r.model == "third-model"
    assert [(a.provider, a.outcome) for a in r.attempts] == [
        ("refused", AttemptOutcome.CONNECT_ERROR), ("overloaded", AttemptOutcome.SERVER_ERROR),
        ("third", AttemptOutcome.OK)]
    assert inbox.text() == r.message.content and inbox.chunks[-1].done
    assert [c.index for c in inbox.chunks] == list(range(len(inbox.chunks)))
    chat = [s for s in spans.get_finished_spans() if s.name == "chat c" and s.attributes["meshward.llm.streamed"]]
    assert len(chat) == 1
    attrs = chat[0].attributes
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.system"] == "openai"
    assert attrs["gen_ai.request.model"] == "c" and attrs["gen_ai.response.model"] == "third-model"
    assert attrs["gen_ai.usage.input_tokens"] == 11 and attrs["gen_ai.usage.output_tokens"] > 0
    fallbacks = [ev.attributes["meshward.llm.provider"] for ev in chat[0].events if ev.name == "gen_ai.provider.fallback"]
    assert fallbacks == ["refused", "overloaded"]


async def test_every_provider_down_is_a_typed_error(service_env, bus):
    from meshward.llm.handlers import create_service

    service_env.setenv("MESHWARD_LLM_PROVIDERS", json.dumps([{"name": "gone", "base_url": dead_url(), "model": "a"}]))
    svc = create_service()
    await svc.start()
    try:
        with pytest.raises(RemoteError) as e:
            await bus.request(subjects.LLM_CHAT, ask(QUESTION), ChatResponse, timeout=30)
    finally:
        await svc.stop()
    assert e.value.code == ErrorCode.UNAVAILABLE and "gone: connect_error" in e.value.error.message


@pytest.mark.slow
async def test_embedded_model_answers_streams_and_calls_tools(service_env, bus):
    from meshward.llm.handlers import create_service

    service_env.delenv("MESHWARD_LLM_PROVIDERS", raising=False)
    service_env.setenv("MESHWARD_LLM_MAX_CONCURRENCY", "1")  # one slot: a generation left running would block the next
    svc = create_service()
    await svc.start()
    try:
        health = await bus.request(subjects.health("llm"), HealthRequest(), HealthReply)
        assert health.details["backend"] == "embedded" and health.details["model"].startswith("SmolLM2-135M")
        async with Inbox(bus) as inbox:
            r = await bus.request(subjects.LLM_CHAT, ask(QUESTION, max_tokens=48, stream_subject=inbox.subject),
                                  ChatResponse, timeout=120)
            await asyncio.wait_for(inbox.done.wait(), 10)
        assert r.provider == "embedded" and r.model.startswith("SmolLM2-135M")
        assert r.message.content.strip() and r.usage.completion_tokens > 0 and r.usage.completion_tokens <= 48
        assert inbox.text() == r.message.content and r.first_token_ms is not None

        tool = await bus.request(subjects.LLM_CHAT, ask("How much disk space is free?", tools=[STATUS_TOOL],
                                                        temperature=0.0, max_tokens=64), ChatResponse, timeout=120)
        assert tool.finish_reason == "tool_calls"
        assert [(c.name, c.arguments) for c in tool.message.tool_calls] == [("system_status", {"metric": "disk"})]
        # A reply cut short (3 tokens cannot hold the JSON) is a typed failure, not a crash or a guess.
        with pytest.raises(RemoteError) as cut:
            await bus.request(subjects.LLM_CHAT, ask("How much disk space is free?", tools=[STATUS_TOOL],
                                                     temperature=0.0, max_tokens=3), ChatResponse, timeout=120)
        assert cut.value.code == ErrorCode.UNAVAILABLE and "unusable" in cut.value.error.message

        # A caller whose deadline passes: a typed error, and the generation stops at its next token, so the slot
        # is free for the next question (which otherwise waits for 4,000 tokens).
        with pytest.raises(RemoteError) as e:
            await bus.request(subjects.LLM_CHAT, ask(LONG_ANSWER, max_tokens=4_000,
                                                     temperature=0.0), ChatResponse, timeout=1.0)
        assert e.value.code == ErrorCode.DEADLINE_EXCEEDED
        after = await bus.request(subjects.LLM_CHAT, ask("Say hello.", max_tokens=8), ChatResponse, timeout=60)
        assert after.message.content

    finally:
        await svc.stop()
