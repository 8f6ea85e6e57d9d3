"""Fixtures shared by the integration tests: a connected Bus and a service environment on the session's nats-server."""
from __future__ import annotations

import pytest
from meshward.bus import Bus, BusSettings


@pytest.fixture
async def bus(nats_url):
    b = await Bus.connect(BusSettings(nats_url=nats_url))
    await b.ensure_event_stream()
    yield b
    await b.close()


@pytest.fixture
def service_env(nats_url, monkeypatch):
    """Environment for services created in-process: this session's NATS, a free port for the MCP door,
    and no known-threats lookups (no memory service runs beside them)."""
    monkeypatch.setenv("MESHWARD_NATS_URL", nats_url)
    monkeypatch.setenv("MESHWARD_MCP_PORT", "0")
    monkeypatch.setenv("MESHWARD_SECURITY_KNOWN_THREATS", "false")
    return monkeypatch
