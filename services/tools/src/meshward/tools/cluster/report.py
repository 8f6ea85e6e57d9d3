"""Cluster info and health from raw Kubernetes API objects (dicts as the API sends them): pure logic, no I/O."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

ROLE_PREFIX = "node-role.kubernetes.io/"
PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
BAD_WAITING = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "CreateContainerError", "InvalidImageName", "RunContainerError"}
_GIB = Decimal(1024**3)


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")[:253]


def node_roles(node: dict[str, Any]) -> list[str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted({"control-plane" if k[len(ROLE_PREFIX):] == "master" else k[len(ROLE_PREFIX):] for k in labels if k.startswith(ROLE_PREFIX) and k[len(ROLE_PREFIX):]})
    return roles or ["worker"]


def _condition(node: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return Decimal(0)


def _fmt(value: Decimal) -> str:
    return f"{value:.1f}".removesuffix(".0")


def server_version(version: dict[str, Any]) -> str:
    return str(version.get("gitVersion") or f"v{version.get('major', '?')}.{version.get('minor', '?')}")[:64]


def info(name: str, version: dict[str, Any], nodes: list[dict[str, Any]], namespaces: list[dict[str, Any]], max_listed: int) -> dict[str, Any]:
    roles: dict[str, int] = defaultdict(int)
    cpu = memory = pods = Decimal(0)
    ready = 0
    for n in nodes:
        for r in node_roles(n):
            roles[r] += 1
        cap = (n.get("status") or {}).get("capacity") or {}
        cpu += _quantity(cap.get("cpu", 0))
        memory += _quantity(cap.get("memory", 0))
        pods += _quantity(cap.get("pods", 0))
        cond = _condition(n, "Ready")
        ready += bool(cond and cond.get("status") == "True")
    ns_names = sorted(_name(ns) for ns in namespaces)
    return {
        "cluster": name,
        "server_version": server_version(version),
        "platform": str(version.get("platform") or "")[:64],
        "nodes": {"total": len(nodes), "ready": ready, "roles": dict(sorted(roles.items()))},
        "namespaces": {"total": len(ns_names), "names": ns_names[:max_listed]},
        "capacity": {"cpu": _fmt(cpu), "memory_gib": _fmt(memory / _GIB), "pods": int(pods)},
    }


def info_text(d: dict[str, Any]) -> str:
    roles = ", ".join(f"{n} {r}" for r, n in d["nodes"]["roles"].items()) or "no roles"
    ns = d["namespaces"]
    more = f", … ({ns['total']} in all)" if ns["total"] > len(ns["names"]) else ""
    cap = d["capacity"]
    return (
        f"{d['cluster']} runs Kubernetes {d['server_version']}{' (' + d['platform'] + ')' if d['platform'] else ''}.\n"
        f"Nodes: {d['nodes']['total']} ({d['nodes']['ready']} ready; {roles}).\n"
        f"Namespaces: {ns['total']} ({', '.join(ns['names'])}{more}).\n"
        f"Capacity: {cap['cpu']} CPUs, {cap['memory_gib']} GiB memory, {cap['pods']} pods."
    )


@dataclass
class Health:
    cluster: str
    verdict: str = "healthy"  # healthy | degraded | unreachable
    reasons: list[str] = field(default_factory=list)
    latency_ms: float | None = None
    server_version: str | None = None
    nodes: dict[str, int] = field(default_factory=dict)
    pods_checked: int = 0
    pods_truncated: bool = False
    pod_problems: dict[str, list[str]] = field(default_factory=dict)  # namespace -> "pod: why"
    components: dict[str, str] = field(default_factory=dict)  # unhealthy component -> message

    def data(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster, "verdict": self.verdict, "reasons": self.reasons, "latency_ms": self.latency_ms,
            "server_version": self.server_version, "nodes": self.nodes, "pods_checked": self.pods_checked,
            "pods_truncated": self.pods_truncated, "pod_problems": self.pod_problems, "unhealthy_components": self.components,
        }


def _pod_problem(pod: dict[str, Any], restart_threshold: int) -> str | None:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    if phase == "Succeeded":
        return None
    for c in status.get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in BAD_WAITING:
            return f"{waiting['reason']} ({c.get('name', '?')})"
    if phase != "Running":
        reason = status.get("reason")
        return f"{phase}{' (' + str(reason)[:80] + ')' if reason else ''}"
    restarts = max((int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []), default=0)
    if restarts >= restart_threshold:
        return f"restarting ({restarts} restarts)"
    return None


def health(
    name: str,
    version: dict[str, Any],
    latency_ms: float,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    pods_truncated: bool,
    components: list[dict[str, Any]] | None,
    *,
    max_listed: int,
    restart_threshold: int,
) -> Health:
    h = Health(cluster=name, latency_ms=round(latency_ms, 1), server_version=server_version(version))
    not_ready: list[str] = []
    pressured: list[str] = []
    for n in nodes:
        ready = _condition(n, "Ready")
        if not ready or ready.get("status") != "True":
            why = (ready or {}).get("reason") or "no Ready condition"
            not_ready.append(f"{_name(n)} ({why})")
        for kind in PRESSURE:
            cond = _condition(n, kind)
            if cond and cond.get("status") == "True":
                pressured.append(f"{_name(n)} {kind}")
    h.nodes = {"total": len(nodes), "ready": len(nodes) - len(not_ready)}
    if not_ready:
        h.reasons.append(f"{len(not_ready)} of {len(nodes)} nodes not ready: {', '.join(not_ready[:max_listed])}")
    if pressured:
        h.reasons.append(f"node conditions: {', '.join(pressured[:max_listed])}")
    problems: dict[str, list[str]] = defaultdict(list)
    for p in pods:
        why = _pod_problem(p, restart_threshold)
        if why:
            problems[str((p.get("metadata") or {}).get("namespace") or "?")].append(f"{_name(p)}: {why}")
    h.pods_checked = len(pods)
    h.pods_truncated = pods_truncated
    if problems:
        total = sum(len(v) for v in problems.values())
        by_ns = sorted(problems.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        h.pod_problems = {ns: items[:max_listed] for ns, items in by_ns[:max_listed]}
        h.reasons.append(f"{total} pods not running or restarting: " + "; ".join(f"{ns} {len(items)} ({', '.join(items[:3])})" for ns, items in by_ns[:max_listed]))
    for c in components or []:
        healthy = next((x for x in c.get("conditions") or [] if x.get("type") == "Healthy"), None)
        if healthy is not None and healthy.get("status") != "True":
            h.components[_name(c)] = str(healthy.get("message") or healthy.get("error") or "unhealthy")[:200]
    if h.components:
        h.reasons.append("unhealthy components: " + ", ".join(f"{k} ({v})" for k, v in list(h.components.items())[:max_listed]))
    if h.reasons:
        h.verdict = "degraded"
    if pods_truncated:
        h.reasons.append(f"only the first {len(pods)} pods were checked")
    return h


def unreachable(name: str, cause: str) -> Health:
    return Health(cluster=name, verdict="unreachable", reasons=[cause])


def health_text(h: Health) -> str:
    head = f"{h.cluster} is {h.verdict.upper()}"
    if h.verdict == "unreachable":
        return f"{head}: {h.reasons[0]}."
    lines = [f"{head}{':' if h.verdict != 'healthy' else '.'}"]
    lines += [f"- {r}" for r in h.reasons]
    lines.append(
        f"API reachable in {h.latency_ms:g} ms ({h.server_version}); nodes {h.nodes.get('ready', 0)}/{h.nodes.get('total', 0)} ready; "
        f"{h.pods_checked} pods checked."
    )
    return "\n".join(lines)
