"""docker-compose.yml and its GPU override parse against the Compose specification (strict: unknown keys fail)
after the same ${VAR:-default} interpolation docker compose applies, and say what the deployment needs."""
from __future__ import annotations

import json
import re

import pytest
import yaml
from compose_spec import PyCompose

from .conftest import ROOT

_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def load(name: str) -> dict:
    text = _VAR.sub(lambda m: m.group(2) or "", (ROOT / name).read_text())
    data = yaml.safe_load(text)  # resolves the YAML merge keys (<<) that the spec parser does not
    compose = PyCompose.from_json(json.dumps(data))
    compose.validate()
    return data


@pytest.fixture(scope="module")
def compose() -> dict:
    return load("docker-compose.yml")


def test_the_spec_parser_rejects_an_unknown_key():
    with pytest.raises(ValueError):
        PyCompose.from_json(json.dumps({"services": {"a": {"image": "x", "prots": ["80"]}}}))


def test_every_service_nats_and_postgres_are_there(compose):
    services = {p.name for p in (ROOT / "services").iterdir() if (p / "pyproject.toml").exists()}
    assert services | {"nats", "postgres", "llm"} <= set(compose["services"])


def test_ports_are_published_on_loopback_only(compose):
    for name, svc in compose["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_meshward_services_run_non_root_read_only_with_nats_config(compose):
    for name, svc in compose["services"].items():
        if not svc["image"].startswith("meshward/") or name == "nats":
            continue
        assert svc["user"] == "10001:10001" and svc["read_only"] is True, name
        assert svc["environment"]["MESHWARD_NATS_URL"] == "nats://nats:4222", name
        assert svc["environment"]["MESHWARD_METRICS_PORT"] == "9464", name
    nats = compose["services"]["nats"]
    assert {c["source"] for c in nats["configs"]} == {"nats_config", "nats_auth"}
    assert "jetstream" in (ROOT / compose["configs"]["nats_config"]["file"]).read_text()


def test_observability_profile_scrapes_every_service(compose):
    profiled = {n for n, s in compose["services"].items() if "observability" in s.get("profiles", [])}
    assert profiled == {"otel-collector", "jaeger", "prometheus"}
    scrape = yaml.safe_load((ROOT / compose["configs"]["prometheus_config"]["file"]).read_text())
    targets = {t.split(":")[0] for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
    assert targets == {"supervisor", "security", "intent", "tools", "memory"}


def test_gpu_override_reserves_a_gpu_for_classifiers_and_llm():
    gpu = load("docker-compose.gpu.yml")
    assert set(gpu["services"]) == {"security", "intent", "llm"}
    for name, svc in gpu["services"].items():
        devices = svc["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"], name
        assert svc["image"].startswith(f"meshward/{name}-gpu:"), name
    # each service is told to use the GPU by the setting it reads
    assert gpu["services"]["security"]["environment"] == gpu["services"]["intent"]["environment"] == {
        "MESHWARD_CLASSIFIER_DEVICE": "cuda"}
    assert gpu["services"]["llm"]["environment"] == {"MESHWARD_LLM_DEVICE": "cuda"}


def test_closed_bus_override_mounts_only_each_services_own_password(compose):
    closed = load("docker-compose.closed-bus.yml")
    assert set(closed["services"]) == {"supervisor", "security", "intent", "tools", "memory", "llm"}
    for name, svc in closed["services"].items():
        assert svc["secrets"] == [f"nats_password_{name}"]
        assert svc["environment"]["MESHWARD_NATS_USER"] == name
        assert closed["secrets"][f"nats_password_{name}"]["file"].endswith(f"/{name}.password")
    assert closed["configs"]["nats_auth"]["file"].endswith("/auth.conf")
