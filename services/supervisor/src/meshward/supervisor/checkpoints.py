"""The LangGraph checkpointer: SQLite (one replica, the default) or Postgres (replicas share threads)."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver

from .settings import SupervisorSettings


@asynccontextmanager
async def open_checkpointer(settings: SupervisorSettings) -> AsyncIterator[BaseCheckpointSaver]:
    url = settings.checkpoint_url.get_secret_value() if settings.checkpoint_url else None
    if url:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: PLC0415 - only with Postgres
        from psycopg.rows import dict_row  # noqa: PLC0415
        from psycopg_pool import AsyncConnectionPool  # noqa: PLC0415

        # prepare_threshold=None: no server-side prepared statements, which PgBouncer (transaction
        # pooling) cannot keep; autocommit: the saver's own statements are each a transaction
        pool = AsyncConnectionPool(url, min_size=1, max_size=settings.checkpoint_pool_size, open=False, timeout=10.0,
                                   kwargs={"autocommit": True, "prepare_threshold": None, "row_factory": dict_row})
        async with pool:
            saver = AsyncPostgresSaver(pool)
            await saver.setup()  # idempotent migrations
            yield saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: PLC0415

        settings.checkpoint_db.parent.mkdir(parents=True, exist_ok=True)
        async with AsyncSqliteSaver.from_conn_string(str(settings.checkpoint_db)) as saver:
            yield saver
