"""Secrets typed into a question ("... with token <t>") never travel with it.

`redact()` runs before anything sees the question: the security and intent checks, the graph state and its
checkpoints, the history, the interaction event memory persists, and any trace read the redacted text. The
values wait in a context variable of this one request; a plan names them as {"$secret": "token"} and the tools
step alone fills them in (`reveal`), so they reach the tool call and nothing else.
"""
from __future__ import annotations

import re
from contextvars import ContextVar, Token
from typing import Any

REDACTED = "[redacted]"
# A keyword, then an optional ":", "=" or "is", then a value of 8+ non-space characters (tokens are long; a
# shorter word after "token" is more likely prose).
_SECRET = re.compile(
    r"(?i)\b(?P<kind>bearer token|token|bearer|password|passwd|secret|api[ _-]?key)\b(?P<sep>\s*[:=]\s*|\s+(?:is\s+)?)(?P<value>[^\s,;\"'`]{8,})"
)
_KINDS = {"bearer token": "token", "bearer": "token", "passwd": "password"}

# The one question form whose secret phrase the security check does not see (below): the whole question must be
# a registration command, so no other text can hide behind a stripped phrase.
_REGISTRATION = re.compile(
    r"(?i)^\s*(?:please\s+)?(?:register|add|onboard)\s+(?:the\s+|a\s+)?(?:kubernetes\s+|k8s\s+)?cluster\s+(?:named\s+|called\s+)?"
    r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}\s+(?:at\s+)?https?://[^\s,;\"'<>]+\s+(?P<phrase>(?:with|using)\s+(?:the\s+)?(?:bearer\s+)?token\s+"
    + re.escape(REDACTED) + r")\s*[.!]?\s*$"
)

_secrets: ContextVar[dict[str, str] | None] = ContextVar("meshward_question_secrets", default=None)


def redact(question: str) -> tuple[str, dict[str, str]]:
    """The question with every secret value replaced by [redacted], and the values by kind (token, password...)."""
    found: dict[str, str] = {}

    def repl(m: re.Match[str]) -> str:
        if m.group("value") == REDACTED:
            return m.group(0)
        kind = m.group("kind").lower()
        kind = _KINDS.get(kind, "api_key" if kind.startswith("api") else kind)
        found.setdefault(kind, m.group("value"))
        return f"{m.group('kind')}{m.group('sep')}{REDACTED}"

    return _SECRET.sub(repl, question), found


def for_screening(question: str) -> str:
    """The text the security check reads: the question, except that a registration command loses its
    "with token [redacted]" phrase. The threat classifier was trained without benign registrations and blocks
    any mention of a token (credential_extraction); the value is gone already, and only a question that is
    entirely one registration command is shortened, so nothing else can hide behind the cut."""
    m = _REGISTRATION.match(question)
    return question if m is None else (question[: m.start("phrase")] + question[m.end("phrase") :]).strip()


def hold(secrets: dict[str, str]) -> Token:
    return _secrets.set(dict(secrets))


def release(token: Token) -> None:
    _secrets.reset(token)


def secret(kind: str) -> dict[str, str]:
    """A plan's placeholder for a secret of this request."""
    return {"$secret": kind}


def given(kind: str) -> bool:
    return kind in (_secrets.get() or {})


def reveal(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments with each {"$secret": kind} replaced by the held value (KeyError when none was given)."""
    held = _secrets.get() or {}
    out = {}
    for name, value in arguments.items():
        if isinstance(value, dict) and set(value) == {"$secret"}:
            if value["$secret"] not in held:
                raise KeyError(f"the {value['$secret']} given with the question")
            out[name] = held[value["$secret"]]
        else:
            out[name] = value
    return out
