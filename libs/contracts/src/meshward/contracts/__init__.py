"""meshward v1 contracts: subjects, message models, the error envelope. Pure pydantic, no I/O."""
from . import subjects
from .base import CONTRACTS_VERSION, MAX_TEXT_CHARS, Message
from .catalog import ENDPOINTS, EVENTS, Endpoint
from .errors import ErrorCode, ErrorReply, RemoteError
from .events import (
    AgentDecision,
    ApprovalDecided,
    ClusterAudit,
    ClusterHealthChecked,
    Event,
    InteractionCompleted,
    SecurityViolation,
    ToolCalled,
    new_event_id,
)
from .health import HealthReply, HealthRequest
from .intent import OUT_OF_SCOPE, IntentRequest, IntentResult, IntentScore
from .llm import (
    AttemptOutcome,
    ChatChunk,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    ChatRole,
    ProviderAttempt,
    ToolCallRequestByModel,
    Usage,
)
from .memory import (
    ApprovalEntry,
    ApprovalsReply,
    ApprovalsRequest,
    ClusterChange,
    ClusterChangesReply,
    ClusterChangesRequest,
    ContextReply,
    ContextRequest,
    HistoryReply,
    HistoryRequest,
    Hit,
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
    Turn,
)
from .security import (
    CheckMode,
    DecidingLayer,
    LeakKind,
    ModelInfo,
    OutputCheckRequest,
    OutputVerdict,
    SecurityCheckRequest,
    SecurityVerdict,
    ThreatCategory,
)
from .tools import (
    ApprovedToolCallRequest,
    Content,
    DataContent,
    ImageContent,
    TextContent,
    ToolCallRequest,
    ToolCatalog,
    ToolListRequest,
    ToolResult,
    ToolSpec,
)

__all__ = [
    "AttemptOutcome", "ChatChunk", "ChatMessage", "ChatRequest", "ChatResponse", "ChatRole", "CheckMode",
    "ProviderAttempt", "ToolCallRequestByModel", "Usage",
    "ClusterAudit", "ClusterHealthChecked",
    "ApprovalDecided", "ApprovalEntry", "ApprovalsReply", "ApprovalsRequest", "ApprovedToolCallRequest",
    "AgentDecision", "CONTRACTS_VERSION", "Content", "ContextReply", "ContextRequest", "Hit", "InsightsReply",
    "ClusterChange", "ClusterChangesReply", "ClusterChangesRequest",
    "InsightsRequest", "RetractThreatReply", "RetractThreatRequest", "SearchReply", "SearchRequest",
    "SimilarThreatsReply", "SimilarThreatsRequest", "DataContent", "DecidingLayer", "ENDPOINTS", "EVENTS", "Endpoint",
    "ErrorCode", "ErrorReply", "Event", "HealthReply", "HealthRequest", "HistoryReply", "HistoryRequest",
    "ImageContent", "IntentRequest", "IntentResult", "IntentScore", "InteractionCompleted", "LeakKind",
    "MAX_TEXT_CHARS", "Message", "ModelInfo", "OUT_OF_SCOPE", "OutputCheckRequest", "OutputVerdict",
    "RemoteError", "SecurityCheckRequest", "SecurityVerdict", "SecurityViolation",
    "StatsReply", "StatsRequest", "TextContent", "ThreatCategory", "ToolCalled", "ToolCallRequest",
    "ToolCatalog", "ToolListRequest", "ToolResult", "ToolSpec", "Turn", "new_event_id", "subjects",
]
