"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis) against the whole system
over real HTTP: no 5xx, every status code the document declares, responses that match their schemas."""
from __future__ import annotations

import asyncio

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
)

pytestmark = pytest.mark.e2e
# The Agent Protocol routes read their bodies as the langgraph-sdk sends them (the document does not describe
# those bodies, and their 422s can carry either error shape): for them only the status checks apply (no 5xx,
# every status declared); their behaviour is tested with the SDK itself (test_agent_protocol*.py).
SCHEMA_CHECKED = ("/v1/", "/healthz")
STATUS_ONLY = [response_schema_conformance, positive_data_acceptance, negative_data_rejection]


# Above the system's own deadline for a question (MESHWARD_DEEP_TIMEOUT_S in conftest.py): a generated question that
# reaches the deep tier on a loaded 2-core machine is slow, and timing it out is the system's job (a typed 504), not
# the client's; the fuzz checks statuses and schemas, never wall-clock time.
CLIENT_TIMEOUT_S = 330


def checker(operation, url: str, excluded: list):
    @given(case=operation.as_strategy())
    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
    def check(case):
        case.call_and_validate(base_url=url, timeout=CLIENT_TIMEOUT_S, excluded_checks=excluded)

    return check


def fuzz(url: str) -> tuple[int, dict[str, str]]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    failures: dict[str, str] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        try:
            checker(operation, url, [] if operation.path.startswith(SCHEMA_CHECKED) else STATUS_ONLY)()
        except (Exception, BaseExceptionGroup) as e:  # noqa: BLE001 - reported together below
            # a group (hypothesis' flaky-failure report among them) says little by itself: name what it holds
            inner = "; ".join(f"{type(x).__name__}: {x}" for x in getattr(e, "exceptions", ()))
            failures[operation.label] = f"{e}{f' [{inner}]' if inner else ''}"[:3_000]
    return operations, failures


async def test_the_api_answers_generated_requests_as_documented(system):
    operations, failures = await asyncio.to_thread(fuzz, system["url"])
    assert operations >= 25  # every /v1 route, /healthz and the Agent Protocol's
    assert not failures, "\n\n".join(f"{k}: {v}" for k, v in failures.items())


async def test_405_answers_carry_allow(http):
    r = await http.put("/v1/ask")
    assert r.status_code == 405 and "POST" in r.headers["allow"]
    r = await http.post("/healthz")
    assert r.status_code == 405 and "GET" in r.headers["allow"]
