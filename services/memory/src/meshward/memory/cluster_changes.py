"""What changed on the clusters: state transitions from the stored health-check and audit events.

A health event is a change when its verdict differs from the cluster's previous health verdict (the last one
before the window is the baseline), or when the verdict stays unhealthy but the reasons differ (a second node
went NotReady). Audit events (registered / updated / removed) are changes by themselves.
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from meshward.contracts import ClusterChange

__all__ = ["changes_from_events"]


def _reasons(detail: dict[str, Any]) -> list[str]:
    reasons = detail.get("reasons") or []
    return [str(r)[:300] for r in reasons[:32]] if isinstance(reasons, list) else []


def changes_from_events(baseline: dict[str, tuple[str, list[str]]], events: Iterable[tuple[datetime, str, str, str, dict[str, Any]]]
                        ) -> tuple[list[ClusterChange], dict[str, str], int]:
    """(changes oldest first, last known state per cluster, health checks seen) from events ordered by time.

    `baseline`: cluster -> (verdict, reasons) of its last health event before the window.
    `events`: (occurred_at, kind, cluster, state, detail) inside the window, oldest first.
    """
    health = dict(baseline)
    latest = {cluster: verdict for cluster, (verdict, _) in baseline.items()}
    changes: list[ClusterChange] = []
    checks = 0
    for occurred_at, kind, cluster, state, detail in events:
        latest[cluster] = state
        if kind == "cluster_audit":
            changes.append(ClusterChange(cluster=cluster, occurred_at=occurred_at, kind="cluster_audit", state=state))
            if state == "removed":
                health.pop(cluster, None)
            continue
        checks += 1
        reasons = _reasons(detail)
        before = health.get(cluster)
        health[cluster] = (state, reasons)
        if before is None or before[0] != state or (state != "healthy" and before[1] != reasons):
            changes.append(ClusterChange(cluster=cluster, occurred_at=occurred_at, kind="cluster_health",
                                         previous=before[0] if before else None, state=state, reasons=reasons))
    return changes, latest, checks


