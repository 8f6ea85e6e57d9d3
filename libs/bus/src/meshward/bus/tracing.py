"""OpenTelemetry setup and W3C trace-context propagation through NATS headers.

The standard variables decide what happens: OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with OTEL_EXPORTER_OTLP_PROTOCOL
(http/protobuf, the default, or grpc) exports through a batch span processor;
OTEL_TRACES_EXPORTER=console prints spans; with neither, spans are created (so
trace ids still propagate and answers carry them) but nothing is exported.
"""
from __future__ import annotations

import atexit
import logging
import os

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

log = logging.getLogger(__name__)
_configured: TracerProvider | None = None


def _exporter():
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if endpoint:
        protocol = (
            os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        return OTLPSpanExporter()
    if os.environ.get("OTEL_TRACES_EXPORTER", "").lower() == "console":
        return ConsoleSpanExporter()
    return None


def setup_tracing(default_service_name: str) -> TracerProvider:
    """Install the process-wide tracer provider once; later calls return it."""
    global _configured
    if _configured is not None:
        return _configured
    name = os.environ.get("OTEL_SERVICE_NAME") or default_service_name
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    exporter = _exporter()
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter))
        log.info("tracing: exporting spans with %s", type(exporter).__name__)
    trace.set_tracer_provider(provider)
    atexit.register(provider.shutdown)
    _configured = provider
    return provider


def shutdown_tracing() -> None:
    if _configured is not None:
        _configured.force_flush(timeout_millis=5_000)


def tracer(name: str = "meshward"):
    return trace.get_tracer(name)


# W3C trace context (traceparent/tracestate) is the wire format between services; using the
# propagator directly keeps the per-hop cost down (no composite, no baggage parsing).
_W3C = TraceContextTextMapPropagator()


def inject_headers(headers: dict[str, str], context=None) -> None:
    _W3C.inject(headers, context=context)


def extract_context(headers: dict[str, str] | None):
    return _W3C.extract(headers or {})


def current_trace_id() -> str | None:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None
