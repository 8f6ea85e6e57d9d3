"""The security training set: generated from templates, hand-written examples and benign chat, deterministic.

* ``data/templates.yaml`` - template families x ``data/slots.yaml`` fillers (seeded draws); each template (one
  phrasing, with all its draws) is one group of the held-out split, so the test split holds phrasings the model
  never saw, while every family (attack idea) also has phrasings in training.
* ``data/handwritten.yaml`` - longer, messier examples (multi-turn set-ups, documents and tool output with
  hidden instructions, social engineering, hard negatives); each is its own group.
* ``data/chitchat_benign.txt`` - benign conversation (Chit Chat dataset sample), groups of 10 lines.
* obfuscations - a seeded share of examples gets a transformed copy in the same group: leetspeak, homoglyphs,
  zero-width characters, spaced-out letters, case and typos (benign ones too, so that obfuscation alone is not
  a signal). ``eval:`` copies hide the text in base64, hex or Unicode tag characters behind a harmless
  carrier; they only make sense through the run-time decoding views, so they are evaluated, never trained on.
"""
from __future__ import annotations

import base64
import random
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from meshward.training import Example, dedupe

__all__ = ["BENIGN", "DATA_DIR", "ENCODERS", "LABELS", "build_examples", "external_sets", "family_of", "transform"]

DATA_DIR = Path(__file__).resolve().parent / "data"
BENIGN = "benign"
LABELS = (BENIGN, "prompt_extraction", "credential_extraction", "role_manipulation", "security_bypass",
          "config_inspection", "harmful_content")
SEED = 20240611
SAMPLES_PER_FAMILY = 20
OBFUSCATE_ATTACK = 0.35
OBFUSCATE_BENIGN = 0.35  # as often as attacks: an obfuscation alone must not look like an attack
HIDE_ATTACK = 0.15
HIDE_BENIGN = 0.05
_SLOT = re.compile(r"\{(\w+)\}")
MAX_SLOT_DEPTH = 3  # a value naming a slot that names a slot...: a cycle in slots.yaml fails instead of recursing


@cache
def _yaml(name: str) -> Any:
    return yaml.safe_load((DATA_DIR / name).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ obfuscations
_LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "g": "9", "l": "1"}
_HOMOGLYPH = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "y": "у", "i": "і", "s": "ѕ", "A": "А",
              "E": "Е", "O": "О", "P": "Р", "C": "С", "T": "Т", "H": "Н", "K": "К", "M": "М", "B": "В"}
_ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")


def _leet(text: str, rng: random.Random) -> str:
    p = rng.uniform(0.4, 0.9)
    return "".join(_LEET[c.lower()] if c.lower() in _LEET and rng.random() < p else c for c in text)


def _homoglyph(text: str, rng: random.Random) -> str:
    p = rng.uniform(0.3, 0.8)
    return "".join(_HOMOGLYPH[c] if c in _HOMOGLYPH and rng.random() < p else c for c in text)


def _zero_width(text: str, rng: random.Random) -> str:
    out = []
    for c in text:
        out.append(c)
        if c.isalpha() and rng.random() < 0.35:
            out.append(rng.choice(_ZERO_WIDTH))
    return "".join(out)


def _spaced(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    long_words = [i for i, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
    if not long_words:
        return text
    sep = rng.choice([" ", ".", "-", " . ", "_"])
    for i in rng.sample(long_words, k=min(len(long_words), rng.randint(1, 3))):
        words[i] = sep.join(words[i])
    return " ".join(words)


def _case(text: str, rng: random.Random) -> str:
    mode = rng.randrange(3)
    if mode == 0:
        return text.upper()
    if mode == 1:
        return text.lower().rstrip(".!?")
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def _typo(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(max(1, len(chars) - 1))
        if chars[i].isalpha() and i + 1 < len(chars) and chars[i + 1].isalpha():
            if rng.random() < 0.5:
                chars[i], chars[i + 1] = chars[i + 1], chars[i]
            else:
                del chars[i]
    return "".join(chars)


TRANSFORMS = {"leet": _leet, "homoglyph": _homoglyph, "zero_width": _zero_width, "spaced": _spaced, "case": _case,
              "typo": _typo}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _tags(text: str) -> str:
    return "".join(chr(0xE0000 + ord(c)) for c in text if 0x20 <= ord(c) < 0x7F)


_MORSE = dict(zip("abcdefghijklmnopqrstuvwxyz0123456789", (
    ".- -... -.-. -.. . ..-. --. .... .. .--- -.- .-.. -- -. --- .--. --.- .-. ... - ..- ...- .-- -..- -.-- --.. "
    "----- .---- ..--- ...-- ....- ..... -.... --... ---.. ----.").split(), strict=True))
_BRAILLE = dict(zip("abcdefghijklmnopqrstuvwxyz", "⠁⠃⠉⠙⠑⠋⠛⠓⠊⠚⠅⠇⠍⠝⠕⠏⠟⠗⠎⠞⠥⠧⠺⠭⠽⠵", strict=True))

# How users hide a request from a filter (issue 12's "encoded payloads"): each turns a sentence into a spelling
# a reader (or an LLM) can undo. Used to fill {enc_payload} / {enc_benign}; the run time decodes them all
# (meshward.security.decoding), the model learns the request around them.
ENCODERS = {
    "base64": _b64,
    "hex": lambda t: t.encode().hex(),
    "rot13": lambda t: t.translate(str.maketrans("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                                                 "nopqrstuvwxyzabcdefghijklmNOPQRSTUVWXYZABCDEFGHIJKLM")),
    "morse": lambda t: " / ".join(" ".join(_MORSE[c] for c in w if c in _MORSE) for w in t.lower().split()),
    "braille": lambda t: "".join(_BRAILLE.get(c, " " if c == " " else "") for c in t.lower()),
    "reversed": lambda t: t[::-1],
    "url": lambda t: "".join(f"%{b:02X}" for b in t.encode()),
    "html": lambda t: "".join(f"&#{ord(c)};" for c in t),
    "binary": lambda t: " ".join(f"{b:08b}" for b in t.encode()),
    "leet": lambda t: t.translate(str.maketrans("aeiost", "431057")),
}

HIDERS = {
    "base64": lambda carrier, text: f"{carrier} {_b64(text)}",
    "hex": lambda carrier, text: f"{carrier} {text.encode().hex()}",
    "tags": lambda carrier, text: f"{carrier}{_tags(text)}",
}


def transform(name: str, text: str, seed: int = 0) -> str:
    """One named obfuscation (leet, homoglyph, zero_width, spaced, case, typo) or hider (base64, hex, tags)."""
    rng = random.Random(seed)
    if name in HIDERS:
        return HIDERS[name]("Look at this:", text)
    return TRANSFORMS[name](text, rng)


# ------------------------------------------------------------------ generation
def _fill(template: str, slots: dict[str, list[str]], rng: random.Random) -> str:
    text = _expand(template, slots, rng, depth=0)
    text = re.sub(r"\s+([?.!,])", r"\1", text)
    text = re.sub(r"[ \t]+", " ", text).strip()
    return text[0].upper() + text[1:] if text and rng.random() < 0.7 else text


def _expand(text: str, slots: dict[str, list[str]], rng: random.Random, depth: int) -> str:
    """Fill each ``{slot}``; a drawn value may name slots of its own (an address inside an action), filled in turn.
    Inside values, braces that name no slot are kept as written (code and f-strings carry them)."""

    def one(match: re.Match[str]) -> str:
        values = slots.get(match.group(1))
        if values is None:
            if depth:
                return match.group(0)
            raise KeyError(f"unknown slot {{{match.group(1)}}} in template {text!r}")
        if depth >= MAX_SLOT_DEPTH:
            raise ValueError(f"slot {{{match.group(1)}}} nests deeper than {MAX_SLOT_DEPTH} levels")
        return _expand(str(rng.choice(values)), slots, rng, depth + 1)

    return _SLOT.sub(one, text)


def _family_examples(family: dict[str, Any], slots: dict[str, list[str]], rng: random.Random) -> list[Example]:
    """A family's draws; each template (one phrasing) is its own group of the held-out split."""
    templates: list[str] = family["templates"]
    n = int(family.get("n", SAMPLES_PER_FAMILY))
    texts: dict[str, int] = {}
    if not any(_SLOT.search(t) for t in templates):
        texts = {t: i for i, t in enumerate(templates)}
    else:
        for _ in range(n * 6):
            if len(texts) >= n:
                break
            i = rng.randrange(len(templates))
            texts.setdefault(_fill(templates[i], slots, rng), i)
    return [Example(t, family["label"], f"tpl:{family['id']}:{i}", "template") for t, i in texts.items()]


def family_of(group: str) -> str | None:
    """The template family of a ``tpl:<family>:<template>`` group; other groups have none."""
    parts = group.split(":")
    return parts[1] if parts[0] == "tpl" and len(parts) == 3 else None


def _with_variants(examples: list[Example], rng: random.Random, carriers: list[str]) -> list[Example]:
    out: list[Example] = []
    for e in examples:
        out.append(e)
        attack = e.label != BENIGN
        if rng.random() < (OBFUSCATE_ATTACK if attack else OBFUSCATE_BENIGN):
            name = rng.choice(list(TRANSFORMS))
            out.append(Example(TRANSFORMS[name](e.text, rng), e.label, e.group, f"obfuscation:{name}"))
        if rng.random() < (HIDE_ATTACK if attack else HIDE_BENIGN) and len(e.text) < 400:
            name = rng.choice(list(HIDERS))
            out.append(Example(HIDERS[name](rng.choice(carriers), e.text), e.label, e.group, f"eval:hidden-{name}"))
    return out


def build_examples(seed: int = SEED) -> tuple[list[Example], dict[str, Any]]:
    """Every example, in a fixed order; ``sources`` counts where they came from (for the model card)."""
    rng = random.Random(seed)
    slots: dict[str, list[str]] = dict(_yaml("slots.yaml"))
    for slot, plain in (("enc_payload", "enc_attack_plain"), ("enc_benign", "enc_benign_plain")):
        slots[slot] = [encode(text) for text in slots[plain] for encode in ENCODERS.values()]
    families = _yaml("templates.yaml")["families"]
    examples: list[Example] = []
    for family in families:
        if family["label"] not in LABELS:
            raise ValueError(f"family {family['id']}: unknown label {family['label']!r}")
        examples.extend(_family_examples(family, slots, rng))
    for label, items in _yaml("handwritten.yaml").items():
        if label not in LABELS:
            raise ValueError(f"handwritten.yaml: unknown label {label!r}")
        examples.extend(Example(t.strip(), label, f"hw:{label}:{i}", "handwritten") for i, t in enumerate(items))
    chat = [ln.strip() for ln in (DATA_DIR / "chitchat_benign.txt").read_text(encoding="utf-8").splitlines()
            if ln.strip() and not ln.startswith("#")]
    examples.extend(Example(t, BENIGN, f"chitchat:{i // 10}", "chitchat") for i, t in enumerate(chat))
    examples = dedupe(examples)
    examples = dedupe(_with_variants(examples, rng, slots["carrier"]))
    sources: dict[str, int] = {}
    for e in examples:
        kind = e.source.split(":")[0] if not e.source.startswith("eval:") else "eval-only hidden"
        sources[kind] = sources.get(kind, 0) + 1
    return examples, {"families": len(families), **sources}


def external_sets() -> dict[str, list[tuple[str, bool]]]:
    """Public corpora installed with the train extra, never trained on: (text, is_attack) pairs."""
    out: dict[str, list[tuple[str, bool]]] = {}
    try:
        import importlib.resources as resources
        import json

        text = resources.files("bastioncorpus").joinpath("corpus", "injections.jsonl").read_text(encoding="utf-8")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        out["bastioncorpus 0.6.0"] = [(r["text"].replace("{canary}", "ZX-4471"), r["label"] == "malicious") for r in rows]
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    try:
        import importlib.resources as resources
        import json

        rows = json.loads(resources.files("jailbreak_corpus_mini").joinpath("corpus.json").read_text(encoding="utf-8"))
        out["jailbreak-corpus-mini-py 0.1.0"] = [(r["prompt"], True) for r in rows]
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    return out
