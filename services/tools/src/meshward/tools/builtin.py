"""The built-in tools, registered into a ToolRegistry."""
from __future__ import annotations

from meshward.contracts import DataContent, ErrorCode, TextContent
from pydantic import BaseModel, ConfigDict, Field

from .calculator import CalculatorError, calculate, format_result
from .cluster.tools import ClusterDomain
from .registry import Tool, ToolError, ToolRegistry


class CalculatorArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    expression: str = Field(
        min_length=1,
        max_length=500,
        description="a calculation in symbols or words, e.g. '15 * 23 + 7', 'sqrt(144) + 3', '17% of 250', "
        "'2 to the power of 10'; log(x) is base 10, ln(x) natural, log(x, b) base b",
    )


def calculator(args: CalculatorArgs):
    try:
        result = calculate(args.expression)
    except CalculatorError as e:
        # "not an expression" is the caller's input like any other: bad_request, and the message says so.
        raise ToolError(ErrorCode.TOO_LARGE if e.code == "too_large" else ErrorCode.BAD_REQUEST, str(e)) from None
    value = result.value
    return [
        TextContent(text=format_result(value)),
        DataContent(data={"expression": result.expression, "value": value if abs(value) < 2**53 else format_result(value)}),
    ]


def build_registry(full: bool = True, cluster: ClusterDomain | None = None) -> ToolRegistry:
    """The calculator, plus (with `full`) charts, PDFs, the IP/geo/weather clients, host diagnostics and the
    cluster tools (of `cluster`, else of a domain from the environment's settings)."""
    registry = ToolRegistry()
    registry.register(
        Tool(
            name="calculator",
            description=(
                "Evaluate a calculation written in symbols or plain English, exactly: + - * / // % ** (or ^), parentheses, "
                "pi, e, tau, math functions (sqrt, log, ln, sin, factorial, ...), percentages ('17% of 250') and number "
                "words ('five plus three'). log(x) is base 10, ln(x) natural. Returns the value and the expression read."
            ),
            args_model=CalculatorArgs,
            fn=calculator,
            timeout_s=2.0,
            read_only=True,
        )
    )
    if full:
        from . import cli, http_apis, pdf, plot, remote

        cluster = cluster or ClusterDomain()
        for tool in [*plot.tools(), *pdf.tools(), *http_apis.tools(), *cli.cli_tools(), *remote.remote_tools(), *cluster.tools()]:
            registry.register(tool)
    return registry
