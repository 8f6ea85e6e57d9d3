"""Registered clusters in the tools service's own database (SQLAlchemy 2 async: SQLite by default, PostgreSQL by URL).

Migrations are ordered steps recorded in `cluster_schema_version`, applied at open inside one transaction, the
pattern the memory service uses: no migration tool to ship or run, the same code on both backends, and a new
step is one function at the end of `MIGRATIONS`. Credentials arrive sealed (crypto.Sealer): this module never
sees a token in clear.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    delete,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

metadata = MetaData()

schema_version = Table(
    "cluster_schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

clusters = Table(
    "clusters",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("api_url", String(2048), nullable=False),
    Column("auth", String(16), nullable=False),  # token | kubeconfig
    Column("credentials", LargeBinary, nullable=False),  # Fernet token of {"token", "ca_cert", ...}
    Column("labels", JSON, nullable=False),
    Column("server_version", String(64), nullable=True),  # as seen at registration
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)


def _v1(conn: Connection) -> None:
    clusters.create(conn)


MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v1,)


# Any constant: PostgreSQL openers (several tools replicas) queue on this advisory lock instead of racing.
_PG_LOCK_KEY = 0x636C7573746572  # "cluster"


def migrate(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    schema_version.create(conn, checkfirst=True)
    done = set(conn.scalars(select(schema_version.c.version)))
    for version, step in enumerate(MIGRATIONS, start=1):
        if version not in done:
            step(conn)
            conn.execute(insert(schema_version).values(version=version, applied_at=datetime.now(UTC)))


@dataclass(frozen=True)
class ClusterRow:
    name: str
    api_url: str
    auth: str
    credentials: bytes
    labels: dict[str, str]
    server_version: str | None
    created_at: datetime

    def public(self) -> dict[str, Any]:
        """Everything a reply may show: never the credentials."""
        return {"name": self.name, "api_url": self.api_url, "auth": self.auth, "labels": self.labels, "server_version": self.server_version, "registered_at": self.created_at.isoformat()}


class ClusterStore:
    def __init__(self, engine: AsyncEngine):
        self._engine = engine

    @classmethod
    async def open(cls, url: str) -> ClusterStore:
        parsed = make_url(url)
        if parsed.get_backend_name() not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {parsed.get_backend_name()!r}: use sqlite+aiosqlite or postgresql+asyncpg")
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(parsed, pool_pre_ping=True)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(migrate)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine)

    async def close(self) -> None:
        await self._engine.dispose()

    async def upsert(self, name: str, api_url: str, auth: str, credentials: bytes, labels: dict[str, str], server_version: str | None) -> bool:
        """Store the cluster; True when it is new, False when an existing registration was replaced."""
        now = datetime.now(UTC)
        values = {"api_url": api_url, "auth": auth, "credentials": credentials, "labels": labels, "server_version": server_version, "updated_at": now}
        async with self._engine.begin() as conn:
            replaced = await conn.execute(update(clusters).where(clusters.c.name == name).values(**values))
            if replaced.rowcount:
                return False
            await conn.execute(insert(clusters).values(name=name, created_at=now, **values))
        return True

    async def get(self, name: str) -> ClusterRow | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(clusters).where(clusters.c.name == name))).first()
        return None if row is None else _row(row)

    async def all(self) -> list[ClusterRow]:
        async with self._engine.connect() as conn:
            rows = (await conn.execute(select(clusters).order_by(clusters.c.name))).all()
        return [_row(r) for r in rows]

    async def names(self) -> list[str]:
        async with self._engine.connect() as conn:
            return list(await conn.scalars(select(clusters.c.name).order_by(clusters.c.name)))

    async def count(self) -> int:
        return len(await self.names())

    async def remove(self, name: str) -> bool:
        async with self._engine.begin() as conn:
            return (await conn.execute(delete(clusters).where(clusters.c.name == name))).rowcount == 1


def _row(r: Any) -> ClusterRow:
    created = r.created_at if r.created_at.tzinfo else r.created_at.replace(tzinfo=UTC)
    return ClusterRow(r.name, r.api_url, r.auth, bytes(r.credentials), dict(r.labels or {}), r.server_version, created)
