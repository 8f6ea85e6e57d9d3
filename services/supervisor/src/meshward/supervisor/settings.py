from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SupervisorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_", extra="ignore")

    http_host: str = Field(default="127.0.0.1", description="interface the HTTP ingress binds")
    http_port: int = Field(default=8080, ge=0, le=65535)
    checkpoint_db: Path = Field(default=Path("var/checkpoints.db"), description="SQLite file of the LangGraph checkpointer")
    max_question_chars: int = Field(default=4_000, ge=1, le=20_000)
    max_body_bytes: int = Field(default=10 * 1_048_576, ge=1_024, le=64 * 1_048_576, description="whole request body, attachments included")
    ask_timeout_s: float = Field(default=30.0, gt=0, le=600, description="deadline of one question, every hop included")
    max_node_visits: int = Field(default=3, ge=1, le=20, description="hard cap on visits of any one node per question")
    recursion_limit: int = Field(default=40, ge=5, le=500)
    health_timeout_s: float = Field(default=1.0, gt=0, le=30)
