"""What the security service decides on the held-out test split: the classifier alone, the rules alone, the
rules then the classifier, and the service's whole decision for a question (rules, adversarial-suffix layer,
decode-and-judge, classifier), overall, per template family, and on bastioncorpus (never trained on).

The model card measures the classifier alone; this script adds the rules layer, which is hand-written and
not part of the model (so it is not in the card: a rule change does not retrain the model). Known threats
(memory) are left out: they only block paraphrases of earlier blocks. Figures only, never asserted.

    .venv/bin/python bench/security_layers.py [--split test|calib] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import numpy as np
from meshward.contracts import SecurityCheckRequest, SecurityVerdict
from meshward.security.classifier import ClassifierLayer, SecurityClassifier, score_texts
from meshward.security.decision import RulesLayerAdapter
from meshward.security.handlers import _judge
from meshward.security.rules import RulesLayer
from meshward.security_training import held_out_splits
from meshward.security_training.data import BENIGN, LABELS, build_examples, external_sets, family_of
from meshward.training.metrics import recall_at_fpr


async def _service_verdicts(model: SecurityClassifier, texts: list[str], **layer_options: Any) -> list[SecurityVerdict]:
    """The service's decision for each question (no known threats: no memory here; the data the question carries
    judged as content, as the service does). ``layer_options`` go to the classifier layer (the n-gram model for foreign
    text, the encoder's floor, the harm verdicts deferred to scope)."""
    layer = ClassifierLayer(model, max_batch_size=32, max_wait_ms=2.0, **layer_options)
    judge = _judge(RulesLayerAdapter(), [], [layer])
    try:
        judgements = await asyncio.gather(*(judge.check(SecurityCheckRequest(text=t)) for t in texts))
    finally:
        await layer.close()
    return [j.verdict for j in judgements]


async def _service_blocks(model: SecurityClassifier, texts: list[str], **layer_options: Any) -> np.ndarray:
    """Whether the service's decision for a question blocks each text (:func:`_service_verdicts`)."""
    return np.array([not v.allowed for v in await _service_verdicts(model, texts, **layer_options)])


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
    service = asyncio.run(_service_blocks(model, [e.text for e in items]))
    out["service decision (rules, suffix, decode, classifier)"] = {
        "attack_recall": round(float(service[is_attack].mean()), 4),
        "benign_fpr": round(float(service[~is_attack].mean()), 4)}
    families: dict[str, dict[str, object]] = {}
    for e, c, s in zip(items, clf, service, strict=True):
        f = families.setdefault(str(family_of(e.group) or f"{e.group.split(':')[0]}:{e.label}"),
                                {"label": e.label, "n": 0, "classifier": 0, "service": 0})
        f["n"] += 1
        f["classifier"] += int(c >= t)
        f["service"] += int(s)
    out["per family (blocked / n)"] = {k: f"{v['label']}: classifier {v['classifier']}/{v['n']}, "
                                          f"service {v['service']}/{v['n']}" for k, v in sorted(families.items())}
    for name, rows in external_sets().items():
        texts = [text for text, _ in rows]
        labels = np.array([a for _, a in rows])
        ext_clf = 1.0 - score_texts(model.clf, texts)[:, LABELS.index(BENIGN)] >= t
        ext_service = asyncio.run(_service_blocks(model, texts))
        out[name] = {kind: {"attack_recall": round(float(v[labels].mean()), 4),
                            **({"benign_fpr": round(float(v[~labels].mean()), 4)} if (~labels).any() else {})}
                     for kind, v in (("classifier", ext_clf), ("service", ext_service))}
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
