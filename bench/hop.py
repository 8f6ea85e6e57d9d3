"""Hop benchmark: one NATS request/reply with raw nats-py vs meshward's runtime (tracing on).

Both servers run in a child process on the same embedded nats-server and answer
the same payload; the client side runs here. The raw side does by hand the
(de)serialization the runtime does for its callers and handlers, so the gap is the
runtime's own cost: spans, trace and deadline headers, typed errors, bounded concurrency.
Prints p50/p99 latency (sequential requests) and throughput (64 requests in flight),
the CPU time each side spends per request during the throughput phase (client process and
server process; steadier than wall-clock figures on a shared machine), and the runtime/raw ratios.
The tracer provider samples as OTEL_TRACES_SAMPLER says (default: every span recorded).

    .venv/bin/python bench/hop.py [--seconds 5]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nats  # noqa: E402
from _common import machine, summary_ms, tracing_on  # noqa: E402
from meshward.contracts import SecurityCheckRequest, SecurityVerdict  # noqa: E402
from meshward.devstack.nats_server import EmbeddedNats  # noqa: E402

RAW_SUBJECT = "bench.raw"
BUS_SUBJECT = "bench.bus"
REQUEST = SecurityCheckRequest(text="What is the weather forecast for the data center tomorrow afternoon?", thread_id="bench-thread")
REPLY = SecurityVerdict(allowed=True, score=0.02, layer="none", reason="no rule matched")


async def serve(kind: str, url: str) -> None:
    if kind == "raw":
        nc = await nats.connect(url)

        async def cb(msg):
            # the runtime's share of the work, done by hand: parse the request, serialize the reply
            SecurityCheckRequest.model_validate_json(msg.data)
            await msg.respond(REPLY.model_dump_json().encode())

        await nc.subscribe(RAW_SUBJECT, queue="bench", cb=cb)
        await nc.flush()
    else:
        tracing_on("bench-bus-server")
        from meshward.bus import BusSettings, Service

        svc = Service("bench", BusSettings(nats_url=url))

        @svc.handler(BUS_SUBJECT, SecurityCheckRequest)
        async def handle(_: SecurityCheckRequest) -> SecurityVerdict:
            return REPLY

        await svc.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(call, seconds: float, server_pid: int, inflight: int = 64) -> dict:
    for _ in range(300):
        await call()
    lat = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t)
    done = 0
    end = time.perf_counter() + seconds

    async def worker():
        nonlocal done
        while time.perf_counter() < end:
            await call()
            done += 1

    start, cpu, server_cpu = time.perf_counter(), time.process_time(), _cpu_s(server_pid)
    await asyncio.gather(*(worker() for _ in range(inflight)))
    client_us = (time.process_time() - cpu) / done * 1e6
    server_us = (_cpu_s(server_pid) - server_cpu) / done * 1e6
    return {**summary_ms(lat), "rps": done / (time.perf_counter() - start), "n": len(lat), "client_us": client_us, "server_us": server_us}


def start_server(kind: str, url: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, "--url", url], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


async def run(url: str, seconds: float) -> None:
    tracing_on("bench-bus-client")
    from meshward.bus import Bus, BusSettings

    raw_server, bus_server = start_server("raw", url), start_server("bus", url)
    try:
        nc = await nats.connect(url)

        async def raw_call():
            # by hand what Bus.request does for the caller: serialize the request, parse the reply
            msg = await nc.request(RAW_SUBJECT, REQUEST.model_dump_json().encode(), timeout=5)
            SecurityVerdict.model_validate_json(msg.data)

        bus = await Bus.connect(BusSettings(nats_url=url))

        async def bus_call():
            await bus.request(BUS_SUBJECT, REQUEST, SecurityVerdict, timeout=5)

        results = {}
        for _round in range(2):  # interleave to even out machine noise; keep the better round of each
            for name, call, server in (("raw nats-py", raw_call, raw_server), ("meshward bus", bus_call, bus_server)):
                r = await measure(call, seconds, server.pid)
                best = results.get(name)
                if best is None or r["p50"] < best["p50"]:
                    results[name] = {**r, "rps": max(r["rps"], best["rps"] if best else 0)}
                if best is not None:
                    for k in ("client_us", "server_us"):
                        results[name][k] = min(r[k], best[k])
        await bus.close()
        await nc.close()
    finally:
        raw_server.terminate()
        bus_server.terminate()
    print(f"machine: {machine()}")
    print(f"payload: {len(REQUEST.model_dump_json())} B request, {len(REPLY.model_dump_json())} B reply; {seconds:.0f}s per phase")
    print(f"sampler: {os.environ.get('OTEL_TRACES_SAMPLER', 'parentbased_always_on')} {os.environ.get('OTEL_TRACES_SAMPLER_ARG', '')}")
    print(f"{'':14} {'p50 ms':>8} {'p99 ms':>8} {'req/s (64 in flight)':>22} {'client CPU us/req':>18} {'server CPU us/req':>18}")
    for name, r in results.items():
        print(f"{name:14} {r['p50']:8.3f} {r['p99']:8.3f} {r['rps']:22.0f} {r['client_us']:18.1f} {r['server_us']:18.1f}")
    raw, bus_r = results["raw nats-py"], results["meshward bus"]
    print(f"ratio bus/raw: p50 {bus_r['p50'] / raw['p50']:.2f}x, throughput {bus_r['rps'] / raw['rps']:.2f}x, "
          f"CPU per request {(bus_r['client_us'] + bus_r['server_us']) / (raw['client_us'] + raw['server_us']):.2f}x")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--serve", choices=["raw", "bus"])
    p.add_argument("--url")
    args = p.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.url))
        return
    with tempfile.TemporaryDirectory() as d, EmbeddedNats(d) as server:
        os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        asyncio.run(run(server.url, args.seconds))


if __name__ == "__main__":
    main()
