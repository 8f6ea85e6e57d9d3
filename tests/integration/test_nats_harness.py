"""The test harness itself: where there is no Docker engine, the container path skips cleanly."""
from __future__ import annotations

import pytest

from tests.conftest import _start_container_nats, docker_engine_available

pytestmark = pytest.mark.integration


def test_docker_probe_answers_quickly_and_without_raising():
    assert docker_engine_available() in (True, False)


def test_testcontainers_path():
    if not docker_engine_available():
        pytest.skip("no Docker engine answers here; the session uses the bundled nats-server binary")
    container, url = _start_container_nats()
    try:
        assert url.startswith("nats://")
    finally:
        container.stop()


async def test_session_server_answers(nats_url):
    import nats

    nc = await nats.connect(nats_url)
    try:
        assert nc.is_connected
        js = nc.jetstream()
        info = await js.account_info()
        assert info is not None  # JetStream is on
    finally:
        await nc.close()
