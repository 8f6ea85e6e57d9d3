"""GroupCommit: concurrent submits share one write; an idle submit is written at once; failures reach every writer."""
from __future__ import annotations

import asyncio

import pytest
from meshward.memory.ingest import GroupCommit


class Writes:
    def __init__(self, gate: asyncio.Event | None = None, fail_first: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.gate = gate
        self.fail_first = fail_first

    async def __call__(self, items):
        self.batches.append(list(items))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_first and len(self.batches) == 1:
            raise OSError("disk full")


async def test_idle_submit_is_written_alone_and_at_once():
    writes = Writes()
    commit = GroupCommit(writes)
    await commit.submit(1)
    await commit.submit(2)
    assert writes.batches == [[1], [2]]


async def test_submits_during_a_write_share_the_next_write_in_order():
    gate = asyncio.Event()
    writes = Writes(gate)
    commit = GroupCommit(writes, max_batch=3)
    first = asyncio.create_task(commit.submit(0))
    while not writes.batches:
        await asyncio.sleep(0.01)
    rest = [asyncio.create_task(commit.submit(i)) for i in range(1, 6)]
    while commit.pending < 5:
        await asyncio.sleep(0.01)
    gate.set()
    await asyncio.gather(first, *rest)
    assert writes.batches == [[0], [1, 2, 3], [4, 5]]
    assert commit.batches == 3 and commit.items == 6


async def test_a_failed_write_fails_each_of_its_writers_and_the_next_write_goes_on():
    writes = Writes(fail_first=True)
    commit = GroupCommit(writes)
    results = await asyncio.gather(commit.submit(1), commit.submit(2), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    await commit.submit(3)
    assert writes.batches == [[1, 2], [3]]


def test_invalid_batch():
    with pytest.raises(ValueError):
        GroupCommit(Writes(), max_batch=0)


async def test_a_lingering_batch_collects_the_submits_that_arrive_while_it_waits():
    writes = Writes()
    commit = GroupCommit(writes, linger_s=30.0, max_batch=64)
    first = asyncio.create_task(commit.submit(0))
    while commit._worker is None:  # the worker is lingering on the first item
        await asyncio.sleep(0)
    later = [asyncio.create_task(commit.submit(i)) for i in range(1, 4)]
    await asyncio.sleep(0)
    assert writes.batches == []  # nothing written yet: still waiting for company
    commit._full.set()  # what a full batch (or the linger's end) does
    await asyncio.wait_for(asyncio.gather(first, *later), 10)
    assert writes.batches == [[0, 1, 2, 3]]


async def test_a_full_batch_does_not_wait_out_the_linger():
    writes = Writes()
    commit = GroupCommit(writes, linger_s=3600.0, max_batch=3)
    await asyncio.wait_for(asyncio.gather(*(commit.submit(i) for i in range(3))), 10)
    assert writes.batches == [[0, 1, 2]]


async def test_a_short_linger_ends_and_writes_what_it_has():
    writes = Writes()
    commit = GroupCommit(writes, linger_s=0.01, max_batch=64)
    await asyncio.wait_for(commit.submit(7), 10)
    assert writes.batches == [[7]]
    with pytest.raises(ValueError, match="linger"):
        GroupCommit(writes, linger_s=-1)
