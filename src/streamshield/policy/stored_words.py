"""Which label words a batch need not store, and how a reader gets them back.

Why: a label has a reader and a denied word per object (the tuple, then each attribute),
per word of the role layout and per privilege block, so its width grows with every role
of the system (500 roles: 192 words per tuple), while a policy names a few roles and
seldom an attribute. Writing the same words again costs ingest (at 500 roles the label
columns were most of the labelling pass) and reading them costs every secured scan,
which reads an attribute's words for each attribute it masks.

So a batch leaves out, in label column order (:func:`~streamshield.policy.rules.label_words`):

* a *tuple* word that is zero in every row (a privilege nobody holds, a role word no
  policy names, a denied word without a negative sp);
* an *attribute* word equal to the tuple's same word in every row (no sp of the batch
  names that attribute: the common case).

A reader restores a left-out tuple word as 0 and a left-out attribute word as the tuple's
(:func:`restore`), which by construction gives back exactly the words the batch had. A
batch whose words are not known on the driver (a policy naming tuple ids is folded per
tuple) leaves out nothing. Both rules are one-sided on purpose: an attribute column is
only ever missing because it equals the tuple's, so "missing" is never ambiguous.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def tuple_index(index: int, width: int) -> int:
    """The label column of the tuple holding the same word as column ``index``."""
    return index % (2 * width)


def unstored(words: Iterable[Sequence[int]], objects: int, width: int) -> frozenset[int]:
    """The label columns (indexes in label column order) that rows whose label words are
    each one of ``words`` need not store; with no ``words`` (nobody passed), every
    column is zero and none need be stored."""
    columns = 2 * width * objects
    rows = set(map(tuple, words))  # one sp per tuple: 10k bodies a batch, often repeated
    for row in rows:
        if len(row) != columns:
            raise ValueError(f"a label of {len(row)} words, expected {columns}")
    if not rows:
        return frozenset(range(columns))
    by_column = list(zip(*rows, strict=True))  # compared a column at a time
    return frozenset(
        i
        for i, column in enumerate(by_column)
        if (not any(column) if i < 2 * width else column == by_column[tuple_index(i, width)])
    )


def restore(stored: Mapping[int, int], objects: int, width: int) -> list[int]:
    """The full label words from the columns a batch stored (index -> word): the
    reference of the Spark projection that reads them (engine/store/labelled_store.py)."""
    tuple_words = [stored.get(i, 0) for i in range(2 * width)]
    return [stored.get(i, tuple_words[tuple_index(i, width)]) for i in range(2 * width * objects)]
