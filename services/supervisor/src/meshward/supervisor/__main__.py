"""python -m meshward.supervisor: the HTTP ingress and the graph."""
from __future__ import annotations

import uvicorn
from meshward.bus.logs import setup_logging
from meshward.bus.tracing import setup_tracing
from meshward.telemetry import start_from_env

from .api import create_app
from .auth import ExposureError
from .settings import SupervisorSettings


def main() -> None:
    settings = SupervisorSettings()
    setup_logging("supervisor")
    setup_tracing("meshward-supervisor")
    try:
        app = create_app(settings)
    except ExposureError as e:
        raise SystemExit(f"supervisor: {e}") from None
    telemetry = start_from_env("supervisor")
    if telemetry is not None:
        telemetry.readiness(lambda: getattr(app.state, "asker", None) is not None)
    uvicorn.run(app, host=settings.http_host, port=settings.http_port, log_config=None, access_log=False, timeout_graceful_shutdown=10)


if __name__ == "__main__":
    main()
