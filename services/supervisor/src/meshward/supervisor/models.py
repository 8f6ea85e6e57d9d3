"""HTTP request and response bodies of the ingress."""
from __future__ import annotations

from typing import Literal

from meshward.contracts import ThreatCategory
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, field_validator

THREAD_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"


MAX_ATTACHMENTS = 4
MAX_ATTACHMENT_B64_CHARS = 7_000_000  # about 5 MB decoded


class Attachment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(min_length=1, max_length=200)
    content_base64: StrictStr = Field(min_length=4, max_length=MAX_ATTACHMENT_B64_CHARS)


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: StrictStr = Field(min_length=1, description="the user's question")
    thread_id: StrictStr | None = Field(default=None, pattern=THREAD_ID_PATTERN, description="continue this conversation; a new one when absent")
    attachments: list[Attachment] = Field(default_factory=list, max_length=MAX_ATTACHMENTS, description="files the question is about (PDF)")
    stream: StrictBool = Field(default=False, description="answer as Server-Sent Events: each graph step, the answer's tokens, then the response")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is blank")
        return v


class Image(BaseModel):
    mime_type: str
    data_base64: str


class Step(BaseModel):
    node: str
    ms: float


class TokenUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ApprovalRequest(BaseModel):
    approval_id: str
    tool: str
    arguments: dict = Field(description="as the tool would get them; a secret given with the question shows as a placeholder")
    reason: str = Field(description="why the tools service's policy asks a human")
    expires_at: str = Field(description="ISO-8601; undecided by then counts as denied")


class ApprovalDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approved: StrictBool
    reason: str | None = Field(default=None, max_length=1_000)


class AskResponse(BaseModel):
    status: Literal["answered", "refused", "error", "awaiting_approval"]
    answer: str
    refusal_reason: Literal["security", "out_of_scope"] | None = None
    threat_category: ThreatCategory | None = None
    intent: str | None = None
    decided_by: str | None = Field(default=None, description="the security layer that decided (rules, classifier, known_threats, none)")
    route: list[str]
    tools_used: list[str]
    trace_id: str
    thread_id: str
    duration_ms: float
    request_id: str
    steps: list[Step] = Field(default_factory=list, description="each node visited, with its duration")
    images: list[Image] = Field(default_factory=list, description="images the answer refers to (charts)")
    tier: Literal["fast", "deep"] | None = Field(default=None, description="which tier answered; null when refused before assess")
    tier_reason: str | None = Field(default=None, description="assess's reason for the tier")
    model: str | None = Field(default=None, description="provider/model that wrote the answer; null in the fast tier")
    confidence: float | None = Field(default=None, description="validate's confidence in a deep-tier answer")
    usage: TokenUsage = Field(default_factory=TokenUsage, description="LLM tokens spent on this answer (every draft)")
    withheld: list[str] = Field(default_factory=list, description="sources (tool:<name>, document:<name>) whose content security withheld")
    approval: ApprovalRequest | None = Field(default=None, description="with status awaiting_approval: the tool call waiting for a human")


class ErrorBody(BaseModel):
    code: str
    message: str
    details: list[dict] = Field(default_factory=list)


class ErrorResponse(BaseModel):
    error: ErrorBody
