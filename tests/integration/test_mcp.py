"""MCP over real loopback HTTP: the registry served as an MCP server, and external MCP servers mounted into it.

Everything runs in-process (uvicorn on free loopback ports) with the mcp package's own client and server.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import socket

import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError as RemoteToolError
from meshward.contracts import DataContent, ErrorCode, ImageContent, TextContent
from meshward.tools.builtin import build_registry
from meshward.tools.mcp_mount import McpMount, McpMountSettings, McpServerRef
from meshward.tools.mcp_server import McpHttpServer, McpSettings, serve_mcp
from meshward.tools.registry import Tool, ToolError, ToolRegistry
from pydantic import BaseModel

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def meshward_mcp():
    registry = build_registry()
    server = McpHttpServer(registry, "127.0.0.1", 0, settings=McpSettings(max_body_bytes=64 * 1024))
    await server.start()
    try:
        yield registry, server
    finally:
        await server.stop()


# --- (a) the registry served over MCP --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 single-exchange, and the initialize handshake
async def test_registry_over_mcp(meshward_mcp, mode):
    registry, server = meshward_mcp
    async with Client(server.url, mode=mode) as client:
        listed = (await client.list_tools()).tools
        catalog = registry.catalog()
        assert [(t.name, t.description, t.input_schema) for t in listed] == [(s.name, s.description, s.input_schema) for s in catalog]
        hints = {t.name: t.annotations.read_only_hint if t.annotations else None for t in listed}
        assert hints["calculator"] is True and hints["cluster_register"] is None  # MCP's readOnlyHint from read_only

        ok = await client.call_tool("calculator", {"expression": "15 * 23 + 7"})
        assert not ok.is_error
        assert ok.content[0].type == "text" and ok.content[0].text == "352"
        assert ok.structured_content == {"expression": "15 * 23 + 7", "value": 352}
        assert json.loads(ok.content[1].text) == ok.structured_content  # DataContent as compact JSON text too

        hostile = await client.call_tool("calculator", {"expression": "9**9**9**9"})
        assert hostile.is_error and hostile.content[0].text.startswith("too_large: ")
        assert hostile.structured_content["error"]["code"] == "too_large"

        unknown = await client.call_tool("no_such_tool", {})
        assert unknown.is_error and unknown.content[0].text.startswith("not_found: ")

        for bad in ({"expr": "1+1"}, {"expression": 15}, {"expression": ""}, {"expression": "1", "extra": True}):
            result = await client.call_tool("calculator", bad)
            assert result.is_error and result.content[0].text.startswith("bad_request: "), bad

        # the connection is still fine after all that
        assert (await client.call_tool("calculator", {"expression": "2 ** 10"})).content[0].text == "1024"


async def test_raw_http_bounds(meshward_mcp):
    """What no well-behaved client sends: a non-object `arguments`, an oversized body, a foreign Host header."""
    _, server = meshward_mcp
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient(timeout=10) as http:
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "calculator", "arguments": ["1+1"]}}
        r = await http.post(server.url, json=call, headers=headers)
        assert r.status_code < 500
        assert r.json()["error"]["code"] == -32602  # INVALID_PARAMS from the SDK: a protocol error, not a crash

        call["params"]["arguments"] = {"expression": "1+1"}
        r = await http.post(server.url, json=call, headers=headers)
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "2"

        huge = {**call, "params": {"name": "calculator", "arguments": {"expression": "1" * 100_000}}}
        r = await http.post(server.url, json=huge, headers=headers)
        assert r.status_code == 413

        r = await http.post(server.url, json=call, headers={**headers, "Host": "evil.example:80"})
        assert r.status_code == 421  # DNS-rebinding protection on a loopback bind


async def test_serve_mcp_task_stops_on_cancel():
    port = free_port()
    task = asyncio.create_task(serve_mcp(build_registry(), "127.0.0.1", port))
    url = f"http://127.0.0.1:{port}/mcp"
    for _ in range(200):
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        await asyncio.sleep(0.02)
    async with Client(url) as client:
        assert (await client.call_tool("calculator", {"expression": "6*7"})).content[0].text == "42"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


async def test_port_in_use_raises_at_start(meshward_mcp):
    _, running = meshward_mcp
    with pytest.raises(OSError):
        await McpHttpServer(build_registry(), "127.0.0.1", running.port).start()


async def test_images_and_approval_over_mcp():
    """ImageContent maps to MCP image content; a tool that requires approval is listed but refused on this door."""
    class NoArgs(BaseModel):
        pass

    registry = ToolRegistry()
    registry.register(Tool("snap", "a 1x1 image", NoArgs, lambda _: [ImageContent(data="iVBORw0KGgo=", mime_type="image/png")]))
    registry.register(Tool("wipe", "dangerous", NoArgs, lambda _: [TextContent(text="wiped")], requires_approval=True))
    server = McpHttpServer(registry, "127.0.0.1", 0)
    await server.start()
    try:
        async with Client(server.url) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["wipe"].meta == {"meshward/requiresApproval": True} and not tools["snap"].meta
            image = (await client.call_tool("snap", {})).content[0]
            assert (image.type, image.data, image.mime_type) == ("image", "iVBORw0KGgo=", "image/png")
            refused = await client.call_tool("wipe", {})
            assert refused.is_error and refused.content[0].text.startswith("refused: ")
    finally:
        await server.stop()


# --- (b) external MCP servers mounted into a registry ---------------------------------------------------------


class _NoSignals(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        yield


class ExternalServer:
    """A plain mcp MCPServer with an `add` tool, on a fixed loopback port; stop() and start() again at will."""

    def __init__(self, port: int, *, stateless: bool):
        self.port, self.stateless = port, stateless
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.calls = 0
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task | None = None

    def _app(self):
        mcp = MCPServer("external", log_level="WARNING")

        @mcp.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            self.calls += 1
            return a + b

        @mcp.tool()
        def fail(reason: str) -> str:
            """Always fails."""
            raise RemoteToolError(reason)  # its message reaches the caller (an arbitrary exception's does not)

        return mcp.streamable_http_app(stateless_http=self.stateless, json_response=self.stateless)

    async def start(self) -> None:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(16)
        config = uvicorn.Config(self._app(), lifespan="on", log_config=None, access_log=False, timeout_graceful_shutdown=2)
        self._server = _NoSignals(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            assert not self._task.done()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._server.should_exit = True
        await self._task


@pytest.fixture(params=[("auto", True), ("legacy", False)], ids=["modern-stateless", "handshake-stateful"])
async def external(request):
    mode, stateless = request.param
    server = ExternalServer(free_port(), stateless=stateless)
    await server.start()
    server.mode = mode
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            await server.stop()


def text_of(result) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


async def test_mount_external_server(external):
    registry = ToolRegistry()
    settings = McpMountSettings(servers=[McpServerRef(name="ext", url=external.url, mode=external.mode)], refresh_s=0, call_timeout_s=10)
    mount = McpMount(registry, settings)
    await mount.start()
    try:
        assert registry.names() == ["ext__add", "ext__fail"]
        async with Client(external.url) as probe:
            remote = {t.name: t for t in (await probe.list_tools()).tools}
        spec = {s.name: s for s in registry.catalog()}["ext__add"]
        expected = dict(remote["add"].input_schema)
        expected.pop("title", None)  # the catalog drops the top-level title of every schema
        assert spec.input_schema == expected and spec.description == "Add two integers."
        assert mount.status()["ext"]["connected"]

        result = await registry.call("ext__add", {"a": 2, "b": 3})
        assert text_of(result) == ["5"]
        assert [c.data for c in result.content if isinstance(c, DataContent)] == [{"result": 5}]

        with pytest.raises(ToolError) as bad:
            await registry.call("ext__add", {"a": "two", "b": 3})
        assert bad.value.code == ErrorCode.BAD_REQUEST
        with pytest.raises(ToolError) as failed:
            await registry.call("ext__fail", {"reason": "nope"})
        assert failed.value.code == ErrorCode.BAD_REQUEST and "nope" in failed.value.message

        # down: a typed, prompt failure
        await external.stop()
        with pytest.raises(ToolError) as down:
            await asyncio.wait_for(registry.call("ext__add", {"a": 1, "b": 1}), 5)
        assert down.value.code == ErrorCode.UNAVAILABLE
        assert not mount.status()["ext"]["connected"]

        # back on the same port: the mount reconnects on the next call
        await external.start()
        assert text_of(await registry.call("ext__add", {"a": 20, "b": 22})) == ["42"]
        assert mount.status()["ext"]["connected"]

        # restarted while idle (a stateful server forgets its session): one transparent reconnect, run once
        await external.stop()
        await external.start()
        before = external.calls
        assert text_of(await registry.call("ext__add", {"a": 1, "b": 2})) == ["3"]
        assert external.calls == before + 1
    finally:
        await mount.close()


async def test_mount_unreachable_then_background_refresh():
    port = free_port()
    registry = ToolRegistry()
    settings = McpMountSettings(servers=[McpServerRef(name="late", url=f"http://127.0.0.1:{port}/mcp")], refresh_s=0.2, connect_timeout_s=2)
    mount = McpMount(registry, settings)
    await mount.start()  # does not raise for a server that is down
    server = ExternalServer(port, stateless=True)
    try:
        assert registry.names() == [] and mount.status()["late"]["error"]
        await server.start()
        for _ in range(100):
            if "late__add" in registry.names():
                break
            await asyncio.sleep(0.05)
        assert text_of(await registry.call("late__add", {"a": 1, "b": 1})) == ["2"]
    finally:
        await mount.close()
        await server.stop()


async def test_mount_meshward_into_meshward(meshward_mcp):
    """Typed error codes survive a hop: a meshward MCP server mounted into another registry."""
    _, server = meshward_mcp
    registry = ToolRegistry()
    mount = McpMount(registry, McpMountSettings(servers=[McpServerRef(name="mw", url=server.url)], refresh_s=0))
    await mount.start()
    try:
        assert "mw__calculator" in registry.names() and all(n.startswith("mw__") for n in registry.names())
        result = await registry.call("mw__calculator", {"expression": "15 * 23 + 7"})
        assert text_of(result)[0] == "352"
        with pytest.raises(ToolError) as big:
            await registry.call("mw__calculator", {"expression": "9**9**9**9"})
        assert big.value.code == ErrorCode.TOO_LARGE
    finally:
        await mount.close()


def test_servers_setting_from_env(monkeypatch):
    monkeypatch.setenv("MESHWARD_MCP_SERVERS", '[{"name": "files", "url": "http://127.0.0.1:9000/mcp"}]')
    monkeypatch.setenv("MESHWARD_MCP_PORT", "9191")
    assert [(s.name, s.url, s.mode) for s in McpMountSettings().servers] == [("files", "http://127.0.0.1:9000/mcp", "auto")]
    assert McpSettings().port == 9191 and McpSettings().host == "127.0.0.1"
    monkeypatch.setenv("MESHWARD_MCP_SERVERS", '[{"name": "a__b", "url": "http://x/mcp"}]')
    with pytest.raises(ValueError):
        McpMountSettings()
