"""End-to-end benchmark: POST /v1/ask on the distributed system (every service a process
over NATS, as `make up` runs it) against the monolith (the same graph and logic in one
process behind the same HTTP ingress). Fast-tier question, 1 and 16 concurrent clients.

The real configuration by default: the fine-tuned security and intent classifiers on both
sides, tracing on (every process exports its spans over OTLP/HTTP to a receiver in this
process). Both sides keep history as memory does (the monolith hands its interaction events to
memory's event sink in-process, off the answer's path; `--monolith-without-memory` drops that, as
this bench did before). Known threats (a memory lookup before the classifier) are off on both
sides, so both run the same layers. `--rules` runs the earlier rules + embedding setup.
Also prints NATS round trips and LangGraph node steps per question, counted from the spans.

    .venv/bin/python bench/e2e.py [--seconds 10] [--rules]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

import httpx  # noqa: E402
from _common import NO_RATE_LIMIT, cpu_seconds, machine, summary_ms  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port, wait_for_port  # noqa: E402

from tests.otlp_receiver import OtlpReceiver  # noqa: E402

QUESTION = "Calculate 15 * 23 + 7"


def tracing_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}


async def load(url: str, clients: int, seconds: float, pids: dict[str, int] | None = None) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=clients)) as http:
        for _ in range(20):  # warm-up
            r = await http.post("/v1/ask", json={"question": QUESTION})
            assert r.status_code == 200 and "352" in r.json()["answer"], r.text
        lat: list[float] = []
        nodes: dict[str, list[float]] = {}  # each node's ms, from the answers' steps
        errors = 0
        end = time.perf_counter() + seconds

        async def client():
            nonlocal errors
            while time.perf_counter() < end:
                t = time.perf_counter()
                r = await http.post("/v1/ask", json={"question": QUESTION})
                took = time.perf_counter() - t
                lat.append(took)
                body = r.json() if r.status_code == 200 else {}
                errors += body.get("status") != "answered"
                steps = body.get("steps") or []
                for step in steps:
                    nodes.setdefault(step["node"], []).append(step["ms"])
                # what the nodes do not account for: HTTP, LangGraph between the nodes, checkpoint, the event
                nodes.setdefault("(outside the nodes)", []).append(took * 1000 - sum(step["ms"] for step in steps))

        pids = {**(pids or {}), "benchmark (clients, span receiver)": os.getpid()}
        cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - start
        cpu_ms = {name: (cpu_seconds(pid) - cpu[name]) * 1000 / max(len(lat), 1) for name, pid in pids.items()}
        node_p50 = {name: statistics.median(v) for name, v in nodes.items()}
        return {**summary_ms(lat), "rps": len(lat) / elapsed, "n": len(lat), "errors": errors, "cpu_ms": cpu_ms, "node_p50": node_p50}


async def per_question(url: str, receiver: OtlpReceiver) -> dict[str, int]:
    """One question's trace: NATS round trips (`send` spans) and graph node steps (`node` spans)."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        trace_id = (await http.post("/v1/ask", json={"question": QUESTION})).json()["trace_id"]
    for _ in range(100):
        spans = [s for s in receiver.spans if s.trace_id == trace_id]
        if any(s.name.startswith("POST") for s in spans):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)  # the services' batch processors export a little later than the ingress
    names = Counter(s.name.split(" ", 1)[0] for s in receiver.spans if s.trace_id == trace_id)
    return {"nats_round_trips": names["send"], "graph_steps": names["node"], "spans": sum(names.values())}


async def distributed(seconds: float, rules: bool, receiver: OtlpReceiver, log, parallel: bool = True) -> dict:
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-"))
    port = free_port()
    env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_SECURITY_KNOWN_THREATS": "false", "MESHWARD_MCP_PORT": str(free_port()),
           "MESHWARD_PARALLEL_SCREENING": str(parallel).lower(), **NO_RATE_LIMIT, **tracing_env(receiver)}
    if rules:
        env.update(MESHWARD_SECURITY_CLASSIFIER="false", MESHWARD_INTENT_BACKEND="embedding")
    stack = Stack(data, port, None, Console(log), extra_env=env)
    await stack.start()
    try:
        assert await stack.wait_healthy(), "distributed system did not become healthy"
        url = f"http://127.0.0.1:{port}"
        pids = {name: proc.pid for name, proc in stack.procs.items()}
        if stack.nats is not None and stack.nats.proc is not None:
            pids["nats-server"] = stack.nats.proc.pid
        return {"counts": await per_question(url, receiver), **{c: await load(url, c, seconds, pids) for c in (1, 16)}}
    finally:
        await stack.stop()


async def monolith(seconds: float, rules: bool, receiver: OtlpReceiver, memory: bool = True) -> dict:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-mono-"))
    cmd = [sys.executable, str(ROOT / "monolith.py"), "--port", str(port), "--checkpoint-db", str(data / "checkpoints.db"),
           *(["--memory-dir", str(data / "memory")] if memory else [])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **NO_RATE_LIMIT, **tracing_env(receiver)}
    proc = subprocess.Popen([*cmd, *([] if rules else ["--finetuned"])], env=env)
    try:
        await asyncio.to_thread(wait_for_port, port, 120, proc)
        url = f"http://127.0.0.1:{port}"
        return {"counts": await per_question(url, receiver), **{c: await load(url, c, seconds, {"monolith": proc.pid}) for c in (1, 16)}}
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rules", action="store_true", help="rules security layer and embedding intent instead of the fine-tuned classifiers")
    p.add_argument("--sequential-too", action="store_true",
                   help="also run the distributed system with security and intent one after the other (MESHWARD_PARALLEL_SCREENING=false)")
    p.add_argument("--monolith-without-memory", action="store_true", help="the monolith keeps no history (the distributed system still does)")
    args = p.parse_args()
    with OtlpReceiver() as receiver, tempfile.TemporaryFile("w+") as log:
        sides = []
        if args.sequential_too:
            sides.append(("distributed, sequential", asyncio.run(distributed(args.seconds, args.rules, receiver, log, parallel=False))))
            receiver.spans.clear()
        dist = asyncio.run(distributed(args.seconds, args.rules, receiver, log))
        receiver.spans.clear()
        mono = asyncio.run(monolith(args.seconds, args.rules, receiver, memory=not args.monolith_without_memory))
    setup = "rules security layer, MiniLM-similarity intent" if args.rules else "fine-tuned security and intent classifiers"
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end")
    print(f"question: {QUESTION!r} (fast tier, {setup}, tracing on: OTLP/HTTP export); {args.seconds:.0f}s per phase; "
          f"monolith {'without' if args.monolith_without_memory else 'with'} memory's history")
    print(f"{'':36} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'errors':>7}")
    for name, res in (*sides, ("distributed (5 services)", dist), ("monolith (1 process)", mono)):
        for c in (1, 16):
            r = res[c]
            print(f"{name + f', {c} client' + ('s' if c > 1 else ''):36} {r['p50']:8.2f} {r['p99']:8.2f} {r['rps']:8.1f} {r['errors']:7d}")
    for _name, res in sides:
        for c in (1, 16):
            print(f"ratio parallel/sequential screening at {c:>2} client(s): p50 {dist[c]['p50'] / res[c]['p50']:.2f}x, "
                  f"throughput {dist[c]['rps'] / res[c]['rps']:.2f}x")
    for c in (1, 16):
        print(f"ratio distributed/monolith at {c:>2} client(s): p50 {dist[c]['p50'] / mono[c]['p50']:.2f}x, "
              f"p99 {dist[c]['p99'] / mono[c]['p99']:.2f}x, throughput {dist[c]['rps'] / mono[c]['rps']:.2f}x")
    print(f"per question, from its trace: distributed {dist['counts']}, monolith {mono['counts']}")
    print("where a question's time goes at 1 client (median ms per graph node, from the answers' steps):")
    for name, res in (("distributed", dist), ("monolith", mono)):
        print(f"  {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in res[1]["node_p50"].items()))
    print("CPU ms per question at 16 clients (user + system, each process):")
    for name, res in (*sides, ("distributed", dist), ("monolith", mono)):
        shares = res[16]["cpu_ms"]
        system = sum(v for k, v in shares.items() if not k.startswith("benchmark"))
        print(f"  {name}: {system:.1f} ms in the system; " + ", ".join(f"{k} {v:.1f}" for k, v in shares.items()))


if __name__ == "__main__":
    main()
