"""The security service as deployed, over NATS: `meshward.v1.security.check` per second and its latency with the
fine-tuned classifier on the CPU or on CUDA (a GPU node: `MESHWARD_CLASSIFIER_DEVICE=cuda`).

Starts the bundled nats-server and R replicas of `python -m meshward.security`, each its own process in the service's
queue group (known threats off: there is no memory service here), waits until every replica reports ready, then C
concurrent clients send short questions for S seconds each. CPU: the int8 graph; CUDA: the fp16 graph
(onnxruntime-gpu; the replicas share the GPU). Figures only, never asserted.

    .venv/bin/python bench/security_service.py [--device cpu|cuda] [--replicas 1] [--clients 1,16,64] [--seconds 5]
        [--max-batch 32]
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

from _common import closed_loop, machine, summary_ms  # noqa: E402
from classifiers import SHORT  # noqa: E402
from meshward.bus import Bus, BusSettings  # noqa: E402
from meshward.contracts import HealthReply, HealthRequest, RemoteError, SecurityCheckRequest, SecurityVerdict, subjects  # noqa: E402
from meshward.devstack.nats_server import EmbeddedNats, free_port  # noqa: E402


async def wait_ready(bus: Bus, services: list[subprocess.Popen], timeout: float = 120.0) -> HealthReply:
    """Poll the health subject until every replica has answered ready (model loading takes seconds, more on a GPU)."""
    end = time.monotonic() + timeout
    ready: dict[str, HealthReply] = {}
    while time.monotonic() < end:
        for service in services:
            if service.poll() is not None:
                raise SystemExit(f"a security replica exited with code {service.returncode}; see its log above")
        try:
            reply = await bus.request(subjects.health("security"), HealthRequest(), HealthReply, timeout=1.0, retries=0)
            if reply.ready:
                ready[reply.instance] = reply
                if len(ready) == len(services):
                    return reply
        except RemoteError:
            pass
        await asyncio.sleep(0.05)  # readiness poll (the queue group picks which replica answers), not a measurement
    raise SystemExit(f"{len(ready)} of {len(services)} security replicas were ready within {timeout:.0f} s")


async def load(bus: Bus, clients: int, seconds: float) -> dict[str, float]:
    def check(i: int):
        return bus.request(subjects.SECURITY_CHECK, SecurityCheckRequest(text=SHORT[i % len(SHORT)]), SecurityVerdict,
                           timeout=10.0)

    samples, elapsed = await closed_loop(check, clients, seconds)
    return {**summary_ms(samples), "per_s": len(samples) / elapsed, "n": len(samples)}


async def main(args: argparse.Namespace) -> None:
    nats = EmbeddedNats(tempfile.mkdtemp(prefix="meshward-bench-nats-"))
    url = nats.start()
    env = {**os.environ, "MESHWARD_NATS_URL": url, "MESHWARD_SECURITY_KNOWN_THREATS": "false",
           "MESHWARD_CLASSIFIER_DEVICE": args.device, "MESHWARD_SECURITY_MAX_BATCH_SIZE": str(args.max_batch),
           "MESHWARD_LOG_LEVEL": "WARNING"}
    services = [subprocess.Popen([sys.executable, "-m", "meshward.security"], env={**env, "MESHWARD_METRICS_PORT": str(free_port())})
                for _ in range(args.replicas)]
    bus = await Bus.connect(BusSettings(nats_url=url))
    try:
        health = await wait_ready(bus, services)
        for q in SHORT:  # warm-up: the first calls on a GPU allocate and tune
            await bus.request(subjects.SECURITY_CHECK, SecurityCheckRequest(text=q), SecurityVerdict, timeout=30.0)
        rows = {c: await load(bus, c, args.seconds) for c in args.clients}
    finally:
        await bus.close()
        for service in services:
            service.terminate()
        for service in services:
            service.wait(timeout=30)
        nats.stop()
    d = health.details
    print(f"machine: {machine()}")
    print(f"security service over NATS: model {d.get('model')} {d.get('model_version')} on {d.get('provider')}, "
          f"max batch {d.get('max_batch_size')}, {args.replicas} replica(s), known threats off; {args.seconds:g} s per row")
    print(f"{'clients':>8} {'checks/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'n':>7}")
    for c, r in rows.items():
        print(f"{c:>8} {r['per_s']:10.0f} {r['p50']:8.2f} {r['p99']:8.2f} {r['n']:7d}")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--clients", default="1,16,64", type=lambda s: [int(c) for c in s.split(",")])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--replicas", type=int, default=1, help="security processes in the queue group")
    asyncio.run(main(p.parse_args()))
