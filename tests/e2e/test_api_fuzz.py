"""Property-based fuzzing of the HTTP API from its own OpenAPI document (schemathesis) against the whole system
over real HTTP: no 5xx, every status code the document declares, responses that match their schemas."""
from __future__ import annotations

import asyncio

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

pytestmark = pytest.mark.e2e
# The /v1 API, the probes and the console. The Agent Protocol routes have their own SDK tests
# (tests/e2e/test_agent_protocol.py); their fuzzing is open work (README: Status).
FUZZED = ("/v1/", "/healthz")


def fuzz(url: str) -> tuple[int, dict[str, str]]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    failures: dict[str, str] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith(FUZZED):
            continue
        operations += 1

        @given(case=operation.as_strategy())
        @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
        def check(case):
            case.call_and_validate(base_url=url, timeout=60)

        try:
            check()
        except (Exception, BaseExceptionGroup) as e:  # noqa: BLE001 - reported together below
            failures[operation.label] = str(e)[:1_500]
    return operations, failures


async def test_the_api_answers_generated_requests_as_documented(system):
    operations, failures = await asyncio.to_thread(fuzz, system["url"])
    assert operations >= 9  # every /v1 route and /healthz
    assert not failures, "\n\n".join(f"{k}: {v}" for k, v in failures.items())


async def test_405_answers_carry_allow(http):
    r = await http.put("/v1/ask")
    assert r.status_code == 405 and "POST" in r.headers["allow"]
    r = await http.post("/healthz")
    assert r.status_code == 405 and "GET" in r.headers["allow"]
