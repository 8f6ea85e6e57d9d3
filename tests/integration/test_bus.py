"""The runtime lib against a real nats-server: typed request/reply, errors, deadlines,
concurrency, queue groups, trace propagation, JetStream events, graceful stop."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from meshward.bus import Bus, BusSettings, Service, ServiceError
from meshward.bus import context as bus_context
from meshward.bus.events import EventConsumer
from meshward.contracts import ErrorCode, Message, RemoteError, ToolCalled, subjects
from opentelemetry.trace import SpanKind
from pydantic import Field

pytestmark = pytest.mark.integration


class Echo(Message):
    text: str = Field(max_length=100)
    sleep_s: float = 0.0


class EchoReply(Message):
    text: str
    instance: str
    deadline_left: float | None = None


def make_service(nats_url: str, subject: str, name: str = "echo", instance: str | None = None, max_concurrency: int = 64) -> Service:
    svc = Service(name, BusSettings(nats_url=nats_url, instance=instance, max_concurrency=max_concurrency, drain_timeout_s=5))
    svc.active = 0
    svc.peak = 0

    @svc.handler(subject, Echo)
    async def echo(req: Echo) -> EchoReply:
        svc.active += 1
        svc.peak = max(svc.peak, svc.active)
        try:
            if req.text == "boom":
                raise RuntimeError("secret internal detail")
            if req.text == "refuse":
                raise ServiceError(ErrorCode.REFUSED, "not allowed")
            await asyncio.sleep(req.sleep_s)
            deadline = bus_context.current_deadline()
            left = None if deadline is None else deadline - bus_context.now()
            return EchoReply(text=req.text, instance=svc.instance, deadline_left=left)
        finally:
            svc.active -= 1

    return svc


async def raw_request(bus: Bus, subject: str, payload: bytes):
    from nats.errors import NoRespondersError

    for _ in range(3):  # a just-started subscription can, rarely, not be visible yet: Bus.request retries this too
        try:
            return await bus.nc.request(subject, payload, timeout=2)
        except NoRespondersError:
            await asyncio.sleep(0.05)
    raise AssertionError("no responder")


@pytest.fixture
def subject():
    return f"meshward.v1.test.{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def bus(nats_url):
    b = await Bus.connect(BusSettings(nats_url=nats_url))
    yield b
    await b.close()


async def test_typed_request_reply(nats_url, bus, subject):
    svc = make_service(nats_url, subject)
    await svc.start()
    try:
        reply = await bus.request(subject, Echo(text="hi"), EchoReply)
        assert reply == EchoReply(text="hi", instance=svc.instance, deadline_left=reply.deadline_left)
        assert 0 < reply.deadline_left <= 10.0  # the caller's deadline reached the handler
    finally:
        await svc.stop()


async def test_errors_are_typed_never_tracebacks(nats_url, bus, subject):
    svc = make_service(nats_url, subject)
    await svc.start()
    try:
        # malformed JSON and invalid fields both come back as bad_request replies
        raw = await raw_request(bus, subject, b"{not json")
        assert raw.headers["Meshward-Error"] == "1"
        with pytest.raises(RemoteError) as bad:
            await bus.request(subject, Echo.model_construct(text="x" * 500), EchoReply)
        assert bad.value.code == ErrorCode.BAD_REQUEST and "text" in bad.value.error.message
        with pytest.raises(RemoteError) as crash:
            await bus.request(subject, Echo(text="boom"), EchoReply)
        assert crash.value.code == ErrorCode.INTERNAL
        assert "secret internal detail" not in crash.value.error.message and "Traceback" not in crash.value.error.message
        with pytest.raises(RemoteError) as refused:
            await bus.request(subject, Echo(text="refuse"), EchoReply)
        assert refused.value.code == ErrorCode.REFUSED and not refused.value.error.retryable
        # the service keeps serving after all of that
        assert (await bus.request(subject, Echo(text="still here"), EchoReply)).text == "still here"
    finally:
        await svc.stop()


async def test_no_responder_is_a_typed_unavailable(bus, subject):
    with pytest.raises(RemoteError) as e:
        await bus.request(subject, Echo(text="anyone?"), EchoReply, timeout=1)
    assert e.value.code == ErrorCode.UNAVAILABLE and e.value.error.retryable


async def test_deadline_is_honoured_by_the_handler(nats_url, bus, subject):
    svc = make_service(nats_url, subject)
    await svc.start()
    try:
        with pytest.raises(RemoteError) as e:
            await bus.request(subject, Echo(text="slow", sleep_s=5), EchoReply, timeout=0.3)
        assert e.value.code == ErrorCode.DEADLINE_EXCEEDED
        # an inherited deadline caps the timeout of nested calls
        token = bus_context.set_deadline(bus_context.now() + 0.5)
        try:
            reply = await bus.request(subject, Echo(text="nested"), EchoReply, timeout=30)
            assert reply.deadline_left is not None and reply.deadline_left <= 0.5
        finally:
            bus_context.reset_deadline(token)
        token = bus_context.set_deadline(bus_context.now() - 1)
        try:
            with pytest.raises(RemoteError) as gone:
                await bus.request(subject, Echo(text="too late"), EchoReply)
            assert gone.value.code == ErrorCode.DEADLINE_EXCEEDED
        finally:
            bus_context.reset_deadline(token)
    finally:
        await svc.stop()


async def test_one_subscription_handles_requests_concurrently_within_its_bound(nats_url, bus, subject):
    svc = make_service(nats_url, subject, max_concurrency=4)
    await svc.start()
    try:
        replies = await asyncio.gather(*(bus.request(subject, Echo(text=str(i), sleep_s=0.1), EchoReply) for i in range(12)))
        assert sorted(int(r.text) for r in replies) == list(range(12))
        assert svc.peak == 4  # concurrent, and never past the bound
    finally:
        await svc.stop()


async def test_queue_group_spreads_requests_over_replicas(nats_url, bus, subject):
    a = make_service(nats_url, subject, instance="a")
    b = make_service(nats_url, subject, instance="b")
    await a.start()
    await b.start()
    try:
        # concurrent requests, then (bounded) one at a time until both have answered: the server picks a member at
        # random, and a burst read in one go once went to one member only (on a loaded machine)
        replies = await asyncio.gather(*(bus.request(subject, Echo(text="x", sleep_s=0.01), EchoReply) for _ in range(60)))
        seen = {r.instance for r in replies}
        for _ in range(200):
            if seen == {"a", "b"}:
                break
            seen.add((await bus.request(subject, Echo(text="x"), EchoReply)).instance)
        assert seen == {"a", "b"}
        # one replica gone: requests still answered by the other
        await a.stop()
        replies = await asyncio.gather(*(bus.request(subject, Echo(text="y"), EchoReply) for _ in range(10)))
        assert {r.instance for r in replies} == {"b"}
    finally:
        await b.stop()


async def test_trace_context_crosses_the_hop(nats_url, bus, subject, spans):
    from meshward.bus import tracer

    svc = make_service(nats_url, subject)
    await svc.start()
    try:
        with tracer("test").start_as_current_span("caller") as root:
            await bus.request(subject, Echo(text="t"), EchoReply)
        trace_id = root.get_span_context().trace_id
    finally:
        await svc.stop()
    mine = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
    client = next(s for s in mine if s.kind == SpanKind.CLIENT and s.name == f"send {subject}")
    server = next(s for s in mine if s.kind == SpanKind.SERVER and s.name == f"process {subject}")
    assert client.parent.span_id == root.get_span_context().span_id
    assert server.parent.span_id == client.context.span_id


async def test_health_subject_reports_readiness(nats_url, bus):
    from meshward.contracts import HealthReply, HealthRequest

    svc = Service("probe-" + uuid.uuid4().hex[:6], BusSettings(nats_url=nats_url))
    svc.details["k"] = "v"
    await svc.start()
    try:
        reply = await bus.request(subjects.health(svc.name), HealthRequest(), HealthReply)
        assert reply.ready and reply.service == svc.name and reply.details == {"k": "v"}
    finally:
        await svc.stop()


async def test_graceful_stop_finishes_in_flight_requests(nats_url, bus, subject):
    svc = make_service(nats_url, subject)
    await svc.start()
    pending = [asyncio.create_task(bus.request(subject, Echo(text=str(i), sleep_s=0.3), EchoReply)) for i in range(5)]
    await asyncio.sleep(0.1)
    await svc.stop()
    replies = await asyncio.gather(*pending)
    assert sorted(r.text for r in replies) == [str(i) for i in range(5)]


async def test_events_are_published_with_ack_deduplicated_and_consumed_durably(bus):
    await bus.ensure_event_stream()
    durable = "test-" + uuid.uuid4().hex[:8]
    thread = uuid.uuid4().hex
    got: list[str] = []

    async def handler(subject: str, data: bytes) -> None:
        event = ToolCalled.model_validate_json(data)
        if event.thread_id == thread:
            if event.name == "flaky" and event.event_id not in got:
                got.append(event.event_id)
                raise RuntimeError("first delivery fails")  # redelivered later
            got.append(event.event_id)

    events = [ToolCalled(name=n, ok=True, duration_ms=1.0, thread_id=thread) for n in ("calculator", "flaky", "plot")]
    for e in events:
        await bus.publish_event(subjects.EVENT_TOOL_CALLED, e)
    await bus.publish_event(subjects.EVENT_TOOL_CALLED, events[0])  # a duplicate publish is dropped by JetStream
    consumer = EventConsumer(bus, durable, handler, filter_subject=subjects.EVENT_TOOL_CALLED)
    await consumer.start()
    try:
        for _ in range(100):
            if len(got) >= 4:
                break
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()
        await bus.jetstream.delete_consumer(subjects.EVENTS_STREAM, durable)
    ids = [e.event_id for e in events]
    assert got.count(ids[0]) == 1 and got.count(ids[2]) == 1
    assert got.count(ids[1]) == 2  # failed once, redelivered, then handled


async def test_start_up_waits_for_nats_with_backoff_and_then_serves(tmp_path, bus):
    """A service started before its server retries (logged, not ready) and serves once the server is up."""
    from meshward.contracts import HealthReply, HealthRequest
    from meshward.devstack.nats_server import EmbeddedNats, free_port

    port = free_port()
    svc = Service("late-" + uuid.uuid4().hex[:6], BusSettings(nats_url=f"nats://127.0.0.1:{port}", nats_connect_backoff_max_s=0.2))
    starting = asyncio.create_task(svc.start())
    with EmbeddedNats(tmp_path / "late", port=port) as server:
        await asyncio.wait_for(starting, 30)
        try:
            late = await Bus.connect(BusSettings(nats_url=server.url))
            try:
                reply = await late.request(subjects.health(svc.name), HealthRequest(), HealthReply)
                assert reply.ready
            finally:
                await late.close()
        finally:
            await svc.stop()


async def test_start_up_gives_up_after_the_configured_attempts_and_leaks_nothing():
    from meshward.devstack.nats_server import free_port

    svc = Service("nowhere", BusSettings(nats_url=f"nats://127.0.0.1:{free_port()}", nats_connect_attempts=2, nats_connect_backoff_max_s=0.1))
    built = []

    @svc.build
    async def build(_svc, stack):
        built.append(1)

    with pytest.raises(ConnectionError, match="cannot reach NATS"):
        await svc.start()
    assert not built and svc.bus is None


async def test_a_failed_build_closes_the_connection(nats_url):
    svc = Service("broken-" + uuid.uuid4().hex[:6], BusSettings(nats_url=nats_url))
    closed = []

    @svc.build
    async def build(_svc, stack):
        stack.callback(closed.append, "resource")
        raise RuntimeError("model missing")

    with pytest.raises(RuntimeError, match="model missing"):
        await svc.start()
    assert closed == ["resource"] and svc.bus.nc.is_closed


async def test_stop_also_answers_requests_still_queued_behind_the_bound(nats_url, bus, subject):
    svc = make_service(nats_url, subject, max_concurrency=1)
    await svc.start()
    pending = [asyncio.create_task(bus.request(subject, Echo(text=str(i), sleep_s=0.1), EchoReply)) for i in range(4)]
    while svc.active == 0:  # the first is running, the others wait behind the bound of 1
        await asyncio.sleep(0.01)
    await svc.stop()
    replies = await asyncio.gather(*pending)
    assert sorted(r.text for r in replies) == ["0", "1", "2", "3"] and svc.peak == 1


SIGTERM_CHILD = """
import asyncio, sys
from meshward.bus import BusSettings, Service, run_service
from meshward.contracts import Message

class Slow(Message):
    text: str

svc = Service("sigterm", BusSettings(nats_url=sys.argv[1], drain_timeout_s=10))

@svc.handler(sys.argv[2], Slow)
async def slow(req: Slow) -> Slow:
    print("handling", flush=True)
    await asyncio.sleep(0.5)
    return Slow(text="done " + req.text)

run_service(svc)
"""


async def test_sigterm_drains_in_flight_work_and_exits_cleanly(nats_url, bus, subject):
    import signal
    import sys

    from meshward.contracts import HealthReply, HealthRequest

    class Slow(Message):
        text: str

    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", SIGTERM_CHILD, nats_url, subject, stdout=asyncio.subprocess.PIPE)
    try:
        for _ in range(200):  # until it serves
            try:
                if (await bus.request(subjects.health("sigterm"), HealthRequest(), HealthReply, timeout=0.5)).ready:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                await asyncio.sleep(0.05)
        reply = asyncio.create_task(bus.request(subject, Slow(text="x"), Slow, timeout=10))
        assert (await proc.stdout.readline()).strip() == b"handling"
        proc.send_signal(signal.SIGTERM)
        assert (await reply).text == "done x"
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_request_cut_by_a_server_restart_is_sent_again_at_once(tmp_path):
    """The server restarts while a handler works: the reply to that delivery can never arrive, so the caller
    re-sends on reconnect and the second delivery answers, long before the request's own deadline."""
    from meshward.devstack.nats_server import EmbeddedNats

    subject = f"meshward.v1.test.{uuid.uuid4().hex[:8]}"
    deliveries: list[str] = []
    first_started = asyncio.Event()
    with EmbeddedNats(tmp_path / "nats") as server:
        svc = Service("cut-" + uuid.uuid4().hex[:6], BusSettings(nats_url=server.url))

        @svc.handler(subject, Echo)
        async def echo(req: Echo) -> EchoReply:
            deliveries.append(req.text)
            if len(deliveries) == 1:
                first_started.set()
                await asyncio.Event().wait()  # the first delivery never answers
            return EchoReply(text=req.text, instance=f"delivery {len(deliveries)}")

        await svc.start()
        caller = await Bus.connect(BusSettings(nats_url=server.url))
        try:
            pending = asyncio.create_task(caller.request(subject, Echo(text="hi"), EchoReply, timeout=60, retries=100))
            await asyncio.wait_for(first_started.wait(), 10)
            server.stop()
            server.start()
            reply = await asyncio.wait_for(pending, 50)  # without the re-send it waits out its 60 s deadline
            assert reply.text == "hi" and reply.instance.startswith("delivery ") and len(deliveries) >= 2
        finally:
            await caller.close()
            await svc.stop()


async def test_a_request_cut_too_often_is_a_typed_error():
    from meshward.bus.client import MAX_RESENDS, _ConnectionCut

    class Cutting(Bus):
        def __init__(self):
            self.settings = BusSettings()
            self.sends = 0

        async def _roundtrip(self, subject, payload, headers, until):
            self.sends += 1
            raise _ConnectionCut

    bus = Cutting()
    with pytest.raises(RemoteError) as e:
        await bus.request("meshward.v1.x", Echo(text="a"), EchoReply, timeout=5)
    assert e.value.error.code == ErrorCode.UNAVAILABLE and "connection to NATS dropped" in e.value.error.message
    assert bus.sends == MAX_RESENDS + 1


async def test_an_unanswered_idempotent_request_is_sent_again_after_its_attempt_timeout(nats_url, bus, subject):
    """A replica killed while handling a request never answers it; an idempotent caller sends it again after the
    attempt timeout (here to a replica that answers) instead of waiting out the whole timeout."""
    import nats

    nc = await nats.connect(nats_url)
    seen: list[bytes] = []

    async def first_lost(msg):
        seen.append(msg.data)
        if len(seen) > 1:  # the first request is lost, as with a replica that died holding it
            await msg.respond(EchoReply(text="again", instance="raw").model_dump_json().encode())

    await nc.subscribe(subject, cb=first_lost)
    await nc.flush()
    try:
        started = asyncio.get_running_loop().time()
        reply = await bus.request(subject, Echo(text="idempotent"), EchoReply, timeout=10, attempt_timeout=0.3)
        assert reply.text == "again" and len(seen) == 2 and seen[0] == seen[1]
        assert asyncio.get_running_loop().time() - started < 10  # well inside the timeout it would have waited out
        # without an attempt timeout the lost request is a typed deadline error after the whole timeout
        seen.clear()
        with pytest.raises(RemoteError) as e:
            await bus.request(subject, Echo(text="once"), EchoReply, timeout=0.5)
        assert e.value.code == ErrorCode.DEADLINE_EXCEEDED and len(seen) == 1
        # and a request never answered stops after MAX_RESENDS re-sends, within its timeout
        await nc.close()
        nc = await nats.connect(nats_url)
        swallowed: list[bytes] = []

        async def never(msg):
            swallowed.append(msg.data)

        await nc.subscribe(subject, cb=never)
        await nc.flush()
        from meshward.bus.client import MAX_RESENDS

        with pytest.raises(RemoteError) as e:
            await bus.request(subject, Echo(text="lost"), EchoReply, timeout=5, attempt_timeout=0.1)
        assert e.value.code == ErrorCode.DEADLINE_EXCEEDED and len(swallowed) == MAX_RESENDS + 1
        assert f"left {MAX_RESENDS + 1} attempts of 0.10s each unanswered" in e.value.error.message
    finally:
        await nc.close()
