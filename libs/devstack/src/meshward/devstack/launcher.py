"""`meshward up`: an embedded nats-server, the five services and the HTTP ingress, in the foreground.

Children run in their own sessions (a terminal's Ctrl-C reaches only this
process, which then stops each child once, cleanly) and die with it even if it
is killed (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

import httpx

from .nats_server import EmbeddedNats

SERVICES = ("security", "intent", "tools", "memory", "supervisor")
COLORS = {"nats": "90", "security": "31", "intent": "35", "tools": "33", "memory": "36", "supervisor": "32", "meshward": "1"}
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class Console:
    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stdout
        self.color = self.stream.isatty() and not os.environ.get("NO_COLOR")
        self.width = max(len(n) for n in COLORS)

    def line(self, name: str, text: str) -> None:
        prefix = f"{name:<{self.width}} |"
        if self.color:
            prefix = f"\033[{COLORS.get(name, '0')}m{prefix}\033[0m"
        self.stream.write(f"{prefix} {text}\n")
        self.stream.flush()


class Stack:
    def __init__(self, data_dir: Path, http_port: int, nats_url: str | None, console: Console, extra_env: dict[str, str] | None = None):
        self.extra_env = extra_env or {}
        self.data_dir = data_dir
        self.http_port = http_port
        self.nats_url = nats_url
        self.console = console
        self.nats: EmbeddedNats | None = None
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.pumps: list[asyncio.Task] = []
        self.stopping = False

    def env_for(self, service: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            MESHWARD_NATS_URL=self.nats_url or "",
            MESHWARD_HTTP_PORT=str(self.http_port),
            OTEL_SERVICE_NAME=f"meshward-{service}",
            PYTHONUNBUFFERED="1",
        )
        env.setdefault("MESHWARD_DATABASE_URL", f"sqlite+aiosqlite:///{self.data_dir / 'memory.db'}")
        env.setdefault("MESHWARD_CLUSTER_DATABASE_URL", f"sqlite+aiosqlite:///{self.data_dir / 'tools.db'}")
        env.setdefault("MESHWARD_CHECKPOINT_DB", str(self.data_dir / "checkpoints.db"))
        env.setdefault("MESHWARD_CHROMA_PATH", str(self.data_dir / "chroma"))
        # Five processes share the cores: a BLAS or ONNX thread pool per process would
        # oversubscribe them (measured: a MiniLM encode at 35 ms with one thread, 1.5 s with two under load).
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")
        env.update(self.extra_env)
        return env

    async def _pump(self, name: str, stream: asyncio.StreamReader) -> None:
        while True:
            raw = await stream.readline()
            if not raw:
                return
            self.console.line(name, raw.decode(errors="replace").rstrip())

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.nats_url:
            self.nats = EmbeddedNats(self.data_dir / "nats", log_file=self.data_dir / "nats.log")
            self.nats_url = await asyncio.to_thread(self.nats.start)
            self.console.line("nats", f"embedded nats-server with JetStream at {self.nats_url} (data in {self.data_dir / 'nats'})")
        else:
            self.console.line("nats", f"using {self.nats_url}")
        for name in SERVICES:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", f"meshward.{name}",
                env=self.env_for(name),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads are running at this point in the child
            )
            self.procs[name] = proc
            self.pumps.append(asyncio.create_task(self._pump(name, proc.stdout)))
            self.console.line("meshward", f"started {name} (pid {proc.pid})")

    async def wait_healthy(self, timeout: float = 180.0) -> bool:
        url = f"http://127.0.0.1:{self.http_port}/healthz"
        end = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < end and not self.stopping:
                if any(p.returncode is not None for p in self.procs.values()):
                    return False
                try:
                    if (await client.get(url)).status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.25)
        return False

    async def wait_any_exit(self) -> str:
        waits = {asyncio.create_task(p.wait()): n for n, p in self.procs.items()}
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for t in pending:
            t.cancel()
        return waits[next(iter(done))]

    async def stop(self, grace: float = 15.0) -> None:
        self.stopping = True
        # the ingress first, so no new question enters while the services drain
        for name in reversed(SERVICES):
            proc = self.procs.get(name)
            if proc and proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                if name == "supervisor":
                    try:
                        await asyncio.wait_for(proc.wait(), grace)
                    except TimeoutError:
                        pass
        for name, proc in self.procs.items():
            try:
                await asyncio.wait_for(proc.wait(), grace)
            except TimeoutError:
                self.console.line("meshward", f"{name} did not stop in {grace}s; killing it")
                proc.kill()
                await proc.wait()
        for pump in self.pumps:
            try:
                await asyncio.wait_for(pump, 2)
            except TimeoutError:
                pump.cancel()
        if self.nats is not None:
            await asyncio.to_thread(self.nats.stop)
            self.console.line("nats", "stopped")


async def run_up(data_dir: Path, http_port: int, nats_url: str | None) -> int:
    console = Console()
    stack = Stack(data_dir, http_port, nats_url, console)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    code = 0
    try:
        await stack.start()
        waiter = asyncio.create_task(stack.wait_any_exit())
        stopper = asyncio.create_task(stop.wait())
        healthy = asyncio.create_task(stack.wait_healthy())
        done, _ = await asyncio.wait({healthy, stopper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if healthy in done and healthy.result():
            console.line("meshward", f"ready: http://127.0.0.1:{http_port}  (try: meshward ask \"Calculate 15 * 23 + 7\"; Ctrl-C stops)")
            done, _ = await asyncio.wait({stopper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        elif healthy in done:
            console.line("meshward", "the system did not become healthy; see the logs above. Stopping.")
            code = 1
        if waiter in done and not stop.is_set():
            name = waiter.result()
            console.line("meshward", f"{name} exited with code {stack.procs[name].returncode}; stopping everything")
            code = 1
        for t in (waiter, stopper, healthy):
            t.cancel()
    finally:
        console.line("meshward", "stopping")
        await stack.stop()
        console.line("meshward", "stopped")
    return code
