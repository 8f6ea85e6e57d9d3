from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ToolsSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_TOOLS_", extra="ignore")

    publish_events: bool = True
    serve_mcp: bool = True  # the MCP door on MESHWARD_MCP_HOST:MESHWARD_MCP_PORT (default 127.0.0.1:8090)
    mount_external: bool = True  # tools of the MCP servers listed in MESHWARD_MCP_SERVERS
    result_ttl_s: float = Field(default=3_600.0, gt=0, le=7 * 86_400, description="how long a result stays known by its idempotency key")
