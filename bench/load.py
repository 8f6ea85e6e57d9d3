"""Load and fault benchmark of the distributed system in the real configuration (`make up`'s defaults:
fine-tuned classifiers, known threats, memory with embeddings; tracing on, exported over OTLP/HTTP
to a receiver in this process). Traffic goes to 127.0.0.1 only, bounded in clients and time.

For 1, 16 and 64 clients, each for --duration seconds: throughput, latency, failed questions, the
memory consumer's backlog (stream events not yet stored, sampled every second) and how long it
takes to drain once the load stops, and read-your-writes (each client reads its thread's history
right after an answer, every --check-every answers: the answer must be in it).

--faults: under 8 clients, SIGKILL each service once, then the nats-server, waiting for the system
to answer again each time: failed questions and time to recover per fault; afterwards every answered
question must be in its thread's history (no event lost).

    .venv/bin/python bench/load.py [--duration 60] [--clients 1 16 64] [--faults]
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

import httpx  # noqa: E402
import nats  # noqa: E402
from _common import NO_RATE_LIMIT, machine, summary_ms  # noqa: E402
from meshward.contracts import subjects  # noqa: E402
from meshward.devstack.launcher import SERVICES, Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port  # noqa: E402

from tests.otlp_receiver import OtlpReceiver  # noqa: E402

counter = itertools.count()


class Run:
    def __init__(self) -> None:
        self.lat: list[float] = []
        self.failed = 0
        self.failures: dict[str, int] = {}
        self.ryw_checked = 0
        self.ryw_missing = 0
        self.answered: list[tuple[str, str]] = []  # (thread, question)
        self.last_ok_sent = 0.0  # when the latest answered question was sent

    def fail(self, why: str) -> None:
        self.failed += 1
        self.failures[why] = self.failures.get(why, 0) + 1


async def client(http: httpx.AsyncClient, run: Run, end: float, check_every: int) -> None:
    thread = None
    n = 0
    while time.monotonic() < end:
        question = f"Calculate {next(counter)} * 23 + 7"
        body = {"question": question, **({"thread_id": thread} if thread else {})}
        t = time.perf_counter()
        sent = time.monotonic()
        try:
            r = await http.post("/v1/ask", json=body)
        except httpx.HTTPError as e:
            run.fail(type(e).__name__)
            await asyncio.sleep(0.05)  # the ingress is restarting: do not spin
            continue
        run.lat.append(time.perf_counter() - t)
        reply = r.json() if r.status_code == 200 else {}
        if reply.get("status") != "answered":
            run.fail(f"{r.status_code} {reply.get('status')}: {str(reply.get('answer'))[:90]}")
            continue
        run.last_ok_sent = max(run.last_ok_sent, sent)
        thread = reply["thread_id"]
        run.answered.append((thread, question))
        n += 1
        if check_every and n % check_every == 0:
            h = await http.get(f"/v1/threads/{thread}/history", params={"limit": 500})
            run.ryw_checked += 1
            if h.status_code != 200 or question not in [turn["question"] for turn in h.json()["turns"]]:
                run.ryw_missing += 1


async def backlog(nc) -> int:
    info = await nc.jetstream().consumer_info(subjects.EVENTS_STREAM, "memory")
    return info.num_pending + info.num_ack_pending


async def sample_backlog(nc, samples: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            samples.append(await backlog(nc))
        except Exception:  # noqa: BLE001 - nats restarting during the fault run
            samples.append(-1)
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def drain_time(nc, limit: float = 60.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if await backlog(nc) == 0:
            return time.monotonic() - start
        await asyncio.sleep(0.1)
    return float("inf")


def stack_pids(stack: Stack) -> dict[str, int]:
    """Each service's process and the stack's own nats-server: whose CPU a bench reads."""
    pids = {name: proc.pid for name, proc in stack.procs.items()}
    if stack.nats is not None and stack.nats.proc is not None:
        pids["nats-server"] = stack.nats.proc.pid
    return pids


async def drained(stack: Stack) -> float:
    """Until memory's consumer has stored every event of the stack: seconds waited."""
    nc = await observer(stack)
    try:
        return await drain_time(nc)
    finally:
        await nc.close()


async def phase(url: str, nc, clients: int, duration: float, check_every: int) -> dict:
    run = Run()
    samples: list[int] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_backlog(nc, samples, stop))
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=clients + 2)) as http:
        start = time.monotonic()
        await asyncio.gather(*(client(http, run, start + duration, check_every) for _ in range(clients)))
        elapsed = time.monotonic() - start
    stop.set()
    await sampler
    drained = await drain_time(nc)
    return {"clients": clients, **summary_ms(run.lat), "rps": len(run.answered) / elapsed, "answered": len(run.answered),
            "failed": run.failed, "failures": run.failures, "backlog_max": max(samples, default=0),
            "backlog_samples": samples, "drain_s": drained, "ryw": f"{run.ryw_checked - run.ryw_missing}/{run.ryw_checked}"}


async def same_command(url: str, n: int = 32) -> dict:
    """n concurrent "how much memory is free?": each runs `free -m` through cli_execute."""
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=n)) as http:
        replies = await asyncio.gather(*(http.post("/v1/ask", json={"question": "how much memory is free?"}) for _ in range(n)))
    statuses = [r.json().get("status") if r.status_code == 200 else str(r.status_code) for r in replies]
    return {"questions": n, "answered": statuses.count("answered"), "errors": n - statuses.count("answered"),
            "example_error": next((r.json().get("answer") for r, st in zip(replies, statuses, strict=True) if st != "answered"), None)}


async def faults(stack: Stack, url: str) -> list[dict]:
    results = []
    run = Run()
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        end = time.monotonic() + 3600
        load = [asyncio.create_task(client(http, run, end, 0)) for _ in range(8)]
        try:
            while not run.answered:
                await asyncio.sleep(0.1)
            for target in (*SERVICES, "nats"):
                await asyncio.sleep(2.0)  # steady load before the fault
                failed_before = run.failed
                killed = time.monotonic()
                if target == "nats":
                    stack.nats.proc.kill()
                else:
                    os.kill(stack.procs[target].pid, signal.SIGKILL)
                restarted = None
                while time.monotonic() - killed < 120:
                    if restarted is None and stack.restarts.get(target, 0) > 0:
                        restarted = time.monotonic()
                    if restarted is not None and run.last_ok_sent > restarted:
                        break  # a question sent after the restart was seen has been answered
                    await asyncio.sleep(0.05)
                answered_at = time.monotonic()
                results.append({"fault": f"SIGKILL {target}", "answering_again_s": round(answered_at - killed, 2),
                                "failed_questions": run.failed - failed_before})
            await asyncio.sleep(2.0)
        finally:
            for t in load:
                t.cancel()
            await asyncio.gather(*load, return_exceptions=True)
        # no event lost: every answered question is in its thread's history, once memory has caught up
        await drain_time(await observer(stack))
        missing = 0
        for thread, question in run.answered:
            h = await http.get(f"/v1/threads/{thread}/history", params={"limit": 500})
            missing += h.status_code != 200 or question not in [t["question"] for t in h.json()["turns"]]
    results.append({"answered": len(run.answered), "failed": run.failed, "failures": run.failures, "lost_from_history": missing})
    return results


async def observer(stack: Stack) -> nats.NATS:
    """A connection that may read the memory consumer's backlog: on the closed bus only memory's user may, so the
    bench connects as memory (its password file, its inbox prefix); an open server takes anyone."""
    async def expected(_: Exception) -> None:
        pass  # the fault run restarts nats-server under this connection, and the stack stops before it closes

    if stack.credentials is None:
        return await nats.connect(stack.nats_url, max_reconnect_attempts=-1, error_cb=expected)
    password = stack.credentials.password_file("memory").read_text(encoding="utf-8").strip()
    return await nats.connect(stack.nats_url, user="memory", password=password, inbox_prefix="_INBOX.memory",
                              max_reconnect_attempts=-1, error_cb=expected)


async def main_async(args) -> None:
    data = Path(tempfile.mkdtemp(prefix="meshward-load-"))
    port = free_port()
    with OtlpReceiver() as receiver, open(data / "stack.log", "w") as log:
        env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_MCP_PORT": str(free_port()), **NO_RATE_LIMIT,
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        stack = Stack(data, port, None, Console(log), extra_env=env)
        await stack.start()
        supervision = asyncio.create_task(stack.supervise()) if hasattr(stack, "supervise") else None
        try:
            assert await stack.wait_healthy(), "not healthy"
            url = f"http://127.0.0.1:{port}"
            nc = await observer(stack)
            print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f}")
            for clients in args.clients:
                r = await phase(url, nc, clients, args.duration, args.check_every)
                receiver.spans.clear()
                print(f"{clients:>3} clients, {args.duration:.0f}s: {r['rps']:.1f} answered/s, p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, "
                      f"failed {r['failed']} {r['failures'] or ''}; memory backlog max {r['backlog_max']} events, "
                      f"drained {r['drain_s']:.1f}s after the load; read-your-writes {r['ryw']}; backlog/s {r['backlog_samples']}",
                      flush=True)
            print(f"32 concurrent 'how much memory is free?': {await same_command(url)}", flush=True)
            if args.faults:
                for r in await faults(stack, url):
                    print(r, flush=True)
            print(f"load average at the end {os.getloadavg()[0]:.1f}")
            await nc.close()
        finally:
            if supervision is not None:
                supervision.cancel()
            await stack.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=float, default=60.0, help="seconds per client count")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--check-every", type=int, default=5, help="read the history after every Nth answer of a client")
    p.add_argument("--faults", action="store_true")
    args = p.parse_args()
    if not 1 <= args.duration <= 600 or any(not 1 <= c <= 256 for c in args.clients):
        p.error("duration 1..600 s, clients 1..256")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
