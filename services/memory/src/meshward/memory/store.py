"""The memory service's storage: interactions, agent decisions and threads (SQLAlchemy 2 async).

One class, ``MemoryStore``, over SQLite (aiosqlite) or PostgreSQL (asyncpg). Every write is
idempotent by the event's id (INSERT ... ON CONFLICT DO NOTHING), so a redelivered event,
even one delivered to several consumers at once, is stored once.
"""
from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from meshward.contracts import (
    ApprovalDecided,
    ApprovalEntry,
    ClusterAudit,
    ClusterHealthChecked,
    InsightsReply,
    InteractionCompleted,
    SecurityViolation,
    StatsReply,
    Turn,
)
from sqlalchemy import Connection, case, event, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql import Executable

from .migrations import agent_decisions, approvals, cluster_events, interactions, migrate, threads, violations

SQLITE_BUSY_TIMEOUT_MS = 10_000
_INSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


class MemoryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._dialect = engine.dialect.name
        self._insert = _INSERT[self._dialect]
        # On SQLite a writer takes the write lock at BEGIN, so concurrent writers wait out
        # the busy timeout instead of failing when a read lock cannot be upgraded.
        self._writer = engine.execution_options(sqlite_begin="BEGIN IMMEDIATE")

    @classmethod
    async def open(cls, url: str) -> MemoryStore:
        """Connect to ``url`` (sqlite+aiosqlite:///path or postgresql+asyncpg://...) and migrate it."""
        parsed = make_url(url)
        backend = parsed.get_backend_name()
        if backend not in _INSERT:
            raise ValueError(f"unsupported database {backend!r}: use sqlite+aiosqlite or postgresql+asyncpg")
        sqlite_file = backend == "sqlite" and parsed.database not in (None, "", ":memory:")
        if sqlite_file:
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(parsed, pool_pre_ping=True)
        if backend == "sqlite":
            _configure_sqlite(engine)
        store = cls(engine)
        try:
            if sqlite_file:
                await _use_wal(engine)
            async with store._writer.begin() as conn:
                await conn.run_sync(migrate)
        except BaseException:
            await engine.dispose()
            raise
        return store

    async def close(self) -> None:
        await self._engine.dispose()

    async def record_interaction(self, event: InteractionCompleted) -> bool:
        """Store the interaction, its decisions and its thread; False if the event was stored already."""
        async with self._writer.begin() as conn:
            return await self._write_interaction(conn, event)

    async def record_events(self, events: Sequence[InteractionCompleted]) -> None:
        """Store interactions, each with its decisions, in one transaction (the consumer's group commit), in order."""
        async with self._writer.begin() as conn:
            for e in events:
                await self._write_interaction(conn, e)

    async def _write_interaction(self, conn: AsyncConnection, event: InteractionCompleted) -> bool:
        interaction_id = await conn.scalar(
            self._insert(interactions)
            .values(
                event_id=event.event_id,
                timestamp=datetime.now(UTC),
                occurred_at=event.occurred_at,
                request_id=event.request_id,
                thread_id=event.thread_id,
                trace_id=event.trace_id,
                query=event.question,
                answer=event.answer,
                status=event.status,
                success=event.status == "answered",
                agents=list(dict.fromkeys(event.route)),
                route=event.route,
                tools_used=event.tools_used,
                time_ms=round(event.duration_ms),
                security_blocked=event.security_blocked,
                intent_rejected=event.intent_rejected,
                threat_category=event.threat_category,
                intent=event.intent,
            )
            .on_conflict_do_nothing(index_elements=[interactions.c.event_id])
            .returning(interactions.c.id)
        )
        if interaction_id is None:
            return False
        if event.decisions:
            await conn.execute(
                insert(agent_decisions),
                [
                    {
                        "interaction_id": interaction_id,
                        "event_id": None,
                        "request_id": event.request_id,
                        "thread_id": event.thread_id,
                        "agent_name": d.agent,
                        "decision": d.decision,
                        "reasoning": d.reasoning,
                        "step": step,
                        "timestamp": event.occurred_at,
                    }
                    for step, d in enumerate(event.decisions)
                ],
            )
        if event.thread_id is not None:
            await conn.execute(self._touch_thread(event.thread_id, event.occurred_at))
        return True

    async def history(self, thread_id: str, limit: int = 20) -> list[Turn]:
        """The last ``limit`` turns of the thread, oldest first."""
        if limit < 1:
            return []
        c = interactions.c
        latest = (
            select(c.id, c.query, c.answer, c.status, c.occurred_at, c.event_id)
            .where(c.thread_id == thread_id)
            .order_by(c.occurred_at.desc(), c.id.desc())
            .limit(limit)
            .subquery()
        )
        async with self._engine.connect() as conn:
            rows = await conn.execute(select(latest).order_by(latest.c.occurred_at, latest.c.id))
            return [
                Turn(question=r.query, answer=r.answer, status=r.status, at=r.occurred_at, event_id=r.event_id)
                for r in rows
            ]

    async def stats(self) -> StatsReply:
        """Row counts; events_seen counts the distinct events stored (interactions, and the routing events of
        supervisors from before the interaction carried the routing)."""
        count = func.count()
        query = select(
            select(count).select_from(interactions).scalar_subquery(),
            select(count).select_from(agent_decisions).scalar_subquery(),
            select(func.count(agent_decisions.c.event_id)).scalar_subquery(),
        )
        async with self._engine.connect() as conn:
            n_interactions, n_decisions, n_decision_events = (await conn.execute(query)).one()
        return StatsReply(
            interactions=n_interactions,
            agent_decisions=n_decisions,
            events_seen=n_interactions + n_decision_events,
        )

    async def record_violation(self, event: SecurityViolation) -> bool:
        """Log a blocked question; False if the event was stored already."""
        async with self._writer.begin() as conn:
            stored = await conn.scalar(
                self._insert(violations)
                .values(
                    event_id=event.event_id,
                    occurred_at=event.occurred_at,
                    request_id=event.request_id,
                    thread_id=event.thread_id,
                    trace_id=event.trace_id,
                    text=event.text,
                    category=str(event.category),
                    score=event.score,
                    layer=str(event.layer),
                    learned=False,
                )
                .on_conflict_do_nothing(index_elements=[violations.c.event_id])
                .returning(violations.c.id)
            )
        return stored is not None

    async def record_cluster_event(self, event: ClusterAudit | ClusterHealthChecked) -> bool:
        """Store a cluster audit or health event; False if it was stored already."""
        state = event.action if isinstance(event, ClusterAudit) else event.verdict
        detail = event.model_dump(mode="json", exclude={"event_id", "occurred_at", "request_id", "thread_id", "trace_id", "type", "cluster"})
        async with self._writer.begin() as conn:
            stored = await conn.scalar(
                self._insert(cluster_events)
                .values(event_id=event.event_id, occurred_at=event.occurred_at, kind=event.type, cluster=event.cluster, state=state,
                        detail=detail, request_id=event.request_id, trace_id=event.trace_id)
                .on_conflict_do_nothing(index_elements=[cluster_events.c.event_id])
                .returning(cluster_events.c.id)
            )
        return stored is not None

    async def record_approval(self, event: ApprovalDecided) -> bool:
        """Store an approval decision; False if it was stored already."""
        async with self._writer.begin() as conn:
            stored = await conn.scalar(
                self._insert(approvals)
                .values(event_id=event.event_id, approval_id=event.approval_id, decided_at=event.occurred_at, requested_at=event.requested_at,
                        thread_id=event.thread_id, tool=event.tool, arguments=event.arguments, decision=event.decision, actor=event.actor,
                        reason=event.reason, policy_reason=event.policy_reason, request_id=event.request_id, trace_id=event.trace_id)
                .on_conflict_do_nothing(index_elements=[approvals.c.event_id])
                .returning(approvals.c.id)
            )
        return stored is not None

    async def approvals(self, thread_id: str | None, limit: int = 50) -> list[ApprovalEntry]:
        """The approval audit log, newest first (one thread's, or everyone's)."""
        c = approvals.c
        query = select(approvals).order_by(c.decided_at.desc(), c.id.desc()).limit(limit)
        if thread_id is not None:
            query = query.where(c.thread_id == thread_id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        fields = set(ApprovalEntry.model_fields)
        return [ApprovalEntry(**{k: v for k, v in r.items() if k in fields}) for r in rows]
    async def cluster_events_since(self, since: datetime, cluster: str | None, limit: int
                                   ) -> tuple[dict[str, tuple[str, list[str]]], list[tuple[datetime, str, str, str, dict[str, Any]]], bool]:
        """The last health event per cluster before `since` (the baseline), and the events from `since` on, oldest
        first, at most `limit` (True when more were stored: the newest are kept)."""
        c = cluster_events.c
        scope = [c.cluster == cluster] if cluster else []
        last_before = (
            select(c.cluster, func.max(c.occurred_at).label("at"))
            .where(c.kind == "cluster_health", c.occurred_at < since, *scope)
            .group_by(c.cluster)
            .subquery()
        )
        async with self._engine.connect() as conn:
            base = (await conn.execute(
                select(c.cluster, c.state, c.detail).join(last_before, (c.cluster == last_before.c.cluster) & (c.occurred_at == last_before.c.at))
                .where(c.kind == "cluster_health")
            )).all()
            rows = (await conn.execute(
                select(c.occurred_at, c.kind, c.cluster, c.state, c.detail).where(c.occurred_at >= since, *scope)
                .order_by(c.occurred_at.desc(), c.id.desc()).limit(limit + 1)
            )).all()
        baseline = {r[0]: (r[1], list((r[2] or {}).get("reasons") or [])) for r in base}
        return baseline, [tuple(r) for r in reversed(rows[:limit])], len(rows) > limit

    async def mark_learned(self, event_id: str) -> None:
        async with self._writer.begin() as conn:
            await conn.execute(update(violations).where(violations.c.event_id == event_id).values(learned=True))

    async def retract(self, event_id: str) -> bool:
        """Mark a learned threat retracted; False when there is no such learned, unretracted threat."""
        async with self._writer.begin() as conn:
            result = await conn.execute(
                update(violations)
                .where(violations.c.event_id == event_id, violations.c.learned.is_(True), violations.c.retracted_at.is_(None))
                .values(retracted_at=datetime.now(UTC))
            )
        return result.rowcount == 1

    async def insights(self) -> InsightsReply:
        """Totals, distribution by category and last-seen times of violations (seed 000's insights.json)."""
        c = violations.c
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(c.category, func.count(), func.max(c.occurred_at)).group_by(c.category))).all()
            learned, retracted = (
                await conn.execute(
                    select(
                        func.count().filter(c.learned.is_(True), c.retracted_at.is_(None)),
                        func.count(c.retracted_at),
                    )
                )
            ).one()
        last_seen = {r[0]: r[2] for r in rows}
        return InsightsReply(
            total_violations=sum(r[1] for r in rows),
            threat_distribution={r[0]: r[1] for r in rows},
            last_seen=max(last_seen.values(), default=None),
            last_seen_by_category=last_seen,
            learned_threats=learned,
            retracted_threats=retracted,
        )

    def _touch_thread(self, thread_id: str, at: datetime) -> Executable:
        stmt = self._insert(threads).values(thread_id=thread_id, created_at=at, last_active_at=at, turns=1)
        new = stmt.excluded
        return stmt.on_conflict_do_update(
            index_elements=[threads.c.thread_id],
            set_={
                "turns": threads.c.turns + 1,
                # Events may arrive out of order: keep the earliest and the latest times.
                "created_at": case((new.created_at < threads.c.created_at, new.created_at), else_=threads.c.created_at),
                "last_active_at": case(
                    (new.last_active_at > threads.c.last_active_at, new.last_active_at),
                    else_=threads.c.last_active_at,
                ),
            },
        )


def _configure_sqlite(engine: AsyncEngine) -> None:
    """Every connection: a busy timeout, foreign keys, and real transactions (SQLAlchemy emits BEGIN)."""

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # no implicit BEGIN/COMMIT from the sqlite3 driver
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))


async def _use_wal(engine: AsyncEngine) -> None:
    """Switch the file to WAL, which it keeps. While another connection switches the same new
    file, SQLite answers "locked" at once instead of waiting out the busy timeout: retry then."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            try:
                await raw.driver_connection.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
        await asyncio.sleep(0.01)
