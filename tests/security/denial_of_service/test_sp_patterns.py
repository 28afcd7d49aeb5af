"""Threat: a pattern that stalls matching (docs/security.md, "No input can stall the system").

Sp patterns (tuple ids, roles) come from providers and are matched against every tuple,
in Python by the reference shield and in Spark (a Java regex) by ingest. The class of
attack is any pattern whose matching cost grows faster than the value: backtracking
globs (``a*a*a*...b``), very long globs (one JVM stack frame per regex node), huge sets,
and numbers too big to read. Each must be matched in linear time or refused when parsed.
"""

from __future__ import annotations

import fnmatch
import random
import re
import time

import pytest

from streamshield.engine.views.labels import glob_regex
from streamshield.lang.cql import CqlError, parse_pattern
from streamshield.policy import sp_patterns
from streamshield.policy.sp_patterns import Glob
from tests.security.denial_of_service.deadline import within

# Shapes whose naive translation backtracks over every split of the value between stars.
ADVERSARIAL_GLOBS = ["*a*a*a*a*a*a*b", "a*a*a*a*a*a*a*a*c", "*?*?*?*?*?*?*?*-", "*aa*aa*aa*aab"]


def spark_regex(glob: str) -> re.Pattern[str]:
    """The regex Spark receives, read by Python's backtracking engine (same semantics for
    this subset; Python spells Java's ``\\z`` as ``\\Z``)."""
    return re.compile(glob_regex(glob).replace(r"\z", r"\Z"))


def _match_both(glob: str, value: str) -> tuple[bool, bool, float]:
    started = time.perf_counter()
    python = Glob(glob).matches(value)
    spark = spark_regex(glob).match(value) is not None
    return python, spark, time.perf_counter() - started


@pytest.mark.parametrize("glob", ADVERSARIAL_GLOBS)
def test_adversarial_globs_match_in_linear_time(glob: str) -> None:
    python, spark, seconds = within(10.0, _match_both, glob, "a" * 20_000)
    assert not python and not spark
    assert seconds < 0.5


def _growth(glob: str) -> tuple[float, float]:
    def cost(n: int) -> float:
        return min(_match_both(glob, "a" * n)[2] for _ in range(3))

    return cost(2_000), cost(16_000)


def test_matching_time_grows_linearly_with_the_value() -> None:
    small, large = within(10.0, _growth, "*a*a*a*b")
    assert large < 8 * 4 * max(small, 1e-4)  # 8x the value: about 8x the time, not 8^3


def test_glob_matching_equals_fnmatch_in_python_and_in_the_spark_regex() -> None:
    rng = random.Random(11)
    for _ in range(5_000):
        glob = "".join(rng.choice("ab*?.") for _ in range(rng.randint(1, 8)))
        if "*" not in glob and "?" not in glob:
            continue
        value = "".join(rng.choice("ab.\n") for _ in range(rng.randint(0, 9)))
        expected = fnmatch.fnmatchcase(value, glob)
        assert Glob(glob).matches(value) is expected, (glob, value)
        assert (spark_regex(glob).match(value) is not None) is expected, (glob, value)


def test_too_long_globs_are_refused_when_parsed() -> None:
    MAX_GLOB_CHARS = sp_patterns.MAX_GLOB_CHARS
    assert parse_pattern("a?" * (MAX_GLOB_CHARS // 2)) == Glob("a?" * (MAX_GLOB_CHARS // 2))
    started = time.perf_counter()
    for text in ("?a" * 5_000, "*" + "a" * 100_000 + "?"):
        with pytest.raises(CqlError, match=f"longer than {MAX_GLOB_CHARS}"):
            parse_pattern(text)
    assert time.perf_counter() - started < 1.0


def test_huge_sets_and_values_are_refused_when_parsed() -> None:
    MAX_SET_VALUES, MAX_VALUE_CHARS = sp_patterns.MAX_SET_VALUES, sp_patterns.MAX_VALUE_CHARS
    parse_pattern("{" + ", ".join(str(i) for i in range(MAX_SET_VALUES)) + "}")
    started = time.perf_counter()
    with pytest.raises(CqlError, match=f"more than {MAX_SET_VALUES} values"):
        parse_pattern("{" + ", ".join(str(i) for i in range(5_000)) + "}")
    with pytest.raises(CqlError, match=f"longer than {MAX_VALUE_CHARS}"):
        parse_pattern('"' + "x" * 100_000 + '"')
    for number in ("9" * 100_000, "-" + "9" * 5_000):  # int() refuses > 4300 digits
        with pytest.raises(CqlError):
            parse_pattern(number)
    with pytest.raises(CqlError):
        parse_pattern("[0, " + "9" * 400 + "]")  # not a finite double
    assert time.perf_counter() - started < 3.0
