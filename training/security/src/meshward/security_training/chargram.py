"""Training of the security service's character n-gram model for text in other scripts
(``python -m meshward.security_training.chargram`` / ``meshward train security-chargram``).

Data: ``chargram_data/*.jsonl``, one file per language, written for this model (ordinary, tool, operations,
security-topic and alarming-but-harmless questions; attacks of the five attack categories; harmful requests), never
a public corpus. Split per (language, label): train 70%, calib 15%, test 15%, seeded. The model is multinomial
logistic regression over the run time's hashed n-gram features (:func:`meshward.security.chargram.features`),
fitted with torch; its operating threshold is the calib split's 2%-FPR point (a finer point is one example there).
The build is a folder ``security-chargram-<key>`` with ``weights.npz``, ``card.json`` and ``README.md``; the key
hashes the data, this file, the hyper-parameters and the features' preprocessing version.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from meshward.classifier.store import build_lock, find_built, fingerprint, model_dir, models_root, publish, touch
from meshward.security.chargram import (
    BUCKETS,
    MODEL_NAME,
    NGRAMS,
    PREPROCESSING,
    REQUIRED_FILES,
    WEIGHTS_FILE,
    features,
)
from meshward.training.metrics import rate_at_threshold, recall_at_fpr, threshold_for_fpr

from .data import LABELS

__all__ = ["CONFIG", "DATA", "Config", "ensure_built", "key", "load_examples", "split", "main"]

DATA = Path(__file__).resolve().parent / "chargram_data"
TARGET_FPR = 0.02
MIN_THRESHOLD = 0.5


@dataclass(frozen=True)
class Config:
    seed: int = 7
    epochs: int = 10  # the regulariser: more epochs fit the training split and rank held-out text no better
    batch_size: int = 64
    lr: float = 0.05
    benign_weight: float = 1.0


CONFIG = Config()


@dataclass(frozen=True)
class Row:
    text: str
    label: str
    lang: str
    family: str


def load_examples(data: Path = DATA) -> list[Row]:
    rows: list[Row] = []
    for path in sorted(data.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            if obj["label"] not in LABELS:
                raise ValueError(f"{path}:{n}: label {obj['label']!r} is none of {LABELS}")
            rows.append(Row(obj["text"], obj["label"], obj["lang"], obj["family"]))
    return rows


def split(rows: list[Row], seed: int = CONFIG.seed) -> dict[str, list[Row]]:
    """train / calib / test, 70/15/15 within each (language, label)."""
    by: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        by[(r.lang, r.label)].append(r)
    out: dict[str, list[Row]] = {"train": [], "calib": [], "test": []}
    rng = random.Random(seed)
    for k in sorted(by):
        group = by[k][:]
        rng.shuffle(group)
        n_hold = max(1, round(0.15 * len(group))) if len(group) >= 4 else 0
        out["test"] += group[:n_hold]
        out["calib"] += group[n_hold:2 * n_hold]
        out["train"] += group[2 * n_hold:]
    return out


def key(config: Config = CONFIG) -> str:
    return fingerprint([Path(__file__), DATA, json.dumps(asdict(config), sort_keys=True), ",".join(LABELS),
                        f"preprocessing:{PREPROCESSING}", f"buckets:{BUCKETS}", f"ngrams:{NGRAMS}"])


def _bags(rows: list[Row]) -> tuple[Any, Any, Any]:
    import torch

    ids, weights, offsets = [], [], []
    at = 0
    for r in rows:
        i, w = features(r.text)
        offsets.append(at)
        ids.append(i)
        weights.append(w)
        at += len(i)
    return (torch.from_numpy(np.concatenate(ids)), torch.from_numpy(np.concatenate(weights)),
            torch.tensor(offsets, dtype=torch.int64))


def fit(rows: list[Row], config: Config = CONFIG, quiet: bool = False) -> tuple[np.ndarray, np.ndarray]:
    import torch

    torch.manual_seed(config.seed)
    labels = torch.tensor([LABELS.index(r.label) for r in rows])
    # sparse rows: a step updates only the buckets its batch touches
    emb = torch.nn.EmbeddingBag(BUCKETS, len(LABELS), mode="sum", sparse=True)
    torch.nn.init.zeros_(emb.weight)
    bias = torch.nn.Parameter(torch.zeros(len(LABELS)))
    opts = [torch.optim.SparseAdam([emb.weight], lr=config.lr), torch.optim.Adam([bias], lr=config.lr)]
    counts = Counter(r.label for r in rows)
    # each class weighs as much as benign does: a few harmful rows must not be outvoted
    class_weight = torch.tensor([config.benign_weight if lab == "benign" else counts["benign"] / max(1, counts[lab]) / (len(LABELS) - 1)
                                 for lab in LABELS], dtype=torch.float32)
    loss_fn = torch.nn.CrossEntropyLoss(weight=class_weight)
    feats = [features(r.text) for r in rows]
    order = list(range(len(rows)))
    rng = random.Random(config.seed)
    for epoch in range(config.epochs):
        rng.shuffle(order)
        total = 0.0
        for start in range(0, len(order), config.batch_size):
            batch = order[start:start + config.batch_size]
            ids = torch.from_numpy(np.concatenate([feats[i][0] for i in batch]))
            w = torch.from_numpy(np.concatenate([feats[i][1] for i in batch]))
            offsets = torch.tensor(np.cumsum([0] + [len(feats[i][0]) for i in batch[:-1]]), dtype=torch.int64)
            logits = emb(ids, offsets, per_sample_weights=w) + bias
            loss = loss_fn(logits, labels[batch])
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
            total += float(loss.detach()) * len(batch)
        if not quiet and (epoch + 1) % 5 == 0:
            print(f"[{MODEL_NAME}] epoch {epoch + 1}/{config.epochs} loss {total / len(rows):.4f}", file=sys.stderr, flush=True)
    return emb.weight.detach().numpy().astype(np.float32), bias.detach().numpy().astype(np.float32)


def _attack_scores(weights: np.ndarray, bias: np.ndarray, rows: list[Row]) -> np.ndarray:
    from meshward.classifier import softmax

    logits = np.tile(bias, (len(rows), 1))
    for n, r in enumerate(rows):
        ids, w = features(r.text)
        if len(ids):
            logits[n] += w @ weights[ids]
    return 1.0 - softmax(logits)[:, LABELS.index("benign")]


def figures(scores: np.ndarray, rows: list[Row], threshold: float) -> dict[str, Any]:
    is_benign = np.array([r.label == "benign" for r in rows])
    harmful = np.array([r.label == "harmful_content" for r in rows])
    attack = ~is_benign & ~harmful
    r1, _ = recall_at_fpr(scores[~is_benign], scores[is_benign], 0.01)
    fams: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s, r in zip(scores, rows, strict=True):
        fams[r.family][0] += int(s >= threshold)
        fams[r.family][1] += 1
    return {
        "examples": len(rows),
        "benign_blocked": round(rate_at_threshold(scores[is_benign], threshold), 4),
        "attacks_blocked": round(rate_at_threshold(scores[attack], threshold), 4),
        "harmful_blocked": round(rate_at_threshold(scores[harmful], threshold), 4),
        "recall_at_1pct_fpr": round(float(r1), 4),
        "blocked_by_family": {f: f"{b}/{n}" for f, (b, n) in sorted(fams.items())},
    }


def build(final: Path, config: Config = CONFIG, quiet: bool = False) -> dict[str, Any]:
    started = time.monotonic()
    rows = load_examples()
    parts = split(rows, config.seed)
    if not quiet:
        print(f"[{MODEL_NAME}] {len(rows)} examples in {len({r.lang for r in rows})} languages: "
              f"train {len(parts['train'])}, calib {len(parts['calib'])}, test {len(parts['test'])}", file=sys.stderr)
    weights, bias = fit(parts["train"], config, quiet)
    calib = _attack_scores(weights, bias, parts["calib"])
    benign_calib = calib[np.array([r.label == "benign" for r in parts["calib"]])]
    threshold = max(MIN_THRESHOLD, threshold_for_fpr(benign_calib, TARGET_FPR))
    card = {
        "name": MODEL_NAME,
        "version": final.name.removeprefix(f"{MODEL_NAME}-"),
        "key": final.name.removeprefix(f"{MODEL_NAME}-"),
        "description": "Character n-gram classifier for security questions whose letters are mostly outside the Latin script.",
        "labels": list(LABELS),
        "preprocessing": PREPROCESSING.as_card(),
        "features": {"buckets": BUCKETS, "ngrams": list(NGRAMS), "hash": "crc32 of the UTF-8 n-gram", "tf": "1 + log(count), unit length"},
        "config": asdict(config),
        "data": {"examples": len(rows), "by_language": dict(sorted(Counter(r.lang for r in rows).items())),
                 "by_label": dict(sorted(Counter(r.label for r in rows).items())), "how": __doc__.split("\n\n")[1]},
        "operating": {"threshold": round(float(threshold), 6), "score": "1 - p(benign)",
                      "chosen_on": f"calib split: benign false-positive rate <= {TARGET_FPR:.0%}, floor {MIN_THRESHOLD}"},
        "calib": figures(calib, parts["calib"], threshold),
        "test": figures(_attack_scores(weights, bias, parts["test"]), parts["test"], threshold),
        "train_seconds": round(time.monotonic() - started, 1),
    }
    staging = final.parent / f".staging-{final.name}"
    staging.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(staging / WEIGHTS_FILE, weights=weights, bias=bias)
    (staging / "card.json").write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (staging / "README.md").write_text(_readme(card), encoding="utf-8")
    publish(staging, final)
    return card


def _readme(card: dict[str, Any]) -> str:
    test = card["test"]
    return (f"# {MODEL_NAME} {card['version']}\n\n{card['description']}\n\n"
            f"- labels: {', '.join(card['labels'])}\n- preprocessing: {card['preprocessing']}\n"
            f"- data: {card['data']['examples']} examples, {card['data']['by_language']}\n"
            f"- operating threshold {card['operating']['threshold']} ({card['operating']['chosen_on']})\n"
            f"- test split: benign blocked {test['benign_blocked']:.2%}, attacks blocked {test['attacks_blocked']:.2%}, "
            f"harmful blocked {test['harmful_blocked']:.2%}, recall at 1% FPR {test['recall_at_1pct_fpr']:.2%}\n")


def ensure_built(*, force: bool = False, root: Path | None = None, quiet: bool = False) -> Path:
    root = root or models_root()
    k = key()
    final = model_dir(MODEL_NAME, k, root)
    if not force:
        try:
            touch(found := find_built(MODEL_NAME, k, root=root, required=REQUIRED_FILES))
            return found
        except FileNotFoundError:
            pass
    with build_lock(MODEL_NAME, root):
        if force or not all((final / f).is_file() for f in REQUIRED_FILES):
            card = build(final, quiet=quiet)
            if not quiet:
                t = card["test"]
                print(f"[{MODEL_NAME}] built {final} in {card['train_seconds']} s: threshold {card['operating']['threshold']:.3f}; "
                      f"test split benign blocked {t['benign_blocked']:.1%}, attacks {t['attacks_blocked']:.1%}, "
                      f"harmful {t['harmful_blocked']:.1%}", file=sys.stderr)
    touch(final)
    return final


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"meshward train {MODEL_NAME}",
                                     description="build (or find in the cache) the n-gram model for text in other scripts")
    parser.add_argument("--force", action="store_true", help="rebuild even when the cache has this model")
    parser.add_argument("--check", action="store_true", help="exit 0 when the model is built, 1 when not; build nothing")
    parser.add_argument("--print-dir", action="store_true", help="print the model folder (building it if needed)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.check:
        try:
            find_built(MODEL_NAME, key(), required=REQUIRED_FILES)
            return 0
        except FileNotFoundError as exc:
            print(exc, file=sys.stderr)
            return 1
    found = ensure_built(force=args.force, quiet=args.quiet)
    if args.print_dir:
        print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
