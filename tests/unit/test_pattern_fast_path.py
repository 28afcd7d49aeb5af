"""The parser-free reading of the commonest wire patterns equals the grammar's reading.

Secure ingest reads ``*``, plain names and sets of plain names without lark (a parse
costs about a millisecond per sp); wherever that fast path answers, it must answer
exactly what the grammar does, and it must never accept a text the grammar refuses.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamshield.lang.cql import CqlError, _parse, _simple_pattern, parse_pattern
from streamshield.policy.sp_patterns import (
    ANY,
    MAX_SET_VALUES,
    MAX_VALUE_CHARS,
    Literal,
    OneOf,
    Pattern,
)
from tests.unit.test_sp_patterns import patterns

PIECES = [
    "*",
    "?",
    "{",
    "}",
    ", ",
    ",",
    " ",
    "ALL",
    "all",
    "All",
    "SP",
    "INSERT",
    "a",
    "r001",
    "_",
    "-",
    "1",
    "1.5",
    "-2",
    '"x"',
    "[",
    "]",
    "\n",
    "\t",
    ".",
    "é",
]


def _grammar(text: str) -> Pattern | str:
    try:
        return _parse(text, "pattern")  # type: ignore[return-value]
    except CqlError:
        return "refused"


@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join))
@example("{all, b}")
@example("{a,b}")
@example("a-")
@example("ALL")
@example("{a}")
@example("*")
@example("r001 ")
def test_fast_path_reads_like_the_grammar(text: str) -> None:
    fast, grammar = _simple_pattern(text), _grammar(text)
    if fast is not None:
        assert fast == grammar
    if grammar == "refused":
        with pytest.raises(CqlError):
            parse_pattern(text)
    else:
        assert parse_pattern(text) == grammar


@given(patterns)
def test_every_written_pattern_reads_back_the_same(pattern: Pattern) -> None:
    """What the wire writes (``text()``) reads back equal, fast path or not."""
    assert parse_pattern(pattern.text()) == pattern == _parse(pattern.text(), "pattern")


def test_the_commonest_forms_take_the_fast_path() -> None:
    assert _simple_pattern("*") is ANY
    assert _simple_pattern("r001") == Literal("r001")
    assert _simple_pattern("{r001, r017}") == OneOf(frozenset({Literal("r001"), Literal("r017")}))
    assert _simple_pattern("all") is None  # ALL is the keyword for every value: the grammar


def test_a_value_past_a_limit_is_the_grammars_error() -> None:
    with pytest.raises(CqlError):
        parse_pattern("a" * (MAX_VALUE_CHARS + 1))
    with pytest.raises(CqlError):
        parse_pattern("{" + ", ".join(f"r{i}" for i in range(MAX_SET_VALUES + 1)) + "}")
