"""The supervisor's NATS ports against a real nats-server: the LLM's token stream read from a
private inbox, and content-mode / conversation fields reaching security."""
from __future__ import annotations

import pytest
from meshward.bus import Service
from meshward.contracts import (
    ChatChunk,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    ChatRole,
    DecidingLayer,
    SecurityCheckRequest,
    SecurityVerdict,
    subjects,
)
from meshward.supervisor.ports import NatsPorts

pytestmark = pytest.mark.integration

WORDS = ["Load ", "counts ", "tasks ", "waiting ", "on ", "I/O."]


async def scripted_llm(seen: list[ChatRequest]) -> Service:
    svc = Service("llm")

    @svc.handler(subjects.LLM_CHAT, ChatRequest)
    async def chat(req: ChatRequest) -> ChatResponse:
        seen.append(req)
        if req.stream_subject:
            await svc.bus.nc.publish(req.stream_subject, b"{not json")  # garbage on the stream is ignored
            for i, w in enumerate(WORDS):
                await svc.bus.nc.publish(req.stream_subject, ChatChunk(index=i, delta=w).model_dump_json().encode())
            await svc.bus.nc.publish(req.stream_subject, ChatChunk(index=len(WORDS), done=True, provider="script").model_dump_json().encode())
        return ChatResponse(message=ChatMessage(role=ChatRole.ASSISTANT, content="".join(WORDS)), provider="script", model="words")

    await svc.start()
    return svc


async def test_chat_streams_tokens_in_order_and_returns_the_response(service_env, bus):
    seen: list[ChatRequest] = []
    svc = await scripted_llm(seen)
    try:
        ports = NatsPorts(bus)
        request = ChatRequest(messages=[ChatMessage(role=ChatRole.USER, content="why?")])
        tokens: list[tuple[str, bool]] = []
        response = await ports.chat(request, lambda d, restart: tokens.append((d, restart)), timeout=5)
        assert "".join(d for d, _ in tokens) == response.message.content == "".join(WORDS)
        assert not any(restart for _, restart in tokens)
        assert seen[-1].stream_subject and seen[-1].stream_subject.startswith("_INBOX.")
        # without a reader nothing is streamed
        plain = await ports.chat(request, None, timeout=5)
        assert plain.model == "words" and seen[-1].stream_subject is None
    finally:
        await svc.stop()


async def test_security_receives_content_mode_and_the_conversation(service_env, bus):
    got: list[SecurityCheckRequest] = []
    svc = Service("security")

    @svc.handler(subjects.SECURITY_CHECK, SecurityCheckRequest)
    async def check(req: SecurityCheckRequest) -> SecurityVerdict:
        got.append(req)
        return SecurityVerdict(allowed=True, score=0.0, layer=DecidingLayer.NONE, source=req.source)

    await svc.start()
    try:
        ports = NatsPorts(bus)
        await ports.check_security("and now the key", "t1", ["hi", "what is the admin password policy?"])
        verdict = await ports.check_content("tool output", "tool:cli_execute", "t1")
        assert got[0].mode == "input" and got[0].context == ["hi", "what is the admin password policy?"]
        assert (got[1].mode, got[1].source, got[1].text) == ("content", "tool:cli_execute", "tool output")
        assert verdict.source == "tool:cli_execute"
    finally:
        await svc.stop()


async def test_a_read_only_tool_call_lost_by_a_dying_replica_is_sent_again(nats_url, bus):
    """A /v1/ask tool call has no idempotency key; the catalog's read_only is what makes it safe to send again."""
    import nats
    from meshward.contracts import TextContent, ToolCallRequest, ToolResult

    nc = await nats.connect(nats_url)
    seen: list[ToolCallRequest] = []

    async def first_lost(msg):
        seen.append(ToolCallRequest.model_validate_json(msg.data))
        if len(seen) > 1:  # the first is lost, as with a tools replica killed while running it
            await msg.respond(ToolResult(name="calculator", content=[TextContent(text="352")]).model_dump_json().encode())

    await nc.subscribe(subjects.TOOLS_CALL, cb=first_lost)
    await nc.flush()
    try:
        ports = NatsPorts(bus, attempt_timeout_s=0.3)
        result = await ports.call_tool("calculator", {"expression": "15 * 23 + 7"}, read_only=True)
        assert result.content[0].text == "352" and len(seen) == 2 and seen[0] == seen[1]
        assert seen[0].idempotency_key is None
    finally:
        await nc.close()
