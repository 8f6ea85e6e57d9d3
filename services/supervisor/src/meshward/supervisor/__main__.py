"""python -m meshward.supervisor: the HTTP ingress and the graph."""
from __future__ import annotations

import uvicorn
from meshward.bus.logs import setup_logging
from meshward.bus.tracing import setup_tracing

from .api import create_app
from .settings import SupervisorSettings


def main() -> None:
    settings = SupervisorSettings()
    setup_logging("supervisor")
    setup_tracing("meshward-supervisor")
    uvicorn.run(create_app(settings), host=settings.http_host, port=settings.http_port, log_config=None, access_log=False, timeout_graceful_shutdown=10)


if __name__ == "__main__":
    main()
