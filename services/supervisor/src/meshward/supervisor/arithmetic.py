"""Read arithmetic out of natural phrasing, for the supervisor's fast-tier planner.

:func:`extract_expression` turns a question such as "What is 2 to the power of 10?" into a
calculator expression (``"2 ** 10"``) in the language of ``meshward.tools.calculator``, or
returns ``None`` when the question holds no arithmetic.  It is deliberately strict: every
word of the question must be either arithmetic vocabulary or a harmless filler word ("what",
"is", "please", "calculate", ...), so "2 servers are down" or "How much disk space is free?"
give ``None`` instead of a guess.  A bare number ("what is 5") is not arithmetic either.

How phrases are read
--------------------
* symbols: ``+ - * / // % ** ^ ( ) !`` and ``×``, ``÷``; ``x`` between numbers is times;
  ``^`` is power;
* numbers: ``15``, ``15.5``, ``.5``, ``1,200`` (thousands separators, outside brackets),
  ``2e3``, ``5 thousand``, and number words: "zero" to "twenty", "thirty" to "ninety",
  "hundred", "thousand", "million", "billion" ("two hundred and five", "twenty-five",
  "a hundred");
* infix words: "plus", "added to", "increased by", "minus", "take away", "decreased by",
  "subtracted from" (reversed), "times", "multiplied by", "divided by", "over", "mod",
  "modulo", "to the power of", "raised to", "to the 3rd/third power";
* postfix words: "squared", "cubed", "factorial", ``!``, "percent"/``%`` (``P% of X`` gives
  ``(P / 100) * X``; a lone ``P%`` gives ``(P / 100)``; ``A % B`` stays modulo), "degrees"
  (converted with ``radians()``);
* prefix phrases: "square root of", "cube root of", "square of", "cube of", "factorial of",
  "log of" (base 10, as on a pocket calculator: ``log10``), "log base B of", "natural log
  of"/"ln" (``ln``), "sine/cosine/tangent of", "absolute value of", "half of", "double",
  "twice", "triple", "negative";
* lists: "add A and B", "add A to B", "sum of A, B and C", "product of ...", "multiply A by B",
  "subtract A from B", "difference between A and B", "divide A by B", "quotient of A and B",
  "average of ...", "gcd/lcm/max/min of ...", "remainder of/when A (is) divided by B";
* explicit calls such as ``sqrt(144)`` pass through; ``log(x)`` with one argument is read as
  ``log10(x)`` (use ``ln`` for the natural logarithm), ``log(x, b)`` is kept.

Precedence follows the calculator: powers bind tighter than a leading minus, so "-2 squared"
reads as ``-2 ** 2`` (that is -4); "square of -3" gives ``(-3) ** 2``.

The output uses the calculator's syntax with single spaces around binary operators and only
the parentheses that precedence needs (a percentage is always bracketed), so
"Calculate 15 * 23 + 7" gives ``"15 * 23 + 7"`` and "what's 17% of 250" gives
``"(17 / 100) * 250"``.

Everything here is bounded: questions over :data:`MAX_QUESTION_CHARS` characters give
``None``, the tokenizer runs one anchored regular expression per token (no backtracking
across the input), and bracket nesting and parser depth are capped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["MAX_QUESTION_CHARS", "describe", "extract_expression"]

MAX_QUESTION_CHARS = 2000
_MAX_PARSE_DEPTH = 200
_MAX_BRACKETS = 50
_MAX_SCALED_DIGITS = 400

# --------------------------------------------------------------------------- vocabulary

_SMALL = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
}
_TENS = {
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
_SCALES = {"thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_ORDINAL_WORDS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "twentieth": 20,
}

# Words that may surround arithmetic without changing it.
_FILLERS = frozenset(
    {
        "what",
        "whats",
        "what's",
        "is",
        "are",
        "how",
        "much",
        "many",
        "please",
        "pls",
        "calculate",
        "calc",
        "compute",
        "evaluate",
        "solve",
        "find",
        "tell",
        "me",
        "us",
        "can",
        "could",
        "would",
        "will",
        "you",
        "work",
        "figure",
        "out",
        "the",
        "a",
        "an",
        "value",
        "result",
        "answer",
        "equals",
        "equal",
        "does",
        "do",
        "give",
        "get",
        "quickly",
        "exactly",
        "hey",
        "ok",
        "okay",
        "kindly",
        "number",
        "thanks",
        "now",
    }
)

# Explicit calls: a word followed directly by "(" becomes a call to that function.
_CALLABLE = frozenset(
    {
        "sqrt",
        "cbrt",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "atan2",
        "sinh",
        "cosh",
        "tanh",
        "log",
        "log10",
        "log2",
        "ln",
        "exp",
        "abs",
        "round",
        "floor",
        "ceil",
        "factorial",
        "gcd",
        "lcm",
        "min",
        "max",
        "hypot",
        "degrees",
        "radians",
        "pow",
    }
)

Tok = tuple[str, str]

# Multi-word phrases, matched greedily (longest first) on consecutive words.  A value of None
# means "filler: drop it".
_PHRASES: dict[tuple[str, ...], Tok | None] = {
    # infix operators
    ("plus",): ("op", "+"),
    ("added", "to"): ("op", "+"),
    ("increased", "by"): ("op", "+"),
    ("minus",): ("op", "-"),
    ("take", "away"): ("op", "-"),
    ("decreased", "by"): ("op", "-"),
    ("subtracted", "from"): ("op", "-r"),
    ("times",): ("op", "*"),
    ("multiplied", "by"): ("op", "*"),
    ("x",): ("op", "*"),
    ("divided", "by"): ("op", "/"),
    ("over",): ("op", "/"),
    ("mod",): ("op", "%"),
    ("modulo",): ("op", "%"),
    ("modulus",): ("op", "%"),
    ("to", "the", "power", "of"): ("op", "**"),
    ("to", "the", "power"): ("op", "**"),
    ("raised", "to", "the", "power", "of"): ("op", "**"),
    ("raised", "to", "the", "power"): ("op", "**"),
    ("raised", "to", "the"): ("op", "**"),
    ("raised", "to"): ("op", "**"),
    ("to", "the"): ("op", "**"),
    ("power",): ("power", ""),
    # postfix
    ("squared",): ("post", "sq"),
    ("cubed",): ("post", "cube"),
    ("factorial",): ("post", "fact"),
    ("percent",): ("pct", ""),
    ("per", "cent"): ("pct", ""),
    ("degrees",): ("post", "deg"),
    ("degree",): ("post", "deg"),
    # prefix functions ("of" is optional)
    ("square", "root", "of"): ("func", "sqrt"),
    ("square", "root"): ("func", "sqrt"),
    ("sqrt", "of"): ("func", "sqrt"),
    ("sqrt",): ("func", "sqrt"),
    ("root", "of"): ("func", "sqrt"),
    ("cube", "root", "of"): ("func", "cbrt"),
    ("cube", "root"): ("func", "cbrt"),
    ("cubic", "root", "of"): ("func", "cbrt"),
    ("cbrt", "of"): ("func", "cbrt"),
    ("cbrt",): ("func", "cbrt"),
    ("factorial", "of"): ("func", "factorial"),
    ("natural", "log", "of"): ("func", "ln"),
    ("natural", "log"): ("func", "ln"),
    ("natural", "logarithm", "of"): ("func", "ln"),
    ("natural", "logarithm"): ("func", "ln"),
    ("ln", "of"): ("func", "ln"),
    ("ln",): ("func", "ln"),
    ("log", "base"): ("logbase", ""),
    ("logarithm", "base"): ("logbase", ""),
    ("log", "of"): ("func", "log10"),
    ("log",): ("func", "log10"),
    ("logarithm", "of"): ("func", "log10"),
    ("logarithm",): ("func", "log10"),
    ("log10", "of"): ("func", "log10"),
    ("log10",): ("func", "log10"),
    ("log2", "of"): ("func", "log2"),
    ("log2",): ("func", "log2"),
    ("sin", "of"): ("func", "sin"),
    ("sin",): ("func", "sin"),
    ("sine", "of"): ("func", "sin"),
    ("sine",): ("func", "sin"),
    ("cos", "of"): ("func", "cos"),
    ("cos",): ("func", "cos"),
    ("cosine", "of"): ("func", "cos"),
    ("cosine",): ("func", "cos"),
    ("tan", "of"): ("func", "tan"),
    ("tan",): ("func", "tan"),
    ("tangent", "of"): ("func", "tan"),
    ("tangent",): ("func", "tan"),
    ("exp", "of"): ("func", "exp"),
    ("absolute", "value", "of"): ("func", "abs"),
    ("abs", "of"): ("func", "abs"),
    ("floor", "of"): ("func", "floor"),
    ("ceiling", "of"): ("func", "ceil"),
    ("round",): ("func", "round"),
    ("square", "of"): ("square_of", "2"),
    ("square",): ("square_of", "2"),
    ("cube", "of"): ("square_of", "3"),
    ("cube",): ("square_of", "3"),
    ("half", "of"): ("half", ""),
    ("half",): ("half", ""),
    ("double",): ("mul_k", "2"),
    ("twice",): ("mul_k", "2"),
    ("triple",): ("mul_k", "3"),
    ("thrice",): ("mul_k", "3"),
    ("negative",): ("neg", ""),
    # lists
    ("sum", "of"): ("nary", "+"),
    ("total", "of"): ("nary", "+"),
    ("add",): ("nary", "+"),
    ("add", "up"): ("nary", "+"),
    ("product", "of"): ("nary", "*"),
    ("multiply",): ("nary", "*"),
    ("difference", "between"): ("nary", "-"),
    ("difference", "of"): ("nary", "-"),
    ("divide",): ("nary", "/"),
    ("quotient", "of"): ("nary", "/"),
    ("subtract",): ("subtract", ""),
    ("average", "of"): ("avg", ""),
    ("mean", "of"): ("avg", ""),
    ("average",): ("avg", ""),
    ("gcd", "of"): ("calln", "gcd"),
    ("gcf", "of"): ("calln", "gcd"),
    ("hcf", "of"): ("calln", "gcd"),
    ("greatest", "common", "divisor", "of"): ("calln", "gcd"),
    ("greatest", "common", "factor", "of"): ("calln", "gcd"),
    ("lcm", "of"): ("calln", "lcm"),
    ("least", "common", "multiple", "of"): ("calln", "lcm"),
    ("max", "of"): ("calln", "max"),
    ("maximum", "of"): ("calln", "max"),
    ("min", "of"): ("calln", "min"),
    ("minimum", "of"): ("calln", "min"),
    ("remainder", "of"): ("remainder", ""),
    ("remainder", "when"): ("remainder", ""),
    # constants
    ("pi",): ("const", "pi"),
    ("e",): ("const", "e"),
    ("tau",): ("const", "tau"),
    # connectives
    ("and",): ("and", ""),
    ("by",): ("by", ""),
    ("from",): ("from", ""),
    ("to",): ("to", ""),
    ("of",): ("of", ""),
    # filler phrases
    ("value", "of"): None,
    ("result", "of"): None,
    ("answer", "to"): None,
    ("answer", "for"): None,
    ("equal", "to"): None,
    ("for", "me"): None,
    ("thank", "you"): None,
}

_PHRASES_BY_FIRST: dict[str, list[tuple[tuple[str, ...], Tok | None]]] = {}
for _words, _tok in sorted(_PHRASES.items(), key=lambda item: -len(item[0])):
    _PHRASES_BY_FIRST.setdefault(_words[0], []).append((_words, _tok))

# --------------------------------------------------------------------------- tokenizer

_TRANSLATE = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-", "’": "'", "‘": "'"})
_HYPHENATED = re.compile(
    r"\b(twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)-(one|two|three|four|five|six|seven|eight|nine)\b"
)
_SPACE = re.compile(r"\s+")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,]\d)", re.ASCII)
_NUMBER = re.compile(r"(?:\d+(?:\.\d+)?|\.\d+)(?:e[+-]?\d+)?", re.ASCII)
_ORDINAL_SUFFIX = re.compile(r"(?:st|nd|rd|th)(?![a-z0-9])")
_WORD = re.compile(r"(?:log10|log2|atan2)(?![a-z0-9])|[a-z]+(?:'[a-z]+)?")
_SYMBOL = re.compile(r"\*\*|//|[-+*/%^(),!]")
_IGNORED = frozenset("?.:;=\"'$€£`")
_DIGITS = frozenset("0123456789")


class _NoMath(Exception):
    """The question is not (readable) arithmetic."""


def _number_text(raw: str) -> str:
    text = raw.replace(",", "")
    mantissa, _, exponent = text.partition("e")
    whole, dot, frac = mantissa.partition(".")
    whole = whole.lstrip("0") or "0"
    out = whole + (dot + frac if frac else "")
    if exponent:
        out += "e" + exponent
    return out


def _raw_tokens(text: str) -> list[Tok]:
    """Split into ('num'|'ord'|'word'|'sym', text) tokens; raise _NoMath on anything else."""
    tokens: list[Tok] = []
    pos = 0
    depth = 0
    n = len(text)
    while pos < n:
        ch = text[pos]
        m = _SPACE.match(text, pos)
        if m:
            pos = m.end()
            continue
        if ch in _DIGITS or (ch == "." and pos + 1 < n and text[pos + 1] in _DIGITS):
            m = _THOUSANDS.match(text, pos) if depth == 0 else None
            if m is None:
                m = _NUMBER.match(text, pos)
            if m is None:  # pragma: no cover - a digit always matches _NUMBER
                raise _NoMath
            pos = m.end()
            suffix = _ORDINAL_SUFFIX.match(text, pos)
            if suffix and "." not in m.group() and "," not in m.group():
                tokens.append(("ord", _number_text(m.group())))
                pos = suffix.end()
            else:
                tokens.append(("num", _number_text(m.group())))
            continue
        m = _WORD.match(text, pos)
        if m:
            tokens.append(("word", m.group()))
            pos = m.end()
            continue
        m = _SYMBOL.match(text, pos)
        if m:
            sym = m.group()
            if sym == "(":
                depth += 1
                if depth > _MAX_BRACKETS:
                    raise _NoMath
            elif sym == ")":
                depth = max(0, depth - 1)
            elif sym == "!" and not (pos > 0 and (text[pos - 1] in _DIGITS or text[pos - 1] == ")")):
                pos += 1  # an exclamation mark, not a factorial
                continue
            tokens.append(("sym", sym))
            pos = m.end()
            continue
        if ch in _IGNORED:
            pos += 1
            continue
        raise _NoMath
    return tokens


def _number_words(raw: list[Tok], i: int) -> tuple[int, int] | None:
    """Read number words starting at raw[i]; return (value, next index) or None."""
    total = 0
    current = 0
    last: str | None = None
    j = i
    end = i
    n = len(raw)

    def word_at(k: int) -> str | None:
        return raw[k][1] if k < n and raw[k][0] == "word" else None

    while True:
        w = word_at(j)
        if w is None:
            break
        nxt = word_at(j + 1)
        if w in ("a", "an") and last is None and nxt in ("hundred", *_SCALES):
            current, last = 1, "small"
        elif w == "and" and last in ("hundred", "scale") and nxt is not None and (nxt in _SMALL or nxt in _TENS):
            last = "and"
            j += 1
            continue  # "and" only belongs to the number if more number words follow
        elif w in _SMALL:
            value = _SMALL[w]
            if last in (None, "hundred", "scale", "and"):
                if value == 0 and last is not None:
                    break
                current += value
                last = "tens" if value == 20 else ("zero" if value == 0 else "small")
            elif last == "tens" and 1 <= value <= 9:
                current += value
                last = "small"
            else:
                break
        elif w in _TENS:
            if last not in (None, "hundred", "scale", "and"):
                break
            current += _TENS[w]
            last = "tens"
        elif w == "hundred":
            if last not in ("small", "tens") or not 0 < current % 1000 < 100:
                break
            current = current * 100
            last = "hundred"
        elif w in _SCALES:
            if last not in ("small", "tens", "hundred") or current <= 0:
                break
            total += current * _SCALES[w]
            current = 0
            last = "scale"
        else:
            break
        j += 1
        end = j
        if last == "zero":
            break
    if end == i:
        return None
    return total + current, end


def _tokens(question: str) -> list[Tok]:
    text = _HYPHENATED.sub(r"\1 \2", question.lower().translate(_TRANSLATE))
    raw = _raw_tokens(text)
    out: list[Tok] = []
    i = 0
    n = len(raw)
    while i < n:
        kind, value = raw[i]
        if kind in ("num", "ord"):
            out.append((kind, value))
            i += 1
            continue
        if kind == "sym":
            out.append(_symbol_token(value))
            i += 1
            continue
        # a word
        if value in _CALLABLE and i + 1 < n and raw[i + 1] == ("sym", "("):
            out.append(("call", value))
            i += 1
            continue
        if out and out[-1][0] == "num" and (value == "hundred" or value in _SCALES):
            scale = 100 if value == "hundred" else _SCALES[value]
            try:
                scaled = Decimal(out[-1][1]) * scale
            except ArithmeticError:  # decimal overflow on an absurd exponent
                raise _NoMath from None
            if abs(scaled.adjusted()) > _MAX_SCALED_DIGITS:
                raise _NoMath
            out[-1] = ("num", _number_text(format(scaled.normalize(), "f")))
            i += 1
            continue
        if value in _ORDINAL_WORDS:
            out.append(("ord", str(_ORDINAL_WORDS[value])))
            i += 1
            continue
        number = _number_words(raw, i)
        if number is not None:
            out.append(("num", str(number[0])))
            i = number[1]
            continue
        matched = False
        for words, tok in _PHRASES_BY_FIRST.get(value, ()):
            k = len(words)
            if i + k <= n and all(raw[i + t] == ("word", words[t]) for t in range(k)):
                if tok is not None:
                    out.append(tok)
                i += k
                matched = True
                break
        if matched:
            continue
        if value in _FILLERS:
            i += 1
            continue
        raise _NoMath
    return out


def _symbol_token(sym: str) -> Tok:
    if sym in ("(", ")", ",", "!"):
        return (sym, "")
    if sym == "%":
        return ("pct", "")
    if sym == "^":
        return ("op", "**")
    return ("op", sym)


# --------------------------------------------------------------------------- tree and printer


@dataclass(frozen=True)
class _Num:
    text: str


@dataclass(frozen=True)
class _Const:
    name: str


@dataclass(frozen=True)
class _Bin:
    op: str
    left: _Node
    right: _Node


@dataclass(frozen=True)
class _Neg:
    operand: _Node


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[_Node, ...]


@dataclass(frozen=True)
class _Group:
    inner: _Node


_Node = _Num | _Const | _Bin | _Neg | _Call | _Group

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "**": 4}
_NEG_PREC = 3
_ATOM_PREC = 5


def _prec(node: _Node) -> int:
    if isinstance(node, _Bin):
        return _PREC[node.op]
    if isinstance(node, _Neg):
        return _NEG_PREC
    return _ATOM_PREC


def _show(node: _Node) -> str:
    if isinstance(node, _Num):
        return node.text
    if isinstance(node, _Const):
        return node.name
    if isinstance(node, _Group):
        return f"({_show(node.inner)})"
    if isinstance(node, _Call):
        return f"{node.name}({', '.join(_show(a) for a in node.args)})"
    if isinstance(node, _Neg):
        inner = _show(node.operand)
        return f"-({inner})" if _prec(node.operand) <= _NEG_PREC else f"-{inner}"
    p = _PREC[node.op]
    left = _show(node.left)
    right = _show(node.right)
    if _prec(node.left) < p or (node.op == "**" and _prec(node.left) <= p):
        left = f"({left})"
    if _prec(node.right) <= p or isinstance(node.right, _Neg):
        if not (node.op == "**" and isinstance(node.right, _Bin) and node.right.op == "**"):
            right = f"({right})"
    return f"{left} {node.op} {right}"


def _has_operation(node: _Node) -> bool:
    if isinstance(node, _Bin | _Call):
        return True
    if isinstance(node, _Neg):
        return _has_operation(node.operand)
    if isinstance(node, _Group):
        return _has_operation(node.inner)
    return False


# --------------------------------------------------------------------------- parser

_OPERAND_START = frozenset({"num", "const", "(", "call", "func", "logbase", "nary", "subtract", "avg", "calln"})
_OPERAND_START |= {"remainder", "square_of", "half", "mul_k", "neg"}


class _Parser:
    def __init__(self, tokens: list[Tok]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    # ---- helpers

    def peek(self, offset: int = 0) -> Tok | None:
        k = self.pos + offset
        return self.tokens[k] if k < len(self.tokens) else None

    def kind(self, offset: int = 0) -> str | None:
        tok = self.peek(offset)
        return tok[0] if tok else None

    def take(self) -> Tok:
        tok = self.peek()
        if tok is None:
            raise _NoMath
        self.pos += 1
        return tok

    def expect(self, kind: str) -> None:
        if self.kind() != kind:
            raise _NoMath
        self.pos += 1

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_PARSE_DEPTH:
            raise _NoMath

    def starts_operand(self, offset: int = 0) -> bool:
        tok = self.peek(offset)
        if tok is None:
            return False
        return tok[0] in _OPERAND_START or tok == ("op", "-") or tok == ("op", "+")

    # ---- grammar

    def parse(self) -> _Node:
        node = self.expr()
        if self.pos != len(self.tokens):
            raise _NoMath
        return node

    def expr(self) -> _Node:
        self.enter()
        try:
            left = self.term()
            while self.kind() == "op" and self.peek()[1] in ("+", "-", "-r"):  # type: ignore[index]
                op = self.take()[1]
                right = self.term()
                left = _Bin("-", right, left) if op == "-r" else _Bin(op, left, right)
            return left
        finally:
            self.depth -= 1

    def term(self) -> _Node:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is not None and tok[0] == "op" and tok[1] in ("*", "/", "//", "%"):
                self.pos += 1
                left = _Bin(tok[1], left, self.unary())
            elif tok is not None and tok[0] == "pct" and self.starts_operand(1):
                self.pos += 1  # "A % B" between operands is modulo
                left = _Bin("%", left, self.unary())
            else:
                return left

    def unary(self) -> _Node:
        self.enter()
        try:
            tok = self.peek()
            if tok in (("op", "-"), ("neg", "")):
                self.pos += 1
                return _Neg(self.unary())
            if tok == ("op", "+"):
                self.pos += 1
                return self.unary()
            return self.power()
        finally:
            self.depth -= 1

    def power(self) -> _Node:
        base = self.postfix()
        if self.peek() == ("op", "**"):
            self.pos += 1
            if self.kind() == "ord":
                exponent: _Node = _Num(self.take()[1])
            else:
                exponent = self.unary()
            if self.kind() == "power":
                self.pos += 1
            return _Bin("**", base, exponent)
        return base

    def postfix(self) -> _Node:
        node = self.primary()
        while True:
            tok = self.peek()
            if tok == ("post", "sq"):
                node = _Bin("**", node, _Num("2"))
            elif tok == ("post", "cube"):
                node = _Bin("**", node, _Num("3"))
            elif tok in (("post", "fact"), ("!", "")):
                node = _Call("factorial", (node,))
            elif tok == ("post", "deg"):
                node = _Call("radians", (node,))
            elif tok is not None and tok[0] == "pct":
                if self.kind(1) == "of":
                    self.pos += 2
                    node = _Bin("*", _Group(_Bin("/", node, _Num("100"))), self.unary())
                    continue
                if self.starts_operand(1):
                    return node  # modulo; term() reads it
                node = _Group(_Bin("/", node, _Num("100")))
            else:
                return node
            self.pos += 1

    def items(self, separators: tuple[str, ...], minimum: int = 2) -> list[_Node]:
        found = [self.expr()]
        while self.kind() in separators:
            self.pos += 1
            if self.kind() == "and":  # "3, 4, and 5"
                self.pos += 1
            found.append(self.expr())
        if len(found) < minimum:
            raise _NoMath
        return found

    def primary(self) -> _Node:
        self.enter()
        try:
            return self._primary()
        finally:
            self.depth -= 1

    def _primary(self) -> _Node:
        kind, value = self.take()
        if kind == "num":
            return _Num(value)
        if kind == "const":
            return _Const(value)
        if kind == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if kind == "call":
            self.expect("(")
            args = [self.expr()]
            while self.kind() == ",":
                self.pos += 1
                args.append(self.expr())
            self.expect(")")
            name = "log10" if value == "log" and len(args) == 1 else value
            return _Call(name, tuple(args))
        if kind == "func":
            return _Call(value, (self.unary(),))
        if kind == "logbase":
            base = self.postfix()
            if self.kind() == "of":
                self.pos += 1
            return _Call("log", (self.unary(), base))
        if kind == "nary":
            separators = {
                "+": ("and", ",", "to"),
                "*": ("by", "and", ","),
                "-": ("and", ","),
                "/": ("by", "and"),
            }[value]
            found = self.items(separators)
            node = found[0]
            for item in found[1:]:
                node = _Bin(value, node, item)
            return node
        if kind == "subtract":
            first = self.expr()
            if self.kind() == "from":
                self.pos += 1
                return _Bin("-", self.expr(), first)
            if self.kind() in ("and", ","):
                self.pos += 1
                return _Bin("-", first, self.expr())
            raise _NoMath
        if kind == "avg":
            if self.kind() == "of":
                self.pos += 1
            found = self.items(("and", ","))
            total = found[0]
            for item in found[1:]:
                total = _Bin("+", total, item)
            return _Bin("/", _Group(total), _Num(str(len(found))))
        if kind == "calln":
            return _Call(value, tuple(self.items(("and", ","))))
        if kind == "remainder":
            dividend = self.unary()
            if self.peek() not in (("op", "/"), ("by", ""), ("and", "")):
                raise _NoMath
            self.pos += 1
            return _Bin("%", dividend, self.unary())
        if kind == "square_of":
            return _Bin("**", self.unary(), _Num(value))
        if kind == "post" and value == "fact":  # "factorial 5"
            return _Call("factorial", (self.unary(),))
        if kind == "half":
            return _Bin("/", self.unary(), _Num("2"))
        if kind == "mul_k":
            return _Bin("*", _Num(value), self.unary())
        raise _NoMath


# --------------------------------------------------------------------------- public API


def extract_expression(question: str) -> str | None:
    """Return a calculator expression for the arithmetic in ``question``, or None."""
    if not isinstance(question, str) or len(question) > MAX_QUESTION_CHARS:
        return None
    try:
        tokens = _tokens(question)
        if not tokens:
            return None
        node = _Parser(tokens).parse()
    except (_NoMath, RecursionError):
        return None
    if not _has_operation(node):
        return None
    return _show(node)


_DESCRIBE_TOKEN = re.compile(r"\s+|\*\*|//|\d+(?:\.\d+)?(?:e[+-]?\d+)?|\.\d+|[A-Za-z_][A-Za-z_0-9]*|[-+*/%^(),]|.")


def describe(expression: str) -> str:
    """Pretty-print a calculator expression for a templated answer.

    Spacing is normalised to one space around binary operators and after commas, power is
    written ``^`` with no spaces (``2 ** 10`` -> ``2^10``), ``*`` as ``×`` and ``/`` as ``÷``.
    The calculator reads all of these, so the description still evaluates to the same value.
    Text longer than :data:`MAX_QUESTION_CHARS` is only trimmed.
    """
    text = expression.strip()
    if len(text) > MAX_QUESTION_CHARS:
        return text
    parts: list[str] = []
    prev: str | None = None  # last significant token
    for m in _DESCRIBE_TOKEN.finditer(text):
        tok = m.group()
        if tok.isspace():
            continue
        binary = (
            tok in ("+", "-", "*", "/", "//", "%")
            and prev is not None
            and (prev not in ("(", ",", "+", "-", "*", "/", "//", "%", "**", "^"))
        )
        if tok in ("**", "^"):
            parts.append("^")
        elif binary:
            parts.append(f" {({'*': '×', '/': '÷'}).get(tok, tok)} ")
        elif tok == ",":
            parts.append(", ")
        else:
            parts.append(tok)
        prev = tok
    return "".join(parts)
