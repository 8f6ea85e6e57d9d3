"""meshward.v1.llm.*: chat completion for the deep tier (OpenAI-shaped, backend-neutral).

`llm.chat` answers one ChatResponse. With `stream_subject` set, the llm service also publishes
ChatChunk messages on that subject as tokens arrive (the last one has `done=True`), then replies
with the complete ChatResponse as usual: a reader that ignores the stream still gets the answer.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from .base import MAX_ANSWER_CHARS, MAX_ID_CHARS, MAX_LIST_ITEMS, Message
from .tools import ToolSpec

# A prompt is bounded before it reaches any model: the sum of every message's content.
MAX_PROMPT_CHARS = 48_000
MAX_COMPLETION_TOKENS = 4_096


class ChatRole(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolCallRequestByModel(Message):
    """A tool call the model asked for; `arguments` is the parsed JSON object (validated by the llm service)."""

    id: str = Field(max_length=MAX_ID_CHARS)
    name: str = Field(max_length=MAX_ID_CHARS)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(Message):
    role: ChatRole
    content: str = Field(default="", max_length=MAX_ANSWER_CHARS)
    tool_calls: list[ToolCallRequestByModel] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    tool_call_id: str | None = Field(default=None, max_length=MAX_ID_CHARS)  # role=tool: the call answered
    name: str | None = Field(default=None, max_length=MAX_ID_CHARS)  # role=tool: the tool's name


class ChatRequest(Message):
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_LIST_ITEMS)
    tools: list[ToolSpec] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    max_tokens: int = Field(default=512, ge=1, le=MAX_COMPLETION_TOKENS)
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    # Publish ChatChunk messages here while generating (an inbox the caller subscribed to first).
    stream_subject: str | None = Field(default=None, max_length=256)


class Usage(Message):
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)


class AttemptOutcome(StrEnum):
    OK = "ok"
    CONNECT_ERROR = "connect_error"
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"  # 429
    SERVER_ERROR = "server_error"  # 5xx
    CLIENT_ERROR = "client_error"  # other 4xx: never retried on another provider
    MALFORMED = "malformed"  # unparseable, empty, or a tool call that does not fit the offered tools
    CIRCUIT_OPEN = "circuit_open"  # skipped: the provider failed recently


class ProviderAttempt(Message):
    provider: str = Field(max_length=MAX_ID_CHARS)
    outcome: AttemptOutcome
    detail: str = Field(default="", max_length=500)
    duration_ms: float = 0.0


class ChatResponse(Message):
    message: ChatMessage  # role=assistant: content and/or tool_calls
    finish_reason: Literal["stop", "length", "tool_calls"] = "stop"
    provider: str = Field(max_length=MAX_ID_CHARS)  # which provider of the chain answered ("embedded" for local)
    model: str = Field(max_length=256)
    usage: Usage = Field(default_factory=Usage)
    attempts: list[ProviderAttempt] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    first_token_ms: float | None = None
    duration_ms: float = 0.0


class ChatChunk(Message):
    """One streamed piece of an answer, published on the request's `stream_subject`."""

    index: int = Field(ge=0)
    delta: str = Field(default="", max_length=MAX_ANSWER_CHARS)
    done: bool = False
    provider: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    # The provider that streamed the earlier chunks failed mid-answer and this one starts over: drop them.
    restart: bool = False
