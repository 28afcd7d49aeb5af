"""The recipient's own check on a query's output rows, as native Spark expressions.

A query runs with its owner's roles; whoever receives its rows (the owner in another
session, a subscriber with a SUBSCRIBE grant) is checked here with *her* active roles,
as if she had registered the query herself: a row whose tuple label, or the label of
an attribute that chose it, she may not read is dropped; an output column computed from
an attribute she may not read in that row is NULL and named in ``_masked``. Statistics
outputs carry the statistics rule in their tuple label (lang/statistics_rewrite.py), so
the same tuple test applies it.

The labels are the output's own columns (``_ss_r0_*``/``_ss_d0_*`` and the dependency
slots of :mod:`streamshield.lang.recipient_labels`), so this needs nothing but the
frame: an output without a tuple label reaches no one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamshield.engine.views.labels import allows_words, denied_column, reader_column
from streamshield.lang.recipient_labels import slot_of
from streamshield.policy.bitset import Words

MASKED = "_ss_masked"
LABEL_PREFIX = "_ss_"

Pairs = dict[int, tuple[str, str]]  # word -> (readers column, denied column)


@dataclass(frozen=True)
class OutputLabels:
    """The label columns of one output frame, grouped for the checks."""

    user: tuple[str, ...]
    tuple_words: Pairs
    row: tuple[Pairs, ...]
    columns: dict[int, tuple[Pairs, ...]] = field(default_factory=dict)
    masked: bool = False
    """Whether the output names its owner's masked columns (``_ss_masked``)."""
    col: Callable[[str], Column] = field(default=F.col, compare=False)
    """A column name to its column: the frame's own, or where another plan holds it (the
    deliveries of a network's branches in one job)."""

    @classmethod
    def of(cls, columns: Sequence[str], col: Callable[[str], Column] = F.col) -> OutputLabels:
        present = set(columns)
        tuple_words = {
            w: (reader_column(0, w), denied_column(0, w))
            for w in range(len(columns))
            if reader_column(0, w) in present
        }
        row: dict[int, Pairs] = {}
        by_column: dict[int, dict[int, Pairs]] = {}
        for name in columns:
            slot = slot_of(name)
            if slot is None:
                continue
            target = row if slot.column is None else by_column.setdefault(slot.column, {})
            pair = target.setdefault(slot.index, {}).get(slot.word, ("", ""))
            pair = (name, pair[1]) if slot.kind == "r" else (pair[0], name)
            target[slot.index][slot.word] = pair
        user = tuple(c for c in columns if not c.startswith(LABEL_PREFIX))
        return cls(
            user,
            tuple_words,
            tuple(_complete(row[j]) for j in sorted(row)),
            {i: tuple(_complete(d[j]) for j in sorted(d)) for i, d in by_column.items()},
            MASKED in present,
            col,
        )

    def row_visible(self, mask: Words) -> Column:
        """The tuple label and every attribute that chose the row allow ``mask``."""
        if not self.tuple_words or any(
            i >= len(self.user) for i in self.columns
        ):  # no tuple label, or slots of columns that are not there: unknown output
            return F.lit(False)
        condition = allows_words(self.tuple_words, mask, self.col)
        for pairs in self.row:
            condition = condition & allows_words(pairs, mask, self.col)
        return condition

    def unchecked(self) -> list[Column]:
        """The user columns and the owner's ``_masked`` as they are (the query's own roles);
        ``_masked`` is there whenever another recipient's rows could have it, so that one
        output has one shape, whoever receives it."""
        values = [self._value(name) for name in self.user]
        if self.masked:
            return [*values, self.col(MASKED).alias("_masked")]
        if self.columns:
            return [*values, F.array().cast("array<string>").alias("_masked")]
        return values

    def payload(self, mask: Words) -> list[Column]:
        """User columns, each NULL where ``mask`` may not read what it is computed from,
        and ``_masked``: the owner's masked names plus the recipient's."""
        values, hidden = [], []
        for i, name in enumerate(self.user):
            slots = self.columns.get(i, ())
            if not slots:
                values.append(self._value(name))
                continue
            shown = allows_words(slots[0], mask, self.col)
            for pairs in slots[1:]:
                shown = shown & allows_words(pairs, mask, self.col)
            values.append(F.when(shown, self._value(name)).alias(name))
            hidden.append(F.when(~shown, F.lit(name)))
        none = F.array().cast("array<string>")
        owner = F.coalesce(self.col(MASKED), none) if self.masked else none
        if not hidden:  # an output without masks has no _masked (as it always had)
            return [*values, owner.alias("_masked")] if self.masked else values
        mine = F.filter(F.array(*hidden), lambda x: x.isNotNull())
        return [*values, F.array_union(owner, mine).alias("_masked")]

    def _value(self, name: str) -> Column:
        """A user column under its own name (a field of a struct keeps the field's)."""
        if self.col is F.col:
            return F.col(_quoted(name))
        return self.col(name).alias(name)


def _complete(pairs: Pairs) -> Pairs:
    """Only words with both columns: a half slot is no slot (and denies through
    :func:`allows_words`, which refuses a word the mask needs but the slot lacks)."""
    return {w: p for w, p in pairs.items() if p[0] and p[1]}


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
