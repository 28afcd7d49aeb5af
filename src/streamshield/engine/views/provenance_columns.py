"""Provenance label columns (SecFilter) as Catalyst expressions.

Every row of a source stream has the same provenance, so it is added as literal
words when a query reads the stream: nothing is stored, and a stream registered
later only widens the codec. Operators OR these columns (aggregates and joins), and
:func:`delivered` is the check delivery runs per subscriber: one AND per word.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.policy.bitset import Words
from streamshield.policy.provenance import ProvenanceCodec

PREFIX = "_ss_src_"


def provenance_column(word: int) -> str:
    return f"{PREFIX}{word}"


def provenance_columns(columns: list[str]) -> list[str]:
    """The provenance words among ``columns``, in word order."""
    words = sorted(int(c[len(PREFIX) :]) for c in columns if _is_provenance(c))
    return [provenance_column(w) for w in words]


def _is_provenance(column: str) -> bool:
    return column.startswith(PREFIX) and column[len(PREFIX) :].isdigit()


def with_label(view: DataFrame, words: Words) -> DataFrame:
    """``view`` with constant provenance words (replacing any it had: they came from it)."""
    return view.withColumns(label_literals(words))


def label_literals(words: Words) -> dict[str, Column]:
    """The provenance columns of a constant label, by name."""
    return {provenance_column(w): F.lit(word).cast("long") for w, word in enumerate(words)}


def with_provenance(view: DataFrame, stream: str, codec: ProvenanceCodec) -> DataFrame:
    """Label every row of ``stream``'s view with its provenance (base or derived stream)."""
    return with_label(view, codec.label(stream))


def with_derived_provenance(
    output: DataFrame, sources: list[str], codec: ProvenanceCodec
) -> DataFrame:
    """A query output written as a new stream: the union of its sources as a constant.

    Use it where the output's rows lost their own provenance columns (a write through
    the landing zone); rows that kept them are already labelled at least as precisely.
    """
    words = codec.encode(s for source in sources for s in codec.sources_of(source))
    return with_label(output, words)


def delivered(columns: list[str], readable: Words, col: Callable[[str], Column] = F.col) -> Column:
    """Whether a row may be delivered to rights ``readable``: its sources are a non-empty
    subset of them (strong semantic). No provenance column, or a NULL word, denies.
    ``col``: a column name to its column (the frame's own by default).
    """
    names = provenance_columns(columns)
    if not names or names != [provenance_column(w) for w in range(len(names))]:
        return F.lit(False)  # no label, or a word missing: unknown sources
    padded = (tuple(readable) + (0,) * len(names))[: len(names)]
    inside = [
        col(n).bitwiseAND(F.lit(~r).cast("long")) == 0 for n, r in zip(names, padded, strict=True)
    ]
    some = [col(n) != 0 for n in names]
    condition = _all(inside) & _any(some)
    return F.coalesce(condition, F.lit(False))


def _all(conditions: list[Column]) -> Column:
    result = conditions[0]
    for condition in conditions[1:]:
        result = result & condition
    return result


def _any(conditions: list[Column]) -> Column:
    result = conditions[0]
    for condition in conditions[1:]:
        result = result | condition
    return result
