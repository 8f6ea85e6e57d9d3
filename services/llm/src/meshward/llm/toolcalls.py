"""Tool calls a model asks for are untrusted output: checked against the tools that were offered."""
from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from meshward.contracts import ChatMessage, ChatRole, ToolSpec

MAX_ARGUMENTS_CHARS = 16_000
MAX_ARGUMENT_DEPTH = 8


class InvalidToolCall(ValueError):
    """The model named a tool that was not offered, or its arguments do not fit the tool's schema."""


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_ARGUMENT_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level + 1)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level + 1)
    return level


def validate_tool_call(name: Any, arguments: Any, tools: dict[str, ToolSpec]) -> dict[str, Any]:
    """The call's arguments as a dict, or InvalidToolCall saying what is wrong (briefly: it goes to the caller)."""
    if not isinstance(name, str) or name not in tools:
        raise InvalidToolCall(f"tool {str(name)[:64]!r} was not offered")
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            raise InvalidToolCall(f"arguments of {name} are over {MAX_ARGUMENTS_CHARS} characters")
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as e:
            raise InvalidToolCall(f"arguments of {name} are not JSON: {e.msg}") from None
    if not isinstance(arguments, dict):
        raise InvalidToolCall(f"arguments of {name} are not a JSON object")
    if _depth(arguments) > MAX_ARGUMENT_DEPTH:
        raise InvalidToolCall(f"arguments of {name} are nested deeper than {MAX_ARGUMENT_DEPTH}")
    try:
        error = next(Draft202012Validator(tools[name].input_schema).iter_errors(arguments), None)
    except SchemaError:
        raise InvalidToolCall(f"tool {name} has an invalid input schema") from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        raise InvalidToolCall(f"arguments of {name} do not fit its schema at {where}: {error.message[:200]}")
    return arguments


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}
            for t in tools]


def openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": str(m.role), "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [{"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                                  for c in m.tool_calls]
        if m.role == ChatRole.TOOL:
            item["tool_call_id"] = m.tool_call_id or ""
            if m.name:
                item["name"] = m.name
        out.append(item)
    return out
