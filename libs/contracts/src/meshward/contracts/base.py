"""Base model and shared limits for every v1 message."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

CONTRACTS_VERSION = "1.0.0"

# Bounds shared by every service: a message that breaks them is rejected with bad_request.
MAX_TEXT_CHARS = 20_000
MAX_ANSWER_CHARS = 100_000
MAX_LIST_ITEMS = 256
MAX_ID_CHARS = 128


class Message(BaseModel):
    """Every request, reply and event body.

    Unknown fields are ignored so that a v1 reader accepts messages from a newer
    v1 writer that added optional fields (the compatibility rule of ARCHITECTURE.md).
    """

    model_config = ConfigDict(extra="ignore", frozen=False, str_strip_whitespace=False)
