"""Collect a frame's rows and aggregates over *all* its rows in one Spark job.

Delivery needs both the rows a recipient gets (a filter) and how many she did not get
(a count over every row). Two actions are two jobs, each with its scheduling cost and
its own read of the batch (or a cache to share one read). ``DataFrame.observe`` computes
aggregates while another action runs, so one ``collect`` yields both.

``pyspark.sql.Observation.get`` blocks until the metrics arrive, and they never arrive
when the optimizer removes the observed node (a filter that folds to ``false`` turns
the plan into an empty relation): that would hang delivery. So the metrics are read from
the executed plan of the very action, without waiting; ``None`` says they were not
computed and the caller must count another way.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.serializers import CPickleSerializer
from pyspark.sql import Column, DataFrame, Row

Collected = TypeVar("Collected")


def collect_observed(
    frame: DataFrame,
    metrics: list[Column],
    then: Callable[[DataFrame], DataFrame],
    collect: Callable[[DataFrame], Collected] = DataFrame.collect,  # type: ignore[assignment]
) -> tuple[Collected, dict[str, Any] | None]:
    """``then(frame observed)`` collected (by ``collect``: rows by default), and
    ``metrics`` (aggregates, named by their aliases) over every row of ``frame``,
    computed by the same job; None when Spark planned the observation away."""
    if not metrics:
        return collect(then(frame)), {}
    name = "ss_observe_" + uuid.uuid4().hex
    picked = then(frame.observe(name, *metrics))
    rows = collect(picked)
    found = picked._jdf.queryExecution().observedMetrics().get(name)
    if not found.isDefined():
        return rows, None
    jvm = frame.sparkSession._jvm
    assert jvm is not None
    utils = getattr(jvm, "org.apache.spark.sql.api.python.PythonSQLUtils")
    row: Row = CPickleSerializer().loads(utils.toPyRow(found.get()))
    return rows, row.asDict(recursive=False)
