"""Reading in-scope examples from a scope file: bounded, validated, clear errors."""
from __future__ import annotations

import pytest
from meshward.memory.scope_examples import ScopeExamplesError, packaged_scope_file, read_scope_examples


def test_the_packaged_scope_is_found_and_read():
    path = packaged_scope_file()
    assert path is not None
    examples = read_scope_examples(path)
    assert len(examples) > 50
    assert {intent for _, intent in examples.values()} >= {"weather", "calculation", "diagnostics"}
    assert read_scope_examples(path) == examples  # stable ids: a restart re-embeds nothing


@pytest.mark.parametrize(("content", "message"), [
    ("intents: [1, 2]", "no valid `intents`"),
    ("name: x\n", "no valid `intents`"),
    ("intents:\n  weather:\n    examples: []\n", "no in-scope examples"),
    ("intents: {a: [", "not valid YAML"),
])
def test_bad_scope_files_are_clear_errors(tmp_path, content, message):
    path = tmp_path / "scope.yaml"
    path.write_text(content)
    with pytest.raises(ScopeExamplesError, match=message):
        read_scope_examples(path)


def test_a_missing_or_huge_file_is_refused(tmp_path):
    with pytest.raises(ScopeExamplesError, match="cannot be read"):
        read_scope_examples(tmp_path / "absent.yaml")
    big = tmp_path / "big.yaml"
    big.write_text("x" * 1_100_000)
    with pytest.raises(ScopeExamplesError, match="larger than"):
        read_scope_examples(big)
