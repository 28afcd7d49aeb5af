"""The Chinese-Wall level a query runs at (paper 2, Algorithm 1), as one pure value.

A query is registered in a session; the session's active level ``C`` (its activated
level while the clearance dominates it, else *public*) is fixed into the admitted query
and travels with it to every engine path. The engine then

* reads only tuples whose level is dominated by ``C`` (simple security): the secured
  view's conjunct :meth:`QueryLevel.conjunct_sql` / ``engine.views.level_columns.dominated_by``,
  beneath every user expression, so windows hold only such tuples;
* labels every output row with the LUB of its inputs' levels (OR of the words), which
  is dominated by ``C`` by construction, and asserts it;
* writes at ``C`` (restricted star property): a derived stream gets level ``C``.

Pure Python (no pyspark): the same value decides in the pure tests what the Spark
filter must return.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streamshield.policy.bitset import Words
from streamshield.policy.lattice import Lattice, Level

LEVEL_PREFIX = "_ss_lvl_"
"""Level word columns (``_ss_lvl_0 .. _ss_lvl_{n-1}``); ``engine.views.level_columns``
spells them too."""


def level_names(width: int) -> list[str]:
    """The level word columns of a ``width``-word lattice, in word order."""
    return [f"{LEVEL_PREFIX}{w}" for w in range(width)]


@dataclass(frozen=True)
class QueryLevel:
    """A query's level ``C`` in its lattice."""

    lattice: Lattice
    level: Level

    def __post_init__(self) -> None:
        self.lattice.check(self.level)  # a level of another lattice is a bug, not data

    @property
    def width(self) -> int:
        return self.lattice.width

    @property
    def words(self) -> Words:
        """What ``C`` allows a row's level to hold, per word (its canonical encoding)."""
        return self.lattice.encode(self.level)

    @property
    def text(self) -> str:
        """``[1, B]``: how the level is shown (explain, audit)."""
        return self.lattice.format(self.level)

    @property
    def columns(self) -> list[str]:
        return level_names(self.width)

    def reads(self, words: Words | None) -> bool:
        """The pure form of the secured view's conjunct: a row at ``words`` is readable
        at ``C``. ``None`` (no level) is readable by no level."""
        if words is None or len(words) != self.width:
            return False
        return self.lattice.words_dominated(words, self.level)

    def dominates(self, other: Level) -> bool:
        return self.lattice.dominated(other, self.level)

    def conjunct_sql(self, columns: Sequence[str] | None = None) -> str:
        """The conjunct as Spark SQL text, word by word exactly as the engine builds it
        (``engine.views.level_columns.dominated_words``): a NULL word fails it (``coalesce``)."""
        names = list(columns) if columns is not None else self.columns
        if len(names) != self.width:
            raise ValueError(f"level has {self.width} words, got columns {names}")
        tests = [f"(`{n}` & {~a}) = 0" for n, a in zip(names, self.words, strict=True)]
        return f"coalesce({' AND '.join(tests)}, false)"
