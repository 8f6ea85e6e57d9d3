"""MemoryStore on a real PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth).

The session works in a database of its own, created here and dropped at the end; each test
starts from an empty schema. Skipped when the server does not answer within 2 s. The test
bodies are the SQLite ones: tests/unit/memory/memory_store_contract.py.
"""
from __future__ import annotations

import uuid

import pytest

from tests.unit.memory.memory_store_contract import MemoryStoreContract

asyncpg = pytest.importorskip("asyncpg")

pytestmark = pytest.mark.postgres

SERVER = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}


@pytest.fixture(scope="session")
async def pg_database():
    try:
        admin = await asyncpg.connect(**SERVER, database="test", timeout=2)
    except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
        pytest.skip(f"PostgreSQL does not answer at 127.0.0.1:5432 within 2 s: {exc!r}")
    name = f"meshward_memory_test_{uuid.uuid4().hex[:12]}"
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield name
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


class TestPostgresMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store_url(self, pg_database):
        conn = await asyncpg.connect(**SERVER, database=pg_database, timeout=2)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        finally:
            await conn.close()
        return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg_database}"
