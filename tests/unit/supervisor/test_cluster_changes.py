"""'What changed since yesterday?': the window read from the question, the plan sent to memory (not to a tool),
the template answer listing the changes, and a math question the calculator cannot read going to the deep tier."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from meshward.contracts import ClusterChange, ClusterChangesReply, ErrorCode, ErrorReply, RemoteError
from meshward.supervisor.asker import Asker
from meshward.supervisor.clusters import CHANGES_CALL, changes_answer, window_hours
from meshward.supervisor.graph import DeepConfig, GraphBuilder
from meshward.supervisor.planner import plan

from tests.unit.supervisor.fakes import FakePorts, reply


@pytest.mark.parametrize(
    ("question", "hours"),
    [
        ("what changed since yesterday?", 24.0),
        ("what changed on lab in the last hour?", 1.0),
        ("what changed in the last 3 hours?", 3.0),
        ("any changes in the past 2 days?", 48.0),
        ("what changed in the last 30 minutes", 0.5),
        ("what happened overnight?", 16.0),
        ("what changed?", 24.0),
        ("what changed in the last 9999 days?", 24.0 * 31),
    ],
)
def test_window_read_from_the_question(question, hours):
    assert window_hours(question) == pytest.approx(hours)


def test_changes_plan_asks_memory_with_the_cluster_and_window():
    p = plan("cluster_changes", "what changed on lab in the last hour?", set())
    assert [(c.name, c.arguments) for c in p.calls] == [(CHANGES_CALL, {"since_hours": 1.0, "cluster": "lab"})]
    p = plan("cluster_changes", "what changed since yesterday?", set())
    assert [(c.name, c.arguments) for c in p.calls] == [(CHANGES_CALL, {"since_hours": 24.0})]


def _reply(**kw) -> ClusterChangesReply:
    return ClusterChangesReply(since=datetime(2026, 11, 23, 21, 0, tzinfo=UTC), **kw)


def test_answer_lists_changes_and_what_is_unhealthy_now():
    at = datetime(2026, 11, 24, 3, 15, tzinfo=UTC)
    text = changes_answer(_reply(
        changes=[ClusterChange(cluster="lab", occurred_at=at, kind="cluster_health", previous="healthy", state="degraded",
                               reasons=["node worker-2 not ready"]),
                 ClusterChange(cluster="edge", occurred_at=at + timedelta(hours=1), kind="cluster_audit", state="registered")],
        checks=12, latest={"lab": "degraded", "edge": "healthy"}).model_dump(mode="json"))
    assert text.startswith("2 changes since 2026-11-23 21:00 UTC; not healthy now: lab (degraded).")
    assert "- 2026-11-24 03:15 UTC lab went degraded (was healthy): node worker-2 not ready" in text
    assert "- 2026-11-24 04:15 UTC edge was registered" in text


def test_answer_without_changes_says_what_is_known_and_how_to_get_checks():
    assert changes_answer(_reply(changes=[], checks=0).model_dump(mode="json")).endswith(
        "Set MESHWARD_CLUSTER_HEALTH_INTERVAL_S to check the registered clusters periodically.")
    text = changes_answer(_reply(changes=[], checks=5, latest={"lab": "healthy"}).model_dump(mode="json"))
    assert text == "Nothing changed since 2026-11-23 21:00 UTC (5 health checks stored). Last known: lab healthy."


async def test_changes_question_is_answered_from_memory_in_the_fast_tier():
    at = datetime.now(UTC)
    changes = _reply(changes=[ClusterChange(cluster="lab", occurred_at=at, kind="cluster_health", previous="degraded", state="healthy")],
                     checks=3, latest={"lab": "healthy"})
    ports = FakePorts(intent="cluster_changes", tools=(), changes=changes)
    graph = GraphBuilder(ports, deep_config=DeepConfig()).build(checkpointer=InMemorySaver())
    r = await Asker(graph, ports, timeout_s=5, deep_timeout_s=10).ask("what changed since yesterday?")
    assert r.status == "answered" and r.tier == "fast", r
    assert "lab went healthy (was degraded)" in r.answer
    assert ports.tool_calls == [("memory.cluster_changes", {"since_hours": 24.0, "limit": 50})]
    assert ports.chat_requests == []


async def test_memory_down_is_an_error_answer_naming_it():
    ports = FakePorts(intent="cluster_changes", tools=(), fail="memory")
    graph = GraphBuilder(ports, deep_config=DeepConfig()).build(checkpointer=InMemorySaver())
    r = await Asker(graph, ports, timeout_s=5, deep_timeout_s=10).ask("what changed since yesterday?")
    assert r.status == "error" and "no service answers memory" in r.answer


class _NoCalculation(FakePorts):
    async def call_tool(self, name, arguments, idempotency_key=None, read_only=False):
        if name == "calculator":
            self.tool_calls.append((name, arguments))
            raise RemoteError(ErrorReply.of(ErrorCode.BAD_REQUEST, "No calculation found (unexpected word 'dozen'); try ..."))
        return await super().call_tool(name, arguments)


async def test_a_math_question_the_grammar_cannot_read_goes_to_the_deep_tier():
    ports = _NoCalculation(chat=[reply("Three dozen eggs are 36 eggs.")] * 3)  # validation may ask for refinements
    graph = GraphBuilder(ports, deep_config=DeepConfig()).build(checkpointer=InMemorySaver())
    r = await Asker(graph, ports, timeout_s=5, deep_timeout_s=10).ask("how many eggs are in three dozen")
    assert r.tier == "deep" and "no calculation" in r.tier_reason
    assert r.answer.startswith("Three dozen eggs are 36 eggs.") and ports.chat_requests
    assert r.route[:4] == ["security", "intent", "assess", "tools"] and "reason" in r.route


async def test_without_the_deep_tier_the_calculator_message_answers():
    ports = _NoCalculation()
    graph = GraphBuilder(ports, deep_config=DeepConfig(enabled=False)).build(checkpointer=InMemorySaver())
    r = await Asker(graph, ports, timeout_s=5, deep_timeout_s=10).ask("how many eggs are in three dozen")
    assert r.tier == "fast" and r.answer.startswith("I couldn't calculate that: No calculation found")


async def test_a_math_error_is_not_sent_to_the_deep_tier():
    ports = FakePorts(tool_error="bad_request")
    graph = GraphBuilder(ports, deep_config=DeepConfig()).build(checkpointer=InMemorySaver())
    r = await Asker(graph, ports, timeout_s=5, deep_timeout_s=10).ask("what is 2 ** 99999999")
    assert r.tier == "fast" and ports.chat_requests == []
