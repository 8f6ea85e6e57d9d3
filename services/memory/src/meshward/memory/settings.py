from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MemorySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_MEMORY_", extra="ignore", populate_by_name=True)

    database_url: str = Field(
        default="sqlite+aiosqlite:///var/memory.db",
        validation_alias=AliasChoices("MESHWARD_DATABASE_URL", "MESHWARD_MEMORY_DATABASE_URL"),
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+asyncpg://user@host/db",
    )
    consumer_name: str = Field(default="memory", description="durable JetStream consumer name")
    consumer_batch: int = Field(default=512, ge=1, le=4_096, description="events fetched (and group-committed) at once")
    embed_linger_ms: float = Field(
        default=50.0, ge=0.0, le=1_000.0,
        description="an answered interaction waits this long for others to share its Chroma write (a write costs "
                    "several times an item); a thread's history read right after an answer waits as long",
    )
    read_your_writes_wait_s: float = Field(default=5.0, ge=0.0, le=60.0,
                                           description="how long a history read waits for the consumer to store what is in the stream")
    chroma_path: str | None = Field(
        default=None,
        validation_alias=AliasChoices("MESHWARD_CHROMA_PATH", "MESHWARD_MEMORY_CHROMA_PATH"),
        description="embedded Chroma folder (default var/chroma)",
    )
    chroma_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("MESHWARD_CHROMA_URL", "MESHWARD_MEMORY_CHROMA_URL"),
        description="Chroma server URL; embedded PersistentClient when unset",
    )
    scope_file: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("MESHWARD_INTENT_SCOPE_FILE", "MESHWARD_MEMORY_SCOPE_FILE"),
        description="the scope file intent serves; its examples fill the scope_examples collection (default: intent's packaged scope)",
    )
    learn_min_score: float = Field(default=0.9, ge=0.5, le=1.0, description="only blocks at least this confident become known threats")
    learn_max_scope_similarity: float = Field(default=0.9, ge=0.0, le=1.0, description="never learn a block this close to an in-scope example")
    context_max_tokens: int = Field(default=28_000, ge=100)
    context_threshold_tokens: int = Field(default=20_000, ge=50)
    context_keep_last: int = Field(default=5, ge=0, le=100)
    context_history_limit: int = Field(default=200, ge=1, le=5_000)
