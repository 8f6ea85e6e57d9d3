"""meshward.v1.tools.list / meshward.v1.tools.call (MCP-shaped)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import MAX_ID_CHARS, Message


class ToolSpec(Message):
    name: str
    description: str
    input_schema: dict[str, Any]
    requires_approval: bool = False
    # MCP's readOnlyHint: the tool changes nothing, so a call may run twice (a caller re-sends one whose replica died)
    read_only: bool = False


class ToolListRequest(Message):
    pass


class ToolCatalog(Message):
    tools: list[ToolSpec]


class ToolCallRequest(Message):
    name: str = Field(max_length=MAX_ID_CHARS)
    arguments: dict[str, Any] = Field(default_factory=dict)
    # The same key again (a run redelivered to another supervisor replica) gets the stored result, not a second run.
    idempotency_key: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{16,64}$")


class ApprovedToolCallRequest(Message):
    """A call a human approved (only the supervisor may send it; the tools service still applies its deny list)."""

    name: str = Field(max_length=MAX_ID_CHARS)
    arguments: dict[str, Any] = Field(default_factory=dict)
    approval_id: str = Field(max_length=MAX_ID_CHARS)
    actor: str = Field(min_length=1, max_length=128)


class TextContent(Message):
    type: Literal["text"] = "text"
    text: str


class ImageContent(Message):
    type: Literal["image"] = "image"
    data: str  # base64
    mime_type: str = "image/png"


class DataContent(Message):
    type: Literal["data"] = "data"
    data: dict[str, Any]


Content = Annotated[TextContent | ImageContent | DataContent, Field(discriminator="type")]


class ToolResult(Message):
    name: str
    content: list[Content]
    duration_ms: float = 0.0
