"""The known-threats layer: a question close to a threat learned from earlier blocks is blocked.

It asks the memory service (meshward.v1.memory.similar_threats) with a short timeout.
When memory is down the layer abstains (the rules and the classifier still decide) rather
than blocking everything: a memory outage must not take the assistant down.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from meshward.bus import Bus
from meshward.contracts import (
    DecidingLayer,
    RemoteError,
    SimilarThreatsReply,
    SimilarThreatsRequest,
    ThreatCategory,
    subjects,
)

from .decision import Finding
from .normalize import revealed

log = logging.getLogger(__name__)


class KnownThreatsLayer:
    name = DecidingLayer.KNOWN_THREATS
    waits = True  # a round trip to memory

    def __init__(self, bus: Callable[[], Bus], min_similarity: float = 0.85, timeout_s: float = 0.5):
        self.bus = bus  # a callable: the service's connection exists only once it has started
        self.min_similarity = min_similarity
        self.timeout_s = timeout_s

    async def evaluate(self, text: str) -> Finding | None:
        try:
            reply = await self.bus().request(
                subjects.MEMORY_SIMILAR_THREATS,
                SimilarThreatsRequest(text=revealed(text)[:20_000], k=1, min_similarity=self.min_similarity),
                SimilarThreatsReply,
                timeout=self.timeout_s,
                retries=0,
            )
        except RemoteError as e:
            log.warning("known-threats layer abstains: memory did not answer (%s)", e.error.message)
            return None
        if not reply.hits:
            return None
        hit = reply.hits[0]
        try:
            category = ThreatCategory(str(hit.metadata.get("category")))
        except ValueError:
            category = ThreatCategory.SECURITY_BYPASS
        return Finding(
            category=category,
            score=max(0.0, min(1.0, hit.similarity)),
            layer=self.name,
            reason=f"similar ({hit.similarity:.2f}) to learned threat {hit.id}",
            blocking=True,
        )
