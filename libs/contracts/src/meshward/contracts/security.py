"""meshward.v1.security.*"""
from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .base import MAX_ANSWER_CHARS, MAX_ID_CHARS, MAX_LIST_ITEMS, MAX_TEXT_CHARS, Message


class ThreatCategory(StrEnum):
    PROMPT_EXTRACTION = "prompt_extraction"
    CREDENTIAL_EXTRACTION = "credential_extraction"
    ROLE_MANIPULATION = "role_manipulation"
    SECURITY_BYPASS = "security_bypass"
    CONFIG_INSPECTION = "config_inspection"
    HARMFUL_CONTENT = "harmful_content"  # weapons, malware, fraud, self-harm, harassment, illegal services


class DecidingLayer(StrEnum):
    RULES = "rules"
    CLASSIFIER = "classifier"
    KNOWN_THREATS = "known_threats"
    DECODE = "decode"  # a reading behind an encoding, or a request to decode and follow
    SUFFIX = "adversarial_suffix"  # optimised gibberish appended to a request
    NONE = "none"  # nothing fired: allowed by default


class ModelInfo(Message):
    name: str
    version: str
    provider: str | None = None  # e.g. CPUExecutionProvider


class CheckMode(StrEnum):
    INPUT = "input"  # a user's question: any threat category
    CONTENT = "content"  # untrusted text (tool result, document, page): instructions addressed to the assistant


class SecurityCheckRequest(Message):
    text: str = Field(max_length=MAX_TEXT_CHARS)
    thread_id: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    context: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)  # the thread's recent user turns
    mode: CheckMode = CheckMode.INPUT
    source: str | None = Field(default=None, max_length=MAX_ID_CHARS)  # content mode: e.g. "tool:pdf_extract"


class SecurityVerdict(Message):
    allowed: bool
    threat_category: ThreatCategory | None = None
    score: float = Field(ge=0.0, le=1.0)
    layer: DecidingLayer
    reason: str = ""
    model: ModelInfo | None = None
    source: str | None = Field(default=None, max_length=MAX_ID_CHARS)  # echoed from the request
    # A block that stands only for a question the assistant would answer: an unsure harm verdict. Out of scope,
    # the scope refusal answers it (no accusation, nothing learned); in scope, it is refused as a threat.
    deferred_to_scope: bool = False


class LeakKind(StrEnum):
    SYSTEM_PROMPT = "system_prompt"
    SECRET = "secret"
    CONFIG = "config"


class OutputCheckRequest(Message):
    answer: str = Field(max_length=MAX_ANSWER_CHARS)
    question: str = Field(max_length=MAX_TEXT_CHARS)


class OutputVerdict(Message):
    safe: bool
    leak: LeakKind | None = None
    relevant: bool = True
    relevance: float = Field(default=1.0, ge=0.0, le=1.0)
    reason: str = ""
    redacted_answer: str | None = None  # set when the answer can be repaired by redaction
