"""The container suite (`make test-containers`, marker `containers`): the images `make images` built, run on the
local Docker engine, on their own network; only the supervisor's port is published, on 127.0.0.1.

It never pulls: every image is meshward/*:$MESHWARD_IMAGE_TAG (default local). It drives the Docker SDK
directly rather than testcontainers: testcontainers publishes ports on every interface and starts its Ryuk
reaper from a registry image, and here ports go on 127.0.0.1 only and nothing may be pulled. Where dockerd is installed but
not running it is started (as root); the suite skips only where no engine can run at all.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid

import httpx
import pytest

TAG = os.environ.get("MESHWARD_IMAGE_TAG", "local")
API_KEY = "suite-" + os.urandom(24).hex()
AUTH = {"X-Api-Key": API_KEY}
SERVICES = ("security", "intent", "tools", "memory")


def _client():
    import docker

    return docker.from_env(timeout=120)


def _engine():
    try:
        client = _client()
        client.ping()
        return client
    except Exception:  # noqa: BLE001 - any failure: no engine answers yet
        pass
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        pytest.skip("no Docker engine answers and none can be started here (dockerd not installed, or not root)")
    log = open(os.path.join(tempfile.gettempdir(), "meshward-dockerd.log"), "ab")  # noqa: SIM115 - lives with dockerd
    subprocess.Popen([dockerd], stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            client = _client()
            client.ping()
            return client
        except Exception:  # noqa: BLE001
            time.sleep(0.5)
    pytest.fail(f"dockerd started but did not answer within 60 s; see {log.name}")


def wait_until(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


class Stack:
    """NATS, every service and the supervisor as containers on one network."""

    def __init__(self, client):
        self.client = client
        self.name = f"meshward-test-{uuid.uuid4().hex[:8]}"
        self.network = client.networks.create(self.name)
        self.containers = []
        self.url = ""

    def image(self, service: str) -> str:
        name = f"meshward/{service}:{TAG}"
        try:
            self.client.images.get(name)
        except Exception:  # noqa: BLE001
            pytest.fail(f"image {name} is missing: run `make images` first (make test-containers does)")
        return name

    def run(self, service: str, alias: str | None = None, **kwargs):
        env = {"MESHWARD_NATS_URL": "nats://nats:4222", "MESHWARD_LOG_LEVEL": "INFO", "MESHWARD_SECURITY_KNOWN_THREATS": "true"}
        env.update(kwargs.pop("environment", {}))
        container = self.client.containers.run(
            self.image(service), detach=True, name=f"{self.name}-{alias or service}-{len(self.containers)}",
            network=self.network.name, environment=env, security_opt=["no-new-privileges:true"], cap_drop=["ALL"],
            **kwargs,
        )
        self.network.disconnect(container)
        self.network.connect(container, aliases=[alias or service])
        self.containers.append(container)
        return container

    def healthy(self, container) -> bool:
        container.reload()
        return container.attrs["State"].get("Health", {}).get("Status") == "healthy"

    def logs(self) -> str:
        out = []
        for c in self.containers:
            try:
                out.append(f"--- {c.name}\n" + c.logs(tail=30).decode(errors="replace"))
            except Exception:  # noqa: BLE001
                pass
        return "\n".join(out)

    def close(self):
        for c in self.containers:
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001
                pass
        try:
            self.network.remove()
        except Exception:  # noqa: BLE001
            pass


@pytest.fixture(scope="session")
def stack():
    client = _engine()
    s = Stack(client)
    try:
        s.nats = s.run("nats", command=["-c", "/etc/nats/nats.conf"])
        for service in SERVICES:
            s.run(service)
        s.extra_tools = s.run("tools", alias="tools")  # a second replica in the same queue group
        # it listens on 0.0.0.0 in its container: it needs keys (the suite's one is sent by every request below)
        sup = s.run("supervisor", ports={"8080/tcp": ("127.0.0.1", None)}, environment={"MESHWARD_API_KEYS": f"suite={API_KEY}"})
        sup.reload()
        port = sup.attrs["NetworkSettings"]["Ports"]["8080/tcp"][0]["HostPort"]
        s.url = f"http://127.0.0.1:{port}"
        wait_until(lambda: httpx.get(f"{s.url}/healthz", timeout=5).status_code == 200, 180, "every service healthy")
        yield s
    except BaseException:
        print(s.logs())
        raise
    finally:
        s.close()


def pytest_collection_modifyitems(config, items):
    """The suite runs only when asked for by marker (`make test-containers`: -m containers), never as a side
    effect of a plain or narrowed `make test` on a machine where an engine happens to run."""
    if "containers" in (config.option.markexpr or "") and "not containers" not in config.option.markexpr:
        return
    skip = pytest.mark.skip(reason="container suite: run `make test-containers` (builds the images first)")
    for item in items:
        if item.get_closest_marker("containers"):
            item.add_marker(skip)
