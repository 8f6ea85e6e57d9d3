"""The caller side: one NATS connection, typed request/reply, JetStream events."""
from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from typing import TypeVar

from meshward.contracts import ErrorCode, ErrorReply, Event, Message, RemoteError
from meshward.contracts.subjects import EVENTS_ALL, EVENTS_STREAM, HDR_ERROR, HDR_MSG_ID
from meshward.telemetry import names
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import ValidationError

from . import context
from .deadlines import Deadlines
from .settings import BusSettings
from .tracing import end_soon, inject_headers, inject_span, tracer

log = logging.getLogger(__name__)
R = TypeVar("R", bound=Message)

_tracer = tracer("meshward.bus")
_STATUS, _NO_RESPONDERS = "Status", "503"  # the server's answer to a request nobody subscribes to


@functools.lru_cache(maxsize=1024)
def _attributes(subject: str) -> dict[str, str]:
    return {"messaging.system": "nats", "messaging.destination.name": subject}


def _time_out(reply: asyncio.Future) -> None:
    if not reply.done():
        reply.set_exception(TimeoutError())


async def connect(settings: BusSettings, name: str) -> NATS:
    """Connect with unlimited reconnects; lame-duck mode and disconnects are logged, not fatal."""
    nc = NATS()

    def shutting_down() -> bool:
        return nc.is_closed or nc.is_draining

    async def error_cb(e: Exception) -> None:
        if not shutting_down():
            log.warning("nats error: %s", e)

    async def disconnected_cb() -> None:
        if not shutting_down():
            log.warning("nats disconnected; reconnecting")

    async def reconnected_cb() -> None:
        log.info("nats reconnected")

    async def lame_duck_cb() -> None:
        log.warning("nats server entering lame-duck mode; the client will move to another server")

    await nc.connect(
        servers=settings.servers(),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        lame_duck_mode_cb=lame_duck_cb,
    )
    return nc


def decode_reply(data: bytes, headers: dict[str, str] | None, reply_type: type[R]) -> R:
    if headers and headers.get(HDR_ERROR):
        raise RemoteError(ErrorReply.model_validate_json(data))
    try:
        return reply_type.model_validate_json(data)
    except ValidationError as e:
        raise RemoteError(ErrorReply.of(ErrorCode.INTERNAL, f"reply did not match {reply_type.__name__}: {e.error_count()} errors")) from e


class Bus:
    """Typed request/reply and event publishing over one NATS connection."""

    def __init__(self, nc: NATS, settings: BusSettings):
        self.nc = nc
        self.settings = settings
        self._js = nc.jetstream()
        self._pending_events: set[asyncio.Task] = set()
        self._inbox: str | None = None  # "<inbox>." : the prefix of this connection's reply subjects
        self._tokens = itertools.count()
        self._waiting: dict[str, asyncio.Future] = {}
        self._deadlines = Deadlines(_time_out)

    @classmethod
    async def connect(cls, settings: BusSettings | None = None, name: str = "meshward") -> Bus:
        settings = settings or BusSettings()
        return cls(await connect(settings, name), settings)

    async def request(
        self,
        subject: str,
        body: Message,
        reply_type: type[R],
        timeout: float | None = None,
        retries: int = 1,
    ) -> R:
        """Send `body`, return the reply as `reply_type`, or raise RemoteError.

        The timeout is capped by the deadline inherited from the current request;
        a missing responder (a replica that died) is retried while time is left.
        """
        payload = body.model_dump_json().encode()
        budget = context.remaining(timeout or self.settings.request_timeout_s)
        loop = asyncio.get_running_loop()
        until = loop.time() + budget
        span = _tracer.start_span(names.send_span(subject), kind=SpanKind.CLIENT, attributes=_attributes(subject))
        try:
            if budget <= 0:
                raise RemoteError(ErrorReply.of(ErrorCode.DEADLINE_EXCEEDED, f"no time left to call {subject}"))
            headers: dict[str, str] = {}
            inject_span(headers, span)
            context.to_headers(headers, time.time() + budget, context.current_request_id())
            attempt = 0
            while True:
                try:
                    msg = await self._roundtrip(subject, payload, headers, until)
                    return decode_reply(msg.data, msg.headers, reply_type)
                except NoRespondersError:
                    attempt += 1
                    if attempt > retries or loop.time() >= until:
                        raise RemoteError(ErrorReply.of(ErrorCode.UNAVAILABLE, f"no service answers {subject}; is it running?")) from None
                    await asyncio.sleep(min(0.05 * attempt, max(until - loop.time(), 0)))
                except TimeoutError:
                    raise RemoteError(ErrorReply.of(ErrorCode.DEADLINE_EXCEEDED, f"{subject} did not answer within {budget:.2f}s")) from None
        except RemoteError as e:
            span.set_status(Status(StatusCode.ERROR, e.error.message))
            span.set_attribute("meshward.error.code", str(e.error.code))
            raise
        finally:
            end_soon(span)

    async def _roundtrip(self, subject: str, payload: bytes, headers: dict[str, str], until: float) -> Msg:
        """Publish with a reply subject and wait for the reply until `until` (loop time).

        What nc.request does, minus a loop pass and a timer per request: the reply subscription
        resolves the waiting future itself (nc.request adds wait_for's own future and callback),
        and all requests share one deadline timer.
        """
        if self._inbox is None:
            self._inbox = f"{self.nc.new_inbox()}."
            try:
                await self.nc.subscribe(f"{self._inbox}*", cb=self._on_reply)
            except BaseException:
                self._inbox = None
                raise
        token = str(next(self._tokens))
        reply = self._waiting[token] = asyncio.get_running_loop().create_future()
        self._deadlines.add(reply, until)
        try:
            await self.nc.publish(subject, payload, reply=self._inbox + token, headers=headers)
            msg = await reply
        finally:
            del self._waiting[token]
            self._deadlines.discard(reply)
        if msg.headers and msg.headers.get(_STATUS) == _NO_RESPONDERS:
            raise NoRespondersError
        return msg

    async def _on_reply(self, msg: Msg) -> None:
        reply = self._waiting.get(msg.subject[len(self._inbox):])
        if reply is not None and not reply.done():
            reply.set_result(msg)

    async def ensure_event_stream(self, max_age_s: float = 7 * 24 * 3600) -> None:
        """Create (or update) the events stream: file storage, limits retention, 2-minute de-dup window."""
        config = StreamConfig(
            name=EVENTS_STREAM,
            subjects=[EVENTS_ALL],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=max_age_s,
            duplicate_window=120.0,
        )
        try:
            await self._js.add_stream(config)
        except Exception:  # noqa: BLE001 - already exists with another config: update it
            await self._js.update_stream(config)

    async def publish_event(self, subject: str, event: Event, timeout: float = 5.0) -> None:
        """Publish with a JetStream ack; the event id is the de-duplication id."""
        headers: dict[str, str] = {HDR_MSG_ID: event.event_id}
        inject_headers(headers)
        with _tracer.start_as_current_span(
            names.publish_span(subject),
            kind=SpanKind.PRODUCER,
            attributes={"messaging.system": "nats", "messaging.destination.name": subject},
        ):
            await self._js.publish(subject, event.model_dump_json().encode(), timeout=timeout, headers=headers)

    def emit(self, subject: str, event: Event) -> None:
        """Publish an event off the hot path: the caller does not wait for the ack.

        The task is tracked so that close() waits for it; a failed publish is logged.
        """
        task = asyncio.get_running_loop().create_task(self._emit(subject, event))
        self._pending_events.add(task)
        task.add_done_callback(self._pending_events.discard)

    async def _emit(self, subject: str, event: Event) -> None:
        try:
            await self.publish_event(subject, event)
        except Exception as e:  # noqa: BLE001 - logged; the answer is not held back by an event
            log.warning("event %s on %s not published: %s", event.event_id, subject, e)

    async def flush_events(self, timeout: float = 10.0) -> None:
        if self._pending_events:
            await asyncio.wait(set(self._pending_events), timeout=timeout)

    @property
    def jetstream(self):
        return self._js

    async def close(self) -> None:
        await self.flush_events()
        if not self.nc.is_closed:
            try:
                await self.nc.drain()
            except Exception:  # noqa: BLE001 - closing anyway
                await self.nc.close()
