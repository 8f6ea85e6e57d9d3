"""Scope files: what an assistant deployment is for (its intents) and what it is not.

A scope is a YAML file; the packaged default is ``scopes/datacenter.yaml``. Choosing another file (for
example from an environment variable) is the caller's business: pass its path to :func:`load_scope`.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from meshward.contracts import OUT_OF_SCOPE
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["DEFAULT_SCOPE_FILE", "IntentSpec", "Scope", "ScopeError", "ScopeThresholds", "load_scope"]

DEFAULT_SCOPE_FILE = "datacenter.yaml"
_INTENT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class ScopeError(ValueError):
    """A scope file is missing, unreadable or invalid; the message names the file and the problem."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _clean_strings(values: list[str], what: str) -> list[str]:
    cleaned = [v.strip() for v in values]
    if any(not v for v in cleaned):
        raise ValueError(f"{what} must not contain empty strings")
    return cleaned


class IntentSpec(_Strict):
    description: str = Field(min_length=1)
    keywords: list[str] = Field(default_factory=list, description="case-insensitive words/phrases, matched on word boundaries")
    patterns: list[str] = Field(default_factory=list, description="case-insensitive regular expressions (re.search)")
    examples: list[str] = Field(min_length=1, description="example questions; their embeddings define the intent")
    weight: float = Field(default=1.0, gt=0.0, le=2.0, description="multiplier for this intent's keyword bonus")

    @field_validator("keywords", "examples")
    @classmethod
    def _non_empty(cls, values: list[str], info: Any) -> list[str]:
        return _clean_strings(values, info.field_name)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, values: list[str]) -> list[str]:
        for pattern in values:
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return values


class ScopeThresholds(_Strict):
    in_scope_min_similarity: float = Field(default=0.45, ge=0.0, le=1.0,
                                           description="best intent similarity needed without a keyword hit")
    keyword_min_similarity: float = Field(default=0.30, ge=0.0, le=1.0,
                                          description="best intent similarity needed when that intent's keywords hit")
    out_of_scope_margin: float = Field(default=0.02, ge=-1.0, le=1.0,
                                       description="intent score must beat the out-of-scope similarity by this much")
    keyword_bonus: float = Field(default=0.10, ge=0.0, le=1.0, description="score bonus for the first keyword/pattern hit")
    keyword_bonus_max: float = Field(default=0.16, ge=0.0, le=1.0, description="cap on the keyword bonus of one intent")
    top_k: int = Field(default=3, ge=1, le=20, description="similarity = mean of the k best example similarities")
    temperature: float = Field(default=0.05, gt=0.0, le=1.0, description="softmax temperature for confidences")

    @model_validator(mode="after")
    def _ordered(self) -> ScopeThresholds:
        if self.keyword_bonus_max < self.keyword_bonus:
            raise ValueError("keyword_bonus_max must be >= keyword_bonus")
        return self


class Scope(_Strict):
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    intents: dict[str, IntentSpec] = Field(min_length=1)
    out_of_scope_examples: list[str] = Field(min_length=1)
    thresholds: ScopeThresholds = Field(default_factory=ScopeThresholds)

    @field_validator("intents")
    @classmethod
    def _intent_names(cls, intents: dict[str, IntentSpec]) -> dict[str, IntentSpec]:
        for name in intents:
            if name == OUT_OF_SCOPE:
                raise ValueError(f"{OUT_OF_SCOPE!r} is reserved and cannot be an intent name")
            if not _INTENT_NAME.match(name):
                raise ValueError(f"intent name {name!r} must match {_INTENT_NAME.pattern}")
        return intents

    @field_validator("out_of_scope_examples")
    @classmethod
    def _oos_non_empty(cls, values: list[str]) -> list[str]:
        return _clean_strings(values, "out_of_scope_examples")


def _format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(part) for part in err["loc"]) or "<top level>"
        lines.append(f"  {loc}: {err['msg']}")
    return "\n".join(lines)


def load_scope(path: str | Path | None = None) -> Scope:
    """Load and validate a scope file; ``None`` loads the packaged default (``datacenter.yaml``).

    Raises :class:`ScopeError` (a ``ValueError``) naming the file and each problem.
    """
    if path is None:
        source = f"<packaged scopes/{DEFAULT_SCOPE_FILE}>"
        text = resources.files("meshward.intent").joinpath("scopes", DEFAULT_SCOPE_FILE).read_text(encoding="utf-8")
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise ScopeError(f"scope file {source} does not exist") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ScopeError(f"scope file {source} cannot be read: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScopeError(f"scope file {source} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ScopeError(f"scope file {source} must hold a mapping (name, description, intents, ...), got {type(data).__name__}")
    try:
        return Scope.model_validate(data)
    except ValidationError as exc:
        raise ScopeError(f"scope file {source} is invalid:\n{_format_validation_error(exc)}") from exc
