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


# ------------------------------------------------------------------------------------------ interleaved sides
# On a shared machine the load drifts between two runs by more than most changes cost; sides measured
# interleaved (one client alternating between them, or blocks of concurrent clients taking turns) see the
# same load, so their ratios hold even when the absolute figures do not.

async def alternate_one_client(http, urls: dict[str, str], question_for, rounds: int, on_answer=None) -> dict[str, list[float]]:
    """One client, one request per side per round, the order reversed every other round: latencies (s) per
    side. ``on_answer(side, body, seconds)`` sees each answer."""
    import time

    lat: dict[str, list[float]] = {side: [] for side in urls}
    order = list(urls.items())
    for i in range(rounds):
        for side, url in order if i % 2 == 0 else order[::-1]:
            t = time.perf_counter()
            r = await http.post(url + "/v1/ask", json={"question": question_for(i)})
            took = time.perf_counter() - t
            lat[side].append(took)
            assert r.status_code == 200, r.text
            if on_answer is not None:
                on_answer(side, r.json(), took)
    return lat


async def alternate_clients(http, urls: dict[str, str], question_for, clients: int, seconds: float,
                            pids: dict[str, dict[str, int]], drain=None, blocks_per_side: int = 4) -> dict[str, dict]:
    """``clients`` concurrent callers on one side at a time, the sides taking turns (A B B A ...) for
    ``seconds`` in all: answers per second and CPU ms per answered question of each of a side's processes.
    ``drain(side)`` (awaited before a side's CPU is read) lets work the answers left behind finish."""
    import asyncio
    import itertools
    import time

    out = {side: {"answered": 0, "errors": 0, "wall": 0.0, "cpu0": {n: cpu_seconds(p) for n, p in pids[side].items()}} for side in urls}
    order = list(urls.items())
    blocks = blocks_per_side * len(order)
    numbers = itertools.count()

    async def caller(url: str, end: float, tally: dict) -> None:
        while time.perf_counter() < end:
            r = await http.post(url + "/v1/ask", json={"question": question_for(next(numbers))})
            ok = r.status_code == 200 and r.json()["status"] == "answered"
            tally["answered" if ok else "errors"] += 1

    for b in range(blocks):
        side, url = (order if (b // len(order)) % 2 == 0 else order[::-1])[b % len(order)]
        t = time.perf_counter()
        await asyncio.gather(*(caller(url, t + seconds / blocks, out[side]) for _ in range(clients)))
        out[side]["wall"] += time.perf_counter() - t
    for side in urls:
        if drain is not None:
            await drain(side)
        o = out[side]
        o["rps"] = o["answered"] / o["wall"]
        o["cpu_ms"] = {n: (cpu_seconds(p) - o["cpu0"].pop(n)) * 1000 / max(o["answered"], 1) for n, p in pids[side].items()}
    return out
