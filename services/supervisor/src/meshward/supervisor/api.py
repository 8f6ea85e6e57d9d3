"""The HTTP ingress: thin routes over the Asker and the health checks."""
from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from meshward.bus import Service
from meshward.contracts import (
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
from starlette.exceptions import HTTPException as StarletteHTTPException

from .asker import Asker
from .graph import GraphBuilder
from .http_tracing import HttpServerMiddleware
from .models import THREAD_ID_PATTERN, AskRequest, AskResponse, ErrorResponse
from .ports import AgentPorts, NatsPorts
from .settings import SupervisorSettings

log = logging.getLogger(__name__)
DEPENDENCIES = ("security", "intent", "tools", "memory")


def _error(status: int, code: str, message: str, details: list | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"code": code, "message": message, "details": details or []}})


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
                ports: AgentPorts = NatsPorts(service.bus)
            else:
                ports = local_ports
            settings.checkpoint_db.parent.mkdir(parents=True, exist_ok=True)
            saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(settings.checkpoint_db)))
            graph = GraphBuilder(ports, max_visits=settings.max_node_visits).build(checkpointer=saver)
            app.state.asker = Asker(graph, ports, timeout_s=settings.ask_timeout_s, recursion_limit=settings.recursion_limit)
            yield

    app = FastAPI(title="meshward", version="0.1.0", lifespan=lifespan)
    app.add_middleware(HttpServerMiddleware, max_body_bytes=settings.max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return _error(400, "malformed_json", "the body is not valid JSON")
        details = [{"loc": [str(p) for p in e.get("loc", ())], "msg": e.get("msg"), "type": e.get("type")} for e in errors[:10]]
        return _error(422, "bad_request", "; ".join(f"{'.'.join(d['loc'])}: {d['msg']}" for d in details), details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, "http_error", str(exc.detail))

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

        results = dict(await asyncio.gather(*(probe(n) for n in DEPENDENCIES)))
        services = {}
        missing = []
        for name, r in results.items():
            if isinstance(r, HealthReply) and r.ready:
                services[name] = {"ready": True, "instance": r.instance, "details": r.details}
            else:
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

    @app.get("/v1/threads/{thread_id}/history", response_model=HistoryReply)
    async def thread_history(thread_id: str = Path(pattern=THREAD_ID_PATTERN), limit: int = Query(default=50, ge=1, le=500)):
        return await memory_request(subjects.MEMORY_HISTORY, HistoryRequest(thread_id=thread_id, limit=limit), HistoryReply)

    @app.get("/v1/threads/{thread_id}/context", response_model=ContextReply)
    async def thread_context(thread_id: str = Path(pattern=THREAD_ID_PATTERN)):
        return await memory_request(subjects.MEMORY_CONTEXT, ContextRequest(thread_id=thread_id), ContextReply)

    @app.get("/v1/insights", response_model=InsightsReply)
    async def insights():
        return await memory_request(subjects.MEMORY_INSIGHTS, InsightsRequest(), InsightsReply)

    @app.get("/v1/threats", response_model=SearchReply)
    async def find_threats(q: str = Query(min_length=1, max_length=4_000), k: int = Query(default=5, ge=1, le=50)):
        return await memory_request(subjects.MEMORY_SEARCH, SearchRequest(query=q, collection="security_threats", k=k), SearchReply)

    @app.delete("/v1/threats/{threat_id}", response_model=RetractThreatReply)
    async def retract_threat(threat_id: str = Path(pattern=r"^[A-Za-z0-9._:-]{1,128}$")):
        reply = await memory_request(subjects.MEMORY_RETRACT_THREAT, RetractThreatRequest(threat_id=threat_id), RetractThreatReply)
        if isinstance(reply, RetractThreatReply) and not reply.retracted:
            return _error(404, "not_found", f"no learned threat {threat_id}")
        return reply

    @app.post("/v1/ask", response_model=AskResponse, responses={400: {"model": ErrorResponse}, 413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}})
    async def ask(body: AskRequest) -> AskResponse:
        if len(body.question) > settings.max_question_chars:
            return _error(422, "too_large", f"question is {len(body.question)} characters; the limit is {settings.max_question_chars}")
        return await app.state.asker.ask(body.question, body.thread_id, [a.model_dump() for a in body.attachments])

    return app
