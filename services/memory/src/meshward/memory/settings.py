from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MemorySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_MEMORY_", extra="ignore")

    database_url: str = Field(
        default="sqlite+aiosqlite:///var/memory.db",
        validation_alias=AliasChoices("MESHWARD_DATABASE_URL", "MESHWARD_MEMORY_DATABASE_URL"),
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+asyncpg://user@host/db",
    )
    consumer_name: str = Field(default="memory", description="durable JetStream consumer name")
