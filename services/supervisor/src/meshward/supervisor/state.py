"""The graph state. Values are plain JSON-able data so that checkpoints stay portable."""
from __future__ import annotations

from typing import Any, TypedDict


class AskState(TypedDict, total=False):
    # input of one run
    question: str
    thread_id: str
    request_id: str
    has_attachments: bool
    attachments: list[dict[str, str]]
    # agent results (model_dump() of the contract replies)
    security: dict[str, Any] | None
    intent: dict[str, Any] | None
    plan: dict[str, Any] | None
    tool_results: list[dict[str, Any]] | None
    output: dict[str, Any] | None
    # outcome
    answer: str | None
    status: str | None  # answered | refused | error
    refusal_reason: str | None  # security | out_of_scope
    threat_category: str | None
    error: str | None
    # coordination
    next: str | None
    route: list[str]
    steps: list[dict[str, Any]]
    visits: dict[str, int]
    tools_used: list[str]
    decisions: list[dict[str, str]]
    # kept across runs of a thread
    history: list[dict[str, str]]


def fresh_run(question: str, thread_id: str, request_id: str, attachments: list[dict[str, str]] | None = None) -> AskState:
    """Input of a new run: every per-run key reset, `history` left as checkpointed."""
    return AskState(
        question=question,
        thread_id=thread_id,
        request_id=request_id,
        has_attachments=bool(attachments),
        attachments=attachments or [],
        security=None,
        intent=None,
        plan=None,
        tool_results=None,
        output=None,
        answer=None,
        status=None,
        refusal_reason=None,
        threat_category=None,
        error=None,
        next=None,
        route=[],
        steps=[],
        visits={},
        tools_used=[],
        decisions=[],
    )
