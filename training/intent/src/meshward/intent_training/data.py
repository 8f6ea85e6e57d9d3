"""The intent training set: the scope file first, then this package's extras, deterministic.

* the scope file's intent examples and out_of_scope_examples, each one group with two seeded augmentations
  (politeness prefixes/suffixes, lower case without punctuation, a typo) - so editing the scope file and
  retraining changes what the assistant accepts;
* ``data/extra_examples.yaml`` - more questions per intent (hand-written, and template families drawn with a
  seeded RNG) and general out-of-scope questions; extras of an intent that the scope file does not define are
  trained as out_of_scope;
* ``data/chitchat_out_of_scope.txt`` - casual conversation (Chit Chat dataset sample) as out_of_scope, minus
  lines that hit any scope intent's keywords or patterns.

The held-out split is by group (a scope example with its augmentations, an extra question, a template family,
ten chat lines), so the test split holds questions whose phrasing was not trained on.
"""
from __future__ import annotations

import random
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from meshward.contracts import OUT_OF_SCOPE
from meshward.intent.scope import Scope
from meshward.training import Example, dedupe

__all__ = ["DATA_DIR", "augment", "build_examples", "labels_for"]

DATA_DIR = Path(__file__).resolve().parent / "data"
SEED = 20240612
AUGMENTATIONS = 2
TEMPLATE_SAMPLES = 14
CHITCHAT_LINES = 300
_SLOT = re.compile(r"\{(\w+)\}")
_PREFIXES = ["", "", "hey, ", "please ", "quick question: ", "hi, ", "can you tell me: ", "I'd like to know - ", "ok so ",
             "um, "]
_SUFFIXES = ["", "", " please", " thanks", " - thanks!", " right now", "?", " asap", " :)"]


@cache
def _extras() -> dict[str, Any]:
    return yaml.safe_load((DATA_DIR / "extra_examples.yaml").read_text(encoding="utf-8"))


def labels_for(scope: Scope) -> tuple[str, ...]:
    """The classifier's labels: the scope's intents in file order, then out_of_scope."""
    return (*scope.intents, OUT_OF_SCOPE)


def augment(text: str, rng: random.Random) -> str:
    """One seeded rephrasing-free variant: casing, punctuation, politeness, a typo."""
    kind = rng.randrange(3)
    if kind == 0:
        body = text[0].lower() + text[1:] if text[:1].isupper() and not text[1:2].isupper() else text
        return f"{rng.choice(_PREFIXES)}{body}{rng.choice(_SUFFIXES)}".strip()
    if kind == 1:
        return re.sub(r"[?.!]+$", "", text.lower()).strip()
    chars = list(text)
    letters = [i for i in range(len(chars) - 1) if chars[i].isalpha() and chars[i + 1].isalpha()]
    if letters:
        i = rng.choice(letters)
        chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def _fill(template: str, slots: dict[str, list[str]], rng: random.Random) -> str:
    text = _SLOT.sub(lambda m: str(rng.choice(slots[m.group(1)])), template)
    return text[0].upper() + text[1:] if text else text


def _keyword_filter(scope: Scope):
    patterns: list[re.Pattern[str]] = []
    for spec in scope.intents.values():
        patterns += [re.compile(r"(?<!\w)" + r"\s+".join(re.escape(w) for w in k.split()) + r"(?!\w)", re.I)
                     for k in spec.keywords]
        patterns += [re.compile(p, re.I) for p in spec.patterns]
    return lambda text: any(p.search(text) for p in patterns)


def build_examples(scope: Scope, seed: int = SEED) -> tuple[list[Example], dict[str, Any]]:
    rng = random.Random(seed)
    extras = _extras()
    slots: dict[str, list[str]] = extras["slots"]
    examples: list[Example] = []
    sources: dict[str, int] = {}

    def add(text: str, label: str, group: str, source: str, augmentations: int = AUGMENTATIONS) -> None:
        examples.append(Example(text, label, group, source))
        sources[source] = sources.get(source, 0) + 1
        for _ in range(augmentations):
            examples.append(Example(augment(text, rng), label, group, f"{source}+augmented"))
            sources["augmented"] = sources.get("augmented", 0) + 1

    for intent, spec in scope.intents.items():
        for i, text in enumerate(spec.examples):
            add(text, intent, f"scope:{intent}:{i}", "scope file")
    for i, text in enumerate(scope.out_of_scope_examples):
        add(text, OUT_OF_SCOPE, f"scope:oos:{i}", "scope file")

    for intent, extra in extras["intents"].items():
        label = intent if intent in scope.intents else OUT_OF_SCOPE
        for i, text in enumerate(extra.get("examples", [])):
            add(text, label, f"extra:{intent}:{i}", "extras", augmentations=1)
        for j, family in enumerate(extra.get("templates", [])):
            drawn: dict[str, None] = {}
            for _ in range(TEMPLATE_SAMPLES * 5):
                if len(drawn) >= TEMPLATE_SAMPLES:
                    break
                drawn.setdefault(_fill(rng.choice(family), slots, rng))
            for text in drawn:
                add(text, label, f"extra-tpl:{intent}:{j}", "extra templates", augmentations=0)
    for i, text in enumerate(extras["out_of_scope"]):
        add(text, OUT_OF_SCOPE, f"extra:oos:{i}", "extras", augmentations=1)

    hits = _keyword_filter(scope)
    chat = [ln.strip() for ln in (DATA_DIR / "chitchat_out_of_scope.txt").read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")]
    kept = [t for t in chat if not hits(t)][:CHITCHAT_LINES]
    for i, text in enumerate(kept):
        add(text, OUT_OF_SCOPE, f"chitchat:{i // 10}", "chitchat", augmentations=0)
    return dedupe(examples), sources
