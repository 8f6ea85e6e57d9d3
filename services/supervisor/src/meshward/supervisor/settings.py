from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class SupervisorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_", extra="ignore")

    http_host: str = Field(default="127.0.0.1", description="interface the HTTP ingress binds")
    http_port: int = Field(default=8080, ge=0, le=65535)
    checkpoint_db: Path = Field(default=Path("var/checkpoints.db"), description="SQLite file of the LangGraph checkpointer")
    checkpoint_url: SecretStr | None = Field(default=None, description="postgresql://... : the Postgres checkpointer (replicas share threads); SQLite when unset")
    checkpoint_pool_size: int = Field(default=10, ge=1, le=100, description="connections of the Postgres checkpointer's pool")
    # Agent Protocol runs (agent_protocol/)
    max_concurrent_runs: int = Field(default=4, ge=1, le=64, description="runs this replica executes at once from the work queue")
    run_ack_wait_s: float = Field(default=30.0, ge=3, le=600, description="a run whose replica stops heartbeating this long goes to another replica")
    max_question_chars: int = Field(default=4_000, ge=1, le=20_000)
    max_body_bytes: int = Field(default=10 * 1_048_576, ge=1_024, le=64 * 1_048_576, description="whole request body, attachments included")
    ask_timeout_s: float = Field(default=30.0, gt=0, le=600, description="deadline of one question, every hop included")
    max_node_visits: int = Field(default=3, ge=1, le=20, description="hard cap on visits of any one node per question")
    parallel_screening: bool = Field(
        default=True, description="classify the intent while security screens the question (security still decides first)"
    )
    recursion_limit: int = Field(default=40, ge=5, le=500)
    health_timeout_s: float = Field(default=1.0, gt=0, le=30)
    hop_attempt_timeout_s: float = Field(
        default=3.0, gt=0, le=600,
        description="an idempotent call (security, intent, output check, memory reads, a call of a read-only tool or "
                    "one with an idempotency key) unanswered this long is sent again: its replica may have died while handling it")
    # the deep tier
    deep_tier: bool = Field(default=True, description="route complex questions to the LLM; false: the fast tier answers everything it can")
    deep_timeout_s: float = Field(default=120.0, gt=0, le=600, description="deadline of a deep-tier question (an LLM on CPU is slow)")
    validation_min_confidence: float = Field(default=0.75, ge=0.0, le=1.0, description="below it a draft is refined")
    max_refinements: int = Field(default=2, ge=0, le=5)
    max_tool_rounds: int = Field(default=3, ge=0, le=10, description="LLM -> tools -> LLM rounds per draft")
    llm_max_tokens: int = Field(default=384, ge=16, le=4_096)
    llm_temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    deep_mcp_tools: list[str] = Field(default_factory=list, description="fnmatch patterns of mounted MCP tools (`server__tool`) the deep tier may offer")
    context_turns: int = Field(default=5, ge=0, le=50, description="recent user turns sent to security with each question")
    similar_k: int = Field(default=3, ge=0, le=20)
    similar_min_similarity: float = Field(default=0.6, ge=-1.0, le=1.0)
    # the ingress's callers
    auth: Literal["auto", "required", "off"] = Field(default="auto", description="auto: keys required when the ingress listens beyond loopback; off is refused there")
    api_keys: SecretStr | None = Field(default=None, description="name=key or name=sha256:<hex>, comma-separated (a k8s Secret, compose env)")
    api_keys_file: Path = Field(default=Path("var/api-keys.json"), description="keys made by `meshward keys create` (SHA-256 digests, 0600)")
    rate_limit_per_minute: int = Field(default=600, ge=0, le=1_000_000, description="requests per minute per API key (per client address without one); 0: no limit")
    cors_origins: list[str] = Field(default_factory=list, description="origins allowed to call the API from a browser (JSON list)")
    approval_timeout_s: float = Field(default=300.0, gt=0, le=7 * 86_400, description="a tool call's approval not given in time counts as denied")

    @field_validator("checkpoint_url")
    @classmethod
    def _postgres(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value():
            return None
        if v is not None and not v.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("MESHWARD_CHECKPOINT_URL must be a postgresql:// URL (unset it for SQLite)")
        return v
