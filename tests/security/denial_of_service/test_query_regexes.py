"""Threat: a continuous query whose regular expression stalls the stream thread.

Spark compiles RLIKE, ``regexp_*``, ``split``, ``str_to_map``, ``parse_url``'s key and
LIKE/ILIKE patterns into ``java.util.regex``, a backtracking engine, and applies them to
tenant data. The class: any user text that reaches a Java regex. It must be a short
string literal that cannot backtrack, or the query is refused before Spark sees it.
"""

from __future__ import annotations

import re
import time

import pytest

from streamshield.engine.spark_errors.analysis_errors import rejected
from streamshield.lang.query_check import QueryRejected, check_query
from tests.security.denial_of_service.deadline import within

STREAMS = ["HeartRate"]

REFUSED = [
    "beats RLIKE '(a+)+b'",
    "beats REGEXP 'a*a*a*a*b'",
    "regexp_like(beats, '(x|xx)*y')",
    "regexp(beats, '(.*a){20}')",
    "regexp_extract(beats, '(a|aa)+$', 1)",
    "regexp_replace(beats, '\\\\w+\\\\s', '')",
    "regexp_count(beats, '[a-z]+')",
    "split(beats, '(,|;)+')",
    "str_to_map(beats, '.*,', ':')",
    "parse_url(beats, 'QUERY', '(a|a)*')",
    "beats RLIKE beats",  # the pattern would be tenant data
    "beats LIKE '%a%a%a%a%b'",
    "beats ILIKE '%%%%%%%%x'",
    "beats LIKE ANY ('x%', '%a%b%c')",
    "beats LIKE concat('%', beats)",
    "beats LIKE 'a' ESCAPE '!'",
    "beats SIMILAR TO 'a'",
    "beats RLIKE '" + "a" * 10_000 + "'",  # MAX_REGEX_CHARS is 256
]
ALLOWED = [
    "beats RLIKE '^ab\\\\.c$'",
    "split(beats, ',')",
    "beats LIKE 'ab%'",
    "beats LIKE '%ab'",
    "beats LIKE '%ab%'",
    "beats LIKE 'a%b'",
    "beats LIKE 'a_b%'",
    "beats ILIKE '%x_y%'",
    "str_to_map(beats, ',', ':')",
]


@pytest.mark.parametrize("expression", REFUSED)
def test_backtracking_patterns_are_refused_before_spark(expression: str) -> None:
    started = time.perf_counter()
    with pytest.raises(QueryRejected) as refused:
        check_query(f"SELECT {expression} AS x FROM HeartRate", STREAMS)
    assert time.perf_counter() - started < 1.0
    assert refused.value.rule == "regex"
    # the message names the rule, never the pattern the user wrote
    for literal in re.findall(r"'([^' ]{2,})'", expression):
        assert literal not in refused.value.message


@pytest.mark.parametrize("expression", ALLOWED)
def test_linear_patterns_still_work(expression: str) -> None:
    checked = check_query(f"SELECT {expression} AS x FROM HeartRate", STREAMS)
    assert checked.streams == ("HeartRate",)
    check_query(checked.rewrite({"HeartRate": "v"}), ["v"])  # and survive the rewrite


def test_deep_nesting_is_refused_in_bounded_time() -> None:
    started = time.perf_counter()
    with pytest.raises(QueryRejected):
        check_query("SELECT " + "(" * 5_000 + "beats" + ")" * 5_000 + " FROM HeartRate", STREAMS)
    assert time.perf_counter() - started < 5.0


def _explain(message: str) -> tuple[str, float]:
    started = time.perf_counter()
    refusal = rejected(RuntimeError(message), "SELECT beats FROM HeartRate")
    return refusal.rule, time.perf_counter() - started


def test_explaining_a_spark_refusal_that_quotes_the_query_takes_linear_time() -> None:
    """Spark's messages can quote the query (up to 100,000 characters); reading them must
    not be quadratic either."""
    rule, seconds = within(10.0, _explain, "unsupported " * 8_000)
    assert rule == "analysis" and seconds < 0.5
    rule, _ = within(10.0, _explain, "x unsupported " * 100 + "on a stream. Next")
    assert rule == "not_supported"
