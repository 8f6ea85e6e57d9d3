"""Mount the tools of external MCP servers (streamable HTTP) into the tool registry.

    MESHWARD_MCP_SERVERS='[{"name": "files", "url": "http://127.0.0.1:9000/mcp"}]'

    mount = McpMount(registry)          # settings from the environment, or McpMount(registry, McpMountSettings(...))
    await mount.start()                 # connect, list, register; never raises for an unreachable server
    ...                                 # registry.call("files__read", {...}) forwards to the remote tool
    await mount.close()

Naming: remote tool `t` of server `prefix` is registered as f"{prefix}__{t}" (SEPARATOR = "__"). Both parts use
only the MCP tool-name alphabet [A-Za-z0-9_.-] (SEP-986), and prefixes are [A-Za-z0-9-]{1,32} (no "_"), so
the first "__" always splits the name. Remote names outside that alphabet, or a full name over 128 characters,
are skipped with a warning, as is a name already in the registry.

Schema: each mounted Tool's args_model is a permissive RootModel[dict] whose `model_json_schema()` returns the
remote inputSchema (live: a re-listing updates it), so the registry's catalog advertises the remote schema
unchanged (less its top-level "title", like every catalog entry). Arguments are passed through as the object the
caller gave; validating them is the remote server's job (no local JSON-schema evaluation of a remote-supplied
schema: no remote $ref retrieval, no remote regexes run here). The serialized arguments are bounded.

Session: ONE long-lived mcp `Client` per server (mcp 2.3 `mcp.Client(url)`, streamable HTTP; it negotiates the
2026-07-28 single-exchange protocol or falls back to the initialize handshake), held open by a task of its own
(anyio scopes must be entered and left in one task) and shared by concurrent calls. The SDK's transport dies
on a connection failure (and a stateful server forgets its session when restarted), so a failed call marks the
connection broken; the next use reconnects. A call is retried once on a fresh connection, within the tool's
time budget, only when the failure proves the request never reached the server (connection refused / connect
timeout, or "session not found" from a restarted server); otherwise it fails as `unavailable`, so a
non-idempotent remote tool is never run twice. A background task re-lists every `refresh_s` seconds: it
reconnects to servers that were down (registering their tools then) and picks up new or changed tools. The
registry cannot unregister, so a tool the server no longer lists stays in the catalog and answers `not_found`.

Results: text -> TextContent; image -> ImageContent; structuredContent (an object) -> DataContent; audio,
resource links and binary resources -> a short TextContent note; embedded text resources -> TextContent.
Errors: isError results -> ToolError with the code parsed from a "<code>: message" text when it is a meshward
ErrorCode (another meshward behind the mount), otherwise bad_request; JSON-RPC INVALID_PARAMS -> bad_request,
request timeout -> deadline_exceeded, connection trouble and anything else -> unavailable. Remote text in
descriptions and messages is truncated; a result over `max_result_bytes` is too_large.
"""
from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import mcp_types as mt
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.tool_name_validation import TOOL_NAME_REGEX
from meshward.contracts import Content, DataContent, ErrorCode, ImageContent, TextContent
from meshward.contracts.base import MAX_ID_CHARS
from pydantic import BaseModel, Field, RootModel, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .registry import Tool, ToolError, ToolRegistry

log = logging.getLogger(__name__)

SEPARATOR = "__"
PREFIX_PATTERN = r"^[A-Za-z0-9-]{1,32}$"
MAX_DESCRIPTION_CHARS = 2_000
MAX_MESSAGE_CHARS = 1_000
MAX_SCHEMA_BYTES = 64 * 1024
MAX_LIST_PAGES = 20
_SESSION_GONE = ("session not found", "session terminated")
_NOT_DELIVERED = (httpx2.ConnectError, httpx2.ConnectTimeout)
_CODES = frozenset(c.value for c in ErrorCode)


class McpServerRef(BaseModel):
    name: str = Field(pattern=PREFIX_PATTERN, description="prefix of the mounted tool names")
    url: str = Field(pattern=r"^https?://", max_length=2_000, description="streamable HTTP endpoint, e.g. http://host:port/mcp")
    # "auto": probe the 2026-07-28 protocol, fall back to the initialize handshake; "legacy": handshake only.
    mode: Literal["auto", "legacy"] = "auto"


class McpMountSettings(BaseSettings):
    """MESHWARD_MCP_SERVERS (a JSON list of {"name", "url"}) and the bounds of the mount."""

    model_config = SettingsConfigDict(env_prefix="MESHWARD_MCP_", extra="ignore")

    servers: list[McpServerRef] = []
    call_timeout_s: float = 30.0  # the mounted tools' timeout (the registry enforces it), reconnect + retry included
    connect_timeout_s: float = 10.0
    refresh_s: float = 60.0  # re-list period; 0 disables the background task
    max_tools_per_server: int = 128
    max_args_bytes: int = 256 * 1024
    max_result_bytes: int = 768 * 1024  # under NATS' default 1 MiB payload

    @field_validator("servers")
    @classmethod
    def _unique(cls, servers: list[McpServerRef]) -> list[McpServerRef]:
        names = [s.name for s in servers]
        if len(names) != len(set(names)):
            raise ValueError(f"duplicate MCP server names in {names}")
        return servers


def _clip(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _leaves(exc: BaseException | None) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for e in exc.exceptions:
            yield from _leaves(e)
    elif exc is not None:
        yield exc


def _describe(e: BaseException) -> str:
    """'ConnectError: All connection attempts failed' rather than 'unhandled errors in a TaskGroup'."""
    leaf = next(_leaves(e), e)
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


@dataclass
class _RemoteTool:
    remote_name: str
    name: str
    input_schema: dict[str, Any]
    present: bool = True


def _args_model(remote: _RemoteTool) -> type[BaseModel]:
    """A permissive model (any JSON object) that advertises the remote tool's input schema."""

    class RemoteArgs(RootModel[dict[str, Any]]):
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(remote.input_schema)

    RemoteArgs.__name__ = RemoteArgs.__qualname__ = f"RemoteArgs_{re.sub(r'[^A-Za-z0-9_]', '_', remote.name)}"
    return RemoteArgs


class _Connection:
    """One open mcp Client, held by its own task until `close()` or until the transport fails."""

    def __init__(self, url: str, read_timeout_s: float, mode: str = "auto"):
        self.url = url
        self.mode = mode
        self.read_timeout_s = read_timeout_s
        self.client: Client | None = None
        self.failure: BaseException | None = None
        self._ready: asyncio.Future[Client] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done()

    async def open(self, timeout_s: float) -> Client:
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(), name=f"mcp-client {self.url}")
        try:
            async with asyncio.timeout(timeout_s):
                self.client = await self._ready
        except BaseException:
            self._ready.cancel()  # tells the holder to let go if it connects after all
            await self.close()
            raise
        return self.client

    async def _hold(self) -> None:
        assert self._ready is not None
        try:
            async with Client(self.url, mode=self.mode, cache=None, read_timeout_seconds=self.read_timeout_s,
                              client_info=mt.Implementation(name="meshward-tools", version="0.1.0")) as client:
                if self._ready.done():  # the opener gave up meanwhile
                    return
                self._ready.set_result(client)
                await self._stop.wait()
        except asyncio.CancelledError:
            if not self._ready.done():
                self._ready.set_exception(ConnectionError("connection attempt cancelled"))
            raise
        except Exception as e:  # the transport failed (connection refused, reset...) or the handshake did
            self.failure = e
            if not self._ready.done():
                self._ready.set_exception(e)

    async def settled_failure(self, wait_s: float = 1.0) -> BaseException | None:
        """The transport's failure, once its holder task has wound down (the call can see the failure first)."""
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._task), wait_s)
        return self.failure

    async def close(self) -> None:
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), 5.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        except Exception:
            pass


def _mcp_error_to_tool_error(server: str, e: MCPError) -> ToolError:
    msg = f"{server}: {_clip(e.message, MAX_MESSAGE_CHARS)}"
    if e.code == mt.INVALID_PARAMS:
        return ToolError(ErrorCode.BAD_REQUEST, msg)
    if e.code == mt.REQUEST_TIMEOUT:
        return ToolError(ErrorCode.DEADLINE_EXCEEDED, msg)
    return ToolError(ErrorCode.UNAVAILABLE, msg)


def _error_from_result(server: str, result: mt.CallToolResult) -> ToolError:
    text = " ".join(c.text for c in result.content if isinstance(c, mt.TextContent)).strip() or "remote tool failed"
    code, _, rest = text.partition(": ")
    if code in _CODES and rest:
        parsed = ErrorCode(code)
        # INTERNAL means a bug of *this* process; a remote's bug is a dependency being unavailable.
        return ToolError(ErrorCode.UNAVAILABLE if parsed is ErrorCode.INTERNAL else parsed, f"{server}: {_clip(rest, MAX_MESSAGE_CHARS)}")
    return ToolError(ErrorCode.BAD_REQUEST, f"{server}: {_clip(text, MAX_MESSAGE_CHARS)}")


def _content_from_result(result: mt.CallToolResult) -> list[Content]:
    out: list[Content] = []
    for c in result.content:
        if isinstance(c, mt.TextContent):
            out.append(TextContent(text=c.text))
        elif isinstance(c, mt.ImageContent):
            out.append(ImageContent(data=c.data, mime_type=c.mime_type))
        elif isinstance(c, mt.EmbeddedResource) and isinstance(c.resource, mt.TextResourceContents):
            out.append(TextContent(text=c.resource.text))
        elif isinstance(c, mt.EmbeddedResource):
            out.append(TextContent(text=f"[binary resource {c.resource.uri} omitted]"))
        elif isinstance(c, mt.ResourceLink):
            out.append(TextContent(text=f"[resource {c.uri}]"))
        else:
            out.append(TextContent(text=f"[{getattr(c, 'type', 'unknown')} content omitted]"))
    if isinstance(result.structured_content, dict):
        out.append(DataContent(data=result.structured_content))
    return out


@dataclass
class _Remote:
    ref: McpServerRef
    tools: dict[str, _RemoteTool] = field(default_factory=dict)  # by remote name
    conn: _Connection | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_error: str | None = None


class McpMount:
    """External MCP servers' tools, registered into `registry` as f"{server}__{tool}" (see the module docstring)."""

    def __init__(self, registry: ToolRegistry, settings: McpMountSettings | None = None):
        self.registry = registry
        self.settings = settings or McpMountSettings()
        self._remotes = {ref.name: _Remote(ref) for ref in self.settings.servers}
        self._refresher: asyncio.Task[None] | None = None
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to every server and register its tools; an unreachable one is logged and retried later."""
        await asyncio.gather(*(self.refresh(name) for name in self._remotes))
        if self.settings.refresh_s > 0 and self._remotes:
            self._refresher = asyncio.create_task(self._refresh_loop(), name="mcp-mount-refresh")

    async def close(self) -> None:
        self._closed = True
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None
        for remote in self._remotes.values():
            if remote.conn is not None:
                await remote.conn.close()
                remote.conn = None

    def status(self) -> dict[str, dict[str, Any]]:
        """Per server: connected or not, the mounted tool names, the last connection error."""
        return {
            name: {
                "url": r.ref.url,
                "connected": r.conn is not None and r.conn.alive,
                "tools": sorted(t.name for t in r.tools.values() if t.present),
                "error": r.last_error,
            }
            for name, r in self._remotes.items()
        }

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.refresh_s)
            try:
                await asyncio.gather(*(self.refresh(name) for name in self._remotes))
            except Exception:
                log.exception("MCP mount refresh failed")

    async def refresh(self, name: str) -> bool:
        """Re-list one server's tools (connecting if needed) and register new ones. False when unreachable."""
        remote = self._remotes[name]
        try:
            conn = await self._connection(remote)
        except Exception as e:
            self._note_error(remote, e)
            return False
        try:
            await self._list_and_register(remote, conn)
        except Exception as e:
            self._note_error(remote, e)
            await self._after_failure(remote, conn, e)  # drops the connection when it is the trouble
            return False
        return True

    # --- connections -----------------------------------------------------------------------------------------

    def _note_error(self, remote: _Remote, e: BaseException) -> None:
        msg = _clip(_describe(e), MAX_MESSAGE_CHARS)
        if msg != remote.last_error:  # log state changes, not every failed attempt
            log.warning("MCP server %s (%s) unavailable: %s", remote.ref.name, remote.ref.url, msg)
        remote.last_error = msg

    async def _connection(self, remote: _Remote, timeout_s: float | None = None) -> _Connection:
        if self._closed:
            raise ToolError(ErrorCode.UNAVAILABLE, "MCP mount closed")
        async with remote.lock:
            conn = remote.conn
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                await conn.close()
                remote.conn = None
            conn = _Connection(remote.ref.url, self.settings.call_timeout_s, remote.ref.mode)
            await conn.open(min(timeout_s or self.settings.connect_timeout_s, self.settings.connect_timeout_s))
            remote.conn = conn
            if remote.last_error is not None:
                log.info("MCP server %s (%s) connected", remote.ref.name, remote.ref.url)
            remote.last_error = None
            return conn

    async def _drop(self, remote: _Remote, conn: _Connection) -> None:
        async with remote.lock:
            if remote.conn is conn:
                remote.conn = None
        await conn.close()

    async def _list_and_register(self, remote: _Remote, conn: _Connection) -> None:
        assert conn.client is not None
        listed: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await conn.client.list_tools(cursor=cursor, cache_mode="refresh")
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(listed) >= self.settings.max_tools_per_server:
                break
        if len(listed) > self.settings.max_tools_per_server:
            log.warning("MCP server %s lists %d tools; mounting the first %d", remote.ref.name, len(listed), self.settings.max_tools_per_server)
            listed = listed[: self.settings.max_tools_per_server]
        seen: set[str] = set()
        for t in listed:
            seen.add(t.name)
            self._sync_tool(remote, t)
        for t in remote.tools.values():
            t.present = t.remote_name in seen

    def _sync_tool(self, remote: _Remote, t: mt.Tool) -> None:
        full = f"{remote.ref.name}{SEPARATOR}{t.name}"
        schema = t.input_schema if isinstance(t.input_schema, dict) else {"type": "object"}
        if len(json.dumps(schema, default=str)) > MAX_SCHEMA_BYTES:
            log.warning("MCP tool %s skipped: input schema over %d bytes", full[:200], MAX_SCHEMA_BYTES)
            return
        known = remote.tools.get(t.name)
        if known is not None:
            known.input_schema = schema  # the registered args model reads it: the catalog follows the remote
            return
        if not TOOL_NAME_REGEX.fullmatch(t.name) or len(full) > MAX_ID_CHARS:
            log.warning("MCP tool %r of %s skipped: not a valid tool name, or %r longer than %d", t.name[:200], remote.ref.name, full[:200], MAX_ID_CHARS)
            return
        rt = _RemoteTool(remote_name=t.name, name=full, input_schema=schema)
        description = _clip(t.description or t.title or t.name, MAX_DESCRIPTION_CHARS)

        async def forward(args: BaseModel) -> list[Content]:
            return await self._call(remote, rt, args.root)  # type: ignore[attr-defined]

        try:
            self.registry.register(Tool(name=full, description=description, args_model=_args_model(rt), fn=forward, timeout_s=self.settings.call_timeout_s))
        except ValueError:
            log.warning("MCP tool %s skipped: a tool of that name is already registered", full)
            return
        remote.tools[t.name] = rt
        log.info("mounted MCP tool %s", full)

    # --- calls -----------------------------------------------------------------------------------------------

    async def _call(self, remote: _Remote, rt: _RemoteTool, arguments: dict[str, Any]) -> list[Content]:
        if not rt.present:
            raise ToolError(ErrorCode.NOT_FOUND, f"{rt.name} is no longer offered by MCP server {remote.ref.name}")
        if len(json.dumps(arguments, default=str)) > self.settings.max_args_bytes:
            raise ToolError(ErrorCode.TOO_LARGE, f"{rt.name}: arguments over {self.settings.max_args_bytes} bytes")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.call_timeout_s - 0.05  # answer before the registry's own timeout
        for attempt in (1, 2):
            remaining = deadline - loop.time()
            try:
                conn = await self._connection(remote, remaining)
            except ToolError:
                raise
            except Exception as e:
                self._note_error(remote, e)
                raise ToolError(ErrorCode.UNAVAILABLE, f"MCP server {remote.ref.name} unreachable: {remote.last_error}") from None
            assert conn.client is not None
            try:
                result = await conn.client.call_tool(rt.remote_name, arguments, read_timeout_seconds=max(deadline - loop.time(), 0.1))
            except MCPError as e:
                retry = await self._after_failure(remote, conn, e)
                if retry and attempt == 1 and deadline - loop.time() > 0.5:
                    log.info("MCP server %s: reconnecting and retrying %s (%s)", remote.ref.name, rt.name, e.message)
                    continue
                raise _mcp_error_to_tool_error(remote.ref.name, e) from None
            except Exception as e:  # e.g. an output-schema mismatch in the SDK, or a transport error raised as is
                await self._after_failure(remote, conn, e)
                raise ToolError(ErrorCode.UNAVAILABLE, f"{remote.ref.name}: {_clip(_describe(e), MAX_MESSAGE_CHARS)}") from None
            return self._result(remote, rt, result)
        raise AssertionError("unreachable")

    async def _after_failure(self, remote: _Remote, conn: _Connection, e: BaseException) -> bool:
        """Drop a broken connection; True when the failed request provably never reached the server."""
        if isinstance(e, MCPError) and e.code == mt.INVALID_REQUEST and e.message.lower() in _SESSION_GONE:
            await self._drop(remote, conn)  # a restarted stateful server forgot our session: it ran nothing
            return True
        if conn.alive and not (isinstance(e, MCPError) and e.code == mt.CONNECTION_CLOSED):
            return False  # an answer over a healthy connection: nothing to repair
        failure = await conn.settled_failure()
        await self._drop(remote, conn)
        if failure is not None:
            self._note_error(remote, failure)
        leaves = list(_leaves(failure))
        return bool(leaves) and all(isinstance(x, _NOT_DELIVERED) for x in leaves)

    def _result(self, remote: _Remote, rt: _RemoteTool, result: mt.CallToolResult) -> list[Content]:
        size = len(result.model_dump_json(by_alias=True, exclude_none=True))
        if size > self.settings.max_result_bytes:
            raise ToolError(ErrorCode.TOO_LARGE, f"{rt.name}: result of {size} bytes over {self.settings.max_result_bytes}")
        if result.is_error:
            raise _error_from_result(remote.ref.name, result)
        return _content_from_result(result)
