"""The cluster store on a real PostgreSQL at 127.0.0.1:5432 (trust auth): migrations twice, register, replace,
list, remove, and the sealed credentials as stored. Skipped when the server does not answer within 2 s."""
from __future__ import annotations

import pytest
from meshward.tools.cluster.crypto import Sealer
from meshward.tools.cluster.store import ClusterStore
from pydantic import SecretStr

from tests.pg import scratch_database

pytestmark = pytest.mark.postgres

@pytest.fixture
async def pg_url():
    async with scratch_database("meshward_cluster_test") as name:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"


async def test_cluster_store_on_postgres(pg_url):
    sealer = Sealer(SecretStr("q8Zr3vN1xLp0Tw7YbKc5Hs2Fj9Ud4Ge6"))
    store = await ClusterStore.open(pg_url)
    await store.close()
    store = await ClusterStore.open(pg_url)  # migrations already applied: a no-op
    try:
        assert await store.upsert("lab", "https://lab:6443", "token", sealer.seal({"token": "tok-123456"}), {"env": "lab"}, "v1.29.2")
        assert not await store.upsert("lab", "https://lab2:6443", "token", sealer.seal({"token": "tok-abcdef"}), {}, "v1.30.0")
        row = await store.get("lab")
        assert row.api_url == "https://lab2:6443" and b"tok-abcdef" not in row.credentials
        assert sealer.open(row.credentials) == {"token": "tok-abcdef"}
        assert await store.names() == ["lab"] and "credentials" not in row.public()
        assert await store.remove("lab") and await store.get("lab") is None and not await store.remove("lab")
    finally:
        await store.close()
