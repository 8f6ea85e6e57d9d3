"""Graph state and checkpoints as the Agent Protocol's objects (values, ThreadState, interrupts)."""
from __future__ import annotations

import uuid
from typing import Any

ASSISTANT_NAME = "meshward"
ASSISTANT_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "meshward:assistant:meshward"))
# What a state, an update or a values event shows of the graph state: the outcome, never raw tool
# results, attachments, transcripts or security internals.
SHOWN_KEYS = (
    "status", "answer", "refusal_reason", "threat_category", "route", "next", "tier", "tier_reason",
    "tools_used", "confidence", "request_id",
)


def _message_id(thread_id: str, turn: int, role: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"meshward:{thread_id}:{turn}:{role}"))


def human(text: str, message_id: str) -> dict[str, Any]:
    return {"type": "human", "content": text, "id": message_id, "additional_kwargs": {}, "response_metadata": {}}


def ai(text: str, message_id: str, model: str | None = None) -> dict[str, Any]:
    return {
        "type": "ai", "content": text, "id": message_id, "tool_calls": [], "invalid_tool_calls": [],
        "additional_kwargs": {}, "response_metadata": {"model_name": model} if model else {},
    }


def interrupts_of(items) -> list[dict[str, Any]]:
    return [{"value": i.value, "id": i.id} for i in items or ()]


def values(state: dict[str, Any] | None, thread_id: str) -> dict[str, Any]:
    """The thread's values: `messages` (each past turn, ending with the assistant's answer) and the outcome."""
    state = state or {}
    history = state.get("history") or []
    llm = state.get("llm")
    model = f"{llm['provider']}/{llm['model']}" if llm else None
    messages: list[dict[str, Any]] = []
    for turn, t in enumerate(history):
        messages.append(human(t.get("question", ""), _message_id(thread_id, turn, "human")))
        messages.append(ai(t.get("answer", ""), _message_id(thread_id, turn, "ai"), model if turn == len(history) - 1 else None))
    question = state.get("question")
    finished = state.get("next") == "finish"
    if question and not finished:  # a run in progress or paused: its question is not in the history yet
        messages.append(human(question, _message_id(thread_id, len(history), "human")))
    shown = {k: state.get(k) for k in SHOWN_KEYS if k in state}
    shown["model"] = model
    shown["intent"] = (state.get("intent") or {}).get("intent")
    out = {"messages": messages, **shown}
    if state.get("__interrupt__"):
        out["__interrupt__"] = interrupts_of(state["__interrupt__"])
    return out


def update(chunk: dict[str, Any]) -> dict[str, Any]:
    """One `updates` event: each node's update reduced to the shown keys; interrupts as the SDK expects."""
    out: dict[str, Any] = {}
    for node, u in chunk.items():
        if node == "__interrupt__":
            out[node] = interrupts_of(u)
        elif isinstance(u, dict):
            out[node] = {k: u[k] for k in SHOWN_KEYS if k in u}
        else:
            out[node] = None
    return out


def checkpoint_ref(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    c = config.get("configurable") or {}
    return {"thread_id": c.get("thread_id"), "checkpoint_ns": c.get("checkpoint_ns", ""), "checkpoint_id": c.get("checkpoint_id"), "checkpoint_map": None}


def thread_state(snapshot, thread_id: str) -> dict[str, Any]:
    """A StateSnapshot as the protocol's ThreadState."""
    interrupts = interrupts_of(snapshot.interrupts)
    raw = dict(snapshot.values or {})
    if interrupts:
        raw["__interrupt__"] = snapshot.interrupts
    return {
        "values": values(raw, thread_id),
        "next": list(snapshot.next),
        "checkpoint": checkpoint_ref(snapshot.config) or {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": None},
        "metadata": _plain(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": checkpoint_ref(snapshot.parent_config),
        "tasks": [
            {"id": t.id, "name": t.name, "error": repr(t.error) if t.error else None, "interrupts": interrupts_of(t.interrupts), "checkpoint": None, "state": None, "result": None}
            for t in snapshot.tasks
        ],
        "interrupts": interrupts,
    }


def empty_state(thread_id: str) -> dict[str, Any]:
    return {"values": {"messages": []}, "next": [], "checkpoint": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": None, "checkpoint_map": None},
            "metadata": {}, "created_at": None, "parent_checkpoint": None, "tasks": [], "interrupts": []}


def _plain(value: Any) -> Any:
    """Checkpoint metadata as JSON (it may hold tuples and non-JSON leaves)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def assistant(created_at: str) -> dict[str, Any]:
    return {
        "assistant_id": ASSISTANT_ID, "graph_id": ASSISTANT_NAME, "name": ASSISTANT_NAME,
        "description": "meshward: secure, scoped data-center operations assistant",
        "config": {}, "context": {}, "metadata": {}, "version": 1, "created_at": created_at, "updated_at": created_at,
    }
