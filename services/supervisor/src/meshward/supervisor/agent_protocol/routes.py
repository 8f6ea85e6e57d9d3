"""The Agent Protocol's HTTP routes (the subset the langgraph-sdk client calls), over RunManager.

Errors use the shape the SDK reads: `{"detail": "..."}` with 404 (unknown assistant, thread or run),
409 (busy thread under `reject`, resume without a pending interrupt, thread exists), 422 (bad body)."""
from __future__ import annotations

import asyncio
import functools
import json
import re
import uuid
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from sse_starlette import EventSourceResponse

from . import views
from .models import AssistantSearch, HistoryRequest, RunCreate, ThreadCreate, ThreadSearch
from .runs import NoPendingInterrupt, RunManager, run_view
from .store import Conflict, NotFound


class Detail(BaseModel):
    """The error body the langgraph-sdk reads."""

    detail: str


# Every route can answer these (unknown id, busy thread / nothing to resume, bad body, no bus): declared once.
router = APIRouter(tags=["agent-protocol"], responses={
    404: {"model": Detail, "description": "unknown assistant, thread or run"},
    409: {"model": Detail, "description": "busy thread (reject), existing thread, nothing to resume"},
    422: {"model": Detail, "description": "the body or a parameter did not validate"},
    503: {"model": Detail, "description": "the Agent Protocol needs the bus (not in the in-process mode)"},
})
_THREAD_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_RUN_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
STARTED = "2026-01-01T00:00:00+00:00"  # the one assistant's fixed creation time


class ProtocolError(Exception):
    def __init__(self, status: int, detail: str):
        self.status = status
        self.detail = detail


def _detail(status: int, detail: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail})


def protocol_errors(fn):
    @functools.wraps(fn)
    async def wrapper(*args, **kwargs):
        try:
            return await fn(*args, **kwargs)
        except ProtocolError as e:
            return _detail(e.status, e.detail)
        except NotFound as e:
            return _detail(404, f"not found: {e}")
        except (Conflict, NoPendingInterrupt) as e:
            return _detail(409, str(e))

    return wrapper


def _manager(request: Request) -> RunManager:
    manager = getattr(request.app.state, "agent_protocol", None)
    if manager is None:
        raise ProtocolError(503, "the Agent Protocol needs the bus; it is not available in the in-process mode")
    return manager


async def _body(request: Request, model: type[BaseModel], *, optional: bool = False) -> Any:
    raw = await request.body()
    if not raw.strip():
        if optional:
            raw = b"{}"
        else:
            raise ProtocolError(422, "the request needs a JSON body")
    try:
        data = json.loads(raw)
    except ValueError:
        raise ProtocolError(422, "the body is not valid JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        detail = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}" for err in e.errors()[:10])
        raise ProtocolError(422, detail) from None


def _thread_id(value: str) -> str:
    if not _THREAD_ID.match(value):
        raise ProtocolError(404, f"thread {value[:64]!r} not found: thread ids are 1-128 of A-Z a-z 0-9 . _ : -")
    return value


def _run_id(value: str) -> str:
    if not _RUN_ID.match(value):
        raise ProtocolError(404, f"run {value[:64]!r} not found")
    return value


def _assistant(assistant_id: str) -> None:
    if assistant_id not in (views.ASSISTANT_ID, views.ASSISTANT_NAME):
        raise ProtocolError(404, f"assistant {assistant_id[:100]!r} not found; the one assistant is {views.ASSISTANT_NAME!r}")


def _principal(request: Request) -> str:
    return getattr(request.state, "principal", "local")


# -- assistants --------------------------------------------------------------
@router.get("/assistants/{assistant_id}")
@protocol_errors
async def get_assistant(assistant_id: str):
    _assistant(assistant_id)
    return views.assistant(STARTED)


@router.post("/assistants/search")
@protocol_errors
async def search_assistants(request: Request):
    body = await _body(request, AssistantSearch, optional=True)
    match = (body.graph_id in (None, views.ASSISTANT_NAME) and body.name in (None, views.ASSISTANT_NAME)
             and not body.metadata)
    return [views.assistant(STARTED)][body.offset : body.offset + body.limit] if match else []


@router.post("/assistants/count")
@protocol_errors
async def count_assistants(request: Request):
    body = await _body(request, AssistantSearch, optional=True)
    return 1 if body.graph_id in (None, views.ASSISTANT_NAME) and not body.metadata else 0


# -- threads -----------------------------------------------------------------
@router.post("/threads")
@protocol_errors
async def create_thread(request: Request):
    body = await _body(request, ThreadCreate, optional=True)
    return await _manager(request).create_thread(body.thread_id, body.metadata, body.if_exists)


@router.post("/threads/search")
@protocol_errors
async def search_threads(request: Request):
    body = await _body(request, ThreadSearch, optional=True)
    ids = [i for i in body.ids if _THREAD_ID.match(i)] if body.ids is not None else None
    return await _manager(request).search_threads(ids=ids, metadata=body.metadata, status=body.status, limit=body.limit,
                                                  offset=body.offset, sort_by=body.sort_by, sort_order=body.sort_order)


@router.get("/threads/{thread_id}")
@protocol_errors
async def get_thread(request: Request, thread_id: str):
    return await _manager(request).get_thread(_thread_id(thread_id))


@router.delete("/threads/{thread_id}", status_code=204)
@protocol_errors
async def delete_thread(request: Request, thread_id: str):
    await _manager(request).delete_thread(_thread_id(thread_id))
    return Response(status_code=204)


@router.get("/threads/{thread_id}/state")
@protocol_errors
async def thread_state(request: Request, thread_id: str):
    return await _manager(request).state(_thread_id(thread_id))


@router.post("/threads/{thread_id}/history")
@protocol_errors
async def thread_history(request: Request, thread_id: str):
    body = await _body(request, HistoryRequest, optional=True)
    if body.before is not None or body.checkpoint is not None:
        raise ProtocolError(422, "history before/at a checkpoint is not supported; page with limit")
    return await _manager(request).history(_thread_id(thread_id), body.limit)


# -- runs --------------------------------------------------------------------
async def _run_body(request: Request) -> RunCreate:
    body = await _body(request, RunCreate)
    _assistant(body.assistant_id)
    if body.input is not None:
        limit = _manager(request).max_question_chars
        if len(body.question()) > limit:
            raise ProtocolError(422, f"the question is {len(body.question())} characters; the limit is {limit}")
        if not body.question().strip():
            raise ProtocolError(422, "the last user message is blank")
    return body


def _location(thread_id: str, run_id: str) -> dict[str, str]:
    return {"Content-Location": f"/threads/{thread_id}/runs/{run_id}"}


@router.post("/threads/{thread_id}/runs")
@protocol_errors
async def create_run(request: Request, thread_id: str):
    body = await _run_body(request)
    run = await _manager(request).create(_thread_id(thread_id), body, _principal(request))
    return JSONResponse(run_view(run), headers=_location(thread_id, run["run_id"]))


@router.post("/threads/{thread_id}/runs/wait")
@protocol_errors
async def wait_run(request: Request, thread_id: str):
    body = await _run_body(request)
    manager = _manager(request)
    run = await manager.create(_thread_id(thread_id), body, _principal(request))
    try:
        result = await manager.join(thread_id, run["run_id"])
    except asyncio.CancelledError:
        if body.on_disconnect == "cancel":
            asyncio.get_running_loop().create_task(manager.cancel(thread_id, run["run_id"]))
        raise
    return JSONResponse(result, headers=_location(thread_id, run["run_id"]))


def _sse(manager: RunManager, follower, thread_id: str, run_id: str, cancel_on_disconnect: bool, headers: dict[str, str]) -> EventSourceResponse:
    async def events():
        ended = False
        try:
            yield {"event": "metadata", "data": json.dumps({"run_id": run_id, "attempt": 1})}
            async for event, data in manager.events(follower, run_id):
                yield {"event": event, "data": json.dumps(data, ensure_ascii=False, default=str)}
            ended = True
        finally:
            await follower.close()
            if not ended and cancel_on_disconnect:
                # the client left and asked for that: the run stops (a task: this generator is being torn down)
                asyncio.get_running_loop().create_task(manager.cancel(thread_id, run_id))

    return EventSourceResponse(events(), ping=15, headers=headers)


@router.post("/threads/{thread_id}/runs/stream")
@protocol_errors
async def stream_run(request: Request, thread_id: str):
    body = await _run_body(request)
    manager = _manager(request)
    _thread_id(thread_id)
    run_id = str(uuid.uuid4())
    follower = await manager.follow(run_id)  # before the run exists: no event can be missed
    try:
        await manager.create(thread_id, body, _principal(request), run_id=run_id)
    except BaseException:
        await follower.close()
        raise
    return _sse(manager, follower, thread_id, run_id, body.on_disconnect == "cancel", _location(thread_id, run_id))


@router.get("/threads/{thread_id}/runs")
@protocol_errors
async def list_runs(request: Request, thread_id: str, limit: int = Query(default=10, ge=1, le=100), offset: int = Query(default=0, ge=0, le=10_000),
                    status: str | None = Query(default=None, pattern="^(pending|running|error|success|timeout|interrupted)$")):
    return [run_view(r) for r in await _manager(request).list_runs(_thread_id(thread_id), limit, offset, status)]


@router.get("/threads/{thread_id}/runs/{run_id}")
@protocol_errors
async def get_run(request: Request, thread_id: str, run_id: str):
    return run_view(await _manager(request).run(_thread_id(thread_id), _run_id(run_id)))


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
@protocol_errors
async def cancel_run(request: Request, thread_id: str, run_id: str, wait: int = Query(default=0, ge=0, le=1),
                     action: str = Query(default="interrupt", pattern="^(interrupt|rollback)$")):
    if action == "rollback":
        raise ProtocolError(422, "action=rollback is not supported; use interrupt")
    manager = _manager(request)
    await manager.cancel(_thread_id(thread_id), _run_id(run_id))
    if wait:
        await manager.join(thread_id, run_id)
    return Response(status_code=204 if not wait else 200, content=None if not wait else b"null", media_type="application/json")


@router.get("/threads/{thread_id}/runs/{run_id}/join")
@protocol_errors
async def join_run(request: Request, thread_id: str, run_id: str):
    return await _manager(request).join(_thread_id(thread_id), _run_id(run_id))


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
@protocol_errors
async def join_stream(request: Request, thread_id: str, run_id: str, cancel_on_disconnect: bool = Query(default=False)):
    manager = _manager(request)
    await manager.run(_thread_id(thread_id), _run_id(run_id))
    follower = await manager.follow(run_id)
    return _sse(manager, follower, thread_id, run_id, cancel_on_disconnect, _location(thread_id, run_id))
