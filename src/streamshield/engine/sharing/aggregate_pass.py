"""An aggregate branch's partial query built once as column expressions, applied to
every batch.

Why: an aggregate branch folded on the driver (engine/sharing/aggregate_fold.py) needs its
partials of each batch. Planned as SQL per branch and per batch (a temp view of its
secured view, ``session.sql`` parsing and analysing its text, the view dropped), eight
branches cost ~0.5 s of planning a batch in the micro-batch's thread. Here the branch's
partial query is taken apart once, when it joins (lang/partial_aggregates.py
``partial_parts``), into column expressions: its WHERE, its keys and its partial
aggregates, each the SQL text it has in the partial, so Spark parses each as it would
inside that query. Per batch, the branch's own secured view of its own rows is filtered,
grouped and aggregated by them: the partial query's plan, without SQL text or a view.

Its aggregation is followed by ``coalesce(1)``: its few groups are computed by one task
(reading its shuffle's partitions) rather than one per shuffle partition; a union of
aggregations of different partition counts (a global aggregate has one) is not
coalesced by Spark's adaptive execution, and the tasks' fixed cost was most of that
stage (engine/sharing/aggregate_partials.py collects every branch's in one job).

Rejected as slower: one aggregation over the union of every branch's rows,
grouped by (branch tag, every branch's keys), one shuffle for all. Its hundreds of
aggregates exceed whole-stage code generation's field limit, and each task cost 4-5
times the CPU of a branch's own aggregation: slower than the branches' own.

Security is unchanged: the same secured view, WHERE, keys and aggregates as the branch's
SQL; the types are checked equal to that plan's when it joins (else it plans its SQL
per batch, as before).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.classic.column import _to_java_column, _to_seq
from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame
from pyspark.sql.types import StructType

from streamshield.lang.partial_aggregates import PartialParts


@dataclass(frozen=True, eq=False)
class PlannedPartials:
    """One aggregate branch's partial query as column expressions, built when it joins."""

    source: str
    """The name its SQL gives its view (columns may be qualified by it)."""
    where: Column | None
    keys: tuple[Column, ...]
    aggregates: tuple[Column, ...]
    schema: StructType
    """Its columns (the partial query's, as planned when it joined)."""
    _java: dict[str, Any] = field(default_factory=dict, repr=False)
    """Its keys and aggregates as Java column lists, built on first use (a Python list
    of columns crosses Py4J one element at a time: once, not per batch)."""

    @classmethod
    def of(cls, parts: PartialParts, view: DataFrame, own: DataFrame) -> PlannedPartials | None:
        """``view``: the branch's secured view over an empty batch; ``own``: its partial
        query planned over it as SQL. None where these would not give its columns, in
        the same order and types (or where it has no aggregate call: keys only)."""
        if not parts.calls:
            return None
        plan = cls(
            parts.source,
            None if parts.where is None else F.expr(parts.where),
            tuple(F.expr(sql).alias(name) for name, sql in parts.keys),
            tuple(F.expr(sql).alias(name) for name, sql in parts.calls),
            own.schema,
        )
        ours = [(f.name, f.dataType) for f in plan.over(view).schema.fields]
        if ours != [(f.name, f.dataType) for f in own.schema.fields]:
            return None
        return plan

    def over(self, view: DataFrame) -> DataFrame:
        """The partials of the rows of ``view`` (the branch's secured view of them)."""
        rows = view.alias(self.source)
        if self.where is not None:
            rows = rows.filter(self.where)
        if not self._java:
            sc = rows.sparkSession.sparkContext
            first, *rest = self.aggregates
            self._java.update(
                keys=_to_seq(sc, list(self.keys), _to_java_column),
                first=_to_java_column(first),
                rest=_to_seq(sc, rest, _to_java_column),
            )
        java = self._java
        grouped = rows._jdf.groupBy(java["keys"])
        return ClassicFrame(grouped.agg(java["first"], java["rest"]).coalesce(1), rows.sparkSession)
