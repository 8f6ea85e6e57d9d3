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
    started_at: float  # epoch seconds: the deep tier's deadline counts from here
    stream: bool  # the caller reads tokens as they arrive
    # agent results (model_dump() of the contract replies)
    security: dict[str, Any] | None
    intent: dict[str, Any] | None
    plan: dict[str, Any] | None
    tool_results: list[dict[str, Any]] | None
    output: dict[str, Any] | None
    # tiers (assess) and the deep tier (retrieve -> reason -> validate, refine at most twice)
    tier: str | None  # fast | deep
    tier_reason: str | None
    complexity: float | None
    retrieved: dict[str, Any] | None  # summary, turns, similar, documents
    transcript: list[dict[str, Any]]  # the chat messages of the deep tier's tool rounds
    draft: str | None
    draft_s: float | None  # how long the last draft took (validate will not start one that cannot finish)
    finish_reason: str | None
    evidence: list[str]  # what tools and documents told the model (checked by security)
    validation: dict[str, Any] | None
    refinements: int
    llm: dict[str, Any] | None  # provider, model
    usage: dict[str, int]
    withheld: list[str]  # sources whose content security withheld
    confidence: float | None
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
    run_id: str | None  # the Agent Protocol run executing this (stable across a redelivery to another replica)
    pending_approval: dict[str, Any] | None  # a tool call waiting for a human (approvals.pending)

    history: list[dict[str, str]]


def fresh_run(
    question: str,
    thread_id: str,
    request_id: str,
    attachments: list[dict[str, str]] | None = None,
    started_at: float = 0.0,
    stream: bool = False,
    run_id: str | None = None,
) -> AskState:
    """Input of a new run: every per-run key reset, `history` left as checkpointed."""
    return AskState(
        question=question,
        thread_id=thread_id,
        request_id=request_id,
        has_attachments=bool(attachments),
        attachments=attachments or [],
        started_at=started_at,
        stream=stream,
        security=None,
        intent=None,
        plan=None,
        tool_results=None,
        output=None,
        tier=None,
        tier_reason=None,
        complexity=None,
        retrieved=None,
        transcript=[],
        draft=None,
        draft_s=None,
        finish_reason=None,
        evidence=[],
        validation=None,
        refinements=0,
        llm=None,
        usage={"prompt_tokens": 0, "completion_tokens": 0},
        withheld=[],
        confidence=None,
        answer=None,
        status=None,
        refusal_reason=None,
        threat_category=None,
        error=None,
        pending_approval=None,
        run_id=run_id,
        next=None,
        route=[],
        steps=[],
        visits={},
        tools_used=[],
        decisions=[],
    )
