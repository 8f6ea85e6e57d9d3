"""A scratch database on the PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth) for one test or session:
created on entry, dropped on exit; the test is skipped when the server does not answer within 2 s."""
from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

SERVER = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


@asynccontextmanager
async def scratch_database(prefix: str) -> AsyncIterator[str]:
    asyncpg = pytest.importorskip("asyncpg")
    try:
        admin = await asyncpg.connect(**SERVER, database="test", timeout=2)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL does not answer at 127.0.0.1:5432 within 2 s: {exc!r}")
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield name
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
