"""Questions foreign to the encoder (other scripts than Latin; Latin-script languages it was not trained on): the
security service's decision with the encoder alone (the build before
the n-gram model) against the encoder plus the n-gram model at several thresholds and encoder floors, with and without the encoder reading the
Latin-script words of such text, same texts,
same run, in process. Figures only, never asserted.

Corpora: the three multilingual sets in `bench/corpora/` (two dev sets, one blind set read as counts only), the
n-gram model's own held-out test split, and three English sets as a check that English text is untouched. Each
row is split by whether the text is foreign to the encoder (:func:`meshward.security.chargram.reads_foreign`).
The decision is the service's for a question (rules, adversarial-suffix layer, decode-and-judge, classifier; no
known threats, which need memory).

    .venv/bin/python bench/security_other_scripts.py [--model KEY] [--chargram DIR] [--floor 0.99 ...]
        [--threshold 0.6 ...] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from _common import machine  # noqa: E402
from ask_eval import read_corpus  # noqa: E402
from meshward.security.chargram import (  # noqa: E402
    ENCODER_FLOOR,
    MIN_LATIN_WORDS,
    CharGramModel,
    model_dir,
    reads_foreign,
)
from meshward.security.classifier import SecurityClassifier  # noqa: E402
from security_layers import _service_blocks  # noqa: E402
from security_operating_points import MeanOfBuilds  # noqa: E402

CORPORA = Path(__file__).resolve().parent / "corpora"
NO_LATIN = 10**9  # words: the Latin view never read
FILES = ("question_multilingual.jsonl", "question_multilingual_harm.jsonl", "question_multilingual_blind.jsonl",
         "question_blind4.jsonl", "question_xsafety_dev.jsonl", "question_edgy_dev.jsonl")


def held_out() -> list[dict]:
    try:
        from meshward.security_training.chargram import load_examples, split
    except ModuleNotFoundError:
        return []
    label = {"benign": "benign", "harmful_content": "harmful"}
    return [{"text": r.text, "label": label.get(r.label, "attack"), "family": r.family}
            for r in split(load_examples())["test"]]


async def blocks(encoder: MeanOfBuilds, grams: CharGramModel | None, floor: float, latin: int,
                 texts: list[str]) -> np.ndarray:
    return await _service_blocks(encoder, texts, other_scripts=grams, encoder_floor=floor, latin_min_words=latin)


def counts(blocked: np.ndarray, items: list[dict], mask: np.ndarray) -> dict[str, str]:
    out = {}
    for label in ("benign", "attack", "harmful"):
        sel = mask & np.array([i["label"] == label for i in items])
        if sel.any():
            out[label] = f"{int(blocked[sel].sum())}/{int(sel.sum())}"
    return out


async def main_async(args: argparse.Namespace) -> None:
    sets = {name.removesuffix(".jsonl"): read_corpus(CORPORA / name) for name in FILES}
    own = held_out()
    if own:
        sets = {"chargram held-out test": own, **sets}
    encoder = MeanOfBuilds([SecurityClassifier.load(version=args.model)])
    directory = model_dir(args.chargram)
    card_threshold = CharGramModel(directory).threshold
    print(f"machine: {machine()}")
    print(f"encoder {encoder.clf.version} threshold {encoder.threshold:.3f}; n-gram model {directory.name} "
          f"threshold {card_threshold:.3f}")
    configs: list[tuple[str, CharGramModel | None, float, int]] = [("encoder only", None, 1.0, 0)]
    for t in sorted({card_threshold, *args.threshold}):
        for floor in sorted(set(args.floor)):
            for latin in (MIN_LATIN_WORDS, NO_LATIN):
                words = f"latin words >= {latin}" if latin != NO_LATIN else "no latin view"
                configs.append((f"n-gram >= {t:.3f}, encoder >= {floor:g}, {words}", CharGramModel(directory, threshold=t),
                                floor, latin))
    report = []
    for name, items in sets.items():
        texts = [i["text"] for i in items]
        other = np.array([reads_foreign(t) for t in texts])
        print(f"\n== {name}: {len(items)} texts, {int(other.sum())} foreign to the encoder")
        for label, grams, floor, latin in configs:
            blocked = await blocks(encoder, grams, floor, latin, texts)
            row = {"corpus": name, "config": label, "foreign": counts(blocked, items, other),
                   "encoder": counts(blocked, items, ~other)}
            report.append(row)
            fmt = lambda c: ", ".join(f"{k} {v}" for k, v in c.items()) or "-"  # noqa: E731
            print(f"  {label:<56} foreign: {fmt(row['foreign']):<48} encoder's: {fmt(row['encoder'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="the security build (key or prefix); the newest when unset")
    parser.add_argument("--chargram", help="a security-chargram build folder; the newest when unset")
    parser.add_argument("--floor", type=float, action="append", default=[ENCODER_FLOOR],
                        help="encoder score that still blocks other-script text (repeat)")
    parser.add_argument("--threshold", type=float, action="append", default=[], help="n-gram thresholds besides the card's")
    parser.add_argument("--json")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
