"""The one interface every backend implements, its typed failures, and the prompt bound."""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from meshward.contracts import ChatMessage, ChatRequest, ChatResponse, ChatRole, ProviderAttempt

# Called with (text, provider, restart) for each piece of text as it arrives. restart=True: the provider that
# streamed the earlier pieces failed and this one starts the answer over (the reader drops what it has).
DeltaSink = Callable[[str, str, bool], Awaitable[None]]

_CUT = "\n[... {n} characters cut to fit the prompt bound ...]\n"


class LLMError(Exception):
    """No backend produced a usable answer; `attempts` says what each provider did."""

    def __init__(self, message: str, attempts: list[ProviderAttempt] | None = None):
        super().__init__(message)
        self.message = message
        self.attempts = attempts or []


class Backend(Protocol):
    name: str  # "chain" | "embedded"
    max_prompt_chars: int

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def details(self) -> dict[str, str]: ...

    def describe(self, provider: str) -> tuple[str, str]:
        """(gen_ai.system, request model) of the provider that answered."""
        ...

    async def chat(self, request: ChatRequest, sink: DeltaSink | None) -> ChatResponse: ...


def prompt_chars(messages: list[ChatMessage]) -> int:
    return sum(len(m.content) for m in messages)


def bound_prompt(messages: list[ChatMessage], limit: int) -> list[ChatMessage]:
    """Fit the messages' total content into `limit` characters, by one rule:

    1. drop the oldest turns first (everything between the leading system messages and the last message),
       a tool answer together with the assistant turn that asked for it;
    2. if the system messages and the last message alone are still too long, cut the middle out of the
       longest of them (its head and tail are kept: the question and its latest context), with a marker.
    """
    if prompt_chars(messages) <= limit:
        return messages
    head = []
    for m in messages:
        if m.role != ChatRole.SYSTEM:
            break
        head.append(m)
    middle = list(messages[len(head):-1]) if len(messages) > len(head) else []
    last = messages[-1:] if len(messages) > len(head) else []
    while middle and prompt_chars(head + middle + last) > limit:
        middle.pop(0)
        while middle and middle[0].role == ChatRole.TOOL:  # its assistant turn is gone: so is its answer
            middle.pop(0)
    kept = head + middle + last
    while (over := prompt_chars(kept) - limit) > 0:
        i = max(range(len(kept)), key=lambda k: len(kept[k].content))
        content = kept[i].content
        cut = over + len(_CUT.format(n=over + 99_999))  # room for the marker itself
        if cut >= len(content):
            kept[i] = kept[i].model_copy(update={"content": ""})
            continue
        keep_head = (len(content) - cut) * 2 // 3
        keep_tail = len(content) - cut - keep_head
        text = content[:keep_head] + _CUT.format(n=cut) + (content[-keep_tail:] if keep_tail else "")
        kept[i] = kept[i].model_copy(update={"content": text})
    return kept
