"""The whole system as processes (the same launcher `make up` uses), behind real HTTP."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import httpx
import pytest
from meshward.devstack.launcher import Console, Stack
from meshward.devstack.nats_server import free_port

from tests.fake_upstreams import FakeUpstreams
from tests.otlp_receiver import OtlpReceiver


@pytest.fixture(scope="session")
def otlp():
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="session")
def upstreams():
    with FakeUpstreams() as fake:
        yield fake


@pytest.fixture(scope="session")
async def system(otlp, upstreams):
    data_dir = Path(tempfile.mkdtemp(prefix="meshward-e2e-"))
    log = open(data_dir / "stack.log", "w")  # noqa: SIM115 - closed at teardown
    port, mcp_port = free_port(), free_port()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "MESHWARD_LOG_LEVEL": "INFO",
        "MESHWARD_MCP_PORT": str(mcp_port),
        # cluster registration from the graph (tests/e2e/test_cluster.py); a throwaway key for sealing credentials
        "MESHWARD_CLUSTER_WRITE": "allow",
        "MESHWARD_SECRET_KEY": "e2e-Kp4vQ9xZ2mT7rW1nB8yH3cF6jL0sD5gA",
        # the periodic cluster health check, fast enough for a test to see a change arrive in memory
        "MESHWARD_CLUSTER_HEALTH_INTERVAL_S": "1",
        # a small context budget so that a short e2e conversation is compressed (default 20k tokens)
        "MESHWARD_MEMORY_CONTEXT_THRESHOLD_TOKENS": "60",
        "MESHWARD_MEMORY_CONTEXT_MAX_TOKENS": "400",
        "MESHWARD_MEMORY_CONTEXT_KEEP_LAST": "2",
        # the embedded model on a shared 2-core CPU: short drafts, and room for a slow one
        "MESHWARD_LLM_MAX_TOKENS": "160",
        "MESHWARD_DEEP_TIMEOUT_S": "300",
        "MESHWARD_LLM_REQUEST_TIMEOUT_S": "300",
        **upstreams.env(),
    }
    stack = Stack(data_dir, port, None, Console(log), extra_env=env)
    await stack.start()
    try:
        if not await stack.wait_healthy(timeout=180):
            log.flush()
            pytest.fail("the system did not become healthy:\n" + (data_dir / "stack.log").read_text()[-5000:])
        yield {"url": f"http://127.0.0.1:{port}", "mcp_url": f"http://127.0.0.1:{mcp_port}/mcp", "stack": stack, "data_dir": data_dir, "log": data_dir / "stack.log"}
    finally:
        await stack.stop()
        log.close()
        if os.environ.get("MESHWARD_KEEP_E2E") is None:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
async def http(system):
    async with httpx.AsyncClient(base_url=system["url"], timeout=30) as client:
        yield client
