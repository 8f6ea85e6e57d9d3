"""End-to-end benchmark: POST /v1/ask on the distributed system (every service a process
over NATS, as `make up` runs it) against the monolith (the same graph and logic in one
process behind the same HTTP ingress). Fast-tier question, 1 and 16 concurrent clients.

    .venv/bin/python bench/e2e.py [--seconds 10]
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from _common import machine, summary_ms  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port, wait_for_port  # noqa: E402

QUESTION = "Calculate 15 * 23 + 7"


async def load(url: str, clients: int, seconds: float) -> dict:
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=httpx.Limits(max_connections=clients)) as http:
        for _ in range(20):  # warm-up
            r = await http.post("/v1/ask", json={"question": QUESTION})
            assert r.status_code == 200 and "352" in r.json()["answer"], r.text
        lat: list[float] = []
        end = time.perf_counter() + seconds

        async def client():
            while time.perf_counter() < end:
                t = time.perf_counter()
                r = await http.post("/v1/ask", json={"question": QUESTION})
                lat.append(time.perf_counter() - t)
                assert r.status_code == 200

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return {**summary_ms(lat), "rps": len(lat) / (time.perf_counter() - start), "n": len(lat)}


async def distributed(seconds: float, log) -> dict:
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-"))
    port = free_port()
    # the same logic as the monolith: rules layer only, embedding-similarity intent (issue 2's "no ML layers")
    env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_SECURITY_CLASSIFIER": "false", "MESHWARD_SECURITY_KNOWN_THREATS": "false",
           "MESHWARD_INTENT_BACKEND": "embedding", "MESHWARD_MCP_PORT": str(free_port())}
    stack = Stack(data, port, None, Console(log), extra_env=env)
    await stack.start()
    try:
        assert await stack.wait_healthy(), "distributed system did not become healthy"
        url = f"http://127.0.0.1:{port}"
        return {c: await load(url, c, seconds) for c in (1, 16)}
    finally:
        await stack.stop()


async def monolith(seconds: float) -> dict:
    port = free_port()
    db = Path(tempfile.mkdtemp(prefix="meshward-bench-mono-")) / "checkpoints.db"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).parent / "monolith.py"), "--port", str(port), "--checkpoint-db", str(db)])
    try:
        await asyncio.to_thread(wait_for_port, port, 120, proc)
        url = f"http://127.0.0.1:{port}"
        return {c: await load(url, c, seconds) for c in (1, 16)}
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    with tempfile.TemporaryFile("w+") as log:
        dist = asyncio.run(distributed(args.seconds, log))
    mono = asyncio.run(monolith(args.seconds))
    print(f"machine: {machine()}")
    print(f"question: {QUESTION!r} (fast tier, rules security layer, MiniLM intent); {args.seconds:.0f}s per phase")
    print(f"{'':26} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}")
    for name, res in (("distributed (5 services)", dist), ("monolith (1 process)", mono)):
        for c, r in res.items():
            print(f"{name + f', {c} client' + ('s' if c > 1 else ''):26} {r['p50']:8.2f} {r['p99']:8.2f} {r['rps']:8.1f}")
    for c in (1, 16):
        print(f"ratio distributed/monolith at {c:>2} client(s): p50 {dist[c]['p50'] / mono[c]['p50']:.2f}x, "
              f"p99 {dist[c]['p99'] / mono[c]['p99']:.2f}x, throughput {dist[c]['rps'] / mono[c]['rps']:.2f}x")


if __name__ == "__main__":
    main()
