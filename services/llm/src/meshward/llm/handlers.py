"""NATS door onto the LLM backends: meshward.v1.llm.chat (and .health)."""
from __future__ import annotations

import asyncio
import itertools
import re

from meshward.bus import Service, ServiceError
from meshward.contracts import ChatChunk, ChatRequest, ChatResponse, ErrorCode, subjects
from opentelemetry import context as otel_context
from opentelemetry.trace import set_span_in_context

from .backend import Backend, DeltaSink, LLMError, bound_prompt
from .settings import LLMSettings
from .telemetry import record_failure, record_fallback, record_response, start_chat_span

# Chunks go only to the caller's own inbox, never onto another service's subject.
_INBOX = re.compile(r"_INBOX\.[A-Za-z0-9_.-]{1,200}")


def create_backend(settings: LLMSettings) -> Backend:
    if settings.providers:
        from .chain import ProviderChain

        return ProviderChain(settings)
    from .embedded import EmbeddedBackend

    return EmbeddedBackend(settings)


def create_service(settings: LLMSettings | None = None) -> Service:
    settings = settings or LLMSettings()
    service = Service("llm")
    backend = create_backend(settings)
    gate = asyncio.Semaphore(settings.max_concurrency)

    @service.on_startup
    async def _start(svc: Service) -> None:
        await backend.start()
        svc.details.update(backend.details(), max_concurrency=str(settings.max_concurrency),
                           max_prompt_chars=str(backend.max_prompt_chars))

        @svc.on_shutdown
        async def _close(_: Service) -> None:
            await backend.close()

    def stream_to(subject: str) -> tuple[DeltaSink, itertools.count]:
        index = itertools.count()

        async def publish(delta: str, provider: str, restart: bool) -> None:
            chunk = ChatChunk(index=next(index), delta=delta, provider=provider, restart=restart)
            await service.bus.nc.publish(subject, chunk.model_dump_json().encode())

        return publish, index

    @service.handler(subjects.LLM_CHAT, ChatRequest)
    async def chat(req: ChatRequest) -> ChatResponse:
        subject = req.stream_subject
        if subject is not None and not _INBOX.fullmatch(subject):
            raise ServiceError(ErrorCode.BAD_REQUEST, "stream_subject must be an inbox (_INBOX.<token>)")
        req = req.model_copy(update={"messages": bound_prompt(req.messages, backend.max_prompt_chars)})
        sink, index = stream_to(subject) if subject else (None, None)
        span = start_chat_span(req)
        token = otel_context.attach(set_span_in_context(span))
        try:
            # The bus already cancels the handler at the caller's deadline; this bounds callers without one.
            async with asyncio.timeout(settings.request_timeout_s):
                async with gate:
                    response = await backend.chat(req, sink)
        except TimeoutError:
            record_failure(span, "timed out")
            raise ServiceError(ErrorCode.DEADLINE_EXCEEDED,
                               f"no answer within the llm service's {settings.request_timeout_s:g} s limit") from None
        except LLMError as e:
            for attempt in e.attempts:
                record_fallback(span, attempt, backend.describe(attempt.provider)[1])
            record_failure(span, e.message)
            raise ServiceError(ErrorCode.UNAVAILABLE, e.message) from None
        else:
            for attempt in response.attempts[:-1]:
                record_fallback(span, attempt, backend.describe(attempt.provider)[1])
            system, model = backend.describe(response.provider)
            record_response(span, response, system, model)
            return response
        finally:
            otel_context.detach(token)
            span.end()
            if subject is not None:
                # Tells a streaming reader the answer is complete (or failed: the reply says how).
                done = ChatChunk(index=next(index), done=True)
                await service.bus.nc.publish(subject, done.model_dump_json().encode())

    return service
