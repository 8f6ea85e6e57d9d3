"""MicroBatcher: concurrent requests share one call, off the event loop, with deadlines respected."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
from meshward.classifier import BatcherClosed, DeadlineExceeded, MicroBatcher


class Recorder:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[list[int]] = []
        self.threads: set[str] = set()
        self.delay = delay

    def __call__(self, items: list[int]) -> list[int]:
        self.calls.append(list(items))
        self.threads.add(threading.current_thread().name)
        if self.delay:
            time.sleep(self.delay)
        return [i * 10 for i in items]


async def test_concurrent_requests_share_one_call_and_keep_order():
    fn = Recorder()
    batcher = MicroBatcher(fn, max_batch_size=64, max_wait_ms=20)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(20)))
    assert results == [i * 10 for i in range(20)]
    assert fn.calls == [list(range(20))]
    assert batcher.stats.batches == 1 and batcher.stats.largest == 20
    await batcher.close()


async def test_max_batch_size_splits_batches():
    fn = Recorder()
    batcher = MicroBatcher(fn, max_batch_size=8, max_wait_ms=5)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(20)))
    assert results == [i * 10 for i in range(20)]
    assert [len(c) for c in fn.calls] == [8, 8, 4]
    await batcher.close()


async def test_inference_runs_off_the_event_loop():
    fn = Recorder(delay=0.2)
    batcher = MicroBatcher(fn, max_batch_size=4, max_wait_ms=0)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await batcher.submit(1)
    task.cancel()
    assert ticks >= 5  # the loop kept running while the model "computed" for 200 ms
    assert fn.threads and threading.current_thread().name not in fn.threads
    await batcher.close()


async def test_requests_arriving_during_inference_form_the_next_batch():
    fn = Recorder(delay=0.1)
    batcher = MicroBatcher(fn, max_batch_size=32, max_wait_ms=0)
    first = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.02)  # batch [0] is running now
    rest = await asyncio.gather(*(batcher.submit(i) for i in range(1, 6)))
    assert await first == 0 and rest == [10, 20, 30, 40, 50]
    assert fn.calls == [[0], [1, 2, 3, 4, 5]]
    await batcher.close()


async def test_single_request_waits_at_most_max_wait():
    batcher = MicroBatcher(Recorder(), max_batch_size=32, max_wait_ms=30)
    t = time.perf_counter()
    assert await batcher.submit(3) == 30
    assert time.perf_counter() - t < 0.5
    await batcher.close()


async def test_idle_request_is_dispatched_without_waiting_for_company():
    # a max wait of 10 minutes would hang this test if an idle batcher still waited for company
    fn = Recorder()
    batcher = MicroBatcher(fn, max_batch_size=32, max_wait_ms=600_000)
    assert await asyncio.wait_for(batcher.submit(3), timeout=60) == 30
    assert await asyncio.wait_for(batcher.submit(4), timeout=60) == 40
    assert fn.calls == [[3], [4]]
    await batcher.close()


async def test_under_load_the_next_batch_waits_for_company_up_to_max_wait():
    fn = Recorder(delay=0.05)
    batcher = MicroBatcher(fn, max_batch_size=4, max_wait_ms=600_000)
    first = asyncio.create_task(batcher.submit(0))
    await asyncio.sleep(0.01)  # batch [0] is running: the next requests find the batcher loaded
    rest = await asyncio.wait_for(asyncio.gather(*(batcher.submit(i) for i in range(1, 5))), timeout=60)
    assert await first == 0 and rest == [10, 20, 30, 40]
    assert fn.calls == [[0], [1, 2, 3, 4]]  # a full batch goes at once, without the max wait
    await batcher.close()


async def test_expired_deadline_is_a_typed_error_and_skips_inference():
    fn = Recorder()
    batcher = MicroBatcher(fn, max_batch_size=8, max_wait_ms=1)
    with pytest.raises(DeadlineExceeded):
        await batcher.submit(1, deadline=time.time() - 1)
    assert isinstance(DeadlineExceeded("x"), TimeoutError)
    # a deadline that passes while the request waits behind a slow batch
    slow = MicroBatcher(Recorder(delay=0.2), max_batch_size=1, max_wait_ms=0)
    first = asyncio.create_task(slow.submit(1))
    await asyncio.sleep(0.02)
    with pytest.raises(DeadlineExceeded):
        await slow.submit(2, deadline=time.time() + 0.05)
    assert await first == 10
    assert slow.stats.expired == 1
    assert fn.calls == []
    await batcher.close()
    await slow.close()


async def test_cancelled_callers_are_dropped_before_inference():
    fn = Recorder(delay=0.1)
    batcher = MicroBatcher(fn, max_batch_size=1, max_wait_ms=0)
    first = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.02)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await batcher.submit(2)
    assert await first == 10
    await asyncio.sleep(0.15)
    assert [1] in fn.calls and [2] not in fn.calls
    await batcher.close()


async def test_errors_reach_every_caller_of_the_batch_and_the_batcher_survives():
    calls = 0

    def flaky(items):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ValueError("boom")
        return items

    batcher = MicroBatcher(flaky, max_batch_size=8, max_wait_ms=5)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, ValueError) for r in results)
    assert await batcher.submit(7) == 7
    await batcher.close()


async def test_wrong_result_count_is_an_error():
    batcher = MicroBatcher(lambda items: items[:-1], max_batch_size=8, max_wait_ms=5)
    with pytest.raises(RuntimeError, match="returned"):
        await asyncio.gather(batcher.submit(1), batcher.submit(2))
    await batcher.close()


async def test_closed_batcher_refuses():
    batcher = MicroBatcher(Recorder(), max_batch_size=8, max_wait_ms=5)
    await batcher.close()
    with pytest.raises(BatcherClosed):
        await batcher.submit(1)


def test_invalid_settings():
    with pytest.raises(ValueError):
        MicroBatcher(Recorder(), max_batch_size=0)
    with pytest.raises(ValueError):
        MicroBatcher(Recorder(), max_wait_ms=-1)
