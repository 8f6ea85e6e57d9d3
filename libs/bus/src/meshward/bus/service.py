"""The server side: typed handlers on queue-group subscriptions, run concurrently with a bound.

    service: Service[IntentState] = Service("intent", settings)

    @service.build
    async def build(svc: Service, stack: AsyncExitStack) -> IntentState:
        classifier = ...; stack.push_async_callback(classifier.close)
        return IntentState(classifier)

    @service.handler(INTENT_CLASSIFY, IntentRequest)
    async def classify(req: IntentRequest) -> IntentResult:
        return await service.state.classifier.classify(req)

    run_service(service)   # connect (retrying), build, serve; drain on SIGTERM

Every handler call: trace context and deadline extracted from the headers, the
body validated, a SERVER span around the work, the reply or a typed ErrorReply
sent back. Handlers never see NATS.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
import gc
import logging
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from meshward.contracts import ErrorCode, ErrorReply, HealthReply, HealthRequest, Message, RemoteError
from meshward.contracts.subjects import HDR_ERROR, health
from meshward.telemetry import metrics, names, start_from_env
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context
from pydantic import ValidationError

from . import context
from .client import Bus
from .deadlines import Deadlines
from .settings import BusSettings
from .tracing import current_trace_id, end_soon, extract_context, setup_tracing, shutdown_tracing, tracer

log = logging.getLogger(__name__)
_tracer = tracer("meshward.bus")
_ERROR_HEADERS = {HDR_ERROR: "1"}

Handler = Callable[[Any], Awaitable[Message]]
Hook = Callable[["Service"], Awaitable[None]]
S = TypeVar("S")
Build = Callable[["Service[S]", AsyncExitStack], Awaitable[S]]


class ServiceError(Exception):
    """Raise from a handler to send a typed error reply."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class _Route:
    subject: str
    request_type: type[Message]
    handler: Handler
    span_name: str


def _validation_summary(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:5]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg')}")
    more = e.error_count() - len(parts)
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


@functools.cache
def _freeze_startup_objects() -> None:
    """Once per process, take what start-up allocated (modules, settings, clients) out of the
    garbage collector's full passes.

    Tracing keeps thousands of span objects alive at a time (the batch processor's queue), which
    makes full collections frequent; each one would re-scan every object of the process (tens of
    milliseconds in a loaded service) for objects that live as long as it does.
    """
    gc.collect()
    gc.freeze()


class _Workers:
    """Runs one subscription's requests on at most `limit` long-lived worker tasks.

    nats-py hands each message to the subscription's callback and awaits it before taking the
    next, so the callback only queues the message (it never waits while the queue has room) and
    the workers run the handlers: a worker per message would cost a task each. While under the
    bound one worker always waits for the next message, so requests run concurrently; above it,
    messages wait here (at most `limit`) and then in nats-py's pending queue, whose limits make
    the server's slow-consumer protection apply. A worker whose handler left a context variable
    set retires, so that no request sees another's context.
    """

    def __init__(self, subject: str, limit: int, handle: Callable[[Msg], Awaitable[None]]):
        self._subject = subject
        self._queue: asyncio.Queue[Msg] = asyncio.Queue(maxsize=limit)
        self._limit = limit
        self._handle = handle
        self._tasks: set[asyncio.Task] = set()
        self._waiting: set[asyncio.Task] = set()  # idle, or started and not yet idle
        self._clean = contextvars.copy_context()
        self._closed = False
        self._spawn()

    async def accept(self, msg: Msg) -> None:
        """The subscription's callback."""
        await self._queue.put(msg)

    def _spawn(self) -> None:
        task = asyncio.create_task(self._work(), context=self._clean.copy())
        self._tasks.add(task)
        self._waiting.add(task)

    async def _work(self) -> None:
        me = asyncio.current_task()
        try:
            while not self._closed:
                self._waiting.add(me)
                try:
                    msg = await self._queue.get()
                finally:
                    self._waiting.discard(me)
                if not self._waiting and len(self._tasks) < self._limit:
                    self._spawn()
                try:
                    await self._handle(msg)
                except Exception:  # noqa: BLE001 - a bug in the runtime itself; keep serving
                    log.exception("request on %s failed", self._subject)
                finally:
                    self._queue.task_done()
                if contextvars.copy_context() != self._clean:
                    break
        finally:
            self._tasks.discard(me)
        if not self._closed and not self._waiting:
            self._spawn()

    async def finish(self, timeout: float) -> None:
        """After the subscription is drained: run what is queued, let busy workers finish, stop idle ones."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            log.warning("%s: %d queued requests not handled within the drain timeout", self._subject, self._queue.qsize())
        self._closed = True
        for task in self._waiting:
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=max(until - loop.time(), 0.1))


class Service(Generic[S]):
    """One service's lifecycle: settings -> connect -> build -> serve, all inside one AsyncExitStack.

    `build` (one per service) creates what the handlers use and returns it as the typed state
    (`service.state`); it registers every resource's cleanup on the stack it is given, so a
    start-up that fails at any step closes what was opened before it, the NATS connection
    included. Stopping unwinds the same stack: stop taking requests and finish in-flight ones,
    then the resources, then the connection.
    """

    def __init__(self, name: str, settings: BusSettings | None = None, version: str = "0.1.0"):
        self.name = name
        self.settings = settings or BusSettings()
        self.version = version
        self.instance = self.settings.instance or f"{socket.gethostname()}:{os.getpid()}"
        self.bus: Bus | None = None
        self.ready = False
        self.details: dict[str, str] = {}
        self._routes: list[_Route] = []
        self._build: Build[S] | None = None
        self._state: S | None = None
        self._startup: list[Hook] = []
        self._shutdown: list[Hook] = []
        self._stack: AsyncExitStack | None = None
        self._deadlines = Deadlines(self._expire)
        self._expired: set[asyncio.Task] = set()
        self._stop = asyncio.Event()
        self.handler(health(name), HealthRequest)(self._health)

    # registration -------------------------------------------------------
    def handler(self, subject: str, request_type: type[Message]):
        def register(fn: Handler) -> Handler:
            self._routes.append(_Route(subject, request_type, fn, names.process_span(subject)))
            return fn

        return register

    def build(self, fn: Build[S]) -> Build[S]:
        """Register the service's build step: `async def build(svc, stack) -> State`."""
        self._build = fn
        return fn

    @property
    def state(self) -> S:
        if self._state is None:
            raise ServiceError(ErrorCode.UNAVAILABLE, f"{self.name} is not started")
        return self._state

    def on_startup(self, fn: Hook) -> Hook:
        """A hook run after build (kept for services not yet on `build`)."""
        self._startup.append(fn)
        return fn

    def on_shutdown(self, fn: Hook) -> Hook:
        self._shutdown.append(fn)
        return fn

    async def _health(self, _: HealthRequest) -> HealthReply:
        return HealthReply(service=self.name, ready=self.ready, version=self.version, instance=self.instance, details=self.details)

    # dispatch -----------------------------------------------------------
    async def _reply(self, nc: NATS, msg: Msg, body: Message, error: bool = False) -> None:
        if not msg.reply:
            return
        try:
            await nc.publish(msg.reply, body.model_dump_json().encode(), headers=_ERROR_HEADERS if error else None)
        except Exception as e:  # noqa: BLE001 - the caller is gone or the connection dropped
            log.warning("could not reply on %s: %s", msg.subject, e)

    async def _dispatch(self, nc: NATS, route: _Route, msg: Msg) -> None:
        headers = msg.headers
        deadline, request_id = context.from_headers(headers)
        span = _tracer.start_span(route.span_name, context=extract_context(headers), kind=SpanKind.SERVER)  # no attributes: see Bus.request
        token = otel_context.attach(set_span_in_context(span))
        d_token = context.set_deadline(deadline)
        r_token = context.set_request_id(request_id)
        started = time.perf_counter()
        try:
            result = await self._run(route, msg, deadline)
            failed = isinstance(result, ErrorReply)
            metrics.observe_request(self.name, route.subject, time.perf_counter() - started, str(result.code) if failed else None)
            if failed:
                span.set_status(Status(StatusCode.ERROR, result.message))
                span.set_attribute("meshward.error.code", str(result.code))
                await self._reply(nc, msg, result, error=True)
            else:
                await self._reply(nc, msg, result)
        finally:
            context.reset_request_id(r_token)
            context.reset_deadline(d_token)
            otel_context.detach(token)
            end_soon(span)

    def _fail(self, code: ErrorCode, message: str) -> ErrorReply:
        return ErrorReply.of(code, message, service=self.name, trace_id=current_trace_id())

    async def _run(self, route: _Route, msg: Msg, deadline: float | None) -> Message:
        if len(msg.data) > self.settings.max_request_bytes:
            return self._fail(ErrorCode.TOO_LARGE, f"request is {len(msg.data)} bytes; the limit is {self.settings.max_request_bytes}")
        left = None if deadline is None else deadline - time.time()
        if left is not None and left <= 0:
            return self._fail(ErrorCode.DEADLINE_EXCEEDED, "the caller's deadline passed before the request was handled")
        try:
            request = route.request_type.model_validate_json(msg.data)
        except ValidationError as e:
            return self._fail(ErrorCode.BAD_REQUEST, f"invalid {route.request_type.__name__}: {_validation_summary(e)}")
        try:
            if left is None:
                return await route.handler(request)
            return await self._call_within(route.handler(request), asyncio.get_running_loop().time() + left)
        except TimeoutError:
            return self._fail(ErrorCode.DEADLINE_EXCEEDED, f"{self.name} ran out of time on {route.subject}")
        except ServiceError as e:
            return self._fail(e.code, e.message)
        except RemoteError as e:
            return self._fail(e.error.code, e.error.message)
        except Exception:  # noqa: BLE001 - a bug: logged with its trace id, never sent as a traceback
            log.exception("handler for %s failed", route.subject)
            return self._fail(ErrorCode.INTERNAL, f"{self.name} failed on {route.subject}; see its logs for trace {current_trace_id()}")

    async def _call_within(self, call: Awaitable[Message], until: float) -> Message:
        """Await the handler; cancel it and raise TimeoutError if `until` (loop time) passes first.

        asyncio.timeout semantics, on the service's shared deadline timer.
        """
        task = asyncio.current_task()
        self._deadlines.add(task, until)
        try:
            return await call
        except asyncio.CancelledError:
            if task in self._expired and task.cancelling() == 1:  # ours alone, not a stop
                raise TimeoutError from None
            raise
        finally:
            self._deadlines.discard(task)
            if task in self._expired:
                self._expired.discard(task)
                task.uncancel()

    def _expire(self, task: asyncio.Task) -> None:
        self._expired.add(task)
        task.cancel()

    # lifecycle ----------------------------------------------------------
    async def _serve(self, stack: AsyncExitStack, routes: list[_Route]) -> None:
        """Subscribe `routes`; the stack drains them (finishing in-flight requests) when it unwinds."""
        nc = self.bus.nc
        queue = self.settings.queue_group or self.name
        for route in routes:
            pool = _Workers(route.subject, self.settings.max_concurrency, functools.partial(self._dispatch, nc, route))
            sub = await nc.subscribe(route.subject, queue=queue, cb=pool.accept)
            stack.push_async_callback(self._drain, sub, pool)
        await nc.flush()

    async def _drain(self, sub: Subscription, pool: _Workers) -> None:
        self.ready = False
        try:
            await sub.drain()  # no new messages; what nats-py already holds still reaches the workers
        except Exception:  # noqa: BLE001 - the connection is already gone: nothing more will arrive
            pass
        await pool.finish(self.settings.drain_timeout_s)

    async def open(self, stack: AsyncExitStack) -> S | None:
        """Connect (retrying while NATS cannot be reached), answer health (not ready), build, serve."""
        self.bus = await Bus.connect(self.settings, name=f"meshward-{self.name}", retry=True)
        stack.push_async_callback(self._close_bus)
        health_routes = [r for r in self._routes if r.handler == self._health]
        await self._serve(stack, health_routes)  # "not ready" while the build runs (models load for seconds)
        if self._build is not None:
            self._state = await self._build(self, stack)
        for hook in self._startup:
            await hook(self)
        for hook in self._shutdown:
            stack.push_async_callback(self._run_hook, hook)
        await self._serve(stack, [r for r in self._routes if r.handler != self._health])
        _freeze_startup_objects()
        self.ready = True
        log.info("%s serving %d subjects (queue %s)", self.name, len(self._routes), self.settings.queue_group or self.name)
        return self._state

    async def _run_hook(self, hook: Hook) -> None:
        try:
            await hook(self)
        except Exception:  # noqa: BLE001 - keep shutting down
            log.exception("shutdown hook failed")

    async def _close_bus(self) -> None:
        self.ready = False
        if self.bus is not None:
            await self.bus.close()
        shutdown_tracing()

    async def start(self) -> None:
        """open() on the service's own stack; a failure closes whatever was opened, then raises."""
        stack = AsyncExitStack()
        try:
            await self.open(stack)
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack

    async def stop(self) -> None:
        """Stop taking requests, finish in-flight ones within the grace period, close resources, drain, close."""
        self.ready = False
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    def request_stop(self) -> None:
        self._stop.set()

    async def serve_forever(self) -> None:
        """Serve until SIGTERM/SIGINT, which also interrupts a start-up still waiting for NATS."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self.request_stop)
            except (NotImplementedError, RuntimeError):
                pass
        async with AsyncExitStack() as stack:
            opening = asyncio.create_task(self.open(stack))
            stopping = asyncio.create_task(self._stop.wait())
            await asyncio.wait({opening, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not opening.done():
                opening.cancel()
                log.info("%s stopped before it was ready", self.name)
            try:
                await opening
            except asyncio.CancelledError:
                return
            await stopping
            log.info("%s stopping", self.name)


def run_service(service: Service) -> None:
    """Entry point for `python -m meshward.<service>`: exits non-zero, with what to fix, when start-up fails."""
    from .logs import setup_logging

    setup_logging(service.name)
    setup_tracing(f"meshward-{service.name}")
    telemetry = start_from_env(service.name)
    if telemetry is not None:
        telemetry.readiness(lambda: service.ready)
    try:
        asyncio.run(service.serve_forever())
    except Exception as e:  # noqa: BLE001 - a start-up failure: say what failed, exit non-zero
        log.error("%s could not start: %s: %s", service.name, type(e).__name__, e)
        raise SystemExit(1) from None
