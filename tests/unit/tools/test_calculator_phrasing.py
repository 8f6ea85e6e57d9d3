"""The calculator's natural phrasing: what it reads, how it prints it, and what it refuses to read."""

from __future__ import annotations

import math

import pytest
from meshward.tools.calculator import CalculatorError, CalculatorLimits, calculate

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
    ("log(1000)", "log10(1000)", 3),  # the convention: log is base 10, ln natural
    ("ln(1000)", "ln(1000)", math.log(1000)),
    ("log(8, 2)", "log(8, 2)", 3),
    ("log2(8)", "log2(8)", 3),
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
    ("12 squared please", "12 ** 2", 144),
    ("could you work out 250 minus 75 for me", "250 - 75", 175),
    ("what is the square root of two hundred and twenty five", "sqrt(225)", 15),
    ("what's 12.5% of 480", "(12.5 / 100) * 480", 60),
    ("√16", "sqrt(16)", 4),
    ("30 degrees", "radians(30)", math.radians(30)),
    ("sin(30 degrees)", "sin(radians(30))", 0.5),
    ("what is 3 × 4 ÷ 2", "3 * 4 / 2", 6),
    ("two thousand and five minus five", "2005 - 5", 2000),
    ("a thousand times 3", "1000 * 3", 3000),
    ("1e3 + 1", "1e3 + 1", 1001),
    ("10 // 3", "10 // 3", 3),
    ("pow(2, 10)", "pow(2, 10)", 1024),
    ("Could you work out 17% of 250 plus two to the power of ten, please?", "(17 / 100) * 250 + 2 ** 10", 1066.5),
    ("Please, sum of 1, 2 and 3", "1 + 2 + 3", 6),
    ("10 % -3", "10 % (-3)", -2),  # between operands, % is modulo as in Python
    ("50% plus 1", "(50 / 100) + 1", 1.5),
    ("two million three thousand and five plus 1", "2003005 + 1", 2003006),
    ("nineteen hundred plus 1", "1900 + 1", 1901),
    ("sqrt 16 + 1", "sqrt(16) + 1", 5),
    ("log(100)^2", "log10(100) ** 2", 4),
]


@pytest.mark.parametrize(("question", "expression", "value"), CASES, ids=[c[0] for c in CASES])
def test_read_and_evaluate(question: str, expression: str, value: float) -> None:
    result = calculate(question)
    assert result.expression == expression
    assert result.value == pytest.approx(value)
    # what it prints reads back to the same value
    assert calculate(result.expression).value == result.value


# What the intent service's regex detector used to accept, before the calculator owned arithmetic.
@pytest.mark.parametrize("text", [
    "2+2", "15 * 23 + 7", "(3 + 4) * 5", "2^10", "2**8", "sqrt(144) + 3", "√16", "5!",
    "17% of 250", "15 percent of 80", "1200 divided by 16", "two to the power of ten", "45 times 12",
    "square root of 81", "7 squared", "add 128 and 256", "subtract 19 from 300", "multiply 24 by 365",
    "what is one hundred divided by eight", "calculate the mean of 3 and 9",
])  # fmt: skip
def test_reads_what_the_intent_detector_accepted(text: str) -> None:
    assert isinstance(calculate(text).value, int | float)


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
        "weather forecast for 2024-05-01",
        "ping 8.8.8.8",
        "what changed in version 1.2.3",
        "we run 24/7",
        "meet at 10:30",
        "show the top 10 processes",
        "is disk usage over 90%?",
        "where is the data center",
        "write me a poem",
    ],
)
def test_not_arithmetic(question: str) -> None:
    with pytest.raises(CalculatorError) as info:
        calculate(question)
    assert info.value.code in ("not_an_expression", "bad_request")
    assert "15 * 23 + 7" in info.value.message  # it says how to write one


@pytest.mark.parametrize(
    ("question", "fragment"),
    [
        ("What's the weather?", "'weather' at character 12"),
        ("what is 2 + 2 in binary", "'in'"),
        ("5 plus", "ends too early"),
        ("what is 5", "nothing to do"),
        ("__import__('os')", "__import__"),
        ("three thousand two million plus 1", "must shrink"),
        ("😀 + 1", "'😀' at character 1"),
    ],
)
def test_not_an_expression_says_where(question: str, fragment: str) -> None:
    with pytest.raises(CalculatorError) as info:
        calculate(question)
    assert info.value.code == "not_an_expression"
    assert fragment in info.value.message


def test_every_callable_name_is_an_evaluator_function() -> None:
    from meshward.tools.calculator import FUNCTIONS
    from meshward.tools.calculator_syntax import CALLABLE

    assert set(CALLABLE) == set(FUNCTIONS)


def test_a_bare_number_is_fine_without_words() -> None:
    assert calculate("5").value == 5
    assert calculate("pi").value == math.pi
    assert calculate("(-3)").expression == "-3"
    assert calculate("-(2 + 3)").value == -5
    for text in ("one", "::1", "what is pi", "5 please", "007"):
        with pytest.raises(CalculatorError) as info:
            calculate(text)
        assert info.value.code == "not_an_expression", text


def test_non_string_is_a_typed_error() -> None:
    with pytest.raises(CalculatorError) as info:
        calculate(None)  # type: ignore[arg-type]
    assert info.value.code == "bad_request"


def test_length_bound() -> None:
    limit = CalculatorLimits().max_chars
    assert calculate("1 + 1" + " " * (limit - 5)).expression == "1 + 1"
    for text in ("1 + 1" + " " * (limit - 4), "1 + " * 100_000 + "1"):
        with pytest.raises(CalculatorError) as info:
            calculate(text)
        assert info.value.code == "too_large"


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
def test_hostile_questions_get_a_typed_answer(question: str) -> None:
    limits = CalculatorLimits(max_chars=10_000)
    try:
        calculate(question, limits)
    except CalculatorError as exc:
        assert exc.code in ("not_an_expression", "bad_request", "too_large")


def test_nested_brackets_within_bounds() -> None:
    assert calculate("(" * 20 + "1 + 2" + ")" * 20).expression == "1 + 2"
