"""Per-request context that crosses hops: deadline and request id.

A handler runs with the caller's deadline in a ContextVar, so every request it
makes downstream inherits what is left of it (and gives up when it is gone).
"""
from __future__ import annotations

import time
import uuid
from contextvars import ContextVar

from meshward.contracts.subjects import HDR_DEADLINE, HDR_REQUEST_ID

_deadline: ContextVar[float | None] = ContextVar("meshward_deadline", default=None)  # epoch seconds
_request_id: ContextVar[str | None] = ContextVar("meshward_request_id", default=None)


def now() -> float:
    return time.time()


def current_deadline() -> float | None:
    return _deadline.get()


def current_request_id() -> str | None:
    return _request_id.get()


def new_request_id() -> str:
    return uuid.uuid4().hex


def set_deadline(deadline: float | None):
    return _deadline.set(deadline)


def set_request_id(request_id: str | None):
    return _request_id.set(request_id)


def reset_deadline(token) -> None:
    _deadline.reset(token)


def reset_request_id(token) -> None:
    _request_id.reset(token)


def remaining(default: float) -> float:
    """Seconds left before the inherited deadline, capped by `default`."""
    deadline = _deadline.get()
    if deadline is None:
        return default
    return min(default, deadline - time.time())


def from_headers(headers: dict[str, str] | None) -> tuple[float | None, str | None]:
    if not headers:
        return None, None
    raw = headers.get(HDR_DEADLINE)
    deadline = None
    if raw:
        try:
            deadline = int(raw) / 1000.0
        except ValueError:
            deadline = None
    return deadline, headers.get(HDR_REQUEST_ID)


def to_headers(headers: dict[str, str], deadline: float, request_id: str | None) -> None:
    headers[HDR_DEADLINE] = str(int(deadline * 1000))
    if request_id:
        headers[HDR_REQUEST_ID] = request_id
