"""Labelled examples and the held-out split (torch-free).

The split is by *group*, not by example: every example carries the id of what produced it (a template family,
a hand-written item, a scope-file example and its augmentations), and a whole group lands in one split. So the
held-out splits hold phrasings whose templates the model never saw in training, not paraphrases of them.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

__all__ = ["SPLITS", "Example", "data_hash", "dedupe", "label_counts", "split_by_group"]

SPLITS = ("train", "calib", "test")


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    label: str
    group: str  # examples of one group always land in the same split
    source: str = ""  # e.g. template, handwritten, scope, chitchat, obfuscation:leet

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def dedupe(examples: Iterable[Example]) -> list[Example]:
    """First occurrence of each (casefolded, whitespace-collapsed) text wins."""
    seen: set[str] = set()
    out: list[Example] = []
    for e in examples:
        key = " ".join(e.text.casefold().split())
        if key and key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _rank(seed: int, group: str) -> str:
    return hashlib.sha256(f"{seed}:{group}".encode()).hexdigest()


def split_by_group(examples: Sequence[Example], seed: int, calib: float = 0.15, test: float = 0.15,
                   family_of: Callable[[str], str | None] | None = None) -> dict[str, list[Example]]:
    """Deterministic group split, stratified by each group's majority label.

    Per label, groups are ordered by a seeded hash and go to test until it holds its ``test`` share of the
    label's examples, then to calib likewise, the rest to train (so each split's share holds in examples, not
    just in groups). With ``family_of`` (group -> family, or None), the first group of each family in that order stays
    in train, so every family is learned from and only some of its groups are held out.
    """
    by_group: dict[str, list[Example]] = defaultdict(list)
    for e in examples:
        by_group[e.group].append(e)
    groups_of_label: dict[str, list[str]] = defaultdict(list)
    for group, items in by_group.items():
        label = Counter(e.label for e in items).most_common(1)[0][0]
        groups_of_label[label].append(group)
    assignment: dict[str, str] = {}
    if family_of is not None:
        first: dict[str, str] = {}
        for g in sorted(by_group, key=lambda g: _rank(seed, g)):
            family = family_of(g)
            if family is not None:
                first.setdefault(family, g)
        assignment.update(dict.fromkeys(first.values(), "train"))
    for label in sorted(groups_of_label):
        total = sum(len(by_group[g]) for g in groups_of_label[label])
        groups = sorted((g for g in groups_of_label[label] if g not in assignment), key=lambda g: _rank(seed, g))
        want = {"test": total * test, "calib": total * calib}
        have = {"test": 0, "calib": 0}
        for i, g in enumerate(groups):
            # hash order; fill test, then calib, to their share of this label's examples; keep >= 1 group for training
            split = next((s for s in ("test", "calib") if have[s] < want[s]), "train")
            if split != "train" and len(groups) - i <= 1 and not any(assignment.get(x) == "train" for x in groups):
                split = "train"
            assignment[g] = split
            if split != "train":
                have[split] += len(by_group[g])
    out: dict[str, list[Example]] = {s: [] for s in SPLITS}
    for e in examples:
        out[assignment[e.group]].append(e)
    return out


def label_counts(examples: Iterable[Example]) -> dict[str, int]:
    return dict(sorted(Counter(e.label for e in examples).items()))


def data_hash(examples: Iterable[Example]) -> str:
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.text, e.label, e.group], ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]
