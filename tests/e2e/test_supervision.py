"""The launcher keeps the system answering: a killed service or nats-server is restarted, nothing is lost."""
from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from pathlib import Path

import httpx
import pytest
from meshward.devstack.launcher import SERVICES, Console, Stack
from meshward.devstack.nats_server import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def until(condition, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not condition():
        if loop.time() > end:
            pytest.fail("condition not reached")
        await asyncio.sleep(0.01)


async def answered(http: httpx.AsyncClient, question: str, attempts: int = 600) -> dict:
    """Ask until the system answers (it is restarting); every reply on the way must be a typed answer."""
    for _ in range(attempts):
        try:
            r = await http.post("/v1/ask", json={"question": question})
        except httpx.TransportError:  # the ingress itself is restarting
            await asyncio.sleep(0.1)
            continue
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] == "answered":
            return body
        # a typed error naming the missing service: "no service answers <subject>" while it is down, or, for a
        # request that was in flight on the connection the crash cut, "<subject> did not answer within <deadline>"
        assert body["status"] == "error" and ("no service answers" in body["answer"] or "did not answer within" in body["answer"]), body
        await asyncio.sleep(0.1)
    pytest.fail(f"not answering again: {question}")


async def test_killed_services_and_nats_server_are_restarted_and_no_event_is_lost():
    data_dir = Path(tempfile.mkdtemp(prefix="meshward-supervision-"))
    port = free_port()
    with open(data_dir / "stack.log", "w") as log:
        stack = Stack(data_dir, port, None, Console(log), extra_env={"MESHWARD_MCP_PORT": str(free_port())})
        await stack.start()
        supervision = asyncio.create_task(stack.supervise())
        try:
            assert await stack.wait_healthy(timeout=180), (data_dir / "stack.log").read_text()[-3000:]
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                threads = []
                for name in SERVICES:
                    pid = stack.procs[name].pid
                    os.kill(pid, signal.SIGKILL)
                    # ask once the launcher has reaped and restarted it: a question published while the kernel is still
                    # tearing the process down can reach its dying subscription and wait out the hop's deadline
                    await until(lambda: stack.procs[name].pid != pid)
                    body = await answered(http, f"Calculate {len(threads) + 2} * 3")
                    threads.append(body["thread_id"])
                    assert stack.procs[name].pid != pid and stack.restarts[name] == 1
                assert stack.nats is not None and stack.nats.proc is not None
                stack.nats.proc.kill()
                body = await answered(http, "Calculate 7 * 3")
                threads.append(body["thread_id"])
                assert stack.restarts["nats"] == 1
                # every answered question's interaction event reaches memory (JetStream file storage)
                for thread in threads:
                    for _ in range(600):
                        r = await http.get(f"/v1/threads/{thread}/history")
                        if r.status_code == 200 and r.json()["turns"]:
                            break
                        await asyncio.sleep(0.1)
                    else:
                        pytest.fail(f"thread {thread} has no history")
            assert not supervision.done()  # no crash loop
        finally:
            supervision.cancel()
            await stack.stop()
