from __future__ import annotations

import json
import re

import pytest
from meshward.contracts import (
    ENDPOINTS,
    EVENTS,
    ErrorCode,
    ErrorReply,
    InteractionCompleted,
    SecurityCheckRequest,
    ThreatCategory,
    ToolResult,
    subjects,
)
from meshward.contracts.schema import SCHEMA_DIR, asyncapi, drift, rendered
from pydantic import ValidationError


def test_committed_schemas_match_the_code():
    problems = drift()
    assert problems == [], f"run `make schemas` and commit: {problems}"


def test_every_subject_is_versioned_and_named_by_service_and_verb():
    pattern = re.compile(r"^meshward\.v1\.[a-z]+\.[a-z_]+$")
    for ep in ENDPOINTS:
        assert pattern.match(ep.subject), ep.subject
        assert ep.subject.split(".")[2] == ep.owner
    for subject, _ in EVENTS:
        assert subject.startswith(subjects.EVENTS_PREFIX + ".")


def test_asyncapi_lists_every_endpoint_and_event():
    doc = asyncapi()
    addresses = {c["address"] for c in doc["channels"].values()}
    assert {ep.subject for ep in ENDPOINTS} | {s for s, _ in EVENTS} == addresses
    assert json.loads((SCHEMA_DIR / "asyncapi.json").read_text()) == json.loads(rendered()["asyncapi.json"])


def test_threat_categories_are_the_five_of_the_reference_design_plus_harmful_content():
    assert {c.value for c in ThreatCategory} == {
        "prompt_extraction", "credential_extraction", "role_manipulation", "security_bypass", "config_inspection",
        "harmful_content",
    }


def test_readers_ignore_fields_added_by_newer_v1_writers():
    req = SecurityCheckRequest.model_validate_json('{"text": "hi", "added_in_v1_1": true}')
    assert req.text == "hi"


def test_bounds_are_enforced():
    with pytest.raises(ValidationError):
        SecurityCheckRequest(text="x" * 20_001)


def test_error_reply_retryable_follows_the_code():
    assert ErrorReply.of(ErrorCode.UNAVAILABLE, "down").retryable
    assert not ErrorReply.of(ErrorCode.BAD_REQUEST, "no").retryable
    assert len(ErrorReply.of(ErrorCode.INTERNAL, "x" * 5000).message) == 2000


def test_tool_result_content_is_discriminated():
    r = ToolResult.model_validate({"name": "plot", "content": [{"type": "image", "data": "AAAA"}, {"type": "text", "text": "ok"}]})
    assert [c.type for c in r.content] == ["image", "text"]


def test_events_carry_unique_ids():
    a = InteractionCompleted(question="q", answer="a", status="answered", route=[], duration_ms=1)
    b = InteractionCompleted(question="q", answer="a", status="answered", route=[], duration_ms=1)
    assert a.event_id != b.event_id and len(a.event_id) == 32
