"""The memory schema and its versioned migrations (SQLite and PostgreSQL alike).

The tables below are the current schema; ``MIGRATIONS`` is the ordered list of
steps that brings any database up to it, each recorded in ``schema_version`` once
applied, so running the list again is a no-op. A change to the schema is a new
step at the end of the list (e.g. an ``ALTER TABLE ... ADD COLUMN`` for an existing
table) together with the change to the tables here; step 1 must then keep
creating the version-1 shape, so move the version-1 definitions into it first.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from meshward.contracts.base import MAX_ID_CHARS as ID
from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    TypeDecorator,
    insert,
    select,
    text,
)


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every backend (SQLite keeps no offset of its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Str(TypeDecorator[str]):
    """Text that PostgreSQL accepts too: it refuses NUL, which becomes U+FFFD on every backend."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else value.replace("\x00", "\ufffd")


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", Str(200), nullable=False),
    Column("applied_at", UTCDateTime, nullable=False),
)

interactions = Table(
    "interactions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", Str(ID), nullable=False, unique=True),
    Column("timestamp", UTCDateTime, nullable=False),  # when stored
    Column("occurred_at", UTCDateTime, nullable=False),  # when it happened (the event's time)
    Column("request_id", Str(ID), index=True),
    Column("thread_id", Str(ID)),
    Column("trace_id", Str(64)),
    Column("query", Str, nullable=False),
    Column("answer", Str, nullable=False),
    Column("status", Str(16), nullable=False),
    Column("success", Boolean, nullable=False),
    Column("agents", JSON, nullable=False),  # distinct agents along the route, in order
    Column("route", JSON, nullable=False),
    Column("tools_used", JSON, nullable=False),
    Column("time_ms", Integer, nullable=False),
    Column("security_blocked", Boolean, nullable=False),
    Column("intent_rejected", Boolean, nullable=False),
    Column("threat_category", Str(32)),
    Column("intent", Str(ID)),
    Index(None, "thread_id", "occurred_at"),
)

agent_decisions = Table(
    "agent_decisions",
    metadata,
    Column("id", Integer, primary_key=True),
    # Set when the interaction carrying the decision is stored (null only on rows of the routing events that
    # supervisors published before the interaction event carried the routing too).
    Column("interaction_id", Integer, ForeignKey("interactions.id", ondelete="CASCADE"), index=True),
    # A routing event's own id on those older rows; null for the decisions carried inside an InteractionCompleted.
    Column("event_id", Str(ID), unique=True),
    Column("request_id", Str(ID), index=True),
    Column("thread_id", Str(ID), index=True),
    Column("agent_name", Str(ID), nullable=False),
    Column("decision", Str, nullable=False),
    Column("reasoning", Str, nullable=False),
    Column("step", Integer, nullable=False),
    Column("timestamp", UTCDateTime, nullable=False),
)

learned_patterns = Table(
    "learned_patterns",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("pattern_type", Str(64), nullable=False, index=True),
    Column("pattern_text", Str, nullable=False),
    Column("frequency", Integer, nullable=False, default=1),
    Column("last_seen", UTCDateTime, nullable=False),
    Column("metadata", JSON),
)

threads = Table(
    "threads",
    metadata,
    Column("thread_id", Str(ID), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_active_at", UTCDateTime, nullable=False),
    Column("turns", Integer, nullable=False),
)


# The violations log (seed 000's violations_YYYYMMDD.jsonl, as a table): one row per
# blocked question; `learned` when it became a known threat, `retracted_at` when an
# operator took that back.
violations = Table(
    "violations",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", Str(ID), nullable=False, unique=True),
    Column("occurred_at", UTCDateTime, nullable=False, index=True),
    Column("request_id", Str(ID), index=True),
    Column("thread_id", Str(ID)),
    Column("trace_id", Str(64)),
    Column("text", Str, nullable=False),
    Column("category", Str(32), nullable=False, index=True),
    Column("score", Float, nullable=False),
    Column("layer", Str(32), nullable=False),
    Column("learned", Boolean, nullable=False, default=False),
    Column("retracted_at", UTCDateTime),
)


# Cluster audit (registered / updated / removed) and health-check events from the tools service, one row each:
# `state` is the action or the verdict, `detail` the rest of the event (never credentials: events carry none).
cluster_events = Table(
    "cluster_events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", Str(ID), nullable=False, unique=True),
    Column("occurred_at", UTCDateTime, nullable=False),
    Column("kind", Str(32), nullable=False),  # cluster_audit | cluster_health
    Column("cluster", Str(64), nullable=False),
    Column("state", Str(32), nullable=False),
    Column("detail", JSON, nullable=False),
    Column("request_id", Str(ID)),
    Column("trace_id", Str(64)),
    Index(None, "cluster", "occurred_at"),
)


# The approval audit log: one row per decision on a tool call that needed a human (approved, denied, expired).
approvals = Table(
    "approvals",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", Str(ID), nullable=False, unique=True),
    Column("approval_id", Str(ID), nullable=False),
    Column("decided_at", UTCDateTime, nullable=False),
    Column("requested_at", UTCDateTime),
    Column("thread_id", Str(ID)),
    Column("tool", Str(ID), nullable=False),
    Column("arguments", JSON, nullable=False),
    Column("decision", Str(16), nullable=False),
    Column("actor", Str(128), nullable=False),
    Column("reason", Str(1_000)),
    Column("policy_reason", Str(1_000), nullable=False, default=""),
    Column("request_id", Str(ID)),
    Column("trace_id", Str(64)),
    Index(None, "thread_id", "decided_at"),
)


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[Connection], None]


def _initial_schema(conn: Connection) -> None:
    metadata.create_all(conn, tables=[interactions, agent_decisions, learned_patterns, threads])


def _violations(conn: Connection) -> None:
    violations.create(conn)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "interactions, agent_decisions, learned_patterns, threads", _initial_schema),
    Migration(2, "violations log", _violations),
    Migration(3, "cluster audit and health events", lambda conn: cluster_events.create(conn)),
    Migration(4, "approval audit log", lambda conn: approvals.create(conn)),
)

# Any constant: PostgreSQL openers queue on this advisory lock instead of racing.
_PG_LOCK_KEY = 0x6D656D6F7279  # "memory"


def migrate(conn: Connection) -> list[int]:
    """Apply the steps not yet applied, inside the caller's transaction; return their versions.

    On SQLite the caller's transaction must already hold the write lock (BEGIN IMMEDIATE)
    so that two processes opening one file apply each step once.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    schema_version.create(conn, checkfirst=True)
    done = set(conn.scalars(select(schema_version.c.version)))
    applied = []
    for step in MIGRATIONS:
        if step.version in done:
            continue
        step.apply(conn)
        conn.execute(
            insert(schema_version).values(
                version=step.version, description=step.description, applied_at=datetime.now(UTC)
            )
        )
        applied.append(step.version)
    return applied
