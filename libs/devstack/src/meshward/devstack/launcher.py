"""`meshward up`: an embedded nats-server, the services and the HTTP ingress, in the foreground.

Children run in their own sessions (a terminal's Ctrl-C reaches only this
process, which then stops each child once, cleanly) and die with it even if it
is killed (PR_SET_PDEATHSIG).

Supervision: a child that exits on its own (a crash, SIGKILL) is started again
after a back-off that doubles from `RESTART_BACKOFF_S` up to `MAX_BACKOFF_S`; the
embedded nats-server is restarted the same way on the same port and store (JetStream
file storage: no published event is lost). A child that crashes more than
`CRASH_LOOP_LIMIT` times within `CRASH_LOOP_WINDOW_S` is a crash loop, not a
hiccup: then, and only then, the launcher stops everything.
"""
from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from meshward.bus.permissions import Credentials, generate_credentials

from .nats_server import EmbeddedNats

SERVICES = ("security", "intent", "tools", "memory", "llm", "supervisor")
COLORS = {"nats": "90", "security": "31", "intent": "35", "tools": "33", "memory": "36", "llm": "34", "supervisor": "32", "meshward": "1"}
PR_SET_PDEATHSIG = 1
RESTART_BACKOFF_S = 0.2
MAX_BACKOFF_S = 5.0
CRASH_LOOP_LIMIT = 5
CRASH_LOOP_WINDOW_S = 60.0


class CrashLoop(RuntimeError):
    """A child kept crashing: more than CRASH_LOOP_LIMIT exits within CRASH_LOOP_WINDOW_S."""


@dataclass
class RestartPolicy:
    """Back-off and crash-loop limit of one supervised child."""

    backoff_s: float = RESTART_BACKOFF_S
    max_backoff_s: float = MAX_BACKOFF_S
    limit: int = CRASH_LOOP_LIMIT
    window_s: float = CRASH_LOOP_WINDOW_S
    crashes: deque[float] = field(default_factory=deque)

    def next_delay(self, now: float) -> float:
        """Record a crash at `now`; the delay before the restart, or CrashLoop."""
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > self.window_s:
            self.crashes.popleft()
        if len(self.crashes) > self.limit:
            raise CrashLoop(f"{len(self.crashes)} crashes within {self.window_s:.0f}s")
        return min(self.max_backoff_s, self.backoff_s * 2 ** (len(self.crashes) - 1))


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
        self.credentials: Credentials | None = None  # the closed bus: set when this stack starts its own nats-server
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.pumps: list[asyncio.Task] = []
        self.stopping = False
        self.restarts: dict[str, int] = {}

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
        env.setdefault("MESHWARD_API_KEYS_FILE", str(self.data_dir / "api-keys.json"))
        env.setdefault("MESHWARD_CHROMA_PATH", str(self.data_dir / "chroma"))
        # Five processes share the cores: a BLAS or ONNX thread pool per process would
        # oversubscribe them (measured: a MiniLM encode at 35 ms with one thread, 1.5 s with two under load).
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(var, "1")
        if self.credentials is not None:
            env.update(self.credentials.env(service))  # its own user and password file, no other
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
            # a fresh password per service on every start, in 0600 files; the server config holds bcrypt hashes
            self.credentials = await asyncio.to_thread(generate_credentials, self.data_dir / "credentials")
            self.nats = EmbeddedNats(self.data_dir / "nats", log_file=self.data_dir / "nats.log",
                                     authorization=self.credentials.authorization)
            self.nats_url = await asyncio.to_thread(self.nats.start)
            self.console.line("nats", f"embedded nats-server with JetStream at {self.nats_url} (data in {self.data_dir / 'nats'}); "
                                      f"closed bus: one user per service, credentials in {self.credentials.directory}")
        else:
            self.console.line("nats", f"using {self.nats_url}")
        for name in SERVICES:
            await self.spawn(name)

    async def spawn(self, name: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", f"meshward.{name}",
            env=self.env_for(name),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads are running at this point in the child
        )
        self.procs[name] = proc
        self.pumps = [p for p in self.pumps if not p.done()]
        self.pumps.append(asyncio.create_task(self._pump(name, proc.stdout)))
        self.console.line("meshward", f"started {name} (pid {proc.pid})")

    async def supervise(self) -> str:
        """Restart children that exit until stop(); returns the name of a child in a crash loop."""
        policies = {name: RestartPolicy() for name in (*SERVICES, "nats")}

        async def watch(name: str) -> None:
            while not self.stopping:
                if name == "nats":
                    assert self.nats is not None and self.nats.proc is not None
                    code = await asyncio.to_thread(self.nats.proc.wait)
                else:
                    code = await self.procs[name].wait()
                if self.stopping:
                    return
                delay = policies[name].next_delay(time.monotonic())  # CrashLoop ends the supervision
                self.restarts[name] = self.restarts.get(name, 0) + 1
                self.console.line("meshward", f"{name} exited with code {code}; restarting in {delay:.1f}s "
                                              f"(restart {self.restarts[name]})")
                await asyncio.sleep(delay)
                if self.stopping:
                    return
                if name == "nats":
                    assert self.nats is not None
                    await asyncio.to_thread(self.nats.start)  # same port, same JetStream store
                    self.console.line("nats", f"restarted at {self.nats_url}")
                else:
                    await self.spawn(name)

        names = [*SERVICES, *(["nats"] if self.nats is not None else [])]
        watchers = {asyncio.create_task(watch(n), name=f"watch-{n}"): n for n in names}
        try:
            while watchers:
                done, _ = await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    name = watchers.pop(task)
                    if not task.cancelled() and isinstance(task.exception(), CrashLoop):
                        self.console.line("meshward", f"{name} is crash-looping ({task.exception()}); giving up")
                        return name
                    if not task.cancelled() and task.exception() is not None:
                        raise task.exception()
            return ""
        finally:
            for task in watchers:
                task.cancel()

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
        waiter = asyncio.create_task(stack.supervise())
        stopper = asyncio.create_task(stop.wait())
        healthy = asyncio.create_task(stack.wait_healthy())
        done, _ = await asyncio.wait({healthy, stopper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if healthy in done and healthy.result():
            console.line("meshward", f"ready: http://127.0.0.1:{http_port}/ (web console)  (try: meshward ask \"Calculate 15 * 23 + 7\"; Ctrl-C stops)")
            done, _ = await asyncio.wait({stopper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        elif healthy in done:
            console.line("meshward", "the system did not become healthy; see the logs above. Stopping.")
            code = 1
        if waiter in done and not stop.is_set():
            console.line("meshward", f"{waiter.result()} keeps crashing; stopping everything")
            code = 1
        for t in (waiter, stopper, healthy):
            t.cancel()
    finally:
        console.line("meshward", "stopping")
        await stack.stop()
        console.line("meshward", "stopped")
    return code
