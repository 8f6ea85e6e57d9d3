"""The in-scope examples the learning guard compares a violation with, read from the scope file intent serves.

Memory learns a blocked question as a known threat only when it is not close to an in-scope
example (LearningPolicy); without the examples that guard cannot fire, so a missing or unreadable
scope file stops start-up instead of leaving the guard off. Only the examples are read here:
the scope file's meaning (intents, thresholds, classification) stays intent's.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .semantic import SemanticMemory

log = logging.getLogger(__name__)

DEFAULT_SCOPE_FILE = "datacenter.yaml"
MAX_FILE_BYTES = 1_048_576
MAX_EXAMPLES = 5_000


class ScopeExamplesError(ValueError):
    pass


class _Intent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    examples: list[str] = Field(default_factory=list)


class _ScopeFile(BaseModel):
    model_config = ConfigDict(extra="ignore")
    intents: dict[str, _Intent]


def packaged_scope_file() -> Path | None:
    """intent's packaged default scope, when the intent distribution is installed beside memory (found, not imported)."""
    try:
        spec = importlib.util.find_spec("meshward.intent")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "scopes" / DEFAULT_SCOPE_FILE
        if candidate.is_file():
            return candidate
    return None


def read_scope_examples(path: Path) -> dict[str, tuple[str, str]]:
    """id -> (example, intent) for every in-scope example; the id hashes intent and text, so a restart re-embeds nothing."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ScopeExamplesError(f"scope file {path} is larger than {MAX_FILE_BYTES} bytes")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ScopeExamplesError(f"scope file {path} cannot be read: {e.strerror}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ScopeExamplesError(f"scope file {path} is not valid YAML: {e}") from None
    try:
        scope = _ScopeFile.model_validate(data)
    except ValidationError as e:
        raise ScopeExamplesError(f"scope file {path} has no valid `intents` mapping ({e.error_count()} errors)") from None
    examples: dict[str, tuple[str, str]] = {}
    for intent, spec in scope.intents.items():
        for text in spec.examples:
            text = text.strip()
            if text:
                key = hashlib.sha256(f"{intent}\n{text}".encode()).hexdigest()[:32]
                examples[f"scope-{key}"] = (text, intent)
    if not examples:
        raise ScopeExamplesError(f"scope file {path} holds no in-scope examples")
    if len(examples) > MAX_EXAMPLES:
        raise ScopeExamplesError(f"scope file {path} holds {len(examples)} examples; the limit is {MAX_EXAMPLES}")
    return examples


async def load_scope_examples(semantic: SemanticMemory, path: Path | None) -> int:
    """Fill the scope_examples collection from the scope file (the packaged default when `path` is None)."""
    path = path or packaged_scope_file()
    if path is None:
        raise ScopeExamplesError(
            "no scope file for the learning guard: set MESHWARD_INTENT_SCOPE_FILE to the scope file intent serves")
    examples = read_scope_examples(path)
    added, removed = await semantic.sync_scope_examples(examples)
    log.info("scope examples from %s: %d (%d new, %d removed)", path, len(examples), added, removed)
    return len(examples)
