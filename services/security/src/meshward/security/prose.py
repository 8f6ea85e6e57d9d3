"""Which lines of untrusted content read as language: what content mode's classifier reads of a tool result.

The classifier learned questions and prose. On command output (process tables, `/proc` files, `ip addr`, `lscpu`) it
reads identifiers, flags and numbers as attacks, and the deep tier's content check withheld a third of ordinary
command results for it (`bench/content_check.py`). An instruction to the assistant is written in language; a line of
output mostly is not. A line reads as language when, in some normalised reading (leetspeak and lookalike letters
folded, invisible characters removed: :func:`normalize`), at least three of its tokens are words, words are at least
half of its tokens, and one of them (two in a line of more than seven words) is a function word: an article, pronoun,
preposition or auxiliary of the six languages the security data is written in. A flag list or an `ip addr` line ("lo:
mtu 65536 qdisc noqueue state UNKNOWN group default qlen") has at most one; a short table header with one ("Size Used
Avail Mounted on") is read, and harmless alone.

The rules, the content rules and decode-and-judge still read every line; only the model reads this selection.
"""
from __future__ import annotations

import re
import unicodedata

from .normalize import normalize

__all__ = ["FUNCTION_WORDS", "is_language", "language_lines"]

MIN_WORDS = 3
MIN_WORD_SHARE = 0.5  # of a line's tokens
SHORT_LINE_WORDS = 7  # up to this many words one function word will do; longer lines need two

FUNCTION_WORDS = frozenset("""
a about after all an and any anything are as at be before by can could did do does every everything for from had has
have he her here him his how i if in instead into is it its just may me might must my no not now of on only or our
please she should so than that the their them then there these they this to us was we were what when which while who
will with without would you your yours
à au aux ce cette de des du elle en est et il ils la le les moi mon mes ne nous ou pas pour que qui sa se son sont sur
ta tes toi ton tu un une vous votre vos
al con del el es la las los mi mis no o para por que se su sus te tu tus un una unos usted y
alle alles das dein deine deinen dem den der des dich die dir du ein eine für ich ihr ihre im in ist mein meine mich
mir mit nicht oder sie sind und von wir zu
che con da di e gli il lo non per sei sono ti tu tua tue tuo tuoi una tutto tutti
qué todo todos toda todas tout tous toute toutes
sin sans ohne senza sem eres estás estas êtes bist está
as com da do é em não o os para se seu sua um uma você
""".split())

_PUNCT = "\"'`([{<,.;:!?)]}>*_#-–—…¿¡"
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _visible(text: str) -> str:
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def _reads_as_language(line: str) -> bool:
    tokens = _visible(line).split()
    words = [w for w in (t.strip(_PUNCT) for t in tokens if not t.startswith("-")) if _WORD.fullmatch(w)]  # -la: a flag
    if len(words) < MIN_WORDS or len(words) < MIN_WORD_SHARE * len(tokens):
        return False
    function = sum(re.split(r"['’]", w.lower(), maxsplit=1)[0] in FUNCTION_WORDS for w in words)
    return function >= (1 if len(words) <= SHORT_LINE_WORDS else 2)


# "Vulnerability Mds: Not affected", "L3 cache: 32 MiB": a short label, then the value that is the line's content.
_LABEL = re.compile(r"^\s*[^\W\d_][\w .()/-]{0,40}?:\s+(?=\S)")
MAX_LABEL_WORDS = 4


def _value_of(line: str) -> str:
    label = _LABEL.match(line)
    return line[label.end():] if label and len(label.group().split()) <= MAX_LABEL_WORDS else line


def is_language(line: str) -> bool:
    """Whether one line reads as language in any of its normalised readings; after a label of at most four words
    ("Model name:", "Vulnerability Itlb multihit:"), its value does."""
    return any(_reads_as_language(_value_of(reading)) for reading in normalize(line))


def language_lines(text: str) -> str:
    """``text``'s lines that read as language, in order (empty when none does)."""
    return "\n".join(line for line in text.splitlines() if is_language(line))
