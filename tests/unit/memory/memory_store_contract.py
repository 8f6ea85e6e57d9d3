"""What every MemoryStore backend must do: the test bodies shared by SQLite and PostgreSQL.

A backend's test class subclasses ``MemoryStoreContract`` and supplies a ``store_url``
fixture naming an empty database (tests/unit/memory/test_store.py,
tests/integration/test_memory_store_postgres.py). Checks of what the store wrote read the
tables directly with a second engine.
"""
from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest
from meshward.contracts import (
    AgentDecision,
    ClusterAudit,
    ClusterHealthChecked,
    InteractionCompleted,
    StatsReply,
    ThreatCategory,
)
from meshward.memory.cluster_changes import changes_from_events
from meshward.memory.migrations import (
    MIGRATIONS,
    agent_decisions,
    cluster_events,
    interactions,
    schema_version,
    threads,
)
from meshward.memory.store import MemoryStore
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def interaction(n: int = 0, **fields) -> InteractionCompleted:
    base = {
        "occurred_at": T0 + timedelta(seconds=n),
        "request_id": f"req-{n}",
        "thread_id": "thread-a",
        "question": f"question {n}",
        "answer": f"answer {n}",
        "status": "answered",
        "route": ["supervisor", "weather", "supervisor"],
        "tools_used": ["forecast"],
        "duration_ms": 12.4,
    }
    return InteractionCompleted(**(base | fields))


async def fetch(db: AsyncEngine, query) -> list:
    async with db.connect() as conn:
        return list((await conn.execute(query)).all())


class MemoryStoreContract:
    @pytest.fixture
    async def store(self, store_url):
        store = await MemoryStore.open(store_url)
        yield store
        await store.close()

    @pytest.fixture
    async def db(self, store, store_url):
        engine = create_async_engine(store_url)
        yield engine
        await engine.dispose()

    # --- history ---------------------------------------------------------------------------

    async def test_history_is_chronological_and_per_thread(self, store):
        for n in (3, 0, 4, 1, 2):  # stored out of order: history orders by when they happened
            assert await store.record_interaction(interaction(n))
        other = interaction(9, thread_id="thread-b", status="refused")
        await store.record_interaction(other)

        turns = await store.history("thread-a")
        assert [t.question for t in turns] == [f"question {n}" for n in range(5)]
        assert [t.at for t in turns] == [T0 + timedelta(seconds=n) for n in range(5)]
        assert all(t.at.tzinfo is not None for t in turns)
        assert turns[0].answer == "answer 0" and turns[0].status == "answered"

        (only,) = await store.history("thread-b")
        assert (only.event_id, only.status) == (other.event_id, "refused")
        assert await store.history("no-such-thread") == []

    async def test_history_limit_keeps_the_latest_turns(self, store):
        for n in range(30):
            await store.record_interaction(interaction(n))
        assert [t.question for t in await store.history("thread-a", limit=5)] == [f"question {n}" for n in range(25, 30)]
        assert len(await store.history("thread-a")) == 20
        assert (await store.history("thread-a"))[0].question == "question 10"
        assert len(await store.history("thread-a", limit=500)) == 30

    async def test_turns_at_the_same_instant_keep_arrival_order(self, store):
        for n in range(3):
            await store.record_interaction(interaction(0, question=f"same time {n}"))
        assert [t.question for t in await store.history("thread-a", limit=2)] == ["same time 1", "same time 2"]

    async def test_times_come_back_as_the_same_instant_in_utc(self, store):
        ist = timezone(timedelta(hours=5, minutes=30))
        await store.record_interaction(interaction(0, occurred_at=datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=ist)))
        (turn,) = await store.history("thread-a")
        assert turn.at == datetime(2026, 3, 1, 3, 30, 0, 123456, tzinfo=UTC)
        assert turn.at.utcoffset() == timedelta(0)

    # --- idempotency -----------------------------------------------------------------------

    async def test_redelivered_interaction_is_stored_once(self, store, db):
        event = interaction(1, decisions=[AgentDecision(agent="security", decision="ALLOW")])
        assert await store.record_interaction(event) is True
        assert await store.record_interaction(event) is False
        assert await store.record_interaction(event.model_copy(deep=True)) is False

        assert len(await fetch(db, select(interactions))) == 1
        assert len(await fetch(db, select(agent_decisions))) == 1
        assert await fetch(db, select(threads.c.thread_id, threads.c.turns)) == [("thread-a", 1)]
        assert len(await store.history("thread-a")) == 1

    async def test_concurrent_redelivery_stores_one_row(self, store, db):
        event = interaction(1, decisions=[AgentDecision(agent="security", decision="ALLOW"),
                                          AgentDecision(agent="intent", decision="in_scope")])
        results = await asyncio.gather(*(store.record_interaction(event) for _ in range(20)))
        assert results.count(True) == 1 and results.count(False) == 19

        assert await fetch(db, select(interactions.c.event_id)) == [(event.event_id,)]
        assert len(await fetch(db, select(agent_decisions))) == 2
        assert await fetch(db, select(threads.c.turns)) == [(1,)]

    async def test_concurrent_distinct_interactions_all_count(self, store, db):
        results = await asyncio.gather(*(store.record_interaction(interaction(n)) for n in range(20)))
        assert all(results)
        assert await fetch(db, select(threads.c.turns)) == [(20,)]
        assert len(await store.history("thread-a", limit=100)) == 20

    # --- what is stored --------------------------------------------------------------------

    async def test_decisions_are_stored_in_order_with_their_interaction(self, store, db):
        routed = [AgentDecision(agent="security", decision="ALLOW", reasoning="benign"),
                  AgentDecision(agent="supervisor", decision="intent", reasoning="security allowed it"),
                  AgentDecision(agent="supervisor", decision="FINISH", reasoning="answered")]
        await store.record_interaction(interaction(1, decisions=routed))
        await store.record_interaction(interaction(2, thread_id="thread-b", decisions=routed[:1]))

        ids = dict(await fetch(db, select(interactions.c.request_id, interactions.c.id)))
        rows = await fetch(
            db,
            select(
                agent_decisions.c.request_id,
                agent_decisions.c.interaction_id,
                agent_decisions.c.step,
                agent_decisions.c.agent_name,
                agent_decisions.c.decision,
                agent_decisions.c.reasoning,
                agent_decisions.c.thread_id,
            ).order_by(agent_decisions.c.id),
        )
        assert rows == [
            ("req-1", ids["req-1"], 0, "security", "ALLOW", "benign", "thread-a"),
            ("req-1", ids["req-1"], 1, "supervisor", "intent", "security allowed it", "thread-a"),
            ("req-1", ids["req-1"], 2, "supervisor", "FINISH", "answered", "thread-a"),
            ("req-2", ids["req-2"], 0, "security", "ALLOW", "benign", "thread-b"),
        ]

    async def test_a_group_commit_stores_each_event_once_with_its_decisions(self, store, db):
        routed = [AgentDecision(agent="security", decision="ALLOW"), AgentDecision(agent="supervisor", decision="intent")]
        events = [interaction(n, decisions=routed) for n in range(10)]
        await store.record_events(events)
        await store.record_events(events[:6])  # redelivered: idempotent, decisions not doubled
        assert len(await fetch(db, select(interactions.c.id))) == 10
        rows = await fetch(db, select(agent_decisions.c.request_id, agent_decisions.c.interaction_id))
        assert len(rows) == 20 and all(interaction_id is not None for _, interaction_id in rows)
        assert [t.question for t in await store.history("thread-a", 50)] == [f"question {n}" for n in range(10)]

    async def test_concurrent_redelivery_stores_the_decisions_once(self, store, db):
        event = interaction(1, decisions=[AgentDecision(agent="security", decision="ALLOW"), AgentDecision(agent="supervisor", decision="FINISH")])
        results = await asyncio.gather(*(store.record_interaction(event) for _ in range(20)))
        assert results.count(True) == 1
        assert len(await fetch(db, select(agent_decisions.c.id))) == 2

    async def test_interaction_row_keeps_every_field(self, store, db):
        event = interaction(
            2,
            trace_id="0af7651916cd43dd8448eb211c80319c",
            status="refused",
            route=["security", "supervisor", "security"],
            tools_used=[],
            duration_ms=7.6,
            security_blocked=True,
            threat_category=ThreatCategory.PROMPT_EXTRACTION,
            intent="weather",
        )
        before = datetime.now(UTC)
        await store.record_interaction(event)
        (row,) = await fetch(db, select(interactions))
        assert row.event_id == event.event_id and row.request_id == "req-2" and row.trace_id == event.trace_id
        assert (row.status, row.success, row.security_blocked, row.intent_rejected) == ("refused", False, True, False)
        assert row.route == ["security", "supervisor", "security"] and row.agents == ["security", "supervisor"]
        assert row.tools_used == [] and row.time_ms == 8
        assert (row.threat_category, row.intent) == ("prompt_extraction", "weather")
        assert row.occurred_at == T0 + timedelta(seconds=2)
        assert before - timedelta(seconds=1) <= row.timestamp <= datetime.now(UTC) + timedelta(seconds=1)

    async def test_thread_keeps_first_and_last_activity(self, store, db):
        for n in (5, 1, 9):  # out of order
            await store.record_interaction(interaction(n))
        await store.record_interaction(interaction(3, thread_id=None))  # no thread: not counted
        assert await fetch(db, select(threads)) == [("thread-a", T0 + timedelta(seconds=1), T0 + timedelta(seconds=9), 3)]

    async def test_stats(self, store):
        assert await store.stats() == StatsReply(interactions=0, agent_decisions=0, events_seen=0)
        await store.record_interaction(interaction(1, decisions=[AgentDecision(agent="security", decision="ALLOW"),
                                                                 AgentDecision(agent="intent", decision="in_scope")]))
        second = interaction(2)
        for _ in range(2):  # redelivered: counted once
            await store.record_interaction(second)
        assert await store.stats() == StatsReply(interactions=2, agent_decisions=2, events_seen=2)

    async def test_text_round_trips(self, store, db):
        mixed = "Grüße, мир, 你好, مرحبا, שלום, e\u0301, 🧑🏽‍🚀🏳️‍🌈, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢, 'quotes' \"and\" \\ back\\slash\n\ttab "
        question = (mixed * (20_000 // len(mixed) + 1))[:20_000]
        answer = ("ansWer ✓ " * 12_500)[:100_000]
        event = interaction(
            0,
            question=question,
            answer=answer,
            route=["supervisor", "météo"],
            decisions=[AgentDecision(agent="supervisor", decision="météo", reasoning=mixed)],
        )
        await store.record_interaction(event)
        (turn,) = await store.history("thread-a")
        assert turn.question == question and len(turn.question) == 20_000
        assert turn.answer == answer
        assert await fetch(db, select(interactions.c.route)) == [(["supervisor", "météo"],)]
        assert await fetch(db, select(agent_decisions.c.reasoning)) == [(mixed,)]

    async def test_nul_characters_are_replaced_not_refused(self, store):
        # PostgreSQL text cannot hold NUL; every backend stores U+FFFD instead so the event is kept.
        await store.record_interaction(interaction(0, question="a\x00b"))
        (turn,) = await store.history("thread-a")
        assert turn.question == "a\ufffdb"

    # --- migrations ------------------------------------------------------------------------

    async def test_cluster_events_are_stored_once(self, store, db):
        audit = ClusterAudit(action="registered", cluster="lab", api_url="https://lab:6443", auth="token", labels={"env": "lab"}, occurred_at=T0)
        health = ClusterHealthChecked(cluster="lab", verdict="degraded", reasons=["1 of 3 nodes not ready: w-2"], latency_ms=3.5, source="scheduled", occurred_at=T0)
        assert await store.record_cluster_event(audit) and await store.record_cluster_event(health)
        assert not await store.record_cluster_event(audit)  # redelivered
        rows = await fetch(db, select(cluster_events.c.kind, cluster_events.c.cluster, cluster_events.c.state, cluster_events.c.detail).order_by(cluster_events.c.id))
        assert [(r.kind, r.cluster, r.state) for r in rows] == [("cluster_audit", "lab", "registered"), ("cluster_health", "lab", "degraded")]
        assert rows[0].detail["api_url"] == "https://lab:6443" and rows[1].detail["reasons"] == ["1 of 3 nodes not ready: w-2"]

    async def test_approval_decisions_are_the_audit_log_newest_first(self, store):
        from datetime import timedelta

        from meshward.contracts import ApprovalDecided

        first = ApprovalDecided(approval_id="ap-1", tool="cli_execute", arguments={"command": "ls -la"}, decision="approved", actor="ops-key",
                                policy_reason="not on the allowlist", thread_id="thread-a", occurred_at=T0, requested_at=T0)
        second = ApprovalDecided(approval_id="ap-2", tool="cluster_register", arguments={"name": "lab", "token": {"$secret": "token"}},
                                 decision="expired", actor="system:timeout", reason="not decided in 300s", thread_id="thread-b",
                                 occurred_at=T0 + timedelta(seconds=5))
        assert await store.record_approval(first) and await store.record_approval(second)
        assert not await store.record_approval(first)  # redelivered
        log = await store.approvals(None)
        assert [(e.approval_id, e.decision, e.actor) for e in log] == [("ap-2", "expired", "system:timeout"), ("ap-1", "approved", "ops-key")]
        assert log[0].arguments["token"] == {"$secret": "token"}  # the placeholder, never a secret
        only_a = await store.approvals("thread-a", limit=10)
        assert [e.approval_id for e in only_a] == ["ap-1"] and only_a[0].policy_reason == "not on the allowlist"
    async def test_cluster_changes_keep_a_baseline_before_the_window(self, store):
        def health(minutes, cluster, verdict, *reasons):
            return ClusterHealthChecked(cluster=cluster, verdict=verdict, reasons=list(reasons), source="scheduled",
                                        occurred_at=T0 + timedelta(minutes=minutes))
        for event in (health(-90, "lab", "healthy"), health(-80, "edge", "degraded", "w-1 not ready"), health(-5, "lab", "healthy"),
                      health(10, "lab", "degraded", "w-2 not ready"), health(20, "lab", "degraded", "w-2 not ready"),
                      health(30, "lab", "healthy"), health(40, "edge", "degraded", "w-1 not ready")):
            await store.record_cluster_event(event)
        await store.record_cluster_event(ClusterAudit(action="removed", cluster="old", occurred_at=T0 + timedelta(minutes=15)))
        baseline, events, truncated = await store.cluster_events_since(T0, None, 50)
        assert baseline == {"lab": ("healthy", []), "edge": ("degraded", ["w-1 not ready"])} and not truncated
        assert [(e[2], e[3]) for e in events] == [("lab", "degraded"), ("old", "removed"), ("lab", "degraded"), ("lab", "healthy"), ("edge", "degraded")]
        changes, latest, checks = changes_from_events(baseline, events)
        assert [(c.cluster, c.previous, c.state) for c in changes] == [("lab", "healthy", "degraded"), ("old", None, "removed"), ("lab", "degraded", "healthy")]
        assert changes[0].reasons == ["w-2 not ready"] and checks == 4
        assert latest == {"lab": "healthy", "edge": "degraded", "old": "removed"}
        baseline, events, truncated = await store.cluster_events_since(T0, "lab", 2)
        assert baseline == {"lab": ("healthy", [])} and truncated and [e[0] for e in events] == [T0 + timedelta(minutes=20), T0 + timedelta(minutes=30)]

    async def test_migrations_are_idempotent(self, store_url):
        first, second = await asyncio.gather(MemoryStore.open(store_url), MemoryStore.open(store_url))
        await first.record_interaction(interaction(1))
        await first.close()
        await second.close()

        again = await MemoryStore.open(store_url)  # an already migrated database: nothing to do
        try:
            assert [t.question for t in await again.history("thread-a")] == ["question 1"]
        finally:
            await again.close()

        db = create_async_engine(store_url)
        try:
            versions = await fetch(db, select(schema_version.c.version).order_by(schema_version.c.version))
        finally:
            await db.dispose()
        assert versions == [(m.version,) for m in MIGRATIONS]
