"""The calculator: one grammar for symbols and natural phrasing, evaluated exactly and within bounds.

:func:`calculate` reads text such as "15 * 23 + 7", "sqrt(144) + 3" or "What is 17% of 250?" with the
grammar of :mod:`meshward.tools.calculator_syntax` (a lark LALR parser; nothing here turns text
into code: no ``eval``, ``exec``, ``compile`` or shell) and returns the value together with the
expression it read, printed in the calculator's symbolic syntax (``(17 / 100) * 250``).  Failures
raise :class:`CalculatorError` whose ``code`` is

* ``"not_an_expression"`` - the text is not a calculation in the grammar (a question about
  something else, a typo, an unknown word or function); the message names where it stopped;
* ``"bad_request"`` - the calculation has no value (division by zero, a math domain error, a
  wrong number of arguments);
* ``"too_large"`` - the text or its result would exceed a :class:`CalculatorLimits` bound (too
  long, nested too deeply, too many parts, an exponent or result too big, a float overflow, or
  evaluation past the time limit).

Functions: ``sqrt cbrt sin cos tan asin acos atan atan2 sinh cosh tanh log log10 log2 ln exp abs
round floor ceil factorial gcd lcm min max hypot degrees radians pow``.  The logarithm
convention: ``log(x)`` is base 10 (as on a pocket calculator, and shown as ``log10(x)``), ``ln(x)``
the natural logarithm, ``log(x, b)`` base ``b``.  Trigonometry works in radians ("30 degrees"
or ``radians(30)`` converts); ``round`` rounds halves away from zero and ``round(x, n)`` keeps
``n`` decimals.  ``^`` is power, not xor.

Results
-------
Integer arithmetic stays exact (``2 ** 100`` is an ``int``); ``/`` gives a float as in Python.
A float result that is a whole number below 1e15 in magnitude is returned as an ``int``
(``sqrt(144)`` gives ``12``, ``10 / 4`` gives ``2.5``).  :func:`format_result` renders a
result for people.

Guards
------
The length is checked first, then the nesting of brackets is measured by scanning the text, and
only then is the text parsed (linear time: LALR, nodes built as rules reduce, no recursion).  The
tree's size is bounded before evaluation.  Exponents are bounded before a power is computed and
the size of an integer power is estimated with ``log10`` first, so ``9**9**9**9`` is refused at
once.  Every intermediate integer must stay within ``max_result_digits`` digits and every float
must be finite and within ``max_abs_value``.  The evaluator walks the tree with an explicit stack
and checks a deadline as it goes.
"""

from __future__ import annotations

import decimal
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from .calculator_syntax import (
    Bin,
    Call,
    Const,
    Group,
    Neg,
    Node,
    NotAnExpression,
    Num,
    nothing_to_calculate,
    parse,
    show,
)

__all__ = [
    "CONSTANTS",
    "Calculation",
    "ERROR_CODES",
    "FUNCTIONS",
    "CalculatorError",
    "CalculatorLimits",
    "calculate",
    "evaluate",
    "format_result",
]

Number = int | float

ERROR_CODES = frozenset({"not_an_expression", "bad_request", "too_large"})

CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}

_LOG10_2 = math.log10(2)
_INT_LIKE_FLOAT_LIMIT = 1e15
_HELP = (
    'write it like "15 * 23 + 7", "sqrt(144) + 3", "17% of 250" or "2 to the power of 10": numbers, '
    "+ - * / // % ** (or ^), parentheses, pi, e, tau, and functions such as sqrt(x) or log(x, base)"
)


class CalculatorError(Exception):
    """The expression cannot be evaluated; ``code`` says why and ``message`` what to fix."""

    def __init__(self, code: str, message: str) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown calculator error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"CalculatorError({self.code!r}, {self.message!r})"


@dataclass(frozen=True)
class CalculatorLimits:
    """Bounds on what :func:`evaluate` will take on.

    ``max_chars``: longest expression text.  ``max_depth``: deepest nesting of brackets,
    measured on the text before it is parsed.  ``max_nodes``: most syntax-tree nodes.
    ``max_exponent``: largest magnitude of an exponent (``**``, ``^``, ``pow``).
    ``max_result_digits``: most decimal digits of any integer, literal or intermediate.
    ``max_abs_value``: largest magnitude of any float.  ``max_factorial``: largest argument of
    ``factorial``.  ``timeout_s``: evaluation time budget, checked between steps.
    """

    max_chars: int = 500
    max_depth: int = 50
    max_nodes: int = 500
    max_exponent: int = 10_000
    max_result_digits: int = 1000
    max_abs_value: float = 1e300
    max_factorial: int = 170
    timeout_s: float = 0.5


# --------------------------------------------------------------------------- errors


def _bad(message: str) -> CalculatorError:
    return CalculatorError("bad_request", message)


def _large(message: str) -> CalculatorError:
    return CalculatorError("too_large", message)


def _show(value: Number) -> str:
    """A short rendering of a number for error messages (never thousands of digits)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {_int_digits(value)}-digit number"
    return format_result(value)


# --------------------------------------------------------------------------- number checks


def _int_digits(n: int) -> int:
    """Exact count of decimal digits of ``abs(n)`` (1 for 0), without ``str()``."""
    n = abs(n)
    if n < 10:
        return 1
    k = int(n.bit_length() * _LOG10_2)  # digits is k or k + 1
    return k + 1 if n >= 10**k else k


class _Evaluator:
    def __init__(self, limits: CalculatorLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.timeout_s
        self.steps = 0

    # ---- budget

    def tick(self) -> None:
        self.steps += 1
        if time.monotonic() > self.deadline:
            raise _large(
                f"Evaluation took longer than {self.limits.timeout_s:g}s after {self.steps} steps; "
                "simplify the expression."
            )

    # ---- value checks

    def check(self, value: Number) -> Number:
        if isinstance(value, int):
            limit = self.limits.max_result_digits
            # Fast reject from the bit length, before counting digits exactly.
            if (value.bit_length() - 1) * _LOG10_2 >= limit:
                raise _large(
                    f"A number in this calculation would have about {int(value.bit_length() * _LOG10_2) + 1} "
                    f"digits; the limit is {limit} digits."
                )
            digits = _int_digits(value)
            if digits > limit:
                raise _large(f"A number in this calculation would have {digits} digits; the limit is {limit} digits.")
            return value
        if isinstance(value, float):
            if math.isnan(value):
                raise _bad("The calculation has no numeric result (not a number); check the inputs.")
            if math.isinf(value) or abs(value) > self.limits.max_abs_value:
                raise _large(
                    f"A number in this calculation is too large (beyond {self.limits.max_abs_value:g}); "
                    "use smaller numbers."
                )
            return value
        raise _bad(f"{type(value).__name__} values are not supported; {_HELP}.")  # pragma: no cover

    def to_int(self, fname: str, value: Number) -> int:
        if isinstance(value, int):
            return value
        if value.is_integer():
            return self.check(int(value))  # type: ignore[return-value]
        raise _bad(f"{fname}() needs whole numbers, got {_show(value)}.")

    def check_exponent(self, exponent: Number) -> None:
        if abs(exponent) > self.limits.max_exponent:
            raise _large(
                f"The exponent {_show(exponent)} is too large; exponents must be between "
                f"-{self.limits.max_exponent} and {self.limits.max_exponent}."
            )

    # ---- arithmetic

    def power(self, base: Number, exponent: Number) -> Number:
        self.check_exponent(exponent)
        if base == 0 and exponent < 0:
            raise _bad("division by zero: 0 cannot be raised to a negative power.")
        if isinstance(base, int) and isinstance(exponent, int):
            if exponent >= 0:
                if abs(base) > 1 and exponent > 0:
                    estimate = exponent * math.log10(abs(base))
                    if estimate >= self.limits.max_result_digits:
                        raise _large(
                            f"{_show(base)} ** {exponent} would have about {int(estimate) + 1} digits; "
                            f"the limit is {self.limits.max_result_digits} digits."
                        )
                return self.check(base**exponent)
            return self.check(base**exponent)  # a float; OverflowError is mapped by the caller
        if base < 0 and not float(exponent).is_integer():
            raise _bad(
                f"({_show(base)}) ** {_show(exponent)} is not a real number (a negative number raised to a "
                "fractional power); use a non-negative base."
            )
        return self.check(math.pow(base, exponent))

    def binop(self, op: str, left: Number, right: Number) -> Number:
        if op == "+":
            return self.check(left + right)
        if op == "-":
            return self.check(left - right)
        if op == "*":
            return self.check(left * right)
        if op in ("/", "//", "%") and right == 0:
            raise _bad("division by zero: the divisor evaluates to 0; change the divisor.")
        if op == "/":
            return self.check(left / right)
        if op == "//":
            return self.check(left // right)
        if op == "%":
            return self.check(left % right)
        return self.power(left, right)

    # ---- functions

    def call(self, name: str, args: list[Number]) -> Number:
        spec = FUNCTIONS[name]
        low, high = spec.arity
        if len(args) < low or (high is not None and len(args) > high):
            raise _bad(f"{name}() takes {_arity_text(spec.arity)}, got {len(args)}.")
        try:
            result = spec.fn(self, args)
        except CalculatorError:
            raise
        except ZeroDivisionError:
            raise _bad(f"division by zero in {name}(); change its arguments.") from None
        except OverflowError:
            raise _large(f"{name}() of these arguments is too large to compute; use smaller numbers.") from None
        except ValueError:
            shown = ", ".join(_show(a) for a in args)
            raise _bad(f"math domain error: {name}({shown}) is not defined; {spec.domain}.") from None
        return self.check(result)

    # ---- the tree

    def number(self, node: Num) -> Number:
        text = node.text
        if any(c in text for c in ".e"):
            return self.check(float(text))
        if len(text) > self.limits.max_result_digits:
            raise _large(
                f"A number in this calculation has {len(text)} digits; the limit is {self.limits.max_result_digits} digits."
            )
        return self.check(int(text))

    def run(self, tree: Node) -> Number:
        """Evaluate a tree iteratively (post-order with an explicit stack)."""
        values: list[Number] = []
        stack: list[tuple[Node, bool]] = [(tree, False)]
        while stack:
            node, expanded = stack.pop()
            self.tick()
            if isinstance(node, Num):
                values.append(self.number(node))
            elif isinstance(node, Const):
                values.append(CONSTANTS[node.name])
            elif not expanded:
                stack.append((node, True))
                stack.extend((child, False) for child in reversed(_children(node)))
            elif isinstance(node, Group):
                pass  # its one value is already on the stack
            elif isinstance(node, Neg):
                values.append(self.check(-values.pop()))
            elif isinstance(node, Bin):
                right = values.pop()
                left = values.pop()
                values.append(self.guarded(self.binop, node.op, left, right))
            else:
                assert isinstance(node, Call)
                count = len(node.args)
                args = values[len(values) - count :]
                del values[len(values) - count :]
                values.append(self.call(node.name, args))
        if len(values) != 1:  # pragma: no cover - a well-formed tree leaves exactly one value
            raise _bad("The expression could not be evaluated.")
        return values[0]

    @staticmethod
    def guarded(compute: Callable[[str, Number, Number], Number], op: str, a: Number, b: Number) -> Number:
        try:
            return compute(op, a, b)
        except CalculatorError:
            raise
        except ZeroDivisionError:
            raise _bad("division by zero: the divisor evaluates to 0; change the divisor.") from None
        except OverflowError:
            raise _large("The result is too large to represent; use smaller numbers.") from None
        except ValueError as exc:
            raise _bad(f"math domain error: {exc}; check the inputs.") from None


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Bin):
        return (node.left, node.right)
    if isinstance(node, Neg):
        return (node.operand,)
    if isinstance(node, Group):
        return (node.inner,)
    if isinstance(node, Call):
        return node.args
    return ()  # pragma: no cover


# --------------------------------------------------------------------------- functions


@dataclass(frozen=True)
class _Function:
    fn: Callable[[_Evaluator, list[Number]], Number]
    arity: tuple[int, int | None]
    domain: str = "check the arguments"


def _arity_text(arity: tuple[int, int | None]) -> str:
    low, high = arity
    if high is None:
        return f"at least {low} argument{'s' if low != 1 else ''}"
    if low == high:
        return f"{low} argument{'s' if low != 1 else ''}"
    return f"{low} to {high} arguments"


def _unary(fn: Callable[[float], float], domain: str = "check the argument") -> _Function:
    return _Function(lambda ev, a: fn(a[0]), (1, 1), domain)


def _sqrt(ev: _Evaluator, args: list[Number]) -> Number:
    (x,) = args
    if x < 0:
        raise _bad(f"math domain error: sqrt({_show(x)}) is not a real number; sqrt() needs a number >= 0.")
    if isinstance(x, int):
        root = math.isqrt(x)
        if root * root == x:
            return root
    return math.sqrt(x)


def _cbrt(ev: _Evaluator, args: list[Number]) -> Number:
    (x,) = args
    approx = math.cbrt(x)
    if isinstance(x, int):
        candidate = round(approx)
        if candidate**3 == x:
            return candidate
    return approx


def _log(ev: _Evaluator, args: list[Number]) -> Number:
    x = args[0]
    if x <= 0:
        raise _bad(f"math domain error: log({_show(x)}) is not defined; the logarithm needs a number > 0.")
    if len(args) == 1:
        return math.log(x)
    base = args[1]
    if base <= 0 or base == 1:
        raise _bad(f"math domain error: log base {_show(base)} is not defined; use a base > 0 other than 1.")
    if base == 10:
        return math.log10(x)
    if base == 2:
        return math.log2(x)
    return math.log(x, base)


def _positive_log(name: str, fn: Callable[[float], float]) -> _Function:
    def run(ev: _Evaluator, args: list[Number]) -> Number:
        (x,) = args
        if x <= 0:
            raise _bad(f"math domain error: {name}({_show(x)}) is not defined; the logarithm needs a number > 0.")
        return fn(x)

    return _Function(run, (1, 1))


def _round(ev: _Evaluator, args: list[Number]) -> Number:
    x = args[0]
    places = ev.to_int("round", args[1]) if len(args) == 2 else 0
    if isinstance(x, int) and places >= 0:
        return x
    cap = ev.limits.max_result_digits + 2
    places = max(-cap, min(places, 400))  # beyond these, rounding no longer changes anything
    ctx = decimal.Context(prec=ev.limits.max_result_digits + 1000, rounding=decimal.ROUND_HALF_UP)
    exact = decimal.Decimal(x) if isinstance(x, int) else decimal.Decimal(repr(x))
    rounded = exact.quantize(decimal.Decimal(1).scaleb(-places), context=ctx)
    if places <= 0:
        return int(rounded)
    return float(rounded)


def _factorial(ev: _Evaluator, args: list[Number]) -> Number:
    (x,) = args
    if isinstance(x, float) and not x.is_integer():
        raise _bad(f"factorial() needs a whole number >= 0, got {_show(x)}.")
    n = int(x)
    if n < 0:
        raise _bad(f"factorial() needs a whole number >= 0, got {_show(n)}.")
    if n > ev.limits.max_factorial:
        raise _large(f"factorial({_show(n)}) is too large; the largest allowed argument is {ev.limits.max_factorial}.")
    return math.factorial(n)


def _gcd(ev: _Evaluator, args: list[Number]) -> Number:
    return math.gcd(*(ev.to_int("gcd", a) for a in args))


def _lcm(ev: _Evaluator, args: list[Number]) -> Number:
    ints = [ev.to_int("lcm", a) for a in args]
    result = ints[0]
    result = abs(result)
    for value in ints[1:]:
        ev.tick()
        result = ev.check(math.lcm(result, value))  # type: ignore[assignment]
    return result


def _minmax(pick: Callable[..., Number]) -> _Function:
    return _Function(lambda ev, a: pick(a), (1, None))


def _hypot(ev: _Evaluator, args: list[Number]) -> Number:
    return math.hypot(*args)


def _pow(ev: _Evaluator, args: list[Number]) -> Number:
    return ev.power(args[0], args[1])


def _floor(ev: _Evaluator, args: list[Number]) -> Number:
    return math.floor(args[0])


def _ceil(ev: _Evaluator, args: list[Number]) -> Number:
    return math.ceil(args[0])


def _abs(ev: _Evaluator, args: list[Number]) -> Number:
    return abs(args[0])


def _atan2(ev: _Evaluator, args: list[Number]) -> Number:
    return math.atan2(args[0], args[1])


FUNCTIONS: dict[str, _Function] = {
    "sqrt": _Function(_sqrt, (1, 1), "sqrt() needs a number >= 0"),
    "cbrt": _Function(_cbrt, (1, 1)),
    "sin": _unary(math.sin),
    "cos": _unary(math.cos),
    "tan": _unary(math.tan),
    "asin": _unary(math.asin, "asin() needs a number between -1 and 1"),
    "acos": _unary(math.acos, "acos() needs a number between -1 and 1"),
    "atan": _unary(math.atan),
    "atan2": _Function(_atan2, (2, 2)),
    "sinh": _unary(math.sinh),
    "cosh": _unary(math.cosh),
    "tanh": _unary(math.tanh),
    "log": _Function(_log, (1, 2), "the logarithm needs a number > 0 and a base > 0 other than 1"),
    "log10": _positive_log("log10", math.log10),
    "log2": _positive_log("log2", math.log2),
    "ln": _positive_log("ln", math.log),
    "exp": _unary(math.exp),
    "abs": _Function(_abs, (1, 1)),
    "round": _Function(_round, (1, 2)),
    "floor": _Function(_floor, (1, 1)),
    "ceil": _Function(_ceil, (1, 1)),
    "factorial": _Function(_factorial, (1, 1), "factorial() needs a whole number >= 0"),
    "gcd": _Function(_gcd, (1, None)),
    "lcm": _Function(_lcm, (1, None)),
    "min": _minmax(min),
    "max": _minmax(max),
    "hypot": _Function(_hypot, (1, None)),
    "degrees": _unary(math.degrees),
    "radians": _unary(math.radians),
    "pow": _Function(_pow, (2, 2)),
}


# --------------------------------------------------------------------------- entry points

_OPENERS = "([{"
_CLOSERS = ")]}"


def _bracket_depth(text: str, limits: CalculatorLimits) -> None:
    """Refuse deep nesting before parsing; unbalanced brackets are the grammar's to report."""
    depth = 0
    for ch in text:
        if ch in _OPENERS:
            depth += 1
            if depth > limits.max_depth:
                raise _large(f"The expression nests brackets more than {limits.max_depth} levels deep; simplify it.")
        elif ch in _CLOSERS:
            depth -= 1


def _check_tree(tree: Node, limits: CalculatorLimits) -> None:
    """Arity of every call and the size of the tree, before anything is computed."""
    if tree.size > limits.max_nodes:
        raise _large(f"The expression has more than {limits.max_nodes} parts; split it into smaller calculations.")
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Call):
            low, high = FUNCTIONS[node.name].arity
            if len(node.args) < low or (high is not None and len(node.args) > high):
                raise _bad(f"{node.name}() takes {_arity_text(FUNCTIONS[node.name].arity)}, got {len(node.args)}.")
        stack.extend(_children(node))


def _normalize(value: Number) -> Number:
    if isinstance(value, float) and value.is_integer() and abs(value) < _INT_LIKE_FLOAT_LIMIT:
        return int(value)
    return value


@dataclass(frozen=True)
class Calculation:
    """What :func:`calculate` read (in symbolic syntax) and its value."""

    expression: str
    value: int | float


def calculate(text: str, limits: CalculatorLimits = CalculatorLimits()) -> Calculation:
    """Read and evaluate a calculation; raise :class:`CalculatorError` on anything else."""
    if not isinstance(text, str):
        raise _bad(f"The expression must be text, not {type(text).__name__}.")
    if len(text) > limits.max_chars:
        raise _large(
            f"The expression is too long ({len(text)} characters); shorten it to at most {limits.max_chars} characters."
        )
    if not text.strip():
        raise CalculatorError("not_an_expression", f"The expression is empty; {_HELP}.")
    _bracket_depth(text, limits)
    try:
        tree = parse(text)
    except NotAnExpression as exc:
        raise CalculatorError("not_an_expression", f"No calculation found ({exc}); {_HELP}.") from None
    if nothing_to_calculate(tree, text):
        raise CalculatorError("not_an_expression", f"No calculation found (a number, but nothing to do with it); {_HELP}.")
    _check_tree(tree, limits)
    value = _normalize(_Evaluator(limits).run(tree))
    try:
        expression = show(tree)
    except RecursionError:
        raise _large("The expression is too deeply nested to print; simplify it.") from None
    return Calculation(expression, value)


def evaluate(expression: str, limits: CalculatorLimits = CalculatorLimits()) -> int | float:
    """The value of :func:`calculate`."""
    return calculate(expression, limits).value


def format_result(value: int | float) -> str:
    """Render a result: integers in full, floats with at most 12 significant digits."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # beyond the interpreter's int-to-str digit limit
            digits = _int_digits(value)
            lead = abs(value) // 10 ** (digits - 12)
            sign = "-" if value < 0 else ""
            mantissa = f"{lead // 10**11}.{lead % 10**11:011d}".rstrip("0").rstrip(".")
            return f"{sign}{mantissa}e+{digits - 1}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value == 0:
            return "0"
        if value.is_integer() and abs(value) < _INT_LIKE_FLOAT_LIMIT:
            return str(int(value))
        text = f"{value:.12g}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            sign = "-" if exponent.startswith("-") else "+"
            text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
        return text
    raise TypeError(f"format_result() needs an int or float, not {type(value).__name__}")
