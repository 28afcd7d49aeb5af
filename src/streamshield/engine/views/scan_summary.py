"""Per-tuple summaries of the label that let a secured scan skip work.

Written by ingest next to the label words (:func:`with_scan_summary`), read by the
secured view (:func:`prefilter`). It never replaces a label test; it only lets Spark
avoid work the label test would have thrown away:

* ``_ss_scan_lo`` / ``_ss_scan_hi``: the lowest and highest bit of the tuple's READ
  reader words (:mod:`streamshield.policy.reader_range`); each file is sorted by ``lo``,
  so a query's range test on them is pushed to Parquet and its page statistics skip
  pages no row of which the query's roles can read;

No third summary (``_ss_scan_same``: every attribute label is the tuple's) lets a mask
skip its attribute's words: a batch leaves such words out of its files
(policy/stored_words.py), so a mask reads missing columns there, and reading ``same`` on
every row cost more than it saved (every-row scan 0.70 -> 0.80 of plain without it): it
is not written, and a file's column of that name is not read.

Files written before these columns existed read NULL there: the range test lets NULL
through, so such files are read exactly as before (tests/spark/test_scan_summary.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField

from streamshield.engine.views.labels import reader_column
from streamshield.policy.bitset import WORD_BITS, Words
from streamshield.policy.reader_range import NO_READER, bit_range

LO, HI = "_ss_scan_lo", "_ss_scan_hi"
PREFIX = "_ss_scan_"
"""Not label columns: a query's output never carries them (secured_view drops them)."""
FIELDS = (
    StructField(LO, IntegerType()),
    StructField(HI, IntegerType()),
)
PAGE_ROWS = 10_000
"""Rows per Parquet page of a labelled file: the unit the range test skips. Parquet's
default (20,000) makes a small ingest batch one page, which nothing skips; but every
page costs each column read a fixed decoding set-up, so pages of 2,000 rows made a scan
of every row 0.76 of plain at 10M rows against 0.95 at 10,000, while a role reading 7%
of the rows went from 1.06 to 1.00 (``bench.table13 --sections scans``)."""


def summary_columns(block_width: int) -> list[Column]:
    """``lo`` and ``hi`` from the tuple's label columns, the READ block being its first
    ``block_width`` words."""
    lows, highs = [], []
    for w in range(block_width):
        word = F.col(reader_column(0, w))
        # trailing zeros: bits set below the lowest one; only -2**63 has no r - 1
        low = F.coalesce(
            F.bit_count(F.bitwise_not(word).bitwiseAND(F.try_subtract(word, F.lit(1)))), F.lit(63)
        )
        lows.append(F.when(word != 0, low + WORD_BITS * w))
        highs.append(F.when(word != 0, F.length(F.bin(word)) - 1 + WORD_BITS * w))
    lo = F.coalesce(*lows, F.lit(NO_READER[0])).cast("int")
    hi = F.coalesce(*reversed(highs), F.lit(NO_READER[1])).cast("int")
    return [lo.alias(LO), hi.alias(HI)]


def with_scan_summary(labelled: DataFrame, block_width: int) -> DataFrame:
    """Labelled rows with their summaries, each partition (one file) sorted by ``lo``."""
    summary = summary_columns(block_width)
    return labelled.select("*", *summary).sortWithinPartitions(LO)


def prefilter(query: Words, columns: Iterable[str], roles: int) -> Column | None:
    """The range test of a READ ``query`` (NULL passes: files without summaries), or None
    when the frame has no summary or the query spans every role (it would skip nothing)."""
    span = bit_range(query)
    if span is None or LO not in set(columns):
        return None
    qlo, qhi = span
    if qlo == 0 and qhi >= roles - 1:
        return None
    lo, hi = F.col(LO), F.col(HI)
    return (lo.isNull() | (lo <= F.lit(qhi))) & (hi.isNull() | (hi >= F.lit(qlo)))
