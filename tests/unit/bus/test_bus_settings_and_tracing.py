"""Bus settings and tracing: the sampler honours OTEL_TRACES_SAMPLER; log lines never show URL credentials."""
from __future__ import annotations

from meshward.bus.tracing import build_provider
from opentelemetry.sdk.trace.sampling import ParentBased


def test_the_sampler_comes_from_otel_traces_sampler(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.05")
    sampler = build_provider("x").sampler
    assert isinstance(sampler, ParentBased) and "0.05" in sampler.get_description()
    tracer = build_provider("x").get_tracer("t")
    recorded = sum(tracer.start_span("s").is_recording() for _ in range(2000))
    assert 20 < recorded < 250  # about 5% of root spans


def test_every_span_is_recorded_by_default(monkeypatch):
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    tracer = build_provider("x").get_tracer("t")
    assert all(tracer.start_span("s").is_recording() for _ in range(100))


def test_log_lines_never_show_credentials_from_the_url():
    from meshward.bus import BusSettings

    s = BusSettings(nats_url="nats://svc:s3cret@10.0.0.1:4222, nats://10.0.0.2:4222")
    assert s.redacted_url() == "nats://***@10.0.0.1:4222,nats://10.0.0.2:4222"
