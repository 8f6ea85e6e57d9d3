"""Compose security layers into one verdict: the first blocking finding decides."""
from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from meshward.contracts import DecidingLayer, ModelInfo, SecurityVerdict, ThreatCategory

from .normalize import normalize
from .rules import RulesLayer

# A classifier's harm verdict under HARM_SURE_SCORE, with at least HARM_MIN_SHARE of its threat probability on harm
# (nothing of an attack on the assistant beside it), waits for scope (README: Security hardening, deferred to scope).
HARM_SURE_SCORE = 0.98
HARM_MIN_SHARE = 0.9


@dataclass(frozen=True)
class Finding:
    category: ThreatCategory | None
    score: float
    layer: DecidingLayer
    reason: str
    blocking: bool
    deferrable: bool = False  # a block that stands only for a question in scope (an unsure harm verdict)


class Layer(Protocol):
    """One check over the question text; None means it has nothing to say.

    A layer whose ``waits`` attribute is true spends its time waiting on something outside the event loop (a
    request over the bus, a model on a worker thread): the decider starts such layers at once.
    """

    name: DecidingLayer

    async def evaluate(self, text: str) -> Finding | None: ...


def waits(layer: Layer) -> bool:
    return bool(getattr(layer, "waits", False))


class RulesLayerAdapter:
    """The regex rules as a Layer: any hit blocks."""

    name: DecidingLayer = DecidingLayer.RULES

    def __init__(self, rules: RulesLayer | None = None) -> None:
        self._rules = rules if rules is not None else RulesLayer()

    async def evaluate(self, text: str) -> Finding | None:
        hit = self._rules.check(text)
        if hit is None:
            return None
        return Finding(hit.category, hit.score, self.name, f"rule {hit.rule}", blocking=True)


class SecurityDecider:
    """Runs the layers in order and stops at the first blocking finding.

    Layer exceptions propagate: whether an error fails open or closed is the caller's policy.
    """

    def __init__(self, layers: Sequence[Layer], model: ModelInfo | None = None) -> None:
        self._layers = tuple(layers)
        self._model = model

    @property
    def layers(self) -> tuple[Layer, ...]:
        return self._layers

    async def decide(self, text: str) -> SecurityVerdict:
        if not normalize(text):
            return SecurityVerdict(allowed=True, score=0.0, layer=DecidingLayer.NONE, reason="empty", model=self._model)
        # Waiting layers start together and are read in their turn: the verdict is the one the layers give in
        # order, in the time of the slowest wait rather than the sum of them. A question an earlier layer blocks
        # cancels the rest (their work may already be under way: blocks are the rare case).
        started = {i: asyncio.ensure_future(layer.evaluate(text)) for i, layer in enumerate(self._layers) if waits(layer)}
        top: Finding | None = None
        try:
            for i, layer in enumerate(self._layers):
                finding = await (started[i] if i in started else layer.evaluate(text))
                if finding is None:
                    continue
                if finding.blocking:
                    return SecurityVerdict(
                        allowed=False,
                        threat_category=finding.category,
                        score=_clamp(finding.score),
                        layer=finding.layer,
                        reason=finding.reason,
                        model=self._model,
                        deferred_to_scope=finding.deferrable,
                    )
                if top is None or _clamp(finding.score) > _clamp(top.score):
                    top = finding
        finally:
            for task in started.values():
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()  # read: a layer that failed after the verdict was made is not an error
        if top is None:
            return SecurityVerdict(allowed=True, score=0.0, layer=DecidingLayer.NONE, reason="no layer blocked",
                                   model=self._model)
        return SecurityVerdict(
            allowed=True,
            score=_clamp(top.score),
            layer=DecidingLayer.NONE,
            reason=f"no layer blocked; highest {top.layer.value}: {top.reason}",
            model=self._model,
        )


def _clamp(score: float) -> float:
    if math.isnan(score):
        return 0.0
    return min(max(score, 0.0), 1.0)
