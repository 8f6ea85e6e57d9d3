"""The supervisor app served by uvicorn on a real socket with in-process agents (fake ports), for HTTP tests."""
from __future__ import annotations

import asyncio
import contextlib

import httpx
import uvicorn
from meshward.supervisor.api import create_app
from meshward.supervisor.settings import SupervisorSettings

from tests.unit.supervisor.fakes import FakePorts


@contextlib.asynccontextmanager
async def serve(settings: SupervisorSettings, ports: FakePorts | None = None):
    """Yields an httpx client on the served app; the lifespan runs (and closes) like in production."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings, local_ports=ports or FakePorts()), host="127.0.0.1", port=settings.http_port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)  # polling uvicorn's own readiness flag
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.http_port}", timeout=20) as http:
            yield http
    finally:
        server.should_exit = True
        await task
