"""The test harness itself: the session's nats-server (the bundled binary, Docker or not) has JetStream on."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


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
