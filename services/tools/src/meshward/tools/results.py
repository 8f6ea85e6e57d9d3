"""Tool results by idempotency key, in a JetStream KV bucket that every tools replica shares.

A run that another supervisor replica takes over restarts from the thread's last checkpoint and calls its tools
again with the same keys: the stored result comes back instead of a second execution (a command run twice, a
cluster registered twice). Only successful results are kept, for `ttl_s`; results too large for one message are
not kept (the call then runs again)."""
from __future__ import annotations

import logging

from meshward.contracts import ToolResult
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import BucketNotFoundError, KeyNotFoundError

log = logging.getLogger(__name__)
MAX_STORED_BYTES = 512 * 1024


class ResultStore:
    def __init__(self, kv):
        self.kv = kv

    @classmethod
    async def open(cls, js, bucket: str, ttl_s: float) -> ResultStore:
        try:
            kv = await js.key_value(bucket)
        except BucketNotFoundError:
            kv = await js.create_key_value(KeyValueConfig(bucket=bucket, history=1, ttl=ttl_s, storage=StorageType.FILE))
        return cls(kv)

    async def get(self, key: str) -> ToolResult | None:
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return None
        return ToolResult.model_validate_json(entry.value) if entry.value else None

    async def put(self, key: str, result: ToolResult) -> None:
        data = result.model_dump_json().encode()
        if len(data) > MAX_STORED_BYTES:
            log.info("result of %s not kept for its idempotency key: %d bytes", result.name, len(data))
            return
        await self.kv.put(key, data)
