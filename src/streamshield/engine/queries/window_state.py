"""A CQL window over a labelled stream, kept as a Parquet relation versioned by batch id.

Windows are evaluated at micro-batch boundaries (:mod:`streamshield.lang.windows`):
``update(new_rows, batch_id)`` adds the batch's rows to the relation of the previous
instant, evicts what the window no longer holds and returns the relation at this
instant. Every version is written under ``<directory>/v=<batch_id>`` by one atomic
rename, and batch N always starts from the newest version below N. A batch replayed
after a crash therefore starts from the same relation and yields the same one; a
version already in place for N is complete and is simply read back.

Each row carries the batch it arrived in (:data:`ARRIVAL`): windows only evict, so the
rows new at an instant are exactly those with ``ARRIVAL == batch_id`` (what a CQL
ISTREAM over the window needs).

- ``ROWS n``: the ``n`` latest rows it is given (the caller filters before the window,
  so these are the n latest its query may read), in the stream's order
  (:class:`~streamshield.lang.windows.StreamPosition`: ingest batch :data:`INGEST`,
  channel, ``seq``; the rows must carry :data:`INGEST`, see :func:`with_ingest`), n in
  all and not n per channel; the state is at most n rows;
- ``RANGE t``: rows whose event time is greater than (newest event time seen) - ``t``
  seconds; a ``bigint`` event time counts seconds; rows without event time are in no
  RANGE window;
- ``NOW``: this batch's rows only.

Per batch: one small aggregate (RANGE) or one top-n sort (ROWS: each partition's n
first, then one merge of those), one Parquet write. Nothing runs per row in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from streamshield.engine.store.labelled_store import INGEST, ingest_column
from streamshield.engine.store.parquet_versions import ParquetVersions
from streamshield.lang.windows import ROW_ORDER, WindowKind, WindowSpec

ARRIVAL = "_ss_batch"
"""The id of the micro-batch a window row arrived in."""
ORDER = tuple(INGEST if part == "ingest" else part for part in ROW_ORDER)
"""The columns of a row's place in its stream's order, most significant first (the
reference's :class:`~streamshield.lang.windows.StreamPosition`)."""
_MICROS = 1_000_000


class WindowState:
    """The window relation of one input, persisted per batch under ``directory``.

    ``event_time`` names the event-time column and its Spark type (``timestamp`` or
    ``bigint`` seconds); only RANGE windows need it. Sliding RANGE windows (``SLIDE``)
    are hopping windows for aggregates, not a join window, and are refused.
    """

    def __init__(
        self,
        spark: SparkSession,
        window: WindowSpec,
        directory: str | Path,
        event_time: tuple[str, str] | None = None,
        keep: int = 2,
    ) -> None:
        if window.kind is WindowKind.RANGE:
            if window.slide is not None:
                raise ValueError("a sliding RANGE window is not a relation window")
            if event_time is None:
                raise ValueError("a RANGE window needs a stream with an event time")
            if event_time[1] not in ("timestamp", "bigint"):
                raise ValueError(f"event time of type {event_time[1]} is not supported")
        self.spark, self.window, self.event_time = spark, window, event_time
        self.directory = Path(directory)
        self._versions = ParquetVersions(self.directory, keep)
        self.directory.mkdir(parents=True, exist_ok=True)

    def update(
        self,
        new_rows: DataFrame,
        batch_id: int,
        previous: DataFrame | None = None,
        bound: Callable[[DataFrame], int | None] | None = None,
        size: int | None = None,
    ) -> DataFrame:
        """The window at the end of ``batch_id``, with :data:`ARRIVAL`; persisted first.

        ``previous`` (rows with :data:`ARRIVAL`) replaces the stored relation before this
        batch: a window network rebuilding a node from the stream's history.
        ``bound``: a RANGE window's eviction bound over the rows it may keep, in event
        units: rows at or before it leave, None evicts all (default: their newest event
        time less the width); a shared node keeps what its slowest branch still needs.
        ``size``: how many latest rows a ROWS window keeps (default: its own size); a
        shared node keeps what its largest branch needs.
        """
        if self.window.kind is WindowKind.ROWS:  # counts in the stream's order
            new_rows = with_ingest(new_rows)
            previous = None if previous is None else with_ingest(previous)
        schema = StructType([*new_rows.schema.fields, StructField(ARRIVAL, LongType(), False)])
        target = self._versions.path(batch_id)
        if not target.exists():
            fresh = new_rows.withColumn(ARRIVAL, F.lit(batch_id).cast("long"))
            before = self._before(batch_id)
            if previous is None and before is not None:
                previous = self._read(before, schema)
            combined = (
                fresh
                if previous is None or self.window.kind is WindowKind.NOW
                else previous.unionByName(fresh)
            )
            self._versions.write(self._evict(combined, bound, size), batch_id)
            self._versions.prune(batch_id)
        return self._read(target, schema)

    def current(self, schema: StructType) -> tuple[int, DataFrame] | None:
        """The newest stored instant and its relation (rows of ``schema`` with
        :data:`ARRIVAL`); None before the first batch."""
        versions = self.versions()
        if not versions:
            return None
        newest = max(versions)
        full = StructType([*schema.fields, StructField(ARRIVAL, LongType(), False)])
        return newest, self._read(self._versions.path(newest), full)

    def discard(self, batch_id: int) -> None:
        """Drops the version of ``batch_id``, if any: the next update computes it again."""
        self._versions.discard(batch_id)

    def versions(self) -> list[int]:
        return self._versions.ids()

    def _evict(
        self,
        rows: DataFrame,
        bound: Callable[[DataFrame], int | None] | None = None,
        size: int | None = None,
    ) -> DataFrame:
        kind = self.window.kind
        if kind is WindowKind.ROWS:
            return latest(rows, size or self.window.size)
        if kind is WindowKind.RANGE:
            time, width = self.event_units()
            if bound is None:
                row = rows.agg(F.max(time)).first()
                assert row is not None  # a global aggregate has one row
                newest = row[0]
                limit = None if newest is None else newest - width
            else:
                limit = bound(rows)
            if limit is None:
                return rows.filter(F.lit(False))
            return rows.filter(time > F.lit(limit))
        return rows

    def event_units(self, window: WindowSpec | None = None) -> tuple[Column, int]:
        """Event time as a long in its own unit, and the width of ``window`` (default:
        this state's own) in that unit."""
        assert self.event_time is not None
        name, kind = self.event_time
        size = (window or self.window).size
        if kind == "timestamp":
            return F.unix_micros(F.col(name)), size * _MICROS
        return F.col(name).cast("long"), size

    def _before(self, batch_id: int) -> Path | None:
        earlier = [v for v in self.versions() if v < batch_id]
        return self._versions.path(max(earlier)) if earlier else None

    def _read(self, path: Path, schema: StructType) -> DataFrame:
        return self.spark.read.schema(schema).parquet(str(path))


RANK = "_ss_window_rank"
"""A row's place among the window's rows, newest first (1: the newest)."""


def with_ingest(rows: DataFrame, ids: frozenset[int] | None = None) -> DataFrame:
    """``rows`` with :data:`INGEST` (kept if they have it): ``ids``, the ingest batches
    they were read from when known, name it without reading a file name when there is
    one; otherwise it comes from each row's file (so call it on the scan, not a cache)."""
    if INGEST in rows.columns:
        return rows
    if ids is not None and len(ids) == 1:
        return rows.withColumn(INGEST, F.lit(next(iter(ids))).cast("long"))
    return rows.withColumn(INGEST, ingest_column())


def _newest_first() -> list[Column]:
    """The stream's order, newest first (a version stored before rows carried
    :data:`INGEST` reads NULL there: its rows are the oldest)."""
    return [F.desc_nulls_last(c) for c in ORDER]


def ranked(rows: DataFrame) -> DataFrame:
    """``rows`` with :data:`RANK` (a ROWS window holds the rows of rank <= its size).
    One ordering of all of them: call it on a window (at most its size), never on a
    stream's history."""
    order = Window.partitionBy(F.lit(0)).orderBy(*_newest_first())
    return rows.withColumn(RANK, F.row_number().over(order))


def latest(rows: DataFrame, size: int) -> DataFrame:
    """The ``size`` latest rows in the stream's order (a top-n: each partition keeps its
    ``size`` first, then one merge of those)."""
    return rows.orderBy(*_newest_first()).limit(size)
