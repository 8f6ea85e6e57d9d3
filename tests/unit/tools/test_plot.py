"""Unit tests for the `plot` tool (meshward.tools.plot): rendering, bounds and typed errors."""

from __future__ import annotations

import asyncio
import base64
import math
import struct
import time

import pytest
from meshward.contracts import ErrorCode, ImageContent, TextContent
from meshward.tools import plot as plot_mod
from meshward.tools.plot import MAX_POINTS, PlotArgs, PlotLimits, tools
from meshward.tools.registry import ToolError, ToolRegistry


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry()
    for tool in tools():
        reg.register(tool)
    return reg


def png_size(content: ImageContent) -> tuple[int, int]:
    raw = base64.b64decode(content.data)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    assert raw[12:16] == b"IHDR"
    return struct.unpack(">II", raw[16:24])


async def call(registry: ToolRegistry, **arguments):
    return await registry.call("plot", arguments)


# --------------------------------------------------------------------------- rendering


@pytest.mark.parametrize(
    ("arguments", "description"),
    [
        ({"kind": "bar", "labels": ["a", "b", "c"], "values": [1, 2, 3], "title": "X"}, "bar chart 'X' with 3 points"),
        ({"kind": "line", "values": [3.5, -1, 2.25, 0]}, "line chart with 4 points"),
        (
            {"kind": "histogram", "values": [1, 2, 2, 3, 3, 3], "bins": 3, "title": "dist"},
            "histogram 'dist' of 6 points in 3 bins",
        ),
        ({"kind": "bar", "values": [42]}, "bar chart with 1 point"),
    ],
)
async def test_renders_png_and_description(registry, arguments, description):
    result = await call(registry, **arguments)
    image, text = result.content
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"
    assert png_size(image) == (800, 500)  # 8x5 in at 100 dpi
    assert isinstance(text, TextContent)
    assert text.text.startswith(description)


async def test_max_points_renders(registry):
    values = [math.sin(i / 10) for i in range(MAX_POINTS)]
    labels = [f"t{i}" for i in range(MAX_POINTS)]
    for kind in ("bar", "line"):
        result = await call(registry, kind=kind, values=values, labels=labels)
        assert "1000 points" in result.content[1].text
    result = await call(registry, kind="histogram", values=values, bins=100)
    assert "in 100 bins" in result.content[1].text


async def test_hostile_text_is_literal(registry):
    # mathtext would raise on '$x^{$' and could be slow on nested input; it is switched off, control chars dropped.
    result = await call(registry, kind="bar", values=[1, 2], labels=["$\\frac{a}{", "b\x00\u202e"], title="$x^{$ \x07")
    assert png_size(result.content[0]) == (800, 500)


async def test_extreme_but_allowed_values(registry):
    for kind in ("bar", "line", "histogram"):
        await call(registry, kind=kind, values=[1e15, -1e15, 0.0, 1e-300])
    await call(registry, kind="histogram", values=[5.0] * 10)  # zero-width range
    await call(registry, kind="line", values=[1e15, 1e15 - 1])


async def test_concurrent_renders():
    # Thread-safety, not speed: a generous timeout so a loaded CI box does not turn this into a timing test.
    registry = ToolRegistry()
    registry.register(tools(PlotLimits(timeout_s=120))[0])
    results = await asyncio.gather(
        *(
            call(registry, kind=k, values=list(range(1, 50)), title=f"chart {i}")
            for i, k in enumerate(["bar", "line", "histogram"] * 2)
        )
    )
    assert len(results) == 6
    assert all(png_size(r.content[0]) == (800, 500) for r in results)


# --------------------------------------------------------------------------- bounds: too_large, before rendering


async def test_oversized_plot_rejected_fast_before_rendering(registry, monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("rendered an oversized plot")

    monkeypatch.setattr(plot_mod, "_render_png", boom)
    start = time.perf_counter()
    with pytest.raises(ToolError) as err:
        await call(registry, kind="bar", values=[1.0] * 100_000)
    assert err.value.code == ErrorCode.TOO_LARGE
    assert "100000 points" in err.value.message
    assert time.perf_counter() - start < 2.0


async def test_oversized_labels_and_mismatch_at_size_are_too_large(registry):
    for arguments in (
        {"kind": "line", "values": [1.0] * (MAX_POINTS + 1), "labels": ["x"] * (MAX_POINTS + 1)},
        {"kind": "bar", "values": [1.0] * 10, "labels": ["x"] * 5000},
        {"kind": "histogram", "values": [1.0] * 5000},
    ):
        with pytest.raises(ToolError) as err:
            await call(registry, **arguments)
        assert err.value.code == ErrorCode.TOO_LARGE


async def test_custom_limit():
    reg = ToolRegistry()
    reg.register(tools(PlotLimits(max_points=10))[0])
    with pytest.raises(ToolError) as err:
        await reg.call("plot", {"kind": "bar", "values": list(range(11))})
    assert err.value.code == ErrorCode.TOO_LARGE
    await reg.call("plot", {"kind": "bar", "values": list(range(10))})


# --------------------------------------------------------------------------- shape: bad_request


@pytest.mark.parametrize(
    "arguments",
    [
        {"kind": "pie", "values": [1, 2]},
        {"kind": "bar", "values": []},
        {"kind": "bar"},
        {"kind": "bar", "values": [1, 2], "labels": ["only one"]},
        {"kind": "bar", "values": [1, 2], "labels": ["x" * 65, "b"]},
        {"kind": "bar", "values": [1], "title": "t" * 201},
        {"kind": "line", "values": [1, float("nan")]},
        {"kind": "line", "values": [float("inf")]},
        {"kind": "line", "values": [1e300]},
        {"kind": "line", "values": ["abc"]},
        {"kind": "histogram", "values": [1, 2], "labels": ["a", "b"]},
        {"kind": "histogram", "values": [1, 2], "bins": 0},
        {"kind": "histogram", "values": [1, 2], "bins": 1000},
        {"kind": "bar", "values": [1], "color": "red"},
    ],
)
async def test_bad_arguments_are_bad_request(registry, arguments):
    with pytest.raises(ToolError) as err:
        await call(registry, **arguments)
    assert err.value.code == ErrorCode.BAD_REQUEST


# --------------------------------------------------------------------------- schema


def test_schema_advertises_bounds():
    (tool,) = tools()
    spec = tool.spec()
    props = spec.input_schema["properties"]
    assert spec.input_schema["additionalProperties"] is False
    assert props["values"]["maxItems"] == MAX_POINTS and props["labels"]["maxItems"] == MAX_POINTS
    assert props["labels"]["items"]["maxLength"] == 64
    assert props["title"]["maxLength"] == 200
    assert set(props["kind"]["enum"]) == {"bar", "line", "histogram"}
    assert all(props[name].get("description") for name in props)
    assert spec.input_schema["required"] == ["kind", "values"]


def test_args_model_validates_pairing_directly():
    PlotArgs(kind="line", values=[1, 2], labels=[])
    with pytest.raises(ValueError):
        PlotArgs(kind="line", values=[1, 2], labels=["a"])
