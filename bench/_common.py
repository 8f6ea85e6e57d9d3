"""Shared helpers for the benchmarks: percentiles, machine description, a drop-everything span exporter."""
from __future__ import annotations

import os
import platform
import statistics

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


def pct(samples: list[float], p: float) -> float:
    s = sorted(samples)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    ms = [x * 1000 for x in samples_s]
    return {"p50": pct(ms, 50), "p99": pct(ms, 99), "mean": statistics.fmean(ms) if ms else float("nan")}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}, {platform.system()} {platform.release()}"


class DropExporter(SpanExporter):
    """Spans are recorded and batched as in production, then dropped (no collector in a benchmark)."""

    def export(self, spans) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def tracing_on(service_name: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(DropExporter()))
    trace.set_tracer_provider(provider)

# One client address sends every benchmark request: the per-client rate limit (a product default) is off so
# that the system, not the limiter, is measured.
NO_RATE_LIMIT = {"MESHWARD_RATE_LIMIT_PER_MINUTE": "0"}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), children not included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def closed_loop(call, clients: int, seconds: float) -> tuple[list[float], float]:
    """``clients`` concurrent callers, each awaiting ``call(i)`` (i counts up from the caller's number) until
    ``seconds`` have passed: every call's latency in seconds, and the elapsed wall time."""
    import asyncio
    import time

    samples: list[float] = []
    end = time.perf_counter() + seconds

    async def client(k: int) -> None:
        i = k
        while time.perf_counter() < end:
            t = time.perf_counter()
            await call(i)
            samples.append(time.perf_counter() - t)
            i += 1

    start = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    return samples, time.perf_counter() - start
