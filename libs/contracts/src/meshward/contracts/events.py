"""Events on the JetStream stream (meshward.v1.events.>).

Every event carries its own id: JetStream de-duplicates on it (Nats-Msg-Id) and
consumers store it with a unique constraint, so redelivery never doubles a row.
"""
from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from .base import MAX_ID_CHARS, Message
from .security import DecidingLayer, ThreatCategory


def new_event_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> datetime:
    return datetime.now(UTC)


class Event(Message):
    event_id: str = Field(default_factory=new_event_id, max_length=MAX_ID_CHARS)
    occurred_at: datetime = Field(default_factory=utc_now)
    request_id: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    thread_id: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    trace_id: str | None = Field(default=None, max_length=64)


MAX_DECISIONS = 256  # an interaction keeps its run's first decisions (an agent's and the routing per step)
MAX_DECISION_CHARS = 1_000
MAX_REASONING_CHARS = 2_000


class AgentDecision(Message):
    agent: str = Field(max_length=MAX_ID_CHARS)  # which agent reported, or the supervisor routing to the next step
    decision: str = Field(max_length=MAX_DECISION_CHARS)  # the agent's decision (ALLOW, in_scope, ...) or the next step
    reasoning: str = Field(default="", max_length=MAX_REASONING_CHARS)

    @classmethod
    def bounded(cls, agent: str, decision: str, reasoning: str = "") -> AgentDecision:
        return cls(agent=agent[:MAX_ID_CHARS], decision=decision[:MAX_DECISION_CHARS], reasoning=reasoning[:MAX_REASONING_CHARS])


class InteractionCompleted(Event):
    type: Literal["interaction_completed"] = "interaction_completed"
    question: str
    answer: str
    status: Literal["answered", "refused", "error"]
    route: list[str]
    tools_used: list[str] = Field(default_factory=list)
    duration_ms: float
    security_blocked: bool = False
    intent_rejected: bool = False
    threat_category: ThreatCategory | None = None
    intent: str | None = None
    decisions: list[AgentDecision] = Field(default_factory=list, max_length=MAX_DECISIONS)


class SecurityViolation(Event):
    type: Literal["security_violation"] = "security_violation"
    text: str
    # the text with its hidden parts revealed (smuggled Unicode tags, base64/hex runs decoded), as security read it:
    # what memory learns and compares, so that a harmless carrier sentence is never what a threat is made of
    reading: str | None = Field(default=None, max_length=40_000)
    category: ThreatCategory
    score: float
    layer: DecidingLayer


class ToolCalled(Event):
    type: Literal["tool_called"] = "tool_called"
    name: str
    ok: bool
    duration_ms: float
    error_code: str | None = None


class ClusterAudit(Event):
    """A cluster registered, re-registered or removed (tools service). Never carries credentials."""

    type: Literal["cluster_audit"] = "cluster_audit"
    action: Literal["registered", "updated", "removed"]
    cluster: str = Field(max_length=64)
    api_url: str = Field(default="", max_length=2048)
    auth: str = Field(default="", max_length=16)  # token | kubeconfig
    labels: dict[str, str] = Field(default_factory=dict)


class ClusterHealthChecked(Event):
    """One health check of a registered cluster (the periodic check, or a question)."""

    type: Literal["cluster_health"] = "cluster_health"
    cluster: str = Field(max_length=64)
    verdict: Literal["healthy", "degraded", "unreachable"]
    reasons: list[str] = Field(default_factory=list, max_length=32)
    latency_ms: float | None = None
    source: Literal["scheduled", "question"] = "question"


class ApprovalDecided(Event):
    """A human's (or the timeout's) decision on a tool call that needed approval: the audit log's entry."""

    type: Literal["approval_decided"] = "approval_decided"
    approval_id: str = Field(max_length=MAX_ID_CHARS)
    tool: str = Field(max_length=MAX_ID_CHARS)
    arguments: dict = Field(default_factory=dict)  # as shown to the approver: secrets are placeholders
    decision: Literal["approved", "denied", "expired"]
    actor: str = Field(max_length=128)
    reason: str | None = Field(default=None, max_length=1_000)
    policy_reason: str = Field(default="", max_length=1_000)
    requested_at: datetime | None = None
