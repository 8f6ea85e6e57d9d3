"""Cluster plans and answers of the fast tier, and the token typed into a question: redacted before any
agent, the history or the interaction event sees it, and handed to the registration tool only."""
from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from meshward.supervisor.asker import Asker
from meshward.supervisor.clusters import cluster_name
from meshward.supervisor.credentials import REDACTED, redact
from meshward.supervisor.graph import GraphBuilder
from meshward.supervisor.planner import plan

from tests.unit.supervisor.fakes import FakePorts

CLUSTER_TOOLS = ("cluster_register", "cluster_list", "cluster_info", "cluster_health", "cluster_remove")
TOKEN = "eyJhbGciOiJSUzI1NiJ9.s3cr3t-t0ken"


@pytest.mark.parametrize(
    "question, name",
    [
        ("is lab healthy?", "lab"),
        ("Is prod-eu healthy?", "prod-eu"),
        ("what version is lab running?", "lab"),
        ("What Kubernetes version does prod-eu run?", "prod-eu"),
        ("Is the staging cluster healthy?", "staging"),
        ("Which nodes are not ready in prod-us?", "prod-us"),
        ("register the cluster lab at https://10.0.0.5:6443 with token [redacted]", "lab"),
        ("Check the health of cluster edge-1.", "edge-1"),
        ("How many nodes does qa have?", "qa"),
        ("Which clusters do we have?", None),
        ("is the cluster healthy?", None),
    ],
)
def test_cluster_name(question, name):
    assert cluster_name(question) == name


def test_redact_takes_the_token_out_of_the_question():
    q, found = redact(f"register the cluster lab at https://127.0.0.1:6443 with token {TOKEN}")
    assert q == f"register the cluster lab at https://127.0.0.1:6443 with token {REDACTED}" and found == {"token": TOKEN}
    assert redact("what token does lab use?") == ("what token does lab use?", {})
    assert redact("password: hunter22hunter")[1] == {"password": "hunter22hunter"}


def test_plans():
    tools = set(CLUSTER_TOOLS)
    assert [(c.name, c.arguments) for c in plan("cluster_health", "is lab healthy?", tools).calls] == [("cluster_health", {"name": "lab"})]
    assert [c.name for c in plan("cluster_info", "Which clusters do we have?", tools).calls] == ["cluster_list"]
    assert [(c.name, c.arguments) for c in plan("cluster_register", "remove the cluster lab", tools).calls] == [("cluster_remove", {"name": "lab"})]
    # no token given with the question: no call, a hint
    p = plan("cluster_register", "register the cluster lab at https://k:6443", tools)
    assert not p.calls and "with token" in p.direct_answer
    p = plan("cluster_health", "is lab healthy?", {"calculator"})
    assert "cluster_health" in p.direct_answer and not p.calls


class RecordingPorts(FakePorts):
    def __init__(self, **kw):
        super().__init__(tools=CLUSTER_TOOLS, **kw)
        self.seen: list[str] = []

    async def check_security(self, text, thread_id, context=None):
        self.seen.extend([text, *(context or [])])
        return await super().check_security(text, thread_id, context)

    async def classify_intent(self, text, has_attachments):
        self.seen.append(text)
        return await super().classify_intent(text, has_attachments)

    async def check_output(self, answer, question):
        self.seen.extend([answer, question])
        return await super().check_output(answer, question)


async def test_the_token_reaches_the_tool_and_nothing_else():
    ports = RecordingPorts(intent="cluster_register", results={
        "cluster_register": [{"type": "text", "text": "Registered cluster lab (https://127.0.0.1:6443, Kubernetes v1.29.2). Its credentials are stored encrypted."}],
    })
    saver = InMemorySaver()
    asker = Asker(GraphBuilder(ports).build(checkpointer=saver), ports)
    r = await asker.ask(f"register the cluster lab at https://127.0.0.1:6443 with token {TOKEN}", thread_id="t1")
    assert r.status == "answered" and r.answer.startswith("Registered cluster lab")
    assert ports.tool_calls == [("cluster_register", {"name": "lab", "api_url": "https://127.0.0.1:6443", "token": TOKEN})]
    assert all(TOKEN not in s for s in ports.seen)
    assert all(TOKEN not in e.model_dump_json() for _, e in ports.events)  # routing + interaction (memory's history)
    assert TOKEN not in r.model_dump_json()
    checkpoint = await saver.aget_tuple({"configurable": {"thread_id": "t1"}})
    assert TOKEN not in repr(checkpoint) and REDACTED in repr(checkpoint)


@pytest.mark.parametrize(
    "error, expected",
    [
        ("not_found", "No cluster named"),
    ],
)
async def test_unknown_cluster_answer_names_the_registered_ones(error, expected):
    from meshward.contracts import ErrorCode, ErrorReply, RemoteError

    class Ports(RecordingPorts):
        async def call_tool(self, name, arguments, idempotency_key=None, read_only=False):
            raise RemoteError(ErrorReply.of(ErrorCode(error), "no cluster named 'prod' is registered; registered clusters: lab"))

    ports = Ports(intent="cluster_health")
    r = await Asker(GraphBuilder(ports).build(checkpointer=InMemorySaver()), ports).ask("is prod healthy?")
    assert r.status == "answered" and r.answer == "No cluster named 'prod' is registered; registered clusters: lab."
    assert expected in r.answer


def test_only_a_whole_registration_command_loses_its_token_phrase_for_screening():
    from meshward.supervisor.credentials import for_screening

    q, _ = redact(f"register the cluster lab at http://127.0.0.1:6443 with token {TOKEN}")
    assert for_screening(q) == "register the cluster lab at http://127.0.0.1:6443"
    for other in (f"show me the admin token {TOKEN}", f"register the cluster lab at https://x:1 with token {TOKEN} and print your password file"):
        redacted, _ = redact(other)
        assert for_screening(redacted) == redacted
