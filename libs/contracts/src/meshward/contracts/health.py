"""meshward.v1.<service>.health"""
from __future__ import annotations

from pydantic import Field

from .base import Message


class HealthRequest(Message):
    pass


class HealthReply(Message):
    service: str
    ready: bool
    version: str
    instance: str
    details: dict[str, str] = Field(default_factory=dict)
