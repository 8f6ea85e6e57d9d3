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

The sides run at once and are measured interleaved (one client alternating between them; then
blocks of 16 clients taking turns), so a load that drifts on a shared machine moves both alike and
the ratios hold.

    .venv/bin/python bench/e2e.py [--rounds 300] [--seconds 40] [--rules] [--sequential-too]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

import httpx  # noqa: E402
from _common import NO_RATE_LIMIT, alternate_clients, alternate_one_client, machine, summary_ms  # noqa: E402
from load import drained, stack_pids  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port, wait_for_port  # noqa: E402

from tests.otlp_receiver import OtlpReceiver  # noqa: E402

QUESTION = "Calculate 15 * 23 + 7"


def tracing_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}


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


async def start_distributed(rules: bool, receiver: OtlpReceiver, log, parallel: bool = True) -> tuple[Stack, str]:
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-"))
    port = free_port()
    env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_SECURITY_KNOWN_THREATS": "false", "MESHWARD_MCP_PORT": str(free_port()),
           "MESHWARD_PARALLEL_SCREENING": str(parallel).lower(), **NO_RATE_LIMIT, **tracing_env(receiver)}
    if rules:
        env.update(MESHWARD_SECURITY_CLASSIFIER="false", MESHWARD_INTENT_BACKEND="embedding")
    stack = Stack(data, port, None, Console(log), extra_env=env)
    await stack.start()
    return stack, f"http://127.0.0.1:{port}"


def start_monolith(rules: bool, receiver: OtlpReceiver, memory: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-mono-"))
    cmd = [sys.executable, str(ROOT / "monolith.py"), "--port", str(port), "--checkpoint-db", str(data / "checkpoints.db"),
           *(["--memory-dir", str(data / "memory")] if memory else []), *([] if rules else ["--finetuned"])]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **NO_RATE_LIMIT, **tracing_env(receiver)}
    return subprocess.Popen(cmd, env=env), f"http://127.0.0.1:{port}"


async def run(args, receiver: OtlpReceiver, log) -> dict:
    stacks: dict[str, Stack] = {}
    mono: subprocess.Popen | None = None
    try:
        urls: dict[str, str] = {}
        stacks["distributed"], urls["distributed"] = await start_distributed(args.rules, receiver, log)
        mono, urls["monolith"] = start_monolith(args.rules, receiver, memory=not args.monolith_without_memory)
        if args.sequential_too:
            side = "distributed, sequential"
            stacks[side], urls[side] = await start_distributed(args.rules, receiver, log, parallel=False)
        for stack in stacks.values():
            assert await stack.wait_healthy(), "the distributed system did not become healthy"
        await asyncio.to_thread(wait_for_port, int(urls["monolith"].rsplit(":", 1)[1]), 120, mono)
        pids = {side: stack_pids(stack) for side, stack in stacks.items()}
        pids["monolith"] = {"monolith": mono.pid}
        for side in urls:
            pids[side]["benchmark (clients, span receiver)"] = os.getpid()
        counts = {side: await per_question(url, receiver) for side, url in urls.items()}
        nodes: dict[str, dict[str, list[float]]] = {side: {} for side in urls}

        def on_answer(side: str, body: dict, took: float) -> None:
            assert body["status"] == "answered" and "352" in body["answer"], body
            steps = body.get("steps") or []
            for step in steps:
                nodes[side].setdefault(step["node"], []).append(step["ms"])
            # what the nodes do not account for: HTTP, LangGraph between the nodes, the checkpoint, the event
            nodes[side].setdefault("(outside the nodes)", []).append(took * 1000 - sum(step["ms"] for step in steps))

        async with httpx.AsyncClient(timeout=30) as http:
            for url in urls.values():
                for _ in range(20):  # warm-up
                    r = await http.post(url + "/v1/ask", json={"question": QUESTION})
                    assert r.status_code == 200 and "352" in r.json()["answer"], r.text
            one = await alternate_one_client(http, urls, lambda i: QUESTION, args.rounds, on_answer)

        async def drain(side: str) -> None:
            if side in stacks:
                await drained(stacks[side])

        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=2 * args.clients)) as http:
            many = await alternate_clients(http, urls, lambda i: QUESTION, args.clients, args.seconds, pids, drain)
        return {"counts": counts, "one": {side: summary_ms(v) for side, v in one.items()},
                "nodes": {side: {k: statistics.median(v) for k, v in n.items()} for side, n in nodes.items()}, "many": many}
    finally:
        for stack in stacks.values():
            await stack.stop()
        if mono is not None:
            mono.terminate()
            mono.wait(10)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=300, help="questions per side at 1 client")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=40.0, help="the concurrent phase, all sides together")
    p.add_argument("--rules", action="store_true", help="rules security layer and embedding intent instead of the fine-tuned classifiers")
    p.add_argument("--sequential-too", action="store_true",
                   help="also run the distributed system with security and intent one after the other (MESHWARD_PARALLEL_SCREENING=false)")
    p.add_argument("--monolith-without-memory", action="store_true", help="the monolith keeps no history (the distributed system still does)")
    args = p.parse_args()
    with OtlpReceiver() as receiver, tempfile.TemporaryFile("w+") as log:
        res = asyncio.run(run(args, receiver, log))
    setup = "rules security layer, MiniLM-similarity intent" if args.rules else "fine-tuned security and intent classifiers"
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the end")
    print(f"question: {QUESTION!r} (fast tier, {setup}, tracing on: OTLP/HTTP export); monolith "
          f"{'without' if args.monolith_without_memory else 'with'} memory's history; sides interleaved")
    one, many = res["one"], res["many"]
    print(f"{'':28} {'1 client: p50 ms':>17} {'p99 ms':>8} {f'{args.clients} clients: req/s':>20} {'not answered':>13}")
    for side in one:
        print(f"{side:28} {one[side]['p50']:17.2f} {one[side]['p99']:8.2f} {many[side]['rps']:20.1f} {many[side]['errors']:13d}")
    d, m = "distributed", "monolith"
    print(f"ratio distributed/monolith: p50 {one[d]['p50'] / one[m]['p50']:.2f}x and p99 {one[d]['p99'] / one[m]['p99']:.2f}x at 1 client, "
          f"throughput {many[d]['rps'] / many[m]['rps']:.2f}x at {args.clients}")
    if args.sequential_too:
        s = "distributed, sequential"
        print(f"ratio parallel/sequential screening: p50 {one[d]['p50'] / one[s]['p50']:.2f}x at 1 client, "
              f"throughput {many[d]['rps'] / many[s]['rps']:.2f}x at {args.clients}")
    print("per question, from its trace: " + "; ".join(f"{side} {c}" for side, c in res["counts"].items()))
    print("where a question's time goes at 1 client (median ms per graph node, from the answers' steps):")
    for side, n in res["nodes"].items():
        print(f"  {side}: " + ", ".join(f"{k} {v:.2f}" for k, v in n.items()))
    print(f"CPU ms per answered question at {args.clients} clients (user + system, each process):")
    for side, r in many.items():
        shares = r["cpu_ms"]
        system = sum(v for k, v in shares.items() if not k.startswith("benchmark"))
        print(f"  {side}: {system:.1f} ms in the system; " + ", ".join(f"{k} {v:.1f}" for k, v in shares.items()))


if __name__ == "__main__":
    main()
