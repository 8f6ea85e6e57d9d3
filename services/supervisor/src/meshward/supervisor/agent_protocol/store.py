"""Thread and run records in JetStream KV buckets, shared by every supervisor replica.

Records change by compare-and-set on the key's revision (`mutate`), so replicas racing on one
thread's queue or one run's status never overwrite each other."""
from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from meshward.contracts import subjects
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError

log = logging.getLogger(__name__)
Record = dict[str, Any]
ACTIVE = ("pending", "running")
MAX_RUNS_KEPT = 100  # run ids a thread record lists (runs.list)
MAX_SCANNED_THREADS = 2_000  # threads.search reads at most this many records


class NotFound(Exception):
    pass


class Conflict(Exception):
    pass


def now() -> str:
    return datetime.now(UTC).isoformat()


def _key(thread_id: str) -> str:
    # KV keys allow [-/_=.A-Za-z0-9]; thread ids may also hold ':'
    return base64.urlsafe_b64encode(thread_id.encode()).decode()


async def _bucket(js, name: str):
    try:
        return await js.key_value(name)
    except BucketNotFoundError:
        return await js.create_key_value(KeyValueConfig(bucket=name, history=1, storage=StorageType.FILE))


class RunStore:
    def __init__(self, threads, runs):
        self.threads = threads
        self.runs = runs

    @classmethod
    async def open(cls, js) -> RunStore:
        return cls(await _bucket(js, subjects.RUNS_KV_THREADS), await _bucket(js, subjects.RUNS_KV_RUNS))

    @staticmethod
    async def _get(kv, key: str) -> tuple[Record, int] | None:
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:  # KeyDeletedError too
            return None
        if entry.value is None:
            return None
        return json.loads(entry.value), entry.revision

    @classmethod
    async def _mutate(cls, kv, key: str, change: Callable[[Record | None], Record | None]) -> Record | None:
        """Apply `change` to the record (None when absent) until the write wins; `change` returning
        None leaves the record as it is."""
        for _ in range(50):
            got = await cls._get(kv, key)
            current, revision = got if got else (None, 0)
            new = change(current)
            if new is None:
                return current
            data = json.dumps(new).encode()
            try:
                if got is None:
                    await kv.create(key, data)
                else:
                    await kv.update(key, data, last=revision)
                return new
            except KeyWrongLastSequenceError:  # a racing write won: read again
                continue
        raise Conflict(f"record {key} changes too often to update")

    # -- threads -----------------------------------------------------------
    async def thread(self, thread_id: str) -> Record | None:
        got = await self._get(self.threads, _key(thread_id))
        return got[0] if got else None

    async def create_thread(self, thread_id: str, metadata: dict[str, Any] | None, *, exist_ok: bool) -> Record:
        stamp = now()
        existed = False

        def change(current):
            nonlocal existed
            if current is not None:
                existed = True
                return None
            return {"thread_id": thread_id, "created_at": stamp, "updated_at": stamp, "metadata": metadata or {}, "runs": [], "queue": []}

        record = await self._mutate(self.threads, _key(thread_id), change)
        if existed and not exist_ok:
            raise Conflict(f"thread {thread_id} already exists")
        return record

    async def mutate_thread(self, thread_id: str, change: Callable[[Record], Record | None]) -> Record:
        def guarded(current):
            if current is None:
                raise NotFound(thread_id)
            new = change(dict(current))
            if new is not None:
                new["updated_at"] = now()
            return new

        return await self._mutate(self.threads, _key(thread_id), guarded)

    async def delete_thread(self, thread_id: str) -> None:
        await self.threads.delete(_key(thread_id))

    async def thread_ids(self) -> list[str]:
        try:
            keys = await self.threads.keys()
        except NoKeysError:
            return []
        return [base64.urlsafe_b64decode(k.encode()).decode() for k in keys[:MAX_SCANNED_THREADS]]

    # -- runs --------------------------------------------------------------
    async def run(self, run_id: str) -> Record | None:
        got = await self._get(self.runs, run_id)
        return got[0] if got else None

    async def put_run(self, run: Record) -> None:
        await self.runs.put(run["run_id"], json.dumps(run).encode())

    async def mutate_run(self, run_id: str, change: Callable[[Record], Record | None]) -> Record:
        def guarded(current):
            if current is None:
                raise NotFound(run_id)
            new = change(dict(current))
            if new is not None:
                new["updated_at"] = now()
            return new

        return await self._mutate(self.runs, run_id, guarded)

    async def delete_run(self, run_id: str) -> None:
        await self.runs.delete(run_id)
