"""Many deadlines, one event-loop timer."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Callable, Hashable


class Deadlines:
    """Calls `on_expiry(key)` for each key still registered when its deadline (loop time) passes.

    Requests nearly always finish long before their deadline, yet a timer each (asyncio.timeout,
    wait_for) costs a handle, a heap push and a cancel per request: a good share of a fast hop.
    Here a request costs a dict entry and a C-level heap push, and a single timer is armed at the
    earliest live deadline. Entries of finished requests stay in the heap until they surface (or
    the heap is compacted), so removal is O(1).
    """

    def __init__(self, on_expiry: Callable[[Hashable], None]):
        self._on_expiry = on_expiry
        self._live: dict[Hashable, float] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._order = itertools.count()  # tie-breaker: keys need not be comparable
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for = math.inf

    def add(self, key: Hashable, when: float) -> None:
        self._live[key] = when
        heapq.heappush(self._heap, (when, next(self._order), key))
        if when < self._armed_for:
            self._arm(when)

    def discard(self, key: Hashable) -> None:
        if self._live.pop(key, None) is not None and len(self._heap) > 2 * len(self._live) + 256:
            self._heap = [(when, next(self._order), key) for key, when in self._live.items()]
            heapq.heapify(self._heap)

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_for = when
        self._timer = asyncio.get_running_loop().call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer, self._armed_for = None, math.inf
        now = asyncio.get_running_loop().time()
        heap, live = self._heap, self._live
        expired = []
        while heap and (heap[0][0] <= now or live.get(heap[0][2]) != heap[0][0]):
            when, _, key = heapq.heappop(heap)
            if live.get(key) == when:
                del live[key]
                expired.append(key)
        if heap:
            self._arm(heap[0][0])
        for key in expired:
            self._on_expiry(key)
