"""Write the benign chat sample (``data/chitchat_benign.txt``) from the PyPI package ``chitchat-dataset``.

The sample lives in the repo so that a build needs no extra package and its data hash covers it; this script
is how it was made (``pip install chitchat-dataset==0.9.0``, then
``python -m meshward.security_training.chitchat_sample > .../data/chitchat_benign.txt``).
"""
from __future__ import annotations

import argparse
import importlib.resources
import json
import random
import sys

HEADER = (
    "# A seeded sample of messages from the Chit Chat Challenge dataset (BYU PCC lab), MIT licence,\n"
    "# as shipped by the PyPI package chitchat-dataset 0.9.0 (made by meshward.security_training.chitchat_sample,\n"
    "# seed {seed}). One message per line; used as benign conversational text.\n"
)


def messages(min_chars: int = 20, max_chars: int = 220) -> list[str]:
    """Every distinct single-line message of the dataset within the length bounds, in a fixed order."""
    try:
        raw = importlib.resources.files("chitchat_dataset").joinpath("dataset.json").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        raise SystemExit("chitchat-dataset is not installed: pip install chitchat-dataset==0.9.0") from None
    seen: set[str] = set()
    out: list[str] = []
    for conversation_id in sorted(data := json.loads(raw)):
        for turn in data[conversation_id]["messages"]:
            for message in turn:
                text = " ".join(str(message.get("text", "")).split())
                key = text.casefold()
                if min_chars <= len(text) <= max_chars and not text.startswith("#") and key not in seen:
                    seen.add(key)
                    out.append(text)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    pool = messages()
    sample = random.Random(args.seed).sample(pool, k=min(args.lines, len(pool)))
    sys.stdout.write(HEADER.format(seed=args.seed) + "".join(f"{line}\n" for line in sample))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
