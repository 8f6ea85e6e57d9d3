"""A raw ASGI middleware: one SERVER span per HTTP request (the root of a question's trace),
continuing a caller's W3C traceparent when one is sent, and a body-size bound."""
from __future__ import annotations

import json
import time

from meshward.bus import tracer
from meshward.telemetry import metrics, names
from opentelemetry import context as otel_context
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, Status, StatusCode

_tracer = tracer("meshward.supervisor.http")


def _too_large(limit: int) -> bytes:
    return json.dumps({"error": {"code": "too_large", "message": f"request body over {limit} bytes", "details": []}}).encode()


class HttpServerMiddleware:
    def __init__(self, app, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        token = otel_context.attach(extract(headers))
        method, path = scope.get("method", "GET"), scope.get("path", "/")
        started = time.perf_counter()
        status_holder = {}
        try:
            with _tracer.start_as_current_span(
                names.http_span(method, path),
                kind=SpanKind.SERVER,
                attributes={"http.request.method": method, "url.path": path},
            ) as span:
                declared = headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
                    span.set_attribute("http.response.status_code", 413)
                    await self._reject(send)
                    return
                seen = 0

                async def bounded_receive():
                    nonlocal seen
                    message = await receive()
                    if message["type"] == "http.request":
                        seen += len(message.get("body", b""))
                        if seen > self.max_body_bytes:
                            raise _BodyTooLarge
                    return message

                async def tracked_send(message):
                    if message["type"] == "http.response.start":
                        status_holder["status"] = message["status"]
                        span.set_attribute("http.response.status_code", message["status"])
                        if message["status"] >= 500:
                            span.set_status(Status(StatusCode.ERROR))
                    await send(message)

                try:
                    await self.app(scope, bounded_receive, tracked_send)
                except _BodyTooLarge:
                    if "status" not in status_holder:
                        span.set_attribute("http.response.status_code", 413)
                        await self._reject(send)
        finally:
            otel_context.detach(token)
            # The route template, never the raw path: thread ids in paths would explode the label set.
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics.HTTP_REQUESTS.labels(route, method, str(status_holder.get("status", 413))).inc()
            metrics.HTTP_SECONDS.labels(route, method).observe(time.perf_counter() - started)

    async def _reject(self, send) -> None:
        body = _too_large(self.max_body_bytes)
        await send({"type": "http.response.start", "status": 413, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _BodyTooLarge(Exception):
    pass
