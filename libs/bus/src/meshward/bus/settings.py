"""Transport settings shared by every service (MESHWARD_* environment variables)."""
from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class BusSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_", extra="ignore")

    nats_url: str = Field(default="nats://127.0.0.1:4222", description="comma-separated NATS server URLs")
    request_timeout_s: float = Field(default=10.0, gt=0, le=600, description="default per-request timeout")
    max_concurrency: int = Field(default=64, ge=1, le=10_000, description="in-flight requests per subscription")
    max_request_bytes: int = Field(default=8 * 1_048_576, ge=1_024, le=64 * 1_048_576)
    drain_timeout_s: float = Field(default=10.0, gt=0, le=300, description="grace period for in-flight work on SIGTERM")
    queue_group: str | None = Field(default=None, description="queue group; defaults to the service name")
    instance: str | None = Field(default=None, description="instance name in health replies; defaults to host:pid")

    def servers(self) -> list[str]:
        return [u.strip() for u in self.nats_url.split(",") if u.strip()]
