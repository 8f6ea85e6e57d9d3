"""Tier 1 memory: keep a conversation's context under a token budget.

:class:`ContextCompressor` measures a summary plus the turns of a thread with a real tokenizer (the
MiniLM word-piece tokenizer in production, via ``count_tokens``) and, once the total passes
``summarize_threshold``, folds every turn but the last ``keep_last`` into the summary. The summary is
written by an LLM callable when one is given, otherwise by :class:`ExtractiveSummarizer`, a
deterministic sentence picker. The result always fits ``max_tokens``.

Token accounting: ``tokens = count(summary) + sum(count(render_turn(turn)))``. Turns are mappings with
``question`` and ``answer`` keys, or objects with those attributes (e.g. ``meshward.contracts.Turn``);
kept turns are returned as given (only a single turn larger than ``max_tokens`` is shortened, as a copy).
"""
from __future__ import annotations

import asyncio
import dataclasses
import heapq
import logging
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ELLIPSIS",
    "SUMMARY_HEADER",
    "SUMMARY_QUESTION",
    "CompressedContext",
    "ContextBudget",
    "ContextCompressor",
    "ExtractiveSummarizer",
    "TurnLike",
    "dedupe_turns",
    "render_turn",
    "truncate_to_tokens",
    "turn_text",
]

log = logging.getLogger(__name__)

TurnLike = Mapping[str, Any] | Any
"""A mapping with ``question``/``answer`` keys, or an object with those attributes."""

CountTokens = Callable[[str], int]
Summarize = Callable[[list[TurnLike]], Awaitable[str]]

SUMMARY_HEADER = "Summary of the earlier conversation:"
SUMMARY_QUESTION = "(summary of the conversation before these turns)"
"""The question of the pseudo-turn that carries the previous summary into an LLM summariser."""
ELLIPSIS = "…"
_UNIT_MAX_TOKENS = 64  # one extracted sentence never takes more than this
_RECENCY_WEIGHT = 0.25  # later units score up to 25% higher
_QUESTION_WEIGHT = 1.15  # questions name the topics of a conversation
_REPEAT_WEIGHT = 0.25  # a sentence said n more times scores (1 + 0.25 ln(1 + n)) times higher
_REDUNDANCY_DECAY = 0.5  # a picked unit halves the weight of its words (SumBasic)

_WORD = re.compile(r"[a-z0-9]+(?:['’_.-][a-z0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for from
further had hadn't has hasn't have haven't having he her here hers herself him himself his how i if in into is
isn't it it's its itself just let's me more most my myself no nor not now of off on once only or other ought our
ours ourselves out over own please same she should shouldn't so some such than that that's the their theirs them
themselves then there there's these they this those through to too under until up very was wasn't we were
weren't what what's when where which while who whom why will with won't would wouldn't you your yours yourself
yourselves also get got like may might must shall s t d ll m re ve y
""".split())


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """Token limits: compress above ``summarize_threshold``; never return more than ``max_tokens``."""

    max_tokens: int = 28_000
    summarize_threshold: int = 20_000
    keep_last: int = 5
    summary_ratio: float = 0.25  # the summary may use this share of summarize_threshold

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if not 1 <= self.summarize_threshold <= self.max_tokens:
            raise ValueError("summarize_threshold must lie in [1, max_tokens]")
        if self.keep_last < 0:
            raise ValueError("keep_last must be >= 0")
        if not 0.0 < self.summary_ratio <= 1.0:
            raise ValueError("summary_ratio must lie in (0, 1]")

    @property
    def summary_tokens(self) -> int:
        return max(1, int(self.summarize_threshold * self.summary_ratio))


@dataclass(frozen=True, slots=True)
class CompressedContext:
    summary: str | None
    turns: list[TurnLike]
    tokens: int
    compressed: bool
    folded: int = 0  # how many turns went into the summary in this call


# ---------------------------------------------------------------------------------------------- helpers
def turn_text(turn: TurnLike) -> tuple[str, str]:
    """``(question, answer)`` of a mapping or attribute-style turn (missing parts read as "")."""
    if isinstance(turn, Mapping):
        question, answer = turn.get("question"), turn.get("answer")
    else:
        question, answer = getattr(turn, "question", None), getattr(turn, "answer", None)
    return ("" if question is None else str(question)), ("" if answer is None else str(answer))


def render_turn(turn: TurnLike) -> str:
    """The text a turn is counted (and meant to be shown to a model) as."""
    question, answer = turn_text(turn)
    return f"Q: {question}\nA: {answer}"


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def dedupe_turns(turns: Sequence[TurnLike], also_seen: Sequence[TurnLike] = ()) -> list[TurnLike]:
    """Drop turns whose question and answer repeat an earlier turn (or one of ``also_seen``), case/punctuation-blind."""
    seen = {tuple(map(_normal, turn_text(t))) for t in also_seen}
    out: list[TurnLike] = []
    for turn in turns:
        key = tuple(map(_normal, turn_text(turn)))
        if key not in seen:
            seen.add(key)
            out.append(turn)
    return out


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: CountTokens) -> str:
    """The longest whitespace-word prefix of ``text`` that fits ``max_tokens`` (with an ellipsis when cut)."""
    if max_tokens <= 0 or not text:
        return ""
    if count_tokens(text) <= max_tokens:
        return text
    words = text.split()
    lo, hi = 0, len(words)  # invariant: words[:lo] + ELLIPSIS fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid]) + ELLIPSIS) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        # Not even one word with the ellipsis: cut the first word by characters.
        word = words[0] if words else text
        lo_c, hi_c = 0, len(word)
        while lo_c < hi_c:
            mid = (lo_c + hi_c + 1) // 2
            if count_tokens(word[:mid]) <= max_tokens:
                lo_c = mid
            else:
                hi_c = mid - 1
        return word[:lo_c]
    return " ".join(words[:lo]) + ELLIPSIS


def _replace_turn(turn: TurnLike, question: str, answer: str) -> TurnLike:
    if isinstance(turn, Mapping):
        return {**turn, "question": question, "answer": answer}
    if hasattr(turn, "model_copy"):  # pydantic
        return turn.model_copy(update={"question": question, "answer": answer})
    if dataclasses.is_dataclass(turn) and not isinstance(turn, type):
        return dataclasses.replace(turn, question=question, answer=answer)
    return {"question": question, "answer": answer}


def _shrink_turn(turn: TurnLike, max_tokens: int, count_tokens: CountTokens) -> TurnLike:
    """A copy of ``turn`` whose rendering fits ``max_tokens``: the answer is cut first, then the question."""
    question, answer = turn_text(turn)
    frame = count_tokens(render_turn({"question": "", "answer": ""}))
    question_tokens = count_tokens(question)
    room_for_answer = max_tokens - frame - question_tokens
    if room_for_answer > 0:
        new_answer = truncate_to_tokens(answer, room_for_answer, count_tokens)
        new_question = question
    else:
        new_answer = ""
        new_question = truncate_to_tokens(question, max(0, max_tokens - frame), count_tokens)
    shrunk = _replace_turn(turn, new_question, new_answer)
    # Word-piece counts are not exactly additive across the frame; trim until the rendering fits.
    while count_tokens(render_turn(shrunk)) > max_tokens and (new_answer or new_question):
        if new_answer:
            new_answer = truncate_to_tokens(new_answer, max(0, count_tokens(new_answer) - 1), count_tokens)
        else:
            new_question = truncate_to_tokens(new_question, max(0, count_tokens(new_question) - 1), count_tokens)
        shrunk = _replace_turn(turn, new_question, new_answer)
    return shrunk


# ---------------------------------------------------------------------------------------------- extractive
@dataclass(slots=True)
class _Unit:
    position: int
    line: str  # as written into the summary (without the "- " bullet)
    terms: tuple[str, ...]  # content words, with repeats
    distinct: tuple[str, ...]
    bias: float
    tokens: int
    occurrences: int = 1


class ExtractiveSummarizer:
    """Deterministic, model-free summariser: picks the most informative sentences within a token budget.

    Units are the previous summary's lines, each folded turn's question, and the sentences of its
    answer. A word's weight is its frequency over the conversation (repeats included) times a smoothed
    inverse unit frequency; a unit scores the sum of its distinct words' weights over the square root
    of their number, raised for later units, for questions and for repeated sentences. Units are picked
    greedily by score (lazily re-scored: a picked unit halves its words' weights, so near-repeats lose
    out) while they fit the budget, then written in conversation order under :data:`SUMMARY_HEADER`.
    Repeated turns and repeated sentences are written once.
    """

    def __init__(self, count_tokens: CountTokens) -> None:
        self._count = count_tokens

    def summarize(self, turns: Sequence[TurnLike], previous: str | None, max_tokens: int) -> str:
        units = self._units(dedupe_turns(turns), previous)
        if not units or max_tokens <= 0:
            return ""
        header_tokens = self._count(SUMMARY_HEADER)
        budget = max_tokens - header_tokens
        if budget <= 0:
            return truncate_to_tokens(units[-1].line, max_tokens, self._count)
        chosen = self._pick(units, budget)
        if not chosen:  # nothing fits with the header: keep the best single unit, cut to size
            return truncate_to_tokens(units[-1].line, max_tokens, self._count)
        chosen.sort(key=lambda u: u.position)
        text = self._render(chosen)
        while self._count(text) > max_tokens and len(chosen) > 1:  # bullets/newlines are not free
            chosen.remove(min(chosen, key=lambda u: (u.bias, u.position)))
            text = self._render(chosen)
        return text if self._count(text) <= max_tokens else truncate_to_tokens(text, max_tokens, self._count)

    @staticmethod
    def _render(units: Sequence[_Unit]) -> str:
        return "\n".join([SUMMARY_HEADER, *(f"- {u.line}" for u in units)])

    def _units(self, turns: Sequence[TurnLike], previous: str | None) -> list[_Unit]:
        raw: list[tuple[str, float]] = []  # (line, role weight)
        if previous:
            for line in previous.splitlines():
                line = line.strip()
                if not line or line == SUMMARY_HEADER:
                    continue
                if line.startswith("- "):  # a bullet written by this summariser: one unit, as it was
                    raw.append((line[2:].strip(), 1.0))
                else:  # free prose (e.g. an LLM's summary): sentence by sentence
                    raw.extend((sentence, 1.0) for sentence in _sentences(line))
        for turn in turns:
            question, answer = turn_text(turn)
            question = " ".join(question.split())
            if question:
                raw.append((f"User asked: {question}", _QUESTION_WEIGHT))
            raw.extend((f"Answer: {sentence}", 1.0) for sentence in _sentences(answer))
        units: list[_Unit] = []
        seen: dict[str, int] = {}  # normalised text -> index in units
        repeats: Counter[int] = Counter()
        n = len(raw)
        for i, (line, role) in enumerate(raw):
            key = _normal(line.split(": ", 1)[1] if line.startswith(("User asked: ", "Answer: ")) else line)
            if not key:
                continue
            if key in seen:  # said again: written once, but a little more salient
                repeats[seen[key]] += 1
                continue
            terms = tuple(w for w in _WORD.findall(line.lower()) if w not in _STOPWORDS and (len(w) > 1 or w.isdigit()))
            if not terms:
                continue
            line = truncate_to_tokens(line, _UNIT_MAX_TOKENS, self._count)
            recency = 1.0 + _RECENCY_WEIGHT * (i / max(1, n - 1))
            seen[key] = len(units)
            units.append(_Unit(position=i, line=line, terms=terms, distinct=tuple(dict.fromkeys(terms)),
                               bias=role * recency / math.sqrt(len(set(terms))),
                               tokens=self._count(f"- {line}") + 1))
        for idx, extra in repeats.items():
            units[idx].occurrences += extra
            units[idx].bias *= 1.0 + _REPEAT_WEIGHT * math.log1p(extra)
        return units

    def _pick(self, units: list[_Unit], budget: int) -> list[_Unit]:
        frequency: Counter[str] = Counter()
        document_frequency: Counter[str] = Counter()
        for unit in units:
            for term in unit.terms:  # repeats count towards how often a word was used
                frequency[term] += unit.occurrences
            document_frequency.update(unit.distinct)
        n = len(units)
        weight = {t: frequency[t] * math.log(1.0 + n / document_frequency[t]) for t in frequency}

        def score(unit: _Unit) -> float:  # bias already holds 1/sqrt(number of distinct words)
            return unit.bias * sum([weight[t] for t in unit.distinct])

        # Lazy greedy: scores only fall as weights decay, so a popped unit whose fresh score still tops
        # the heap is the true best.
        heap = [(-score(u), u.position, idx) for idx, u in enumerate(units)]
        heapq.heapify(heap)
        chosen: list[_Unit] = []
        left = budget
        while heap and left > 0:
            _, position, idx = heapq.heappop(heap)
            unit = units[idx]
            if unit.tokens > left:
                continue
            fresh = score(unit)
            if heap and fresh < -heap[0][0] - 1e-12:  # stale: someone else may be better now
                heapq.heappush(heap, (-fresh, position, idx))
                continue
            chosen.append(unit)
            left -= unit.tokens
            for t in unit.distinct:
                weight[t] *= _REDUNDANCY_DECAY
        return chosen


def _sentences(text: str) -> list[str]:
    parts = (" ".join(p.split()) for p in _SENTENCE_END.split(text or ""))
    return [p for p in parts if p]


# ---------------------------------------------------------------------------------------------- compressor
class ContextCompressor:
    """Folds old turns into a bounded summary once a thread's context passes the threshold.

    ``summarize`` (optional) is an async LLM call: it receives the turns to fold, preceded by a
    pseudo-turn ``{"question": SUMMARY_QUESTION, "answer": previous_summary}`` when there is one, and
    returns the new summary. Its output is cut to the summary budget; when it fails or returns
    nothing, the extractive summariser is used instead.
    """

    def __init__(self, budget: ContextBudget | None = None, count_tokens: CountTokens | None = None,
                 summarize: Summarize | None = None) -> None:
        if count_tokens is None:
            from meshward.embedding import count_tokens as minilm_count_tokens  # noqa: PLC0415 - loads lazily

            count_tokens = minilm_count_tokens
        self.budget = budget or ContextBudget()
        self._count = count_tokens
        self._summarize = summarize
        self._extractive = ExtractiveSummarizer(count_tokens)

    def count(self, turns: Sequence[TurnLike], summary: str | None = None) -> int:
        return (self._count(summary) if summary else 0) + sum(self._count(render_turn(t)) for t in turns)

    def _measure(self, turns: Sequence[TurnLike], summary: str | None) -> tuple[list[int], int]:
        return [self._count(render_turn(t)) for t in turns], (self._count(summary) if summary else 0)

    async def compress(self, turns: Sequence[TurnLike], summary: str | None = None) -> CompressedContext:
        budget = self.budget
        turns = list(turns)
        summary = summary.strip() if summary and summary.strip() else None
        # Tokenising every turn is CPU-bound (hundreds of ms for a long thread): off the event loop.
        turn_tokens, summary_tokens = await asyncio.to_thread(self._measure, turns, summary)
        total = summary_tokens + sum(turn_tokens)
        split = len(turns) - min(budget.keep_last, len(turns))
        if total <= budget.summarize_threshold or (split == 0 and total <= budget.max_tokens):
            # Under the threshold, or nothing old enough to fold and within the hard limit: as is.
            # (This makes compress() a fixed point on its own output.)
            return CompressedContext(summary, turns, total, compressed=False)

        old, recent, recent_tokens = turns[:split], turns[split:], turn_tokens[split:]
        # The hard limit: fold more of the recent turns (oldest first), but always keep the last one.
        while len(recent) > 1 and sum(recent_tokens) > budget.max_tokens:
            old.append(recent.pop(0))
            recent_tokens.pop(0)
        if recent and recent_tokens[0] > budget.max_tokens:
            recent[0] = _shrink_turn(recent[0], budget.max_tokens, self._count)
            recent_tokens[0] = self._count(render_turn(recent[0]))

        room = min(budget.summary_tokens, budget.max_tokens - sum(recent_tokens))
        if old:
            new_summary = await self._fold(dedupe_turns(old, also_seen=recent), summary, room)
        else:
            new_summary = truncate_to_tokens(summary or "", room, self._count)
        if new_summary and self._count(new_summary) > room:
            new_summary = truncate_to_tokens(new_summary, room, self._count)
        new_summary = (new_summary.strip() or None) if new_summary else None
        tokens = (self._count(new_summary) if new_summary else 0) + sum(recent_tokens)
        return CompressedContext(new_summary, recent, tokens, compressed=True, folded=len(old))

    async def _fold(self, old: list[TurnLike], summary: str | None, room: int) -> str:
        if room <= 0:
            return ""
        if self._summarize is not None and (old or summary):
            batch: list[TurnLike] = ([{"question": SUMMARY_QUESTION, "answer": summary}] if summary else []) + old
            try:
                text = await self._summarize(batch)
            except Exception:  # noqa: BLE001 - any failure of the model falls back to extraction
                log.warning("LLM summariser failed; using the extractive summary", exc_info=True)
            else:
                if isinstance(text, str) and text.strip():
                    return truncate_to_tokens(text.strip(), room, self._count)
                log.warning("LLM summariser returned nothing; using the extractive summary")
        # CPU-bound (tokenising every sentence): keep it off the event loop.
        return await asyncio.to_thread(self._extractive.summarize, old, summary, room)
