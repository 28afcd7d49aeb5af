"""Chinese-Wall level columns as native Spark expressions (no Python per row).

A row's level is the words of :meth:`~streamshield.policy.lattice.Lattice.encode` in
``_ss_lvl_0 .. _ss_lvl_{n-1}`` (``bigint``). The pure lattice fixes the meaning; this
module only spells it in Catalyst:

* dominated by a constant level ``C``: ``_ss_lvl_w & ~encode(C)_w == 0`` for every
  word, one AND per word, exactly :meth:`Lattice.words_dominated`;
* LUB: ``bit_or`` per word over an aggregate's contributors, ``bitwiseOR`` of the two
  sides' words in a join, exactly :meth:`Lattice.lub_words`.

NULL is never a level. A NULL word is not dominated by anything (deny), and a LUB
with a NULL contributor is NULL: ``bit_or`` alone would skip the NULL and so *lower*
the label of the result, the one thing a LUB must never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.policy.bitset import Words
from streamshield.policy.lattice import Lattice, Level

PREFIX = "_ss_lvl_"


def level_column(word: int) -> str:
    return f"{PREFIX}{word}"


def level_names(width: int) -> list[str]:
    """The level columns of a ``width``-word lattice, in word order."""
    return [level_column(w) for w in range(width)]


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


def lub_aggregate(width: int) -> list[Column]:
    """The level words of an aggregate's group: ``bit_or`` over its rows, NULL if any
    contributor's word is NULL (a missing label never lowers the result)."""
    out = []
    for name in level_names(width):
        word = F.col(name)
        complete = F.count(F.lit(1)) == F.count(word)
        out.append(F.when(complete, F.bit_or(word)).alias(name))
    return out
