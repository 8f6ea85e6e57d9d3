"""NATS door onto the tool registry: meshward.v1.tools.list / .call."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass

from meshward.bus import Service, ServiceError
from meshward.bus.context import current_request_id
from meshward.contracts import (
    ApprovedToolCallRequest,
    Event,
    ToolCalled,
    ToolCallRequest,
    ToolCatalog,
    ToolListRequest,
    ToolResult,
    subjects,
)

from .builtin import build_registry
from .cluster.tools import ClusterDomain
from .mcp_mount import McpMount
from .mcp_server import McpHttpServer
from .registry import ToolError, ToolRegistry
from .results import ResultStore
from .settings import ToolsSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolsState:
    results: ResultStore
    mount: McpMount | None
    mcp: McpHttpServer | None
    cluster_health: asyncio.Task | None


async def _cancel(task: asyncio.Task) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def create_service(settings: ToolsSettings | None = None, registry: ToolRegistry | None = None, cluster: ClusterDomain | None = None) -> Service[ToolsState]:
    settings = settings or ToolsSettings()
    cluster = cluster or ClusterDomain()
    registry = registry or build_registry(cluster=cluster)
    service: Service[ToolsState] = Service("tools")

    def emit(subject: str, event: Event) -> None:
        if settings.publish_events and service.bus is not None:
            service.bus.emit(subject, event.model_copy(update={"request_id": event.request_id or current_request_id()}))

    cluster.emit = emit

    def tool_called(name: str, ok: bool, duration_ms: float, error_code: str | None) -> None:
        if settings.publish_events and service.bus is not None:
            service.bus.emit(subjects.EVENT_TOOL_CALLED, ToolCalled(name=name, ok=ok, duration_ms=duration_ms, error_code=error_code, request_id=current_request_id()))

    @service.build
    async def _build(svc: Service, stack: AsyncExitStack) -> ToolsState:
        await svc.bus.ensure_event_stream()
        stack.push_async_callback(cluster.close)
        mount = server = None
        if settings.mount_external:
            mount = McpMount(registry)
            await mount.start()  # unreachable servers are logged and retried in the background
            stack.push_async_callback(mount.close)
        if settings.serve_mcp:
            server = McpHttpServer(registry, on_call=tool_called)
            await server.start()
            stack.push_async_callback(server.stop)
            svc.details["mcp"] = server.url
        svc.details["tools"] = ",".join(registry.names())
        health = None
        if cluster.settings.health_interval_s:
            health = asyncio.create_task(cluster.run_health_checks(cluster.settings.health_interval_s), name="cluster-health")
            stack.push_async_callback(_cancel, health)
        results = await ResultStore.open(svc.bus.jetstream, subjects.TOOL_RESULTS_KV, settings.result_ttl_s)
        return ToolsState(results, mount, server, health)

    @service.handler(subjects.TOOLS_LIST, ToolListRequest)
    async def list_tools(_: ToolListRequest) -> ToolCatalog:
        return ToolCatalog(tools=registry.catalog())

    async def run(name: str, arguments: dict, approved: bool = False, key: str | None = None) -> ToolResult:
        if key is not None and (stored := await service.state.results.get(key)) is not None:
            return stored  # this call ran already (a run redelivered to another supervisor replica)
        ok, code, duration = True, None, 0.0
        try:
            result = await registry.call(name, arguments, approved=approved)
            duration = result.duration_ms
            if key is not None:
                await service.state.results.put(key, result)
            return result
        except ToolError as e:
            ok, code = False, str(e.code)
            raise ServiceError(e.code, e.message) from None
        finally:
            tool_called(name, ok, duration, code)

    @service.handler(subjects.TOOLS_CALL, ToolCallRequest)
    async def call_tool(req: ToolCallRequest) -> ToolResult:
        return await run(req.name, req.arguments, key=req.idempotency_key)

    @service.handler(subjects.TOOLS_CALL_APPROVED, ApprovedToolCallRequest)
    async def call_approved(req: ApprovedToolCallRequest) -> ToolResult:
        # Only the supervisor may publish here (the bus permissions); it sends a call after a human approved it.
        log.info("running %s approved by %s (approval %s)", req.name, req.actor, req.approval_id)
        return await run(req.name, req.arguments, approved=True)

    return service
