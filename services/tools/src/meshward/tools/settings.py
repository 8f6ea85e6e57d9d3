from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class ToolsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_TOOLS_", extra="ignore")

    publish_events: bool = True
