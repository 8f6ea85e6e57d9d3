"""meshward.v1.memory.*"""
from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .base import MAX_ID_CHARS, Message


class HistoryRequest(Message):
    thread_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    limit: int = Field(default=20, ge=1, le=500)


class Turn(Message):
    question: str
    answer: str
    status: str
    at: datetime
    event_id: str


class HistoryReply(Message):
    thread_id: str
    turns: list[Turn]


class StatsRequest(Message):
    pass


class StatsReply(Message):
    interactions: int
    agent_decisions: int
    events_seen: int
