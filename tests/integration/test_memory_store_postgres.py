"""MemoryStore on a real PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth).

The session works in a database of its own, created here and dropped at the end; each test
starts from an empty schema. Skipped when the server does not answer within 2 s. The test
bodies are the SQLite ones: tests/unit/memory/memory_store_contract.py.
"""
from __future__ import annotations

import pytest

from tests.pg import SERVER, scratch_database
from tests.unit.memory.memory_store_contract import MemoryStoreContract

asyncpg = pytest.importorskip("asyncpg")

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="session")
async def pg_database():
    async with scratch_database("meshward_memory_test") as name:
        yield name


class TestPostgresMemoryStore(MemoryStoreContract):
    @pytest.fixture
    async def store_url(self, pg_database):
        conn = await asyncpg.connect(**SERVER, database=pg_database, timeout=2)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        finally:
            await conn.close()
        return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{pg_database}"
