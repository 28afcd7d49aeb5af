"""Threat: a continuous query that turns one small row into gigabytes.

The class: any function whose output can be larger than its input by a factor the query
chooses: a count or length argument (``repeat``, ``lpad``/``rpad``, ``space``,
``randstr``, ``array_repeat``, ``sequence``), a width or precision in a format
(``printf``/``format_string``, ``format_number``'s decimals), limits multiplied by
nesting one such call in another or in a lambda, and accumulators that can double per
element (``aggregate``/``reduce``). The Spark application is shared by every tenant, so
one such row is a denial of service for all. Each is refused at query check with rule
``expansion``, a message naming the function and the limit and never the literal; sizes
taken from data are refused (a tenant's value would choose them).
"""

from __future__ import annotations

import pytest

from streamshield.lang.query_check import MAX_EXPANSION, QueryRejected, check_query
from tests.security.denial_of_service.deadline import within

STREAMS = ["HeartRate"]
HUGE = "2147483647"

REFUSED = {
    f"repeat('ab', {HUGE})": "repeat",
    "repeat('ab', 10001)": "repeat",
    "repeat('ab', patient_id)": "repeat",  # tenant data would choose the count
    "repeat('ab', CAST('99999999' AS INT))": "repeat",
    "repeat('ab', 1e9)": "repeat",
    f"lpad('x', {HUGE}, 'y')": "lpad",
    f"rpad(CAST(patient_id AS STRING), {HUGE})": "rpad",
    "lpad('x', beats_per_min)": "lpad",
    f"space({HUGE})": "space",
    f"randstr({HUGE})": "randstr",
    f"array_repeat(patient_id, {HUGE})": "array_repeat",
    "array_repeat('x', patient_id)": "array_repeat",
    f"sequence(1, {HUGE})": "sequence",
    f"sequence(-{HUGE}, 0, 1)": "sequence",
    "sequence(0, 1000000, 99)": "sequence",  # 10,102 elements
    "sequence(1, patient_id)": "sequence",
    "sequence(1, 10, 0)": "sequence",
    f"size(explode(sequence(1, {HUGE})))": "sequence",
    "printf('%0999999999d', 1)": "printf",
    "printf('%.999999999f', 1.0)": "printf",
    "printf('%1$20000s', 'x')": "printf",
    "printf(CAST(patient_id AS STRING), 1)": "printf",  # the format would be data
    "format_string('%-2147483647s', 'x')": "format_string",
    f"format_number(1.5, {HUGE})": "format_number",
    "format_number(1.5, patient_id)": "format_number",
    "repeat(repeat('ab', 10000), 10000)": "repeat",  # each within the limit, product not
    "lpad(space(10000), 10000)": "space",
    "array_repeat(array_repeat(1, 10000), 10000)": "array_repeat",
    "transform(array_repeat(1, 10000), x -> repeat('ab', 10000))": "repeat",
    "aggregate(array(1, 1, 1, 1, 1, 1, 1, 1), 'ab', (acc, x) -> concat(acc, acc))": "aggregate",
    "reduce(array(1, 2), '', (acc, x) -> acc || acc)": "aggregate",
}


@pytest.mark.parametrize("expression", list(REFUSED))
def test_size_amplification_is_refused_naming_the_function(expression: str) -> None:
    sql = f"SELECT {expression} AS x FROM HeartRate"
    with pytest.raises(QueryRejected) as refused:
        check_query(sql, STREAMS)
    error = refused.value
    assert error.rule == "expansion"
    assert REFUSED[expression] in error.message
    assert HUGE not in error.message and "999999999" not in error.message


@pytest.mark.parametrize(
    "expression",
    [
        "repeat('-', 40)",
        f"repeat('-', {MAX_EXPANSION})",
        "lpad(CAST(patient_id AS STRING), 8, '0')",
        "rpad('x', -3)",
        "space(4)",
        "array_repeat(beats_per_min, 3)",
        "sequence(1, 10)",
        f"sequence(1, {MAX_EXPANSION})",
        "sequence(10, 1, -3)",
        "printf('%05d of %.2f (%s)', patient_id, beats_per_min, 'x')",
        "format_string('%1$s-%1$s', 'x')",
        "format_number(beats_per_min, 2)",
        "format_number(beats_per_min, '#,###.##')",
        "concat(repeat('a', 3), lpad('b', 3))",  # side by side, not nested
        "transform(array(1, 2), x -> x + 1)",
    ],
)
def test_bounded_uses_pass(expression: str) -> None:
    check_query(f"SELECT {expression} AS x FROM HeartRate", STREAMS)


def _rule(sql: str) -> str:
    try:
        check_query(sql, STREAMS)
    except QueryRejected as error:
        return error.rule
    return "accepted"


def test_checking_a_huge_format_is_linear() -> None:
    """The format scan itself must not backtrack on a long literal of digits and flags."""
    body = "%-+0,(" * 9_000 + "%" + "0" * 40_000 + "99999d"
    sql = f"SELECT printf('{body}', 1) AS x FROM HeartRate"
    assert within(5.0, _rule, sql) == "expansion"
