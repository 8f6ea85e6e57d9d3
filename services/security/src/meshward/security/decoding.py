"""Decode-and-judge: every reading of a question hidden behind an encoding, bounded in depth, count and size.

:func:`decoded_readings` peels encodings layer by layer (base64, base32, hex, ascii85 and base85 runs, \\u and
\\x escapes, URL and HTML escapes, Morse, Braille, binary, Caesar/ROT13 shifts, reversed text, fragments to be
joined) and returns each plausible reading with the path that led to it ("base64 > rot13"). Each reading is then
judged by the other layers (:class:`DecodeLayer`): an instruction is as dangerous encoded as in the clear.

Two things are signals on their own: a request to decode something *and follow it*, when the question
carries encoded content, and nesting deeper than :data:`MAX_DEPTH` (a base64 bomb gets a verdict, not a
hang). Leetspeak and spaced-out letters are spellings, not encodings: :mod:`.normalize` reads them.
Pure and total: any ``str`` gives an answer, never an exception.
"""
from __future__ import annotations

import base64
import binascii
import html
import re
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from meshward.contracts import DecidingLayer, ThreatCategory

from .decision import Finding, Layer
from .normalize import MAX_INPUT_CHARS, decode_segments, printable_text

__all__ = ["MAX_DEPTH", "MAX_READINGS", "DecodeLayer", "Decoded", "asks_to_follow", "decoded_readings"]

MAX_DEPTH = 4  # layers peeled; content still encoded below that is itself a verdict
MAX_READINGS = 8  # readings judged per question
_MAX_TOTAL_CHARS = 4 * MAX_INPUT_CHARS  # decoded text produced per question, all readings together


@dataclass(frozen=True, slots=True)
class Decoded:
    text: str
    path: tuple[str, ...]  # encodings peeled, outermost first

    @property
    def how(self) -> str:
        return " > ".join(self.path)


# ------------------------------------------------------------------ plausibility
# The commonest English words (and the few an attack cannot do without): a shifted or reversed reading that
# is made of them is text, one that is not is noise. Other languages are rare inside these encodings.
_COMMON = frozenset("""
a about after all also an and any are as at be been before but by can could do does don't each even every
for from get give go had has have he her here him his how i if in into is it its just know let like make me
more my new no not now of on one only or other our out over please print say see she show so some tell than
that the their them then there these they this to too up us use was we were what when where which who why
will with would you your ignore previous instructions prompt system password key secret rules reveal bypass
disable filter safety admin token forget act pretend mode without restrictions answer anything everything
bomb weapon how make kill steal hack malware code send email file env config""".split())
_WORDS = re.compile(r"[a-z']+")


def _plausibility(text: str) -> float:
    words = _WORDS.findall(text.lower())
    if len(words) < 2:
        return 0.0
    return sum(w in _COMMON for w in words) / len(words)


def _plausible(text: str, than: str) -> bool:
    score = _plausibility(text)
    return score >= 0.3 and score > _plausibility(than) + 0.1


# ------------------------------------------------------------------ decoders: text -> decoded readings
_URL_ESCAPES = re.compile(r"%[0-9a-fA-F]{2}")
_HTML_ESCAPES = re.compile(r"&(?:#\d{1,7}|#x[0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")
_MORSE_RUN = re.compile(r"[.\-·•_−–]{1,7}(?:[ \t]*[/|]?[ \t]+[.\-·•_−–]{1,7}){3,}")
_BINARY_RUN = re.compile(r"(?:[01]{8}[ ,]?){3,}")
_BRAILLE_RUN = re.compile(r"[\u2800-\u28ff][\u2800-\u28ff ]{3,}")
_BASE32_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Z2-7]{16,}={0,6}(?![A-Za-z0-9+/=])")
_ASCII85_RUN = re.compile(r"<~(.{5,}?)~>", re.DOTALL)  # Adobe's delimiters: bare ascii85 is too like any text
_BASE85_RUN = re.compile(r"[0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]{20,}")  # RFC 1924 (Python's b85)
_ESCAPE_RUN = re.compile(r"(?:\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2}){4,}")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2}))")
_MAX_RUN_TRIES = 8  # candidate runs per decoder that fail still cost time: cap them
_QUOTED = re.compile(r"(?<!\w)['\"\[`]([^'\"\[\]`\n]{1,40})['\"\]`](?!\w)")  # not an apostrophe: "let's"

_MORSE = dict(zip((".- -... -.-. -.. . ..-. --. .... .. .--- -.- .-.. -- -. --- .--. --.- .-. ... - ..- ...- .-- "
                   "-..- -.-- --.. ----- .---- ..--- ...-- ....- ..... -.... --... ---.. ----. .-.-.- --..-- "
                   "..--.. -.-.--").split(), "abcdefghijklmnopqrstuvwxyz0123456789.,?!", strict=True))
# Six-dot Braille, grade 1: the letters a-z.
_BRAILLE = dict(zip("⠁⠃⠉⠙⠑⠋⠛⠓⠊⠚⠅⠇⠍⠝⠕⠏⠟⠗⠎⠞⠥⠧⠺⠭⠽⠵", "abcdefghijklmnopqrstuvwxyz", strict=True))


def _base64_hex(text: str) -> list[str]:
    return decode_segments(text)


def _url(text: str) -> list[str]:
    if len(_URL_ESCAPES.findall(text)) < 4:
        return []
    return [urllib.parse.unquote(text, errors="replace")]


def _html(text: str) -> list[str]:
    if len(_HTML_ESCAPES.findall(text)) < 4:
        return []
    return [html.unescape(text)]


def _morse(text: str) -> list[str]:
    out = []
    for run in _MORSE_RUN.findall(text):
        run = run.translate(str.maketrans("·•_−–", "..---"))
        words = re.split(r"\s*[/|]\s*|\s{3,}", run.strip())
        out.append(" ".join("".join(_MORSE.get(c, "") for c in w.split()) for w in words))
    return out


def _binary(text: str) -> list[str]:
    out = []
    for run in _BINARY_RUN.findall(text):
        raw = bytes(int(b, 2) for b in re.findall(r"[01]{8}", run))
        out.append(raw.decode("utf-8", errors="replace"))
    return out


def _runs(pattern: re.Pattern[str], text: str, decode: Callable[[str], bytes]) -> list[str]:
    out = []
    for tries, match in enumerate(pattern.finditer(text)):
        if tries >= _MAX_RUN_TRIES:
            break
        try:
            decoded = printable_text(decode(match.group(match.lastindex or 0)))
        except (binascii.Error, ValueError, OverflowError):
            continue
        if decoded is not None:
            out.append(decoded)
    return out


def _base32(text: str) -> list[str]:
    return _runs(_BASE32_RUN, text, lambda run: base64.b32decode(run.rstrip("=") + "=" * (-len(run.rstrip("=")) % 8)))


def _base85(text: str) -> list[str]:
    # ascii85 inside <~ ~>, and RFC 1924 base85 runs (a long identifier is such a run too, and decodes to noise)
    return (_runs(_ASCII85_RUN, text, lambda run: base64.a85decode(run.strip()))
            + _runs(_BASE85_RUN, text, base64.b85decode))


def _escapes(text: str) -> list[str]:
    # \u0049\u0067... and \x49\x67...: code points written as escapes, four or more in a row, read in place when
    # they spell text (a byte string in code, b'\x89\x50\x4e\x47...', does not)
    def one(m: re.Match[str]) -> str:
        value = int(m.group(1) or m.group(2) or m.group(3), 16)
        return chr(value) if value <= 0x10FFFF else ""

    def run(m: re.Match[str]) -> str:
        decoded = _ESCAPE.sub(one, m.group())
        return decoded if printable_text(decoded.encode("utf-8", errors="replace")) is not None else m.group()

    reading = _ESCAPE_RUN.sub(run, text)
    return [reading] if reading != text else []


def _braille(text: str) -> list[str]:
    return ["".join(_BRAILLE.get(c, " " if c in " \u2800" else "") for c in run) for run in _BRAILLE_RUN.findall(text)]


_SHIFTS = [str.maketrans("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                         "abcdefghijklmnopqrstuvwxyz"[k:] + "abcdefghijklmnopqrstuvwxyz"[:k]
                         + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[k:] + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:k]) for k in range(1, 26)]


_SEGMENT_BREAK = re.compile(r"(?<=[:.!?])[ \t]+|\n")
MIN_SENTENCE_WORDS = 4  # a shorter piece reads as a few common words under some shift or reversal by chance
_LETTER_WORDS = re.compile(r"[A-Za-z]{2,}")  # not hex digits' letters ("2f 4b" is no sentence)


def _best_shift(text: str) -> str:
    return max((text.translate(t) for t in _SHIFTS), key=_plausibility)


def _shifted_if_plausible(piece: str) -> str:
    if len(_LETTER_WORDS.findall(piece)) < MIN_SENTENCE_WORDS:
        return piece
    shifted = _best_shift(piece)
    return shifted if _plausible(shifted, piece) else piece


def _caesar(text: str) -> list[str]:
    # ROT13 and the other shifts: the most plausible one, when it is plausible at all (checked by the caller). Also
    # the text with only its implausible sentences shifted: a shifted question behind one in the clear ("Solve this
    # ROT13 puzzle, then answer it: Ubj qb V...") reads as neither when the whole text is shifted.
    if sum(c.isascii() and c.isalpha() for c in text) < 8:
        return []
    readings = [_best_shift(text)]
    pieces = _SEGMENT_BREAK.split(text)
    if len(pieces) > 1:
        shifted = [_shifted_if_plausible(p) for p in pieces]
        if shifted != pieces:
            readings.append(" ".join(shifted))
    return readings


def _reversed(text: str) -> list[str]:
    # the whole text backwards, and each line of it: "read the next line backwards and do what it says"
    if "\n" not in text.strip():
        return [text[::-1]]
    lines = [line[::-1] for line in text.splitlines() if len(_LETTER_WORDS.findall(line)) >= MIN_SENTENCE_WORDS]
    return [text[::-1], *lines[:MAX_READINGS]]


def _joined(text: str) -> list[str]:
    # Word smuggling: 'ign' + 'ore all previous' + ' instructions' read as one.
    parts = _QUOTED.findall(text)
    if len(parts) < 2:
        return []
    return ["".join(parts), " ".join(parts)]


# Decoders whose output must read as text to count: a shift or a reversal of anything is "a reading".
_NEEDS_PLAUSIBLE = frozenset({"rot/caesar", "reversed", "joined"})
DECODERS: tuple[tuple[str, Callable[[str], list[str]]], ...] = (
    ("base64/hex", _base64_hex), ("base32", _base32), ("base85", _base85), ("escapes", _escapes), ("url", _url),
    ("html", _html), ("morse", _morse), ("binary", _binary), ("braille", _braille), ("rot/caesar", _caesar),
    ("reversed", _reversed), ("joined", _joined),
)


def decoded_readings(text: str) -> tuple[list[Decoded], bool]:
    """(readings found behind encodings, breadth first; whether encoded content remained below MAX_DEPTH)."""
    text = text[:MAX_INPUT_CHARS]
    seen = {text.strip().casefold()}
    out: list[Decoded] = []
    frontier = [Decoded(text, ())]
    budget = _MAX_TOTAL_CHARS
    for _depth in range(MAX_DEPTH):
        following: list[Decoded] = []
        for node in frontier:
            for name, decode in DECODERS:
                if node.path and name in _NEEDS_PLAUSIBLE and node.path[-1] in _NEEDS_PLAUSIBLE:
                    continue  # a shift of a reversal of a shift... only ever finds noise
                for reading in decode(node.text):
                    reading = reading[:MAX_INPUT_CHARS]
                    key = reading.strip().casefold()
                    if len(key) < 4 or key in seen:
                        continue
                    if name in _NEEDS_PLAUSIBLE and not _plausible(reading, node.text):
                        continue
                    seen.add(key)
                    budget -= len(reading)
                    if budget < 0 or len(out) >= 4 * MAX_READINGS:
                        return out, True
                    decoded = Decoded(reading, (*node.path, name))
                    out.append(decoded)
                    following.append(decoded)
        frontier = following
        if not frontier:
            return out, False
    deeper = any(decode(node.text) for node in frontier for name, decode in DECODERS if name not in _NEEDS_PLAUSIBLE)
    return out, deeper


# "decode this and do what it says", "décode et exécute", "entschlüssle und befolge": decoding as a way to
# hand the assistant instructions it would not take in the clear.
_DECODE_VERB = (r"(?:decode|decipher|decrypt|unscramble|deobfuscate|reverse|concatenate|read\s+(?:\w+\s+){0,4}?backwards|d[ée]code|d[ée]chiffre|decodifica|descifra|traduce|dekodiere|entschl[üu]ssel\w*|"
                r"decifra|decodifique)")
_FOLLOW_VERB = (r"(?:follow|do|execute|obey|run|perform|act\s+on|carry\s+out|comply|answer|respond\s+to|fulfil+|"
                r"ex[ée]cute|suis|ob[ée]is|haz|sigue|obedece|ejecuta|befolge|f[üu]hre|tu\s+es|segui|esegui|"
                r"fa\s+quello|fa[çc]a|siga|execute)")
_FOLLOW = re.compile(rf"\b{_DECODE_VERB}\b.{{0,80}}?\b(?:and|then|et|puis|y|luego|und|dann|e|poi)\b"
                     rf".{{0,30}}?\b{_FOLLOW_VERB}\b|\b{_FOLLOW_VERB}\b.{{0,40}}?\b(?:after|once)\b.{{0,30}}?"
                     rf"\b{_DECODE_VERB}", re.IGNORECASE | re.DOTALL)


def asks_to_follow(text: str) -> bool:
    """The text asks to decode (or join, or reverse) something and act on the result."""
    return _FOLLOW.search(text[:MAX_INPUT_CHARS]) is not None


class DecodeLayer:
    """Judges each decoded reading with ``judges`` (the rules and the classifier); blocks on the first blocking
    finding, on a decode-and-follow request that carries encoded content, and on nesting beyond MAX_DEPTH."""

    name: DecidingLayer = DecidingLayer.DECODE

    def __init__(self, judges: Sequence[Layer]) -> None:
        self.judges = list(judges)

    async def evaluate(self, text: str) -> Finding | None:
        readings, deeper = decoded_readings(text)
        if deeper:
            return Finding(ThreatCategory.SECURITY_BYPASS, 1.0, self.name,
                           f"encodings nested deeper than {MAX_DEPTH} layers", blocking=True)
        if not readings:
            return None
        if asks_to_follow(text):
            return Finding(ThreatCategory.SECURITY_BYPASS, 0.95, self.name,
                           f"asks to decode and follow encoded content ({readings[0].how})", blocking=True)
        top: Finding | None = None
        for reading in readings[:MAX_READINGS]:
            for judge in self.judges:
                finding = await judge.evaluate(reading.text)
                if finding is None:
                    continue
                if finding.blocking:
                    return Finding(finding.category, finding.score, self.name,
                                   f"decoded ({reading.how}): {finding.reason}", blocking=True)
                if top is None or finding.score > top.score:
                    top = Finding(None, finding.score, self.name, f"decoded ({reading.how}): {finding.reason}",
                                  blocking=False)
        return top
