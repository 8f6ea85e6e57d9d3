"""The LangGraph graph in the supervisor pattern.

START -> security; after every agent the supervisor picks the next step from
state (decide(), the one routing rule) and records that decision with the agents'
own; the interaction event carries them all. In scope, `assess` picks the tier: fast (template plan -> tools -> answer)
or deep (retrieve -> reason -> validate, refining at most twice); output_check
runs last on every answer. The supervisor runs as part of the agent's step rather than as a node of
its own: the same rule, half the LangGraph supersteps (each costs ~0.5 ms).
Agent steps are calls through AgentPorts (NATS requests in production). Any
failure lands in `error`, which the supervisor routes to the error node; a hard
cap on visits per node stops loops.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from meshward.bus import context, tracer
from meshward.bus.tracing import current_trace_id
from meshward.contracts import (
    OUT_OF_SCOPE,
    ChatMessage,
    ChatRequest,
    ChatRole,
    ClusterChangesRequest,
    RemoteError,
    ThreatCategory,
    subjects,
)
from meshward.telemetry import names
from opentelemetry.trace import Status, StatusCode

from . import approvals, deep
from .assess import assess
from .clusters import CHANGES_CALL
from .credentials import for_screening, reveal
from .planner import Plan, compose_answer, plan, resolve_arguments
from .planner import ToolCall as _Call
from .ports import AgentPorts
from .state import AskState

_tracer = tracer("meshward.supervisor")

AGENTS = ("security", "intent", "assess", "tools", "approval", "answer", "retrieve", "reason", "validate", "output_check", "refuse", "error")
FINISH = "finish"
MAX_CONTEXT_TURN_CHARS = 2_000
LOW_CONFIDENCE_NOTE = "\n\n(Low confidence: this answer could not be fully checked against the tool results and context; {reasons}.)"


@dataclass
class DeepConfig:
    """The deep tier's knobs (SupervisorSettings fills them in production)."""

    enabled: bool = True
    timeout_s: float = 120.0
    min_confidence: float = 0.75
    max_refinements: int = 2
    max_tool_rounds: int = 3
    max_tokens: int = 384
    temperature: float = 0.2
    mcp_tools: list[str] = field(default_factory=list)
    context_turns: int = 5
    similar_k: int = 3
    similar_min_similarity: float = 0.6
    approval_timeout_s: float = 300.0  # an approval not given in time counts as denied

# Failures of these codes are the user's input, answered as such, not system errors.
USER_ERROR_CODES = {"bad_request", "too_large", "refused", "not_found", approvals.NEEDS_APPROVAL}

REFUSALS = {
    "security": "I can't help with that: the request was blocked by the security policy ({category}).",
    # A harmful-content block may refuse someone asking for help in a crisis (the classifier reads "my brother wants
    # to end his life, what do I do?" near self-harm requests): whatever it was, the refusal points to help.
    "harmful_content": "If you or someone you know is in danger or thinking about suicide or self-harm, please "
                       "contact local emergency services or a crisis line now; findahelpline.com lists free, "
                       "confidential lines by country.",
    "out_of_scope": "That's outside what I can help with. " "I'm a data-center operations assistant: ask me about the data center's weather or location, calculations, charts, attached documents, host diagnostics or registered Kubernetes clusters.",
}


def idempotency_key(base: str, tool: str, arguments: dict[str, Any]) -> str:
    """The same call of the same run (a run redelivered to another replica re-runs its steps) gets the same key:
    the tools service then answers with the stored result instead of running it again. Secrets are placeholders
    in `arguments` here, so the key reveals nothing."""
    canonical = json.dumps([base, tool, arguments], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:40]


def decide(state: AskState, max_visits: int) -> tuple[str, str]:
    """The supervisor's routing rule: (next node or FINISH, reason)."""
    nxt, reason = _rule(state)
    if nxt != FINISH and state.get("visits", {}).get(nxt, 0) >= max_visits:
        if nxt == "error" or state.get("visits", {}).get("error", 0) >= 1:
            return FINISH, f"visit cap reached on {nxt}; stopping"
        return "error", f"visit cap: {nxt} already ran {max_visits} times"
    return nxt, reason


def _waits_for_scope(security: dict[str, Any]) -> bool:
    """A security block deferred to scope: it stands only if intent puts the question in scope."""
    return not security["allowed"] and bool(security.get("deferred_to_scope"))


def _rule(state: AskState) -> tuple[str, str]:
    if state.get("status") in ("refused", "error") and state.get("answer") is not None:
        return FINISH, f"{state['status']}: done"
    if state.get("error"):
        return "error", f"failure: {state['error']}"
    if state.get("pending_approval"):
        return "approval", f"{state['pending_approval']['tool']} needs a human's approval"
    security = state.get("security")
    if security is None:
        return "security", "input not checked yet"
    deferred = _waits_for_scope(security)
    if not security["allowed"] and not deferred:
        return "refuse", f"threat: {security.get('threat_category')}"
    intent = state.get("intent")
    if intent is None:
        return "intent", "intent unknown" + (" (security's harm verdict waits for scope)" if deferred else "")
    if not intent["in_scope"]:
        return "refuse", f"off-topic (confidence {intent['confidence']:.2f})"
    if deferred:
        return "refuse", f"threat: {security.get('threat_category')} (in scope: {intent['intent']})"
    tier = state.get("tier")
    if tier is None:
        return "assess", f"in scope: {intent['intent']}"
    if tier == "fast":
        p = state["plan"]
        if p["calls"] and state.get("tool_results") is None:
            return "tools", f"fast tier: {len(p['calls'])} tool call(s) planned"
        if state.get("answer") is None:
            return "answer", "results ready"
    elif state.get("answer") is None:
        if state.get("retrieved") is None:
            return "retrieve", f"deep tier: {state.get('tier_reason')}"
        if state.get("draft") is None:
            return "reason", "context ready"
        validation = state.get("validation")
        if validation is None:
            return "validate", "draft ready"
        return "reason", f"refine: confidence {validation['confidence']:.2f} ({'; '.join(validation.get('reasons') or [])})"
    if state.get("output") is None:
        return "output_check", "answer not checked yet"
    return FINISH, "answer checked"


def _no_calculation(results: list[dict[str, Any]]) -> bool:
    """The calculator's "No calculation found" outcome (its grammar read no expression), not a math error."""
    return any(r.get("name") == "calculator" and r.get("error", {}).get("code") == "bad_request"
               and str(r["error"].get("message", "")).startswith("No calculation found") for r in results)


SPECULATION_TTL_S = 300.0  # a speculative intent call no node collected in this long belonged to a failed run


def _speculation_key(state: AskState) -> tuple[str, str]:
    return (state.get("run_id") or state.get("request_id") or "", state["question"])


def _retrieve_exception(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # a failure is re-raised where the intent node awaits it, never logged as unretrieved


class GraphBuilder:
    def __init__(
        self,
        ports: AgentPorts,
        max_visits: int = 3,
        tool_catalog_ttl_s: float = 30.0,
        deep_config: DeepConfig | None = None,
        parallel_screening: bool = True,
    ):
        self.ports = ports
        self.parallel_screening = parallel_screening
        self._speculative: dict[tuple[str, str], tuple[float, asyncio.Future]] = {}
        self.max_visits = max_visits
        self.deep = deep_config or DeepConfig()
        self._catalog: tuple[float, list] | None = None
        self._catalog_ttl = tool_catalog_ttl_s

    # -- helpers ----------------------------------------------------------
    def _node(self, name: str, fn: Callable[[AskState], Awaitable[dict[str, Any]]]):
        async def run(state: AskState) -> Command:
            start = time.perf_counter()
            # once assess chose the deep tier, every later step (output_check too) runs under the deep
            # deadline, counted from the question's start
            deep_run = state.get("tier") == "deep" and state.get("started_at")
            token = context.set_deadline(state["started_at"] + self.deep.timeout_s) if deep_run else None
            with _tracer.start_as_current_span(names.node_span(name), attributes={"langgraph.node": name}) as span:
                try:
                    update = await fn(state)
                except GraphBubbleUp:
                    raise  # interrupt(): the run pauses here, nothing failed
                except RemoteError as e:
                    span.set_status(Status(StatusCode.ERROR, e.error.message))
                    update = {"error": f"{name}: {e.error.message}", "error_code": str(e.error.code)}
                except Exception as e:  # noqa: BLE001 - any failure becomes the error node's job
                    span.record_exception(e)
                    span.set_status(Status(StatusCode.ERROR, type(e).__name__))
                    update = {"error": f"{name}: internal error ({type(e).__name__})"}
                finally:
                    if token is not None:
                        context.reset_deadline(token)
            update.pop("error_code", None)
            visits = dict(state.get("visits", {}))
            visits[name] = visits.get(name, 0) + 1
            ms = (time.perf_counter() - start) * 1000
            update.update(
                visits=visits,
                route=[*state.get("route", []), name],
                steps=[*state.get("steps", []), {"node": name, "ms": round(ms, 3)}],
            )
            update.update(self.supervise({**state, **update}))
            # the node routes itself (Command, LangGraph's public API): a conditional edge would evaluate a branch
            # runnable per step, a sync one on a thread pool
            return Command(update=update, goto=END if update["next"] == FINISH else update["next"])

        return run

    async def _tool_specs(self) -> list:
        now = time.monotonic()
        if self._catalog is None or now - self._catalog[0] > self._catalog_ttl:
            catalog = await self.ports.list_tools()
            self._catalog = (now, list(catalog.tools))
        return self._catalog[1]

    async def _available_tools(self) -> set[str]:
        return {t.name for t in await self._tool_specs()}

    async def _read_only(self, name: str) -> bool:
        return any(t.name == name and t.read_only for t in await self._tool_specs())

    def _decision(self, state: AskState, agent: str, decision: str, reasoning: str) -> list[dict[str, str]]:
        return [*state.get("decisions", []), {"agent": agent, "decision": decision, "reasoning": reasoning}]

    # -- agents -----------------------------------------------------------
    def _speculate_intent(self, state: AskState) -> None:
        """Start the intent classification while security screens the question (the two are independent reads of
        it). Security's verdict still decides first: a blocked question's classification is cancelled and never
        used; the intent node awaits this call instead of making its own. A run resumed on another replica finds
        nothing here and classifies then."""
        now = time.monotonic()
        while self._speculative:  # drop what a failed run left behind (oldest first)
            key, (started, task) = next(iter(self._speculative.items()))
            if now - started < SPECULATION_TTL_S:
                break
            del self._speculative[key]
            task.cancel()
        task = asyncio.ensure_future(self.ports.classify_intent(state["question"], state.get("has_attachments", False)))
        task.add_done_callback(_retrieve_exception)
        self._speculative[_speculation_key(state)] = (now, task)

    def _take_speculation(self, state: AskState) -> asyncio.Future | None:
        entry = self._speculative.pop(_speculation_key(state), None)
        return entry[1] if entry else None

    async def security(self, state: AskState) -> dict[str, Any]:
        recent = [t["question"][:MAX_CONTEXT_TURN_CHARS] for t in state.get("history", [])[-self.deep.context_turns :]] if self.deep.context_turns else []
        if self.parallel_screening and state.get("intent") is None:
            self._speculate_intent(state)
        try:
            verdict = await self.ports.check_security(for_screening(state["question"]), state.get("thread_id"), recent)
        except BaseException:
            if (task := self._take_speculation(state)) is not None:
                task.cancel()
            raise
        blocked = not verdict.allowed and not verdict.deferred_to_scope
        if blocked and (task := self._take_speculation(state)) is not None:
            task.cancel()
        decision = "ALLOW" if verdict.allowed else "BLOCK" if blocked else "BLOCK_IF_IN_SCOPE"
        return {
            "security": verdict.model_dump(mode="json"),
            "threat_category": str(verdict.threat_category) if blocked else None,
            "decisions": self._decision(state, "security", decision, f"{verdict.layer}: {verdict.reason}"[:500]),
        }

    async def intent(self, state: AskState) -> dict[str, Any]:
        speculative = self._take_speculation(state)
        if speculative is not None:
            result = await speculative
        else:
            result = await self.ports.classify_intent(state["question"], state.get("has_attachments", False))
        return {
            "intent": result.model_dump(mode="json"),
            "decisions": self._decision(state, "intent", result.intent, f"{result.method} confidence {result.confidence:.2f}"),
        }

    async def assess(self, state: AskState) -> dict[str, Any]:
        """Complexity analysis: the template plan is made here, and kept when the fast tier answers."""
        p = plan(
            state["intent"]["intent"],
            state["question"],
            await self._available_tools(),
            state.get("history", []),
            state.get("attachments", []),
        )
        a = assess(state["question"], p, deep_available=self.deep.enabled)
        return {
            "plan": p.to_dict(),
            "tier": a.tier,
            "tier_reason": a.reason,
            "complexity": a.complexity,
            "decisions": self._decision(state, "assess", a.tier, a.reason[:500]),
        }

    async def _call(self, call, done: dict[str, dict[str, Any]], key_base: str | None = None) -> dict[str, Any]:
        try:
            planned = resolve_arguments(call.arguments, done)
            arguments = reveal(planned)
        except KeyError as e:
            return {"name": call.name, "error": {"code": "internal", "message": f"{call.name} needs {e} from an earlier step, which did not provide it"}}
        try:
            if call.name == CHANGES_CALL:  # answered by memory from the stored cluster events
                reply = await self.ports.cluster_changes(ClusterChangesRequest.model_validate(arguments))
                return {"name": call.name, "data": reply.model_dump(mode="json")}
            key = idempotency_key(key_base, call.name, planned) if key_base else None
            result = await self.ports.call_tool(call.name, arguments, idempotency_key=key, read_only=await self._read_only(call.name))
            return result.model_dump(mode="json")
        except RemoteError as e:
            failed = {"name": call.name, "error": e.error.model_dump(mode="json")}
            if str(e.error.code) == approvals.NEEDS_APPROVAL:
                failed["arguments"] = call.arguments  # secret placeholders, not their values: shown to the approver
            return failed

    async def tools(self, state: AskState) -> dict[str, Any]:
        p = Plan.from_dict(state["plan"])
        done: dict[str, dict[str, Any]] = {}
        by_call: dict[int, dict[str, Any]] = {}
        index = {id(c): i for i, c in enumerate(p.calls)}
        for stage in p.stages():
            # calls of one stage are independent: they run in parallel
            key_base = f"{state['run_id']}|tools" if state.get("run_id") else None
            results = await asyncio.gather(*(self._call(c, done, key_base) for c in stage))
            for call, result in zip(stage, results, strict=True):
                by_call[index[id(call)]] = result
                done[call.name] = result
            if any("error" in r for r in results):
                break  # later stages depend on this one
        ordered = [by_call.get(i, {"name": c.name, "error": {"code": "internal", "message": "skipped: an earlier step failed"}}) for i, c in enumerate(p.calls)]
        system_failures = [r for r in ordered if "error" in r and r["error"]["code"] not in USER_ERROR_CODES]
        update: dict[str, Any] = {"tool_results": ordered, "tools_used": [*state.get("tools_used", []), *(c.name for c in p.calls if index[id(c)] in by_call)]}
        waiting = next((i for i, r in enumerate(ordered) if approvals.needs_approval(r)), None)
        if waiting is not None:
            r = ordered[waiting]
            update["pending_approval"] = approvals.pending(r["name"], r["arguments"], r["error"]["message"], self.deep.approval_timeout_s, origin="tools", index=waiting)
        if system_failures:
            update["error"] = f"tools: {system_failures[0]['error']['message']}"
        elif self.deep.enabled and p.purpose == "calculation" and _no_calculation(ordered):
            # a math question in words the grammar cannot read: the deep tier (with the calculator) tries it
            reason = "the calculator found no calculation it can read; the deep tier answers"
            update.update(tier="deep", tier_reason=reason, decisions=self._decision(state, "assess", "deep", reason))
        return update

    async def approval(self, state: AskState) -> dict[str, Any]:
        """Pause for a human (interrupt), then run the call through the tools service's approved path or record
        the refusal; either way the decision goes to the audit log. Only the resume value decides: the HTTP layer
        sends it with the caller's identity, and no text of the question or the model can."""
        p = state["pending_approval"]
        d = approvals.decide(p, interrupt(approvals.payload(p)))
        await self.ports.publish(
            subjects.EVENT_APPROVAL, approvals.audit_event(p, d, state.get("thread_id"), state.get("request_id"), current_trace_id())
        )
        if d["decision"] == "approved":
            try:
                arguments = reveal(p["arguments"])
            except KeyError as e:
                result = {"name": p["tool"], "error": {"code": "refused", "message": f"not run: {e.args[0]} is no longer held (this replica restarted or the approval came too late); ask again"}}
            else:
                try:
                    result = (await self.ports.call_approved_tool(p["tool"], arguments, p["approval_id"], d["actor"])).model_dump(mode="json")
                except RemoteError as e:
                    result = {"name": p["tool"], "error": e.error.model_dump(mode="json")}
        else:
            result = approvals.refusal(p, d)
        update: dict[str, Any] = {
            "pending_approval": None,
            "tools_used": [*state.get("tools_used", []), *([p["tool"]] if d["decision"] == "approved" else [])],
            "decisions": self._decision(state, "approval", d["decision"].upper(), f"{p['tool']}: {d['actor']}{': ' + d['reason'] if d.get('reason') else ''}"[:500]),
        }
        if p.get("origin") == "reason":
            message, withheld = await self._tool_message(result, p.get("tool_call_id"), state.get("thread_id"), p.get("arguments"))
            update.update(
                transcript=[*state.get("transcript", []), message.model_dump(mode="json")],
                tool_results=[*(state.get("tool_results") or []), result],
                withheld=[*state.get("withheld", []), *([withheld] if withheld else [])],
                evidence=[*state.get("evidence", []), *([] if withheld else [message.content])],
            )
        else:
            results = list(state.get("tool_results") or [])
            results[p["index"]] = result
            update["tool_results"] = results
        return update

    async def answer(self, state: AskState) -> dict[str, Any]:
        p = Plan.from_dict(state["plan"])
        text = compose_answer(state["intent"]["intent"], state["question"], p, state.get("tool_results") or [], state.get("attachments"))
        return {"answer": text, "status": "answered"}

    # -- the deep tier ----------------------------------------------------
    async def _checked(self, text: str, source: str, thread_id: str | None, checked: str | None = None) -> tuple[str, str | None]:
        """(what the model may read, the withheld source or None): security's content check first, of ``checked``
        when given (``text`` less what the assistant itself wrote). A check that cannot run withholds too:
        untrusted text never reaches the model unchecked."""
        try:
            verdict = await self.ports.check_content(text if checked is None else checked, source, thread_id)
        except RemoteError as e:
            return deep.withheld_text(source, f"not checked: {e.error.message}"), source
        if verdict.allowed:
            return text, None
        return deep.withheld_text(source, str(verdict.threat_category) if verdict.threat_category else None), source

    async def retrieve(self, state: AskState) -> dict[str, Any]:
        """The thread's compressed context (memory tier 1), similar past interactions (tier 3) and
        the attachments' text (pdf_extract through the tools service, then security's content check)."""
        thread_id = state.get("thread_id")
        notes: list[str] = []

        async def ctx():
            try:
                return await self.ports.thread_context(thread_id) if thread_id else None
            except RemoteError as e:
                notes.append(f"context unavailable: {e.error.message}")
                return None

        async def similar():
            if not self.deep.similar_k:
                return None
            try:
                return await self.ports.search_memory(state["question"], self.deep.similar_k)
            except RemoteError as e:
                notes.append(f"similar interactions unavailable: {e.error.message}")
                return None

        async def document(a: dict[str, str]) -> dict[str, Any]:
            name = a.get("name", "attachment")[:100]
            result = await self._call(_Call("pdf_extract", {"content_base64": a["content_base64"]}), {})
            text = deep.clip(deep.tool_result_text(result), deep.MAX_DOCUMENT_CHARS)
            shown, withheld = await self._checked(text, f"document:{name}", thread_id)
            return {"name": name, "text": shown, "withheld": withheld}

        attachments = [a for a in state.get("attachments") or [] if a.get("content_base64")]
        reply, hits, *docs = await asyncio.gather(ctx(), similar(), *(document(a) for a in attachments))
        retrieved: dict[str, Any] = {"summary": None, "turns": [], "similar": [], "documents": docs}
        if reply is not None:
            retrieved["summary"] = reply.summary
            retrieved["turns"] = [{"question": t.question, "answer": t.answer} for t in reply.turns]
        if hits is not None:
            retrieved["similar"] = [
                {"question": h.text, "answer": str(h.metadata.get("answer") or "")}
                for h in hits.hits
                if h.similarity >= self.deep.similar_min_similarity and h.metadata.get("thread_id") != thread_id and h.metadata.get("answer")
            ]
        withheld = [d["withheld"] for d in docs if d["withheld"]]
        update: dict[str, Any] = {
            "retrieved": retrieved,
            "evidence": [*state.get("evidence", []), *(d["text"] for d in docs if not d["withheld"])],
            "withheld": [*state.get("withheld", []), *withheld],
            "tools_used": [*state.get("tools_used", []), *(["pdf_extract"] if attachments else [])],
        }
        summary = f"{len(retrieved['turns'])} turn(s), summary {'yes' if retrieved['summary'] else 'no'}, {len(retrieved['similar'])} similar, {len(docs)} document(s)"
        update["decisions"] = self._decision(state, "retrieve", "CONTEXT", "; ".join([summary, *notes])[:500])
        return update

    async def _tool_message(self, result: dict[str, Any], call_id: str | None, thread_id: str | None, arguments: dict[str, Any] | None = None) -> tuple[ChatMessage, str | None]:
        """A tool result as the model reads it: checked by security first (untrusted text, less the echoes of the
        call's own ``arguments``)."""
        name = result["name"]
        checked = deep.tool_result_text(result, echoes_of=arguments) if arguments else None
        shown, withheld = await self._checked(deep.tool_result_text(result), f"tool:{name}", thread_id, checked)
        return ChatMessage(role=ChatRole.TOOL, content=shown, tool_call_id=call_id, name=name), withheld

    async def _run_tool_calls(self, calls, allowed: set[str], thread_id: str | None, key_base: str | None = None) -> tuple[list[ChatMessage], list[dict[str, Any]], list[str], dict[str, Any] | None]:
        """Run the model's tool calls (in parallel, through the tools service) and check each result.
        A call that needs a human's approval gets no message yet: it is returned as the pending approval."""

        async def one(call) -> tuple[ChatMessage | None, dict[str, Any] | None, str | None]:
            if call.name not in allowed:
                text = f"error: there is no tool named {call.name!r} here; available: {', '.join(sorted(allowed)) or 'none'}"
                return ChatMessage(role=ChatRole.TOOL, content=text, tool_call_id=call.id, name=call.name[:128]), None, None
            result = await self._call(_Call(call.name, call.arguments), {}, key_base)
            if approvals.needs_approval(result):
                return None, result, None
            message, withheld = await self._tool_message(result, call.id, thread_id, call.arguments)
            return message, result, withheld

        done = await asyncio.gather(*(one(c) for c in calls))
        waiting = next(((c, r) for c, (m, r, _) in zip(calls, done, strict=True) if m is None), None)
        pending = None
        if waiting is not None:
            call, r = waiting
            pending = approvals.pending(r["name"], r["arguments"], r["error"]["message"], self.deep.approval_timeout_s, origin="reason", tool_call_id=call.id)
        return [m for m, _, _ in done if m is not None], [r for m, r, _ in done if r is not None and m is not None], [w for _, _, w in done if w], pending

    async def reason(self, state: AskState) -> dict[str, Any]:
        """The LLM over NATS with the in-scope intent's tools; a bounded number of tool rounds."""
        specs = deep.allowed_tools(state["intent"]["intent"], await self._tool_specs(), self.deep.mcp_tools)
        allowed = {t.name for t in specs}
        validation = state.get("validation")
        refining = validation is not None and state.get("draft") is not None
        transcript = [ChatMessage.model_validate(m) for m in state.get("transcript") or []]
        if not transcript:
            transcript = deep.base_messages(state["question"], state.get("retrieved") or {})
        if refining:
            transcript += deep.refine_message(state["draft"], validation)
        writer = get_stream_writer() if state.get("stream") else None
        draft_no = state.get("refinements", 0) + (1 if refining else 0)
        on_token = (lambda delta, restart: writer({"delta": delta, "draft": draft_no, "restart": restart})) if writer else None
        usage = dict(state.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0})
        results: list[dict[str, Any]] = []
        withheld: list[str] = []
        tools_used: list[str] = []
        evidence: list[str] = []
        notes: list[str] = []
        started = time.monotonic()
        rounds, tools_off = 0, False
        pending = None
        while True:
            offer = specs if not tools_off and rounds < self.deep.max_tool_rounds else []  # the last round must answer
            request = ChatRequest(messages=deep.fit(transcript), tools=offer, max_tokens=self.deep.max_tokens, temperature=self.deep.temperature)
            try:
                response = await self.ports.chat(request, on_token, timeout=context.remaining(self.deep.timeout_s))
            except RemoteError as e:
                if offer and str(e.error.code) != "deadline_exceeded":
                    # A model that cannot produce a valid tool call (a small local one) may still answer
                    # directly: one more try without tools. With every provider down this fails fast too.
                    tools_off = True
                    notes.append(f"without tools after: {e.error.message}"[:200])
                    if on_token:
                        on_token("", True)
                    continue
                if refining:
                    return self._keep_draft(state, f"refinement failed: {e.error.message}")
                raise
            usage["prompt_tokens"] += response.usage.prompt_tokens
            usage["completion_tokens"] += response.usage.completion_tokens
            calls = response.message.tool_calls
            if not calls or not offer:
                break
            rounds += 1
            transcript.append(response.message)
            key_base = f"{state['run_id']}|reason" if state.get("run_id") else None
            messages, ran, held, pending = await self._run_tool_calls(calls, allowed, state.get("thread_id"), key_base)
            transcript += messages
            evidence += [m.content for m in messages if not m.content.startswith("[withheld")]
            results += ran
            withheld += held
            tools_used += [r["name"] for r in ran]
            if pending is not None:
                break  # a human decides on that call; the model goes on from this transcript afterwards
        return {
            "draft": None if pending else response.message.content,
            "pending_approval": pending,
            "finish_reason": response.finish_reason,
            "transcript": [m.model_dump(mode="json") for m in transcript],
            "validation": None,
            "refinements": draft_no,
            "llm": {"provider": response.provider, "model": response.model, "attempts": [a.model_dump(mode="json") for a in response.attempts][-10:]},
            "usage": usage,
            "tool_results": [*(state.get("tool_results") or []), *results],
            "tools_used": [*state.get("tools_used", []), *tools_used],
            "withheld": [*state.get("withheld", []), *withheld],
            "evidence": [*state.get("evidence", []), *evidence],
            "draft_s": round(time.monotonic() - started, 3),
            "decisions": self._decision(state, "reason", f"{response.provider}/{response.model}", "; ".join([f"draft {draft_no + 1}: {len(tools_used)} tool call(s), finish {response.finish_reason}", *notes])[:500]),
        }

    def _final_text(self, state: AskState, text: str, low_confidence: str | None) -> str:
        text = text.strip() or "I couldn't produce an answer to that."
        if low_confidence:
            text += LOW_CONFIDENCE_NOTE.format(reasons=low_confidence)
        for source in dict.fromkeys(state.get("withheld") or []):
            text += f"\n\nNote: the content of {source} was withheld by the security check and not read."
        return text

    def _keep_draft(self, state: AskState, why: str) -> dict[str, Any]:
        """A refinement that could not run: answer with the draft already validated, saying so."""
        reasons = "; ".join((state.get("validation") or {}).get("reasons") or [])
        return {
            "answer": self._final_text(state, state.get("draft") or "", "; ".join(r for r in (reasons, why) if r)),
            "status": "answered",
            "decisions": self._decision(state, "reason", "KEEP_DRAFT", why[:500]),
        }

    async def validate(self, state: AskState) -> dict[str, Any]:
        """Score the draft; accept it, send it back to `reason` for refinement, or, with no refinements
        left, answer with it and say that it is unconfirmed."""
        retrieved = state.get("retrieved") or {}
        v = deep.score_draft(state["question"], state.get("draft") or "", state.get("evidence") or [], deep.context_messages({**retrieved, "documents": []}), state.get("finish_reason") or "stop")
        result = v.to_dict(self.deep.min_confidence)
        refinements_left = min(
            min(self.deep.max_refinements, self.max_visits - 1) - state.get("refinements", 0),
            self.max_visits - state.get("visits", {}).get("reason", 0),  # a run resumed after an approval used one
        )
        if refinements_left > 0 and not result["passed"] and context.remaining(float("inf")) < 1.5 * (state.get("draft_s") or 0.0) + 1.0:
            refinements_left = 0  # another draft would not finish before the deadline
            v.reasons.append("no time left to refine")
        update: dict[str, Any] = {
            "validation": result,
            "confidence": result["confidence"],
            "decisions": self._decision(state, "validate", "PASS" if result["passed"] else ("REFINE" if refinements_left > 0 else "ACCEPT_LOW"), f"confidence {result['confidence']:.2f}: {'; '.join(v.reasons) or 'ok'}"[:500]),
        }
        if not result["passed"] and refinements_left > 0:
            return update
        low = None if result["passed"] else ("; ".join(v.reasons) or "low confidence")
        update.update(answer=self._final_text(state, state.get("draft") or "", low), status="answered")
        return update

    async def output_check(self, state: AskState) -> dict[str, Any]:
        verdict = await self.ports.check_output(state["answer"], state["question"])
        update: dict[str, Any] = {"output": verdict.model_dump(mode="json")}
        if not verdict.safe:
            update["answer"] = verdict.redacted_answer or "I can't share that answer: it would expose protected information."
            update["decisions"] = self._decision(state, "output_safety", "REDACT", f"leak: {verdict.leak}")
        return update

    async def refuse(self, state: AskState) -> dict[str, Any]:
        security = state.get("security") or {}
        intent = state.get("intent") or {}
        # a deferred harm verdict stands only for a question in scope; out of scope, the scope refusal answers it
        deferred = bool(security) and _waits_for_scope(security)
        if security and not security["allowed"] and not (deferred and not intent.get("in_scope", True)):
            category = security.get("threat_category")
            text = REFUSALS["security"].format(category=category)
            if category == ThreatCategory.HARMFUL_CONTENT:
                text += " " + REFUSALS["harmful_content"]
            return {"answer": text, "status": "refused", "refusal_reason": "security", "threat_category": category}
        text = REFUSALS["out_of_scope"]
        if deferred:  # unsure, but about harm: someone in a crisis is still pointed to help
            text += " " + REFUSALS["harmful_content"]
        return {"answer": text, "status": "refused", "refusal_reason": "out_of_scope"}

    async def error(self, state: AskState) -> dict[str, Any]:
        detail = state.get("error") or "unknown failure"
        if state.get("tier") == "deep" and detail.startswith("reason:"):
            return {
                "answer": (
                    f"I couldn't answer that: the language model behind the deep tier failed ({detail.removeprefix('reason: ')}). "
                    "Questions the fast tier answers (calculations, weather, location, charts, documents, host diagnostics) still work."
                ),
                "status": "error",
            }
        return {
            "answer": (
                "Sorry, I couldn't complete that request because a part of the system failed "
                f"({detail}). Please try again in a moment; if it keeps happening, check `GET /healthz`."
            ),
            "status": "error",
        }

    def supervise(self, state: AskState) -> dict[str, Any]:
        """The supervisor: decide the next step from the state an agent just left. The decision joins the run's
        decisions, which the interaction event carries (one event per question, not one per step)."""
        nxt, reason = decide(state, self.max_visits)
        update: dict[str, Any] = {"next": nxt, "decisions": self._decision(state, "supervisor", nxt, reason[:500])}
        if nxt == FINISH:
            update["history"] = [*state.get("history", []), {"question": state["question"], "answer": state.get("answer") or ""}][-50:]
        return update

    # -- assembly ---------------------------------------------------------
    def build(self, checkpointer=None):
        g = StateGraph(AskState)
        for name in AGENTS:
            g.add_node(name, self._node(name, getattr(self, name)), destinations=(*AGENTS, END))
        g.add_edge(START, "security")
        return g.compile(checkpointer=checkpointer)


__all__ = ["AGENTS", "FINISH", "GraphBuilder", "OUT_OF_SCOPE", "decide"]
