"""Cluster tools benchmark: cluster_health and cluster_info through the registry against the loopback Kubernetes
API server of the tests (tests/fake_kube.py), for a small cluster (100 pods, the baseline) and a huge one
(10,000 pods: 20 pages of 500), each warmed up and then called sequentially N times: p50/p99 latency, the
ratio to the baseline, and pods checked per second. The fake server runs in this process (threads), so the
figures include its JSON encoding of each page.

    .venv/bin/python bench/clusters.py [--runs 10]
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

from _common import machine, summary_ms  # noqa: E402
from meshward.tools.cluster.settings import ClusterSettings  # noqa: E402
from meshward.tools.cluster.tools import ClusterDomain  # noqa: E402
from meshward.tools.registry import ToolRegistry  # noqa: E402

from tests.fake_kube import FakeKube  # noqa: E402

TOKEN = "bench-token-0123456789"


async def measure(pods: int, tool: str, runs: int, tmp: Path) -> list[float]:
    with FakeKube(token=TOKEN, pods=pods) as kube:
        settings = ClusterSettings(secret_key="bench-Kp4vQ9xZ2mT7rW1nB8yH3cF6jL0sD5gA", write="allow", database_url=f"sqlite+aiosqlite:///{tmp / f'{pods}.db'}")
        domain = ClusterDomain(settings)
        registry = ToolRegistry()
        for t in domain.tools():
            registry.register(t)
        await registry.call("cluster_register", {"name": "bench", "api_url": kube.url, "token": TOKEN})
        await registry.call(tool, {"name": "bench"})  # warm-up
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            await registry.call(tool, {"name": "bench"})
            samples.append(time.perf_counter() - start)
        await domain.close()
    return samples


async def main(runs: int) -> None:
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        for tool in ("cluster_info", "cluster_health"):
            base = summary_ms(await measure(100, tool, runs, Path(tmp)))
            huge = summary_ms(await measure(10_000, tool, runs, Path(tmp)))
            print(f"{tool:15s} 100 pods:    p50 {base['p50']:8.1f} ms  p99 {base['p99']:8.1f} ms")
            line = f"{tool:15s} 10,000 pods: p50 {huge['p50']:8.1f} ms  p99 {huge['p99']:8.1f} ms  ratio p50 x{huge['p50'] / base['p50']:.1f}"
            if tool == "cluster_health":
                line += f"  ({10_000 / (huge['p50'] / 1000):,.0f} pods/s)"
            print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    asyncio.run(main(parser.parse_args().runs))
