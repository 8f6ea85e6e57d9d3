"""Unit tests for the calculator's symbolic syntax, values, bounds and errors (meshward.tools.calculator)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from meshward.tools.calculator import (
    CalculatorError,
    CalculatorLimits,
    evaluate,
    format_result,
)

# --------------------------------------------------------------------------- correct values


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # precedence and associativity
        ("15 * 23 + 7", 352),
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("10 - 4 - 3", 3),
        ("100 / 10 / 5", 2),
        ("2 ** 3 ** 2", 512),
        ("2 ^ 3 ^ 2", 512),
        ("2^8", 256),
        ("-2 ** 2", -4),
        ("-2^2", -4),
        ("(-2) ** 2", 4),
        ("- -3", 3),
        ("+5", 5),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("7 % 3", 1),
        ("-7 % 3", 2),
        ("10 / 4", 2.5),
        ("1 / 4", 0.25),
        ("2 ** -2", 0.25),
        ("0 ** 0", 1),
        ("15.5 * 2", 31),
        (".5 + .25", 0.75),
        ("1e3 + 1", 1001),
        ("1_000 * 2", 2000),
        ("3 × 4 ÷ 2", 6),
        ("5 − 3", 2),
        ("  1 + 1  ", 2),
        ("((((1))))", 1),
        # exact integers
        ("2 ** 100", 2**100),
        ("10 ** 999", 10**999),
        ("factorial(20)", 2432902008176640000),
        ("factorial(170) // factorial(169)", 170),
        # constants
        ("pi", math.pi),
        ("e", math.e),
        ("tau", math.tau),
        ("2 * pi", math.tau),
        # functions
        ("sqrt(144) + 3", 15),
        ("sqrt(2)", math.sqrt(2)),
        ("sqrt(2.25)", 1.5),
        ("cbrt(27)", 3),
        ("cbrt(-8)", -2),
        ("cbrt(2)", math.cbrt(2)),
        ("sin(pi / 2)", 1),
        ("cos(0)", 1),
        ("tan(pi / 4)", pytest.approx(1.0)),
        ("asin(1)", math.pi / 2),
        ("acos(1)", 0),
        ("atan(1)", math.pi / 4),
        ("atan2(1, 1)", math.pi / 4),
        ("sinh(0) + cosh(0) + tanh(0)", 1),
        ("log(e)", math.log10(math.e)),  # log is base 10
        ("ln(e)", 1),
        ("log(100, 10)", 2),
        ("log(1000, 10)", 3),
        ("log(8, 2)", 3),
        ("log(81, 3)", pytest.approx(4.0)),
        ("log10(1000)", 3),
        ("log10(10 ** 500)", 500),
        ("log2(1024)", 10),
        ("ln(e ** 2)", 2),
        ("exp(0)", 1),
        ("exp(1)", math.e),
        ("abs(-3)", 3),
        ("abs(-2.5)", 2.5),
        ("round(2.5)", 3),
        ("round(-2.5)", -3),
        ("round(2.675, 2)", 2.68),
        ("round(1234, -2)", 1200),
        ("round(1250, -2)", 1300),
        ("round(7)", 7),
        ("floor(2.7)", 2),
        ("floor(-2.1)", -3),
        ("ceil(2.1)", 3),
        ("factorial(5)", 120),
        ("factorial(5.0)", 120),
        ("factorial(0)", 1),
        ("gcd(12, 18)", 6),
        ("gcd(12, 18, 8)", 2),
        ("lcm(4, 6)", 12),
        ("lcm(2, 3, 4)", 12),
        ("min(3, 1, 2)", 1),
        ("max(1.5, 2)", 2),
        ("max(7)", 7),
        ("hypot(3, 4)", 5),
        ("degrees(pi)", 180),
        ("radians(180)", math.pi),
        ("pow(2, 10)", 1024),
        ("pow(2, 0.5)", math.sqrt(2)),
        ("pow(4, 0.5)", 2),
        ("sqrt(16) * log10(100) + abs(-1)", 9),
        ("max(min(3, 4), 2) ** 2", 9),
    ],
)
def test_values(expression: str, expected: object) -> None:
    assert evaluate(expression) == expected


def test_integral_float_results_become_ints_and_others_stay_floats() -> None:
    assert isinstance(evaluate("10 / 2"), int)
    assert isinstance(evaluate("sqrt(144)"), int)
    assert isinstance(evaluate("10 / 4"), float)
    assert isinstance(evaluate("2 ** 60"), int)
    big = evaluate("1e20")  # integral but above 1e15: stays a float
    assert isinstance(big, float) and big == 1e20
    assert evaluate("0.1 + 0.2") == pytest.approx(0.3)


def test_round_trip_of_exact_large_integers() -> None:
    assert evaluate("2 ** 1000") == 2**1000
    assert evaluate("factorial(170)") == math.factorial(170)
    assert evaluate("10 ** 999 + 1 - 10 ** 999") == 1


# --------------------------------------------------------------------------- hostile and invalid input


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        ("9**9**9**9", "too_large"),
        ("10**10**10", "too_large"),
        ("2 ** 10001", "too_large"),
        ("2 ** 10000", "too_large"),  # 3011 digits > 1000
        ("10 ** 1000", "too_large"),
        ("(10 ** 999) * (10 ** 999)", "too_large"),
        ("9 ^ 9 ^ 9", "too_large"),
        ("pow(10, 10 ** 10)", "too_large"),
        ("2 ** -100000", "too_large"),
        ("1.0000001 ** 1000000", "too_large"),
        ("(" * 5000 + "1" + ")" * 5000, "too_large"),
        ("1+" * 50_000 + "1", "too_large"),
        ("factorial(10**6)", "too_large"),
        ("factorial(171)", "too_large"),
        ("1e308*10", "too_large"),
        ("1e308", "too_large"),  # above max_abs_value
        ("1e999", "too_large"),
        ("1e200 * 1e200", "too_large"),
        ("exp(1000)", "too_large"),
        ("cosh(1000)", "too_large"),
        ("sin(10 ** 500)", "too_large"),
        ("10 ** 500 / 3", "too_large"),
        ("10 ** 500 + 0.5", "too_large"),
        ("1e300 ** 2", "too_large"),
        ("__import__('os')", "not_an_expression"),
        ("__import__('os').system('ls')", "not_an_expression"),
        ("().__class__", "not_an_expression"),
        ("().__class__.__bases__[0].__subclasses__()", "not_an_expression"),
        ('"a"*10', "not_an_expression"),
        ("b'a'", "not_an_expression"),
        ("lambda: 1", "not_an_expression"),
        ("[1]*10**9", "not_an_expression"),
        ("[x for x in range(10)]", "not_an_expression"),
        ("(1, 2)", "not_an_expression"),
        ("{1: 2}", "not_an_expression"),
        ("{1}", "not_an_expression"),
        ("a.b", "not_an_expression"),
        ("x + 1", "not_an_expression"),
        ("open('/etc/passwd')", "not_an_expression"),
        ("print(1)", "not_an_expression"),
        ("sqrt", "not_an_expression"),
        ("sqrt(x=4)", "not_an_expression"),
        ("sqrt(*[4])", "not_an_expression"),
        ("(1)(2)", "not_an_expression"),
        ("sqrt(4)(2)", "not_an_expression"),
        ("pi(2)", "not_an_expression"),
        ("1 if 1 else 2", "not_an_expression"),
        ("1 < 2", "not_an_expression"),
        ("1 and 2", "not_an_expression"),
        ("not 1", "not_an_expression"),
        ("~1", "not_an_expression"),
        ("1 << 10 ** 9", "not_an_expression"),
        ("6 & 3", "not_an_expression"),
        ("6 | 3", "not_an_expression"),
        ("(y := 3)", "not_an_expression"),
        ("f'{1}'", "not_an_expression"),
        ("True + 1", "not_an_expression"),
        ("None", "not_an_expression"),
        ("1j", "not_an_expression"),
        ("1;2", "not_an_expression"),
        ("import os", "not_an_expression"),
        ("1 +", "not_an_expression"),
        ("", "not_an_expression"),
        ("   ", "not_an_expression"),
        ("((1)", "not_an_expression"),
        ("1)", "not_an_expression"),
        ("1\x00", "not_an_expression"),
        ("1/0", "bad_request"),
        ("1 // 0", "bad_request"),
        ("5 % 0", "bad_request"),
        ("1 / (2 - 2)", "bad_request"),
        ("0 ** -1", "bad_request"),
        ("pow(0, -1)", "bad_request"),
        ("sqrt(-1)", "bad_request"),
        ("log(0)", "bad_request"),
        ("log(-5)", "bad_request"),
        ("log(8, 1)", "bad_request"),
        ("log10(0)", "bad_request"),
        ("ln(-1)", "bad_request"),
        ("asin(2)", "bad_request"),
        ("acos(-1.5)", "bad_request"),
        ("(-8) ** (1 / 3)", "bad_request"),
        ("factorial(2.5)", "bad_request"),
        ("factorial(-1)", "bad_request"),
        ("gcd(1.5, 3)", "bad_request"),
        ("max()", "not_an_expression"),
        ("sqrt(1, 2)", "bad_request"),
        ("log(1, 2, 3)", "bad_request"),
        ("pow(2)", "bad_request"),
        ("atan2(1)", "bad_request"),
    ],
)
def test_rejected(expression: str, code: str) -> None:
    with pytest.raises(CalculatorError) as info:
        evaluate(expression)
    assert info.value.code == code
    assert info.value.message
    assert str(info.value) == info.value.message


def test_messages_say_what_is_wrong() -> None:
    cases = {
        "1/0": "division by zero",
        "__import__('os')": "'__import__' at character 1",
        "().__class__": "')' at character 2",
        "lambda: 1": "'lambda'",
        "[1]*10**9": "'[' at character 1",
        "foo + 1": "'foo'",
        "9**9**9**9": "exponent",
        "factorial(10**6)": "170",
        "sqrt(-1)": "sqrt",
        "1 << 2": "'<'",
        "sqrt(x=1)": "'x'",
        "sqrt(1, 2)": "1 argument",
    }
    for expression, fragment in cases.items():
        with pytest.raises(CalculatorError) as info:
            evaluate(expression)
        assert fragment.lower() in info.value.message.lower(), (expression, info.value.message)


def test_deep_nesting_is_rejected_before_parsing_even_with_a_long_text_allowed() -> None:
    limits = CalculatorLimits(max_chars=1_000_000)
    with pytest.raises(CalculatorError) as info:
        evaluate("(" * 5000 + "1" + ")" * 5000, limits)
    assert info.value.code == "too_large"
    assert "nest" in info.value.message
    # Within the depth limit, nesting is fine.
    assert evaluate("(" * 50 + "1" + ")" * 50) == 1
    with pytest.raises(CalculatorError) as info:
        evaluate("(" * 51 + "1" + ")" * 51)
    assert info.value.code == "too_large"


@pytest.mark.parametrize(
    "expression",
    [
        "-" * 100_000 + "1",
        "2**" * 30_000 + "1",
        "1+" * 200_000 + "1",
        "sqrt(" * 3000 + "1" + ")" * 3000,
    ],
)
def test_parser_stress_with_every_limit_lifted_still_fails_cleanly(expression: str) -> None:
    limits = CalculatorLimits(max_chars=10**7, max_depth=10**6, max_nodes=10**7)
    with pytest.raises(CalculatorError) as info:
        evaluate(expression, limits)
    assert info.value.code in ("too_large", "bad_request")


def test_node_limit() -> None:
    limits = CalculatorLimits(max_chars=100_000)
    with pytest.raises(CalculatorError) as info:
        evaluate("1+" * 300 + "1", limits)
    assert info.value.code == "too_large"
    assert evaluate("1+" * 200 + "1", limits) == 201


def test_length_limit_comes_first() -> None:
    with pytest.raises(CalculatorError) as info:
        evaluate("1" * 100_000)
    assert info.value.code == "too_large"
    assert "500" in info.value.message
    assert evaluate("1" * 500) == int("1" * 500)


def test_custom_limits() -> None:
    assert evaluate("2 ** 20", CalculatorLimits(max_exponent=20)) == 2**20
    with pytest.raises(CalculatorError) as info:
        evaluate("2 ** 21", CalculatorLimits(max_exponent=20))
    assert info.value.code == "too_large"
    with pytest.raises(CalculatorError) as info:
        evaluate("factorial(11)", CalculatorLimits(max_factorial=10))
    assert info.value.code == "too_large"
    with pytest.raises(CalculatorError) as info:
        evaluate("10 ** 20", CalculatorLimits(max_result_digits=20))
    assert info.value.code == "too_large"
    assert evaluate("10 ** 19", CalculatorLimits(max_result_digits=20)) == 10**19
    with pytest.raises(CalculatorError) as info:
        evaluate("1e10 * 10", CalculatorLimits(max_abs_value=1e10))
    assert info.value.code == "too_large"


def test_deadline_is_checked_during_evaluation() -> None:
    with pytest.raises(CalculatorError) as info:
        evaluate("1 + 1", CalculatorLimits(timeout_s=-1))
    assert info.value.code == "too_large"
    assert "longer" in info.value.message


def test_limits_defaults_and_frozen() -> None:
    limits = CalculatorLimits()
    assert (limits.max_chars, limits.max_depth, limits.max_nodes) == (500, 50, 500)
    assert (limits.max_exponent, limits.max_result_digits, limits.max_factorial) == (10_000, 1000, 170)
    assert limits.max_abs_value == 1e300 and limits.timeout_s == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_chars = 10  # type: ignore[misc]


def test_non_string_input() -> None:
    with pytest.raises(CalculatorError) as info:
        evaluate(42)  # type: ignore[arg-type]
    assert info.value.code == "bad_request"


def test_error_codes_are_validated() -> None:
    with pytest.raises(ValueError):
        CalculatorError("nope", "x")
    err = CalculatorError("too_large", "msg")
    assert err.code == "too_large" and err.message == "msg"


# --------------------------------------------------------------------------- format_result


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (352, "352"),
        (-4, "-4"),
        (0, "0"),
        (2**100, "1267650600228229401496703205376"),
        (42.5, "42.5"),
        (0.1 + 0.2, "0.3"),
        (1 / 3, "0.333333333333"),
        (2 / 3, "0.666666666667"),
        (math.pi, "3.14159265359"),
        (12.0, "12"),
        (-0.0, "0"),
        (1e20, "1e+20"),
        (1.5e-7, "1.5e-7"),
        (123456789.123456, "123456789.123"),
        (float("inf"), "inf"),
        (float("nan"), "nan"),
    ],
)
def test_format_result(value: float, text: str) -> None:
    assert format_result(value) == text


def test_format_result_of_results() -> None:
    assert format_result(evaluate("15 * 23 + 7")) == "352"
    assert format_result(evaluate("sqrt(2)")) == "1.41421356237"
    assert format_result(evaluate("sin(pi)")) == "1.22464679915e-16"
    assert format_result(evaluate("10 / 4")) == "2.5"


def test_format_result_of_a_huge_int_does_not_fail() -> None:
    text = format_result(10**5000 + 7)
    assert text.startswith("1e+") or text.startswith("1")
    assert len(text) < 50


def test_format_result_rejects_non_numbers() -> None:
    with pytest.raises(TypeError):
        format_result("12")  # type: ignore[arg-type]
