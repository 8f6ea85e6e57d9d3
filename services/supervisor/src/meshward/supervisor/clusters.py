"""Fast-tier plans and answers for the cluster intents (cluster_register, cluster_info, cluster_health):
the cluster name (and for registration the API URL) read from the question, the token only as a placeholder
(see credentials.py)."""
from __future__ import annotations

import re
from typing import Any

from .credentials import REDACTED, given, secret

CLUSTER_INTENTS = ("cluster_register", "cluster_info", "cluster_health")
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


def plan_cluster(intent: str, question: str, make_plan: Any, make_call: Any) -> Any:
    """The plan for a cluster intent; `make_plan` / `make_call` are the planner's Plan and ToolCall."""
    name = cluster_name(question)
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
    if purpose == "cluster_health:list":
        clusters = [c["name"] for c in data_of(result).get("clusters", [])]
        if not clusters:
            return "No clusters are registered yet, so there is none to check. Register one with \"register the cluster <name> at <url> with token <token>\"."
        return f"Which cluster should I check? Registered clusters: {', '.join(clusters)}."
    return text_of(result)
