"""Human approval of tool calls: the pending request, the interrupt's payload, the decision and its audit event.

The tools service decides what needs a human (its policy answers `needs_approval`); the graph pauses there with
LangGraph's `interrupt()`, and only a resume value sent by the HTTP layer (actor = the authenticated caller)
continues it. Nothing the model or the question says can produce a resume.
"""
from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from meshward.contracts import ApprovalDecided

NEEDS_APPROVAL = "needs_approval"
MAX_REASON_CHARS = 1_000


def needs_approval(result: dict[str, Any]) -> bool:
    return (result.get("error") or {}).get("code") == NEEDS_APPROVAL


def pending(tool: str, arguments: dict[str, Any], policy_reason: str, timeout_s: float, **origin: Any) -> dict[str, Any]:
    """A pending approval as kept in the graph state (arguments hold secret placeholders, never values)."""
    now = datetime.now(UTC)
    return {
        "approval_id": uuid.uuid4().hex,
        "tool": tool,
        "arguments": arguments,
        "reason": policy_reason[:MAX_REASON_CHARS],
        "requested_at": now.isoformat(),
        "expires_at": (now + timedelta(seconds=timeout_s)).isoformat(),
        **origin,
    }


def payload(p: dict[str, Any]) -> dict[str, Any]:
    """What the interrupt shows the approver."""
    return {"kind": "approval", **{k: p[k] for k in ("approval_id", "tool", "arguments", "reason", "expires_at")}}


def decide(p: dict[str, Any], value: Any, now: datetime | None = None) -> dict[str, Any]:
    """The decision a resume value makes: approved only when it says so with a boolean, in time."""
    now = now or datetime.now(UTC)
    value = value if isinstance(value, dict) else {}
    actor = str(value.get("actor") or "unknown")[:128]
    reason = value.get("reason")
    reason = str(reason)[:MAX_REASON_CHARS] if reason else None
    if now > datetime.fromisoformat(p["expires_at"]):
        return {"decision": "expired", "actor": actor if value.get("actor") else "system:timeout", "reason": reason or "not decided before it expired"}
    if value.get("approved") is True:
        return {"decision": "approved", "actor": actor, "reason": reason}
    return {"decision": "denied", "actor": actor, "reason": reason if value.get("approved") is False else (reason or "the decision did not say approved")}


def refusal(p: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """The tool result of a call that was not approved (what the answer and the model read)."""
    why = f": {d['reason']}" if d.get("reason") else ""
    verb = "expired without a decision" if d["decision"] == "expired" else f"was denied by {d['actor']}"
    return {"name": p["tool"], "error": {"code": "refused", "message": f"not run: the approval of {p['tool']} {verb}{why}"}}


def audit_event(p: dict[str, Any], d: dict[str, Any], thread_id: str | None, request_id: str | None, trace_id: str | None) -> ApprovalDecided:
    return ApprovalDecided(
        approval_id=p["approval_id"], tool=p["tool"], arguments=p["arguments"], decision=d["decision"], actor=d["actor"], reason=d.get("reason"),
        policy_reason=p.get("reason", ""), requested_at=datetime.fromisoformat(p["requested_at"]),
        thread_id=thread_id, request_id=request_id, trace_id=trace_id,
    )
