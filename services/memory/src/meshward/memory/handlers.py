"""The memory service: a durable event consumer that persists and learns, and the read-side requests."""
from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from meshward.bus import Service, ServiceError
from meshward.bus import context as request_context
from meshward.bus.events import EventConsumer
from meshward.contracts import (
    ApprovalDecided,
    ApprovalsReply,
    ApprovalsRequest,
    ClusterAudit,
    ClusterChangesReply,
    ClusterChangesRequest,
    ClusterHealthChecked,
    ContextReply,
    ContextRequest,
    ErrorCode,
    HistoryReply,
    HistoryRequest,
    Hit,
    InsightsReply,
    InsightsRequest,
    InteractionCompleted,
    RetractThreatReply,
    RetractThreatRequest,
    SearchReply,
    SearchRequest,
    SecurityViolation,
    SimilarThreatsReply,
    SimilarThreatsRequest,
    StatsReply,
    StatsRequest,
    Turn,
    subjects,
)

from .cluster_changes import changes_from_events
from .context import ContextBudget, ContextCompressor, turn_text
from .ingest import GroupCommit
from .learning import LearningPolicy
from .scope_examples import load_scope_examples
from .semantic import SCOPE_EXAMPLES, SemanticMemory
from .settings import MemorySettings
from .store import MemoryStore

log = logging.getLogger(__name__)


def _hit(h) -> Hit:
    meta = {k: v for k, v in h.metadata.items() if isinstance(v, str | int | float | bool) or v is None}
    return Hit(id=h.id, text=h.text, similarity=max(-1.0, min(1.0, h.similarity)), metadata=meta)


class EventSink:
    """Routes each event subject to the stores; unknown subjects are acknowledged and skipped.

    Every write is idempotent by event id, so redelivery after a crash is harmless. Concurrent events share
    one SQL transaction and one embedding call (group commit); the SQL write comes first, so a thread's
    history does not wait for the embedding.
    """

    def __init__(self, store: MemoryStore, semantic: SemanticMemory, policy: LearningPolicy, embed_linger_s: float = 0.0):
        self.store = store
        self.semantic = semantic
        self.policy = policy
        self.sql: GroupCommit[InteractionCompleted] = GroupCommit(store.record_events, name="sql")
        self.embed: GroupCommit[tuple] = GroupCommit(semantic.add_interactions, max_batch=64, name="embed", linger_s=embed_linger_s)

    async def __call__(self, subject: str, data: bytes) -> None:
        if subject == subjects.EVENT_INTERACTION:
            event = InteractionCompleted.model_validate_json(data)
            await self.sql.submit(event)
            if event.status == "answered":
                await self.embed.submit(
                    (event.event_id, event.question, event.answer, {"thread_id": event.thread_id or "", "intent": event.intent or ""})
                )
        elif subject == subjects.EVENT_VIOLATION:
            await self.learn(SecurityViolation.model_validate_json(data))
        elif subject in (subjects.EVENT_CLUSTER_AUDIT, subjects.EVENT_CLUSTER_HEALTH):
            model = ClusterAudit if subject == subjects.EVENT_CLUSTER_AUDIT else ClusterHealthChecked
            await self.store.record_cluster_event(model.model_validate_json(data))
        elif subject == subjects.EVENT_APPROVAL:
            await self.store.record_approval(ApprovalDecided.model_validate_json(data))

    async def learn(self, event: SecurityViolation) -> None:
        await self.store.record_violation(event)
        verdict = await self.policy.should_learn(event, self.semantic)
        if not verdict.learn:
            log.info("violation %s logged, not learned: %s", event.event_id, verdict.reason)
            return
        await self.semantic.add_threat(event.event_id, event.reading or event.text, str(event.category), event.score,
                                       source_event_id=event.event_id)
        await self.store.mark_learned(event.event_id)


@dataclass(frozen=True)
class MemoryState:
    store: MemoryStore
    semantic: SemanticMemory
    sink: EventSink
    consumer: EventConsumer
    compressor: ContextCompressor


def create_service(settings: MemorySettings | None = None) -> Service[MemoryState]:
    settings = settings or MemorySettings()
    service: Service[MemoryState] = Service("memory")

    @service.build
    async def _build(svc: Service, stack: AsyncExitStack) -> MemoryState:
        store = await MemoryStore.open(settings.database_url)
        stack.push_async_callback(store.close)
        semantic = await asyncio.to_thread(SemanticMemory.open, settings.chroma_path, settings.chroma_url)
        stack.push_async_callback(semantic.aclose)
        await load_scope_examples(semantic, settings.scope_file)
        compressor = ContextCompressor(
            ContextBudget(max_tokens=settings.context_max_tokens, summarize_threshold=settings.context_threshold_tokens, keep_last=settings.context_keep_last)
        )
        await svc.bus.ensure_event_stream()
        sink = EventSink(
            store, semantic, LearningPolicy(settings.learn_min_score, settings.learn_max_scope_similarity),
            embed_linger_s=settings.embed_linger_ms / 1000,
        )
        consumer = EventConsumer(svc.bus, settings.consumer_name, sink, batch=settings.consumer_batch)
        await consumer.start()
        stack.push_async_callback(consumer.stop)
        svc.details.update(database=settings.database_url.split(":", 1)[0], chroma="http" if settings.chroma_url else "embedded",
                           encoder=semantic.model_version, encoder_runtime=semantic.encoder_runtime, scope_examples=str(await semantic.count(SCOPE_EXAMPLES)))
        return MemoryState(store, semantic, sink, consumer, compressor)

    async def caught_up() -> None:
        """Read-your-writes: wait until every event already in the stream is stored (the consumer's ack floor
        reaches the stream's end as of now), so an answer returned before this read is in its history.
        Bounded by the request's deadline and `read_your_writes_wait_s`; then the read serves what is stored."""
        js = service.bus.jetstream
        until = time.monotonic() + request_context.remaining(settings.read_your_writes_wait_s)
        info = await js.consumer_info(subjects.EVENTS_STREAM, settings.consumer_name)
        target = info.delivered.stream_seq + info.num_pending
        while info.ack_floor.stream_seq < target:
            if time.monotonic() >= until:
                log.warning("history read served %d events behind the stream", target - info.ack_floor.stream_seq)
                return
            await asyncio.sleep(0.01)
            info = await js.consumer_info(subjects.EVENTS_STREAM, settings.consumer_name)

    @service.handler(subjects.MEMORY_HISTORY, HistoryRequest)
    async def history(req: HistoryRequest) -> HistoryReply:
        await caught_up()
        return HistoryReply(thread_id=req.thread_id, turns=await service.state.store.history(req.thread_id, req.limit))

    @service.handler(subjects.MEMORY_STATS, StatsRequest)
    async def stats(_: StatsRequest) -> StatsReply:
        return await service.state.store.stats()

    @service.handler(subjects.MEMORY_SEARCH, SearchRequest)
    async def search(req: SearchRequest) -> SearchReply:
        return SearchReply(hits=[_hit(h) for h in await service.state.semantic.search(req.query, req.k, req.collection)])

    @service.handler(subjects.MEMORY_SIMILAR_THREATS, SimilarThreatsRequest)
    async def similar_threats(req: SimilarThreatsRequest) -> SimilarThreatsReply:
        if not req.text.strip():
            return SimilarThreatsReply(hits=[])
        hits = await service.state.semantic.similar_threats(req.text[:4_000], req.k, req.min_similarity)
        return SimilarThreatsReply(hits=[_hit(h) for h in hits])

    @service.handler(subjects.MEMORY_INSIGHTS, InsightsRequest)
    async def insights(_: InsightsRequest) -> InsightsReply:
        return await service.state.store.insights()

    @service.handler(subjects.MEMORY_RETRACT_THREAT, RetractThreatRequest)
    async def retract(req: RetractThreatRequest) -> RetractThreatReply:
        marked = await service.state.store.retract(req.threat_id)
        removed = await service.state.semantic.retract_threat(req.threat_id)
        return RetractThreatReply(threat_id=req.threat_id, retracted=marked or removed)

    @service.handler(subjects.MEMORY_APPROVALS, ApprovalsRequest)
    async def approval_log(req: ApprovalsRequest) -> ApprovalsReply:
        await caught_up()  # a decision just made is in the log
        return ApprovalsReply(entries=await service.state.store.approvals(req.thread_id, req.limit))
    @service.handler(subjects.MEMORY_CLUSTER_CHANGES, ClusterChangesRequest)
    async def cluster_changes(req: ClusterChangesRequest) -> ClusterChangesReply:
        await caught_up()
        since = datetime.now(UTC) - timedelta(hours=req.since_hours)
        baseline, events, truncated = await service.state.store.cluster_events_since(since, req.cluster, req.limit)
        changes, latest, checks = changes_from_events(baseline, events)
        return ClusterChangesReply(since=since, changes=changes, checks=checks, latest=latest, truncated=truncated)

    @service.handler(subjects.MEMORY_CONTEXT, ContextRequest)
    async def context(req: ContextRequest) -> ContextReply:
        turns = await service.state.store.history(req.thread_id, settings.context_history_limit)
        if not turns:
            raise ServiceError(ErrorCode.NOT_FOUND, f"no turns stored for thread {req.thread_id}")
        packed = await service.state.compressor.compress([{"question": t.question, "answer": t.answer} for t in turns])
        kept = turns[len(turns) - len(packed.turns):] if packed.turns else []
        recent = []
        for original, packed_turn in zip(kept, packed.turns, strict=True):
            question, answer = turn_text(packed_turn)  # may be shortened to fit the budget
            recent.append(Turn(question=question, answer=answer, status=original.status, at=original.at, event_id=original.event_id))
        return ContextReply(
            thread_id=req.thread_id,
            summary=packed.summary,
            turns=recent,
            tokens=packed.tokens,
            compressed=packed.compressed,
        )

    return service
