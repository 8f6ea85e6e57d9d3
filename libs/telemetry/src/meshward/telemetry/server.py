"""The probe and metrics endpoint of a service: GET /metrics (Prometheus), /livez, /readyz.

It runs in a daemon thread, apart from the event loop, so that a busy or stuck loop still answers liveness
with the truth about the process and a scrape never waits behind requests. Enabled by MESHWARD_METRICS_PORT
(the images set it; `meshward up` leaves it unset, as its processes share one host).
"""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

from .metrics import READY

log = logging.getLogger(__name__)


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's signature; probes would flood the log
        pass


class TelemetryServer:
    def __init__(self, service: str, host: str = "0.0.0.0", port: int = 9464):  # noqa: S104 - scraped from outside the pod
        self.service = service
        self._ready: Callable[[], bool] = lambda: False
        self._metrics = make_wsgi_app()
        self._server = make_server(host, port, self._app, server_class=_ThreadingServer, handler_class=_QuietHandler)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="telemetry", daemon=True)

    def readiness(self, check: Callable[[], bool]) -> None:
        """What /readyz reports (and the meshward_ready gauge)."""
        self._ready = check

    def _app(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            READY.labels(self.service).set(1 if self._ready() else 0)
            return self._metrics(environ, start_response)
        if path == "/livez":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        if path == "/readyz":
            ready = self._ready()
            start_response("200 OK" if ready else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"ready\n" if ready else b"not ready\n"]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]

    def start(self) -> TelemetryServer:
        self._thread.start()
        log.info("telemetry: /metrics, /livez, /readyz on port %d", self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_from_env(service: str) -> TelemetryServer | None:
    """Start the endpoint when MESHWARD_METRICS_PORT is set (host: MESHWARD_METRICS_HOST, default all interfaces)."""
    port = os.environ.get("MESHWARD_METRICS_PORT")
    if not port:
        return None
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"MESHWARD_METRICS_PORT must be a port number, not {port!r}") from None
    return TelemetryServer(service, os.environ.get("MESHWARD_METRICS_HOST", "0.0.0.0"), number).start()  # noqa: S104
