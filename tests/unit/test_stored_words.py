"""The label words a batch leaves out are exactly those its reader can restore."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.policy.stored_words import restore, unstored

WORD = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@st.composite
def batches(draw) -> tuple[int, int, list[list[int]]]:
    """Label words of a batch's rows, often sharing words as real policies do."""
    objects, width = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    size = 2 * width * objects
    pool = draw(st.lists(st.sampled_from([0, 0, 1, -1, 5, 2**62]) | WORD, min_size=1))
    row = st.lists(st.sampled_from(pool), min_size=size, max_size=size)
    rows = draw(st.lists(row, max_size=6))
    if rows and draw(st.booleans()):  # attributes as the tuple: what no attribute sp gives
        rows = [r[: 2 * width] * objects for r in rows]
    return objects, width, rows


@given(batches())
def test_every_row_is_restored_from_what_the_batch_stores(batch) -> None:
    objects, width, rows = batch
    left_out = unstored(rows, objects, width)
    for row in rows:
        stored = {i: w for i, w in enumerate(row) if i not in left_out}
        assert restore(stored, objects, width) == row


@given(batches())
def test_a_column_is_left_out_only_by_its_own_rule(batch) -> None:
    objects, width, rows = batch
    for i in unstored(rows, objects, width):
        if i < 2 * width:
            assert all(row[i] == 0 for row in rows)
        else:
            assert all(row[i] == row[i % (2 * width)] for row in rows)


def test_attributes_as_the_tuple_and_unused_words_are_left_out() -> None:
    # two objects (tuple, one attribute), two words: tuple readers 5 and 0, denied 0
    row = [5, 0, 0, 0, 5, 0, 0, 0]
    assert unstored([row], 2, 2) == {1, 2, 3, 4, 5, 6, 7}
    assert restore({0: 5}, 2, 2) == row


def test_an_attribute_that_differs_from_its_tuple_is_stored() -> None:
    hidden = [5, 0, 0, 0, 0, 0, 0, 0]  # the attribute's readers: nobody
    shown = [5, 0, 0, 0, 5, 0, 0, 0]
    assert 4 not in unstored([shown, hidden], 2, 2)
    assert restore({0: 5, 4: 0}, 2, 2) == hidden


def test_no_rows_store_nothing_and_a_wrong_width_is_refused() -> None:
    assert unstored([], 2, 1) == {0, 1, 2, 3}
    assert restore({}, 2, 1) == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="3 words, expected 4"):
        unstored([[0, 0, 0]], 2, 1)
