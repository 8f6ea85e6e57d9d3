"""The built-in tools, registered into a ToolRegistry."""
from __future__ import annotations

from meshward.contracts import DataContent, ErrorCode, TextContent
from pydantic import BaseModel, ConfigDict, Field

from .calculator import CalculatorError, evaluate, format_result
from .cluster.tools import ClusterDomain
from .registry import Tool, ToolError, ToolRegistry


class CalculatorArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expression: str = Field(min_length=1, max_length=500, description="arithmetic expression, e.g. '15 * 23 + 7' or 'sqrt(144) + 3'")


def calculator(args: CalculatorArgs):
    try:
        value = evaluate(args.expression)
    except CalculatorError as e:
        raise ToolError(ErrorCode(e.code), str(e)) from None
    return [
        TextContent(text=format_result(value)),
        DataContent(data={"expression": args.expression, "value": value if abs(value) < 2**53 else format_result(value)}),
    ]


def build_registry(full: bool = True, cluster: ClusterDomain | None = None) -> ToolRegistry:
    """The calculator, plus (with `full`) charts, PDFs, the IP/geo/weather clients, host diagnostics and the
    cluster tools (of `cluster`, else of a domain from the environment's settings)."""
    registry = ToolRegistry()
    registry.register(
        Tool(
            name="calculator",
            description="Evaluate an arithmetic expression exactly: + - * / // % **, parentheses, pi, e, and math functions (sqrt, log, sin, factorial, ...).",
            args_model=CalculatorArgs,
            fn=calculator,
            timeout_s=2.0,
        )
    )
    if full:
        from . import cli, http_apis, pdf, plot, remote

        cluster = cluster or ClusterDomain()
        for tool in [*plot.tools(), *pdf.tools(), *http_apis.tools(), *cli.cli_tools(), *remote.remote_tools(), *cluster.tools()]:
            registry.register(tool)
    return registry
