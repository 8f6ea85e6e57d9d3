"""Which texts the encoder's similarities mean something for.

all-MiniLM-L6-v2 was trained on English sentence pairs. Text in the Latin script (other European languages
included) embeds by its meaning well enough to tell an attack from a weather question. Text mostly in another script
(Chinese, Arabic, Cyrillic, Greek, Devanagari, Thai...) is read as subword pieces the encoder never learned, and such
texts land close to each other whatever they say: in `bench/corpora/question_multilingual_harm.jsonl`, 28 of 96
ordinary questions in other scripts are within cosine 0.85 of a harmful request of the same set, and none of the 24 in
the Latin script is (README: Security hardening). A nearest neighbour there is not evidence of anything.
"""
from __future__ import annotations

import unicodedata

__all__ = ["in_trained_script"]

MIN_LATIN_SHARE = 0.5  # of a text's letters


def in_trained_script(text: str) -> bool:
    """Whether at least half of ``text``'s letters are Latin (a text without letters counts as one)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return True
    return sum(1 for c in letters if "LATIN" in unicodedata.name(c, "")) >= MIN_LATIN_SHARE * len(letters)
