"""Unit tests for the fast-tier arithmetic reader (meshward.supervisor.arithmetic)."""

from __future__ import annotations

import math

import pytest
from meshward.supervisor.arithmetic import MAX_QUESTION_CHARS, describe, extract_expression
from meshward.tools.calculator import evaluate

# (question, expected expression, expected value)
CASES: list[tuple[str, str, float]] = [
    ("Calculate 15 * 23 + 7", "15 * 23 + 7", 352),
    ("What is 2 to the power of 10?", "2 ** 10", 1024),
    ("what's 17% of 250", "(17 / 100) * 250", 42.5),
    ("1200 divided by 16", "1200 / 16", 75),
    ("sqrt(144) + 3", "sqrt(144) + 3", 15),
    ("square root of 81", "sqrt(81)", 9),
    ("What is the square root of 81?", "sqrt(81)", 9),
    ("12 squared", "12 ** 2", 144),
    ("3 cubed", "3 ** 3", 27),
    ("7 times 6 plus 2", "7 * 6 + 2", 44),
    ("100 minus 37", "100 - 37", 63),
    ("add 5 and 7", "5 + 7", 12),
    ("add 5 to 7", "5 + 7", 12),
    ("sum of 3, 4 and 5", "3 + 4 + 5", 12),
    ("What is the sum of 3, 4, and 5?", "3 + 4 + 5", 12),
    ("multiply 6 by 7", "6 * 7", 42),
    ("product of 6 and 7", "6 * 7", 42),
    ("what is 3 x 4", "3 * 4", 12),
    ("what is 3x4?", "3 * 4", 12),
    ("15.5 * 2", "15.5 * 2", 31),
    ("1,200 / 16", "1200 / 16", 75),
    ("what is 1,000,000 / 1,000", "1000000 / 1000", 1000),
    ("10 mod 3", "10 % 3", 1),
    ("10 modulo 4", "10 % 4", 2),
    ("what is 10 % 3", "10 % 3", 1),
    ("2^8", "2 ** 8", 256),
    ("2 ^ 3 ^ 2", "2 ** 3 ** 2", 512),
    ("factorial of 5", "factorial(5)", 120),
    ("5!", "factorial(5)", 120),
    ("what is 5 factorial?", "factorial(5)", 120),
    ("log of 100", "log10(100)", 2),
    ("log(1000)", "log10(1000)", 3),
    ("log base 2 of 8", "log(8, 2)", 3),
    ("natural log of e", "ln(e)", 1),
    ("what is five plus three", "5 + 3", 8),
    ("what is twenty-five times four", "25 * 4", 100),
    ("one hundred and five minus five", "105 - 5", 100),
    ("two thousand three hundred plus one", "2300 + 1", 2301),
    ("a hundred divided by 4", "100 / 4", 25),
    ("ninety nine plus one", "99 + 1", 100),
    ("5 thousand divided by 2", "5000 / 2", 2500),
    ("Please compute 6 * 7.", "6 * 7", 42),
    ("How much is 12 divided by 4?", "12 / 4", 3),
    ("evaluate (2 + 3) * 4", "(2 + 3) * 4", 20),
    ("Calculate: 2 + 2 =", "2 + 2", 4),
    ("subtract 3 from 10", "10 - 3", 7),
    ("3 subtracted from 10", "10 - 3", 7),
    ("difference between 10 and 4", "10 - 4", 6),
    ("divide 10 by 4", "10 / 4", 2.5),
    ("what is 10 over 4", "10 / 4", 2.5),
    ("2 to the 3rd power", "2 ** 3", 8),
    ("2 to the third power", "2 ** 3", 8),
    ("2 raised to the power of 5", "2 ** 5", 32),
    ("cube root of 27", "cbrt(27)", 3),
    ("the square of 9", "9 ** 2", 81),
    ("half of 50", "50 / 2", 25),
    ("double 21", "2 * 21", 42),
    ("average of 2, 4 and 6", "(2 + 4 + 6) / 3", 4),
    ("gcd of 12 and 18", "gcd(12, 18)", 6),
    ("lcm of 4 and 6", "lcm(4, 6)", 12),
    ("max of 3, 9 and 4", "max(3, 9, 4)", 9),
    ("remainder when 10 is divided by 3", "10 % 3", 1),
    ("what is 50 percent of 80", "(50 / 100) * 80", 40),
    ("20% of 50 plus 10", "(20 / 100) * 50 + 10", 20),
    ("minus 5 plus 3", "-5 + 3", -2),
    ("square of -3", "(-3) ** 2", 9),
    ("10 increased by 5", "10 + 5", 15),
    ("5 added to 3", "5 + 3", 8),
    ("absolute value of -7", "abs(-7)", 7),
    ("what is pi times 2", "pi * 2", math.tau),
    ("min(100,200)", "min(100, 200)", 100),
    (".5 + .25", "0.5 + 0.25", 0.75),
    ("what is 007 + 1", "7 + 1", 8),
    ("1.5 million / 3", "1500000 / 3", 500000),
    ("2 ** -1", "2 ** (-1)", 0.5),
    ("What is 2+2?!", "2 + 2", 4),
]


@pytest.mark.parametrize(("question", "expression", "value"), CASES, ids=[c[0] for c in CASES])
def test_extract_and_evaluate(question: str, expression: str, value: float) -> None:
    got = extract_expression(question)
    assert got == expression
    assert evaluate(got) == pytest.approx(value)


def test_there_are_many_cases() -> None:
    assert len(CASES) >= 35


@pytest.mark.parametrize(
    "question",
    [
        "What's the weather?",
        "How much disk space is free?",
        "what did I just ask?",
        "2 servers are down",
        "what is 5",
        "what is pi",
        "hello",
        "",
        "   ",
        "?",
        "what is 1 and 1",
        "5 plus",
        "add 5",
        "top 10 servers",
        "what is 2 + 2 in binary",
        "is 5 plus 3 equal to 8",
        "the 3rd server",
        "what time is it at 5",
        "restart service 3",
        "how many users are online?",
        "show me the last 5 logs",
        "solve x + 2 = 5",
        "what is a + b",
        "print(1)",
        "__import__('os')",
        "sqrt(",
        "(1 + 2",
        "1 2",
        "what is 5 pm plus 3",
        "café 2 + 2",
        "what is ٣ + ٤",
    ],
)
def test_not_arithmetic(question: str) -> None:
    assert extract_expression(question) is None


def test_non_string_is_none() -> None:
    assert extract_expression(None) is None  # type: ignore[arg-type]


def test_length_bound() -> None:
    long_but_ok = "1 + 1" + " " * (MAX_QUESTION_CHARS - 5)
    assert extract_expression(long_but_ok) == "1 + 1"
    assert extract_expression("1 + 1" + " " * (MAX_QUESTION_CHARS - 4)) is None
    assert extract_expression("1 + " * 100_000 + "1") is None


@pytest.mark.parametrize(
    "question",
    [
        "(" * 1999,
        "(" * 60 + "1" + ")" * 60,
        "- " * 999 + "1",
        "minus " * 333,
        "1," * 1000,
        "sum of " + "1, " * 660,
        "square root of " * 130 + "4",
        "2 to the " * 200 + "2",
        "one " * 500,
        "one hundred and " * 125,
        "1e99999999 thousand",
        "x" * 2000,
        "9" * 1999 + "!",
    ],
)
def test_hostile_questions_return_quickly_without_errors(question: str) -> None:
    result = extract_expression(question)
    assert result is None or isinstance(result, str)


def test_nested_brackets_within_bounds() -> None:
    assert extract_expression("(" * 20 + "1 + 2" + ")" * 20) == "1 + 2"


@pytest.mark.parametrize(
    ("expression", "text"),
    [
        ("2 ** 10", "2^10"),
        ("15 * 23 + 7", "15 × 23 + 7"),
        ("1200 / 16", "1200 ÷ 16"),
        ("(17 / 100) * 250", "(17 ÷ 100) × 250"),
        ("sqrt(144) + 3", "sqrt(144) + 3"),
        ("log(8,2)", "log(8, 2)"),
        ("-2 ** 2", "-2^2"),
        ("2 ** (-1)", "2^(-1)"),
        ("3 - -5", "3 - -5"),
        ("  10%3 ", "10 % 3"),
        ("1e+3 + 1", "1e+3 + 1"),
    ],
)
def test_describe(expression: str, text: str) -> None:
    assert describe(expression) == text


@pytest.mark.parametrize(("question", "expression", "value"), CASES, ids=[c[0] for c in CASES])
def test_described_expression_still_evaluates_the_same(question: str, expression: str, value: float) -> None:
    assert evaluate(describe(expression)) == pytest.approx(evaluate(expression))
