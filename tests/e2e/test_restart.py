"""Conversations survive a restart of the whole system (same data folder, as `make up` twice)."""
from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import httpx
import pytest
from meshward.devstack.launcher import Console, Stack
from meshward.devstack.nats_server import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def start(data_dir: Path, port: int, log) -> Stack:
    stack = Stack(data_dir, port, None, Console(log), extra_env={"MESHWARD_MCP_PORT": str(free_port())})
    await stack.start()
    if not await stack.wait_healthy(timeout=180):
        await stack.stop()
        pytest.fail("system did not become healthy")
    return stack


async def test_history_and_follow_ups_survive_a_restart():
    data_dir = Path(tempfile.mkdtemp(prefix="meshward-restart-"))
    port = free_port()
    with open(data_dir / "stack.log", "w") as log:
        stack = await start(data_dir, port, log)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                first = (await http.post("/v1/ask", json={"question": "Calculate 21 * 2"})).json()
                thread = first["thread_id"]
                for _ in range(100):  # the memory service persists from the event stream
                    r = await http.get(f"/v1/threads/{thread}/history")
                    if r.status_code == 200 and r.json()["turns"]:
                        break
                    await asyncio.sleep(0.1)
        finally:
            await stack.stop()

        stack = await start(data_dir, port, log)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                follow = (await http.post("/v1/ask", json={"question": "what was my first question?", "thread_id": thread})).json()
                assert follow["answer"] == 'Your first question was: "Calculate 21 * 2"'
                turns = []
                for _ in range(100):
                    turns = (await http.get(f"/v1/threads/{thread}/history")).json()["turns"]
                    if len(turns) == 2:
                        break
                    await asyncio.sleep(0.1)
                assert [t["question"] for t in turns] == ["Calculate 21 * 2", "what was my first question?"]
                assert "42" in turns[0]["answer"]
        finally:
            await stack.stop()
