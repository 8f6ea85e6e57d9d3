"""The memory service: a durable event consumer that persists, and the read-side requests."""
from __future__ import annotations

import logging

from meshward.bus import Service
from meshward.bus.events import EventConsumer
from meshward.contracts import (
    HistoryReply,
    HistoryRequest,
    InteractionCompleted,
    RoutingDecision,
    StatsReply,
    StatsRequest,
    subjects,
)

from .settings import MemorySettings
from .store import MemoryStore

log = logging.getLogger(__name__)


class EventSink:
    """Routes each event subject to the store; unknown subjects are acknowledged and skipped."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self.seen = 0

    async def __call__(self, subject: str, data: bytes) -> None:
        self.seen += 1
        if subject == subjects.EVENT_INTERACTION:
            await self.store.record_interaction(InteractionCompleted.model_validate_json(data))
        elif subject == subjects.EVENT_ROUTING:
            await self.store.record_decision(RoutingDecision.model_validate_json(data))


def create_service(settings: MemorySettings | None = None) -> Service:
    settings = settings or MemorySettings()
    service = Service("memory")
    state: dict = {}

    @service.on_startup
    async def _open(svc: Service) -> None:
        store = await MemoryStore.open(settings.database_url)
        await svc.bus.ensure_event_stream()
        sink = EventSink(store)
        consumer = EventConsumer(svc.bus, settings.consumer_name, sink)
        await consumer.start()
        state.update(store=store, sink=sink, consumer=consumer)
        svc.details["database"] = settings.database_url.split(":", 1)[0]

    @service.on_shutdown
    async def _close(svc: Service) -> None:
        if "consumer" in state:
            await state["consumer"].stop()
        if "store" in state:
            await state["store"].close()

    @service.handler(subjects.MEMORY_HISTORY, HistoryRequest)
    async def history(req: HistoryRequest) -> HistoryReply:
        return HistoryReply(thread_id=req.thread_id, turns=await state["store"].history(req.thread_id, req.limit))

    @service.handler(subjects.MEMORY_STATS, StatsRequest)
    async def stats(_: StatsRequest) -> StatsReply:
        return await state["store"].stats()

    return service
