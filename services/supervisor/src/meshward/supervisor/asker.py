"""One question through the graph: deadline, request id, the run, the completion event."""
from __future__ import annotations

import asyncio
import time
import uuid

from meshward.bus import context
from meshward.bus.tracing import current_trace_id
from meshward.contracts import AgentDecision, InteractionCompleted, subjects

from . import credentials
from .models import AskResponse
from .ports import AgentPorts
from .state import fresh_run


def images_of(results: list[dict]) -> list[dict[str, str]]:
    return [
        {"mime_type": c.get("mime_type", "image/png"), "data_base64": c["data"]}
        for r in results
        for c in r.get("content", [])
        if c.get("type") == "image"
    ]


class Asker:
    def __init__(self, graph, ports: AgentPorts, timeout_s: float = 30.0, recursion_limit: int = 40):
        self.graph = graph
        self.ports = ports
        self.timeout_s = timeout_s
        self.recursion_limit = recursion_limit

    async def ask(self, question: str, thread_id: str | None = None, attachments: list[dict[str, str]] | None = None) -> AskResponse:
        start = time.perf_counter()
        question, secrets = credentials.redact(question)  # before anything sees or keeps the question
        s_token = credentials.hold(secrets)
        thread_id = thread_id or uuid.uuid4().hex
        request_id = context.new_request_id()
        d_token = context.set_deadline(time.time() + self.timeout_s)
        r_token = context.set_request_id(request_id)
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": self.recursion_limit}
        try:
            async with asyncio.timeout(self.timeout_s):
                state = await self.graph.ainvoke(fresh_run(question, thread_id, request_id, attachments), config, durability="exit")
        except TimeoutError:
            state = {"status": "error", "answer": f"Sorry, that took longer than {self.timeout_s:.0f}s and was stopped. Please try again.", "route": [], "tools_used": []}
        finally:
            context.reset_deadline(d_token)
            context.reset_request_id(r_token)
            credentials.release(s_token)
        duration_ms = (time.perf_counter() - start) * 1000
        intent = state.get("intent") or {}
        response = AskResponse(
            status=state.get("status") or "error",
            answer=state.get("answer") or "Sorry, no answer was produced.",
            refusal_reason=state.get("refusal_reason"),
            threat_category=state.get("threat_category"),
            intent=intent.get("intent"),
            decided_by=(state.get("security") or {}).get("layer"),
            route=state.get("route", []),
            tools_used=state.get("tools_used", []),
            trace_id=current_trace_id() or "0" * 32,
            thread_id=thread_id,
            duration_ms=round(duration_ms, 3),
            request_id=request_id,
            steps=state.get("steps", []),
            images=images_of(state.get("tool_results") or []),
        )
        self.ports.emit(
            subjects.EVENT_INTERACTION,
            InteractionCompleted(
                question=question,
                answer=response.answer,
                status=response.status,
                route=response.route,
                tools_used=response.tools_used,
                duration_ms=response.duration_ms,
                security_blocked=response.refusal_reason == "security",
                intent_rejected=response.refusal_reason == "out_of_scope",
                threat_category=response.threat_category,
                intent=response.intent,
                decisions=[AgentDecision(**d) for d in state.get("decisions", [])],
                thread_id=thread_id,
                request_id=request_id,
                trace_id=response.trace_id,
            ),
        )
        return response
