"""The caller side: one NATS connection, typed request/reply, JetStream events."""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Protocol, TypeVar

from meshward.contracts import ErrorCode, ErrorReply, Event, Message, RemoteError
from meshward.contracts.subjects import EVENTS_ALL, EVENTS_STREAM, HDR_ERROR, HDR_MSG_ID
from meshward.telemetry import names
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import ValidationError

from . import context
from .deadlines import Deadlines
from .settings import BusSettings
from .tracing import end_soon, inject_headers, inject_span, tracer

log = logging.getLogger(__name__)
R = TypeVar("R", bound=Message)

_tracer = tracer("meshward.bus")
MAX_RESENDS = 3  # a request cut by this many connection drops in a row is answered with an error
_STATUS, _NO_RESPONDERS = "Status", "503"  # the server's answer to a request nobody subscribes to


def _time_out(reply: asyncio.Future) -> None:
    if not reply.done():
        reply.set_exception(TimeoutError())


class ConnectionListener(Protocol):
    def connection_lost(self) -> None: ...
    def connection_restored(self) -> None: ...


class _ConnectionCut(Exception):
    """The connection dropped after the request went out: its reply can no longer arrive."""


class _Deferred:
    """Forwards connection news to a listener that exists only once the connection does."""

    target: ConnectionListener | None = None

    def connection_lost(self) -> None:
        if self.target is not None:
            self.target.connection_lost()

    def connection_restored(self) -> None:
        if self.target is not None:
            self.target.connection_restored()


class NatsAuthError(Exception):
    """The server refused this client's credentials: retrying will not help, the configuration must change."""


def _is_auth_error(e: BaseException) -> bool:
    text = str(e).lower()
    return "authorization violation" in text or "authentication" in text or "user authentication expired" in text


async def connect(settings: BusSettings, name: str, listener: ConnectionListener | None = None) -> NATS:
    """One connection attempt; once connected, unlimited reconnects (lame-duck mode and disconnects logged, not fatal).

    `listener` hears of each disconnect and reconnect (the Bus re-sends the requests a dropped connection cut).

    nats-py's own start-up loop would retry forever without a word, so the attempt ends at the first
    error it reports: NatsAuthError when the server refuses the credentials (retrying cannot help),
    ConnectionError when the server cannot be reached (connect_with_retry retries that with backoff).
    """
    nc = NATS()
    password = settings.password()  # read before connecting: a missing file is a configuration error
    loop = asyncio.get_running_loop()
    first_error: asyncio.Future[Exception] = loop.create_future()
    connected = False
    failures = 0

    def shutting_down() -> bool:
        return nc.is_closed or nc.is_draining

    async def error_cb(e: Exception) -> None:
        nonlocal failures
        if not connected:
            failures += 1
            # every server of the list tried once, or refused credentials (the same on every server)
            if not first_error.done() and (failures >= len(settings.servers()) or _is_auth_error(e)):
                first_error.set_result(e)
        elif not shutting_down():
            log.warning("nats error: %s", e)

    async def disconnected_cb() -> None:
        if connected and not shutting_down():
            log.warning("nats disconnected; reconnecting")
        if listener is not None:
            listener.connection_lost()

    async def reconnected_cb() -> None:
        log.info("nats reconnected")
        if listener is not None:
            listener.connection_restored()

    async def lame_duck_cb() -> None:
        log.warning("nats server entering lame-duck mode; the client will move to another server")

    auth = {}
    if settings.nats_user:
        auth = {"user": settings.nats_user, "password": password.get_secret_value() if password else None}
    attempt = loop.create_task(nc.connect(
        servers=settings.servers(),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        inbox_prefix=settings.inbox_prefix(),
        error_cb=error_cb,
        disconnected_cb=disconnected_cb,
        reconnected_cb=reconnected_cb,
        lame_duck_mode_cb=lame_duck_cb,
        **auth,
    ))
    try:
        await asyncio.wait({attempt, first_error}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        attempt.cancel()
        raise
    if attempt.done() and attempt.exception() is None:
        connected = True
        return nc
    attempt.cancel()
    try:
        await attempt
    except BaseException:  # noqa: BLE001 - the attempt is abandoned; its error is reported below
        pass
    if not nc.is_closed:
        await nc.close()
    error = first_error.result() if first_error.done() else attempt.exception()
    if _is_auth_error(error):
        who = f"user {settings.nats_user!r}" if settings.nats_user else "a client without credentials"
        raise NatsAuthError(
            f"the NATS server refused {who}: set MESHWARD_NATS_USER and MESHWARD_NATS_PASSWORD_FILE to this "
            "service's credentials (`meshward up` writes them under <data dir>/credentials)")
    raise ConnectionError(f"cannot reach NATS at {settings.redacted_url()}: {error or 'no server answered'}")


async def connect_with_retry(settings: BusSettings, name: str, listener: ConnectionListener | None = None) -> NATS:
    """connect(), retried with capped exponential backoff and jitter while the server cannot be reached.

    Each failed attempt is logged with what to check; refused credentials are not retried.
    settings.nats_connect_attempts = 0 keeps trying until the process is stopped.
    """
    from tenacity import (
        AsyncRetrying,
        retry_if_not_exception_type,
        stop_after_attempt,
        stop_never,
        wait_random_exponential,
    )

    def log_attempt(state) -> None:
        log.warning(
            "not ready: cannot reach NATS at %s (attempt %d: %s); retrying in %.1fs. Check that nats-server runs "
            "and MESHWARD_NATS_URL points at it", settings.redacted_url(), state.attempt_number,
            state.outcome.exception(), state.next_action.sleep)

    attempts = settings.nats_connect_attempts
    retrying = AsyncRetrying(
        retry=retry_if_not_exception_type((NatsAuthError, ValueError)),
        wait=wait_random_exponential(multiplier=0.2, max=settings.nats_connect_backoff_max_s),
        stop=stop_after_attempt(attempts) if attempts else stop_never,
        before_sleep=log_attempt,
        reraise=True,
    )
    return await retrying(connect, settings, name, listener)


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
        self._cut: set[str] = set()  # requests in flight when the connection dropped

    @classmethod
    async def connect(cls, settings: BusSettings | None = None, name: str = "meshward", retry: bool = False) -> Bus:
        settings = settings or BusSettings()
        news = _Deferred()
        bus = cls(await (connect_with_retry if retry else connect)(settings, name, news), settings)
        news.target = bus
        return bus

    def connection_lost(self) -> None:
        """The server dropped this connection's interest in its inbox: replies to what is in flight are lost."""
        self._cut.update(self._waiting)

    def connection_restored(self) -> None:
        """Back online (subscriptions replayed): the requests the drop cut are sent again at once instead of
        waiting out their deadline. Requests sent while disconnected were buffered and went out now: they wait."""
        cut, self._cut = self._cut, set()
        for token in cut:
            reply = self._waiting.get(token)
            if reply is not None and not reply.done():
                reply.set_exception(_ConnectionCut())

    async def request(
        self,
        subject: str,
        body: Message,
        reply_type: type[R],
        timeout: float | None = None,
        retries: int = 1,
        attempt_timeout: float | None = None,
    ) -> R:
        """Send `body`, return the reply as `reply_type`, or raise RemoteError.

        The timeout is capped by the deadline inherited from the current request;
        a missing responder (a replica that died) is retried while time is left.
        ``attempt_timeout`` is for idempotent calls only: an attempt unanswered after that many seconds is sent
        again (at most MAX_RESENDS times, within the timeout), since a request whose responder was killed
        while handling it would otherwise wait out the whole timeout.
        """
        payload = body.model_dump_json().encode()
        budget = context.remaining(timeout or self.settings.request_timeout_s)
        loop = asyncio.get_running_loop()
        until = loop.time() + budget
        # No attributes on the hop's spans: the name carries the subject, and any attribute at start costs
        # the SDK's attribute validation (a fifth of a span's cost) on every request.
        span = _tracer.start_span(names.send_span(subject), kind=SpanKind.CLIENT)
        try:
            if budget <= 0:
                raise RemoteError(ErrorReply.of(ErrorCode.DEADLINE_EXCEEDED, f"no time left to call {subject}"))
            headers: dict[str, str] = {}
            inject_span(headers, span)
            context.to_headers(headers, time.time() + budget, context.current_request_id())
            attempt = resent = unanswered = 0
            while True:
                attempt_until = until if attempt_timeout is None else min(until, loop.time() + attempt_timeout)
                try:
                    msg = await self._roundtrip(subject, payload, headers, attempt_until)
                    return decode_reply(msg.data, msg.headers, reply_type)
                except _ConnectionCut:
                    resent += 1
                    if resent > MAX_RESENDS or loop.time() >= until:
                        raise RemoteError(ErrorReply.of(
                            ErrorCode.UNAVAILABLE, f"the connection to NATS dropped while {subject} was answering; try again")) from None
                    log.info("re-sending %s: the connection dropped before its reply", subject)
                except NoRespondersError:
                    attempt += 1
                    if attempt > retries or loop.time() >= until:
                        raise RemoteError(ErrorReply.of(ErrorCode.UNAVAILABLE, f"no service answers {subject}; is it running?")) from None
                    await asyncio.sleep(min(0.05 * attempt, max(until - loop.time(), 0)))
                except TimeoutError:
                    if attempt_until < until and unanswered < MAX_RESENDS:
                        unanswered += 1
                        log.info("re-sending %s: unanswered after %.2fs", subject, attempt_timeout)
                        continue
                    if attempt_until < until:
                        raise RemoteError(ErrorReply.of(ErrorCode.DEADLINE_EXCEEDED, f"{subject} left {unanswered + 1} attempts "
                                                        f"of {attempt_timeout:.2f}s each unanswered")) from None
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
        except BadRequestError:  # exists with another configuration: update it (memory's user may; publishers' may not)
            try:
                await self._js.update_stream(config)
            except NatsTimeoutError:
                log.warning("the events stream exists with another configuration and this user may not update it; "
                            "the memory service updates it when it starts")

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
