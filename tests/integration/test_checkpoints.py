"""Threads survive a restart of the supervisor with either checkpointer: SQLite (the default) and
Postgres (MESHWARD_CHECKPOINT_URL, pooled, no prepared statements). The app is served twice over
real HTTP with the same settings; the second serving continues the first one's thread."""
from __future__ import annotations

import pytest
from meshward.devstack.nats_server import free_port
from meshward.supervisor.checkpoints import open_checkpointer
from meshward.supervisor.settings import SupervisorSettings
from pydantic import ValidationError

from tests.pg import SERVER, scratch_database
from tests.served import serve

pytestmark = pytest.mark.integration


async def ask_once(settings: SupervisorSettings, body: dict) -> dict:
    """Start the supervisor, ask, stop it (its lifespan closes the checkpointer)."""
    async with serve(settings) as http:
        r = await http.post("/v1/ask", json=body)
        assert r.status_code == 200, r.text
        return r.json()


async def survives_restart(settings: SupervisorSettings) -> None:
    first = await ask_once(settings, {"question": "Calculate 21 * 2"})
    second = await ask_once(settings.model_copy(update={"http_port": free_port()}), {"question": "Calculate 5 + 5", "thread_id": first["thread_id"]})
    assert second["thread_id"] == first["thread_id"]
    async with open_checkpointer(settings) as saver:
        checkpoint = await saver.aget_tuple({"configurable": {"thread_id": first["thread_id"]}})
    history = checkpoint.checkpoint["channel_values"]["history"]
    assert [t["question"] for t in history] == ["Calculate 21 * 2", "Calculate 5 + 5"]
    assert all(t["answer"] for t in history)


async def test_sqlite_threads_survive_a_restart(tmp_path):
    await survives_restart(SupervisorSettings(http_port=free_port(), checkpoint_db=tmp_path / "cp.db"))


async def test_postgres_threads_survive_a_restart(tmp_path):
    async with scratch_database("meshward_cp") as name:
        url = f"postgresql://{SERVER['user']}@{SERVER['host']}:{SERVER['port']}/{name}"
        settings = SupervisorSettings(http_port=free_port(), checkpoint_url=url, checkpoint_db=tmp_path / "unused.db")
        await survives_restart(settings)
        assert not (tmp_path / "unused.db").exists()


def test_checkpoint_url_must_be_postgres():
    with pytest.raises(ValidationError, match="postgresql://"):
        SupervisorSettings(checkpoint_url="mysql://x/y")
    assert SupervisorSettings(checkpoint_url="").checkpoint_url is None
