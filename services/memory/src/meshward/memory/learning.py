"""Which violations become known threats (the learning loop of seed 000).

Benign traffic can never create a threat, because of where threats come from and
what is checked before one is stored:
- only SecurityViolation events are learned, and only the security service publishes
  them, when it blocks a question (in Kubernetes, NATS permissions let no other
  service publish on meshward.v1.events.violation);
- only confident blocks by the rules or the classifier are learned (score >= the
  minimum); a block by the known-threats layer itself is never learned again, so a
  wrong threat cannot multiply;
- a violation too close to an in-scope example is logged but not learned;
- nor is one mostly in a script the encoder was not trained on: its neighbours there are ordinary questions in the
  same script (meshward.embedding.scripts);
- an operator retracts a learned threat with DELETE /v1/threats/{id}.
"""
from __future__ import annotations

from dataclasses import dataclass

from meshward.contracts import DecidingLayer, SecurityViolation
from meshward.embedding import in_trained_script

LEARNABLE_LAYERS = frozenset({DecidingLayer.RULES, DecidingLayer.CLASSIFIER})


@dataclass(frozen=True)
class LearnVerdict:
    learn: bool
    reason: str


class LearningPolicy:
    def __init__(self, min_score: float = 0.9, max_scope_similarity: float = 0.9):
        self.min_score = min_score
        self.max_scope_similarity = max_scope_similarity

    async def should_learn(self, event: SecurityViolation, semantic) -> LearnVerdict:
        if event.layer not in LEARNABLE_LAYERS:
            return LearnVerdict(False, f"decided by the {event.layer} layer; only rules and classifier blocks are learned")
        if event.score < self.min_score:
            return LearnVerdict(False, f"score {event.score:.2f} below the learning minimum {self.min_score:.2f}")
        text = event.reading or event.text
        if not text.strip():
            return LearnVerdict(False, "empty text")
        if not in_trained_script(text):
            return LearnVerdict(False, "mostly in a script the encoder was not trained on: similarity there says nothing")
        near = await semantic.similar_scope_examples(text, k=1)
        if near and near[0].similarity >= self.max_scope_similarity:
            return LearnVerdict(False, f"too close ({near[0].similarity:.2f}) to the in-scope example {near[0].text!r}")
        return LearnVerdict(True, "confident block")
