"""Durable JetStream consumption: at-least-once, acked after the handler succeeds.

Handlers must be idempotent (events carry their own id); a failing handler gets
the message redelivered after a back-off, so an outage of the consumer or its
database loses nothing.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from meshward.contracts.subjects import EVENTS_ALL, EVENTS_STREAM
from meshward.telemetry import metrics, names
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from .client import Bus
from .tracing import extract_context, tracer

log = logging.getLogger(__name__)
_tracer = tracer("meshward.bus")

EventHandler = Callable[[str, bytes], Awaitable[None]]


class EventConsumer:
    def __init__(
        self,
        bus: Bus,
        durable: str,
        handler: EventHandler,
        filter_subject: str = EVENTS_ALL,
        batch: int = 64,
        max_deliver: int = 20,
        ack_wait_s: float = 30.0,
    ):
        self.bus = bus
        self.durable = durable
        self.handler = handler
        self.filter_subject = filter_subject
        self.batch = batch
        self.config = ConsumerConfig(
            durable_name=durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            max_deliver=max_deliver,
            ack_wait=ack_wait_s,
            filter_subject=filter_subject,
        )
        self._task: asyncio.Task | None = None
        self._stopping = asyncio.Event()
        self.processed = 0

    async def start(self) -> None:
        self._sub = await self.bus.jetstream.pull_subscribe(
            self.filter_subject, durable=self.durable, stream=EVENTS_STREAM, config=self.config
        )
        self._task = asyncio.create_task(self._loop(), name=f"consumer-{self.durable}")

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                msgs = await self._sub.fetch(self.batch, timeout=1.0)
            except NatsTimeout:
                continue
            except Exception as e:  # noqa: BLE001 - reconnecting; try again shortly
                if self._stopping.is_set():
                    return
                log.warning("event fetch failed: %s", e)
                await asyncio.sleep(0.5)
                continue
            await asyncio.gather(*(self._handle(msg) for msg in msgs))  # concurrent: handlers may group-commit

    async def _handle(self, msg) -> None:
        token = otel_context.attach(extract_context(msg.headers))
        try:
            with _tracer.start_as_current_span(
                names.consume_span(msg.subject),
                kind=SpanKind.CONSUMER,
                attributes={"messaging.system": "nats", "messaging.destination.name": msg.subject, "messaging.consumer.group.name": self.durable},
            ):
                try:
                    await self.handler(msg.subject, msg.data)
                except Exception:  # noqa: BLE001 - redeliver later; nothing is lost
                    log.exception("event handler failed on %s; will be redelivered", msg.subject)
                    await msg.nak(delay=1.0)
                    return
                await msg.ack()
                self.processed += 1
                # The consumer's lag as the server saw it when it delivered this event.
                metrics.CONSUMER_PENDING.labels(msg.metadata.stream, self.durable).set(msg.metadata.num_pending)
        finally:
            otel_context.detach(token)

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        try:
            await self._sub.unsubscribe()
        except Exception:  # noqa: BLE001 - connection already closed
            pass
