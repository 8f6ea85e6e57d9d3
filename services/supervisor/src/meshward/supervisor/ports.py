"""What the graph needs from the other services, as one interface.

`NatsPorts` is the distributed implementation (a typed request per agent step);
anything else with the same methods (an in-process monolith, a test double) can
drive the same graph.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from meshward.bus import Bus
from meshward.contracts import (
    ApprovedToolCallRequest,
    ChatChunk,
    ChatRequest,
    ChatResponse,
    CheckMode,
    ClusterChangesReply,
    ClusterChangesRequest,
    ContextReply,
    ContextRequest,
    Event,
    IntentRequest,
    IntentResult,
    Message,
    OutputCheckRequest,
    OutputVerdict,
    SearchReply,
    SearchRequest,
    SecurityCheckRequest,
    SecurityVerdict,
    ToolCallRequest,
    ToolCatalog,
    ToolListRequest,
    ToolResult,
    subjects,
)
from pydantic import ValidationError

R = TypeVar("R", bound=Message)

log = logging.getLogger(__name__)

# After the reply, chunks published before it may still sit in the stream subscription's queue.
STREAM_TAIL_WAIT_S = 1.0

# (delta, restart): restart=True means the provider that streamed the earlier tokens failed mid-answer
# and another starts over, so a reader drops what it has shown.
TokenSink = Callable[[str, bool], None]


class AgentPorts(Protocol):
    async def check_security(self, text: str, thread_id: str | None, context: list[str] | None = None) -> SecurityVerdict: ...
    async def check_content(self, text: str, source: str, thread_id: str | None = None) -> SecurityVerdict: ...
    async def classify_intent(self, text: str, has_attachments: bool) -> IntentResult: ...
    async def list_tools(self) -> ToolCatalog: ...
    async def call_tool(self, name: str, arguments: dict[str, Any], idempotency_key: str | None = None, read_only: bool = False) -> ToolResult: ...
    async def call_approved_tool(self, name: str, arguments: dict[str, Any], approval_id: str, actor: str) -> ToolResult: ...
    async def check_output(self, answer: str, question: str) -> OutputVerdict: ...
    async def thread_context(self, thread_id: str) -> ContextReply: ...
    async def search_memory(self, query: str, k: int) -> SearchReply: ...
    async def cluster_changes(self, request: ClusterChangesRequest) -> ClusterChangesReply: ...
    async def chat(self, request: ChatRequest, on_token: TokenSink | None = None, timeout: float | None = None) -> ChatResponse: ...
    async def publish(self, subject: str, event: Event) -> None: ...


class NatsPorts:
    def __init__(self, bus: Bus, attempt_timeout_s: float | None = None):
        self.bus = bus
        # MESHWARD_HOP_ATTEMPT_TIMEOUT_S; None: never re-sent
        self.attempt_timeout_s = attempt_timeout_s

    async def _idempotent(self, subject: str, body: Message, reply_type: type[R]) -> R:
        """A call that may safely run twice: a request whose replica died while handling it is sent again after
        the attempt timeout instead of waiting out the whole timeout."""
        return await self.bus.request(subject, body, reply_type, attempt_timeout=self.attempt_timeout_s)

    async def check_security(self, text: str, thread_id: str | None, context: list[str] | None = None) -> SecurityVerdict:
        body = SecurityCheckRequest(text=text, thread_id=thread_id, context=context or [])
        return await self._idempotent(subjects.SECURITY_CHECK, body, SecurityVerdict)

    async def check_content(self, text: str, source: str, thread_id: str | None = None) -> SecurityVerdict:
        body = SecurityCheckRequest(text=text, thread_id=thread_id, mode=CheckMode.CONTENT, source=source)
        return await self._idempotent(subjects.SECURITY_CHECK, body, SecurityVerdict)

    async def classify_intent(self, text: str, has_attachments: bool) -> IntentResult:
        return await self._idempotent(subjects.INTENT_CLASSIFY, IntentRequest(text=text, has_attachments=has_attachments), IntentResult)

    async def list_tools(self) -> ToolCatalog:
        return await self._idempotent(subjects.TOOLS_LIST, ToolListRequest(), ToolCatalog)

    async def call_tool(self, name: str, arguments: dict[str, Any], idempotency_key: str | None = None, read_only: bool = False) -> ToolResult:
        request = ToolCallRequest(name=name, arguments=arguments, idempotency_key=idempotency_key)
        # safe to send twice: the tools service answers a repeated key with the stored result, and a read-only tool
        # changes nothing when it runs again
        if idempotency_key or read_only:
            return await self._idempotent(subjects.TOOLS_CALL, request, ToolResult)
        return await self.bus.request(subjects.TOOLS_CALL, request, ToolResult)

    async def call_approved_tool(self, name: str, arguments: dict[str, Any], approval_id: str, actor: str) -> ToolResult:
        request = ApprovedToolCallRequest(name=name, arguments=arguments, approval_id=approval_id, actor=actor)
        return await self.bus.request(subjects.TOOLS_CALL_APPROVED, request, ToolResult)

    async def check_output(self, answer: str, question: str) -> OutputVerdict:
        return await self._idempotent(subjects.SECURITY_CHECK_OUTPUT, OutputCheckRequest(answer=answer, question=question), OutputVerdict)

    async def thread_context(self, thread_id: str) -> ContextReply:
        return await self._idempotent(subjects.MEMORY_CONTEXT, ContextRequest(thread_id=thread_id), ContextReply)

    async def search_memory(self, query: str, k: int) -> SearchReply:
        return await self._idempotent(subjects.MEMORY_SEARCH, SearchRequest(query=query[:4_000], collection="interactions", k=k), SearchReply)

    async def cluster_changes(self, request: ClusterChangesRequest) -> ClusterChangesReply:
        return await self._idempotent(subjects.MEMORY_CLUSTER_CHANGES, request, ClusterChangesReply)

    async def chat(self, request: ChatRequest, on_token: TokenSink | None = None, timeout: float | None = None) -> ChatResponse:
        """One completion; with `on_token`, the llm service's ChatChunk stream is read from a private inbox."""
        if on_token is None:
            return await self.bus.request(subjects.LLM_CHAT, request, ChatResponse, timeout=timeout)
        nc = self.bus.nc
        inbox = nc.new_inbox()
        finished = asyncio.Event()

        async def on_chunk(msg) -> None:
            try:
                chunk = ChatChunk.model_validate_json(msg.data)
            except ValidationError:
                log.warning("malformed chat chunk on the stream inbox ignored")
                return
            if chunk.delta or chunk.restart:
                on_token(chunk.delta, chunk.restart)
            if chunk.done:
                finished.set()

        sub = await nc.subscribe(inbox, cb=on_chunk)
        try:
            response = await self.bus.request(subjects.LLM_CHAT, request.model_copy(update={"stream_subject": inbox}), ChatResponse, timeout=timeout)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished.wait(), STREAM_TAIL_WAIT_S)
            return response
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def publish(self, subject: str, event: Event) -> None:
        await self.bus.publish_event(subject, event)
