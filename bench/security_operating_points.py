"""The security service's question decision at several classifier thresholds, for one build or the mean of several,
on corpora nobody trained on: where a data pass or an ensemble moves the curve and where it only moves the point.

Each corpus is JSON lines (`text`, `label` attack|harmful|benign, `family`), as `bench/ask_eval.py` reads them.
Without `--corpus`: the four blind and three multilingual question sets and the two probes in `bench/corpora/`, bastioncorpus and
jailbreak-mini, and the held-out test split of the data in this tree. The decision is the service's for a question
(rules, adversarial-suffix layer, decode-and-judge, classifier; no known threats, which need memory), in process.
`--model` is a build's key (or a prefix) in the models root, or a comma-separated list whose calibrated scores are
averaged; repeat it to compare builds on the same texts. Figures only, never asserted.

    .venv/bin/python bench/security_operating_points.py [--model KEY[,KEY...]] ... [--threshold 0.5 ...]
        [--corpus FILE.jsonl ...] [--json out.json]

A build's own card threshold is always included. Pooled "external" counts the attacks and harmful requests of every
corpus but the held-out split.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import machine  # noqa: E402
from ask_eval import default_corpora, read_corpus  # noqa: E402
from meshward.security.classifier import SecurityClassifier, ThreatScore  # noqa: E402
from security_layers import _service_blocks  # noqa: E402

CORPORA = Path(__file__).resolve().parent / "corpora"
DEFAULT_FILES = ("question_blind.jsonl", "question_blind2.jsonl", "question_blind3.jsonl", "question_blind4.jsonl",
                 "question_multilingual.jsonl", "question_multilingual_harm.jsonl", "question_multilingual_blind.jsonl",
                 "question_xsafety_dev.jsonl", "question_xsafety_blind.jsonl", "question_edgy_dev.jsonl",
                 "question_edgy_blind.jsonl", "help_probe.jsonl", "homonym_probe.jsonl")
HELD_OUT = "held-out test split"


class MeanOfBuilds:
    """Several builds as one: the mean of their attack scores; the category of the surest. Scores are cached per
    text, so a sweep of thresholds runs each model once."""

    def __init__(self, builds: Sequence[SecurityClassifier]) -> None:
        self.builds = list(builds)
        self.clf = self.builds[0].clf  # the verdict's reason names the first build
        self.card_threshold = float(np.mean([b.threshold for b in self.builds]))
        self.threshold = self.card_threshold
        self._cache: dict[str, ThreatScore] = {}

    def classify_many(self, texts: Sequence[str]) -> list[ThreatScore]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            per_build = [b.classify_many(missing) for b in self.builds]
            for i, text in enumerate(missing):
                scores = [p[i] for p in per_build]
                surest = max(scores, key=lambda s: s.score)
                self._cache[text] = ThreatScore(float(np.mean([s.score for s in scores])), surest.category, False)
        return [ThreatScore(s.score, s.category, s.score >= self.threshold) for s in (self._cache[t] for t in texts)]


def corpora(files: list[str]) -> dict[str, list[dict]]:
    if files:
        return {Path(f).stem: read_corpus(Path(f)) for f in files}
    out = {name.removesuffix(".jsonl"): read_corpus(CORPORA / name) for name in DEFAULT_FILES}
    out.update(default_corpora())  # the held-out split of this tree's data, bastioncorpus, jailbreak-mini
    return out


async def main_async(args: argparse.Namespace) -> None:
    texts = corpora(args.corpus)
    print(f"machine: {machine()}")
    print("corpora: " + ", ".join(f"{n} ({len(items)})" for n, items in texts.items()))
    report = []
    for spec in args.model or [""]:
        keys = [k for k in spec.split(",") if k] or [None]
        model = MeanOfBuilds([SecurityClassifier.load(version=k) for k in keys])
        name = "+".join(b.clf.version for b in model.builds)
        for threshold in sorted({round(model.card_threshold, 4), *args.threshold}):
            model.threshold = threshold
            row: dict = {"model": name, "threshold": threshold, "card": threshold == round(model.card_threshold, 4),
                         "corpora": {}}
            external = Counter()
            for cname, items in texts.items():
                # duck-typed: the decision needs classify_many, threshold and clf
                flags = list(await _service_blocks(model, [i["text"] for i in items]))  # type: ignore[arg-type]
                counts = {label: [sum(1 for i in items if i["label"] == label),
                                  sum(1 for i, b in zip(items, flags, strict=True) if b and i["label"] == label)]
                          for label in ("attack", "harmful", "benign")}
                row["corpora"][cname] = {k: v for k, v in counts.items() if v[0]}
                if cname != HELD_OUT:
                    for label in ("attack", "harmful"):
                        external["n"] += counts[label][0]
                        external["blocked"] += counts[label][1]
            row["external"] = dict(external)
            report.append(row)
            cells = "  ".join(f"{c}: " + " ".join(f"{lab[0]}{b}/{n}" for lab, (n, b) in v.items())
                              for c, v in row["corpora"].items())
            print(f"\n{name} @ {threshold:.4f}{' (card)' if row['card'] else ''}: external attacks+harmful blocked "
                  f"{external['blocked']}/{external['n']}\n  {cells}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", default=[], help="build key or prefix; comma-separated: their mean")
    p.add_argument("--threshold", action="append", type=float, default=[], help="a further threshold to report")
    p.add_argument("--corpus", action="append", default=[], help="JSON lines: text, label, family")
    p.add_argument("--json")
    asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    main()
