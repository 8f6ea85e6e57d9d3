"""The Agent Protocol's cost over POST /v1/ask: the same fast-tier question, sequential, on the
distributed system (`make up`'s launcher), through /v1/ask and through the langgraph-sdk client
(runs.wait and runs.stream, each on a fresh thread: work queue, KV records, NATS run events).

    .venv/bin/python bench/agent_protocol.py [--n 60]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent))

import httpx  # noqa: E402
from _common import NO_RATE_LIMIT, machine, summary_ms  # noqa: E402
from langgraph_sdk import get_client  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port  # noqa: E402

QUESTION = "Calculate 15 * 23 + 7"
INPUT = {"messages": [{"role": "user", "content": QUESTION}]}


async def measure(url: str, n: int) -> dict[str, list[float]]:
    client = get_client(url=url)
    out: dict[str, list[float]] = {"/v1/ask": [], "runs.wait": [], "runs.stream (updates)": []}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:

        async def ask():
            r = await http.post("/v1/ask", json={"question": QUESTION})
            assert "352" in r.json()["answer"], r.text

        async def wait():
            tid = (await client.threads.create())["thread_id"]
            result = await client.runs.wait(tid, "meshward", input=INPUT)
            assert "352" in result["messages"][-1]["content"], result

        async def stream():
            tid = (await client.threads.create())["thread_id"]
            parts = [p async for p in client.runs.stream(tid, "meshward", input=INPUT, stream_mode="updates")]
            assert any(p.event == "updates" for p in parts)

        calls = {"/v1/ask": ask, "runs.wait": wait, "runs.stream (updates)": stream}
        for fn in calls.values():  # warm-up
            for _ in range(5):
                await fn()
        for _ in range(n):  # interleaved, so that drift of the shared machine hits every path alike
            for name, fn in calls.items():
                t = time.perf_counter()
                await fn()
                out[name].append(time.perf_counter() - t)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=60)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="meshward-bench-ap-"))
    port = free_port()
    with open(data_dir / "stack.log", "w") as log:
        stack = Stack(data_dir, port, None, Console(log), extra_env={"MESHWARD_MCP_PORT": str(free_port()), **NO_RATE_LIMIT})
        await stack.start()
        try:
            if not await stack.wait_healthy(timeout=180):
                raise SystemExit("the system did not become healthy; see " + str(data_dir / "stack.log"))
            results = await measure(f"http://127.0.0.1:{port}", args.n)
        finally:
            await stack.stop()
    print(f"machine: {machine()}; {args.n} sequential questions per path, interleaved; client time (ms), thread creation included for the SDK paths")
    base = summary_ms(results["/v1/ask"])
    for name, samples in results.items():
        s = summary_ms(samples)
        print(f"{name:24s} p50 {s['p50']:7.1f}  p99 {s['p99']:7.1f}  mean {s['mean']:7.1f}  p50 ratio to /v1/ask {s['p50'] / base['p50']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
