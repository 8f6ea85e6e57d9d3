"""The one table of subjects -> (request, reply) models; schema generation and tests read it."""
from __future__ import annotations

from dataclasses import dataclass

from . import subjects as s
from .base import Message
from .errors import ErrorReply
from .events import (
    ApprovalDecided,
    ClusterAudit,
    ClusterHealthChecked,
    InteractionCompleted,
    SecurityViolation,
    ToolCalled,
)
from .health import HealthReply, HealthRequest
from .intent import IntentRequest, IntentResult
from .llm import ChatRequest, ChatResponse
from .memory import (
    ApprovalsReply,
    ApprovalsRequest,
    ClusterChangesReply,
    ClusterChangesRequest,
    ContextReply,
    ContextRequest,
    HistoryReply,
    HistoryRequest,
    InsightsReply,
    InsightsRequest,
    RetractThreatReply,
    RetractThreatRequest,
    SearchReply,
    SearchRequest,
    SimilarThreatsReply,
    SimilarThreatsRequest,
    StatsReply,
    StatsRequest,
)
from .security import OutputCheckRequest, OutputVerdict, SecurityCheckRequest, SecurityVerdict
from .tools import ApprovedToolCallRequest, ToolCallRequest, ToolCatalog, ToolListRequest, ToolResult


@dataclass(frozen=True)
class Endpoint:
    subject: str
    request: type[Message]
    reply: type[Message]
    owner: str
    summary: str


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(s.SECURITY_CHECK, SecurityCheckRequest, SecurityVerdict, "security", "Classify input text for threats."),
    Endpoint(s.SECURITY_CHECK_OUTPUT, OutputCheckRequest, OutputVerdict, "security", "Check an answer for leaks and relevance."),
    Endpoint(s.INTENT_CLASSIFY, IntentRequest, IntentResult, "intent", "Classify the intent of a question within a scope."),
    Endpoint(s.TOOLS_LIST, ToolListRequest, ToolCatalog, "tools", "List the tool catalog (MCP-style JSON schemas)."),
    Endpoint(s.TOOLS_CALL, ToolCallRequest, ToolResult, "tools", "Call one tool."),
    Endpoint(s.TOOLS_CALL_APPROVED, ApprovedToolCallRequest, ToolResult, "tools", "Run a tool call a human approved (supervisor only)."),
    Endpoint(s.MEMORY_HISTORY, HistoryRequest, HistoryReply, "memory", "A thread's persisted turns."),
    Endpoint(s.MEMORY_STATS, StatsRequest, StatsReply, "memory", "Counts of persisted rows."),
    Endpoint(s.MEMORY_SEARCH, SearchRequest, SearchReply, "memory", "Semantic search in one collection."),
    Endpoint(s.MEMORY_SIMILAR_THREATS, SimilarThreatsRequest, SimilarThreatsReply, "memory", "Learned threats similar to a text."),
    Endpoint(s.MEMORY_INSIGHTS, InsightsRequest, InsightsReply, "memory", "Violation totals, distribution, last seen."),
    Endpoint(s.MEMORY_RETRACT_THREAT, RetractThreatRequest, RetractThreatReply, "memory", "Retract a learned threat (operator fix for a false block)."),
    Endpoint(s.MEMORY_CONTEXT, ContextRequest, ContextReply, "memory", "A thread's compressed context (summary + recent turns)."),
    Endpoint(s.MEMORY_APPROVALS, ApprovalsRequest, ApprovalsReply, "memory", "The approval audit log, newest first."),
    Endpoint(s.MEMORY_CLUSTER_CHANGES, ClusterChangesRequest, ClusterChangesReply, "memory", "Cluster state changes in a window, from stored health and audit events."),
    Endpoint(s.LLM_CHAT, ChatRequest, ChatResponse, "llm", "Chat completion with tool calling; streams ChatChunk on stream_subject."),
) + tuple(
    Endpoint(s.health(name), HealthRequest, HealthReply, name, f"Readiness of the {name} service.")
    for name in s.SERVICES
)

EVENTS: tuple[tuple[str, type[Message]], ...] = (
    (s.EVENT_INTERACTION, InteractionCompleted),
    (s.EVENT_VIOLATION, SecurityViolation),
    (s.EVENT_TOOL_CALLED, ToolCalled),
    (s.EVENT_CLUSTER_AUDIT, ClusterAudit),
    (s.EVENT_CLUSTER_HEALTH, ClusterHealthChecked),
    (s.EVENT_APPROVAL, ApprovalDecided),
)

ERROR_MODEL = ErrorReply
