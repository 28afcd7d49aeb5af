"""Pattern expressions (paper 1, Fig. 5 and Definition 4.1): matching, eval, text round trip.

The hypothesis strategies defined here (``names``, ``patterns``, ...) are reused by the
CQL and wire-format tests.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamshield.lang.cql import CqlError, parse_pattern
from streamshield.policy.sp_patterns import (
    ANY,
    Any,
    Glob,
    Literal,
    OneOf,
    Pattern,
    Range,
    as_number,
    evaluate,
    one_of,
    value_text,
)

# --- strategies -------------------------------------------------------------------------

#: Names that need quoting (spaces, keywords, number look-alikes) or are keywords elsewhere.
AWKWARD_NAMES = (
    "Nurse on duty",
    "ALL",
    "all",
    "All",
    "let",
    "LET",
    "AND",
    "WITH",
    "TRUE",
    "STREAMS",
    "INSERT",
    "120",
    "-5",
    "1.5",
    "a--b",
    "*",
    "",
    'say "hi"',
    "back\\slash",
)

names = st.one_of(
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_\-]{0,8}", fullmatch=True),
    st.text(alphabet="abcXYZ019_- ", min_size=1, max_size=10),
    st.sampled_from(AWKWARD_NAMES),
)
ints = st.integers()
#: Floats whose repr is plain decimal (``1.5``, not ``1e-05``): the only float spelling
#: the NUMBER token has.
plain_floats = st.floats(min_value=-1e15, max_value=1e15).filter(
    lambda f: re.fullmatch(r"-?\d+\.\d+", repr(f)) is not None
)
values = st.one_of(names, ints, plain_floats)
literals = values.map(Literal)
one_ofs = st.frozensets(literals, min_size=1, max_size=4).map(OneOf)
range_bounds = st.one_of(ints.map(float), plain_floats)
ranges = st.tuples(range_bounds, range_bounds).map(lambda lh: Range(min(lh), max(lh)))
#: ``*`` alone is excluded: the grammar reads it as ANY by design (``Glob("*")`` has no
#: text of its own).
globs = (
    st.from_regex(r"[A-Za-z0-9_.\-]{0,4}[*?][A-Za-z0-9_.\-*?]{0,4}", fullmatch=True)
    .filter(lambda g: g != "*")
    .map(Glob)
)
patterns: st.SearchStrategy[Pattern] = st.one_of(st.just(ANY), literals, one_ofs, ranges, globs)


# --- Any --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["HeartRate", 120, 1.5, "", True, None, ("x",)])
def test_any_matches_everything(value: object) -> None:
    assert ANY.matches(value)
    assert Any() == ANY


@pytest.mark.parametrize("text", ["*", "ALL", "all", "All"])
def test_any_spellings(text: str) -> None:
    assert parse_pattern(text) == ANY


# --- Literal ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [120, 120.0, "120", "120.0"])
def test_numeric_literal_matches_numeric_readings(value: object) -> None:
    assert Literal(120).matches(value)
    assert Literal(120.0).matches(value)


@pytest.mark.parametrize("value", [121, "121", "abc", "", None, "120abc", "1.2e2", float("nan")])
def test_numeric_literal_rejects_other_values(value: object) -> None:
    assert not Literal(120).matches(value)


@pytest.mark.parametrize("value", [True, False])
def test_numeric_literal_never_matches_booleans(value: bool) -> None:
    """``True == 1`` in Python; a tuple id ``true`` must still not pass a literal ``1``."""
    assert not Literal(1).matches(value)
    assert not Literal(0).matches(value)
    assert not Literal(1.0).matches(value)


def test_string_literal_matches_by_text() -> None:
    assert Literal("HeartRate").matches("HeartRate")
    assert not Literal("HeartRate").matches("heartrate")
    assert not Literal("HeartRate").matches("HeartRate ")
    assert Literal("120").matches(120)  # text of the value
    assert Literal("120").matches("120")
    assert not Literal("120").matches(120.0)  # "120.0" != "120"
    assert not Literal("True").matches(True)


def test_literal_of_boolean_has_no_text() -> None:
    with pytest.raises(TypeError):
        value_text(True)


# --- OneOf ------------------------------------------------------------------------------


def test_one_of_matches_any_member() -> None:
    pattern = OneOf(frozenset({Literal("D"), Literal("ND"), Literal(120)}))
    assert pattern.matches("D")
    assert pattern.matches("ND")
    assert pattern.matches("120")
    assert pattern.matches(120.0)
    assert not pattern.matches("C")
    assert not pattern.matches(True)


def test_one_of_needs_a_member() -> None:
    with pytest.raises(ValueError, match="at least one"):
        OneOf(frozenset())


def test_one_of_helper_collapses_single_value() -> None:
    assert one_of(["D"]) == Literal("D")
    assert one_of(["D", "D"]) == Literal("D")
    assert one_of([120, 120.0]) == Literal(120)  # numerically equal literals are one
    assert one_of(["D", "ND"]) == OneOf(frozenset({Literal("D"), Literal("ND")}))
    with pytest.raises(ValueError):
        one_of([])


def test_one_of_text_is_sorted_and_quoted() -> None:
    pattern = one_of(["b", "a", "Nurse on duty"])
    assert pattern.text() == '{"Nurse on duty", a, b}'
    assert parse_pattern(pattern.text()) == pattern


# --- Range ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [120, 200, 150, 120.0, 199.5, "125", "200", "120.5"])
def test_range_is_closed_interval(value: object) -> None:
    assert Range(120.0, 200.0).matches(value)


@pytest.mark.parametrize(
    "value",
    [119, 200.0001, "201", "abc", "", None, float("nan"), "nan", True, False, [150], "1.5e2"],
)
def test_range_rejects_outside_non_numeric_and_nan(value: object) -> None:
    assert not Range(120.0, 200.0).matches(value)


def test_single_point_range() -> None:
    assert Range(5.0, 5.0).matches(5)
    assert not Range(5.0, 5.0).matches(5.5)


def test_empty_range_rejected() -> None:
    with pytest.raises(ValueError, match="empty range"):
        Range(200.0, 120.0)
    with pytest.raises(CqlError, match="empty range"):
        parse_pattern("[200, 120]")


def test_range_text() -> None:
    assert Range(120.0, 200.0).text() == "[120, 200]"
    assert Range(-1.5, 2.25).text() == "[-1.5, 2.25]"


def test_range_with_int_bounds() -> None:
    """Int bounds (as tests/unit/strategies.py builds them) behave like float bounds."""
    assert Range(120, 200) == Range(120.0, 200.0)
    assert Range(120, 200).text() == "[120, 200]"
    assert Range(120, 200).matches("120")


# --- Glob -------------------------------------------------------------------------------


def test_glob_star() -> None:
    pattern = Glob("Heart*")
    assert pattern.matches("HeartRate")
    assert pattern.matches("Heart")
    assert not pattern.matches("heartRate")  # case-sensitive
    assert not pattern.matches("BodyHeart")


def test_glob_question_mark() -> None:
    pattern = Glob("s?")
    assert pattern.matches("s1")
    assert pattern.matches("s2")
    assert not pattern.matches("s")
    assert not pattern.matches("s10")


def test_glob_matches_text_of_numbers_but_not_booleans() -> None:
    assert Glob("12?").matches(120)
    assert not Glob("Tru?").matches(True)


@pytest.mark.parametrize("bad", ["Heart", "", "a b*", "[ab]*", "x/*", "é*"])
def test_invalid_glob_rejected(bad: str) -> None:
    with pytest.raises(ValueError, match="not a glob"):
        Glob(bad)


def test_glob_parses() -> None:
    assert parse_pattern("Heart*") == Glob("Heart*")
    assert parse_pattern("?") == Glob("?")
    assert parse_pattern("s?_*") == Glob("s?_*")


# --- evaluate (Definition 4.1) ----------------------------------------------------------


def test_evaluate_returns_matching_subset_in_order() -> None:
    tids: list[object] = [100, 120, "150", 200, 201, "abc", True, 175.5]
    assert evaluate(Range(120.0, 200.0), tids) == [120, "150", 200, 175.5]
    streams = ["HeartRate", "BodyTemperature", "BreathingRate", "HeartRate2"]
    assert evaluate(Glob("Heart*"), streams) == ["HeartRate", "HeartRate2"]
    assert evaluate(ANY, streams) == streams
    assert evaluate(one_of(["D", "ND"]), ["C", "D", "GP", "ND"]) == ["D", "ND"]
    assert evaluate(Literal("C"), []) == []


@given(patterns, st.lists(st.one_of(st.integers(), st.text(max_size=5), st.booleans())))
def test_evaluate_is_filter(pattern: Pattern, values_: list[object]) -> None:
    result = evaluate(pattern, values_)
    assert result == [v for v in values_ if pattern.matches(v)]


# --- parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HeartRate", Literal("HeartRate")),
        ("120", Literal(120)),
        ("-3", Literal(-3)),
        ("1.5", Literal(1.5)),
        ('"Nurse on duty"', Literal("Nurse on duty")),
        ('"ALL"', Literal("ALL")),
        ("let", Literal("let")),
        ('"120"', Literal("120")),
        ("[120, 200]", Range(120.0, 200.0)),
        ("[ -1.5 ,2 ]", Range(-1.5, 2.0)),
        ("{D, ND}", OneOf(frozenset({Literal("D"), Literal("ND")}))),
        ("{D}", OneOf(frozenset({Literal("D")}))),
        ('{1, "1"}', OneOf(frozenset({Literal(1), Literal("1")}))),
    ],
)
def test_parse_pattern(text: str, expected: Pattern) -> None:
    assert parse_pattern(text) == expected


@pytest.mark.parametrize("bad", ["", "{}", "[1]", "[a, b]", "a b", "{a,}", "1.", "@", '"open'])
def test_parse_pattern_rejects(bad: str) -> None:
    with pytest.raises(CqlError):
        parse_pattern(bad)


def test_value_text_quotes_only_when_needed() -> None:
    assert value_text("HeartRate") == "HeartRate"
    assert value_text("Nurse on duty") == '"Nurse on duty"'
    assert value_text("all") == '"all"'
    assert value_text('a"b\\c') == '"a\\"b\\\\c"'
    assert value_text(120) == "120"
    assert value_text(1.5) == "1.5"


@given(patterns)
@example(Literal("Nurse on duty"))
@example(Literal("ALL"))
@example(Literal("let"))
@example(OneOf(frozenset({Literal("ALL"), Literal(1), Literal("1")})))
@example(Range(-0.5, 0.5))
@example(Glob("--*"))
def test_text_round_trip(pattern: Pattern) -> None:
    """``parse_pattern(p.text()) == p`` for every pattern the grammar can express."""
    assert parse_pattern(pattern.text()) == pattern


def test_large_int_literal_round_trip() -> None:
    """Regression: integer tokens were once read through float, so 2**53 + 1 came back as 2**53."""
    pattern = Literal(2**53 + 1)
    assert parse_pattern(pattern.text()) == pattern


def test_glob_star_alone_reads_as_any() -> None:
    """By design: ``*`` is ANY, so ``Glob("*")`` cannot round-trip (excluded above)."""
    assert Glob("*").text() == "*"
    assert parse_pattern("*") == ANY


def test_as_number() -> None:
    assert as_number(3) == 3.0
    assert as_number("-2.5") == -2.5
    assert as_number(" 120 ") is None, "padded text is not a number (Spark reads it the same)"
    assert as_number(True) is None
    assert as_number(math.nan) is None
    assert as_number("nan") is None
    assert as_number("1e3") is None
    assert as_number(None) is None
