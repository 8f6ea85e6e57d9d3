from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Placeholders people paste from examples; refused whatever their length.
_PLACEHOLDERS = ("changeme", "change-me", "secret", "password", "example", "default", "meshward")
MIN_SECRET_CHARS = 32
MIN_DISTINCT_CHARS = 12


class ClusterSettings(BaseSettings):
    """MESHWARD_CLUSTER_* plus MESHWARD_SECRET_KEY (the key credentials are sealed with; none: no registration)."""

    model_config = SettingsConfigDict(env_prefix="MESHWARD_CLUSTER_", extra="ignore", populate_by_name=True)

    secret_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("MESHWARD_SECRET_KEY"))
    # "allow": a standing approval of registration and removal; "deny" (default): each needs a human's approval.
    write: Literal["deny", "allow"] = "deny"
    database_url: str = "sqlite+aiosqlite:///var/tools.db"
    health_interval_s: float | None = Field(default=None, gt=0)
    connect_timeout_s: float = Field(default=3.0, gt=0, le=60)
    read_timeout_s: float = Field(default=5.0, gt=0, le=120)
    retries: int = Field(default=2, ge=0, le=5)  # connection errors and 5xx only
    page_size: int = Field(default=500, ge=1, le=5_000)
    max_pods: int = Field(default=20_000, ge=1)  # pods scanned per health check; beyond, the verdict says so
    max_listed: int = Field(default=10, ge=1, le=100)  # names shown per kind of problem
    restart_threshold: int = Field(default=5, ge=1)  # restarts that make a running pod "restarting"
    max_clusters: int = Field(default=1_000, ge=1)

    @field_validator("secret_key")
    @classmethod
    def _strong(cls, v: SecretStr | None) -> SecretStr | None:
        if v is None or v.get_secret_value() == "":
            return None
        s = v.get_secret_value()
        if len(s) < MIN_SECRET_CHARS:
            raise ValueError(f"MESHWARD_SECRET_KEY is too short: use at least {MIN_SECRET_CHARS} random characters (e.g. `openssl rand -base64 48`)")
        if len(set(s)) < MIN_DISTINCT_CHARS or any(p in s.lower() for p in _PLACEHOLDERS):
            raise ValueError("MESHWARD_SECRET_KEY looks like a placeholder or a repeated pattern: use random characters (e.g. `openssl rand -base64 48`)")
        return v
