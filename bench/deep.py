"""Deep-tier latency per question through POST /v1/ask on the whole system (the launcher `make up`
uses; the llm service with whatever backend the environment configures, the embedded model by
default), with the fast tier's latency measured in the same run as the baseline.

    .venv/bin/python bench/deep.py [--runs 5] [--max-refinements N] [--max-tokens N]

Each deep question is asked `--runs` times, one at a time (a CPU model serves one answer at a
time), each in a new thread so that memory's context does not grow between runs.
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from _common import NO_RATE_LIMIT, machine, summary_ms  # noqa: E402
from meshward.devstack.launcher import Console, Stack  # noqa: E402
from meshward.devstack.nats_server import free_port  # noqa: E402

DEEP_QUESTIONS = (
    "Why would load average be high while CPU usage is low?",
    "Explain how TCP congestion control works",
    "What causes a disk to fill up with inodes but not bytes?",
)
FAST_QUESTION = "Calculate 15 * 23 + 7"


async def measure(http: httpx.AsyncClient, question: str, runs: int) -> dict:
    lat, tiers, drafts, tokens, statuses = [], set(), [], [], set()
    for i in range(runs):
        t = time.perf_counter()
        r = await http.post("/v1/ask", json={"question": question, "thread_id": f"bench-{i}-{time.time_ns()}"})
        lat.append(time.perf_counter() - t)
        body = r.json()
        assert r.status_code == 200, r.text
        tiers.add(body["tier"])
        statuses.add(body["status"])
        drafts.append(body["route"].count("reason"))
        tokens.append(body["usage"]["completion_tokens"])
    return {**summary_ms(lat), "n": runs, "tiers": sorted(t or "-" for t in tiers), "status": sorted(statuses),
            "drafts": sum(drafts) / len(drafts), "completion_tokens": sum(tokens) / len(tokens), "model": body.get("model")}


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--max-refinements", type=int, default=None)
    p.add_argument("--max-tokens", type=int, default=None)
    args = p.parse_args()
    data = Path(tempfile.mkdtemp(prefix="meshward-bench-deep-"))
    port = free_port()
    env = {"MESHWARD_LOG_LEVEL": "WARNING", "MESHWARD_MCP_PORT": str(free_port()), **NO_RATE_LIMIT}
    if args.max_refinements is not None:
        env["MESHWARD_MAX_REFINEMENTS"] = str(args.max_refinements)
    if args.max_tokens is not None:
        env["MESHWARD_LLM_MAX_TOKENS"] = str(args.max_tokens)
    with open(data / "stack.log", "w") as log:
        stack = Stack(data, port, None, Console(log), extra_env=env)
        await stack.start()
        try:
            assert await stack.wait_healthy(), f"the system did not become healthy; see {data / 'stack.log'}"
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=300) as http:
                await measure(http, DEEP_QUESTIONS[0], 1)  # warm-up: model load, first compile
                await measure(http, FAST_QUESTION, 20)
                fast = await measure(http, FAST_QUESTION, 50)
                rows = {q: await measure(http, q, args.runs) for q in DEEP_QUESTIONS}
        finally:
            await stack.stop()
    print(f"# deep tier, {machine()}")
    print(f"{'question':58} {'tier':6} {'p50 ms':>9} {'p99 ms':>9} {'drafts':>6} {'tokens':>6}  model")
    print(f"{FAST_QUESTION:58} {','.join(fast['tiers']):6} {fast['p50']:9.1f} {fast['p99']:9.1f} {'-':>6} {'-':>6}  (baseline, n={fast['n']})")
    for q, r in rows.items():
        print(f"{q[:58]:58} {','.join(r['tiers']):6} {r['p50']:9.0f} {r['p99']:9.0f} {r['drafts']:6.1f} {r['completion_tokens']:6.0f}  {r['model']} (n={r['n']}, {','.join(r['status'])})")
        print(f"{'':58} {'':6} {r['p50'] / fast['p50']:8.0f}x of the fast tier's p50")


if __name__ == "__main__":
    asyncio.run(main())
