"""NATS door onto the tool registry: meshward.v1.tools.list / .call."""
from __future__ import annotations

from meshward.bus import Service, ServiceError
from meshward.bus.context import current_request_id
from meshward.contracts import ToolCalled, ToolCallRequest, ToolCatalog, ToolListRequest, ToolResult, subjects

from .builtin import build_registry
from .registry import ToolError, ToolRegistry
from .settings import ToolsSettings


def create_service(settings: ToolsSettings | None = None, registry: ToolRegistry | None = None) -> Service:
    settings = settings or ToolsSettings()
    registry = registry or build_registry()
    service = Service("tools")
    service.details["tools"] = ",".join(registry.names())

    @service.on_startup
    async def _stream(svc: Service) -> None:
        await svc.bus.ensure_event_stream()

    @service.handler(subjects.TOOLS_LIST, ToolListRequest)
    async def list_tools(_: ToolListRequest) -> ToolCatalog:
        return ToolCatalog(tools=registry.catalog())

    @service.handler(subjects.TOOLS_CALL, ToolCallRequest)
    async def call_tool(req: ToolCallRequest) -> ToolResult:
        ok, code, duration = True, None, 0.0
        try:
            result = await registry.call(req.name, req.arguments)
            duration = result.duration_ms
            return result
        except ToolError as e:
            ok, code = False, str(e.code)
            raise ServiceError(e.code, e.message) from None
        finally:
            if settings.publish_events:
                event = ToolCalled(name=req.name, ok=ok, duration_ms=duration, error_code=code, request_id=current_request_id())
                service.bus.emit(subjects.EVENT_TOOL_CALLED, event)

    return service
