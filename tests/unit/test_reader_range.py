"""The secured scan's range pre-filter never drops a row the bitwise tuple test passes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.policy.bitset import WORD_BITS
from streamshield.policy.encoding import EncodedAccess
from streamshield.policy.reader_range import (
    NO_READER,
    bit_range,
    label_summary,
    may_meet,
    reader_range,
)

SIGNED = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SPARSE = st.one_of(
    st.just(0),
    st.just(-(2**63)),  # bit 63 alone: the word Python and Java disagree on most
    st.integers(0, 63).map(lambda b: (1 << b) - (1 << 64 if b == 63 else 0)),
    SIGNED,
)


def words(width: int):
    return st.tuples(*[SPARSE] * width)


def bits(ws: tuple[int, ...]) -> list[int]:
    return [WORD_BITS * w + b for w, word in enumerate(ws) for b in range(64) if word >> b & 1]


@given(st.integers(1, 3).flatmap(words))
def test_bit_range_is_the_lowest_and_highest_set_bit(ws) -> None:
    found = bits(ws)
    assert bit_range(ws) == ((min(found), max(found)) if found else None)


@given(st.integers(1, 3).flatmap(lambda n: st.tuples(words(n), words(n), words(n))))
def test_the_range_test_keeps_every_row_the_tuple_test_passes(case) -> None:
    readers, denied, query = case
    if EncodedAccess(readers, denied).allows(query):
        assert may_meet(*reader_range(readers), query)


@given(st.integers(1, 3).flatmap(lambda n: st.tuples(words(n), words(n))))
def test_the_range_test_is_exact_for_one_role(case) -> None:
    """A query of one role skips a row exactly when the role is outside its readers' range."""
    readers, query = case
    role = bits(query)[:1]
    if not role:
        return
    one = tuple(
        (1 << (role[0] % 64)) - (1 << 64 if role[0] % 64 == 63 else 0) if w == role[0] // 64 else 0
        for w in range(len(query))
    )
    found = bits(readers)
    inside = bool(found) and min(found) <= role[0] <= max(found)
    assert may_meet(*reader_range(readers), one) == inside


def test_files_without_summaries_are_left_to_the_tuple_test() -> None:
    assert may_meet(None, None, (1,))
    assert not may_meet(None, None, (0,)), "a query with no role reads nothing anyway"


def test_a_tuple_nobody_may_read_meets_no_query() -> None:
    assert reader_range((0, 0)) == NO_READER
    assert not any(may_meet(*NO_READER, q) for q in ((1, 0), (0, -1), (-1, -1)))


def label(width: int, objects: int):
    """Finished label words in stored order, attributes often equal to the tuple's."""
    one = st.lists(words(2 * width).map(list), min_size=1, max_size=1)
    return one.flatmap(
        lambda first: st.lists(
            st.one_of(st.just(first[0]), words(2 * width).map(list)),
            min_size=objects - 1,
            max_size=objects - 1,
        ).map(lambda rest: [w for obj in [first[0], *rest] for w in obj])
    )


@given(
    st.tuples(st.integers(1, 3), st.integers(1, 4)).flatmap(
        lambda wo: st.tuples(st.just(wo), label(*wo), st.integers(1, wo[0]))
    )
)
def test_a_policy_summary_is_what_each_of_its_rows_would_compute(case) -> None:
    """Ingest summarises a policy once on the driver; the per-row expressions
    (scan_summary.summary_columns) read the same words: READ reader words of the tuple."""
    (width, objects), ws, block = case
    readers = tuple(ws[2 * w] for w in range(block))
    assert label_summary(ws, objects, width, block) == reader_range(readers)


def test_a_denied_tuple_summarises_as_no_reader() -> None:
    assert label_summary([0] * 12, 3, 2, 1) == NO_READER


def test_a_summary_refuses_words_of_another_layout() -> None:
    with pytest.raises(ValueError):
        label_summary([0] * 11, 3, 2, 1)
