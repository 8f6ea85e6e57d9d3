"""Tools benchmark: the tool logic in-process through the registry, then one calculator call over
NATS (meshward.v1.tools.call) against the same call over MCP (streamable HTTP, one client session).

In-process: calculator (a short and a function-heavy expression, and a question in words), plot (bar chart of 10 and of
1,000 points), pdf_extract (a 1-page and a 20-page PDF generated here with matplotlib). Each case is
warmed up, then called sequentially for --seconds: p50/p99 latency and calls/s.

Doors: an embedded nats-server and the tools service in this process (its NATS handlers and its MCP
door); the clients run in the same process, sequentially. No tracer provider (no-op spans).

    .venv/bin/python bench/tools.py [--seconds 3] [--quick]

The PDFs are matplotlib's (text drawn glyph run by glyph run): pypdf's extraction dominates pdf_extract.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import io
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, summary_ms  # noqa: E402

SHORT_EXPR = "15 * 23 + 7"
HEAVY_EXPR = (
    "sqrt(144) + log(1000, 10) * sin(pi / 6) + factorial(12) / gcd(12, 18) + hypot(3, 4) + cbrt(27)"
    " + round(exp(2.5), 3) + atan2(1, 1) + degrees(radians(30)) + lcm(4, 6) + max(1, 2, 3) - floor(2.7) + 2 ^ 10"
)
WORDED_QUESTION = "Could you work out 17% of 250 plus two to the power of ten, please?"
_WORDS = ("latency", "throughput", "replica", "subject", "consumer", "stream", "deadline", "budget", "tracing", "cluster")


def make_pdf(pages: int) -> str:
    """A text-only PDF of `pages` pages (about 40 lines of text each), base64-encoded."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_pdf import PdfPages
    from matplotlib.figure import Figure

    buf = io.BytesIO()
    with matplotlib.rc_context({"pdf.fonttype": 42}), PdfPages(buf) as pdf:  # TrueType: text pypdf can extract
        for page in range(pages):
            fig = Figure(figsize=(8.27, 11.69))
            fig.text(0.08, 0.95, f"Benchmark report, page {page + 1} of {pages}", fontsize=14)
            for line in range(40):
                words = " ".join(_WORDS[(page + line + i) % len(_WORDS)] for i in range(10))
                fig.text(0.08, 0.92 - line * 0.022, f"{line + 1:2d}. The {words} figure is {page * 40 + line}.", fontsize=9)
            pdf.savefig(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


async def measure(call: Callable[[], Awaitable[object]], seconds: float, warmup: int = 3, min_calls: int = 5,
                  max_calls: int = 100_000) -> dict:
    for _ in range(warmup):
        await call()
    lat: list[float] = []
    start = time.perf_counter()
    end = start + seconds
    while (time.perf_counter() < end or len(lat) < min_calls) and len(lat) < max_calls:
        t = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - start
    return {**summary_ms(lat), "cps": len(lat) / elapsed, "n": len(lat)}


async def in_process(seconds: float, min_calls: int) -> tuple[dict[str, dict], dict[str, int]]:
    from meshward.tools.builtin import build_registry

    registry = build_registry()
    pdf1, pdf20 = make_pdf(1), make_pdf(20)
    sizes = {"pdf 1 page": len(base64.b64decode(pdf1)), "pdf 20 pages": len(base64.b64decode(pdf20))}
    cases = [
        (f"calculator {SHORT_EXPR!r}", "calculator", {"expression": SHORT_EXPR}),
        ("calculator, 15 functions", "calculator", {"expression": HEAVY_EXPR}),
        ("calculator, a question in words", "calculator", {"expression": WORDED_QUESTION}),
        ("plot bar, 10 points", "plot", {"kind": "bar", "values": [float(i * 3 % 17) for i in range(10)],
                                         "labels": [f"item {i}" for i in range(10)], "title": "ten bars"}),
        ("plot bar, 1,000 points", "plot", {"kind": "bar", "values": [float((i * 37) % 101) for i in range(1000)],
                                            "title": "a thousand bars"}),
        ("pdf_extract, 1 page", "pdf_extract", {"content_base64": pdf1}),
        ("pdf_extract, 20 pages", "pdf_extract", {"content_base64": pdf20}),
    ]
    # Sanity: each case returns what it should (a benchmark of an error path would mislead).
    first = await registry.call("calculator", {"expression": SHORT_EXPR})
    assert first.content[0].text == "352", first
    worded = await registry.call("calculator", {"expression": WORDED_QUESTION})
    assert worded.content[0].text == "1066.5", worded
    got = await registry.call("pdf_extract", {"content_base64": pdf20})
    text = got.content[0].text
    assert "page 20 of 20" in text and "throughput" in text, text[:300]
    results = {}
    for label, name, arguments in cases:
        results[label] = await measure(lambda name=name, arguments=arguments: registry.call(name, arguments), seconds, min_calls=min_calls)
    return results, sizes


async def doors(url: str, seconds: float) -> dict[str, dict]:
    from mcp import Client
    from meshward.bus import Bus, BusSettings
    from meshward.contracts import ToolCallRequest, ToolResult, subjects
    from meshward.devstack.nats_server import free_port
    from meshward.tools.handlers import create_service

    os.environ["MESHWARD_NATS_URL"] = url
    os.environ["MESHWARD_MCP_PORT"] = str(free_port())
    svc = create_service()
    await svc.start()
    try:
        mcp_url = svc.details["mcp"]
        bus = await Bus.connect(BusSettings(nats_url=url))
        request = ToolCallRequest(name="calculator", arguments={"expression": SHORT_EXPR})

        async def nats_call():
            result = await bus.request(subjects.TOOLS_CALL, request, ToolResult, timeout=5)
            assert result.content[0].text == "352"

        async with Client(mcp_url) as client:

            async def mcp_call():
                result = await client.call_tool("calculator", {"expression": SHORT_EXPR})
                assert not result.is_error and result.content[0].text == "352", result

            results: dict[str, dict] = {}
            for _round in range(2):  # interleave to even out machine noise; keep the better round of each
                for name, call in (("NATS (meshward bus)", nats_call), ("MCP (streamable HTTP)", mcp_call)):
                    r = await measure(call, seconds / 2, warmup=50)
                    best = results.get(name)
                    if best is None or r["p50"] < best["p50"]:
                        results[name] = r
        await bus.close()
    finally:
        await svc.stop()
    return results


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=3.0, help="per in-process case; the NATS/MCP phases get 2x this each")
    p.add_argument("--quick", action="store_true", help="1 s per case")
    args = p.parse_args()
    seconds = 1.0 if args.quick else args.seconds
    os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    os.environ.setdefault("MESHWARD_LOG_LEVEL", "WARNING")

    from meshward.devstack.nats_server import EmbeddedNats

    local, sizes = asyncio.run(in_process(seconds, 3 if args.quick else 5))
    with tempfile.TemporaryDirectory() as d, EmbeddedNats(d) as server:
        remote = asyncio.run(doors(server.url, 2 * seconds))

    load = os.getloadavg()
    print(f"machine: {machine()}; load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"in-process registry.call, sequential, {seconds:g}s (at least {3 if args.quick else 5} calls) per case; PDFs: "
          + ", ".join(f"{k} {v / 1024:.1f} KiB" for k, v in sizes.items()))
    print(f"{'':34} {'p50 ms':>9} {'p99 ms':>9} {'calls/s':>9} {'n':>7}")
    for label, r in local.items():
        print(f"{label:34} {r['p50']:9.3f} {r['p99']:9.3f} {r['cps']:9.1f} {r['n']:7d}")
    calc = local[f"calculator {SHORT_EXPR!r}"]
    print(f"ratio calculator function-heavy/short: p50 {local['calculator, 15 functions']['p50'] / calc['p50']:.2f}x; "
          f"words/short: p50 {local['calculator, a question in words']['p50'] / calc['p50']:.2f}x; "
          f"plot 1,000/10 points: p50 {local['plot bar, 1,000 points']['p50'] / local['plot bar, 10 points']['p50']:.2f}x; "
          f"pdf 20/1 pages: p50 {local['pdf_extract, 20 pages']['p50'] / local['pdf_extract, 1 page']['p50']:.2f}x")
    print()
    print(f"calculator {SHORT_EXPR!r} through the tools service's doors, sequential, one client, "
          f"best of 2 rounds of {seconds:g}s each (embedded nats-server, service in-process, no tracer)")
    print(f"{'':34} {'p50 ms':>9} {'p99 ms':>9} {'calls/s':>9} {'n':>7}")
    for label, r in remote.items():
        print(f"{label:34} {r['p50']:9.3f} {r['p99']:9.3f} {r['cps']:9.1f} {r['n']:7d}")
    nats_r, mcp_r = remote["NATS (meshward bus)"], remote["MCP (streamable HTTP)"]
    print(f"ratio MCP/NATS: p50 {mcp_r['p50'] / nats_r['p50']:.2f}x, p99 {mcp_r['p99'] / nats_r['p99']:.2f}x, "
          f"calls/s {mcp_r['cps'] / nats_r['cps']:.2f}x; NATS/in-process p50 {nats_r['p50'] / calc['p50']:.1f}x")


if __name__ == "__main__":
    main()
