"""Group commit: concurrent writers share one write (one transaction, one embedding call).

    commit = GroupCommit(store.record_events, max_batch=256)
    await commit.submit(event)      # returns once the write holding it has succeeded; raises what it raised

A submit that finds the writer idle is written at once; while a write runs, later submits queue and go
together in the next one, so batches grow with the load and cost nothing when there is none. With
`linger_s`, a batch waits that long for company unless it fills first: for writes whose fixed cost dwarfs
the per-item cost (a Chroma upsert), paid in latency by what waits on them. The consumer acknowledges an
event only after its submit returns, so a crash loses nothing.
"""
from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class GroupCommit(Generic[T]):
    def __init__(
        self, write: Callable[[Sequence[T]], Awaitable[object]], *, max_batch: int = 256, name: str = "write", linger_s: float = 0.0
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be >= 1")
        if linger_s < 0:
            raise ValueError("linger_s must be >= 0")
        self._write = write
        self.max_batch = max_batch
        self.linger_s = linger_s
        self._full = asyncio.Event()
        self.name = name
        self._queue: deque[tuple[T, asyncio.Future[None]]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0
        self.items = 0

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def submit(self, item: T) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if len(self._queue) >= self.max_batch:
            self._full.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run(), name=f"group-commit-{self.name}")
        await future

    async def _run(self) -> None:
        while self._queue:
            if self.linger_s and len(self._queue) < self.max_batch:
                self._full.clear()
                try:
                    await asyncio.wait_for(self._full.wait(), self.linger_s)
                except TimeoutError:
                    pass
            batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
            batch = [(item, fut) for item, fut in batch if not fut.done()]  # callers that gave up
            if not batch:
                continue
            try:
                await self._write([item for item, _ in batch])
            except Exception as exc:  # noqa: BLE001 - every writer of this batch gets it (and retries by redelivery)
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
            else:
                self.batches += 1
                self.items += len(batch)
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(None)
