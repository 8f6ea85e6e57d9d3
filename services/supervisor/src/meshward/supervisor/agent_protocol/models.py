"""Request bodies of the Agent Protocol routes, validated and bounded."""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator, model_validator

from ..models import THREAD_ID_PATTERN

MAX_METADATA_BYTES = 16_384
MAX_METADATA_DEPTH = 5
MAX_MESSAGES = 100
MAX_SEARCH_LIMIT = 100
MAX_SEARCH_OFFSET = 10_000
MAX_RESUME_BYTES = 16_384
MAX_MESSAGE_CHARS = 20_000  # per message; the question itself is held to max_question_chars by the route
StreamModeName = Literal["values", "updates", "messages-tuple", "events", "custom"]
STREAM_MODES: tuple[str, ...] = ("values", "updates", "messages-tuple", "events", "custom")


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def bounded_json(value: Any, what: str, max_bytes: int, max_depth: int) -> Any:
    if _depth(value) > max_depth:
        raise ValueError(f"{what} is nested deeper than {max_depth} levels")
    size = len(json.dumps(value, ensure_ascii=False))
    if size > max_bytes:
        raise ValueError(f"{what} is {size} bytes as JSON; the limit is {max_bytes}")
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Metadata(_Body):
    metadata: dict[str, Any] | None = None

    @field_validator("metadata")
    @classmethod
    def _bounded(cls, v):
        return None if v is None else bounded_json(v, "metadata", MAX_METADATA_BYTES, MAX_METADATA_DEPTH)


class ThreadCreate(Metadata):
    thread_id: StrictStr | None = Field(default=None, pattern=THREAD_ID_PATTERN)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: StrictStr | None = Field(default=None, max_length=100)
    ttl: Any = None
    supersteps: Any = None

    @model_validator(mode="after")
    def _supported(self):
        if self.ttl is not None or self.supersteps is not None:
            raise ValueError("ttl and supersteps are not supported")
        return self


class ThreadSearch(Metadata):
    ids: list[StrictStr] | None = Field(default=None, max_length=MAX_SEARCH_LIMIT)
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    values: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=MAX_SEARCH_LIMIT)
    offset: int = Field(default=0, ge=0, le=MAX_SEARCH_OFFSET)
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[StrictStr] | None = Field(default=None, max_length=20)
    extract: Any = None

    @model_validator(mode="after")
    def _supported(self):
        if self.values or self.extract:
            raise ValueError("searching threads by values or extract is not supported; search by metadata, ids or status")
        return self


class AssistantSearch(Metadata):
    graph_id: StrictStr | None = Field(default=None, max_length=100)
    name: StrictStr | None = Field(default=None, max_length=100)
    limit: int = Field(default=10, ge=1, le=MAX_SEARCH_LIMIT)
    offset: int = Field(default=0, ge=0, le=MAX_SEARCH_OFFSET)
    sort_by: StrictStr | None = Field(default=None, max_length=40)
    sort_order: Literal["asc", "desc"] | None = None
    select: list[StrictStr] | None = Field(default=None, max_length=20)


class HistoryRequest(_Body):
    limit: int = Field(default=10, ge=1, le=MAX_SEARCH_LIMIT)
    before: Any = None
    metadata: dict[str, Any] | None = None
    checkpoint: Any = None
    select: list[StrictStr] | None = Field(default=None, max_length=20)


class ChatInputMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")  # chat UIs send ids and extra kwargs along

    role: Literal["user", "human", "assistant", "ai", "system"] | None = None
    type: Literal["user", "human", "assistant", "ai", "system"] | None = None
    content: Annotated[StrictStr, Field(max_length=MAX_MESSAGE_CHARS)] | Annotated[list[dict[str, Any]], Field(max_length=50)]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")

    @property
    def from_user(self) -> bool:
        return (self.role or self.type) in ("user", "human")


class RunInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[ChatInputMessage] = Field(min_length=1, max_length=MAX_MESSAGES)


class ResumeCommand(_Body):
    resume: Any = None
    goto: Any = None
    update: Any = None

    @model_validator(mode="after")
    def _resume_only(self):
        if self.goto is not None or self.update is not None:
            raise ValueError("only command.resume is supported")
        if self.resume is None:
            raise ValueError("command.resume must not be null: send the decision, e.g. {\"approved\": true}")
        bounded_json(self.resume, "command.resume", MAX_RESUME_BYTES, MAX_METADATA_DEPTH)
        return self


class RunCreate(Metadata):
    """POST /threads/{id}/runs[/stream|/wait]. Fields the SDK may send that meshward does not support
    are refused when set, rather than silently ignored."""

    assistant_id: StrictStr = Field(max_length=100)
    input: RunInput | None = None
    command: ResumeCommand | None = None
    stream_mode: StreamModeName | list[StreamModeName] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    multitask_strategy: Literal["reject", "enqueue", "interrupt"] = "enqueue"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    if_not_exists: Literal["create", "reject"] = "reject"
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    durability: Literal["exit", "async", "sync"] | None = None
    # accepted by the SDK, not by meshward: refused when set
    interrupt_before: Any = None
    interrupt_after: Any = None
    webhook: Any = None
    checkpoint: Any = None
    checkpoint_id: Any = None
    checkpoint_during: Any = None
    on_completion: Any = None
    after_seconds: Any = None
    feedback_keys: Any = None
    strict_resume: Any = None
    langsmith_tracer: Any = None

    @field_validator("config", "context")
    @classmethod
    def _small(cls, v):
        return None if v is None else bounded_json(v, "config", MAX_METADATA_BYTES, MAX_METADATA_DEPTH)

    @model_validator(mode="after")
    def _consistent(self):
        unsupported = [n for n in ("interrupt_before", "interrupt_after", "webhook", "checkpoint", "checkpoint_id", "after_seconds", "feedback_keys")
                       if getattr(self, n) not in (None, [], "")]
        if self.stream_subgraphs or self.stream_resumable:
            unsupported.append("stream_subgraphs" if self.stream_subgraphs else "stream_resumable")
        if unsupported:
            raise ValueError(f"not supported by meshward: {', '.join(unsupported)}")
        if (self.input is None) == (self.command is None):
            raise ValueError("send exactly one of input (a new question) or command (resume)")
        if self.input is not None and not any(m.from_user for m in self.input.messages):
            raise ValueError("input.messages holds no user message")
        return self

    @property
    def modes(self) -> list[str]:
        return [self.stream_mode] if isinstance(self.stream_mode, str) else list(dict.fromkeys(self.stream_mode))

    def question(self) -> str:
        """The last user message: earlier turns are the thread's own history, kept by the checkpointer."""
        assert self.input is not None
        return next(m.text() for m in reversed(self.input.messages) if m.from_user)
