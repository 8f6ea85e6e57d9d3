"""meshward's NATS runtime: connect, typed request/reply, events, tracing, deadlines, service runner."""
from .client import Bus, connect, decode_reply
from .service import Service, ServiceError, run_service
from .settings import BusSettings
from .tracing import current_trace_id, setup_tracing, tracer

__all__ = [
    "Bus", "BusSettings", "Service", "ServiceError", "connect", "current_trace_id", "decode_reply",
    "run_service", "setup_tracing", "tracer",
]
