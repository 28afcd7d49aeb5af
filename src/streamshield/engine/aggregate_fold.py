"""A network branch's aggregate without a window, kept as a Parquet state per batch.

A branch of a stream's selection network (engine/shared_network.py) that aggregates
(``SELECT pid, count(*) FROM s GROUP BY pid``) cannot lean on Spark's streaming state:
the network's streaming query is the stream's scan, shared by every branch. So the
branch folds (lang/partial_aggregates.py): per micro-batch its secured SQL's partials
over the rows it takes, merged with its state as of its position into the new state,
and its select list over the groups the batch touched (Spark's update mode).

The state is versioned by the branch's output ids, as window states are
(engine/window_state.py): version N is written under ``<directory>/v=N`` by one atomic
rename, and the fold of output N starts from the newest version at or before the
branch's position. Versions after the position are left by a crash between a fold and
the position's move; :meth:`FoldedAggregate.purge_after` removes them when the branch
joins, so that a replay (or an owed batch, engine/branch_ledger.py) starts from the
state its first run started from and yields the same output.

An aggregate branch has no privacy switch (``SharedNetwork._fold``): it folds every
batch whoever listens, as its query alone did, so its result store holds each update when
it happens. Should its position ever have moved past its state's version without a fold,
the stored rows in between are folded in with its next batch.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from streamshield.engine.branch_ledger import NOTHING
from streamshield.engine.parquet_versions import ParquetVersions
from streamshield.engine.small_writes import SMALL_BYTES, total_bytes
from streamshield.lang.partial_aggregates import TOUCHED, Fold


class FoldedAggregate:
    """One branch's fold and its state under ``directory``; ``names``: the query's own
    output columns (what Spark names them when it runs the query alone)."""

    def __init__(
        self, fold: Fold, directory: str | Path, names: tuple[str, ...], keep: int = 2
    ) -> None:
        self.fold, self.names = fold, names
        self.directory = Path(directory)
        self._versions = ParquetVersions(self.directory, keep)

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
        driver (engine/small_writes.py: a Spark write costs more than the few groups)."""
        session = partial.sparkSession
        schema = StructType([*partial.schema.fields, StructField(TOUCHED, LongType(), False)])
        target = self._versions.path(batch_id)
        if not target.exists():
            rows = partial.withColumn(TOUCHED, F.lit(batch_id).cast("long"))
            if since != NOTHING:
                before = session.read.schema(schema).parquet(str(self._versions.path(since)))
                rows = before.unionByName(rows)
            types = {f.name: f.dataType for f in partial.schema.fields}
            merged = rows.groupBy(*self.fold.keys).agg(
                *(F.expr(f"{how}({c})").cast(types[c]).alias(c) for c, how in self.fold.merges),
                F.max(TOUCHED).alias(TOUCHED),
            )
            state_bytes = 0 if since == NOTHING else total_bytes(self._versions.files(since))
            small = small_input and state_bytes <= SMALL_BYTES // 2
            self._versions.write(merged, batch_id, small)
            self._versions.prune(batch_id)
        state = session.read.schema(schema).parquet(str(target))
        return self._final(state.filter(F.col(TOUCHED) == batch_id))

    def plan(self, partial: DataFrame) -> DataFrame:
        """The emitted rows over an empty state (a plan: how the fold's output is typed)."""
        session = partial.sparkSession
        schema = StructType([*partial.schema.fields, StructField(TOUCHED, LongType(), False)])
        return self._final(session.createDataFrame([], schema))

    def _final(self, touched: DataFrame) -> DataFrame:
        """The query's select list and HAVING over the ``touched`` groups of the state."""
        session = touched.sparkSession
        view = f"ss_state_{uuid.uuid4().hex}"
        touched.createOrReplaceTempView(view)
        try:
            return session.sql(self.fold.final_sql(view, self.names))
        finally:  # the plan holds the rows; the name is not needed any more
            session.catalog.dropTempView(view)

    def purge_after(self, covered: int) -> None:
        """Drops the versions after the branch's position (a fold a crash cut short)."""
        for version in self.versions():
            if version > covered:
                self._versions.discard(version)

    def drop(self) -> None:
        """The query is gone for good: its state too."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def versions(self) -> list[int]:
        return self._versions.ids()
