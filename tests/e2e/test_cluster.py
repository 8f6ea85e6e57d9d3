"""Clusters end to end through the launcher: register a loopback Kubernetes API server by question (writes
allowed in this stack), ask for its health and version, and find the token in no answer, history, log line,
exported span or memory row; the MCP door refuses registration."""
from __future__ import annotations

import asyncio
import sqlite3

import pytest
from mcp import Client

from tests.fake_kube import FakeKube, degrade, healthy_cluster

pytestmark = pytest.mark.e2e

TOKEN = "e2e-kube-token-7fQ2xLm9"


async def ask(http, question, **extra):
    r = await http.post("/v1/ask", json={"question": question, **extra})
    assert r.status_code == 200, r.text
    return r.json()


async def eventually(probe, timeout=20.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await probe()
        if value or loop.time() > deadline:
            return value
        await asyncio.sleep(0.2)


async def test_register_then_health_and_version_from_a_loopback_api_server(http, system, otlp):
    with FakeKube(token=TOKEN, cluster=degrade(healthy_cluster())) as kube:
        r = await ask(http, f"register the cluster lab at {kube.url} with token {TOKEN}")
        assert r["intent"] == "cluster_register" and r["status"] == "answered", r
        assert r["answer"].startswith("Registered cluster lab") and "v1.29.2" in r["answer"]
        thread = r["thread_id"]

        h = await ask(http, "is lab healthy?", thread_id=thread)
        assert h["intent"] == "cluster_health" and h["tools_used"] == ["cluster_health"], h
        lines = h["answer"].splitlines()
        assert lines[0] == "lab is DEGRADED:" and "w-2" in lines[1] and "CrashLoopBackOff" in h["answer"]

        v = await ask(http, "what version is lab running?", thread_id=thread)
        assert v["intent"] == "cluster_info" and v["answer"].startswith("lab runs Kubernetes v1.29.2"), v

        unknown = await ask(http, "is prod-eu healthy?", thread_id=thread)
        assert "registered clusters: lab" in unknown["answer"]
        assert all(method == "GET" for method, _, _ in kube.requests)

    async def history():
        turns = (await http.get(f"/v1/threads/{thread}/history")).json().get("turns", [])
        return turns if len(turns) >= 4 else None

    turns = await eventually(history)
    assert turns and "[redacted]" in turns[0]["question"]

    def memory_rows():
        with sqlite3.connect(system["data_dir"] / "memory.db") as conn:
            return conn.execute("SELECT kind, cluster, state, detail FROM cluster_events ORDER BY id").fetchall()

    async def audit():
        rows = memory_rows()
        return rows if any(r[0] == "cluster_audit" for r in rows) and any(r[0] == "cluster_health" for r in rows) else None

    rows = await eventually(audit)
    assert rows and ("cluster_audit", "lab", "registered") in [r[:3] for r in rows]

    # the token is nowhere: answers, history, memory rows, the tools database, logs, exported spans
    blobs = [str(x) for x in (r, h, v, turns, rows)]
    blobs.append(system["log"].read_text(errors="replace"))
    blobs.append((system["data_dir"] / "tools.db").read_bytes().decode("latin-1"))
    blobs.append((system["data_dir"] / "memory.db").read_bytes().decode("latin-1"))
    assert all(TOKEN not in b for b in blobs)
    assert otlp.payloads and all(TOKEN.encode() not in p for p in otlp.payloads)


async def test_periodic_health_checks_reach_memory_and_answer_what_changed(http, system):
    """The tools service's periodic check (MESHWARD_CLUSTER_HEALTH_INTERVAL_S, 1 s in this stack) publishes health
    events; memory stores them; "what changed on orion in the last hour?" is answered from them."""
    with FakeKube(token=TOKEN, cluster=healthy_cluster()) as kube:
        r = await ask(http, f"register the cluster orion at {kube.url} with token {TOKEN}")
        assert r["status"] == "answered" and r["answer"].startswith("Registered cluster orion"), r

        def scheduled(verdict):
            with sqlite3.connect(system["data_dir"] / "memory.db") as conn:
                rows = conn.execute("SELECT state, detail FROM cluster_events WHERE kind = 'cluster_health' AND cluster = 'orion'").fetchall()
            return [row for row in rows if row[0] == verdict and '"scheduled"' in row[1]]

        async def healthy_stored():
            return scheduled("healthy")

        assert await eventually(healthy_stored), "no scheduled health event of orion reached memory"
        kube.cluster = degrade(healthy_cluster())  # a node goes NotReady, a pod crash-loops

        async def degraded_answer():
            c = await ask(http, "what changed on orion in the last hour?")
            return c if "orion went degraded (was healthy)" in c["answer"] else None

        c = await eventually(degraded_answer, timeout=30)
        assert c, "the degradation never showed up in the answer"
    assert c["intent"] == "cluster_changes" and c["tier"] == "fast" and c["tools_used"] == ["memory.cluster_changes"], c
    assert scheduled("degraded") and "w-2" in c["answer"] and c["answer"].startswith(("1 change", "2 changes", "3 changes")), c["answer"]
    assert TOKEN not in str(c)

    # the fake API server is gone: the next scheduled round finds orion unreachable, and that is a change too
    async def unreachable_answer():
        u = await ask(http, "what changed since yesterday?")
        return u if "orion went unreachable (was degraded)" in u["answer"] else None

    u = await eventually(unreachable_answer, timeout=30)
    assert u and "not healthy now:" in u["answer"] and "orion (unreachable)" in u["answer"], u


async def test_mcp_refuses_cluster_writes(system):
    async with Client(system["mcp_url"]) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"cluster_register", "cluster_list", "cluster_info", "cluster_health", "cluster_remove"} <= names
        refused = await client.call_tool("cluster_register", {"name": "x", "api_url": "https://127.0.0.1:6443", "token": "abcdefgh12"})
        assert refused.is_error and refused.content[0].text.startswith("refused: ")
        listed = await client.call_tool("cluster_list", {})
        assert not listed.is_error
