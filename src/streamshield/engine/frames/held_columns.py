"""A list of columns built once and held in the JVM as one sequence, so that selecting it
costs one Py4J call instead of one per column.

PySpark's ``DataFrame.select(*columns)`` hands the JVM its columns as a Python list, which
Py4J converts element by element (``ListConverter``: an ``ArrayList`` and one ``add``
round trip per column); ``F.col(name)`` costs two more (the function looked up, then
called). On a landing's way to its subscriber the same projections are selected on
every micro-batch (the scan's columns per network, the label restoration, each branch's
rebuild and ingest's label projections): a py-spy profile of ``bench.landing_latency``
found those conversions among the driver's largest
Python-side costs. The columns are unresolved expressions that name columns only and are
resolved by each plan's analysis, so one sequence serves every batch: the plan Spark
builds is the one ``select`` builds from the list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyspark.sql import Column, DataFrame


class HeldColumns:
    """Columns selected together on many frames; their JVM sequence is made on first use
    (a race makes two equal sequences, either of which is right) and kept."""

    __slots__ = ("_seq", "columns")

    def __init__(self, columns: Iterable[Column]) -> None:
        self.columns: tuple[Column, ...] = tuple(columns)
        self._seq: Any = None

    def __len__(self) -> int:
        return len(self.columns)

    def __iter__(self) -> Any:
        return iter(self.columns)

    def select(self, frame: DataFrame) -> DataFrame:
        """``frame.select(*self.columns)``, in one Py4J call once the sequence is held."""
        from pyspark.sql.classic.column import _to_seq
        from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

        session = frame.sparkSession
        seq = self._seq
        if seq is None:
            seq = _to_seq(session.sparkContext, [c._jc for c in self.columns])
            self._seq = seq
        return ClassicFrame(frame._jdf.select(seq), session)
