"""Fast-tier plans and answers for the cluster intents (cluster_register, cluster_info, cluster_health):
the cluster name (and for registration the API URL) read from the question, the token only as a placeholder
(see credentials.py)."""
from __future__ import annotations

import re
from typing import Any

from .credentials import REDACTED, given, secret

CLUSTER_INTENTS = ("cluster_register", "cluster_info", "cluster_health", "cluster_changes")
# cluster_changes is answered from memory (the stored health and audit events), not by a tool: the graph sends
# this call to memory's cluster_changes request.
CHANGES_CALL = "memory.cluster_changes"
TOOLS = {"cluster_register": ("cluster_register",), "cluster_info": ("cluster_info", "cluster_list"), "cluster_health": ("cluster_health", "cluster_list")}

_NAME = r"([A-Za-z0-9][A-Za-z0-9._-]{0,62})"
_NOT_NAMES = {
    "the", "a", "an", "this", "that", "our", "my", "new", "which", "what", "each", "every", "all", "any", "kubernetes", "k8s",
    "cluster", "clusters", "it", "there", "we", "you", "up", "ok", "okay", "healthy", "running", "version", "nodes", "pods",
    "at", "with", "on", "in", "of", "for", "is", "are", "does", "do", "called", "named", "please", "api", "token", "from",
}
_NAME_PATTERNS = (
    re.compile(rf"\bcluster\s+(?:named\s+|called\s+)?[\"']?{_NAME}", re.IGNORECASE),
    re.compile(rf"\b{_NAME}\s+(?:k8s\s+|kubernetes\s+)?cluster\b", re.IGNORECASE),
    re.compile(rf"^\s*(?:is|are)\s+(?:the\s+)?{_NAME}\s+(?:healthy|ok|okay|up|down|degraded|reachable|fine)\b", re.IGNORECASE),
    re.compile(rf"\b(?:is|does|on|in|of|for|about|has|have)\s+{_NAME}\s+(?:run|running|on|have|has|healthy|using|use)\b", re.IGNORECASE),
    re.compile(rf"\b(?:on|in|of|for|about|does)\s+{_NAME}\s*[?.!]?\s*$", re.IGNORECASE),
)
_URL = re.compile(r"\bhttps?://[^\s,;\"'<>]+", re.IGNORECASE)
_REMOVE = re.compile(r"\b(remove|unregister|deregister|delete|forget|drop)\b", re.IGNORECASE)
_LIST = re.compile(r"\b(which|what|list|show|all)\b.*\bclusters\b|\bclusters\b.*\b(do we have|are registered|registered)\b", re.IGNORECASE)


def cluster_name(question: str) -> str | None:
    q = _URL.sub(" ", question.replace(REDACTED, " "))
    for pattern in _NAME_PATTERNS:
        for m in pattern.finditer(q):
            name = m.group(1).rstrip(".-")
            if name and name.lower() not in _NOT_NAMES:
                return name
    return None


_WINDOW = re.compile(r"\b(?:last|past)\s+(\d{1,4}|an?|one)?\s*(minute|hour|day|week)s?\b", re.IGNORECASE)
_WINDOW_WORDS = ((re.compile(r"\b(yesterday|24 ?h)\b", re.I), 24.0), (re.compile(r"\b(overnight|last night|this morning)\b", re.I), 16.0),
                 (re.compile(r"\btoday\b", re.I), 24.0), (re.compile(r"\b(this|last|past) week\b|\bsince monday\b", re.I), 168.0))
_UNIT_HOURS = {"minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0}
DEFAULT_WINDOW_HOURS = 24.0
MAX_WINDOW_HOURS = 24.0 * 31


def window_hours(question: str) -> float:
    """The window a "what changed" question asks about, in hours (default a day, at most a month)."""
    m = _WINDOW.search(question)
    if m:
        count = m.group(1)
        n = 1.0 if count is None or not count.isdigit() else float(count)
        return min(max(n * _UNIT_HOURS[m.group(2).lower()], 1 / 60), MAX_WINDOW_HOURS)
    for pattern, hours in _WINDOW_WORDS:
        if pattern.search(question):
            return hours
    return DEFAULT_WINDOW_HOURS


_CHANGES_ON = re.compile(rf"\b(?:on|to|for|with|of)\s+(?:the\s+)?(?:cluster\s+)?{_NAME}", re.IGNORECASE)
_NOT_CHANGE_NAMES = _NOT_NAMES | {"last", "past", "yesterday", "today", "tonight", "overnight", "since", "monday", "clusters", "them"}


def _changes_cluster(question: str) -> str | None:
    """The cluster of "what changed on lab in the last hour?" (any cluster when none is named)."""
    for m in _CHANGES_ON.finditer(question):
        if m.group(1).lower() not in _NOT_CHANGE_NAMES:
            return m.group(1).rstrip(".-")
    return None


def plan_cluster(intent: str, question: str, make_plan: Any, make_call: Any) -> Any:
    """The plan for a cluster intent; `make_plan` / `make_call` are the planner's Plan and ToolCall."""
    name = cluster_name(question)
    if intent == "cluster_changes":
        arguments: dict[str, Any] = {"since_hours": window_hours(question)}
        name = name or _changes_cluster(question)
        if name is not None:
            arguments["cluster"] = name
        return make_plan(calls=[make_call(CHANGES_CALL, arguments)], purpose="cluster_changes")
    if intent == "cluster_register":
        if _REMOVE.search(question):
            if name is None:
                return make_plan(direct_answer="Which cluster should I remove? Say \"remove the cluster <name>\".", purpose="cluster_remove")
            return make_plan(calls=[make_call("cluster_remove", {"name": name})], purpose="cluster_remove")
        url = _URL.search(question)
        if name is None or url is None or not given("token"):
            return make_plan(
                direct_answer="To register a cluster, say \"register the cluster <name> at https://<api-server>:6443 with token <token>\" "
                "(a token bound to a read-only get/list ClusterRole).",
                purpose="cluster_register",
            )
        return make_plan(calls=[make_call("cluster_register", {"name": name, "api_url": url.group(0).rstrip(".)]"), "token": secret("token")})], purpose="cluster_register")
    if name is None or (intent == "cluster_info" and _LIST.search(question)):
        return make_plan(calls=[make_call("cluster_list", {})], purpose=f"{intent}:list")
    return make_plan(calls=[make_call(intent, {"name": name})], purpose=intent)


def cluster_answer(purpose: str, results: list[dict[str, Any]], text_of: Any, data_of: Any) -> str:
    """Template answers: the tool's own text (health lists what is wrong first); errors as sentences."""
    result = results[0] if results else {}
    if "error" in result:
        message = result["error"]["message"]
        return message[0].upper() + message[1:] + ("" if message.endswith(".") else ".")
    if purpose == "cluster_changes":
        return changes_answer(result.get("data") or {})
    if purpose == "cluster_health:list":
        clusters = [c["name"] for c in data_of(result).get("clusters", [])]
        if not clusters:
            return "No clusters are registered yet, so there is none to check. Register one with \"register the cluster <name> at <url> with token <token>\"."
        return f"Which cluster should I check? Registered clusters: {', '.join(clusters)}."
    return text_of(result)


def _window_text(hours: float) -> str:
    if hours < 1:
        return f"the last {round(hours * 60)} minutes"
    if hours < 48:
        return "the last hour" if hours == 1 else f"the last {hours:g} hours"
    return f"the last {hours / 24:g} days"


def changes_answer(reply: dict[str, Any]) -> str:
    """The changes in the window, newest last; what is unhealthy now first when anything is."""
    changes = reply.get("changes") or []
    latest: dict[str, str] = reply.get("latest") or {}
    since = str(reply.get("since", ""))[:16].replace("T", " ")
    scope = f"since {since} UTC" if since else "in the window"
    if not changes:
        if not reply.get("checks") and not latest:
            return (f"No cluster events are stored {scope}: no health check ran and no cluster was registered or removed. "
                    "Set MESHWARD_CLUSTER_HEALTH_INTERVAL_S to check the registered clusters periodically.")
        now = ", ".join(f"{c} {s}" for c, s in sorted(latest.items())) or "no cluster"
        return f"Nothing changed {scope} ({reply.get('checks', 0)} health checks stored). Last known: {now}."
    lines = []
    for ch in changes:
        at = str(ch.get("occurred_at", ""))[11:16]
        day = str(ch.get("occurred_at", ""))[:10]
        what = (f"went {ch['state']}" + (f" (was {ch['previous']})" if ch.get("previous") else "")
                if ch.get("kind") == "cluster_health" else f"was {ch['state']}")
        reasons = f": {'; '.join(ch.get('reasons') or [])}" if ch.get("reasons") and ch["state"] != "healthy" else ""
        lines.append(f"- {day} {at} UTC {ch['cluster']} {what}{reasons}")
    unhealthy = sorted(c for c, s in latest.items() if s in ("degraded", "unreachable"))
    head = f"{len(changes)} change{'s' if len(changes) != 1 else ''} {scope}"
    head += f"; not healthy now: {', '.join(f'{c} ({latest[c]})' for c in unhealthy)}." if unhealthy else "; every cluster checked is healthy now."
    more = "\n(older changes left out)" if reply.get("truncated") else ""
    return head + "\n" + "\n".join(lines) + more
