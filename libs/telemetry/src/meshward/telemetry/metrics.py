"""The Prometheus metrics of meshward, on the default registry (one per process, served at /metrics).

Buckets are in seconds: a NATS hop is sub-millisecond, a question tens of milliseconds, a deep answer seconds.
"""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from . import names

_LATENCY = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUESTS = Counter(names.REQUESTS, "Requests handled over NATS", ["service", "subject", "outcome"])
REQUEST_SECONDS = Histogram(names.REQUEST_SECONDS, "Time to handle a NATS request", ["service", "subject"], buckets=_LATENCY)
REQUEST_ERRORS = Counter(names.REQUEST_ERRORS, "NATS requests answered with a typed error", ["service", "subject", "code"])
HTTP_REQUESTS = Counter(names.HTTP_REQUESTS, "HTTP requests at the ingress", ["route", "method", "status"])
HTTP_SECONDS = Histogram(names.HTTP_SECONDS, "Time to answer an HTTP request", ["route", "method"], buckets=_LATENCY)
CLASSIFIER_BATCH_SIZE = Histogram(
    names.CLASSIFIER_BATCH_SIZE, "Questions per classifier micro-batch", ["model"], buckets=(1, 2, 4, 8, 16, 32, 64, 128)
)
CLASSIFIER_INFERENCE_SECONDS = Histogram(
    names.CLASSIFIER_INFERENCE_SECONDS, "Inference time of one micro-batch", ["model"], buckets=_LATENCY
)
SECURITY_BLOCKS = Counter(names.SECURITY_BLOCKS, "Questions blocked by security", ["category", "layer"])
CONSUMER_PENDING = Gauge(names.CONSUMER_PENDING, "Events not yet handled by a durable consumer", ["stream", "consumer"])
LLM_TOKENS = Counter(names.LLM_TOKENS, "Tokens through the LLM tier", ["model", "kind"])
READY = Gauge(names.READY, "1 when this process serves, 0 while it starts or drains", ["service"])


def observe_request(service: str, subject: str, seconds: float, error_code: str | None) -> None:
    """One handled NATS request: rate, latency and, for a typed error, its code."""
    REQUESTS.labels(service, subject, "error" if error_code else "ok").inc()
    REQUEST_SECONDS.labels(service, subject).observe(seconds)
    if error_code:
        REQUEST_ERRORS.labels(service, subject, error_code).inc()
