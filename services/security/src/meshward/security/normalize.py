"""Text normalisation for the security rules: fold obfuscations into plain lowercase variants.

`normalize()` returns every distinct variant worth matching against; a rule fires if it
matches any of them. Pure, bounded and total: any `str` gives a list, never an exception.
"""
from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterable

MAX_INPUT_CHARS = 20_000
MAX_DECODED_SEGMENTS = 8
MIN_SEGMENT_CHARS = 16
_MAX_SEGMENT_TRIES = 32  # candidates that fail to decode still cost time: cap them too

_SPACE_CONTROLS = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85"


def _invisible_code_points() -> Iterable[int]:
    # Cf above U+1FFFF exist only in the tag block, listed explicitly below.
    for cp in range(0x20000):
        if unicodedata.category(chr(cp)) in ("Cc", "Cf") and chr(cp) not in _SPACE_CONTROLS:
            yield cp
    yield from range(0x200B, 0x2010)  # zero-width space/joiners, LRM/RLM
    yield from range(0x2060, 0x2065)  # word joiner, invisible operators
    yield from range(0xE0000, 0xE0080)  # Unicode tags ("ASCII smuggling")
    yield from range(0xFE00, 0xFE10)  # variation selectors
    yield from range(0xE0100, 0xE01F0)
    yield from (0xFEFF, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800)  # BOM, CGJ, Hangul fillers, braille blank


_CLEAN_TABLE: dict[int, str | None] = dict.fromkeys(_invisible_code_points())
_CLEAN_TABLE.update({ord(c): " " for c in _SPACE_CONTROLS})
_CLEAN_TABLE.update({ord(c): "'" for c in "\u2018\u2019\u201a\u201b\u2032\u02bc\u00b4\u0060"})
_CLEAN_TABLE.update({ord(c): '"' for c in "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb"})

# Case matters before folding: Greek capital eta looks like H, small eta like n.
_HOMOGLYPHS = str.maketrans({
    # Cyrillic
    "А": "a", "В": "b", "Е": "e", "К": "k", "М": "m", "Н": "h", "О": "o", "Р": "p", "С": "c", "Т": "t",
    "Х": "x", "У": "y", "Ѕ": "s", "І": "i", "Ј": "j", "Ԁ": "d", "Ԛ": "q", "Ԝ": "w", "Ү": "y", "Ӏ": "l",
    "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t",
    "х": "x", "у": "y", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ү": "y", "ӏ": "l",
    "һ": "h", "ь": "b", "ѵ": "v", "ɡ": "g", "ɩ": "i", "ɑ": "a", "ո": "n", "ս": "u", "օ": "o",
    # Greek
    "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m", "Ν": "n", "Ο": "o",
    "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x",
    "α": "a", "β": "b", "γ": "y", "ε": "e", "η": "n", "ι": "i", "κ": "k", "μ": "u", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ς": "c",
})

_HOMOGLYPH_KEYS = frozenset(chr(cp) for cp in _HOMOGLYPHS)


def is_lookalike(char: str) -> bool:
    """Whether ``char`` is a Cyrillic or Greek letter that passes for a Latin one (what obfuscation swaps in)."""
    return char in _HOMOGLYPH_KEYS

_WORD = re.compile(r"\w+")

_LEET_CHARS = "0134579@$!|"
_LEET_I = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
                         "!": "i", "|": "l", "9": "g"})
_LEET_L = str.maketrans({"0": "o", "1": "l", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
                         "!": "i", "|": "l", "9": "g"})
_LEET_TOKEN = re.compile(r"[a-z0-9@$!|]+")

# Four or more single letters/digits separated by spaces, dots, dashes...: "i g n o r e", "p.a.s.s".
_SPACED_RUN = re.compile(r"(?<![^\W_])[^\W_](?:[ .\-_*·•]{1,3}[^\W_](?![^\W_])){3,}")
_GAP = re.compile(r"[ .\-_*·•]+")
_WS = re.compile(r"\s+")
_TAG_RUN = re.compile("[\U000E0020-\U000E007E]+")  # tags spelling ASCII: invisible text smuggled in

_B64_CANDIDATE = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_SEGMENT_CHARS},}}={{0,2}}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


def normalize(text: str) -> list[str]:
    """Distinct, non-empty lowercase variants of `text` (first: the plain folded text)."""
    return list(dict.fromkeys(v for group in readings(text) for v in group))


def readings(text: str) -> list[list[str]]:
    """The pieces of content in `text`, each with its alternative readings (distinct, non-empty, lowercase).

    The first piece is the message itself (plain, homoglyph-folded, letters of spaced-out words joined,
    de-leeted); then any text smuggled in Unicode tag characters; then each decoded base64/hex run. Readings of
    one piece say the same thing in different spellings; different pieces are different content.
    """
    text = text[:MAX_INPUT_CHARS]
    cleaned = unicodedata.normalize("NFKC", text).translate(_CLEAN_TABLE)
    pieces = [_variants(cleaned)]
    hidden = " ".join(_TAG_RUN.findall(text))
    if hidden:
        pieces.append(_variants("".join(chr(ord(c) - 0xE0000) if c != " " else c for c in hidden)))
    for decoded in decode_segments(cleaned):
        pieces.append(_variants(unicodedata.normalize("NFKC", decoded).translate(_CLEAN_TABLE)))
    out: list[list[str]] = []
    for piece in pieces:
        distinct = [v for v in dict.fromkeys(piece) if v]
        if distinct and distinct not in out:
            out.append(distinct)
    return out


def revealed(text: str) -> str:
    """The text as it reads with its hidden content revealed: base64/hex runs replaced by what they decode to, text
    smuggled in Unicode tag characters appended, NFKC-normalised, invisible characters dropped; a plain question
    reads as itself. Two messages with one carrier sentence and different smuggled payloads read differently here;
    as raw text an encoder sees the same sentence plus noise."""
    text = text[:MAX_INPUT_CHARS]
    hidden = "".join(chr(ord(c) - 0xE0000) for c in "".join(_TAG_RUN.findall(text)))
    tries = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal tries
        tries += 1
        decoded = _decode(match.group()) if tries <= _MAX_SEGMENT_TRIES else None
        return f" {decoded} " if decoded is not None else match.group()

    visible = _B64_CANDIDATE.sub(swap, _TAG_RUN.sub(" ", text))
    folded = unicodedata.normalize("NFKC", f"{visible} {hidden}").translate(_CLEAN_TABLE)
    return _WS.sub(" ", folded).strip()


def decode_segments(text: str, limit: int = MAX_DECODED_SEGMENTS) -> list[str]:
    """Base64 (standard or URL-safe) and hex runs of >= 16 chars that decode to mostly printable text."""
    found: list[str] = []
    for tries, match in enumerate(_B64_CANDIDATE.finditer(text[:MAX_INPUT_CHARS])):
        if len(found) >= limit or tries >= _MAX_SEGMENT_TRIES:
            break
        decoded = _decode(match.group())
        if decoded is not None:
            found.append(decoded)
    return found


def _variants(cleaned: str) -> list[str]:
    plain = cleaned.casefold()
    folded = plain if cleaned.isascii() else _strip_marks(_WORD.sub(_fold_word, cleaned).casefold())
    raw = [plain, folded]
    if _SPACED_RUN.search(folded):
        raw.append(_SPACED_RUN.sub(_join_run, folded))
    for candidate in raw[1:]:
        if any(c in candidate for c in _LEET_CHARS):
            raw.append(_deleet(candidate, _LEET_I))
            if "1" in candidate:
                raw.append(_deleet(candidate, _LEET_L))
    return [_WS.sub(" ", v).strip() for v in raw]


def _fold_word(match: re.Match[str]) -> str:
    # Only words written entirely in ASCII and look-alike letters are folded: "раѕѕwоrd" is an obfuscated
    # "password", while "пароль" (letters with no Latin twin) is Russian and stays as written.
    word = match.group()
    if all(c.isascii() or c in _HOMOGLYPH_KEYS or not c.isalpha() for c in word):
        return word.translate(_HOMOGLYPHS)
    return word


def _strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _join_run(match: re.Match[str]) -> str:
    # Letters of one word are split by the narrowest gap; a wider gap separates words.
    # When letters are joined by dots or dashes, a plain space between them is a word break too.
    run = match.group()
    gaps = _GAP.findall(run)
    narrowest = min(len(g) for g in gaps)
    spaces_split = any(" " not in g for g in gaps)
    return _GAP.sub(lambda g: " " if len(g.group()) > narrowest or (spaces_split and " " in g.group()) else "", run)


def _deleet(text: str, table: dict[int, str]) -> str:
    def decode(match: re.Match[str]) -> str:
        token = match.group()
        # Plain numbers ("15", "250") and plain words stay as they are.
        if len(token) > 40 or token.isalpha() or not any(c.isalpha() for c in token):
            return token
        core = token.rstrip("!|")  # trailing "!" is punctuation, not a letter
        return core.translate(table) + token[len(core):]

    return _LEET_TOKEN.sub(decode, text)


def _decode(segment: str) -> str | None:
    raw: bytes
    try:
        if len(segment) % 2 == 0 and _HEX.fullmatch(segment):
            raw = bytes.fromhex(segment)
        else:
            body = segment.rstrip("=")
            if len(body) % 4 == 1:
                return None
            altchars = b"-_" if ("-" in body or "_" in body) else None
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=altchars, validate=True)
    except (binascii.Error, ValueError):
        return None
    return printable_text(raw)


def printable_text(raw: bytes) -> str | None:
    """``raw`` as UTF-8 text when it reads as text (>= 90% printable, >= 4 letters): what a decoder found, or noise."""
    decoded = raw.decode("utf-8", errors="replace")
    printable = sum(1 for c in decoded if c != "\ufffd" and (c.isprintable() or c in "\t\n\r"))
    letters = sum(1 for c in decoded if c.isalpha())
    if printable < 0.9 * len(decoded) or letters < 4:
        return None
    return decoded
