"""What the security service decides on the held-out test split: the classifier alone, the rules alone, and
the layered decision the service makes (rules first, then the classifier at its operating threshold).

The model card measures the classifier alone; this script adds the rules layer, which is hand-written and
not part of the model (so it is not in the card: a rule change does not retrain the model). Known threats
(memory) are left out: they only block paraphrases of earlier blocks. Figures only, never asserted.

    .venv/bin/python bench/security_layers.py [--split test|calib] [--json out.json]
"""
from __future__ import annotations

import argparse
import json

import numpy as np
from meshward.classifier.training.metrics import recall_at_fpr
from meshward.security.classifier import SecurityClassifier, score_texts
from meshward.security.rules import RulesLayer
from meshward.security.training import held_out_splits
from meshward.security.training.data import BENIGN, LABELS, build_examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test", choices=("test", "calib"))
    parser.add_argument("--json")
    args = parser.parse_args()

    model = SecurityClassifier.load(device="cpu")
    examples, _ = build_examples()
    items = held_out_splits(examples)[args.split]
    is_attack = np.array([e.label != BENIGN for e in items])
    clf = 1.0 - score_texts(model.clf, [e.text for e in items])[:, LABELS.index(BENIGN)]
    rules = RulesLayer()
    ruled = np.array([rules.check(e.text) is not None for e in items])
    layered = np.where(ruled, 1.0, clf)  # a rule hit blocks whatever the classifier says
    t = model.threshold

    def at_threshold(scores: np.ndarray) -> dict[str, float]:
        return {"attack_recall": round(float((scores[is_attack] >= t).mean()), 4),
                "benign_fpr": round(float((scores[~is_attack] >= t).mean()), 4)}

    def roc(scores: np.ndarray) -> dict[str, float]:
        return {f"attack_recall_at_{p:.0%}_fpr": round(recall_at_fpr(scores[is_attack], scores[~is_attack], p)[0], 4)
                for p in (0.01, 0.02)}

    out = {
        "split": args.split, "model": f"{model.clf.name} {model.clf.version}", "threshold": t,
        "attacks": int(is_attack.sum()), "benign": int((~is_attack).sum()),
        "classifier": {**roc(clf), **at_threshold(clf)},
        "rules": {"attack_recall": round(float(ruled[is_attack].mean()), 4),
                  "benign_fpr": round(float(ruled[~is_attack].mean()), 4)},
        "layered (rules -> classifier)": {**roc(layered), **at_threshold(layered)},
    }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
