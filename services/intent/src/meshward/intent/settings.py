from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class IntentSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MESHWARD_INTENT_", extra="ignore", protected_namespaces=())

    scope_file: Path | None = Field(default=None, description="scope YAML; the packaged data-center scope when unset")
    backend: Literal["finetuned", "embedding"] = Field(
        default="finetuned", description="finetuned: the ONNX model from `meshward train intent`; embedding: the "
                                         "rule + embedding-similarity classifier (no training needed)")
    model_dir: Path | None = Field(default=None, description="a built intent model folder; the newest build for the scope when unset")
    model_version: str | None = Field(default=None, max_length=64, description="the build (model key or a prefix) to load from the models root")
    max_batch_size: int = Field(default=32, ge=1, le=1024, description="micro-batching: most questions in one inference")
    max_wait_ms: float = Field(default=2.0, ge=0.0, le=1000.0, description="micro-batching: longest wait for company")
