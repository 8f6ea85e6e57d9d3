"""What a run emits, per requested stream mode, from the graph's (mode, chunk) pairs."""
from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from . import views

Publish = Callable[[str, Any], Awaitable[None]]


def _chunk(content: str, message_id: str) -> dict[str, Any]:
    return {"type": "AIMessageChunk", "content": content, "id": message_id, "tool_calls": [], "tool_call_chunks": [],
            "invalid_tool_calls": [], "additional_kwargs": {}, "response_metadata": {}}


class RunStream:
    """Turns LangGraph's updates/custom/values chunks into the protocol's events:
    `values`, `updates`, `messages` (messages-tuple: [message chunk, metadata]), `events`
    (on_chain_start/end per node, on_chat_model_stream per token) and `custom`."""

    def __init__(self, publish: Publish, run_id: str, thread_id: str, modes: list[str]):
        self.publish = publish
        self.run_id = run_id
        self.thread_id = thread_id
        self.modes = set(modes)
        self.streamed_tokens = False
        self.last_values: dict[str, Any] | None = None
        self.node = "security"

    def _meta(self, node: str) -> dict[str, Any]:
        return {"run_id": self.run_id, "thread_id": self.thread_id, "langgraph_node": node, "graph_id": views.ASSISTANT_NAME}

    async def _event(self, event: str, name: str, data: dict[str, Any], node: str | None = None) -> None:
        await self.publish("events", {"event": event, "name": name, "run_id": self.run_id, "tags": [], "metadata": self._meta(node or name), "data": data, "parent_ids": []})

    async def start(self) -> None:
        if "events" in self.modes:
            await self._event("on_chain_start", views.ASSISTANT_NAME, {"input": None})

    async def chunk(self, mode: str, chunk: Any) -> None:
        if mode == "values":
            self.last_values = chunk
            if "values" in self.modes:
                await self.publish("values", views.values(chunk, self.thread_id))
        elif mode == "updates":
            shown = views.update(chunk)
            for node in shown:
                if node != "__interrupt__":
                    self.node = node
            if "updates" in self.modes:
                await self.publish("updates", shown)
            if "events" in self.modes:
                for node, update in shown.items():
                    await self._event("on_chain_end", node, {"output": update}, node)
        elif mode == "custom":
            if "custom" in self.modes:
                await self.publish("custom", chunk)
            delta = chunk.get("delta") if isinstance(chunk, dict) else None
            if delta:
                self.streamed_tokens = True
                message = _chunk(delta, f"run-{self.run_id}-draft-{chunk.get('draft', 0)}")
                if "messages-tuple" in self.modes:
                    await self.publish("messages", [message, self._meta("reason")])
                if "events" in self.modes:
                    await self._event("on_chat_model_stream", "llm", {"chunk": message}, "reason")

    async def finish(self, state: dict[str, Any]) -> None:
        answer = state.get("answer")
        if answer and not state.get("__interrupt__") and not self.streamed_tokens and "messages-tuple" in self.modes:
            # the fast tier writes its answer at once: one chunk, with the id the thread's message will have
            turn = max(len(state.get("history") or []) - 1, 0)
            message_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"meshward:{self.thread_id}:{turn}:ai"))
            await self.publish("messages", [_chunk(answer, message_id), self._meta(self.node)])
        if "events" in self.modes:
            await self._event("on_chain_end", views.ASSISTANT_NAME, {"output": views.values(state, self.thread_id)})
