"""Chinese-Wall level columns as native Spark expressions (no Python per row).

A row's level is the words of :meth:`~streamshield.policy.lattice.Lattice.encode` in
``_ss_lvl_0 .. _ss_lvl_{n-1}`` (``bigint``). The pure lattice fixes the meaning; this
module only spells it in Catalyst:

* dominated by a constant level ``C``: ``_ss_lvl_w & ~encode(C)_w == 0`` for every
  word, one AND per word, exactly :meth:`Lattice.words_dominated`;
* LUB: ``bit_or`` per word over an aggregate's contributors, ``bitwiseOR`` of the two
  sides' words in a join, exactly :meth:`Lattice.lub_words`;
* the level a query's output is written at: :func:`at_output_level`.

NULL is never a level. A NULL word is not dominated by anything (deny), and an
aggregate with a NULL contributor gets :attr:`Lattice.unknown` (every bit set, which
no level dominates; NULL in a lattice that has no spare bit for it): ``bit_or`` alone
would skip the NULL and so *lower* the label of the result, the one thing a LUB must
never do. A join pair with a NULL side stays NULL (``bitwiseOR``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.lang.output_level import OutputLevel
from streamshield.policy.bitset import Words
from streamshield.policy.lattice import Lattice, Level
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.query_level import LEVEL_PREFIX as PREFIX
from streamshield.policy.query_level import QueryLevel, level_names


def level_column(word: int) -> str:
    return f"{PREFIX}{word}"


def level_columns(columns: Sequence[str]) -> list[str]:
    """The level words among ``columns``, in word order."""
    words = sorted(int(c[len(PREFIX) :]) for c in columns if _is_level(c))
    return [level_column(w) for w in words]


def _is_level(column: str) -> bool:
    return column.startswith(PREFIX) and column[len(PREFIX) :].isdigit()


def with_level(frame: DataFrame, words: Words) -> DataFrame:
    """``frame`` with a constant level (a stream's level at ingest), replacing any it had."""
    return frame.withColumns(
        {level_column(w): F.lit(word).cast("long") for w, word in enumerate(words)}
    )


def dominated_words(words: Sequence[Column], allowed: Words) -> Column:
    """Rows whose level words hold only bits of ``allowed``; NULL words deny."""
    if len(words) != len(allowed):
        raise ValueError(f"level has {len(words)} words, the constant {len(allowed)}")
    inside = [
        word.bitwiseAND(F.lit(~a).cast("long")) == 0 for word, a in zip(words, allowed, strict=True)
    ]
    return F.coalesce(reduce(Column.__and__, inside), F.lit(False))


def dominated_by(lattice: Lattice, level: Level, columns: Sequence[str] | None = None) -> Column:
    """The secured-view conjunct "the row's level is dominated by ``level``".

    ``columns``: the frame's columns, to check at plan time that its level words are
    exactly the lattice's; a frame without them is a bug in the plan, not data, so it
    raises instead of quietly denying every row.
    """
    names = level_names(lattice.width)
    if columns is not None and level_columns(columns) != names:
        raise ValueError(f"expected level columns {names}, the frame has {level_columns(columns)}")
    return dominated_words([F.col(n) for n in names], lattice.encode(level))


def lub_join(left: Sequence[Column], right: Sequence[Column]) -> list[Column]:
    """The level words of a joined pair: OR of both sides' words (NULL stays NULL)."""
    if len(left) != len(right):
        raise ValueError(f"left level has {len(left)} words, right {len(right)}")
    return [
        a.bitwiseOR(b).alias(level_column(w))
        for w, (a, b) in enumerate(zip(left, right, strict=True))
    ]


def lub_aggregate(lattice: Lattice) -> list[Column]:
    """The level words of an aggregate's group: one ``bit_or`` per word over its rows,
    a contributor without a level (a NULL word) counting as every bit set, exactly
    :meth:`Lattice.lub_group`. A NULL can then only raise the group's level to one
    that nothing dominates (:attr:`Lattice.unknown`), never lower it, at the cost of
    one aggregate function per word (the query's own are beside it in the same
    buffer and shuffle).

    A row missing any word marks every word: the mark denies only through a word
    with a bit no company holds, which may be another word than the NULL one. In a
    lattice without such a bit (every bit a company's: :attr:`Lattice.unknown` is
    None) the mark would read as ``T`` everywhere, so there the group keeps the exact
    NULL guard instead: ``CASE WHEN count(1) = count(w) THEN bit_or(w) END``."""
    names = level_names(lattice.width)
    words = [F.col(n) for n in names]
    if lattice.unknown is None:
        complete = [F.count(F.lit(1)) == F.count(w) for w in words]
        return [
            F.when(ok, F.bit_or(w)).alias(n)
            for ok, w, n in zip(complete, words, names, strict=True)
        ]
    top = F.lit(-1).cast("long")
    if len(words) == 1:
        marked = [F.coalesce(words[0], top)]
    else:
        missing = reduce(Column.__or__, (w.isNull() for w in words))
        marked = [F.when(missing, top).otherwise(w) for w in words]
    return [F.bit_or(m).alias(n) for m, n in zip(marked, names, strict=True)]


def assigned_level(assignment: LevelAssignment, stream: str) -> list[Column]:
    """The level words secure ingest stamps on ``stream``'s tuples: per word a literal,
    chosen by the tuple's provider where a channel has a level of its own (a CASE over
    the few channels with one), else the stream's. Native: no Python per row.

    The provider is a column of the labelled rows; a provider cannot choose its level:
    the wire format and the landing zone refuse a ``level`` or ``_ss_*`` field."""
    lattice = assignment.lattice
    base = lattice.encode(assignment.stream_level(stream))
    channels = sorted(
        (provider, assignment.tuple_words(stream, provider))
        for s, provider in assignment.channels
        if s == stream
    )
    out = []
    for w, name in enumerate(level_names(lattice.width)):
        word: Column = F.lit(base[w]).cast("long")
        if channels:
            chosen = F.when(F.col("provider") == channels[0][0], F.lit(channels[0][1][w]))
            for provider, words in channels[1:]:
                chosen = chosen.when(F.col("provider") == provider, F.lit(words[w]))
            word = chosen.otherwise(F.lit(base[w])).cast("long")
        out.append(word.alias(name))
    return out


def readable_at(level: QueryLevel, columns: Sequence[str]) -> Column:
    """The secured view's level conjunct: the row's level is dominated by the query's
    level ``C`` (simple security). ``columns``: the frame's, checked at plan time."""
    return dominated_by(level.lattice, level.level, columns)


def at_output_level(frame: DataFrame, level: QueryLevel, output: OutputLevel) -> DataFrame:
    """``frame``, the output of a query at level ``C``, with its rows labelled where
    ``output`` (``lang.output_level``, decided once from the admitted query's shape)
    says: every row at ``C`` (write-equal: the paper's restricted star-property), or,
    for a stateless selection, each row at the level its one input tuple had, copied
    from a row that passed the secured view's conjunct in the same plan (so dominated
    by ``C`` already). A row at ``C`` is a literal per word: an empty group's, whose
    LUB over no rows would be NULL, is at ``C`` too. An output without level words (a
    shape that carries no labels) is delivered to no one and left as it is."""
    if output is OutputLevel.ROW or level_columns(frame.columns) != level_names(level.width):
        return frame
    return with_level(frame, level.words)
