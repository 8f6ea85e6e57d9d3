"""The HTTP ingress: thin routes over the Asker and the health checks."""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from meshward.bus import Service
from meshward.contracts import (
    ApprovalsReply,
    ApprovalsRequest,
    ContextReply,
    ContextRequest,
    HealthReply,
    HealthRequest,
    HistoryReply,
    HistoryRequest,
    InsightsReply,
    InsightsRequest,
    RemoteError,
    RetractThreatReply,
    RetractThreatRequest,
    SearchReply,
    SearchRequest,
    subjects,
)
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .agent_protocol.routes import router as agent_protocol_router
from .agent_protocol.service import open_agent_protocol
from .asker import Asker, NoPendingApproval
from .auth import AuthMiddleware, RateLimiter, configure
from .checkpoints import open_checkpointer
from .console import router as console_router
from .graph import DeepConfig, GraphBuilder
from .http_tracing import HttpServerMiddleware
from .models import THREAD_ID_PATTERN, ApprovalDecision, AskRequest, AskResponse, ErrorResponse
from .ports import AgentPorts, NatsPorts
from .settings import SupervisorSettings

log = logging.getLogger(__name__)
DEPENDENCIES = ("security", "intent", "tools", "memory")
OPTIONAL = ("llm",)  # the deep tier: without it the fast tier still answers


def _error(status: int, code: str, message: str, details: list | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message, "details": details or []}})


def deep_config(settings: SupervisorSettings) -> DeepConfig:
    return DeepConfig(
        enabled=settings.deep_tier,
        timeout_s=settings.deep_timeout_s,
        min_confidence=settings.validation_min_confidence,
        max_refinements=settings.max_refinements,
        max_tool_rounds=settings.max_tool_rounds,
        max_tokens=settings.llm_max_tokens,
        temperature=settings.llm_temperature,
        mcp_tools=settings.deep_mcp_tools,
        context_turns=settings.context_turns,
        similar_k=settings.similar_k,
        similar_min_similarity=settings.similar_min_similarity,
        approval_timeout_s=settings.approval_timeout_s,
    )


def stream_answer(asker: Asker, body: AskRequest) -> EventSourceResponse:
    """Server-Sent Events: `step` after each graph step, `token` as the answer's tokens arrive,
    then `answer` (the AskResponse). The run is a task of its own, cancelled if the client leaves."""
    queue: asyncio.Queue[tuple[str, dict] | None] = asyncio.Queue()

    async def sink(event: str, data: dict) -> None:
        queue.put_nowait((event, data))

    async def run() -> None:
        try:
            response = await asker.ask(body.question, body.thread_id, [a.model_dump() for a in body.attachments], sink=sink)
            queue.put_nowait(("answer", response.model_dump(mode="json")))
        except Exception:  # noqa: BLE001 - the stream ends with a typed error event instead of a cut connection
            log.exception("streamed question failed")
            queue.put_nowait(("error", {"error": {"code": "internal", "message": "internal error; the trace id in the logs tells what failed", "details": []}}))
        finally:
            queue.put_nowait(None)

    async def events():
        task = asyncio.create_task(run())
        try:
            while (item := await queue.get()) is not None:
                event, data = item
                yield {"event": event, "data": json.dumps(data, ensure_ascii=False)}
        finally:
            if not task.done():
                task.cancel()

    return EventSourceResponse(events(), ping=15)


async def _cancel(task: asyncio.Task) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def create_app(settings: SupervisorSettings | None = None, local_ports: AgentPorts | None = None) -> FastAPI:
    """The ingress. With `local_ports` the graph calls them in-process instead of over NATS
    (the monolith baseline of bench/e2e.py); /healthz then reports that mode."""
    settings = settings or SupervisorSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with AsyncExitStack() as stack:
            app.state.service = None
            if local_ports is None:
                service = Service("supervisor")
                await service.open(stack)  # retries while NATS cannot be reached; unwound with the stack
                await service.bus.ensure_event_stream()
                app.state.service = service
                ports: AgentPorts = NatsPorts(service.bus, settings.hop_attempt_timeout_s)
            else:
                ports = local_ports
            saver = await stack.enter_async_context(open_checkpointer(settings))
            graph = GraphBuilder(
                ports, max_visits=settings.max_node_visits, deep_config=deep_config(settings), parallel_screening=settings.parallel_screening
            ).build(checkpointer=saver)
            app.state.asker = Asker(graph, ports, timeout_s=settings.ask_timeout_s, recursion_limit=settings.recursion_limit, deep_timeout_s=settings.deep_timeout_s)
            sweeper = asyncio.create_task(app.state.asker.expire_approvals(), name="approval-expiry")
            stack.push_async_callback(_cancel, sweeper)
            app.state.agent_protocol = await open_agent_protocol(stack, app.state.service, graph, app.state.asker, settings) if app.state.service else None
            yield

    keys, required = configure(settings.http_host, settings.auth, settings.api_keys.get_secret_value() if settings.api_keys else None, settings.api_keys_file)
    app = FastAPI(title="meshward", version="0.1.0", lifespan=lifespan)
    app.add_middleware(HttpServerMiddleware, max_body_bytes=settings.max_body_bytes)
    # outside tracing: a refused caller costs no span, and an untrusted traceparent is gone before tracing reads it
    app.add_middleware(AuthMiddleware, keys=keys, required=required,
                       limiter=RateLimiter(settings.rate_limit_per_minute) if settings.rate_limit_per_minute else None)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                           allow_headers=["content-type", "x-api-key", "authorization", "traceparent"], max_age=600)
    app.include_router(console_router)
    app.include_router(agent_protocol_router)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _error(400, "malformed_json", "the body is not valid JSON")
        details = [{"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg"), "type": e.get("type")} for e in errors[:10]]
        return _error(422, "bad_request", "; ".join(f"{'.'.join(d['loc'])}: {d['msg']}" for d in details), details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        response = _error(exc.status_code, "http_error", str(exc.detail))
        response.headers.update(exc.headers or {})  # 405 keeps its Allow header
        return response

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        log.exception("unhandled error on %s", request.url.path)
        return _error(500, "internal", "internal error; the trace id in the logs tells what failed")

    @app.get("/healthz")
    async def healthz():
        if app.state.service is None:
            return {"status": "ok", "mode": "in-process", "missing": [], "services": {}}
        bus = app.state.service.bus

        async def probe(name: str):
            try:
                return name, await bus.request(subjects.health(name), HealthRequest(), HealthReply, timeout=settings.health_timeout_s, retries=0)
            except RemoteError as e:
                return name, e

        results = dict(await asyncio.gather(*(probe(n) for n in (*DEPENDENCIES, *OPTIONAL))))
        services = {}
        missing = []
        for name, r in results.items():
            if isinstance(r, HealthReply) and r.ready:
                services[name] = {"ready": True, "instance": r.instance, "details": r.details}
            else:
                if name not in OPTIONAL:
                    missing.append(name)
                services[name] = {"ready": False, "error": r.error.message if isinstance(r, RemoteError) else "not ready"}
        body = {"status": "ok" if not missing else "unavailable", "missing": missing, "services": services}
        return JSONResponse(status_code=200 if not missing else 503, content=body)

    async def memory_request(subject: str, body, reply_type):
        if app.state.service is None:
            return _error(503, "unavailable", "memory is not part of the in-process mode")
        try:
            return await app.state.service.bus.request(subject, body, reply_type, timeout=settings.health_timeout_s * 5)
        except RemoteError as e:
            status = {"not_found": 404, "bad_request": 422, "unavailable": 503, "deadline_exceeded": 504}.get(str(e.error.code), 502)
            return _error(status, str(e.error.code), e.error.message)

    # memory's answers through memory_request: not found, unavailable, past its deadline, or another failure of memory
    memory_errors = {code: {"model": ErrorResponse} for code in (502, 503, 504)}

    @app.get("/v1/threads/{thread_id}/history", response_model=HistoryReply, responses=memory_errors)
    async def thread_history(thread_id: str = Path(pattern=THREAD_ID_PATTERN), limit: int = Query(default=50, ge=1, le=500)):
        return await memory_request(subjects.MEMORY_HISTORY, HistoryRequest(thread_id=thread_id, limit=limit), HistoryReply)

    @app.get("/v1/threads/{thread_id}/context", response_model=ContextReply, responses={404: {"model": ErrorResponse, "description": "no turns stored for the thread"}, **memory_errors})
    async def thread_context(thread_id: str = Path(pattern=THREAD_ID_PATTERN)):
        return await memory_request(subjects.MEMORY_CONTEXT, ContextRequest(thread_id=thread_id), ContextReply)

    @app.get("/v1/insights", response_model=InsightsReply, responses=memory_errors)
    async def insights():
        return await memory_request(subjects.MEMORY_INSIGHTS, InsightsRequest(), InsightsReply)

    @app.get("/v1/threats", response_model=SearchReply, responses=memory_errors)
    async def find_threats(q: str = Query(min_length=1, max_length=4_000), k: int = Query(default=5, ge=1, le=50)):
        return await memory_request(subjects.MEMORY_SEARCH, SearchRequest(query=q, collection="security_threats", k=k), SearchReply)

    @app.delete("/v1/threats/{threat_id}", response_model=RetractThreatReply, responses={404: {"model": ErrorResponse, "description": "no such learned threat"}, **memory_errors})
    async def retract_threat(threat_id: str = Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")):
        reply = await memory_request(subjects.MEMORY_RETRACT_THREAT, RetractThreatRequest(threat_id=threat_id), RetractThreatReply)
        if isinstance(reply, RetractThreatReply) and not reply.retracted:
            return _error(404, "not_found", f"no learned threat {threat_id}")
        return reply

    @app.post(
        "/v1/threads/{thread_id}/approval",
        response_model=AskResponse,
        responses={404: {"model": ErrorResponse}, 409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
    )
    async def decide_approval(request: Request, body: ApprovalDecision, thread_id: str = Path(pattern=THREAD_ID_PATTERN)) -> AskResponse:
        """Approve or deny the tool call a thread's run is waiting on; the run then continues and this answers
        with its result. Who decided is the caller's identity (its API key's name), never a field of the body."""
        decision = {"approved": body.approved, "reason": body.reason, "actor": getattr(request.state, "principal", "local")}
        try:
            return await app.state.asker.resume(thread_id, decision)
        except NoPendingApproval as e:
            if not e.known:
                return _error(404, "not_found", str(e))
            return _error(409, "no_pending_approval", f"{e}: it was decided already, expired, or never asked")

    @app.get("/v1/audit/approvals", response_model=ApprovalsReply, responses=memory_errors)
    async def approval_log(thread_id: str | None = Query(default=None, pattern=THREAD_ID_PATTERN), limit: int = Query(default=50, ge=1, le=500)):
        """The approval audit log (newest first): every decision on a tool call that needed a human."""
        return await memory_request(subjects.MEMORY_APPROVALS, ApprovalsRequest(thread_id=thread_id, limit=limit), ApprovalsReply)

    @app.post(
        "/v1/ask",
        response_model=AskResponse,
        responses={200: {"content": {"text/event-stream": {}}}, 400: {"model": ErrorResponse}, 413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
    )
    async def ask(body: AskRequest) -> AskResponse:
        if len(body.question) > settings.max_question_chars:
            return _error(422, "too_large", f"question is {len(body.question)} characters; the limit is {settings.max_question_chars}")
        if body.stream:
            return stream_answer(app.state.asker, body)
        return await app.state.asker.ask(body.question, body.thread_id, [a.model_dump() for a in body.attachments])

    _declare_common_responses(app)
    return app


# What any route can answer before its own code runs (the middleware and the request parsing); declared on every
# operation so the document tells clients all of it.
COMMON_RESPONSES = {
    "400": "malformed JSON body",
    "401": "an API key is required, or the one sent is unknown or revoked",
    "413": "the body is over MESHWARD_MAX_BODY_BYTES",
    "422": "the request did not validate",
    "429": "over the rate limit (see Retry-After)",
}


def _declare_common_responses(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = build()
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    responses = operation.setdefault("responses", {})
                    for code, description in COMMON_RESPONSES.items():
                        responses.setdefault(code, {"description": description})
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
