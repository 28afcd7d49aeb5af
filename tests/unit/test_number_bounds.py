"""Every number a user's SQL writes fits the type Spark reads it as, or the query is a
clear refusal that does not echo the number (lang/number_bounds.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.lang.continuous import parse_request
from streamshield.lang.query_check import QueryRejected, check_query

STREAMS = ["vitals"]
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def _refusal(sql: str) -> QueryRejected:
    with pytest.raises(QueryRejected) as caught:
        check_query(sql, STREAMS)
    return caught.value


@pytest.mark.parametrize(
    "number",
    [
        "1" + "7" * 38,  # 39 digits: past DECIMAL(38)
        "7" * 5000,  # past Python's own int() limit
        "0." + "7" * 60,
        "7.7e400",
        "-7.7e400",
        "77777777777777777777L",
        "40007S",
        "207Y",
        "7" * 39 + "BD",
    ],
)
def test_a_number_past_its_type_is_refused_without_echoing_it(number: str) -> None:
    error = _refusal(f"SELECT hr FROM vitals WHERE hr > {number}")
    assert error.rule == "number"
    assert "777" not in error.message and "400" not in error.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT CAST(hr AS DECIMAL(99, 2)) AS d FROM vitals",
        "SELECT CAST(hr AS DECIMAL(10, 12)) AS d FROM vitals",
        "SELECT CAST(hr AS DECIMAL(0, 0)) AS d FROM vitals",
        "SELECT CAST(3000000000 AS INT) AS d FROM vitals",
    ],
)
def test_casts_and_decimal_types_are_held_to_spark_bounds(sql: str) -> None:
    assert _refusal(sql).rule == "number"


@pytest.mark.parametrize(
    "number",
    [
        "1" + "0" * 37,  # 38 digits
        "0." + "1" * 37,
        "000000000000000000000000000000000000000000001",  # leading zeros are not digits
        "1.7e308",
        "2.5E-3",
        "-9223372036854775808L",  # the sign is read with the literal
        "9223372036854775807L",
        "32767S",
        "-128Y",
        "1.5BD",
        "2D",
    ],
)
def test_numbers_within_their_types_are_accepted(number: str) -> None:
    check_query(f"SELECT hr FROM vitals WHERE hr > {number}", STREAMS)


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_a_bigint_literal_is_accepted_exactly_within_64_bits(value: int) -> None:
    sql = f"SELECT hr FROM vitals WHERE hr > {value}L"
    if LONG_MIN <= value <= LONG_MAX:
        check_query(sql, STREAMS)
    else:
        assert _refusal(sql).rule == "number"


@given(st.integers(min_value=1, max_value=60))
def test_a_whole_number_is_accepted_exactly_up_to_38_digits(digits: int) -> None:
    sql = f"SELECT hr FROM vitals WHERE hr > {'9' * digits}"
    if digits <= 38:
        check_query(sql, STREAMS)
    else:
        assert _refusal(sql).rule == "number"


@pytest.mark.parametrize(
    "window",
    [
        "[ROWS 99999999999999999999999]",
        "[ROWS 2147483648]",
        "[RANGE 99999999999999 HOURS]",
        "[RANGE 10 SLIDE 99999999999999999999]",
    ],
)
def test_a_window_size_past_its_bound_says_the_bound(window: str) -> None:
    with pytest.raises(QueryRejected) as caught:
        parse_request(f"SELECT count(*) AS n FROM vitals {window}")
    assert caught.value.rule == "window_syntax"
    assert "at most 2147483647" in caught.value.message, caught.value.message
