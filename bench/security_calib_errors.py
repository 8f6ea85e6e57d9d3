"""The calib split's errors of a built security model, by family: to steer a data iteration.

Lists the attacks the classifier misses at the calib split's own 1%-FPR threshold and the benign texts that
score highest (those set the operating threshold). Only the calib split is ever shown: steer by calib errors
and families, never by test items. Figures only, never asserted.

    .venv/bin/python bench/security_calib_errors.py [--model-dir DIR] [--per-family 6] [--top-benign 30]

``--model-dir`` loads a given build (useful after editing the data, when the cache key no longer finds it).
"""
from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
from meshward.security.classifier import SecurityClassifier, score_texts
from meshward.security_training import held_out_splits
from meshward.security_training.data import BENIGN, LABELS, build_examples, family_of
from meshward.training.metrics import threshold_for_fpr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None)
    parser.add_argument("--per-family", type=int, default=6, help="missed attacks shown per family")
    parser.add_argument("--top-benign", type=int, default=30)
    args = parser.parse_args()

    model = SecurityClassifier.load(args.model_dir)
    examples, _ = build_examples()
    calib = held_out_splits(examples)["calib"]
    attack = 1.0 - score_texts(model.clf, [e.text for e in calib])[:, LABELS.index(BENIGN)]
    is_attack = np.array([e.label != BENIGN for e in calib])
    t = threshold_for_fpr(attack[~is_attack], 0.01)
    print(f"calib: {int(is_attack.sum())} attacks, {int((~is_attack).sum())} benign; threshold at 1% FPR {t:.4f}; "
          f"attack recall there {(attack[is_attack] >= t).mean():.2%}")

    missed: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    totals: dict[str, int] = defaultdict(int)
    for e, a in zip(calib, attack, strict=True):
        if e.label == BENIGN:
            continue
        family = family_of(e.group) or e.group.split(":")[0]
        totals[family] += 1
        if a < t:
            missed[family].append((float(a), e.source, e.text))
    print("\nmissed attacks by family (missed/held out):")
    for family, items in sorted(missed.items(), key=lambda kv: -len(kv[1])):
        print(f"  {family}: {len(items)}/{totals[family]}")
        for a, source, text in sorted(items)[: args.per_family]:
            print(f"      {a:.3f} {source}: {text[:150]!r}")

    benign = sorted(((float(a), e) for e, a in zip(calib, attack, strict=True) if e.label == BENIGN),
                    key=lambda x: -x[0])[: args.top_benign]
    print("\nhighest-scoring benign:")
    for a, e in benign:
        print(f"      {a:.3f} {family_of(e.group) or e.group.split(':')[0]} {e.source}: {e.text[:150]!r}")


if __name__ == "__main__":
    main()
