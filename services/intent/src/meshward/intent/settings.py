from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class IntentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_INTENT_", extra="ignore")

    scope_file: Path | None = Field(default=None, description="scope YAML; the packaged data-center scope when unset")
