"""Scope classifier: is a question in scope, and which intent is it?

Signals, combined per question:

* **embedding similarity** (all-MiniLM-L6-v2): mean of the top-k cosine similarities to each intent's
  examples, against the same for the scope's out-of-scope examples;
* **keyword / regex hits** per intent, from the scope file, which add a small capped bonus and lower the
  similarity bar (the scope's ``calculation`` keywords and patterns are how arithmetic is recognised here: the
  calculator in the tools service owns reading it);
* **attachments**: with ``has_attachments`` and document-ish wording the answer is ``document``.

Confidences come from a softmax (scope temperature) over the intent scores and the out-of-scope similarity.
"""
from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from meshward.contracts import OUT_OF_SCOPE, IntentResult, IntentScore, ModelInfo

if TYPE_CHECKING:
    from meshward.classifier import OnnxTextClassifier
    from meshward.embedding import MiniLMEncoder

from .scope import Scope

__all__ = ["FineTunedScopeClassifier", "ScopeClassifier", "model_dir", "scope_fingerprint"]

# Only this much of a question is analysed; the encoder sees at most 256 tokens (~1-1.5k chars) anyway.
_MAX_ANALYSED_CHARS = 4000
_RUNNER_UPS = 3


def _keyword_regex(keyword: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in keyword.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _IntentIndex:
    name: str
    start: int  # rows [start, stop) of the example matrix
    stop: int
    matchers: tuple[re.Pattern[str], ...]
    weight: float


class ScopeClassifier:
    """Classifies questions against a :class:`Scope`; embeds the scope's examples once at construction."""

    def __init__(self, scope: Scope, encoder: MiniLMEncoder, *, attachment_intent: str = "document") -> None:
        self.scope = scope
        self.encoder = encoder
        self.thresholds = scope.thresholds
        self.attachment_intent = attachment_intent if attachment_intent in scope.intents else None

        texts: list[str] = []
        index: list[_IntentIndex] = []
        for name, spec in scope.intents.items():
            start = len(texts)
            texts.extend(spec.examples)
            matchers = tuple(_keyword_regex(k) for k in spec.keywords) + tuple(
                re.compile(p, re.IGNORECASE) for p in spec.patterns)
            index.append(_IntentIndex(name, start, len(texts), matchers, spec.weight))
        self._index = tuple(index)
        self._names = tuple(i.name for i in index)
        n_intent_examples = len(texts)
        texts.extend(scope.out_of_scope_examples)
        embeddings = encoder.encode(texts)
        self._examples = embeddings[:n_intent_examples]
        self._oos_examples = embeddings[n_intent_examples:]

    @property
    def intents(self) -> tuple[str, ...]:
        return self._names

    # ------------------------------------------------------------------ signals
    def _top_k_mean(self, sims: np.ndarray) -> float:
        k = min(self.thresholds.top_k, sims.shape[0])
        return float(np.partition(sims, sims.shape[0] - k)[-k:].mean())

    def _keyword_hits(self, text: str) -> dict[str, int]:
        return {i.name: sum(1 for m in i.matchers if m.search(text)) for i in self._index}

    def _bonus(self, hits: int, weight: float) -> float:
        if hits <= 0:
            return 0.0
        t = self.thresholds
        return min(t.keyword_bonus + 0.03 * (hits - 1), t.keyword_bonus_max) * weight

    def _softmax(self, values: np.ndarray) -> np.ndarray:
        z = (values - values.max()) / self.thresholds.temperature
        e = np.exp(z)
        return e / e.sum()

    # ------------------------------------------------------------------ API
    def classify(self, text: str, has_attachments: bool = False) -> IntentResult:
        """Classify one question. Never raises for odd input: empty text is out of scope."""
        text = " ".join((text or "").split())
        if not text:
            return IntentResult(intent=OUT_OF_SCOPE, in_scope=False, confidence=1.0, runner_ups=[],
                                scope=self.scope.name, method="empty")
        analysed = text[:_MAX_ANALYSED_CHARS]
        t = self.thresholds

        vec = self.encoder.encode([analysed])[0]
        example_sims = self._examples @ vec
        sims = np.array([self._top_k_mean(example_sims[i.start:i.stop]) for i in self._index], dtype=np.float64)
        oos_sim = self._top_k_mean(self._oos_examples @ vec)

        hits = self._keyword_hits(analysed)
        bonus = np.array([self._bonus(hits[i.name], i.weight) for i in self._index], dtype=np.float64)
        doc_hits = hits.get(self.attachment_intent, 0) if self.attachment_intent else 0

        forced: str | None = None
        method = "embedding"
        if has_attachments and self.attachment_intent is not None:
            j = self._names.index(self.attachment_intent)
            bonus[j] += t.keyword_bonus
            if doc_hits:
                forced, method = self.attachment_intent, "attachment"

        scores = np.clip(sims + bonus, -1.0, 1.0)
        probs = self._softmax(np.append(scores, oos_sim))
        intent_probs = probs[:-1]

        intent_mass = max(float(intent_probs.sum()), 1e-12)
        if forced is not None:
            best = self._names.index(forced)
            in_scope = True
            # Rule-based decisions are trusted, but still reported relative to the other intents.
            confidence = max(0.9, float(intent_probs[best]) / intent_mass)
        else:
            best = int(np.argmax(scores))
            needed = t.keyword_min_similarity if bonus[best] > 0 else t.in_scope_min_similarity
            gap = float(scores[best] - (oos_sim + t.out_of_scope_margin))  # > 0: closer to the scope than to the rest
            p_in = 1.0 / (1.0 + np.exp(-np.clip(gap / t.temperature, -50.0, 50.0)))
            in_scope = bool(sims[best] >= needed and gap >= 0.0)
            if in_scope:
                confidence = p_in * float(intent_probs[best]) / intent_mass
                if bonus[best] > 0 and (int(np.argmax(sims)) != best or sims[best] < t.in_scope_min_similarity):
                    method = "keywords"
                elif bonus[best] > 0:
                    method = "embedding+keywords"
            else:
                below = max(0.0, needed - float(sims[best]))  # how far under the similarity floor
                confidence = max(1.0 - p_in, min(1.0, 0.5 + below * 2.5))
                method = "embedding"

        order = [int(i) for i in np.argsort(-intent_probs, kind="stable")]
        runner_ups = [IntentScore(intent=self._names[i], score=_unit(intent_probs[i]))
                      for i in order if not (in_scope and i == best)][:_RUNNER_UPS]
        return IntentResult(
            intent=self._names[best] if in_scope else OUT_OF_SCOPE,
            in_scope=in_scope,
            confidence=_unit(confidence),
            runner_ups=runner_ups,
            scope=self.scope.name,
            method=method,
        )


def _unit(x: float) -> float:
    return float(min(1.0, max(0.0, round(float(x), 4))))


# ---------------------------------------------------------------------------------------------------------------
# The fine-tuned classifier (ONNX): the main signal since the classifiers issue.

MODEL_NAME = "intent"
ENV_MODEL_DIR = "MESHWARD_INTENT_MODEL_DIR"
ENV_MODEL_VERSION = "MESHWARD_INTENT_MODEL_VERSION"
# What the model reads: the question with whitespace collapsed, cut at _MAX_ANALYSED_CHARS. Bump the version
# with any change to that; training records it in the card and keys models by it.
PREPROCESSING_NAME, PREPROCESSING_VERSION = "intent-text", 1


def scope_fingerprint(scope: Scope) -> str:
    """Identity of a scope's content: the card of a model trained for it records this (the scope is training data)."""
    from meshward.classifier import fingerprint

    return fingerprint([scope.model_dump_json()])


def model_dir(scope: Scope, path: str | Path | None = None, version: str | None = None) -> Path:
    """The built model the service loads for ``scope``: ``path``, else ``$MESHWARD_INTENT_MODEL_DIR``, else the
    build ``version`` (``$MESHWARD_INTENT_MODEL_VERSION``), else the newest build trained for this scope's
    content; its preprocessing must be this module's. Raises ModelNotBuiltError naming the fix."""
    from meshward.classifier import Preprocessing, resolve_model

    path = path or os.environ.get(ENV_MODEL_DIR) or None
    version = version or os.environ.get(ENV_MODEL_VERSION) or None
    select = None if path or version else {"scope_fingerprint": scope_fingerprint(scope)}
    return resolve_model(MODEL_NAME, Preprocessing(PREPROCESSING_NAME, PREPROCESSING_VERSION), path=path,
                         version=version, select=select,
                         what=f"for scope {scope.name!r} as its file reads now (fingerprint {scope_fingerprint(scope)}; "
                              "with the same MESHWARD_INTENT_SCOPE_FILE)")


class FineTunedScopeClassifier:
    """Classifies questions with the MiniLM model fine-tuned on a scope (``meshward train intent``).

    The model gives calibrated probabilities over the scope's intents plus out_of_scope; a question is in scope
    when ``1 - p(out_of_scope)`` reaches the threshold calibrated on held-out data (in the model card), and its
    intent is then the most likely one. One fast path from the rule-based classifier stays, because it is exact
    where it fires: with ``has_attachments``, document wording selects ``document``. ``method`` says which decided.
    (Arithmetic has no fast path of its own: the model decides ``calculation``, and the tools service's
    calculator, which owns reading arithmetic, says when a question holds none.)
    """

    def __init__(self, scope: Scope, clf: OnnxTextClassifier, *, threshold: float | None = None,
                 attachment_intent: str = "document") -> None:
        expected = (*scope.intents, OUT_OF_SCOPE)
        if tuple(clf.labels) != expected:
            raise ValueError(f"the intent model in {clf.model_dir} was trained for labels {list(clf.labels)}, but scope "
                             f"{scope.name!r} has {list(expected)}: run `meshward train intent` for this scope file")
        self.scope = scope
        self.clf = clf
        self.threshold = float(threshold if threshold is not None else clf.card["operating"]["threshold"])
        self._names = tuple(scope.intents)
        self._oos = len(self._names)
        self.attachment_intent = attachment_intent if attachment_intent in scope.intents else None
        doc = scope.intents.get(attachment_intent)
        self._doc_matchers = tuple(_keyword_regex(k) for k in doc.keywords) + tuple(
            re.compile(p, re.IGNORECASE) for p in doc.patterns) if doc else ()

    @classmethod
    def load(cls, scope: Scope, path: str | Path | None = None, *, version: str | None = None,
             device: str | None = None, threads: int | None = None) -> FineTunedScopeClassifier:
        """The model :func:`model_dir` finds for ``scope`` (by path, by version, else the newest build for it).

        Raises :class:`meshward.classifier.ModelNotBuiltError` naming the fix when none fits.
        """
        from meshward.classifier import OnnxTextClassifier

        return cls(scope, OnnxTextClassifier(model_dir(scope, path, version), device=device, threads=threads))

    @property
    def intents(self) -> tuple[str, ...]:
        return self._names

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(name=self.clf.name, version=self.clf.version, provider=self.clf.provider)

    def classify(self, text: str, has_attachments: bool = False) -> IntentResult:
        return self.classify_many([(text, has_attachments)])[0]

    def classify_many(self, items: Sequence[tuple[str, bool]]) -> list[IntentResult]:
        """One model call for a whole micro-batch; never raises for odd input (empty text is out of scope)."""
        texts = [" ".join((text or "").split())[:_MAX_ANALYSED_CHARS] for text, _ in items]
        live = [i for i, t in enumerate(texts) if t]
        probs = np.zeros((len(texts), self._oos + 1), dtype=np.float32)
        if live:
            probs[live] = self.clf.predict_proba([texts[i] for i in live])
        results = []
        for i, ((_, has_attachments), text) in enumerate(zip(items, texts, strict=True)):
            if not text:
                results.append(IntentResult(intent=OUT_OF_SCOPE, in_scope=False, confidence=1.0, runner_ups=[],
                                            scope=self.scope.name, method="empty"))
            else:
                results.append(self._decide(text, probs[i], has_attachments))
        return results

    def _decide(self, text: str, p: np.ndarray, has_attachments: bool) -> IntentResult:
        intent_p = p[:self._oos]
        p_in = float(1.0 - p[self._oos])
        best = int(np.argmax(intent_p))
        in_scope = p_in >= self.threshold
        method = "classifier"
        confidence = float(intent_p[best]) if in_scope else float(p[self._oos])
        label = self._names[best] if in_scope else OUT_OF_SCOPE
        relative = intent_p / max(float(intent_p.sum()), 1e-12)

        forced = None
        if (self.attachment_intent and has_attachments and label in (OUT_OF_SCOPE, self.attachment_intent)
                and any(m.search(text) for m in self._doc_matchers)):
            forced, method = self.attachment_intent, "classifier+attachment"
        if forced is not None and forced != label:
            best = self._names.index(forced)
            label, in_scope = forced, True
            confidence = max(0.9, float(relative[best]))
        order = [int(j) for j in np.argsort(-intent_p, kind="stable")]
        runner_ups = [IntentScore(intent=self._names[j], score=_unit(intent_p[j]))
                      for j in order if not (in_scope and j == best)][:_RUNNER_UPS]
        return IntentResult(intent=label, in_scope=in_scope, confidence=_unit(confidence), runner_ups=runner_ups,
                            scope=self.scope.name, method=method)
