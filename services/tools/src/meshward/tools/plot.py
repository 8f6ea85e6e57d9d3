"""The `plot` tool: a bar, line or histogram chart rendered to PNG with matplotlib (Agg).

Error policy (documented, and the same in every branch):

* the *amount* of work -- more than ``PlotLimits.max_points`` values -- is ``too_large``. It is checked by the tool
  function on the validated arguments, before anything is rendered, so a 100k-point request costs a ``len()``.
  The bound is still advertised to the LLM as ``maxItems`` in the JSON schema, but it is deliberately *not* a
  pydantic ``max_length`` (that would surface as ``bad_request``).
* the *shape* of the arguments -- unknown kind, empty values, non-finite numbers, a label over 64 characters, a title
  over 200, labels that do not pair with the values -- is ``bad_request`` (pydantic validation, mapped by the registry).

Rendering uses the object-oriented ``Figure`` API (no pyplot global state) on the Agg canvas, under a module lock
(matplotlib's text/font caches are not guaranteed thread-safe; rendering is CPU-bound and GIL-bound anyway), in a
worker thread (``asyncio.to_thread``) so the event loop keeps serving other requests.
"""

from __future__ import annotations

import asyncio
import base64
import io
import math
import threading
import unicodedata
from dataclasses import dataclass
from typing import Annotated, Literal

from meshward.contracts import ErrorCode, ImageContent, TextContent
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .registry import Tool, ToolError

MAX_POINTS = 1_000
MAX_LABEL_CHARS = 64
MAX_TITLE_CHARS = 200
MAX_BINS = 100
# Finite is not enough: 1e308 breaks axis arithmetic (overflow to inf). 1e15 keeps every tick computable.
MAX_ABS_VALUE = 1e15

Label = Annotated[str, Field(max_length=MAX_LABEL_CHARS)]
Value = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_ABS_VALUE, le=MAX_ABS_VALUE)]


class PlotArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["bar", "line", "histogram"] = Field(
        description="chart type: 'bar' (one bar per value), 'line' (values in order), 'histogram' (distribution of values)"
    )
    values: list[Value] = Field(
        min_length=1,
        description=f"the numbers to plot (finite, |v| <= 1e15); at most {MAX_POINTS}",
        json_schema_extra={"maxItems": MAX_POINTS},
    )
    labels: list[Label] = Field(
        default_factory=list,
        description=(
            f"x-axis label per value for 'bar' and 'line' (same count as values, each <= {MAX_LABEL_CHARS} chars); "
            "leave empty to number the points 1..n; must be empty for 'histogram'"
        ),
        json_schema_extra={"maxItems": MAX_POINTS},
    )
    title: str = Field(default="", max_length=MAX_TITLE_CHARS, description="chart title")
    bins: int = Field(default=10, ge=1, le=MAX_BINS, description="number of bins (histogram only)")

    @model_validator(mode="after")
    def _labels_pair_with_values(self) -> PlotArgs:
        # Counts over the bound are the tool's too_large, not a pairing error: leave them to it.
        if len(self.values) > MAX_POINTS or len(self.labels) > MAX_POINTS:
            return self
        if self.kind == "histogram":
            if self.labels:
                raise ValueError("a histogram takes values only; labels must be empty")
        elif self.labels and len(self.labels) != len(self.values):
            raise ValueError(
                f"{len(self.labels)} labels for {len(self.values)} values; give one label per value or none"
            )
        return self


@dataclass(frozen=True)
class PlotLimits:
    max_points: int = MAX_POINTS
    dpi: int = 100
    width_in: float = 8.0
    height_in: float = 5.0
    timeout_s: float = 10.0


_RENDER_LOCK = threading.Lock()
_MAX_TICKS = 25
_MAX_BAR_PATCHES = 200


def _display(text: str) -> str:
    """Drop control and format characters (NUL, bidi overrides...) from user text before it is drawn."""
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cc", "Cf"))


def _render_png(args: PlotArgs, limits: PlotLimits) -> bytes:
    # imported on the first chart, not at start: matplotlib is the largest part of the tools service's start-up,
    # and a restarted replica should answer its other tools as soon as it can
    from matplotlib.figure import Figure  # noqa: PLC0415  (the object API needs no backend selection)

    fig = Figure(figsize=(limits.width_in, limits.height_in), dpi=limits.dpi, layout="tight")
    ax = fig.add_subplot()
    n = len(args.values)
    if args.kind == "histogram":
        ax.hist(args.values, bins=args.bins, color="tab:blue", edgecolor="white")
        ax.set_xlabel("value")
        ax.set_ylabel("count")
    else:
        xs = list(range(n))
        if args.kind == "bar" and n > _MAX_BAR_PATCHES:
            # One Rectangle artist per bar costs ~1 ms each; past a few hundred bars (narrower than a pixel or two
            # anyway) draw them as one LineCollection: same picture, ~10x faster.
            ax.vlines(xs, 0, args.values, colors="tab:blue", linewidth=max(0.5, 400 / n))
            ax.set_xlim(-1, n)
        elif args.kind == "bar":
            ax.bar(xs, args.values, color="tab:blue")
        else:
            ax.plot(xs, args.values, marker="o" if n <= 50 else None, color="tab:blue")
        labels = [_display(label) for label in args.labels] or [str(i + 1) for i in xs]
        step = max(1, math.ceil(n / _MAX_TICKS))
        ticks = xs[::step]
        ax.set_xticks(ticks)
        rotate = any(len(labels[i]) > 6 for i in ticks) or len(ticks) > 12
        ax.set_xticklabels(
            [labels[i] for i in ticks],
            rotation=45 if rotate else 0,
            ha="right" if rotate else "center",
            parse_math=False,
        )
        ax.grid(axis="y", alpha=0.3)
    if args.title:
        ax.set_title(_display(args.title), parse_math=False)  # user text is literal: no mathtext ('$...$') parsing
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=limits.dpi)
    return buf.getvalue()


def _describe(args: PlotArgs) -> str:
    what = {"bar": "bar chart", "line": "line chart", "histogram": "histogram"}[args.kind]
    titled = f" {args.title!r}" if args.title else ""
    n = len(args.values)
    points = f"{n} point" + ("" if n == 1 else "s")
    if args.kind == "histogram":
        return f"{what}{titled} of {points} in {args.bins} bins (min {min(args.values):g}, max {max(args.values):g})"
    return f"{what}{titled} with {points} (min {min(args.values):g}, max {max(args.values):g})"


def make_plot_fn(limits: PlotLimits):
    def render(args: PlotArgs) -> bytes:
        with _RENDER_LOCK:
            return _render_png(args, limits)

    async def plot(args: PlotArgs):
        n_values, n_labels = len(args.values), len(args.labels)
        if n_values > limits.max_points or n_labels > limits.max_points:
            raise ToolError(
                ErrorCode.TOO_LARGE,
                f"plot: {max(n_values, n_labels)} points is over the limit of {limits.max_points}; aggregate or sample the data first",
            )
        try:
            png = await asyncio.to_thread(render, args)
        except (ValueError, OverflowError) as e:  # matplotlib/numpy refusing the data, e.g. a degenerate histogram
            raise ToolError(ErrorCode.BAD_REQUEST, f"plot: cannot render these values: {e}") from None
        return [
            ImageContent(data=base64.b64encode(png).decode("ascii"), mime_type="image/png"),
            TextContent(text=_describe(args)),
        ]

    return plot


def tools(limits: PlotLimits | None = None) -> list[Tool]:
    limits = limits or PlotLimits()
    return [
        Tool(
            name="plot",
            description=(
                f"Draw a bar chart, line chart or histogram of up to {limits.max_points} numbers and return it as a PNG image "
                "plus a one-line description."
            ),
            args_model=PlotArgs,
            fn=make_plot_fn(limits),
            timeout_s=limits.timeout_s,
            read_only=True,
        )
    ]
