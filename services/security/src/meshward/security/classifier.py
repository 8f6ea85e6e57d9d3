"""The fine-tuned security classifier at run time, and the decision layer around it.

A question is scored through *views*, one per piece of content :func:`readings` finds in it (the message
itself, text hidden in Unicode tag characters, each decoded base64/hex run). A piece has several spellings
(plain, homoglyph-folded, de-leeted, spaced-out letters joined); its view is the *canonical reading*, the
spelling with the fewest unknown tokens, then the fewest word pieces: the one the tokenizer, like a human or
an LLM, reads as words
("1gn0r3 4ll rul3s" -> "ignore all rules", "Асt lіkе" in Cyrillic look-alikes -> "act like", while
"sha256" or "ipv4" stay as written). The obfuscated spellings are never scored: read as a soup of single
characters they made benign text look suspicious, and every attack they carry is in the canonical reading
too (folding and de-leeting only respell the obfuscated words). Each view is cut into overlapping windows of
at most 128 tokens when long (attacks hidden deep inside a document). The question's attack score is the
highest ``1 - p(benign)`` over its views and windows; its category is that row's most likely threat.
"""
from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from meshward.bus.context import current_deadline
from meshward.classifier import MicroBatcher, OnnxTextClassifier, Preprocessing, WordPieces, resolve_model, softmax
from meshward.contracts import DecidingLayer, ModelInfo, ThreatCategory

from .chargram import ENCODER_FLOOR, MIN_LATIN_WORDS, CharGramModel, GramScore, latin_view, reads_foreign
from .decision import HARM_MIN_SHARE, HARM_SURE_SCORE, Finding
from .normalize import readings

__all__ = [
    "ENV_MODEL_DIR",
    "ENV_MODEL_VERSION",
    "MAX_VIEWS",
    "MODEL_NAME",
    "PREPROCESSING",
    "ClassifierLayer",
    "SecurityClassifier",
    "ThreatScore",
    "canonical_ids",
    "model_dir",
    "score_texts",
    "views",
]

MODEL_NAME = "security"
ENV_MODEL_DIR = "MESHWARD_SECURITY_MODEL_DIR"
ENV_MODEL_VERSION = "MESHWARD_SECURITY_MODEL_VERSION"
# What the model reads: the canonical views of normalize.readings, windowed as below. Bump the version with any
# change to them that changes what the model sees; training records it in the card and keys models by it.
PREPROCESSING = Preprocessing("security-views", 1)
BENIGN = "benign"
MAX_VIEWS = 6
WINDOW_TOKENS = 128
INLINE_CHARS = 1_000  # longer texts are sorted into foreign or not on a worker thread
MAX_WINDOWS = 8  # per view: a 20k-character question is covered by first/last and evenly spaced windows


def canonical_ids(text: str, pieces: WordPieces) -> list[tuple[str, list[int]]]:
    """(view, its word-piece ids) per piece of content: the spelling with the fewest unknown tokens, then the
    fewest pieces, the first on a tie. (A word with a character outside the vocabulary is one ``[UNK]``, which
    would otherwise make a look-alike soup the shortest spelling.)"""
    out: list[tuple[str, list[int]]] = []
    for spellings in readings(text)[:MAX_VIEWS]:
        encoded = [(spelling, pieces.encode(spelling)) for spelling in spellings]
        out.append(min(encoded, key=lambda e: (e[1].count(pieces.unk_id), len(e[1]))))
    return out or [("", [])]


def views(text: str, pieces: WordPieces) -> list[str]:
    """The texts the classifier reads for one question (at least one, possibly empty)."""
    return [view for view, _ in canonical_ids(text, pieces)]


def score_texts(clf: OnnxTextClassifier, texts: Sequence[str]) -> np.ndarray:
    """Calibrated probabilities per question, (len(texts), labels): the row of its most suspicious view/window."""
    benign = clf.labels.index(BENIGN)
    rows: list[list[int]] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        for _, ids in canonical_ids(text, clf.pieces):
            for window in clf.windows(ids, WINDOW_TOKENS, MAX_WINDOWS):
                rows.append(window)
                owner.append(i)
    probs = softmax(clf.logits_from_ids(rows, owner), clf.temperature)
    attack = 1.0 - probs[:, benign]
    out = np.zeros((len(texts), len(clf.labels)), dtype=np.float32)
    best = np.full(len(texts), -1.0)
    for r, i in enumerate(owner):
        if attack[r] > best[i]:
            best[i] = attack[r]
            out[i] = probs[r]
    return out


def model_dir(path: str | Path | None = None, version: str | None = None) -> Path:
    """The built model the service loads: ``path``, else ``$MESHWARD_SECURITY_MODEL_DIR``, else the build
    ``version`` (``$MESHWARD_SECURITY_MODEL_VERSION``), else the newest build; its preprocessing must be
    :data:`PREPROCESSING`. Raises :class:`meshward.classifier.ModelNotBuiltError` naming the fix."""
    return resolve_model(MODEL_NAME, PREPROCESSING, path=path or os.environ.get(ENV_MODEL_DIR) or None,
                         version=version or os.environ.get(ENV_MODEL_VERSION) or None)


@dataclass(frozen=True, slots=True)
class ThreatScore:
    score: float  # calibrated probability that the question is an attack (1 - p(benign))
    category: ThreatCategory  # the most likely threat category (meaningful when score is high)
    blocked: bool  # score >= the model's operating threshold
    share: float = 1.0  # the category's share of the threat probability (p(category) / score)


class SecurityClassifier:
    """The built security model; ``classify_many`` is what a micro-batch runs."""

    def __init__(self, clf: OnnxTextClassifier, threshold: float | None = None) -> None:
        if BENIGN not in clf.labels:
            raise ValueError(f"{clf.model_dir}: not a security model (labels {clf.labels})")
        self.clf = clf
        self.threshold = float(threshold if threshold is not None else clf.card["operating"]["threshold"])
        self._benign = clf.labels.index(BENIGN)
        self._threats = [i for i, label in enumerate(clf.labels) if label != BENIGN]

    @classmethod
    def load(cls, path: str | Path | None = None, *, version: str | None = None, device: str | None = None,
             threshold: float | None = None, threads: int | None = None) -> SecurityClassifier:
        """The model :func:`model_dir` finds (by path, by version, else the newest build).

        Raises :class:`meshward.classifier.ModelNotBuiltError` naming the fix when none fits.
        """
        return cls(OnnxTextClassifier(model_dir(path, version), device=device, threads=threads), threshold)

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(name=self.clf.name, version=self.clf.version, provider=self.clf.provider)

    def classify_many(self, texts: Sequence[str]) -> list[ThreatScore]:
        probs = score_texts(self.clf, texts)
        out = []
        for row in probs:
            score = float(1.0 - row[self._benign])
            top = max(self._threats, key=lambda j: row[j])
            share = float(row[top]) / score if score > 0 else 1.0
            out.append(ThreatScore(round(score, 6), ThreatCategory(self.clf.labels[top]), score >= self.threshold,
                                   round(share, 6)))
        return out

    def classify(self, text: str) -> ThreatScore:
        return self.classify_many([text])[0]


class ClassifierLayer:
    """The classifier as a security Layer: blocks at the calibrated threshold, reports its score otherwise.

    Requests are micro-batched: concurrent questions share one inference on a worker thread, so the event
    loop never waits on the model; a request whose deadline (from the bus context) passes while queued fails
    with :class:`meshward.classifier.DeadlineExceeded`. A text foreign to the encoder (another script, a Latin-script
    language it was not trained on) is the n-gram model's to judge when one is loaded (:mod:`.chargram`); the encoder,
    which reads such text as a soup of characters or fragments, judges its English-looking sentences when they hold
    ``latin_min_words`` words, and the whole text only at ``encoder_floor`` (1: never).

    A harm verdict under ``harm_sure_score``, with ``harm_min_share`` of its threat probability or more on harm, is
    deferrable: it stands only for a question in scope (edgy but legitimate questions score in that band; one the
    assistant would not answer anyway needs no accusation, and must not teach memory a threat).
    """

    name: DecidingLayer = DecidingLayer.CLASSIFIER
    waits = True  # the model runs on the batcher's worker thread

    def __init__(self, model: SecurityClassifier, *, max_batch_size: int = 32, max_wait_ms: float = 2.0,
                 other_scripts: CharGramModel | None = None, encoder_floor: float = ENCODER_FLOOR,
                 latin_min_words: int = MIN_LATIN_WORDS, harm_sure_score: float = HARM_SURE_SCORE,
                 harm_min_share: float = HARM_MIN_SHARE) -> None:
        self.model = model
        self.harm_sure_score = harm_sure_score
        self.harm_min_share = harm_min_share
        self.other_scripts = other_scripts
        self.encoder_floor = encoder_floor
        self.latin_min_words = latin_min_words
        self.batcher: MicroBatcher[str, ThreatScore] = MicroBatcher(
            model.classify_many, max_batch_size=max_batch_size, max_wait_ms=max_wait_ms, name="security")

    async def evaluate(self, text: str) -> Finding | None:
        version = self.model.clf.version
        # a long text's letters and n-grams take milliseconds: not on the event loop
        gram = (self._foreign(text) if len(text) <= INLINE_CHARS else await asyncio.to_thread(self._foreign, text))
        if gram is None:
            result = await self.batcher.submit(text, deadline=current_deadline())
            return self._finding(result, self.model.threshold, f"classifier {version}")
        if gram.blocked:
            return self._blocking(gram, f"n-gram classifier {self.other_scripts.version} (foreign text): "
                                        f"{gram.category.value} p={gram.score:.3f} >= {self.other_scripts.threshold:.3f}")
        # (what the encoder reads, the score that blocks it, how the verdict names it)
        readings = [(text, self.encoder_floor, f"classifier {version} (foreign text)")] if self.encoder_floor < 1.0 else []
        latin = latin_view(text, self.latin_min_words)
        if latin:
            readings.append((latin, self.model.threshold, f"classifier {version} on the English-looking sentences"))
        results = await asyncio.gather(*(self.batcher.submit(r, deadline=current_deadline()) for r, _, _ in readings))
        findings = [self._finding(result, threshold, label) for result, (_, threshold, label) in zip(results, readings, strict=True)]
        blocking = [f for f in findings if f.blocking]
        if blocking:
            return max(blocking, key=lambda f: f.score)
        return Finding(None, max([gram.score, *(f.score for f in findings)]), self.name,
                       f"n-gram classifier {self.other_scripts.version} (foreign text): attack p={gram.score:.3f} < "
                       f"{self.other_scripts.threshold:.3f}" + "".join(f"; {f.reason}" for f in findings), blocking=False)

    def _foreign(self, text: str) -> GramScore | None:
        """The n-gram model's score of a text foreign to the encoder; None for the encoder's own."""
        if self.other_scripts is None or not reads_foreign(text):
            return None
        return self.other_scripts.classify(text)

    def _finding(self, result: ThreatScore, threshold: float, label: str) -> Finding:
        if result.score >= threshold:
            return self._blocking(result, f"{label}: {result.category.value} p={result.score:.3f} >= {threshold:.3f}")
        return Finding(None, result.score, self.name, f"{label}: attack p={result.score:.3f} < {threshold:.3f}",
                       blocking=False)

    def _blocking(self, result: ThreatScore | GramScore, reason: str) -> Finding:
        deferrable = (result.category == ThreatCategory.HARMFUL_CONTENT and result.score < self.harm_sure_score
                      and result.share >= self.harm_min_share)
        if deferrable:
            reason += f"; under {self.harm_sure_score:g}, a threat only in scope"
        return Finding(result.category, result.score, self.name, reason, blocking=True, deferrable=deferrable)

    async def close(self) -> None:
        await self.batcher.close()
