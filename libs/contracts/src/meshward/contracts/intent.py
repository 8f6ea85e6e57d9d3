"""meshward.v1.intent.classify"""
from __future__ import annotations

from pydantic import Field

from .base import MAX_ID_CHARS, MAX_TEXT_CHARS, Message

OUT_OF_SCOPE = "out_of_scope"


class IntentRequest(Message):
    text: str = Field(max_length=MAX_TEXT_CHARS)
    scope: str | None = Field(default=None, max_length=MAX_ID_CHARS, description="scope name; default scope when absent")
    has_attachments: bool = False


class IntentScore(Message):
    intent: str
    score: float = Field(ge=0.0, le=1.0)


class IntentResult(Message):
    intent: str
    in_scope: bool
    confidence: float = Field(ge=0.0, le=1.0)
    runner_ups: list[IntentScore] = Field(default_factory=list)
    scope: str
    method: str = ""  # which signal decided (keywords, embedding, classifier)
