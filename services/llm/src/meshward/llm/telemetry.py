"""One span per chat request with the OpenTelemetry GenAI semantic-convention attributes; each provider
that failed before the answer is a span event."""
from __future__ import annotations

from meshward.bus import tracer
from meshward.contracts import ChatRequest, ChatResponse, ProviderAttempt
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

_tracer = tracer("meshward.llm")
FALLBACK_EVENT = "gen_ai.provider.fallback"


def start_chat_span(request: ChatRequest) -> Span:
    return _tracer.start_span("chat", kind=SpanKind.CLIENT, attributes={
        "gen_ai.operation.name": "chat",
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.request.temperature": request.temperature,
        "meshward.llm.tools_offered": len(request.tools),
        "meshward.llm.streamed": request.stream_subject is not None,
    })


def record_fallback(span: Span, attempt: ProviderAttempt, model: str) -> None:
    # The detail never holds a key: it is built from status codes and exception types, not from requests.
    span.add_event(FALLBACK_EVENT, {"meshward.llm.provider": attempt.provider, "gen_ai.request.model": model,
                                    "meshward.llm.outcome": str(attempt.outcome), "meshward.llm.detail": attempt.detail,
                                    "meshward.llm.duration_ms": attempt.duration_ms})


def record_response(span: Span, response: ChatResponse, system: str, request_model: str) -> None:
    span.update_name(f"chat {request_model}")
    span.set_attributes({
        "gen_ai.system": system,
        "gen_ai.request.model": request_model,
        "gen_ai.response.model": response.model,
        "gen_ai.response.finish_reasons": [response.finish_reason],
        "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": response.usage.completion_tokens,
        "meshward.llm.provider": response.provider,
        "meshward.llm.attempts": len(response.attempts),
    })
    if response.first_token_ms is not None:
        span.set_attribute("meshward.llm.first_token_ms", response.first_token_ms)


def record_failure(span: Span, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message[:500]))
