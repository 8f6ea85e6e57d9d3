"""The run manager (create, cancel, follow runs; threads) and the worker that executes runs.

A run is a record in KV and a message on the JetStream work queue: whichever replica's worker takes
the message executes it, once (the message is acked at the end; a replica that dies stops sending
in-progress heartbeats and the queue redelivers the run to another). Runs of one thread execute in
order: the thread record's `queue` lists them and only its head runs. Stream events go out on core
NATS (`runs.events.<run_id>`) to whichever replica holds the client's connection."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from meshward.contracts import subjects
from meshward.contracts.subjects import HDR_MSG_ID
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError

from .. import credentials
from . import views
from .models import RunCreate
from .store import ACTIVE, MAX_RUNS_KEPT, Conflict, NotFound, Record, RunStore, now
from .stream import RunStream

log = logging.getLogger(__name__)
END = "__end__"  # the control event closing a run's event subject; never sent to clients
MAX_ATTEMPTS = 3  # a run whose replica died is taken over at most this many times
TURN_RETRY_S = 0.5  # a run behind another on its thread goes back to the queue for this long


class NoPendingInterrupt(Exception):
    pass


def config_of(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def run_view(run: Record) -> dict[str, Any]:
    return {k: run.get(k) for k in ("run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status", "metadata", "multitask_strategy", "kwargs")}


class Follower:
    """A subscription to one run's events, opened before the run can emit any."""

    def __init__(self):
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=10_000)
        self.sub = None

    async def _on(self, msg) -> None:
        try:
            item = json.loads(msg.data)
            self.queue.put_nowait((item["event"], item.get("data")))
        except (ValueError, KeyError, asyncio.QueueFull):
            log.warning("run event dropped on %s", msg.subject)

    async def close(self) -> None:
        if self.sub is not None:
            with contextlib.suppress(Exception):
                await self.sub.unsubscribe()
            self.sub = None


class RunManager:
    def __init__(self, bus, store: RunStore, graph, *, run_deadline_s: float, max_question_chars: int):
        self.max_question_chars = max_question_chars
        self.bus = bus
        self.nc = bus.nc
        self.js = bus.jetstream
        self.store = store
        self.graph = graph
        self.run_deadline_s = run_deadline_s

    # -- threads -----------------------------------------------------------
    async def _has_checkpoint(self, thread_id: str) -> bool:
        return await self.graph.checkpointer.aget_tuple(config_of(thread_id)) is not None

    async def thread_record(self, thread_id: str, *, adopt: bool = True) -> Record:
        """The thread's record; a thread that /v1/ask started (a checkpoint, no record yet) is adopted."""
        record = await self.store.thread(thread_id)
        if record is None:
            if not adopt or not await self._has_checkpoint(thread_id):
                raise NotFound(f"thread {thread_id}")
            record = await self.store.create_thread(thread_id, {}, exist_ok=True)
        return record

    async def create_thread(self, thread_id: str | None, metadata: dict | None, if_exists: str) -> dict[str, Any]:
        thread_id = thread_id or str(uuid.uuid4())
        if await self.store.thread(thread_id) is None and await self._has_checkpoint(thread_id):
            if if_exists == "raise":
                raise Conflict(f"thread {thread_id} already exists")
        record = await self.store.create_thread(thread_id, metadata, exist_ok=if_exists == "do_nothing")
        return await self.thread_view(record)

    async def _status(self, record: Record, snapshot) -> str:
        if record.get("queue"):
            return "busy"
        if snapshot is not None and snapshot.interrupts:
            return "interrupted"
        last = record["runs"][-1] if record.get("runs") else None
        if last and (run := await self.store.run(last)) and run.get("status") == "error":
            return "error"
        return "idle"

    async def thread_view(self, record: Record) -> dict[str, Any]:
        thread_id = record["thread_id"]
        snapshot = await self.graph.aget_state(config_of(thread_id)) if await self._has_checkpoint(thread_id) else None
        state = views.thread_state(snapshot, thread_id) if snapshot is not None else views.empty_state(thread_id)
        return {
            "thread_id": thread_id, "created_at": record["created_at"], "updated_at": record["updated_at"],
            "metadata": record.get("metadata") or {}, "status": await self._status(record, snapshot),
            "values": state["values"],
            "interrupts": {t["id"]: t["interrupts"] for t in state["tasks"] if t["interrupts"]},
        }

    async def get_thread(self, thread_id: str) -> dict[str, Any]:
        return await self.thread_view(await self.thread_record(thread_id))

    async def search_threads(self, *, ids, metadata, status, limit: int, offset: int, sort_by, sort_order) -> list[dict[str, Any]]:
        records = []
        for thread_id in ids if ids is not None else await self.store.thread_ids():
            record = await self.store.thread(thread_id)
            if record is None:
                continue
            if metadata and any(record.get("metadata", {}).get(k) != v for k, v in metadata.items()):
                continue
            records.append(record)
        key = sort_by or "created_at"
        records.sort(key=lambda r: str(r.get(key, "")), reverse=(sort_order or "desc") == "desc")
        if status is None:  # views (a state read each) only for the page
            return [await self.thread_view(r) for r in records[offset : offset + limit]]
        out = []
        for record in records:
            view = await self.thread_view(record)
            if view["status"] == status:
                out.append(view)
                if len(out) >= offset + limit:
                    break
        return out[offset : offset + limit]

    async def delete_thread(self, thread_id: str) -> None:
        record = await self.thread_record(thread_id)
        for run_id in record.get("queue") or []:
            with contextlib.suppress(NotFound):
                await self.cancel(thread_id, run_id)
        await self.graph.checkpointer.adelete_thread(thread_id)
        for run_id in record.get("runs") or []:
            await self.store.delete_run(run_id)
        await self.store.delete_thread(thread_id)

    async def state(self, thread_id: str) -> dict[str, Any]:
        await self.thread_record(thread_id)
        if not await self._has_checkpoint(thread_id):
            return views.empty_state(thread_id)
        return views.thread_state(await self.graph.aget_state(config_of(thread_id)), thread_id)

    async def history(self, thread_id: str, limit: int) -> list[dict[str, Any]]:
        await self.thread_record(thread_id)
        return [views.thread_state(s, thread_id) async for s in self.graph.aget_state_history(config_of(thread_id), limit=limit)]

    # -- runs --------------------------------------------------------------
    async def follow(self, run_id: str) -> Follower:
        follower = Follower()
        follower.sub = await self.nc.subscribe(subjects.run_events(run_id), cb=follower._on)
        return follower

    async def create(self, thread_id: str, body: RunCreate, principal: str, *, run_id: str | None = None) -> Record:
        if body.if_not_exists == "create" and await self.store.thread(thread_id) is None and not await self._has_checkpoint(thread_id):
            await self.store.create_thread(thread_id, {}, exist_ok=True)
        await self.thread_record(thread_id)
        kwargs: dict[str, Any] = {"stream_mode": body.modes}
        if body.command is not None:
            snapshot = await self.graph.aget_state(config_of(thread_id)) if await self._has_checkpoint(thread_id) else None
            if snapshot is None or not snapshot.interrupts:
                raise NoPendingInterrupt(f"thread {thread_id} has no pending interrupt to resume")
            resume = body.command.resume
            if isinstance(resume, dict):
                resume = {**resume, "actor": principal}  # who decided: the authenticated caller, never the body
            kwargs["resume"] = resume
        else:
            # secrets in the question never reach the queue or the records: the placeholders do
            kwargs["question"], _ = credentials.redact(body.question())
        if body.multitask_strategy == "interrupt":
            record = await self.store.thread(thread_id) or {}
            for active in record.get("queue") or []:
                with contextlib.suppress(NotFound):
                    await self.cancel(thread_id, active)
        stamp = now()
        run = {
            "run_id": run_id or str(uuid.uuid4()), "thread_id": thread_id, "assistant_id": views.ASSISTANT_ID,
            "created_at": stamp, "updated_at": stamp, "status": "pending", "metadata": body.metadata or {},
            "multitask_strategy": body.multitask_strategy, "kwargs": kwargs, "attempts": 0, "cancel_requested": False,
            "on_disconnect": body.on_disconnect,
        }
        await self.store.put_run(run)

        def enqueue(record: Record) -> Record:
            if body.multitask_strategy == "reject" and record.get("queue"):
                raise Conflict(f"thread {thread_id} is busy with run {record['queue'][0]}; retry when it ends or use multitask_strategy enqueue or interrupt")
            record["queue"] = [*record.get("queue", []), run["run_id"]]
            record["runs"] = [*record.get("runs", []), run["run_id"]][-MAX_RUNS_KEPT:]
            return record

        try:
            await self.store.mutate_thread(thread_id, enqueue)
        except Conflict:
            await self.store.delete_run(run["run_id"])
            raise
        await self.js.publish(subjects.RUNS_QUEUE, run["run_id"].encode(), headers={HDR_MSG_ID: run["run_id"]})
        return run

    async def run(self, thread_id: str, run_id: str) -> Record:
        run = await self.store.run(run_id)
        if run is None or run["thread_id"] != thread_id:
            raise NotFound(f"run {run_id} on thread {thread_id}")
        return run

    async def list_runs(self, thread_id: str, limit: int, offset: int, status: str | None) -> list[Record]:
        record = await self.thread_record(thread_id)
        runs = [r for rid in reversed(record.get("runs") or []) if (r := await self.store.run(rid)) is not None]
        if status:
            runs = [r for r in runs if r["status"] == status]
        return runs[offset : offset + limit]

    async def cancel(self, thread_id: str, run_id: str) -> Record:
        await self.run(thread_id, run_id)
        was_pending = False

        def change(run: Record) -> Record | None:
            nonlocal was_pending
            was_pending = run["status"] == "pending"
            if was_pending:
                return {**run, "status": "interrupted", "cancel_reason": "cancelled before it started"}
            if run["status"] == "running":
                return {**run, "cancel_requested": True}
            return None

        run = await self.store.mutate_run(run_id, change)
        if was_pending:
            await self.store.mutate_thread(thread_id, lambda r: {**r, "queue": [q for q in r.get("queue", []) if q != run_id]})
            await self.nc.publish(subjects.run_events(run_id), json.dumps({"event": END, "data": {"status": "interrupted"}}).encode())
        elif run["status"] == "running":
            await self.nc.publish(subjects.RUNS_CANCEL, run_id.encode())
        return run

    async def events(self, follower: Follower, run_id: str) -> AsyncIterator[tuple[str, Any]]:
        """The run's events until it ends. The record is read now and then as well: a run that ended
        before the subscription, or whose end event was lost with a replica, still ends the loop."""
        deadline = asyncio.get_running_loop().time() + self.run_deadline_s
        while True:
            try:
                event, data = await asyncio.wait_for(follower.queue.get(), timeout=2.0)
            except TimeoutError:
                run = await self.store.run(run_id)
                if run is None or run["status"] not in ACTIVE or asyncio.get_running_loop().time() > deadline:
                    # drain what already arrived, then stop
                    while not follower.queue.empty():
                        event, data = follower.queue.get_nowait()
                        if event == END:
                            return
                        yield event, data
                    return
                continue
            if event == END:
                return
            yield event, data

    async def join(self, thread_id: str, run_id: str) -> dict[str, Any]:
        """Wait for the run to end; the thread's values then (`__error__` for a failed run)."""
        await self.run(thread_id, run_id)
        follower = await self.follow(run_id)
        try:
            run = await self.store.run(run_id)
            if run is not None and run["status"] in ACTIVE:
                async for _ in self.events(follower, run_id):
                    pass
        finally:
            await follower.close()
        return await self.result(thread_id, run_id)

    async def result(self, thread_id: str, run_id: str) -> dict[str, Any]:
        run = await self.run(thread_id, run_id)
        if run["status"] == "error":
            return {"__error__": {"error": "RunError", "message": run.get("error") or "the run failed"}}
        return (await self.state(thread_id))["values"]


class RunWorker:
    """Takes runs off the work queue and executes them through the Asker."""

    def __init__(self, bus, store: RunStore, asker, *, instance: str, max_concurrent: int, ack_wait_s: float):
        self.bus = bus
        self.nc = bus.nc
        self.js = bus.jetstream
        self.store = store
        self.asker = asker
        self.instance = instance
        self.ack_wait_s = ack_wait_s
        self._slots = asyncio.Semaphore(max_concurrent)
        self._running: dict[str, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self._loop_task: asyncio.Task | None = None
        self._stopping = asyncio.Event()

    @staticmethod
    async def ensure_queue(js, ack_wait_s: float) -> None:
        config = StreamConfig(name=subjects.RUNS_STREAM, subjects=[subjects.RUNS_QUEUE], retention=RetentionPolicy.WORK_QUEUE,
                              storage=StorageType.FILE, duplicate_window=120.0)
        try:
            await js.add_stream(config)
        except BadRequestError:
            await js.update_stream(config)

    async def start(self) -> None:
        await self.ensure_queue(self.js, self.ack_wait_s)
        consumer = ConsumerConfig(durable_name=subjects.RUNS_CONSUMER, ack_policy=AckPolicy.EXPLICIT, ack_wait=self.ack_wait_s, max_deliver=-1)
        await self.js.add_consumer(subjects.RUNS_STREAM, consumer)  # creates it, or updates a changed ack_wait
        self._sub = await self.js.pull_subscribe_bind(durable=subjects.RUNS_CONSUMER, stream=subjects.RUNS_STREAM)
        self._cancels = await self.nc.subscribe(subjects.RUNS_CANCEL, cb=self._on_cancel)
        self._loop_task = asyncio.create_task(self._loop(), name="agent-protocol-runs")

    async def stop(self) -> None:
        self._stopping.set()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
        # runs in flight are left unacked: the queue hands them to another replica
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        with contextlib.suppress(Exception):
            await self._cancels.unsubscribe()
        with contextlib.suppress(Exception):
            await self._sub.unsubscribe()

    async def _on_cancel(self, msg) -> None:
        task = self._running.get(msg.data.decode(errors="replace"))
        if task is not None:
            task.cancel()

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            await self._slots.acquire()
            try:
                msgs = await self._sub.fetch(1, timeout=1.0)
            except NatsTimeout:
                self._slots.release()
                continue
            except Exception as e:  # noqa: BLE001 - reconnecting; try again shortly
                self._slots.release()
                if self._stopping.is_set():
                    return
                log.warning("run queue fetch failed: %s", e)
                await asyncio.sleep(0.5)
                continue
            task = asyncio.create_task(self._handle(msgs[0]))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _heartbeat(self, msg) -> None:
        while True:
            await asyncio.sleep(self.ack_wait_s / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _publish(self, run_id: str, event: str, data: Any) -> None:
        payload = json.dumps({"event": event, "data": data}, ensure_ascii=False, default=str).encode()
        if len(payload) > self.nc.max_payload:
            log.warning("%s event of run %s is %d bytes, over the bus's limit; not streamed", event, run_id, len(payload))
            return
        await self.nc.publish(subjects.run_events(run_id), payload)

    async def _my_turn(self, run: Record) -> bool:
        """True when the run heads its thread's queue; finished runs left at the head are dropped."""
        while True:
            record = await self.store.thread(run["thread_id"])
            queue = (record or {}).get("queue") or []
            if not queue or queue[0] == run["run_id"]:
                return True
            head = await self.store.run(queue[0])
            if head is not None and head["status"] in ACTIVE:
                return False
            await self.store.mutate_thread(run["thread_id"], lambda r, h=queue[0]: {**r, "queue": r["queue"][1:]} if r.get("queue", [None])[0] == h else None)

    async def _handle(self, msg) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(msg))
        try:
            run_id = msg.data.decode(errors="replace")
            run = await self.store.run(run_id)
            if run is None or run["status"] not in ACTIVE:
                await msg.ack()
                return
            if not await self._my_turn(run):
                await msg.nak(delay=TURN_RETRY_S)
                return
            claimed = False

            def claim(r: Record) -> Record | None:
                nonlocal claimed
                if r["status"] not in ACTIVE:
                    return None
                claimed = True
                if r["attempts"] >= MAX_ATTEMPTS:
                    return {**r, "status": "error", "error": f"the run was started {MAX_ATTEMPTS} times and never finished"}
                return {**r, "status": "running", "attempts": r["attempts"] + 1, "worker": self.instance}

            run = await self.store.mutate_run(run_id, claim)
            if claimed and run["status"] == "running":
                await self._execute(run)
            else:
                await self._finished(run)
            await msg.ack()
        except asyncio.CancelledError:
            raise  # shutting down: unacked, redelivered to another replica
        except Exception:  # noqa: BLE001 - back to the queue
            log.exception("run %s could not be handled; it goes back to the queue", msg.data[:64])
            with contextlib.suppress(Exception):
                await msg.nak(delay=1.0)
        finally:
            heartbeat.cancel()

    async def _execute(self, run: Record) -> None:
        run_id, thread_id, kwargs = run["run_id"], run["thread_id"], run["kwargs"]

        async def publish(event: str, data: Any) -> None:
            await self._publish(run_id, event, data)

        stream = RunStream(publish, run_id, thread_id, kwargs.get("stream_mode") or ["values"])

        async def execute():
            if "resume" in kwargs and not (await self.asker.graph.aget_state(config_of(thread_id))).interrupts:
                # a resume queued behind another that already answered the interrupt
                raise NoPendingInterrupt(f"thread {thread_id} has no pending interrupt to resume any more")
            await stream.start()
            state, _ = await self.asker.execute(thread_id, question=kwargs.get("question"), resume=kwargs.get("resume"), on_chunk=stream.chunk, run_id=run_id)
            await stream.finish(state)
            return state

        task = asyncio.create_task(execute())
        self._running[run_id] = task
        try:
            if (await self.store.run(run_id) or {}).get("cancel_requested"):
                task.cancel()
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()  # this replica is stopping: the run stops here and the queue hands it on
            await asyncio.wait({task}, timeout=5)  # stopped before another replica can take it
            raise
        finally:
            self._running.pop(run_id, None)
        if task.cancelled():
            if self._stopping.is_set():
                raise asyncio.CancelledError
            update = {"status": "interrupted", "cancel_reason": "cancelled"}
        elif isinstance(error := task.exception(), NoPendingInterrupt):
            update = {"status": "error", "error": str(error)}
            await publish("error", {"error": "NoPendingInterrupt", "message": update["error"]})
        elif error is not None:
            log.error("run %s failed: %s", run_id, error, exc_info=error)
            update = {"status": "error", "error": f"{type(error).__name__}: the run failed; the supervisor's log has the trace"}
            await publish("error", {"error": type(error).__name__, "message": update["error"]})
        else:
            update = {"status": "interrupted" if task.result().get("__interrupt__") else "success"}
        run = await self.store.mutate_run(run_id, lambda r: {**r, **update})
        await self._finished(run)

    async def _finished(self, run: Record) -> None:
        run_id = run["run_id"]
        with contextlib.suppress(NotFound):
            await self.store.mutate_thread(run["thread_id"], lambda r: {**r, "queue": [q for q in r.get("queue", []) if q != run_id]} if run_id in r.get("queue", []) else None)
        await self.nc.publish(subjects.run_events(run_id), json.dumps({"event": END, "data": {"status": run["status"]}}).encode())
