"""MCP door onto the tool registry: the same tools as meshward.v1.tools.list / .call, over MCP streamable HTTP.

    app = build_mcp_app(registry)                      # an ASGI (Starlette) app, endpoint /mcp
    server = McpHttpServer(registry, host, port)       # uvicorn in-process, beside the NATS subscriptions
    await server.start(); ...; await server.stop()
    # or: task = asyncio.create_task(serve_mcp(registry, host, port)); ...; task.cancel()

Built on the low-level `mcp.server.lowlevel.Server` (mcp 2.3) with `on_list_tools` / `on_call_tool` handlers:
the registry is the single source of truth and changes at run time (mounted MCP servers), while
`MCPServer.add_tool` derives each tool's schema from a Python signature. Every request reads the registry.

Transport: stateless streamable HTTP with JSON responses (no SSE streams, no session state); both the
handshake-era protocol (initialize + tools/*) and the 2026-07-28 single-exchange protocol are served by
the SDK's session manager. Request bodies are bounded (`McpSettings.max_body_bytes`, 413 beyond), as are
concurrent connections (`McpSettings.max_connections`, 503 beyond).

Mapping (meshward contract -> MCP):
  - tools/list: `registry.catalog()` in order; name, description and inputSchema exactly as over NATS.
    `requires_approval` travels in the tool's `_meta` as {"meshward/requiresApproval": true}.
  - tools/call: `registry.call(name, arguments)`, so validation, bounds and timeouts are the NATS ones.
    TextContent -> text; ImageContent -> image (base64 `data`, `mimeType`);
    DataContent -> text holding its compact JSON (always, for clients that read only `content`) and, when the
    result carries exactly one DataContent, `structuredContent` = that object. `_meta` carries
    {"meshward/durationMs": ...}.
  - ToolError -> a result with isError=true and text "<code>: <message>" (e.g. "too_large: ..."), with
    structuredContent {"error": {"code", "message"}}; any other exception -> isError "internal: ..." (logged),
    never a protocol-level failure. Only an envelope that does not parse as MCP (e.g. `arguments` not an
    object) is answered by the SDK with a JSON-RPC INVALID_PARAMS error.
  - A tool with requires_approval=True is listed but refused over MCP ("refused: ... requires approval") unless
    `allow_approval_required=True`: this door has no approval flow, so it must not become a way around it.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import mcp_types as mt
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from meshward.contracts import DataContent, ErrorCode, ImageContent, TextContent, ToolResult, ToolSpec
from meshward.contracts.base import MAX_ID_CHARS
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.applications import Starlette

from .registry import ToolError, ToolRegistry

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
META_REQUIRES_APPROVAL = "meshward/requiresApproval"
META_DURATION_MS = "meshward/durationMs"

# (tool name, ok, duration_ms, error code or None): lets the service emit its ToolCalled event for MCP calls too.
CallObserver = Callable[[str, bool, float, str | None], None]


class McpSettings(BaseSettings):
    """MESHWARD_MCP_HOST / MESHWARD_MCP_PORT / ...: where and how the tools service serves MCP."""

    model_config = SettingsConfigDict(env_prefix="MESHWARD_MCP_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8090
    max_body_bytes: int = 1024 * 1024  # like NATS' default max payload
    max_connections: int = 64  # concurrent HTTP connections; uvicorn answers 503 beyond
    allow_approval_required: bool = False
    # Extra Host header values accepted when serving on a loopback host (DNS-rebinding protection is on there).
    allowed_hosts: list[str] = []


def _to_mcp_tool(spec: ToolSpec) -> mt.Tool:
    meta = {META_REQUIRES_APPROVAL: True} if spec.requires_approval else None
    # the standard hints say the same to MCP clients: a read-only tool may be called again safely
    annotations = mt.ToolAnnotations(read_only_hint=True, idempotent_hint=True) if spec.read_only else None
    return mt.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema, meta=meta, annotations=annotations)


def _compact_json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)


def to_mcp_result(result: ToolResult) -> mt.CallToolResult:
    """A registry ToolResult as an MCP CallToolResult (see the module docstring for the mapping)."""
    content: list[mt.TextContent | mt.ImageContent] = []
    data: list[dict[str, Any]] = []
    for c in result.content:
        if isinstance(c, TextContent):
            content.append(mt.TextContent(type="text", text=c.text))
        elif isinstance(c, ImageContent):
            content.append(mt.ImageContent(type="image", data=c.data, mime_type=c.mime_type))
        elif isinstance(c, DataContent):
            content.append(mt.TextContent(type="text", text=_compact_json(c.data)))
            data.append(c.data)
    return mt.CallToolResult(
        content=content,
        structured_content=data[0] if len(data) == 1 else None,
        is_error=False,
        meta={META_DURATION_MS: round(result.duration_ms, 3)},
    )


def error_result(code: ErrorCode | str, message: str) -> mt.CallToolResult:
    """A tool-level failure: isError=true, the typed code first in the text."""
    code = str(code)
    return mt.CallToolResult(
        content=[mt.TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": {"code": code, "message": message}},
        is_error=True,
    )


def build_mcp_server(
    registry: ToolRegistry,
    *,
    allow_approval_required: bool = False,
    on_call: CallObserver | None = None,
    name: str = "meshward-tools",
) -> Server[Any]:
    """The low-level MCP server whose tools/list and tools/call are the registry's catalog and call."""

    async def list_tools(_ctx: Any, _params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=[_to_mcp_tool(spec) for spec in registry.catalog()])

    def input_schema(tool_name: str) -> dict[str, Any] | None:
        # Used by the SDK to check 2026-07-28 `Mcp-Param-*` headers against the schema without a tools/list.
        try:
            return registry.get(tool_name).spec().input_schema
        except ToolError:
            return None

    async def call_tool(_ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
        tool_name, arguments = params.name, params.arguments or {}
        start = time.perf_counter()
        ok, code = False, None
        try:
            if len(tool_name) > MAX_ID_CHARS:
                raise ToolError(ErrorCode.BAD_REQUEST, f"tool name longer than {MAX_ID_CHARS} characters")
            if not allow_approval_required and registry.get(tool_name).requires_approval:
                raise ToolError(ErrorCode.REFUSED, f"{tool_name} requires approval; it cannot be called over MCP")
            result = await registry.call(tool_name, arguments, approved=allow_approval_required and registry.get(tool_name).requires_approval)
            ok = True
            return to_mcp_result(result)
        except ToolError as e:
            code = str(e.code)
            return error_result(e.code, e.message)
        except Exception:
            code = str(ErrorCode.INTERNAL)
            log.exception("MCP call of tool %r failed", tool_name[:MAX_ID_CHARS])
            return error_result(ErrorCode.INTERNAL, f"{tool_name[:MAX_ID_CHARS]} failed unexpectedly")
        finally:
            if on_call is not None:
                try:
                    on_call(tool_name[:MAX_ID_CHARS], ok, (time.perf_counter() - start) * 1000, code)
                except Exception:
                    log.exception("MCP on_call observer failed")

    return Server(
        name,
        version="0.1.0",
        description="meshward tools registry over MCP",
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def build_mcp_app(
    registry: ToolRegistry,
    *,
    settings: McpSettings | None = None,
    host: str | None = None,
    max_body_bytes: int | None = None,
    allow_approval_required: bool | None = None,
    on_call: CallObserver | None = None,
) -> Starlette:
    """An ASGI app serving `registry` over MCP streamable HTTP (stateless, JSON responses) at /mcp.

    The app's lifespan runs the SDK's session manager: serve it with a server that runs ASGI lifespan
    (uvicorn does; see McpHttpServer). Each call builds a fresh app (the SDK's manager runs once).
    `host` is the address it is served on: on a loopback host the Host/Origin headers must be loopback
    ones (DNS-rebinding protection), plus `settings.allowed_hosts`.
    """
    settings = settings or McpSettings()
    host = host if host is not None else settings.host
    server = build_mcp_server(
        registry,
        allow_approval_required=settings.allow_approval_required if allow_approval_required is None else allow_approval_required,
        on_call=on_call,
    )
    security = None
    if host in ("127.0.0.1", "localhost", "::1"):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", *settings.allowed_hosts],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=True,
        stateless_http=True,
        max_request_body_size=max_body_bytes or settings.max_body_bytes,
        transport_security=security,
        host=host,
    )


class _EmbeddedUvicorn(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host process (the NATS service owns SIGTERM)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29 spelling
        pass


def _bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class McpHttpServer:
    """The MCP app under an in-process uvicorn: `await start()` binds (errors raise here) and serves in a task;
    `await stop()` shuts down gracefully (in-flight requests finish, bounded by `graceful_s`)."""

    def __init__(
        self,
        registry: ToolRegistry,
        host: str | None = None,
        port: int | None = None,
        *,
        settings: McpSettings | None = None,
        on_call: CallObserver | None = None,
        graceful_s: int = 5,
    ) -> None:
        self.settings = settings or McpSettings()
        self.host = host if host is not None else self.settings.host
        self._requested_port = port if port is not None else self.settings.port
        self.port: int | None = None
        app = build_mcp_app(registry, settings=self.settings, host=self.host, on_call=on_call)
        config = uvicorn.Config(
            app,
            lifespan="on",
            log_config=None,  # keep the service's logging setup
            access_log=False,
            limit_concurrency=self.settings.max_connections,
            timeout_graceful_shutdown=graceful_s,
        )
        self._uvicorn = _EmbeddedUvicorn(config)
        self._sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"

    async def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("McpHttpServer already started")
        self._sock = _bind(self.host, self._requested_port)
        self.port = self._sock.getsockname()[1]
        self._task = task = asyncio.create_task(self._serve(), name="mcp-http")
        while not self._uvicorn.started:
            if task.done():
                self._task = None
                await task  # raises what stopped it
                raise RuntimeError("MCP HTTP server stopped during start-up")
            await asyncio.sleep(0.01)
        log.info("MCP server on %s", self.url)

    async def _serve(self) -> None:
        try:
            await self._uvicorn.serve(sockets=[self._sock])
        except SystemExit:  # uvicorn's answer to a failed lifespan start-up
            raise RuntimeError("MCP HTTP server failed to start (ASGI lifespan start-up failed)") from None
        finally:
            if self._sock is not None:
                self._sock.close()

    async def wait(self) -> None:
        """Until the server stops."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._uvicorn.should_exit = True
        try:
            await task
        except asyncio.CancelledError:
            if not task.done():
                raise
        except Exception:
            log.exception("MCP HTTP server stopped with an error")


async def serve_mcp(
    registry: ToolRegistry,
    host: str | None = None,
    port: int | None = None,
    *,
    settings: McpSettings | None = None,
    on_call: CallObserver | None = None,
) -> None:
    """Serve `registry` over MCP until cancelled; cancellation shuts the server down gracefully.

    For the tools service: `task = asyncio.create_task(serve_mcp(registry))` at start-up, `task.cancel()`
    (then await it) at shutdown. Use McpHttpServer directly to learn the bound port or to stop without cancelling.
    """
    server = McpHttpServer(registry, host, port, settings=settings, on_call=on_call)
    await server.start()
    try:
        await server.wait()
    finally:
        await asyncio.shield(server.stop())
