"""The tool registry: plain functions with pydantic argument models, described MCP-style.

Transport-free: the NATS handlers (and later the MCP server) are thin doors onto it.
"""
from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from meshward.contracts import Content, ErrorCode, TextContent, ToolResult, ToolSpec
from pydantic import BaseModel, ValidationError


class ToolError(Exception):
    """A typed failure of a tool call (bad arguments, refused, too large, upstream down...)."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


ToolFn = Callable[[Any], Awaitable[list[Content]] | list[Content]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    fn: ToolFn
    requires_approval: bool = False
    timeout_s: float = 10.0
    # What runs once a human approved a call this tool refused with needs_approval (cli_execute's
    # run_approved); None: the tool's own function (a requires_approval tool).
    approved_fn: ToolFn | None = None
    # An operator's standing approval (e.g. MESHWARD_CLUSTER_WRITE=allow): requires_approval is then not asked
    # per call on the bus. The MCP door still refuses requires_approval tools unless told otherwise.
    preapproved: bool = False
    # Changes nothing outside the call (MCP's readOnlyHint): the supervisor may send an unanswered call again.
    read_only: bool = False

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, input_schema=schema, requires_approval=self.requires_approval, read_only=self.read_only)


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} registered twice")
        self._tools[tool.name] = tool
        return tool

    def names(self) -> list[str]:
        return sorted(self._tools)

    def catalog(self) -> list[ToolSpec]:
        return [self._tools[n].spec() for n in self.names()]

    def get(self, name: str) -> Tool:
        tool = self._tools.get(name)
        if tool is None:
            raise ToolError(ErrorCode.NOT_FOUND, f"unknown tool {name!r}; available: {', '.join(self.names())}")
        return tool

    async def call(self, name: str, arguments: dict[str, Any], *, approved: bool = False) -> ToolResult:
        """Run a tool. `approved`: a human approved this very call (the supervisor's approval path, or an
        operator's MCP setting); without it a requires_approval tool answers needs_approval."""
        tool = self.get(name)
        if tool.requires_approval and not (approved or tool.preapproved):
            raise ToolError(ErrorCode.NEEDS_APPROVAL, f"{name} changes state and needs a human's approval")
        try:
            args = tool.args_model.model_validate(arguments)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "arguments"
            raise ToolError(ErrorCode.BAD_REQUEST, f"{name}: {loc}: {first.get('msg')}") from None
        start = time.perf_counter()
        try:
            async with asyncio.timeout(tool.timeout_s):
                out = (tool.approved_fn or tool.fn)(args) if approved else tool.fn(args)
                if inspect.isawaitable(out):
                    out = await out
        except TimeoutError:
            raise ToolError(ErrorCode.DEADLINE_EXCEEDED, f"{name} took longer than {tool.timeout_s}s") from None
        content = out if isinstance(out, list) else [TextContent(text=str(out))]
        return ToolResult(name=name, content=content, duration_ms=(time.perf_counter() - start) * 1000)
