"""A network branch's aggregate without a window, kept as a Parquet state per batch.

A branch of a stream's selection network (engine/sharing/shared_network.py) that aggregates
(``SELECT pid, count(*) FROM s GROUP BY pid``) cannot lean on Spark's streaming state:
the network's streaming query is the stream's scan, shared by every branch. So the
branch folds (lang/partial_aggregates.py): per micro-batch its secured SQL's partials
over the rows it takes, merged with its state as of its position into the new state,
and its select list over the groups the batch touched (Spark's update mode).

The state is versioned by the branch's output ids, as window states are
(engine/queries/window_state.py): version N is written under ``<directory>/v=N`` by one atomic
rename, and the fold of output N starts from the newest version at or before the
branch's position. Versions after the position are left by a crash between a fold and
the position's move; :meth:`FoldedAggregate.purge_after` removes them when the branch
joins, so that a replay (or an owed batch, engine/sharing/branch_ledger.py) starts from the
state its first run started from and yields the same output.

Folding on the driver. While the batch's rows and the state are small (the usual case: a
state is one row per group), the branch's partials come to the driver as Arrow (every
aggregate branch's in one Spark job, engine/sharing/aggregate_partials.py), are merged with its
state by pyarrow (engine/sharing/arrow_merge.py), and the new version is written by pyarrow: no
Spark job reads, shuffles or writes the state. The newest version is kept in memory
between batches (as Spark's state store keeps its own), the file being its durable
record; a restart, or any other version, reads the file. The query's select list and
HAVING still run in Spark, over the touched groups as a local relation (planned on the
driver, no job), so their semantics and types are Spark's own. Where the driver's merge
could differ from Spark's (engine/sharing/arrow_merge.py) or the state is large, the fold runs
in Spark as before.

A sliding-window aggregate (``[RANGE t SLIDE s]``, lang/sliding_fold.py) folds the same
way, its window's start and end two more keys, and where its query alone has an
event-time watermark (a timestamp event time) the fold keeps Spark's (:class:`Closing`):
the watermark in force for an output is the newest event time of the rows folded up to
the previous one (kept per state version beside the state, ``latest.json``) less the
delay, in whole milliseconds as Spark keeps it (never below 0); the partials of windows
ending at or before it are dropped (late rows, as Spark's update mode drops them per
window) and so are the state's groups of such windows (evicted: they can get no row
any more), so the state holds open windows only.

An aggregate branch has no privacy switch (``SharedNetwork._fold``): it folds every
batch whoever listens, as its query alone did, so its result store holds each update when
it happens. Should its position ever have moved past its state's version without a fold,
the stored rows in between are folded in with its next batch.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from streamshield.engine.sharing.arrow_merge import NotMergeable, merge
from streamshield.engine.sharing.branch_ledger import NOTHING
from streamshield.engine.store.parquet_versions import ParquetVersions
from streamshield.engine.store.small_writes import SMALL_BYTES, total_bytes
from streamshield.lang.partial_aggregates import TOUCHED, Fold


@dataclass(frozen=True)
class Closing:
    """How a sliding-window branch's windows close: Spark's event-time watermark."""

    end: str
    """The state key holding a window's end."""
    latest: str
    """The partial column holding a group's newest event time (its rows')."""
    delay: int
    """The watermark's delay, microseconds."""


LATEST_FILE = "latest.json"
"""Beside the state versions: per version, the newest event time folded up to it."""


class FoldedAggregate:
    """One branch's fold and its state under ``directory``; ``names``: the query's own
    output columns (what Spark names them when it runs the query alone); ``closing``:
    a sliding-window aggregate's watermark (None: none, nothing closes)."""

    def __init__(
        self,
        fold: Fold,
        directory: str | Path,
        names: tuple[str, ...],
        keep: int = 2,
        closing: Closing | None = None,
    ) -> None:
        self.fold, self.names, self.closing = fold, names, closing
        self.directory = Path(directory)
        self._versions = ParquetVersions(self.directory, keep)
        self._held: tuple[int, pa.Table] | None = None
        """The newest version written by this process, in memory (id, state)."""
        self._select: tuple[Column | None, tuple[Column, ...]] | None = None
        """The final select's HAVING and columns, built on first use (:meth:`_final`)."""
        if len(names) != len(fold.final):
            raise ValueError("one name per output column")

    def since(self, covered: int) -> int:
        """The newest state version at or before the branch's position ``covered``
        (NOTHING: none); the stored rows after it and up to ``covered`` were sat out."""
        earlier = [v for v in self.versions() if v <= covered]
        return max(earlier) if earlier else NOTHING

    def output(
        self, partial: DataFrame, since: int, batch_id: int, small_input: bool = False
    ) -> DataFrame:
        """The rows emitted for output ``batch_id``: ``partial`` (the fold's partial SQL
        over the branch's rows after its state version ``since``) merged into that
        state; the new state is written first (one job). ``small_input``: the rows are
        known to be small; with a small state too, the new one is written from the
        driver (engine/store/small_writes.py: a Spark write costs more than the few groups)."""
        session = partial.sparkSession
        schema = StructType([*partial.schema.fields, StructField(TOUCHED, LongType(), False)])
        target = self._versions.path(batch_id)
        if not target.exists():
            still_open = None
            if self.closing is not None:
                row = partial.agg(F.unix_micros(F.max(self.closing.latest))).first()
                assert row is not None  # a global aggregate has one row
                newest = row[0]
                still_open = F.col(self.closing.end) > F.timestamp_micros(
                    F.lit(self.watermark(since))
                )
                self._record(since, batch_id, newest)
                partial = partial.filter(still_open)
            rows = partial.withColumn(TOUCHED, F.lit(batch_id).cast("long"))
            if since != NOTHING:
                before = session.read.schema(schema).parquet(str(self._versions.path(since)))
                rows = before.unionByName(rows)
            types = {f.name: f.dataType for f in partial.schema.fields}
            merged = rows.groupBy(*self.fold.keys).agg(
                *(F.expr(f"{how}({c})").cast(types[c]).alias(c) for c, how in self.fold.merges),
                F.max(TOUCHED).alias(TOUCHED),
            )
            if still_open is not None:  # closed windows evicted
                merged = merged.filter(still_open)
            state_bytes = 0 if since == NOTHING else total_bytes(self._versions.files(since))
            small = small_input and state_bytes <= SMALL_BYTES // 2
            self._versions.write(merged, batch_id, small)
            self._versions.prune(batch_id)
        state = session.read.schema(schema).parquet(str(target))
        return self._final(state.filter(F.col(TOUCHED) == batch_id))

    def small_state(self, since: int) -> bool:
        """Whether the state version ``since`` is small enough for the driver."""
        if since == NOTHING or (self._held is not None and self._held[0] == since):
            return True
        return total_bytes(self._versions.files(since)) <= SMALL_BYTES // 2

    def output_table(
        self,
        partial: pa.Table,
        schema: StructType,
        since: int,
        batch_id: int,
        session: SparkSession,
    ) -> DataFrame | None:
        """As :meth:`output`, folded on the driver: ``partial`` (the partials, collected
        as Arrow; ``schema``: their Spark schema) merged with the state version ``since``
        by pyarrow, the new version written by pyarrow and kept in memory, the query's
        final select over the touched groups as a local relation. None where the merge
        could differ from Spark's (NotMergeable): the caller folds with Spark."""
        # nullable as read back from Parquet, as the Spark fold's state is
        fields = [*schema.fields, StructField(TOUCHED, LongType())]
        state_schema = StructType([StructField(f.name, f.dataType, True) for f in fields])
        if self._versions.path(batch_id).exists():  # a replay: its version is written
            state = self._state(batch_id)
        else:
            watermark = None
            if self.closing is not None:
                watermark = pa.scalar(self.watermark(since), partial[self.closing.end].type)
                latest = pc.max(partial[self.closing.latest].cast(pa.int64())).as_py()
                self._record(since, batch_id, latest)
                partial = partial.filter(pc.greater(partial[self.closing.end], watermark))
            try:
                state = merge(
                    None if since == NOTHING else self._state(since),
                    partial,
                    self.fold.keys,
                    self.fold.merges,
                    batch_id,
                )
            except NotMergeable:
                return None
            if watermark is not None and self.closing is not None:  # closed windows evicted
                state = state.filter(pc.greater(state[self.closing.end], watermark))
            self._versions.write_table(state, batch_id)
            self._versions.prune(batch_id)
        self._held = (batch_id, state) if state.nbytes <= SMALL_BYTES else None
        touched = state.filter(pc.equal(state[TOUCHED], batch_id))
        return self._final(session.createDataFrame(touched, schema=state_schema))

    def watermark(self, since: int) -> int:
        """The watermark in force for the output after state version ``since``, in
        microseconds: Spark's (its newest event time so far, in whole milliseconds, less
        the delay; 0 before any)."""
        assert self.closing is not None
        latest = self._latests().get(str(since)) if since != NOTHING else None
        if latest is None:
            return 0
        return max(0, (latest // 1000) * 1000 - self.closing.delay)

    def _latests(self) -> dict[str, int | None]:
        path = self.directory / LATEST_FILE
        return json.loads(path.read_text()) if path.exists() else {}

    def _record(self, since: int, batch_id: int, newest: int | None) -> None:
        """The newest event time up to output ``batch_id`` (``newest``: its batch's),
        written before its state version (a replay finds it beside the version), with
        the versions still kept."""
        known = self._latests()
        before = known.get(str(since)) if since != NOTHING else None
        seen = [t for t in (before, newest) if t is not None]
        kept = {str(v) for v in self.versions()}
        out = {k: t for k, t in known.items() if k in kept}
        out[str(batch_id)] = max(seen) if seen else None
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / LATEST_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(out))
        os.replace(temporary, path)

    def _state(self, version: int) -> pa.Table:
        if self._held is not None and self._held[0] == version:
            return self._held[1]
        return self._versions.read_table(version)

    def plan(self, partial: DataFrame) -> DataFrame:
        """The emitted rows over an empty state (a plan: how the fold's output is typed)."""
        session = partial.sparkSession
        schema = StructType([*partial.schema.fields, StructField(TOUCHED, LongType(), False)])
        return self._final(session.createDataFrame([], schema))

    def _final(self, touched: DataFrame) -> DataFrame:
        """The query's select list and HAVING over the ``touched`` groups of the state:
        :meth:`Fold.final_sql`'s plan, as column expressions built once (Spark parses
        each expression as it would inside that SQL; a filter below a projection is the
        plan of its ``WHERE``), so that a batch plans no SQL text and registers no view."""
        if self._select is None:
            having = None if self.fold.having is None else F.expr(self.fold.having)
            columns = tuple(
                F.expr(e).alias(n) for e, n in zip(self.fold.final, self.names, strict=True)
            )
            self._select = (having, columns)
        having, columns = self._select
        rows = touched if having is None else touched.filter(having)
        return rows.select(*columns)

    def purge_after(self, covered: int) -> None:
        """Drops the versions after the branch's position (a fold a crash cut short)."""
        for version in self.versions():
            if version > covered:
                self._versions.discard(version)
        if self._held is not None and self._held[0] > covered:
            self._held = None

    def drop(self) -> None:
        """The query is gone for good: its state too."""
        self._held = None
        shutil.rmtree(self.directory, ignore_errors=True)

    def in_memory(self) -> int | None:
        """The state version held in memory (None: the next fold reads its file)."""
        return None if self._held is None else self._held[0]

    def versions(self) -> list[int]:
        return self._versions.ids()
