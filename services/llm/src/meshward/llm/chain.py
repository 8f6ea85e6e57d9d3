"""The provider chain: OpenAI-compatible endpoints tried in order.

Falls through to the next provider on connection errors, timeouts, 429 and 5xx, and on answers that are
malformed, empty, or ask for a tool that was not offered (or with arguments that do not fit its schema);
never on another 4xx (the request itself is wrong: the next provider would refuse it too). A Retry-After
skips that provider until it has passed; a circuit breaker per provider skips one that keeps failing.
The SDK's own retries are off: the chain is the retry.
"""
from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import time
from typing import Any

from meshward.bus.context import remaining
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
from meshward.contracts.llm import MAX_PROMPT_CHARS
from openai import (
    APIConnectionError,
    APIError,
    APIResponseValidationError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
)
from purgatory import AsyncCircuitBreakerFactory
from purgatory.domain.model import OpenedState

from .backend import DeltaSink, LLMError
from .settings import LLMSettings, ProviderConfig
from .toolcalls import MAX_ARGUMENTS_CHARS, InvalidToolCall, openai_messages, openai_tools, validate_tool_call

log = logging.getLogger(__name__)
_MAX_ID = 128
# Kept back from the caller's deadline so that a chain that ran out of time still replies with its attempts.
_REPLY_RESERVE_S = 0.2


class _Failure(Exception):
    def __init__(self, outcome: AttemptOutcome, detail: str, retry_after: float | None = None):
        super().__init__(detail)
        self.outcome = outcome
        self.detail = detail
        self.retry_after = retry_after


class _ClientFailure(_Failure):
    """Another 4xx: the request is wrong, not the provider (it neither trips the breaker nor falls through)."""


def retry_after_seconds(value: str | None, limit: float) -> float | None:
    """Seconds from a Retry-After header (delay-seconds or an HTTP date), capped at `limit`; None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), limit)


class ProviderChain:
    name = "chain"

    def __init__(self, settings: LLMSettings):
        self.max_prompt_chars = MAX_PROMPT_CHARS
        self._settings = settings
        self._providers = list(settings.providers)
        self._by_name = {p.name: p for p in self._providers}
        self._clients = {p.name: AsyncOpenAI(base_url=str(p.base_url), api_key=p.api_key(), timeout=p.timeout_s,
                                             max_retries=0) for p in self._providers}
        self._breakers = AsyncCircuitBreakerFactory(default_threshold=settings.breaker_threshold,
                                                    default_ttl=settings.breaker_ttl_s, exclude=[_ClientFailure])
        self._not_before: dict[str, float] = {}  # provider -> monotonic time its Retry-After passes

    async def start(self) -> None:
        await self._breakers.initialize()

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()

    def details(self) -> dict[str, str]:
        return {"backend": "chain", "providers": ",".join(f"{p.name}:{p.model}" for p in self._providers)}

    def describe(self, provider: str) -> tuple[str, str]:
        """(gen_ai.system, request model) of a provider of this chain."""
        return "openai", self._by_name[provider].model if provider in self._by_name else provider

    async def chat(self, request: ChatRequest, sink: DeltaSink | None) -> ChatResponse:
        attempts: list[ProviderAttempt] = []
        messages = openai_messages(request.messages)
        tools = {t.name: t for t in request.tools}
        streamed = {"any": False}  # did an earlier provider already send deltas?
        until = time.monotonic() + remaining(self._settings.request_timeout_s) - _REPLY_RESERVE_S
        for provider in self._providers:
            started = time.perf_counter()

            def attempt(outcome: AttemptOutcome, detail: str, _p: ProviderConfig = provider, _t: float = started) -> None:
                attempts.append(ProviderAttempt(provider=_p.name, outcome=outcome, detail=detail[:500],
                                                duration_ms=(time.perf_counter() - _t) * 1000))

            wait = self._not_before.get(provider.name, 0.0) - time.monotonic()
            if wait > 0:
                attempt(AttemptOutcome.CIRCUIT_OPEN, f"Retry-After: {math.ceil(wait)} s left")
                continue
            left = until - time.monotonic()
            if left <= 0:
                attempt(AttemptOutcome.TIMEOUT, "not tried: no time left within the caller's deadline")
                continue
            try:
                breaker = await self._breakers.get_breaker(provider.name)
                async with breaker:
                    response = await self._attempt(provider, request, messages, tools, sink, streamed,
                                                   min(provider.timeout_s, left), until)
            except OpenedState:
                attempt(AttemptOutcome.CIRCUIT_OPEN, "circuit open after repeated failures")
                continue
            except _Failure as f:
                attempt(f.outcome, f.detail)
                if f.retry_after is not None:
                    self._not_before[provider.name] = time.monotonic() + f.retry_after
                if isinstance(f, _ClientFailure):
                    raise LLMError(f"provider {provider.name} refused the request: {f.detail}", attempts) from None
                log.info("provider %s failed (%s: %s); trying the next", provider.name, f.outcome, f.detail)
                continue
            attempt(AttemptOutcome.OK, "")
            return response.model_copy(update={"attempts": attempts})
        summary = "; ".join(f"{a.provider}: {a.outcome}" + (f" ({a.detail})" if a.detail else "") for a in attempts)
        raise LLMError(f"every LLM provider failed: {summary}"[:1_900], attempts)

    async def _attempt(self, provider: ProviderConfig, request: ChatRequest, messages: list[dict[str, Any]],
                       tools: dict[str, ToolSpec], sink: DeltaSink | None, streamed: dict[str, bool],
                       budget: float, until: float) -> ChatResponse:
        client = self._clients[provider.name]
        kwargs: dict[str, Any] = {"model": provider.model, "messages": messages, "max_tokens": request.max_tokens,
                                  "temperature": request.temperature, "timeout": budget}
        if tools:
            kwargs["tools"] = openai_tools(request.tools)
        started = time.perf_counter()
        try:
            if sink is None:
                completion = await client.chat.completions.create(**kwargs)
                return self._from_completion(provider, completion, tools, started)
            return await self._stream(provider, client, kwargs, tools, sink, streamed, started, until)
        except _Failure:
            raise
        except InvalidToolCall as e:
            raise _Failure(AttemptOutcome.MALFORMED, str(e)) from None
        except APITimeoutError:
            raise _Failure(AttemptOutcome.TIMEOUT, f"no answer within {budget:.3g} s") from None
        except APIConnectionError as e:
            raise _Failure(AttemptOutcome.CONNECT_ERROR, f"connection failed ({type(e.__cause__ or e).__name__})") from None
        except APIStatusError as e:
            retry_after = retry_after_seconds(e.response.headers.get("retry-after"), self._settings.max_retry_after_s)
            status = e.status_code
            if status == 429:
                raise _Failure(AttemptOutcome.RATE_LIMITED, "HTTP 429", retry_after) from None
            if status >= 500:
                raise _Failure(AttemptOutcome.SERVER_ERROR, f"HTTP {status}", retry_after) from None
            raise _ClientFailure(AttemptOutcome.CLIENT_ERROR, f"HTTP {status}") from None
        except (APIResponseValidationError, ValueError, TypeError, AttributeError, KeyError, IndexError) as e:
            raise _Failure(AttemptOutcome.MALFORMED, f"unreadable answer ({type(e).__name__})") from None
        except APIError as e:
            raise _Failure(AttemptOutcome.SERVER_ERROR, f"provider error ({type(e).__name__})") from None

    def _from_completion(self, provider: ProviderConfig, completion: Any, tools: dict[str, ToolSpec],
                         started: float) -> ChatResponse:
        if not completion.choices:
            raise _Failure(AttemptOutcome.MALFORMED, "the answer has no choices")
        choice = completion.choices[0]
        message = choice.message
        calls = [(c.id, c.function.name, c.function.arguments) for c in (message.tool_calls or [])]
        usage = completion.usage
        return self._response(provider, message.content or "", calls, choice.finish_reason, completion.model, tools,
                              Usage(prompt_tokens=usage.prompt_tokens or 0, completion_tokens=usage.completion_tokens or 0)
                              if usage else Usage(), started, None)

    async def _stream(self, provider: ProviderConfig, client: AsyncOpenAI, kwargs: dict[str, Any],
                      tools: dict[str, ToolSpec], sink: DeltaSink, streamed: dict[str, bool],
                      started: float, until: float) -> ChatResponse:
        idle = self._settings.stream_idle_timeout_s
        stream = await client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
        parts: list[str] = []
        size = 0
        calls: dict[int, list] = {}  # index -> [id, name, [argument pieces], size]
        finish: str | None = None
        model = provider.model
        usage = Usage()
        first_ms: float | None = None
        restart = streamed["any"]
        chunks = aiter(stream)
        try:
            while True:
                try:
                    # A provider that goes quiet mid-stream has failed: bounded wait for each chunk.
                    chunk = await asyncio.wait_for(anext(chunks), max(0.0, min(idle, until - time.monotonic())))
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if time.monotonic() >= until:
                        raise _Failure(AttemptOutcome.TIMEOUT, "the caller's deadline passed mid-stream") from None
                    raise _Failure(AttemptOutcome.TIMEOUT, f"stream idle for {idle:g} s") from None
                except (APIError, _Failure):
                    raise
                except (ValueError, TypeError, KeyError) as e:
                    raise _Failure(AttemptOutcome.MALFORMED, f"unreadable stream chunk ({type(e).__name__})") from None
                except Exception as e:  # noqa: BLE001 - the transport broke mid-stream (the SDK does not wrap it)
                    raise _Failure(AttemptOutcome.CONNECT_ERROR, f"stream broken ({type(e).__name__})") from None
                model = getattr(chunk, "model", None) or model
                if getattr(chunk, "usage", None):
                    usage = Usage(prompt_tokens=chunk.usage.prompt_tokens or 0,
                                  completion_tokens=chunk.usage.completion_tokens or 0)
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                text = getattr(delta, "content", None) if delta is not None else None
                if text:
                    if size + len(text) > MAX_ANSWER_CHARS:
                        finish = "length"
                        break
                    if first_ms is None:
                        first_ms = (time.perf_counter() - started) * 1000
                    parts.append(text)
                    size += len(text)
                    streamed["any"] = True
                    await sink(text, provider.name, restart)
                    restart = False
                for tc in (getattr(delta, "tool_calls", None) or []) if delta is not None else []:
                    entry = calls.setdefault(tc.index, [None, None, [], 0])
                    entry[0] = tc.id or entry[0]
                    fn = tc.function
                    if fn is not None:
                        entry[1] = fn.name or entry[1]
                        if fn.arguments:
                            entry[3] += len(fn.arguments)
                            if entry[3] > MAX_ARGUMENTS_CHARS:
                                raise _Failure(AttemptOutcome.MALFORMED, "tool call arguments over the bound")
                            entry[2].append(fn.arguments)
                if choice.finish_reason:
                    finish = choice.finish_reason
        finally:
            await stream.close()
        if finish is None:
            raise _Failure(AttemptOutcome.CONNECT_ERROR, "stream ended before the answer finished")
        tool_calls = [(e[0], e[1], "".join(e[2])) for _, e in sorted(calls.items())]
        return self._response(provider, "".join(parts), tool_calls, finish, model, tools, usage, started, first_ms)

    def _response(self, provider: ProviderConfig, content: str, raw_calls: list[tuple], finish: str | None,
                  model: str | None, tools: dict[str, ToolSpec], usage: Usage, started: float,
                  first_ms: float | None) -> ChatResponse:
        calls = []
        for i, (call_id, name, arguments) in enumerate(raw_calls):
            args = validate_tool_call(name, arguments, tools)
            calls.append(ToolCallRequestByModel(id=str(call_id or f"call_{i}")[:_MAX_ID], name=name, arguments=args))
        if not content.strip() and not calls:
            raise _Failure(AttemptOutcome.MALFORMED, "empty answer")
        reason = "tool_calls" if calls else ("length" if finish == "length" else "stop")
        return ChatResponse(
            message=ChatMessage(role=ChatRole.ASSISTANT, content=content[:MAX_ANSWER_CHARS], tool_calls=calls),
            finish_reason=reason, provider=provider.name, model=str(model or provider.model)[:256], usage=usage,
            first_token_ms=first_ms, duration_ms=(time.perf_counter() - started) * 1000)
