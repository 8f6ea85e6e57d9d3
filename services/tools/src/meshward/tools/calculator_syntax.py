"""The calculator's one grammar: symbols and natural phrasing, parsed by lark (LALR) into a small tree.

:func:`parse` reads "15 * 23 + 7", "sqrt(144) + 3", "What is 2 to the power of 10?", "17% of 250",
"1200 divided by 16", "five plus three" or "Calculate 15 * 23 + 7" into :class:`Node` objects, and
:func:`show` prints a tree back in the calculator's symbolic syntax ("2 ** 10", "(17 / 100) * 250").
Text outside the grammar raises :class:`NotAnExpression`, naming where it stopped.

The language
------------
* numbers: ``15``, ``15.5``, ``.5``, ``1e3``, ``1_000``, ``1,200`` (thousands separators outside
  brackets), ``5 thousand``, ``1.5 million``, and number words from "zero" to "nine hundred
  ninety-nine billion ..." ("two hundred and five", "twenty-five", "a hundred");
* constants: ``pi``, ``e``, ``tau``;
* infix: ``+ - * / // % ** ^`` (``^`` is power, not xor), ``×`` ``÷``, ``x`` between numbers, and
  the words in :data:`INFIX` ("plus", "divided by", "to the power of", "mod", ...); "A subtracted
  from B" is ``B - A``;
* postfix: "squared", "cubed", "factorial", ``!``, "degrees" (to radians), and percent: ``P% of X``
  is ``(P / 100) * X``, a lone ``P%`` is ``(P / 100)``, and ``A % B`` between operands is modulo;
* prefix: ``-``, "minus", "negative", and the phrases in :data:`PREFIX` ("square root of", "log of",
  "natural log of", "sine of", "half of", "double", "square of", "√", ...); "log base B of X";
* calls: ``name(args)`` for every function in ``FUNCTIONS`` of :mod:`meshward.tools.calculator`;
* lists: "sum of", "add", "product of", "multiply", "divide", "difference between", "quotient of",
  "average of", "gcd/lcm/max/min of", with items separated by ``,``, "and", "to" or "by";
  "subtract A from B"; "remainder of/when A (is) divided by B";
* filler words and phrases (:data:`FILLERS`: "what is", "please", "calculate", "equal to", ...) are
  allowed before and after the calculation, and ``? . : ; = ' " $ € £`` anywhere.

The logarithm convention: ``log`` is base 10 (as on a pocket calculator), ``ln`` is natural,
``log2`` base 2, ``log(x, b)`` base b.  ``log(x)`` reads as ``log10(x)`` and is shown so.

Precedence is Python's: powers are right-associative and bind tighter than a leading minus
(``-2 ** 2`` is -4, "square of -3" is ``(-3) ** 2``).

The parser is LALR with a contextual lexer and builds nodes while it reduces (no parse tree, no
recursion), so its time and memory are linear in the text, which the caller bounds.
"""

from __future__ import annotations

import re
from decimal import Decimal

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

__all__ = [
    "CALLABLE",
    "FILLERS",
    "INFIX",
    "PREFIX",
    "Bin",
    "Call",
    "Const",
    "Group",
    "Neg",
    "Node",
    "NotAnExpression",
    "Num",
    "nothing_to_calculate",
    "parse",
    "show",
]

# Functions that may be called with brackets; their arity and domain live with the evaluator.
CALLABLE = (
    "sqrt cbrt sin cos tan asin acos atan atan2 sinh cosh tanh log log10 log2 ln exp abs round floor ceil "
    "factorial gcd lcm min max hypot degrees radians pow"
).split()

# Infix words and symbols -> operator.
INFIX: dict[str, str] = {
    "+": "+", "plus": "+", "added to": "+", "increased by": "+",
    "-": "-", "minus": "-", "take away": "-", "decreased by": "-",
    "*": "*", "times": "*", "multiplied by": "*", "x": "*",
    "/": "/", "divided by": "/", "over": "/",
    "//": "//",
    "mod": "%", "modulo": "%", "modulus": "%",
    "**": "**", "^": "**", "to the power of": "**", "to the power": "**", "raised to the power of": "**",
    "raised to the power": "**", "raised to the": "**", "raised to": "**", "to the": "**",
}  # fmt: skip

# Prefix phrases -> (kind, argument).  kind: "call" f(x), "pow" x ** k, "div" x / k, "mul" k * x.
PREFIX: dict[str, tuple[str, str]] = {
    "square root of": ("call", "sqrt"), "square root": ("call", "sqrt"), "sqrt of": ("call", "sqrt"),
    "sqrt": ("call", "sqrt"), "root of": ("call", "sqrt"), "√": ("call", "sqrt"),
    "cube root of": ("call", "cbrt"), "cube root": ("call", "cbrt"), "cubic root of": ("call", "cbrt"),
    "cbrt of": ("call", "cbrt"), "cbrt": ("call", "cbrt"),
    "factorial of": ("call", "factorial"), "factorial": ("call", "factorial"),
    "natural log of": ("call", "ln"), "natural log": ("call", "ln"), "natural logarithm of": ("call", "ln"),
    "natural logarithm": ("call", "ln"), "ln of": ("call", "ln"), "ln": ("call", "ln"),
    "log of": ("call", "log10"), "log": ("call", "log10"), "logarithm of": ("call", "log10"),
    "logarithm": ("call", "log10"), "log10 of": ("call", "log10"), "log10": ("call", "log10"),
    "log2 of": ("call", "log2"), "log2": ("call", "log2"),
    "sin of": ("call", "sin"), "sin": ("call", "sin"), "sine of": ("call", "sin"), "sine": ("call", "sin"),
    "cos of": ("call", "cos"), "cos": ("call", "cos"), "cosine of": ("call", "cos"), "cosine": ("call", "cos"),
    "tan of": ("call", "tan"), "tan": ("call", "tan"), "tangent of": ("call", "tan"), "tangent": ("call", "tan"),
    "exp of": ("call", "exp"), "absolute value of": ("call", "abs"), "abs of": ("call", "abs"),
    "floor of": ("call", "floor"), "ceiling of": ("call", "ceil"), "round": ("call", "round"),
    "square of": ("pow", "2"), "square": ("pow", "2"), "cube of": ("pow", "3"), "cube": ("pow", "3"),
    "half of": ("div", "2"), "half": ("div", "2"),
    "double": ("mul", "2"), "twice": ("mul", "2"), "triple": ("mul", "3"), "thrice": ("mul", "3"),
}  # fmt: skip

# List heads -> how the items combine: an operator folded left, "avg", or a function call.
LISTS: dict[str, str] = {
    "sum of": "+", "total of": "+", "add up": "+", "add": "+",
    "product of": "*", "multiply": "*",
    "difference between": "-", "difference of": "-",
    "divide": "/", "quotient of": "/",
    "average of": "avg", "mean of": "avg", "average": "avg",
    "gcd of": "gcd", "gcf of": "gcd", "hcf of": "gcd", "greatest common divisor of": "gcd",
    "greatest common factor of": "gcd", "lcm of": "lcm", "least common multiple of": "lcm",
    "max of": "max", "maximum of": "max", "min of": "min", "minimum of": "min",
}  # fmt: skip

POSTFIX: dict[str, str] = {
    "squared": "sq", "cubed": "cube", "factorial": "fact", "!": "fact", "degrees": "deg", "degree": "deg",
}  # fmt: skip

# Words that may come before or after a calculation without changing it.
FILLERS = (
    "what what's whats is are how much many please pls calculate calc compute evaluate solve find tell me us "
    "can could would will you work figure out the a an value result answer equals equal does do give get quickly "
    "exactly hey ok okay kindly number thanks now"
).split() + ["value of", "result of", "answer to", "answer for", "equal to", "for me", "thank you"]

UNITS = {w: i for i, w in enumerate("one two three four five six seven eight nine".split(), 1)}
TEENS = {w: i for i, w in enumerate("ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split(), 10)}  # fmt: skip
TENS = {w: 10 * i for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
SCALES = {"thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
    "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "twentieth": 20,
}  # fmt: skip
CONSTANTS = ("pi", "e", "tau")

_MAX_SCALED_DIGITS = 400


class NotAnExpression(Exception):
    """The text is not in the calculator's grammar; the message says where it stopped."""


# --------------------------------------------------------------------------- tree


class Node:
    __slots__ = ("depth", "size")

    def _measure(self, *children: Node) -> None:
        self.size = 1 + sum(c.size for c in children)
        self.depth = 1 + max((c.depth for c in children), default=0)


class Num(Node):
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text
        self._measure()


class Const(Node):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        self._measure()


class Bin(Node):
    __slots__ = ("left", "op", "right")

    def __init__(self, op: str, left: Node, right: Node) -> None:
        self.op, self.left, self.right = op, left, right
        self._measure(left, right)


class Neg(Node):
    __slots__ = ("operand",)

    def __init__(self, operand: Node) -> None:
        self.operand = operand
        self._measure(operand)


class Call(Node):
    __slots__ = ("args", "name")

    def __init__(self, name: str, args: tuple[Node, ...]) -> None:
        self.name, self.args = name, args
        self._measure(*args)


class Group(Node):
    """Brackets the printer always keeps (a percentage reads better as ``(17 / 100) * 250``)."""

    __slots__ = ("inner",)

    def __init__(self, inner: Node) -> None:
        self.inner = inner
        self._measure(inner)


def nothing_to_calculate(node: Node, text: str) -> bool:
    """True when the tree is one number or constant and the text holds more than it (signs and brackets aside).

    "5", "pi" and "(-3)" are calculations with an obvious value; "what is 5", "one" or "::1" are not.
    """
    while isinstance(node, Neg | Group):
        node = node.operand if isinstance(node, Neg) else node.inner
    if not isinstance(node, Num | Const):
        return False
    literal = node.text if isinstance(node, Num) else node.name
    return re.sub(r"[\s()+\-]", "", text.lower()) != literal


# --------------------------------------------------------------------------- grammar

_END = r"(?![a-z0-9_])"


def _words(phrases: object) -> str:
    """A regex alternation of phrases (longest first), spaces matching any run of whitespace."""
    ordered = sorted(phrases, key=lambda p: (-len(p), p))  # type: ignore[arg-type]
    parts = [r"\s+".join(re.escape(w) for w in p.split()) + (_END if p[-1].isalnum() else "") for p in ordered]
    return "(?:" + "|".join(parts) + ")"


def _terminal(name: str, pattern: str, priority: int = 0) -> str:
    escaped = pattern.replace("/", "\\/")  # "/" ends a lark regex literal
    return f"{name}{'.' + str(priority) if priority else ''}: /{escaped}/"


_NUMBER_WORD = _words([*UNITS, *TEENS, *TENS])
# "and" belongs to a number only when more number words follow ("two hundred and five").
_AND_MORE = rf"(?:\s+and(?=\s+{_NUMBER_WORD}))?"
# "%" between operands is modulo, as in Python ("10 % 3", "10 % -3"); otherwise it is percent.
_MOD_SIGN = r"%(?=\s*[-+]?\s*(?:[0-9.(]|(?:pi|tau|e)" + _END + r"|[a-z][a-z0-9]*\s*\())"
_binary = {op: [w for w, o in INFIX.items() if o == op] for op in ("+", "-", "*", "/", "//", "%", "**")}

_TERMINALS = [
    _terminal("CALLNAME", _words(CALLABLE)[:-1] + r")(?=\s*\()", 3),
    _terminal("LOGBASE", r"log(?:arithm)?\s+base" + _END, 2),
    _terminal("ORDINAL", r"[0-9]+(?:st|nd|rd|th)" + _END + "|" + _words(ORDINALS), 2),
    _terminal("HYPHENATED", _words(TENS)[:-1] + r")-" + _words(UNITS), 2),
    _terminal("NUMBER", r"(?:[0-9]+(?:_[0-9]+)*(?:\.[0-9]+)?|\.[0-9]+)(?:e[+-]?[0-9]+)?"),
    _terminal("UNIT", _words(UNITS)),
    _terminal("TEEN", _words(TEENS)),
    _terminal("TENS", _words(TENS)),
    _terminal("ZERO", "zero" + _END),
    _terminal("HUNDRED", "hundred" + _END + _AND_MORE),
    _terminal("SCALE", _words(SCALES) + _AND_MORE),
    _terminal("CONST", _words(CONSTANTS)),
    _terminal("PLUS", _words(_binary["+"])),
    _terminal("MINUS", _words(_binary["-"])),
    # "x" is times even when a digit follows ("3x4").
    _terminal("TIMES", _words([w for w in _binary["*"] if w != "x"]) + "|x(?![a-z_])"),
    _terminal("DIVIDE", _words(_binary["/"])),
    _terminal("FLOORDIV", _words(_binary["//"]), 1),
    _terminal("MOD", _words(_binary["%"]) + "|" + _MOD_SIGN, 1),
    _terminal("POW", _words(_binary["**"]), 1),
    _terminal("RSUB", r"subtracted\s+from" + _END),
    _terminal("PERCENT", r"%|percent" + _END + r"|per\s+cent" + _END),
    _terminal("POSTFIX", _words([p for p in POSTFIX if p != "!"]) + r"|(?<=[0-9)])!"),
    _terminal("PREFIX", _words(PREFIX)),
    _terminal("NEGATIVE", "negative" + _END),
    _terminal("LIST", _words(LISTS)),
    _terminal("SUBTRACT", "subtract" + _END),
    _terminal("REMAINDER", r"remainder\s+(?:of|when)" + _END),
    # a filler may bring its comma along: "please, 2 + 2", "2 + 2, please"
    _terminal("FILLER", r"(?:,\s*)?" + _words(FILLERS) + r"(?:\s*,)?"),
    _terminal("OF", "of" + _END),
    _terminal("AND", r",\s*and" + _END + r"|and" + _END),
    _terminal("TO", "to" + _END),
    _terminal("BY", "by" + _END),
    _terminal("FROM", "from" + _END),
    _terminal("POWER", "power" + _END),
    _terminal("IS_DIVIDED_BY", r"is\s+divided\s+by" + _END, 2),
    _terminal("PUNCT", r"[?.:;=\"'$€£`!]"),
]

_GRAMMAR = r"""
start: FILLER* sum FILLER*

?sum: product
    | sum PLUS product          -> binary
    | sum MINUS product         -> binary
    | sum RSUB product          -> rsub

?product: unary
    | product TIMES unary       -> binary
    | product DIVIDE unary      -> binary
    | product FLOORDIV unary    -> binary
    | product MOD unary         -> binary

?unary: power
    | MINUS unary               -> neg
    | NEGATIVE unary            -> neg
    | PLUS unary                -> pos
    | PREFIX OF? unary          -> prefix
    | LOGBASE postfix OF unary  -> logbase

?power: postfix
    | postfix POW unary         -> binary
    | postfix POW ORDINAL POWER? -> ordinal_power

?postfix: primary
    | postfix POSTFIX           -> postfix
    | postfix PERCENT           -> percent
    | postfix PERCENT OF unary  -> percent_of

?primary: number
    | CONST                     -> const
    | "(" sum ")"
    | CALLNAME "(" sum ("," sum)* ")"           -> call
    | LIST OF? sum (_sep sum)+                  -> listing
    | SUBTRACT sum (FROM | AND | ",") sum       -> subtract
    | REMAINDER unary (DIVIDE | IS_DIVIDED_BY | BY | AND) unary -> remainder

_sep: "," | AND | TO | BY

?number: NUMBER                 -> digits
    | NUMBER (HUNDRED | SCALE)  -> scaled_digits
    | words

words: scale_group+ below_thousand? | below_thousand
scale_group: below_thousand? SCALE
below_thousand: below_hundred | below_hundred? HUNDRED below_hundred?
below_hundred: UNIT | TEEN | TENS | TENS UNIT | HYPHENATED | ZERO

%ignore /\s+/
%ignore PUNCT
"""

_TRANSLATE = str.maketrans({"×": "*", "÷": "/", "−": "-", "–": "-", "’": "'", "‘": "'"})
_THOUSANDS = re.compile(r"\(|\)|(?<![0-9.,])[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?(?![0-9]|,[0-9])")


def _number_text(raw: str) -> str:
    """Canonical spelling of a numeral: no separators or leading zeros, a 0 before a bare point."""
    mantissa, e, exponent = raw.replace(",", "").replace("_", "").partition("e")
    whole, dot, frac = mantissa.partition(".")
    return (whole.lstrip("0") or "0") + (dot + frac if frac else "") + e + exponent


def _decimal_text(value: Decimal) -> str:
    return _number_text(format(value.normalize(), "f"))


def _tokens(children: list) -> list[Token]:
    return [c for c in children if isinstance(c, Token)]


def _phrase(token: Token) -> str:
    return " ".join(token.split())


class _Build:
    """Callbacks run by the LALR parser as it reduces: each returns a :class:`Node` (or an int for number words)."""

    # ---- numbers

    def digits(self, c: list) -> Node:
        return Num(_number_text(c[0]))

    def scaled_digits(self, c: list) -> Node:
        word = c[1].split()[0]
        try:
            scaled = Decimal(_number_text(c[0])) * (100 if word == "hundred" else SCALES[word])
        except ArithmeticError:  # decimal overflow on an absurd exponent
            scaled = None
        if scaled is None or abs(scaled.adjusted()) > _MAX_SCALED_DIGITS:
            raise NotAnExpression(f"{c[0][:20]} {word} is too large a number to spell out")
        return Num(_decimal_text(scaled))

    def words(self, c: list) -> Node:
        total, last_scale = 0, None
        for item in c:
            if isinstance(item, tuple):
                count, scale = item
                if last_scale is not None and scale >= last_scale:
                    raise NotAnExpression("the scales of a spelled-out number must shrink, as in 'two million three thousand'")
                total += count * scale
                last_scale = scale
            else:
                total += item
        return Num(str(total))

    def below_hundred(self, c: list) -> int:
        return sum(UNITS.get(p) or TEENS.get(p) or TENS.get(p) or 0 for token in c for p in str(token).split("-"))

    def below_thousand(self, c: list) -> int:
        hundred = next((i for i, x in enumerate(c) if isinstance(x, Token)), None)
        if hundred is None:
            return c[0]
        count = c[hundred - 1] if hundred > 0 else 1
        rest = c[hundred + 1] if hundred + 1 < len(c) else 0
        return count * 100 + rest

    def scale_group(self, c: list) -> tuple[int, int]:
        return (c[0] if len(c) == 2 else 1), SCALES[c[-1].split()[0]]

    # ---- operators

    def binary(self, c: list) -> Node:
        left, op, right = c
        return Bin(INFIX.get(_phrase(op), "%"), left, right)

    def rsub(self, c: list) -> Node:
        return Bin("-", c[2], c[0])

    def neg(self, c: list) -> Node:
        return Neg(c[1])

    def pos(self, c: list) -> Node:
        return c[1]

    def prefix(self, c: list) -> Node:
        kind, arg = PREFIX[_phrase(c[0])]
        operand = c[-1]
        if kind == "call":
            return Call(arg, (operand,))
        if kind == "pow":
            return Bin("**", operand, Num(arg))
        if kind == "div":
            return Bin("/", operand, Num(arg))
        return Bin("*", Num(arg), operand)

    def logbase(self, c: list) -> Node:
        return Call("log", (c[-1], c[1]))

    def ordinal_power(self, c: list) -> Node:
        word = _phrase(c[2])
        exponent = ORDINALS[word] if word in ORDINALS else int(word[:-2])
        return Bin("**", c[0], Num(str(exponent)))

    def postfix(self, c: list) -> Node:
        kind = POSTFIX[_phrase(c[1])]
        if kind == "sq":
            return Bin("**", c[0], Num("2"))
        if kind == "cube":
            return Bin("**", c[0], Num("3"))
        if kind == "fact":
            return Call("factorial", (c[0],))
        return Call("radians", (c[0],))

    def percent(self, c: list) -> Node:
        return Group(Bin("/", c[0], Num("100")))

    def percent_of(self, c: list) -> Node:
        return Bin("*", Group(Bin("/", c[0], Num("100"))), c[-1])

    def const(self, c: list) -> Node:
        return Const(str(c[0]))

    def call(self, c: list) -> Node:
        name = str(c[0])
        args = tuple(x for x in c[1:] if isinstance(x, Node))
        if name == "log" and len(args) == 1:
            name = "log10"  # the documented convention: log is base 10, ln is natural
        return Call(name, args)

    def listing(self, c: list) -> Node:
        how = LISTS[_phrase(c[0])]
        items = [x for x in c[1:] if isinstance(x, Node)]
        if how == "avg":
            total = items[0]
            for item in items[1:]:
                total = Bin("+", total, item)
            return Bin("/", Group(total), Num(str(len(items))))
        if how in ("gcd", "lcm", "max", "min"):
            return Call(how, tuple(items))
        node = items[0]
        for item in items[1:]:
            node = Bin(how, node, item)
        return node

    def subtract(self, c: list) -> Node:
        first, sep, second = c[1], c[2], c[3]
        if isinstance(sep, Token) and sep.type == "FROM":
            return Bin("-", second, first)
        return Bin("-", first, second)

    def remainder(self, c: list) -> Node:
        nodes = [x for x in c if isinstance(x, Node)]
        return Bin("%", nodes[0], nodes[1])

    def start(self, c: list) -> Node:
        return next(x for x in c if isinstance(x, Node))


_PARSER = Lark(
    _GRAMMAR + "\n".join(_TERMINALS),
    parser="lalr",
    lexer="contextual",
    transformer=_Build(),
    maybe_placeholders=False,
)


def _drop_thousands_separators(text: str) -> str:
    """"1,200" is 1200 outside brackets; inside a call a comma separates arguments ("min(100,200)")."""
    depth, out, last = 0, [], 0
    for m in _THOUSANDS.finditer(text):
        piece = m.group()
        if piece == "(":
            depth += 1
        elif piece == ")":
            depth -= 1
        elif depth <= 0:
            out.append(text[last : m.start()])
            out.append(piece.replace(",", ""))
            last = m.end()
    out.append(text[last:])
    return "".join(out)


def _where(text: str, exc: UnexpectedInput) -> str:
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        return "it ends too early"
    pos = getattr(exc, "pos_in_stream", None)
    if pos is None and isinstance(exc, UnexpectedToken):
        pos = exc.token.start_pos
    if pos is None:  # pragma: no cover - lark sets a position on every lexer and parser error
        return "it does not read as a calculation"
    found = re.match(r"[^\W\d]\w*|[0-9.]+|\S", text[pos:])
    word = found.group() if found else text[pos : pos + 1]
    return f"'{word[:40]}' at character {pos + 1} does not fit"


def parse(text: str) -> Node:
    """Parse calculator text into a tree.

    Raises :class:`NotAnExpression` for text outside the grammar.  The caller bounds the length.
    """
    prepared = _drop_thousands_separators(text.lower().translate(_TRANSLATE))
    try:
        return _PARSER.parse(prepared)
    except UnexpectedCharacters as exc:
        raise NotAnExpression(_where(prepared, exc)) from None
    except (UnexpectedToken, UnexpectedEOF) as exc:
        raise NotAnExpression(_where(prepared, exc)) from None


# --------------------------------------------------------------------------- printer

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, "**": 4}
_NEG_PREC = 3
_ATOM_PREC = 5


def _prec(node: Node) -> int:
    if isinstance(node, Bin):
        return _PREC[node.op]
    if isinstance(node, Neg):
        return _NEG_PREC
    return _ATOM_PREC


def show(node: Node) -> str:
    """Print a tree in the calculator's symbolic syntax, with only the brackets precedence needs.

    Recursive: the caller bounds the tree's depth first.
    """
    if isinstance(node, Num):
        return node.text
    if isinstance(node, Const):
        return node.name
    if isinstance(node, Group):
        return f"({show(node.inner)})"
    if isinstance(node, Call):
        return f"{node.name}({', '.join(show(a) for a in node.args)})"
    if isinstance(node, Neg):
        inner = show(node.operand)
        return f"-({inner})" if _prec(node.operand) <= _NEG_PREC else f"-{inner}"
    assert isinstance(node, Bin)
    p = _PREC[node.op]
    left, right = show(node.left), show(node.right)
    if _prec(node.left) < p or (node.op == "**" and _prec(node.left) <= p):
        left = f"({left})"
    if _prec(node.right) <= p or isinstance(node.right, Neg):
        if not (node.op == "**" and isinstance(node.right, Bin) and node.right.op == "**"):
            right = f"({right})"
    return f"{left} {node.op} {right}"
