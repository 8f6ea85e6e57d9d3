"""The one registry of observability names: Prometheus metrics and OpenTelemetry spans.

Dashboards, alerts and trace queries are written against these strings; change them here only.
"""
from __future__ import annotations

PREFIX = "meshward"

# --- metrics (Prometheus) -------------------------------------------------
# NATS request/reply, per subject, on the serving side (every NATS service).
REQUESTS = f"{PREFIX}_requests"  # Counter (exported as ..._total), labels: service, subject, outcome
REQUEST_SECONDS = f"{PREFIX}_request_duration_seconds"  # Histogram, labels: service, subject
REQUEST_ERRORS = f"{PREFIX}_request_errors"  # Counter, labels: service, subject, code
# HTTP ingress (supervisor).
HTTP_REQUESTS = f"{PREFIX}_http_requests"  # Counter, labels: route, method, status
HTTP_SECONDS = f"{PREFIX}_http_request_duration_seconds"  # Histogram, labels: route, method
# Classifiers (security, intent): micro-batches.
CLASSIFIER_BATCH_SIZE = f"{PREFIX}_classifier_batch_size"  # Histogram, labels: model
CLASSIFIER_INFERENCE_SECONDS = f"{PREFIX}_classifier_inference_seconds"  # Histogram, labels: model
# Security decisions.
SECURITY_BLOCKS = f"{PREFIX}_security_blocks"  # Counter, labels: category, layer
# Memory: events waiting in the durable consumer.
CONSUMER_PENDING = f"{PREFIX}_consumer_pending_events"  # Gauge, labels: stream, consumer
# LLM tier.
LLM_TOKENS = f"{PREFIX}_llm_tokens"  # Counter, labels: model, kind (prompt|completion)
# Readiness of this process (1 ready, 0 not).
READY = f"{PREFIX}_ready"  # Gauge, labels: service

# --- spans (OpenTelemetry) ------------------------------------------------
def http_span(method: str, path: str) -> str:
    """SERVER span of an HTTP request at the ingress, the root of a question's trace ("POST /v1/ask")."""
    return f"{method} {path}"


def send_span(subject: str) -> str:
    """CLIENT span of a request over NATS."""
    return f"send {subject}"


def process_span(subject: str) -> str:
    """SERVER span of the service handling a request."""
    return f"process {subject}"


def publish_span(subject: str) -> str:
    """PRODUCER span of an event published to JetStream."""
    return f"publish {subject}"


def consume_span(subject: str) -> str:
    """CONSUMER span of an event handled by a durable consumer."""
    return f"consume {subject}"


def node_span(node: str) -> str:
    """One step of the supervisor's graph."""
    return f"node {node}"
