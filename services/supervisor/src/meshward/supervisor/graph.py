"""The LangGraph graph in the supervisor pattern.

START -> security; after every agent the supervisor picks the next step from
state (decide(), the one routing rule) and publishes that decision as a routing
event. The supervisor runs as part of the agent's step rather than as a node of
its own: the same rule, half the LangGraph supersteps (each costs ~0.5 ms).
Agent steps are calls through AgentPorts (NATS requests in production). Any
failure lands in `error`, which the supervisor routes to the error node; a hard
cap on visits per node stops loops.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.graph import END, START, StateGraph
from meshward.bus import tracer
from meshward.bus.tracing import current_trace_id
from meshward.contracts import OUT_OF_SCOPE, RemoteError, RoutingDecision, subjects
from opentelemetry.trace import Status, StatusCode

from .credentials import for_screening, reveal
from .planner import Plan, compose_answer, plan, resolve_arguments
from .ports import AgentPorts
from .state import AskState

_tracer = tracer("meshward.supervisor")

AGENTS = ("security", "intent", "plan", "tools", "answer", "output_check", "refuse", "error")
FINISH = "finish"

# Failures of these codes are the user's input, answered as such, not system errors.
USER_ERROR_CODES = {"bad_request", "too_large", "refused", "not_found"}

REFUSALS = {
    "security": "I can't help with that: the request was blocked by the security policy ({category}).",
    "out_of_scope": "That's outside what I can help with. " "I'm a data-center operations assistant: ask me about the data center's weather or location, calculations, charts, attached documents, host diagnostics or registered Kubernetes clusters.",
}


def decide(state: AskState, max_visits: int) -> tuple[str, str]:
    """The supervisor's routing rule: (next node or FINISH, reason)."""
    nxt, reason = _rule(state)
    if nxt != FINISH and state.get("visits", {}).get(nxt, 0) >= max_visits:
        if nxt == "error" or state.get("visits", {}).get("error", 0) >= 1:
            return FINISH, f"visit cap reached on {nxt}; stopping"
        return "error", f"visit cap: {nxt} already ran {max_visits} times"
    return nxt, reason


def _rule(state: AskState) -> tuple[str, str]:
    if state.get("status") in ("refused", "error") and state.get("answer") is not None:
        return FINISH, f"{state['status']}: done"
    if state.get("error"):
        return "error", f"failure: {state['error']}"
    security = state.get("security")
    if security is None:
        return "security", "input not checked yet"
    if not security["allowed"]:
        return "refuse", f"threat: {security.get('threat_category')}"
    intent = state.get("intent")
    if intent is None:
        return "intent", "intent unknown"
    if not intent["in_scope"]:
        return "refuse", f"off-topic (confidence {intent['confidence']:.2f})"
    p = state.get("plan")
    if p is None:
        return "plan", f"in scope: {intent['intent']}"
    if p["calls"] and state.get("tool_results") is None:
        return "tools", f"{len(p['calls'])} tool call(s) planned"
    if state.get("answer") is None:
        return "answer", "results ready"
    if state.get("output") is None:
        return "output_check", "answer not checked yet"
    return FINISH, "answer checked"


def _next(state: AskState) -> str:
    return state["next"]


class GraphBuilder:
    def __init__(self, ports: AgentPorts, max_visits: int = 3, tool_catalog_ttl_s: float = 30.0):
        self.ports = ports
        self.max_visits = max_visits
        self._catalog: tuple[float, set[str]] | None = None
        self._catalog_ttl = tool_catalog_ttl_s

    # -- helpers ----------------------------------------------------------
    def _node(self, name: str, fn: Callable[[AskState], Awaitable[dict[str, Any]]]):
        async def run(state: AskState) -> dict[str, Any]:
            start = time.perf_counter()
            with _tracer.start_as_current_span(f"node {name}", attributes={"langgraph.node": name}) as span:
                try:
                    update = await fn(state)
                except RemoteError as e:
                    span.set_status(Status(StatusCode.ERROR, e.error.message))
                    update = {"error": f"{name}: {e.error.message}", "error_code": str(e.error.code)}
                except Exception as e:  # noqa: BLE001 - any failure becomes the error node's job
                    span.record_exception(e)
                    span.set_status(Status(StatusCode.ERROR, type(e).__name__))
                    update = {"error": f"{name}: internal error ({type(e).__name__})"}
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
            return update

        return run

    async def _available_tools(self) -> set[str]:
        now = time.monotonic()
        if self._catalog is None or now - self._catalog[0] > self._catalog_ttl:
            catalog = await self.ports.list_tools()
            self._catalog = (now, {t.name for t in catalog.tools})
        return self._catalog[1]

    def _decision(self, state: AskState, agent: str, decision: str, reasoning: str) -> list[dict[str, str]]:
        return [*state.get("decisions", []), {"agent": agent, "decision": decision, "reasoning": reasoning}]

    # -- agents -----------------------------------------------------------
    async def security(self, state: AskState) -> dict[str, Any]:
        verdict = await self.ports.check_security(for_screening(state["question"]), state.get("thread_id"))
        decision = "ALLOW" if verdict.allowed else "BLOCK"
        return {
            "security": verdict.model_dump(mode="json"),
            "threat_category": None if verdict.allowed else str(verdict.threat_category),
            "decisions": self._decision(state, "security", decision, f"{verdict.layer}: {verdict.reason}"[:500]),
        }

    async def intent(self, state: AskState) -> dict[str, Any]:
        result = await self.ports.classify_intent(state["question"], state.get("has_attachments", False))
        return {
            "intent": result.model_dump(mode="json"),
            "decisions": self._decision(state, "intent", result.intent, f"{result.method} confidence {result.confidence:.2f}"),
        }

    async def plan(self, state: AskState) -> dict[str, Any]:
        p = plan(
            state["intent"]["intent"],
            state["question"],
            await self._available_tools(),
            state.get("history", []),
            state.get("attachments", []),
        )
        return {"plan": p.to_dict()}

    async def _call(self, call, done: dict[str, dict[str, Any]]) -> dict[str, Any]:
        try:
            arguments = reveal(resolve_arguments(call.arguments, done))
        except KeyError as e:
            return {"name": call.name, "error": {"code": "internal", "message": f"{call.name} needs {e} from an earlier step, which did not provide it"}}
        try:
            return (await self.ports.call_tool(call.name, arguments)).model_dump(mode="json")
        except RemoteError as e:
            return {"name": call.name, "error": e.error.model_dump(mode="json")}

    async def tools(self, state: AskState) -> dict[str, Any]:
        p = Plan.from_dict(state["plan"])
        done: dict[str, dict[str, Any]] = {}
        by_call: dict[int, dict[str, Any]] = {}
        index = {id(c): i for i, c in enumerate(p.calls)}
        for stage in p.stages():
            # calls of one stage are independent: they run in parallel
            results = await asyncio.gather(*(self._call(c, done) for c in stage))
            for call, result in zip(stage, results, strict=True):
                by_call[index[id(call)]] = result
                done[call.name] = result
            if any("error" in r for r in results):
                break  # later stages depend on this one
        ordered = [by_call.get(i, {"name": c.name, "error": {"code": "internal", "message": "skipped: an earlier step failed"}}) for i, c in enumerate(p.calls)]
        system_failures = [r for r in ordered if "error" in r and r["error"]["code"] not in USER_ERROR_CODES]
        update: dict[str, Any] = {"tool_results": ordered, "tools_used": [*state.get("tools_used", []), *(c.name for c in p.calls if index[id(c)] in by_call)]}
        if system_failures:
            update["error"] = f"tools: {system_failures[0]['error']['message']}"
        return update

    async def answer(self, state: AskState) -> dict[str, Any]:
        p = Plan.from_dict(state["plan"])
        text = compose_answer(state["intent"]["intent"], state["question"], p, state.get("tool_results") or [], state.get("attachments"))
        return {"answer": text, "status": "answered"}

    async def output_check(self, state: AskState) -> dict[str, Any]:
        verdict = await self.ports.check_output(state["answer"], state["question"])
        update: dict[str, Any] = {"output": verdict.model_dump(mode="json")}
        if not verdict.safe:
            update["answer"] = verdict.redacted_answer or "I can't share that answer: it would expose protected information."
            update["decisions"] = self._decision(state, "output_safety", "REDACT", f"leak: {verdict.leak}")
        return update

    async def refuse(self, state: AskState) -> dict[str, Any]:
        security = state.get("security") or {}
        if security and not security.get("allowed", True):
            reason = "security"
            text = REFUSALS["security"].format(category=security.get("threat_category"))
        else:
            reason = "out_of_scope"
            text = REFUSALS["out_of_scope"]
        return {"answer": text, "status": "refused", "refusal_reason": reason}

    async def error(self, state: AskState) -> dict[str, Any]:
        detail = state.get("error") or "unknown failure"
        return {
            "answer": (
                "Sorry, I couldn't complete that request because a part of the system failed "
                f"({detail}). Please try again in a moment; if it keeps happening, check `GET /healthz`."
            ),
            "status": "error",
        }

    def supervise(self, state: AskState) -> dict[str, Any]:
        """The supervisor: decide the next step from the state an agent just left."""
        nxt, reason = decide(state, self.max_visits)
        self.ports.emit(
            subjects.EVENT_ROUTING,
            RoutingDecision(
                agent="supervisor",
                decision=nxt,
                reasoning=reason[:500],
                step=len(state.get("route", [])),
                thread_id=state.get("thread_id"),
                request_id=state.get("request_id"),
                trace_id=current_trace_id(),
            ),
        )
        update: dict[str, Any] = {"next": nxt}
        if nxt == FINISH:
            update["history"] = [*state.get("history", []), {"question": state["question"], "answer": state.get("answer") or ""}][-50:]
        return update

    # -- assembly ---------------------------------------------------------
    def build(self, checkpointer=None):
        g = StateGraph(AskState)
        targets = {**{a: a for a in AGENTS}, FINISH: END}
        for name in AGENTS:
            g.add_node(name, self._node(name, getattr(self, name)))
            g.add_conditional_edges(name, _next, targets)
        g.add_edge(START, "security")
        return g.compile(checkpointer=checkpointer)


__all__ = ["AGENTS", "FINISH", "GraphBuilder", "OUT_OF_SCOPE", "decide"]
