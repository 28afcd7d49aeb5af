"""The range of role bits a tuple's readers span: a summary Parquet statistics can test.

Why: the secured view's tuple test ``(q & readers) != 0`` is bitwise, and Parquet can
push no bitwise test, so a query whose roles read 7% of the rows still decodes every
row. Ingest therefore also stores, per tuple, the lowest and highest bit set in its READ
reader words (``lo``, ``hi``) and sorts each file by ``lo``; a query whose READ bits
span ``[qlo, qhi]`` adds ``lo <= qhi AND hi >= qlo`` beneath its tuple test, a range
test that Parquet's row-group and page statistics can skip whole pages with.

It is only a pre-filter, never a decision: a row whose readers meet the query has a
common bit ``b`` with ``lo <= b <= hi`` and ``qlo <= b <= qhi``, so the range test
passes every row the tuple test passes (:func:`may_meet`; a property test holds it),
and the bitwise test always stays. Bits are numbered across the READ block's words:
bit ``b`` of word ``w`` is ``64 * w + b`` (the codec's role order).
"""

from __future__ import annotations

from collections.abc import Sequence

from streamshield.policy.bitset import WORD_BITS, Words

_MASK = (1 << WORD_BITS) - 1
NO_READER = (-1, -1)
"""``(lo, hi)`` of a tuple nobody may read: ``hi < 0`` meets no query's range."""


def bit_range(words: Words) -> tuple[int, int] | None:
    """The lowest and highest bit set in ``words`` (None when none is); words are signed
    64-bit, as stored (a negative word has bit 63 set)."""
    unsigned = [word & _MASK for word in words]
    set_words = [w for w, word in enumerate(unsigned) if word]
    if not set_words:
        return None
    first, last = unsigned[set_words[0]], unsigned[set_words[-1]]
    low, high = (first & -first).bit_length() - 1, last.bit_length() - 1
    return WORD_BITS * set_words[0] + low, WORD_BITS * set_words[-1] + high


def reader_range(readers: Words) -> tuple[int, int]:
    """``(lo, hi)`` stored for a tuple whose READ reader words are ``readers``."""
    return bit_range(readers) or NO_READER


def may_meet(lo: int | None, hi: int | None, query: Words) -> bool:
    """The pre-filter: False only when no reader bit can be one of the query's.

    ``lo`` / ``hi`` None (a file written before they were stored) passes: the bitwise
    test alone decides, as it did then.
    """
    span = bit_range(query)
    if span is None:
        return False  # a query with no READ bit reads nothing
    if lo is None or hi is None:
        return True
    return lo <= span[1] and hi >= span[0]


def label_summary(
    words: Sequence[int], objects: int, width: int, block_width: int
) -> tuple[int, int]:
    """``(lo, hi)`` of a finished label (the stored word order: per object, the tuple
    first, and word, its readers then its denied word), as the scan summary columns
    would compute them row by row.

    Ingest computes it once per distinct policy on the driver instead of per tuple: a
    policy whose rules ignore the tuple id gives every tuple of its segment the same
    words, so the same summary (and all-zero words, a denied tuple, give
    ``NO_READER``)."""
    if len(words) != objects * 2 * width:
        raise ValueError("label words do not match the layout")
    return reader_range(tuple(words[2 * w] for w in range(block_width)))
