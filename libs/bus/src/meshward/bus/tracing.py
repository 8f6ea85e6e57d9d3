"""OpenTelemetry setup and W3C trace-context propagation through NATS headers.

The standard variables decide what happens: OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with OTEL_EXPORTER_OTLP_PROTOCOL
(http/protobuf, the default, or grpc) exports through a batch span processor;
OTEL_TRACES_EXPORTER=console prints spans; with neither, spans are created (so
trace ids still propagate and answers carry them) but nothing is exported.
"""
from __future__ import annotations

import asyncio
import atexit
import logging
import os
import re
import time

from meshward.contracts.subjects import HDR_TRACEPARENT, HDR_TRACESTATE
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

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


def build_provider(default_service_name: str) -> TracerProvider:
    """A tracer provider named from OTEL_SERVICE_NAME; the SDK reads the sampler from
    OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on)."""
    name = os.environ.get("OTEL_SERVICE_NAME") or default_service_name
    return TracerProvider(resource=Resource.create({"service.name": name}))


def setup_tracing(default_service_name: str) -> TracerProvider:
    """Install the process-wide tracer provider once; later calls return it."""
    global _configured
    if _configured is not None:
        return _configured
    provider = build_provider(default_service_name)
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


# W3C trace context (traceparent/tracestate) is the wire format between services. It is written
# and parsed here rather than through the propagator API: same format and validation, a fraction
# of the cost on every hop (no composite propagator, getter/setter indirection or baggage).
_TRACEPARENT_RE = re.compile(r"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*")
_MAX_HEADER_LENGTH = 512
_EMPTY = Context()


def inject_span(headers: dict[str, str], span: trace.Span) -> None:
    """Write the traceparent (and tracestate) that makes `span` the parent on the other side."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return
    headers[HDR_TRACEPARENT] = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    if ctx.trace_state:
        headers[HDR_TRACESTATE] = ctx.trace_state.to_header()


def inject_headers(headers: dict[str, str], context: Context | None = None) -> None:
    """Write the trace context of the span current in `context` (default: the current context)."""
    inject_span(headers, trace.get_current_span(context))


def extract_context(headers: dict[str, str] | None) -> Context:
    """A context holding the remote parent span from the headers; empty when they carry none (valid)."""
    value = headers.get(HDR_TRACEPARENT) if headers else None
    if not value or len(value) > _MAX_HEADER_LENGTH:
        return _EMPTY
    match = _TRACEPARENT_RE.fullmatch(value)
    if match is None:
        return _EMPTY
    version, trace_id, span_id, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == "0" * 32 or span_id == "0" * 16:
        return _EMPTY
    state = headers.get(HDR_TRACESTATE)
    parent = SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(int(flags, 16)),
        trace_state=TraceState.from_header([state]) if state and len(state) <= _MAX_HEADER_LENGTH else None,
    )
    return trace.set_span_in_context(NonRecordingSpan(parent), _EMPTY)


def end_soon(span: trace.Span) -> None:
    """End `span` at this instant, but leave the SDK's end() (the span processors' work) to the
    event loop's next pass, off the critical path.

    By then the reply just published is written to the socket, and so is a caller's next
    request, published after this returns (hence two hops, not one).
    """
    if not span.is_recording():  # sampled out: end() would do nothing
        return
    loop = asyncio.get_running_loop()
    loop.call_soon(loop.call_soon, span.end, time.time_ns())


def current_trace_id() -> str | None:
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None
