"""What the graph needs from the other services, as one interface.

`NatsPorts` is the distributed implementation (a typed request per agent step);
anything else with the same methods (an in-process monolith, a test double) can
drive the same graph.
"""
from __future__ import annotations

from typing import Any, Protocol

from meshward.bus import Bus
from meshward.contracts import (
    Event,
    IntentRequest,
    IntentResult,
    OutputCheckRequest,
    OutputVerdict,
    SecurityCheckRequest,
    SecurityVerdict,
    ToolCallRequest,
    ToolCatalog,
    ToolListRequest,
    ToolResult,
    subjects,
)


class AgentPorts(Protocol):
    async def check_security(self, text: str, thread_id: str | None) -> SecurityVerdict: ...
    async def classify_intent(self, text: str, has_attachments: bool) -> IntentResult: ...
    async def list_tools(self) -> ToolCatalog: ...
    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult: ...
    async def check_output(self, answer: str, question: str) -> OutputVerdict: ...
    def emit(self, subject: str, event: Event) -> None: ...
    async def publish(self, subject: str, event: Event) -> None: ...


class NatsPorts:
    def __init__(self, bus: Bus):
        self.bus = bus

    async def check_security(self, text: str, thread_id: str | None) -> SecurityVerdict:
        return await self.bus.request(subjects.SECURITY_CHECK, SecurityCheckRequest(text=text, thread_id=thread_id), SecurityVerdict)

    async def classify_intent(self, text: str, has_attachments: bool) -> IntentResult:
        return await self.bus.request(subjects.INTENT_CLASSIFY, IntentRequest(text=text, has_attachments=has_attachments), IntentResult)

    async def list_tools(self) -> ToolCatalog:
        return await self.bus.request(subjects.TOOLS_LIST, ToolListRequest(), ToolCatalog)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        return await self.bus.request(subjects.TOOLS_CALL, ToolCallRequest(name=name, arguments=arguments), ToolResult)

    async def check_output(self, answer: str, question: str) -> OutputVerdict:
        return await self.bus.request(subjects.SECURITY_CHECK_OUTPUT, OutputCheckRequest(answer=answer, question=question), OutputVerdict)

    def emit(self, subject: str, event: Event) -> None:
        self.bus.emit(subject, event)

    async def publish(self, subject: str, event: Event) -> None:
        await self.bus.publish_event(subject, event)
