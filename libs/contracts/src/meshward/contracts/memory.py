"""meshward.v1.memory.*"""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from .base import MAX_ID_CHARS, Message


class HistoryRequest(Message):
    thread_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    limit: int = Field(default=20, ge=1, le=500)


class Turn(Message):
    question: str
    answer: str
    status: str
    at: datetime
    event_id: str


class HistoryReply(Message):
    thread_id: str
    turns: list[Turn]


class StatsRequest(Message):
    pass


class StatsReply(Message):
    interactions: int
    agent_decisions: int
    events_seen: int


class Hit(Message):
    id: str
    text: str
    similarity: float = Field(ge=-1.0, le=1.0)
    metadata: dict[str, str | int | float | bool | None] = Field(default_factory=dict)


class SearchRequest(Message):
    query: str = Field(min_length=1, max_length=4_000)
    collection: Literal["interactions", "security_threats", "scope_examples"] = "interactions"
    k: int = Field(default=5, ge=1, le=50)


class SearchReply(Message):
    hits: list[Hit]


class SimilarThreatsRequest(Message):
    text: str = Field(max_length=20_000)
    k: int = Field(default=3, ge=1, le=20)
    min_similarity: float = Field(default=0.85, ge=0.0, le=1.0)


class SimilarThreatsReply(Message):
    hits: list[Hit]


class InsightsRequest(Message):
    pass


class InsightsReply(Message):
    total_violations: int
    threat_distribution: dict[str, int]
    last_seen: datetime | None = None
    last_seen_by_category: dict[str, datetime] = Field(default_factory=dict)
    learned_threats: int = 0
    retracted_threats: int = 0


class RetractThreatRequest(Message):
    threat_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class RetractThreatReply(Message):
    threat_id: str
    retracted: bool


class ContextRequest(Message):
    thread_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)


class ContextReply(Message):
    thread_id: str
    summary: str | None = None
    turns: list[Turn]
    tokens: int
    compressed: bool


class ApprovalsRequest(Message):
    thread_id: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    limit: int = Field(default=50, ge=1, le=500)


class ApprovalEntry(Message):
    approval_id: str
    thread_id: str | None = None
    tool: str
    arguments: dict
    decision: Literal["approved", "denied", "expired"]
    actor: str
    reason: str | None = None
    policy_reason: str = ""
    requested_at: datetime | None = None
    decided_at: datetime
    request_id: str | None = None
    trace_id: str | None = None


class ApprovalsReply(Message):
    entries: list[ApprovalEntry]
class ClusterChangesRequest(Message):
    """Changes of the registered clusters within a window, from the stored health-check and audit events."""

    cluster: str | None = Field(default=None, min_length=1, max_length=64)
    since_hours: float = Field(default=24.0, gt=0, le=24 * 31)
    limit: int = Field(default=50, ge=1, le=500)


class ClusterChange(Message):
    cluster: str
    occurred_at: datetime
    kind: Literal["cluster_health", "cluster_audit"]
    previous: str | None = None  # the state before (None: no earlier event stored)
    state: str  # healthy | degraded | unreachable, or registered | updated | removed
    reasons: list[str] = Field(default_factory=list)


class ClusterChangesReply(Message):
    since: datetime
    changes: list[ClusterChange]  # oldest first
    checks: int  # health checks stored in the window (0: no periodic check ran, or none recorded)
    latest: dict[str, str] = Field(default_factory=dict)  # cluster -> last known state
    truncated: bool = False
