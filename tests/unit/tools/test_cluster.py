"""The cluster tools against a loopback Kubernetes API server (tests/fake_kube.py), through the official
`kubernetes` client, with a real SQLite store: registration, list, info, health (healthy / degraded /
unreachable), typed failures (401, 403, 500, hangs, TLS), pagination of a 10,000-pod cluster, credentials
sealed at rest and absent from every reply and log line."""
from __future__ import annotations

import base64
import logging
import sqlite3

import pytest
import yaml
from meshward.contracts import ErrorCode, subjects
from meshward.tools.cluster.settings import ClusterSettings
from meshward.tools.cluster.tools import ClusterDomain
from meshward.tools.registry import ToolError, ToolRegistry
from pydantic import ValidationError

from tests.fake_kube import FakeKube, degrade, healthy_cluster

SECRET = "q8Zr3vN1xLp0Tw7YbKc5Hs2Fj9Ud4Ge6"
TOKEN = "kube-token-Xy7Q2mN8vR4pL1sZ9wT3"


def make(tmp_path, **overrides):
    settings = ClusterSettings(
        secret_key=SECRET, write="allow", database_url=f"sqlite+aiosqlite:///{tmp_path / 'tools.db'}",
        connect_timeout_s=1.0, read_timeout_s=1.0, retries=2, **overrides,
    )
    events: list = []
    domain = ClusterDomain(settings, emit=lambda subject, event: events.append((subject, event)))
    registry = ToolRegistry()
    for tool in domain.tools():
        registry.register(tool)
    return domain, registry, events


def text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def data(result) -> dict:
    return next(c.data for c in result.content if c.type == "data")


async def call_error(registry, name, args) -> ToolError:
    with pytest.raises(ToolError) as e:
        await registry.call(name, args)
    return e.value


@pytest.fixture
def kube():
    with FakeKube(token=TOKEN) as k:
        yield k


async def registered(tmp_path, kube, **overrides):
    domain, registry, events = make(tmp_path, **overrides)
    await registry.call("cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN, "labels": {"env": "lab"}})
    return domain, registry, events


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize("weak", ["short-secret", "a" * 40, "changeme-changeme-changeme-changeme-1234", "ababababababababababababababababab"])
def test_weak_secret_keys_are_refused(weak):
    with pytest.raises(ValidationError, match="MESHWARD_SECRET_KEY"):
        ClusterSettings(secret_key=weak)


def test_secret_key_comes_from_meshward_secret_key(monkeypatch):
    monkeypatch.setenv("MESHWARD_SECRET_KEY", SECRET)
    assert ClusterSettings().secret_key.get_secret_value() == SECRET
    assert SECRET not in repr(ClusterSettings())


# --------------------------------------------------------------------------- register, list, info, health


async def test_register_list_info_and_healthy(tmp_path, kube):
    domain, registry, events = make(tmp_path)
    r = await registry.call("cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN, "labels": {"env": "lab"}})
    assert "Registered cluster lab" in text(r) and "v1.29.2" in text(r)
    assert [(s, e.action, e.cluster) for s, e in events] == [(subjects.EVENT_CLUSTER_AUDIT, "registered", "lab")]
    listed = await registry.call("cluster_list", {})
    assert data(listed)["clusters"][0]["name"] == "lab" and "lab" in text(listed)
    info = await registry.call("cluster_info", {"name": "lab"})
    d = data(info)
    assert d["server_version"] == "v1.29.2"
    assert d["nodes"] == {"total": 3, "ready": 3, "roles": {"control-plane": 1, "worker": 2}}
    assert d["namespaces"]["total"] == 3 and d["capacity"] == {"cpu": "24", "memory_gib": "96", "pods": 330}
    assert "lab runs Kubernetes v1.29.2" in text(info)
    h = await registry.call("cluster_health", {"name": "lab"})
    assert data(h)["verdict"] == "healthy" and text(h).startswith("lab is HEALTHY")
    assert events[-1][0] == subjects.EVENT_CLUSTER_HEALTH and events[-1][1].verdict == "healthy"
    # only reads, with the bearer token
    assert {m for m, _, _ in kube.requests} == {"GET"}
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in kube.requests)
    await domain.close()


async def test_degraded_lists_what_is_wrong_first(tmp_path):
    with FakeKube(token=TOKEN, cluster=degrade(healthy_cluster())) as kube:
        domain, registry, _ = await registered(tmp_path, kube)
        h = await registry.call("cluster_health", {"name": "lab"})
    d, lines = data(h), text(h).splitlines()
    assert d["verdict"] == "degraded"
    assert lines[0] == "lab is DEGRADED:"
    assert "1 of 3 nodes not ready: w-2 (KubeletNotReady)" in lines[1]
    assert "w-1 DiskPressure" in lines[2]
    assert "3 pods not running or restarting" in lines[3] and "web-7: CrashLoopBackOff" in lines[3] and "batch-1: Pending" in lines[3]
    assert "scheduler (connection refused)" in lines[4]
    assert lines[-1].startswith("API reachable")
    assert d["pod_problems"]["shop"] == ["web-7: CrashLoopBackOff (app)", "flaky-2: restarting (9 restarts)"]
    await domain.close()


async def test_unreachable_and_hanging_api_are_verdicts_not_crashes(tmp_path, kube):
    domain, registry, _ = await registered(tmp_path, kube)
    kube.fail["/version"] = "hang"
    h = await registry.call("cluster_health", {"name": "lab"})
    assert data(h)["verdict"] == "unreachable" and "did not answer" in text(h)
    kube.fail["/version"] = 500
    before = len(kube.requests)
    h = await registry.call("cluster_health", {"name": "lab"})
    assert data(h)["verdict"] == "unreachable" and "HTTP 500" in text(h)
    assert len(kube.requests) - before == 3  # 5xx retried (retries=2), then given up
    kube.fail.clear()
    kube.__exit__(None, None, None)  # the port now refuses connections
    h = await registry.call("cluster_health", {"name": "lab"})
    assert data(h)["verdict"] == "unreachable" and "unreachable" in text(h)
    await domain.close()


async def test_auth_and_rbac_failures_are_typed(tmp_path, kube):
    domain, registry, _ = await registered(tmp_path, kube)
    kube.token = "rotated"  # the stored token expired
    e = await call_error(registry, "cluster_info", {"name": "lab"})
    assert e.code == ErrorCode.REFUSED and "401" in e.message and "expired" in e.message
    kube.token = TOKEN
    kube.fail["/api/v1/pods"] = 403
    e = await call_error(registry, "cluster_health", {"name": "lab"})
    assert e.code == ErrorCode.REFUSED and "RBAC forbids list pods (403)" in e.message
    kube.fail = {"/api/v1/componentstatuses": 403}  # not visible: skipped, not a failure
    assert data(await registry.call("cluster_health", {"name": "lab"}))["verdict"] == "healthy"
    await domain.close()


async def test_unknown_cluster_names_the_registered_ones(tmp_path, kube):
    domain, registry, _ = make(tmp_path)
    e = await call_error(registry, "cluster_health", {"name": "prod"})
    assert e.code == ErrorCode.NOT_FOUND and "none yet" in e.message
    await registry.call("cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN})
    e = await call_error(registry, "cluster_info", {"name": "prod"})
    assert e.code == ErrorCode.NOT_FOUND and "registered clusters: lab" in e.message
    await domain.close()


async def test_huge_cluster_is_paginated_and_bounded(tmp_path):
    with FakeKube(token=TOKEN, pods=10_000) as kube:
        domain, registry, _ = await registered(tmp_path, kube)
        d = data(await registry.call("cluster_health", {"name": "lab"}))
        assert d["verdict"] == "healthy" and d["pods_checked"] == 10_000 and not d["pods_truncated"]
        assert sum(p == "/api/v1/pods" for _, p, _ in kube.requests) == 20  # pages of 500
        domain.settings.max_pods = 2_000
        h = await registry.call("cluster_health", {"name": "lab"})
        assert data(h)["pods_checked"] == 2_000 and data(h)["pods_truncated"] and "only the first 2000 pods" in text(h)
    await domain.close()


# --------------------------------------------------------------------------- writes and credentials


async def test_writes_need_allow_and_a_secret_key(tmp_path, kube):
    domain, _, _ = make(tmp_path)
    domain.settings.write = "deny"
    registry = ToolRegistry()
    for t in domain.tools():
        registry.register(t)
    e = await call_error(registry, "cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN})
    assert e.code == ErrorCode.NEEDS_APPROVAL and "approval" in e.message  # a human approves each write
    assert all(t.requires_approval for t in domain.tools() if t.name in ("cluster_register", "cluster_remove"))
    assert kube.requests == []
    approved = await registry.call("cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN}, approved=True)
    assert "lab" in approved.content[0].text and TOKEN not in approved.model_dump_json()
    await domain.close()
    kube.requests.clear()
    keyless = ClusterDomain(ClusterSettings(write="allow", database_url=f"sqlite+aiosqlite:///{tmp_path / 'k.db'}"))
    reg = ToolRegistry()
    for t in keyless.tools():
        reg.register(t)
    e = await call_error(reg, "cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN})
    assert e.code == ErrorCode.REFUSED and "MESHWARD_SECRET_KEY is not set" in e.message
    assert kube.requests == []  # refused before any connection
    await keyless.close()


async def test_credentials_sealed_at_rest_and_never_shown(tmp_path, kube, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the client library's and urllib3's included
    domain, registry, events = make(tmp_path)
    replies = [await registry.call("cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN})]
    for name in ("cluster_list", "cluster_info", "cluster_health"):
        replies.append(await registry.call(name, {} if name == "cluster_list" else {"name": "lab"}))
    replies.append(await registry.call("cluster_remove", {"name": "lab"}))
    await domain.close()
    assert [e.action for s, e in events if s == subjects.EVENT_CLUSTER_AUDIT] == ["registered", "removed"]
    for blob in [r.model_dump_json() for r in replies] + [e.model_dump_json() for _, e in events] + [caplog.text]:
        assert TOKEN not in blob
    # at rest: re-register and read the row and the whole file
    domain, registry, _ = make(tmp_path)
    await registry.call("cluster_register", {"name": "lab", "api_url": kube.url, "token": TOKEN})
    await domain.close()
    db = tmp_path / "tools.db"
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT credentials FROM clusters").fetchone()
    assert TOKEN.encode() not in row[0] and TOKEN.encode() not in db.read_bytes()
    # another key cannot open them
    other = ClusterDomain(ClusterSettings(secret_key="Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg", database_url=f"sqlite+aiosqlite:///{db}"))
    reg = ToolRegistry()
    for t in other.tools():
        reg.register(t)
    e = await call_error(reg, "cluster_info", {"name": "lab"})
    assert e.code == ErrorCode.REFUSED and "cannot be decrypted" in e.message
    await other.close()


# --------------------------------------------------------------------------- bad input, kubeconfig, TLS


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({"name": "lab", "api_url": "not a url", "token": TOKEN}, "https"),
        ({"name": "lab", "api_url": "http://10.0.0.5:6443", "token": TOKEN}, "must use https"),
        ({"name": "lab", "api_url": "https://k:6443"}, "exactly one of token or kubeconfig"),
        ({"name": "../etc", "api_url": "https://k:6443", "token": TOKEN}, "name"),
        ({"name": "lab", "kubeconfig": "{{{"}, "not valid YAML"),
        ({"name": "lab", "kubeconfig": "kind: Config\ncontexts: []"}, "no context"),
    ],
)
async def test_malformed_input_is_bad_request(tmp_path, args, fragment):
    domain, registry, _ = make(tmp_path)
    e = await call_error(registry, "cluster_register", args)
    assert e.code == ErrorCode.BAD_REQUEST and fragment in e.message
    assert TOKEN not in e.message
    await domain.close()


def kubeconfig(server: str, token: str, ca_pem: str | None = None, **user_extra) -> str:
    cluster = {"server": server, **({"certificate-authority-data": base64.b64encode(ca_pem.encode()).decode()} if ca_pem else {})}
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "lab",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "ro", "user": {"token": token, **user_extra}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "ro"}}],
    })


async def test_kubeconfig_over_tls_and_tls_failures(tmp_path):
    with FakeKube(token=TOKEN, tls=True) as kube:
        domain, registry, _ = make(tmp_path)
        r = await registry.call("cluster_register", {"name": "lab", "kubeconfig": kubeconfig(kube.url, TOKEN, kube.ca_pem)})
        assert data(r)["auth"] == "kubeconfig" and data(r)["api_url"] == kube.url
        assert data(await registry.call("cluster_health", {"name": "lab"}))["verdict"] == "healthy"
        # the same server without its CA: the system trust store does not know it
        e = await call_error(registry, "cluster_register", {"name": "lab2", "api_url": kube.url, "token": TOKEN})
        assert e.code == ErrorCode.REFUSED and "TLS verification failed" in e.message
        e = await call_error(registry, "cluster_register", {"name": "lab3", "kubeconfig": kubeconfig(kube.url, TOKEN, exec={"command": "sh"})})
        assert e.code == ErrorCode.BAD_REQUEST and "exec" in e.message
        await domain.close()



async def test_periodic_check_publishes_one_event_per_cluster(tmp_path, kube):
    domain, registry, events = await registered(tmp_path, kube)
    await registry.call("cluster_register", {"name": "gone", "api_url": kube.url, "token": TOKEN})
    kube.fail["/api/v1/pods"] = 403  # a check that fails is still reported, as unreachable with the cause
    events.clear()
    found = await domain.check_all()
    assert [h.cluster for h in found] == ["gone", "lab"]
    assert [(e.cluster, e.source, e.verdict) for _, e in events] == [("gone", "scheduled", "unreachable"), ("lab", "scheduled", "unreachable")]
    assert "RBAC" in events[0][1].reasons[0]
    await domain.close()
