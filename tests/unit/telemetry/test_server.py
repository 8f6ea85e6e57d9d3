"""The probe and metrics endpoint over a real socket: readiness follows its check, /metrics carries the counters."""
from __future__ import annotations

import httpx
import pytest
from meshward.telemetry import TelemetryServer, metrics, names, start_from_env


@pytest.fixture
def server():
    s = TelemetryServer("unit", host="127.0.0.1", port=0).start()
    yield s
    s.stop()


def get(server, path):
    return httpx.get(f"http://127.0.0.1:{server.port}{path}", timeout=5)


def test_liveness_and_readiness_follow_the_check(server):
    ready = False
    server.readiness(lambda: ready)
    assert get(server, "/livez").status_code == 200
    assert get(server, "/readyz").status_code == 503
    ready = True
    assert get(server, "/readyz").status_code == 200
    assert get(server, "/other").status_code == 404


def test_metrics_carry_request_counts_errors_and_readiness(server):
    server.readiness(lambda: True)
    metrics.observe_request("unit", "meshward.v1.unit.verb", 0.002, None)
    metrics.observe_request("unit", "meshward.v1.unit.verb", 0.004, "bad_request")
    text = get(server, "/metrics").text
    assert f'{names.REQUESTS}_total{{outcome="ok",service="unit",subject="meshward.v1.unit.verb"}}' in text
    assert f'{names.REQUEST_ERRORS}_total{{code="bad_request",service="unit",subject="meshward.v1.unit.verb"}}' in text
    assert f'{names.REQUEST_SECONDS}_count{{service="unit",subject="meshward.v1.unit.verb"}}' in text
    assert f'{names.READY}{{service="unit"}} 1.0' in text


def test_the_endpoint_is_off_unless_a_port_is_set(monkeypatch):
    monkeypatch.delenv("MESHWARD_METRICS_PORT", raising=False)
    assert start_from_env("unit") is None
    monkeypatch.setenv("MESHWARD_METRICS_PORT", "nine")
    with pytest.raises(ValueError, match="MESHWARD_METRICS_PORT"):
        start_from_env("unit")


def test_span_names_are_the_ones_traces_are_queried_by():
    assert names.send_span("meshward.v1.tools.call") == "send meshward.v1.tools.call"
    assert names.process_span("s") == "process s" and names.consume_span("s") == "consume s"
    assert names.publish_span("s") == "publish s" and names.node_span("plan") == "node plan"
    assert names.http_span("POST", "/v1/ask") == "POST /v1/ask"
