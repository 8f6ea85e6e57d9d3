"""Output check: catch leaks (system prompt, secrets, config) in an answer and score its relevance.

Every regex is linear-time: token patterns start with a negative lookbehind of their own
character class, so a match is only tried at the start of a run, and repetitions are bounded.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from meshward.contracts import LeakKind, OutputVerdict

from .normalize import decode_segments

MAX_CHARS = 100_000
MIN_PROTECTED_CHARS = 20
REDACTED = "[REDACTED]"
_MIN_ENV_LINES = 3
_IRRELEVANT_MIN_CHARS = 40

# --- leak patterns --------------------------------------------------------------------------

_PLACEHOLDERS = ("your", "example", "xxxx", "****", "changeme", "redacted", "placeholder", "dummy", "<", "...")
_NOT_SECRET = {"null", "none", "true", "false", "secret", "password", "token", "undefined", "empty", "hidden"}


def _plausible_secret(match: re.Match[str]) -> bool:
    value = match.group("s")
    low = value.lower()
    if len(value) < 4 or low in _NOT_SECRET or any(p in low for p in _PLACEHOLDERS):
        return False
    if value[0] in "$%{" or low.startswith(("os.", "process.", "env.", "settings.", "config.", "self.", "getenv")):
        return False  # a reference to where the secret lives, not the secret
    if value.isdigit() and len(value) < 12:
        return False  # "max_tokens: 4096"
    following = match.string[match.end("s"):match.end("s") + 1]
    if following == "(":
        return False  # a function call in code: password = input(...)
    if match.group("q"):
        return True
    # Unquoted: prose ("password: must be long") is not a secret; real values carry digits or symbols.
    return any(c.isdigit() for c in value) or any(not c.isalnum() and c != "_" for c in value) or (
        value != low and value != value.upper())


@dataclass(frozen=True)
class _LeakPattern:
    name: str
    kind: LeakKind
    regex: re.Pattern[str]
    group: str | int = 0  # the part to redact
    accept: Callable[[re.Match[str]], bool] | None = None


def _p(name: str, kind: LeakKind, pattern: str, group: str | int = 0,
       accept: Callable[[re.Match[str]], bool] | None = None, flags: int = 0) -> _LeakPattern:
    return _LeakPattern(name, kind, re.compile(pattern, flags), group, accept)


_SECRET = LeakKind.SECRET
_CONFIG = LeakKind.CONFIG
_KEY_WORDS = (r"(?:password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|"
              r"private[_-]?key|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token|token|"
              r"credentials?)")

_LEAK_PATTERNS: tuple[_LeakPattern, ...] = (
    _p("private_key", _SECRET,
       r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----(?:[A-Za-z0-9+/=\s:,.]|-(?!----))*"
       r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----)?"),
    _p("aws_access_key", _SECRET, r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"),
    _p("openai_key", _SECRET, r"(?<![\w-])sk-(?:proj-|ant-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    _p("stripe_key", _SECRET, r"(?<![\w-])[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    _p("github_token", _SECRET, r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    _p("slack_token", _SECRET, r"(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,}"),
    _p("google_api_key", _SECRET, r"(?<![\w-])AIza[0-9A-Za-z_-]{35}"),
    _p("jwt", _SECRET, r"(?<![\w-])eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),
    _p("bearer_token", _SECRET, r"\bbearer\s+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)", "s", flags=re.IGNORECASE),
    _p("url_credentials", _SECRET,
       r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{0,256}:(?P<s>[^\s@/]{1,256})@[^\s/@]", "s", flags=re.IGNORECASE),
    _p("secret_assignment", _SECRET,
       rf"(?<![\w-])[\w.-]{{0,40}}?{_KEY_WORDS}[\"']?[ \t]{{0,5}}(?:[:=]|=>)[ \t]{{0,5}}(?P<q>[\"'`]?)"
       r"(?P<s>[^\s\"'`,;<>{}()\[\]]{3,512})", "s", _plausible_secret, re.IGNORECASE),
    _p("secret_in_prose", _SECRET,
       r"\b(?:password|passcode|passphrase|api\s+key|secret\s+key|access\s+key|token)\s+(?:is|was)\s*:?\s*"
       r"(?P<q>[\"'`]?)(?P<s>[^\s\"'`,;<>]{4,256}?)(?=[\"'`]|[.!?]?(?:\s|$)|[,;])", "s", _plausible_secret,
       re.IGNORECASE),
    _p("passwd_entry", _CONFIG,
       r"(?<![\w.-])[a-z_][a-z0-9_.-]{0,31}:(?:x|\*|!{1,2}|\$[\w$./]{1,200}):\d{1,10}:\d{0,10}:[^\n]{0,512}"),
)
_ENV_LINE = re.compile(r"(?m)^[ \t]{0,8}(?:export[ \t]+)?[A-Z][A-Z0-9_]{1,63}=(?P<s>[^\n]+)")
_PROMPT_MARKER = re.compile(
    r"\bmy\s+(?:system\s+prompt|(?:initial|original|hidden|secret|internal)\s+(?:prompt|instructions))\s+"
    r"(?:is|was|says|said|reads|states|contains)\b(?!\s+(?:not|confidential|private|secret|hidden|protected|"
    r"internal|something|off[\s-]limits)\b)|"
    r"\bmy\s+(?:instructions|directives|guidelines|rules)\s+(?:are|were|say|state)\s*:|"
    r"\bhere\s+(?:is|are)\s+my\s+(?:full\s+|complete\s+|entire\s+|original\s+|exact\s+)?"
    r"(?:system\s+prompt|instructions|initial\s+prompt|prompt)\b|"
    r"\bi\s+was\s+(?:instructed|told|programmed)\s+(?:as\s+follows|the\s+following)\b",
    re.IGNORECASE,
)

# --- relevance ------------------------------------------------------------------------------

_TOKEN = re.compile(r"[^\W_]+")
_REFUSAL = re.compile(
    r"\b(?:i\s+(?:can(?:'?t|not)|am\s+(?:not\s+able|unable)|won'?t|will\s+not|do(?:n'?t|\s+not)\s+(?:have|know))|"
    r"i'?m\s+(?:sorry|unable|not\s+able)|sorry|unfortunately|unable\s+to|not\s+able\s+to|i\s+can\s+(?:only\s+)?help|"
    r"can\s+help\s+(?:you\s+)?with|please\s+(?:rephrase|clarify|provide|specify|ask)|"
    r"could\s+you\s+(?:clarify|rephrase|provide|specify)|cannot\s+(?:help|assist|answer|share|provide))\b",
    re.IGNORECASE,
)
_STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just let like me more most my no nor not now of off on once only
or other our ours out over own please same she should so some such than that the their them then there these
they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself tell show give get make know want need explain find help thanks thank hi
hello hey ok okay yes much many
""".split())


@dataclass(frozen=True)
class _Leak:
    kind: LeakKind
    name: str
    span: tuple[int, int] | None  # None: detected, but nothing in the answer can be cut out


class OutputChecker:
    """Checks a generated answer before it is sent: leaks make it unsafe; relevance is advisory."""

    def __init__(self, protected_phrases: Sequence[str] = (), extra_secret_patterns: Sequence[str] = ()) -> None:
        phrases = [" ".join(p.split()) for p in protected_phrases]
        phrases = [p for p in phrases if len(p) >= MIN_PROTECTED_CHARS]
        self._protected = [re.compile(r"\s+".join(map(re.escape, p.split())), re.IGNORECASE) for p in phrases]
        # Letters and digits only: still matches when the model spaces out or zero-width-splits the text.
        self._protected_squashed = [s for s in (_squash(p) for p in phrases) if len(s) >= MIN_PROTECTED_CHARS // 2]
        extra = tuple(_p(f"custom_{i}", _SECRET, pattern) for i, pattern in enumerate(extra_secret_patterns))
        self._patterns = _LEAK_PATTERNS + extra

    def check(self, answer: str, question: str) -> OutputVerdict:
        answer = answer[:MAX_CHARS]
        question = question[:MAX_CHARS]
        leaks = self._leaks(answer)
        relevance, relevant = _relevance(answer, question)
        if not leaks:
            return OutputVerdict(safe=True, relevant=relevant, relevance=relevance,
                                 reason="" if relevant else "answer shares no content word with the question")
        kinds = {leak.kind for leak in leaks}
        kind = next(k for k in (LeakKind.SYSTEM_PROMPT, LeakKind.SECRET, LeakKind.CONFIG) if k in kinds)
        names = sorted({f"{leak.kind.value}:{leak.name}" for leak in leaks})
        repairable = all(leak.span is not None for leak in leaks)
        return OutputVerdict(
            safe=False,
            leak=kind,
            relevant=relevant,
            relevance=relevance,
            reason="leak: " + ", ".join(names),
            redacted_answer=_redact(answer, [leak.span for leak in leaks if leak.span]) if repairable else None,
        )

    def _leaks(self, answer: str) -> list[_Leak]:
        leaks: list[_Leak] = []
        for phrase in self._protected:
            leaks.extend(_Leak(LeakKind.SYSTEM_PROMPT, "protected_phrase", m.span()) for m in phrase.finditer(answer))
        if self._protected_squashed and not leaks:
            hidden = [_squash(answer)] + [_squash(d) for d in decode_segments(answer)]
            if any(p in h for p in self._protected_squashed for h in hidden):
                leaks.append(_Leak(LeakKind.SYSTEM_PROMPT, "protected_phrase_obfuscated", None))
        if _PROMPT_MARKER.search(answer):
            leaks.append(_Leak(LeakKind.SYSTEM_PROMPT, "prompt_disclosure", None))
        for pattern in self._patterns:
            for m in pattern.regex.finditer(answer):
                if pattern.accept is None or pattern.accept(m):
                    leaks.append(_Leak(pattern.kind, pattern.name, m.span(pattern.group)))
        env_lines = list(_ENV_LINE.finditer(answer))
        if len(env_lines) >= _MIN_ENV_LINES:
            leaks.extend(_Leak(LeakKind.CONFIG, "env_dump", m.span("s")) for m in env_lines)
        return leaks


def _redact(text: str, spans: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, pos = [], 0
    for start, end in merged:
        out += [text[pos:start], REDACTED]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _squash(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def _stem(word: str) -> str:
    if word.isdigit():
        return word
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:5]  # prefix stemming: "rotated"/"rotation" -> "rotat"


def _content_words(text: str) -> set[str]:
    words = _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())
    return {_stem(w) for w in words if w.isdigit() or (len(w) > 2 and w not in _STOPWORDS)}


def _relevance(answer: str, question: str) -> tuple[float, bool]:
    asked = _content_words(question)
    if not asked:
        return 1.0, True
    shared = asked & _content_words(answer)
    score = round(len(shared) / len(asked), 4)
    if shared or len(answer.strip()) <= _IRRELEVANT_MIN_CHARS or _REFUSAL.search(answer):
        return score, True
    return score, False
