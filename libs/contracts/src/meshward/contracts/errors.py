"""The typed error reply: what travels instead of a bare timeout or a stack trace."""
from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import Message


class ErrorCode(StrEnum):
    BAD_REQUEST = "bad_request"  # the request did not validate
    NOT_FOUND = "not_found"  # unknown subject target (tool, thread, ...)
    TOO_LARGE = "too_large"  # payload or argument over a bound
    DEADLINE_EXCEEDED = "deadline_exceeded"  # the caller's deadline passed
    UNAVAILABLE = "unavailable"  # no responder / dependency down; retry may help
    OVERLOADED = "overloaded"  # concurrency bound reached
    REFUSED = "refused"  # policy said no (e.g. a command not on the allowlist)
    NEEDS_APPROVAL = "needs_approval"  # policy allows it only once a human approves (the supervisor asks one)
    INTERNAL = "internal"  # a bug: logged with the trace id, never shown as a traceback


RETRYABLE_CODES = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.OVERLOADED})


class ErrorReply(Message):
    code: ErrorCode
    message: str = Field(max_length=2_000)
    retryable: bool = False
    service: str | None = None
    trace_id: str | None = None

    @classmethod
    def of(cls, code: ErrorCode, message: str, **kw) -> ErrorReply:
        return cls(code=code, message=message[:2_000], retryable=code in RETRYABLE_CODES, **kw)


class RemoteError(Exception):
    """Raised by the caller side when the remote answered with an ErrorReply."""

    def __init__(self, error: ErrorReply):
        super().__init__(f"{error.code}: {error.message}")
        self.error = error

    @property
    def code(self) -> ErrorCode:
        return self.error.code
