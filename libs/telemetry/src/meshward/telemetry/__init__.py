"""meshward.telemetry: the names of every metric and span, the metrics themselves, and the endpoint that serves them."""
from . import metrics, names
from .server import TelemetryServer, start_from_env

__all__ = ["TelemetryServer", "metrics", "names", "start_from_env"]
