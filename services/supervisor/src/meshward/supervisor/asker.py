"""One question through the graph: deadline, request id, the run, the completion event."""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from langgraph.types import Command
from meshward.bus import context
from meshward.bus.tracing import current_trace_id
from meshward.contracts import AgentDecision, InteractionCompleted, subjects
from meshward.contracts.events import MAX_DECISIONS

from . import credentials
from .models import ApprovalRequest, AskResponse
from .ports import AgentPorts
from .state import fresh_run

log = logging.getLogger(__name__)


class NoPendingApproval(Exception):
    """A decision for a thread that is not waiting for one (unknown thread: `known` is False)."""

    def __init__(self, thread_id: str, known: bool):
        super().__init__(f"thread {thread_id} has no pending approval" if known else f"no thread {thread_id}")
        self.known = known


def pending_approval(state: dict[str, Any]) -> dict[str, Any] | None:
    """The approval payload a paused run waits on, from its final values or `__interrupt__`."""
    for item in state.get("__interrupt__") or ():
        value = getattr(item, "value", None)
        if isinstance(value, dict) and value.get("kind") == "approval":
            return value
    return None


def images_of(results: list[dict]) -> list[dict[str, str]]:
    return [
        {"mime_type": c.get("mime_type", "image/png"), "data_base64": c["data"]}
        for r in results
        for c in r.get("content", [])
        if c.get("type") == "image"
    ]


DEADLINE_GRACE_S = 3.0

# (event name, data): "step" after each graph step, "token" as the answer's tokens arrive
Sink = Callable[[str, dict[str, Any]], Awaitable[None]]
# (stream mode, chunk) of LangGraph's updates/custom/values streams, as the graph yields them
ChunkSink = Callable[[str, Any], Awaitable[None]]


def _decided_by(state: dict[str, Any]) -> str | None:
    """The security layer behind the outcome; none when a block deferred to scope ended as a scope refusal."""
    security = state.get("security") or {}
    if security.get("deferred_to_scope") and state.get("refusal_reason") == "out_of_scope":
        return "none"
    return security.get("layer")


class Asker:
    def __init__(self, graph, ports: AgentPorts, timeout_s: float = 30.0, recursion_limit: int = 40, deep_timeout_s: float | None = None):
        self.graph = graph
        self.ports = ports
        self.timeout_s = timeout_s
        # the fast tier's hops run under timeout_s; deep-tier nodes take their own, longer deadline (graph.py)
        # plus a grace so that a node's own deadline error (naming what failed) wins over this blunt stop
        self.total_timeout_s = max(timeout_s, deep_timeout_s or 0.0) + DEADLINE_GRACE_S
        self.recursion_limit = recursion_limit
        # Secrets of runs paused for an approval, by thread, until they expire: held in this process only (never
        # checkpointed), so an approved call gets the token the question carried.
        self._held: dict[str, tuple[dict[str, str], float]] = {}
        self._expiry: dict[str, float] = {}  # thread -> when its pending approval expires (the sweeper's list)
        self._expired = asyncio.Event()

    async def _run(self, inputs, config, sink: Sink | None, on_chunk: ChunkSink | None = None) -> dict[str, Any]:
        if sink is None and on_chunk is None:
            return await self.graph.ainvoke(inputs, config, durability="exit")
        state: dict[str, Any] = {}
        async for mode, chunk in self.graph.astream(inputs, config, stream_mode=["updates", "custom", "values"], durability="exit"):
            if on_chunk is not None:
                await on_chunk(mode, chunk)
            if sink is None:
                if mode == "values":
                    state = chunk
            elif mode == "values":
                state = chunk
            elif mode == "updates":
                for node, update in chunk.items():
                    if not isinstance(update, dict):
                        continue  # __interrupt__: the run paused
                    step = (update or {}).get("steps") or [{}]
                    await sink("step", {"node": node, "ms": step[-1].get("ms"), "next": (update or {}).get("next")})
            else:
                await sink("token", chunk)
        return state

    async def ask(
        self,
        question: str,
        thread_id: str | None = None,
        attachments: list[dict[str, str]] | None = None,
        sink: Sink | None = None,
    ) -> AskResponse:
        thread_id = thread_id or uuid.uuid4().hex
        state, response = await self.execute(thread_id, question=question, attachments=attachments, sink=sink)
        return await self._answer(state, response, thread_id, sink)

    async def resume(self, thread_id: str, decision: dict[str, Any], sink: Sink | None = None) -> AskResponse:
        """Continue a run paused for an approval with a human's decision ({approved, reason, actor})."""
        snapshot = await self.graph.aget_state({"configurable": {"thread_id": thread_id}})
        if not snapshot.values:
            raise NoPendingApproval(thread_id, known=False)
        if not any(pending_approval({"__interrupt__": t.interrupts}) for t in snapshot.tasks):
            raise NoPendingApproval(thread_id, known=True)
        state, response = await self.execute(thread_id, resume=decision, sink=sink)
        return await self._answer(state, response, thread_id, sink)

    async def _answer(self, state: dict[str, Any], response: AskResponse | None, thread_id: str, sink: Sink | None) -> AskResponse:
        if response is not None:
            return response
        response = self.response(state, thread_id=thread_id, request_id=context.new_request_id(), duration_ms=0.0)
        if response.approval is not None and sink is not None:
            await sink("approval", response.approval.model_dump(mode="json"))
        return response

    async def expire_approvals(self) -> None:
        """Resolve approvals nobody decided in time as expired (the audit log records them): runs for the
        supervisor's lifetime, waking at the earliest expiry."""
        while True:
            now = time.time()
            due = [t for t, at in self._expiry.items() if at <= now]
            for thread_id in due:
                self._expiry.pop(thread_id, None)
                try:
                    await self.resume(thread_id, {"approved": False, "actor": "system:timeout", "reason": "not decided in time"})
                except NoPendingApproval:
                    pass  # decided meanwhile
                except Exception:  # noqa: BLE001 - one thread's failure must not stop the sweeper
                    log.exception("expiring the approval of thread %s failed", thread_id)
            nxt = min(self._expiry.values(), default=None)
            self._expired.clear()
            try:
                await asyncio.wait_for(self._expired.wait(), timeout=None if nxt is None else max(0.0, nxt - time.time()))
            except TimeoutError:
                pass

    async def execute(
        self,
        thread_id: str,
        *,
        question: str | None = None,
        attachments: list[dict[str, str]] | None = None,
        resume: Any = None,
        sink: Sink | None = None,
        on_chunk: ChunkSink | None = None,
        run_id: str | None = None,
    ) -> tuple[dict[str, Any], AskResponse | None]:
        """One run of the graph on `thread_id`: a new question, or `resume` (the value of a pending
        interrupt()) when `question` is None. `on_chunk` receives every (mode, chunk) of the updates,
        custom and values streams (the Agent Protocol runner); `sink` the ingress's step/token events.
        Returns the final graph state and its AskResponse (the interaction event stored before), or None
        for the response when the run paused at an interrupt (the state then carries `__interrupt__`)."""
        start = time.perf_counter()
        started_at = time.time()
        secrets: dict = {}
        if question is not None:
            question, secrets = credentials.redact(question)  # before anything sees or keeps the question
            self._held.pop(thread_id, None)
        else:
            held = self._held.pop(thread_id, None)
            secrets = held[0] if held and held[1] > started_at else {}
        self._expiry.pop(thread_id, None)
        s_token = credentials.hold(secrets)
        request_id = context.new_request_id()
        d_token = context.set_deadline(started_at + self.timeout_s)
        r_token = context.set_request_id(request_id)
        config = {"configurable": {"thread_id": thread_id}, "recursion_limit": self.recursion_limit}
        streaming = sink is not None or on_chunk is not None
        if question is not None:
            inputs: Any = fresh_run(question, thread_id, request_id, attachments, started_at=started_at, stream=streaming, run_id=run_id)
        else:
            # the deadlines of the steps after the pause count from the decision, not from the question
            inputs = Command(resume=resume, update={"started_at": started_at})
        try:
            async with asyncio.timeout(self.total_timeout_s):
                state = await self._run(inputs, config, sink, on_chunk)
        except TimeoutError:
            state = {"status": "error", "answer": f"Sorry, that took longer than {self.total_timeout_s - DEADLINE_GRACE_S:.0f}s and was stopped. Please try again.", "route": [], "tools_used": []}
        finally:
            context.reset_deadline(d_token)
            context.reset_request_id(r_token)
            credentials.release(s_token)
        if state.get("__interrupt__"):
            p = pending_approval(state)
            if p is not None:
                expires = datetime.fromisoformat(p["expires_at"]).timestamp()
                if secrets:
                    self._held[thread_id] = (secrets, expires)
                self._expiry[thread_id] = expires
                self._expired.set()  # the sweeper re-reads the earliest expiry
            return state, None
        response = self.response(state, thread_id=thread_id, request_id=request_id, duration_ms=(time.perf_counter() - start) * 1000)
        await self._store(self._interaction(state, response, question if question is not None else state.get("question") or ""), request_id)
        return state, response

    def response(self, state: dict[str, Any], *, thread_id: str, request_id: str, duration_ms: float) -> AskResponse:
        """A final graph state as the ingress's answer."""
        intent = state.get("intent") or {}
        paused = self._paused(state)
        return AskResponse(
            status=paused.get("status") or state.get("status") or "error",
            answer=paused.get("answer") or state.get("answer") or "Sorry, no answer was produced.",
            refusal_reason=state.get("refusal_reason"),
            threat_category=state.get("threat_category"),
            intent=intent.get("intent"),
            decided_by=_decided_by(state),
            route=state.get("route", []),
            tools_used=state.get("tools_used", []),
            trace_id=current_trace_id() or "0" * 32,
            thread_id=thread_id,
            duration_ms=round(duration_ms, 3),
            request_id=request_id,
            steps=state.get("steps", []),
            images=images_of(state.get("tool_results") or []),
            tier=state.get("tier"),
            tier_reason=state.get("tier_reason"),
            model=f"{llm['provider']}/{llm['model']}" if (llm := state.get("llm")) else None,
            confidence=state.get("confidence"),
            usage=state.get("usage") or {},
            withheld=list(dict.fromkeys(state.get("withheld") or [])),
            approval=paused.get("approval"),
        )

    @staticmethod
    def _paused(state: dict[str, Any]) -> dict[str, Any]:
        p = pending_approval(state)
        if p is None:
            return {}
        tool = p["tool"]
        return {
            "status": "awaiting_approval",
            "answer": f"{tool} needs a human's approval before it runs ({p['reason']}). Approve or deny it: "
                      f"POST /v1/threads/<thread>/approval, `meshward approve`, or the console.",
            "approval": ApprovalRequest(**{k: p[k] for k in ("approval_id", "tool", "arguments", "reason", "expires_at")}),
        }

    @staticmethod
    def _interaction(state: dict[str, Any], response: AskResponse, question: str) -> tuple:
        # Stored in the stream (publish ack) before the answer goes out: a crash right after answering loses
        # nothing, and a history read after the answer finds the event (memory waits for its consumer to reach
        # the stream's end). The question's routing events were published earlier on the same connection.
        return (
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
                decisions=[AgentDecision.bounded(d["agent"], d["decision"], d.get("reasoning", "")) for d in state.get("decisions", [])[:MAX_DECISIONS]],
                thread_id=response.thread_id,
                request_id=response.request_id,
                trace_id=response.trace_id,
            ),
        )

    async def _store(self, interaction: tuple, request_id: str, attempts: int = 3) -> None:
        """Publish with a few retries (a nats-server restart drops what was in flight; the event id de-duplicates
        a repeat); after that the answer is not withheld because the event store is down."""
        for attempt in range(1, attempts + 1):
            try:
                await self.ports.publish(*interaction)
                return
            except Exception as e:  # noqa: BLE001 - retried, then logged
                if attempt == attempts:
                    log.warning("interaction event of %s not stored: %s", request_id, e)
                    return
                await asyncio.sleep(0.2 * attempt)
