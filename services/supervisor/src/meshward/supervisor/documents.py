"""Extractive answers from attached documents (the fast tier has no LLM): a summary is the
document's leading sentences; any other question gets the sentences that share the most
content words with it, quoted in document order."""
from __future__ import annotations

import re

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_WORD = re.compile(r"[a-z0-9]{3,}")
STOP_WORDS = _STOP = frozenset(
    "the and for are was were with that this what which who whom whose does did from have has had about into over "
    "your you yours they them their there here then than when where why how can could would should will shall may "
    "might must not any all some tell say says said document pdf file attached attachment page pages please".split()
)
_PAGE_MARK = re.compile(r"^-+\s*page\s+\d+\s*-+$", re.IGNORECASE | re.MULTILINE)
_SUMMARY = re.compile(r"\b(summar\w*|overview|gist|tl;?dr|what(?:'s| is) (?:this|it|the \w+) about)\b", re.IGNORECASE)
MAX_QUOTE_CHARS = 1_200


def content_words(text: str, stop: frozenset[str] = _STOP) -> set[str]:
    """Lower-cased words of 3+ characters, plural -s dropped, stop words left out."""
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if w not in stop}


_words = content_words


def _sentences(text: str) -> list[str]:
    text = _PAGE_MARK.sub("\n\n", text)
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 2]


def _clip(parts: list[str]) -> str:
    out, size = [], 0
    for p in parts:
        if size + len(p) > MAX_QUOTE_CHARS:
            break
        out.append(p)
        size += len(p) + 1
    return " ".join(out) or (parts[0][:MAX_QUOTE_CHARS] if parts else "")


def answer_from_document(question: str, texts: list[str], names: list[str]) -> str:
    name = names[0] if names else "the document"
    sentences = [s for t in texts for s in _sentences(t)]
    if not sentences:
        return f"I couldn't find any text in {name} (it may be scanned images only)."
    if _SUMMARY.search(question) or not _words(question):
        return f"{name} begins: {_clip(sentences[:5])}"
    wanted = _words(question)
    scored = sorted(((len(wanted & _words(s)), i) for i, s in enumerate(sentences)), reverse=True)
    best = sorted(i for score, i in scored[:3] if score > 0)
    if not best:
        return f"I found nothing about that in {name}. It begins: {_clip(sentences[:2])}"
    return f"From {name}: {_clip([sentences[i] for i in best])}"
