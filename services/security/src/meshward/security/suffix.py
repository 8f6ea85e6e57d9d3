"""The adversarial-suffix layer: optimised gibberish appended to (or planted in) a request.

Suffixes found by gradient search over a model's vocabulary read like word pieces glued to punctuation:
``describing.\\ + similarlyNow`` or ``giving**ONE please? revert``. Ordinary text, including what users paste
(IDs, hashes, UUIDs, paths, URLs, code and log lines) has a regular shape. Each whitespace token of the text
is classed as *regular* (a word with ordinary punctuation around it, a number, an identifier-like run) or
*irregular* (letters glued to stray symbols, a case switch inside a word, a lone symbol); the score of the
text is the highest share of irregular tokens in any window of :data:`WINDOW` consecutive tokens of prose.
Lines that look like code or logs are not prose and are skipped: their shape is their own.
"""
from __future__ import annotations

import re
import unicodedata

from meshward.contracts import DecidingLayer, ThreatCategory

from .decision import Finding
from .normalize import _CLEAN_TABLE, MAX_INPUT_CHARS  # the same invisible characters removed as everywhere

__all__ = ["THRESHOLD", "WINDOW", "SuffixLayer", "suffix_score"]

WINDOW = 16  # tokens
THRESHOLD = 0.25  # share of irregular tokens in a window that blocks (calibrated on benign text, see the tests)
_MIN_IRREGULAR = 4

_OPEN = "([{\"'`*_~<«“‘¿¡#"
_CLOSE = ")]}\"'`.,;:!?*_~>»”’…%"
_WORD = re.compile(r"[^\W\d_]+(?:['’\-][^\W\d_]+)*")  # letters, with inner apostrophes/hyphens, any script
_CASE_OK = re.compile(r"[^\W\d_][^\W\d_A-Z]*|[A-Z]+s?|[A-Z][a-z]+(?:[A-Z][a-z]+){0,2}")  # word, WORD, Title, McDonald
_NUMBER = re.compile(r"[-+]?[$€£]?\d[\d,.:/x×\-]*(?:%|[a-zA-Z]{1,3})?")  # 42, 3.5, 10:30, 2024-01-02, 5GB, 3rd
# Identifiers people paste: hashes, UUIDs, tokens, paths, URLs, e-mails, versions, snake/kebab/dotted names.
_IDENT = re.compile(r"[\w.\-/\\:@=+~#?&%]{2,}")
_MARKUP = re.compile(r"!?\[[^\]]{0,80}\]\([^)\s]{1,200}\)[.,;:!?]?|<\w+(?:\s[^>]*)?/?>|</\w+>")  # links, tags
_CALL = re.compile(r"[\"'`]?[A-Za-z_][\w.$]*\([\w.,'\"=\-: ]*\)[\"'`]?[.,;:]?")  # range(10), "f.length()", Main.java:17
_MORSE = re.compile(r"[.\-/|]+")
# A line of code or log: its shape is its own. Judged by how it starts and ends, not by symbols inside it, so
# that a request with a suffix glued on is still prose.
_CODE_LINE = re.compile(
    r"^\s*(?:[$#>]\s|def |class |import |from \w+ import|return\b|if \(|for \(|while \(|const |let |"
    r"var |function\b|public |private |SELECT |INSERT |UPDATE |[{}\]]|//|/\*|\*/|--\s|@\w+|\w+\s*=\s*[\w\[{(\"'])|"
    # a shell script's lines: the shebang, an assignment from a substitution or a quote, a command and its flag
    r"^\s*(?:#!|[A-Za-z_]\w*=[$\"'`(]|[a-z][\w.+-]*\s+-{1,2}[A-Za-z])|"
    r"\{\s*$|^\s*(?:\d{4}-\d{2}-\d{2}|\[?\d{2}:\d{2}:\d{2}|\[?(?:INFO|WARN(?:ING)?|ERROR|DEBUG|TRACE|FATAL)\b|"
    r"at [\w.$]+\(|File \"|Traceback|[\w-]+\[\d+\]:|kernel:|[|+]-)")


_INDENTED = re.compile(r"\s{4,}\S")


def _regular(token: str) -> bool:
    if not token.isascii() and not any(c.isascii() and c.isalnum() for c in token):
        return True  # a script of its own (CJK, Braille...) or emoji: not the shape of a vocabulary search
    if _MORSE.fullmatch(token) or _MARKUP.fullmatch(token) or _CALL.fullmatch(token):
        return True
    core = token.lstrip(_OPEN).rstrip(_CLOSE)
    if not any(c.isalnum() for c in core):  # "->", ":)", "==", "!!": a short run of symbols stands alone in prose
        return len(token) <= 3
    if _WORD.fullmatch(core):
        return all(_CASE_OK.fullmatch(part) or not part.isascii() for part in re.split(r"['’\-]", core))
    if _NUMBER.fullmatch(core):
        return True
    # An identifier has a shape: digits or inner separators, no case flip glued to symbols ("Now.](").
    return bool(_IDENT.fullmatch(core)) and (any(c.isdigit() for c in core) or any(c in "._-/:@" for c in core))


def suffix_score(text: str) -> tuple[float, str]:
    """(highest share of irregular tokens in a window of prose, that window), (0.0, "") for short text."""
    best, where = 0.0, ""
    tokens: list[str] = []
    fenced = False
    # Lines first: the clean table turns line breaks into spaces, and a code or log line is judged as a line.
    lines = [raw.translate(_CLEAN_TABLE) for raw in unicodedata.normalize("NFKC", text[:MAX_INPUT_CHARS]).splitlines()]
    indented = [bool(_INDENTED.match(line)) for line in lines]
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        # An indented line is code when it is part of an indented block; a lone one is read as prose.
        in_block = indented[i] and ((i > 0 and indented[i - 1]) or (i + 1 < len(lines) and indented[i + 1]))
        if fenced or in_block or _CODE_LINE.search(line):
            continue
        tokens.extend(line.split())
    if len(tokens) < _MIN_IRREGULAR:
        return 0.0, ""
    flags = [not _regular(t) for t in tokens]
    width = min(WINDOW, len(tokens))
    running = sum(flags[:width])
    for start in range(len(tokens) - width + 1):
        if start:
            running += flags[start + width - 1] - flags[start - 1]
        if running >= _MIN_IRREGULAR and running / width > best:
            best, where = running / width, " ".join(tokens[start:start + width])
    return best, where


class SuffixLayer:
    name: DecidingLayer = DecidingLayer.SUFFIX

    def __init__(self, threshold: float = THRESHOLD) -> None:
        self.threshold = threshold

    async def evaluate(self, text: str) -> Finding | None:
        score, window = suffix_score(text)
        if score == 0.0:
            return None
        blocking = score >= self.threshold
        return Finding(ThreatCategory.SECURITY_BYPASS if blocking else None, score, self.name,
                       f"irregular-token share {score:.2f} in {window[:80]!r}", blocking=blocking)
