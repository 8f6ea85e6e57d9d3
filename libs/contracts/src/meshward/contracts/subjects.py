"""Every NATS subject meshward uses: meshward.v1.<service>.<verb>."""
from __future__ import annotations

PREFIX = "meshward.v1"

SECURITY_CHECK = f"{PREFIX}.security.check"
SECURITY_CHECK_OUTPUT = f"{PREFIX}.security.check_output"
INTENT_CLASSIFY = f"{PREFIX}.intent.classify"
TOOLS_LIST = f"{PREFIX}.tools.list"
TOOLS_CALL = f"{PREFIX}.tools.call"
TOOLS_CALL_APPROVED = f"{PREFIX}.tools.call_approved"
MEMORY_HISTORY = f"{PREFIX}.memory.history"
MEMORY_STATS = f"{PREFIX}.memory.stats"
MEMORY_SEARCH = f"{PREFIX}.memory.search"
MEMORY_SIMILAR_THREATS = f"{PREFIX}.memory.similar_threats"
MEMORY_INSIGHTS = f"{PREFIX}.memory.insights"
MEMORY_RETRACT_THREAT = f"{PREFIX}.memory.retract_threat"
MEMORY_CONTEXT = f"{PREFIX}.memory.context"
MEMORY_APPROVALS = f"{PREFIX}.memory.approvals"
MEMORY_CLUSTER_CHANGES = f"{PREFIX}.memory.cluster_changes"
LLM_CHAT = f"{PREFIX}.llm.chat"

SERVICES = ("security", "intent", "tools", "memory", "llm", "supervisor")


def health(service: str) -> str:
    return f"{PREFIX}.{service}.health"


# JetStream
EVENTS_STREAM = "MESHWARD_EVENTS"
EVENTS_PREFIX = f"{PREFIX}.events"
EVENTS_ALL = f"{EVENTS_PREFIX}.>"
EVENT_INTERACTION = f"{EVENTS_PREFIX}.interaction"
EVENT_VIOLATION = f"{EVENTS_PREFIX}.violation"
EVENT_TOOL_CALLED = f"{EVENTS_PREFIX}.tool_called"
EVENT_CLUSTER_AUDIT = f"{EVENTS_PREFIX}.cluster_audit"
EVENT_CLUSTER_HEALTH = f"{EVENTS_PREFIX}.cluster_health"
EVENT_APPROVAL = f"{EVENTS_PREFIX}.approval"
TOOL_RESULTS_KV = "MESHWARD_TOOL_RESULTS"  # tool results by idempotency key (the tools service's)

# Message headers
HDR_TRACEPARENT = "traceparent"
HDR_TRACESTATE = "tracestate"
HDR_REQUEST_ID = "Meshward-Request-Id"
HDR_DEADLINE = "Meshward-Deadline"  # absolute, unix epoch milliseconds
HDR_ERROR = "Meshward-Error"  # "1" when the body is an ErrorReply
HDR_MSG_ID = "Nats-Msg-Id"  # JetStream de-duplication

# Agent Protocol runs (supervisor only): the work queue any replica takes a run from, the subjects a
# run's stream events and cancel requests travel on, and the KV buckets of thread and run records.
RUNS_STREAM = "MESHWARD_RUNS"
RUNS_QUEUE = f"{PREFIX}.supervisor.runs.queue"
RUNS_EVENTS_PREFIX = f"{PREFIX}.supervisor.runs.events"
RUNS_CANCEL = f"{PREFIX}.supervisor.runs.cancel"
RUNS_CONSUMER = "runners"
RUNS_KV_THREADS = "meshward_threads"
RUNS_KV_RUNS = "meshward_runs"


def run_events(run_id: str) -> str:
    return f"{RUNS_EVENTS_PREFIX}.{run_id}"
