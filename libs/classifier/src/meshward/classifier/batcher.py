"""Dynamic micro-batching: concurrent requests share one inference, off the event loop.

    batcher = MicroBatcher(classify_many, max_batch_size=32, max_wait_ms=2.0)
    result = await batcher.submit(item, deadline=epoch_seconds_or_None)

A request that finds the worker idle is dispatched at once (with whatever arrived in the same loop turn): waiting
for company that is not coming only adds latency. Batches run one at a time on a dedicated worker thread (the
model's own thread pool does the parallel work), and while one runs the next one fills up, so under load batches
grow by themselves; only then (requests were already waiting when the previous batch finished) does the oldest
request wait at most ``max_wait_ms`` for more company, and a full batch goes at once. A request whose deadline has
passed, or whose caller gave up (cancelled), is dropped before inference; an expired one gets
:class:`DeadlineExceeded`. ``fn`` must return one result per item, in order.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from meshward.telemetry import metrics

__all__ = ["BatcherClosed", "BatcherStats", "DeadlineExceeded", "MicroBatcher"]

T = TypeVar("T")
R = TypeVar("R")


class DeadlineExceeded(TimeoutError):
    """The request's deadline passed before its batch ran."""


class BatcherClosed(RuntimeError):
    """submit() after close()."""


@dataclass
class BatcherStats:
    batches: int = 0
    items: int = 0
    expired: int = 0
    cancelled: int = 0
    largest: int = 0
    sizes: dict[int, int] = field(default_factory=dict)

    def record(self, size: int) -> None:
        self.batches += 1
        self.items += size
        self.largest = max(self.largest, size)
        self.sizes[size] = self.sizes.get(size, 0) + 1

    @property
    def mean_batch(self) -> float:
        return self.items / self.batches if self.batches else 0.0


@dataclass(slots=True)
class _Pending(Generic[T, R]):
    item: T
    future: asyncio.Future[R]
    deadline: float | None
    arrived: float


class MicroBatcher(Generic[T, R]):
    def __init__(self, fn: Callable[[list[T]], Sequence[R]], *, max_batch_size: int = 32, max_wait_ms: float = 2.0,
                 name: str = "classifier") -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if max_wait_ms < 0:
            raise ValueError("max_wait_ms must be >= 0")
        self._fn = fn
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_ms / 1000.0
        self.name = name
        self.stats = BatcherStats()
        self._queue: deque[_Pending[T, R]] = deque()
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-infer")
        self._closed = False

    async def submit(self, item: T, deadline: float | None = None) -> R:
        """Classify one item in the next batch; ``deadline`` is epoch seconds (as in meshward.bus.context)."""
        if self._closed:
            raise BatcherClosed(f"{self.name} batcher is closed")
        if deadline is not None and deadline <= time.time():
            self.stats.expired += 1
            raise DeadlineExceeded(f"{self.name}: the deadline passed before the request was queued")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append(_Pending(item, future, deadline, loop.time()))
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        self._wakeup.set()
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run(), name=f"{self.name}-batcher")
        return await future

    async def submit_many(self, items: Sequence[T], deadline: float | None = None) -> list[R]:
        return list(await asyncio.gather(*(self.submit(i, deadline) for i in items)))

    async def close(self) -> None:
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except (asyncio.CancelledError, Exception):
                pass
        for pending in self._queue:
            if not pending.future.done():
                pending.future.set_exception(BatcherClosed(f"{self.name} batcher closed"))
        self._queue.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ worker
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._wakeup is not None
        loaded = False  # requests were waiting when the previous batch finished
        while not self._closed:
            if not self._queue:
                loaded = False
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout=30.0)
                except TimeoutError:
                    if not self._queue:
                        return  # idle: the next submit starts a new worker
                continue
            # Under load only: wait for company until the oldest request has waited max_wait, unless the batch is full.
            while loaded and len(self._queue) < self.max_batch_size:
                left = self._queue[0].arrived + self.max_wait_s - loop.time()
                if left <= 0:
                    break
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout=left)
                except TimeoutError:
                    break
            batch = self._take()
            if not batch:
                continue
            try:
                started = time.perf_counter()
                results = await loop.run_in_executor(self._executor, self._fn, [p.item for p in batch])
                metrics.CLASSIFIER_BATCH_SIZE.labels(self.name).observe(len(batch))
                metrics.CLASSIFIER_INFERENCE_SECONDS.labels(self.name).observe(time.perf_counter() - started)
                if len(results) != len(batch):
                    raise RuntimeError(f"{self.name}: batch function returned {len(results)} results for {len(batch)} items")
            except Exception as exc:  # noqa: BLE001 - handed to every caller of this batch
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(exc)
            else:
                for p, result in zip(batch, results, strict=True):
                    if not p.future.done():
                        p.future.set_result(result)
            loaded = bool(self._queue)

    def _take(self) -> list[_Pending[T, R]]:
        now = time.time()
        batch: list[_Pending[T, R]] = []
        while self._queue and len(batch) < self.max_batch_size:
            p = self._queue.popleft()
            if p.future.done():  # the caller gave up (its own timeout or cancellation)
                self.stats.cancelled += 1
                continue
            if p.deadline is not None and p.deadline <= now:
                self.stats.expired += 1
                p.future.set_exception(DeadlineExceeded(f"{self.name}: the deadline passed while queued"))
                continue
            batch.append(p)
        if batch:
            self.stats.record(len(batch))
        return batch
