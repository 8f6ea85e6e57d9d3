"""Scope files: the packaged data-center scope and validation of bad files."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from meshward.intent.scope import IntentSpec, Scope, ScopeError, load_scope

SCOPE_INTENTS = {"weather", "location", "calculation", "chart", "document", "diagnostics", "cluster_register", "cluster_info", "cluster_health", "cluster_changes", "ops_knowledge", "assistant_help"}


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "scope.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def _minimal() -> dict:
    return {
        "name": "tiny",
        "intents": {"greeting": {"description": "say hi", "keywords": ["hi"], "examples": ["hello there"]}},
        "out_of_scope_examples": ["what is the capital of France?"],
    }


def test_packaged_default_scope() -> None:
    scope = load_scope()
    assert isinstance(scope, Scope)
    assert scope.name == "datacenter"
    assert scope.description
    assert set(scope.intents) == SCOPE_INTENTS
    for name, spec in scope.intents.items():
        assert isinstance(spec, IntentSpec)
        assert spec.description, name
        assert spec.keywords, name
        assert 15 <= len(spec.examples) <= 30, (name, len(spec.examples))
        assert len(set(spec.examples)) == len(spec.examples), name
    assert len(scope.out_of_scope_examples) >= 30
    assert 0.0 < scope.thresholds.in_scope_min_similarity < 1.0


def test_load_from_path_matches_default() -> None:
    from importlib import resources

    packaged = resources.files("meshward.intent").joinpath("scopes", "datacenter.yaml")
    with resources.as_file(packaged) as path:
        assert load_scope(path) == load_scope()
        assert load_scope(str(path)) == load_scope()


def test_minimal_scope_gets_default_thresholds(tmp_path: Path) -> None:
    scope = load_scope(_write(tmp_path, _minimal()))
    assert scope.name == "tiny"
    assert scope.thresholds.top_k >= 1
    assert scope.intents["greeting"].patterns == []


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScopeError, match="does not exist"):
        load_scope(tmp_path / "nope.yaml")


def test_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(ScopeError, match="not valid YAML"):
        load_scope(_write(tmp_path, "name: [unclosed\n  intents: {"))


def test_not_a_mapping(tmp_path: Path) -> None:
    with pytest.raises(ScopeError, match="must hold a mapping"):
        load_scope(_write(tmp_path, "- just\n- a list\n"))


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda d: d.pop("intents"), "intents"),
    (lambda d: d.pop("name"), "name"),
    (lambda d: d.update(intents={}), "intents"),
    (lambda d: d.update(out_of_scope_examples=[]), "out_of_scope_examples"),
    (lambda d: d["intents"]["greeting"].update(examples=[]), "intents.greeting.examples"),
    (lambda d: d["intents"]["greeting"].update(examples=["ok", "  "]), "empty strings"),
    (lambda d: d["intents"]["greeting"].update(patterns=["(unclosed"]), "not a valid regular expression"),
    (lambda d: d["intents"]["greeting"].update(unknown_field=1), "unknown_field"),
    (lambda d: d["intents"].update(out_of_scope={"description": "x", "examples": ["y"]}), "reserved"),
    (lambda d: d["intents"].update({"Bad Name": {"description": "x", "examples": ["y"]}}), "must match"),
    (lambda d: d.update(thresholds={"in_scope_min_similarity": 1.5}), "thresholds.in_scope_min_similarity"),
    (lambda d: d.update(thresholds={"keyword_bonus": 0.3, "keyword_bonus_max": 0.1}), "keyword_bonus_max"),
])
def test_validation_errors_name_the_problem(tmp_path: Path, mutate, fragment: str) -> None:
    data = _minimal()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ScopeError) as info:
        load_scope(path)
    message = str(info.value)
    assert str(path) in message
    assert fragment in message
