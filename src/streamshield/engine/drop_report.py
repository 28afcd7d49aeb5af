"""What each recipient class did not get in a batch, counted by the delivery job itself.

The audit records, per subscriber and batch, how many rows she did not get and the
policy ids of those rows (never their values). Counted per class, the policy ids were a
``collect_set`` per class: an imperative aggregate, evaluated row by row outside
generated code, one per class, so 16 classes cost 16 set insertions a row (~0.1-0.3 s of
a 16-user delivery job over 10k rows). Here the count stays per class (``count_if``,
generated code), and the policy ids of every class come from *one* set per batch: the
distinct (policy id, which classes missed the row) pairs, the classes as bits of long
words as label words are. A batch has few distinct pairs (a policy segment's rows are
missed by the same classes), and each class's ids are read from them on the driver.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

_BITS = 62
"""Classes per word: bit 63 would make the word negative, and sums of powers of two
below 2**62 never carry into it."""


@dataclass(frozen=True)
class Missed:
    """One class's drops: the rows it does not get, and its rows' policy id column."""

    count: str
    """The name of its drop count (also its name in :class:`DropLayout`)."""
    missed: Column
    policy: Column


@dataclass(frozen=True)
class DropLayout:
    """Every class of one delivery job whose drops are reported, in bit order."""

    classes: tuple[Missed, ...]

    @classmethod
    def of(cls, classes: Iterable[Missed]) -> DropLayout:
        """Distinct by name: equal classes of several outputs are one."""
        return cls(tuple({c.count: c for c in classes}.values()))

    def metrics(self) -> list[Column]:
        """Aggregates over every row of the batch: each class's count, and per policy
        column, the set of (policy id, bit words of the classes that missed the row)."""
        out = [F.count_if(c.missed).alias(c.count) for c in self.classes]
        for group, members in enumerate(self._groups().values()):
            words = [
                functools.reduce(operator.add, (_bit(c.missed, i % _BITS) for i, c in part))
                for part in _words(members)
            ]
            some = functools.reduce(operator.or_, (c.missed for _, c in members))
            row = F.struct(members[0][1].policy.cast("string").alias("p"), *words)
            out.append(F.collect_set(F.when(some, row)).alias(f"_ss_dropset{group}"))
        return out

    def read(self, counts: Mapping[str, Any]) -> dict[str, tuple[int, tuple[str, ...]]]:
        """Each class's drop count and the sorted policy ids of its dropped rows."""
        out: dict[str, tuple[int, tuple[str, ...]]] = {}
        for group, members in enumerate(self._groups().values()):
            pairs = counts.get(f"_ss_dropset{group}") or ()
            for i, c in members:
                word, bit = divmod(i, _BITS)
                ids = {p[0] for p in pairs if p[0] and int(p[word + 1] or 0) >> bit & 1}
                out[c.count] = (int(counts.get(c.count) or 0), tuple(sorted(ids)))
        return out

    def _groups(self) -> dict[str, list[tuple[int, Missed]]]:
        """Classes by policy column (one set each), each with its bit index in it."""
        groups: dict[str, list[Missed]] = {}
        for c in self.classes:
            groups.setdefault(str(c.policy), []).append(c)
        return {k: list(enumerate(v)) for k, v in groups.items()}


def _bit(missed: Column, bit: int) -> Column:
    return F.when(missed, F.lit(1 << bit).cast("long")).otherwise(F.lit(0).cast("long"))


def _words(members: list[tuple[int, Missed]]) -> list[list[tuple[int, Missed]]]:
    return [members[i : i + _BITS] for i in range(0, len(members), _BITS)]
