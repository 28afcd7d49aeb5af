"""A single-stream continuous query over a CQL window: `[ROWS n]`, `[NOW]`, `[RANGE t]`.

Spark's streaming SQL has no count windows, so these queries run per micro-batch: the
labelled stream's new rows update a :class:`~streamshield.engine.queries.window_state.WindowState`
(persisted per batch id, so a replay sees the same relation), the relation goes
through the query's secured view, and the user's checked SQL runs over it as batch SQL.

What each instant (the end of a micro-batch) emits, following CQL:

- a selection/projection emits ISTREAM: the rows of tuples that entered the window in
  this batch (a tuple evicted in the batch it arrived never shows, as in CQL);
- an aggregate emits RSTREAM: the aggregate over the whole window at this instant,
  labelled with the intersection of its contributors' readers.

Security comes first: only tuples the query's roles (and level) may read enter its
window (so a ``ROWS n`` window holds the n latest *visible* tuples of the stream, in the
stream's order of lang/windows.py ``StreamPosition``, n in all and not n per channel; and
neither its content nor its eviction depends on tuples the query cannot see); the
secured view then masks their attributes beneath the user's SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import PASS
from streamshield.engine.queries.window_state import ARRIVAL, WindowState
from streamshield.engine.store.labelled_store import INGEST, LabelledStore, labelled_schema
from streamshield.engine.views import labels
from streamshield.engine.views.level_columns import at_output_level
from streamshield.engine.views.provenance_columns import with_provenance
from streamshield.engine.views.secured_view import secured_view, tuple_test
from streamshield.lang.output_level import OutputLevel
from streamshield.lang.rewrite_rules import Secured
from streamshield.lang.windows import WindowSpec
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.policy.query_level import QueryLevel


class WindowQuery:
    """One registered window query; ``deliver(frame, batch_id)`` gets each instant's output."""

    def __init__(
        self,
        spark: SparkSession,
        store: LabelledStore,
        stream: StreamDefinition,
        codec: RoleCodec,
        roles: Sequence[str],
        window: WindowSpec,
        sql: Callable[[str], Secured],
        aggregate: bool,
        deliver: Callable[[DataFrame, int], None],
        root: str | Path,
        name: str,
        provenance: ProvenanceCodec,
        level: QueryLevel | None = None,
        own_state: bool = True,
        output: OutputLevel = OutputLevel.QUERY,
    ) -> None:
        """``sql(view)`` is the user's checked SQL reading the secured window as ``view``;
        ``level``: the query's level, whose conjunct filters tuples *before* the window
        (``[ROWS n]`` = the n latest tuples of the stream the level may read).
        ``own_state`` False: a branch of a window network (engine/sharing/window_network.py),
        whose node keeps the window; the query only secures and queries the relation it
        is handed. ``output``: where its rows are labelled (``AdmittedQuery.output_level``;
        a window's contents depend on several tuples, so the query's level)."""
        self.level = level
        self.levels = level.width if level is not None else 0
        self.spark, self.store, self.stream, self.codec = spark, store, stream, codec
        self.roles, self.aggregate, self.deliver = tuple(roles), aggregate, deliver
        self.root, self.name, self.provenance = Path(root), name, provenance
        event_time = stream.event_time
        self.window = window
        self.state = (
            WindowState(
                spark,
                window,
                self.root / "state",
                None if event_time is None else (event_time, stream.types[event_time]),
            )
            if own_state
            else None
        )
        self.view = f"ss_{uuid.uuid4().hex}_{stream.name}"
        self.secured = sql(self.view)
        self.text = self.secured.sql
        self.output = output
        self.salt = uuid.uuid4().hex

    def analyse(self) -> None:
        """Plans the user's SQL over an empty window in a private session, so that what
        Spark refuses (unknown column, type error) is refused at registration, not at
        the first micro-batch."""
        struct = labelled_schema(
            self.spark, self.stream.ddl, len(self.stream.names), self.codec.width, self.levels
        )
        session = self.spark.newSession()
        empty = session.createDataFrame([], struct).withColumn(ARRIVAL, F.lit(0).cast("long"))
        view = self._secured(empty)
        view.createOrReplaceTempView(self.view)
        session.sql(self.text)

    def start(self, available_now: bool = False) -> StreamingQuery:
        return self.store.per_batch(
            self.spark,
            self.stream,
            self.codec.width,
            self._process,
            self.root / "checkpoint",
            self.name,
            available_now,
            self.levels,
        )

    def visible(self, columns: Sequence[str]) -> Column:
        """The tuples this query may read (its roles and level): all its window holds."""
        allowed = (F.col("reason") == PASS) & labels.allows(0, self.codec.query(self.roles))
        return tuple_test(allowed, self.level, columns)

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        assert self.state is not None, "a network's branch has no streaming query"
        relation = self.state.update(batch.filter(self.visible(batch.columns)), batch_id)
        self.emit(relation, batch_id)

    def emit(self, relation: DataFrame, batch_id: int) -> None:
        """Runs the query over the window at ``batch_id`` and delivers the output: the
        rows new at this instant (ISTREAM), or the aggregate over the whole window."""
        if not self.aggregate:
            relation = relation.filter(F.col(ARRIVAL) == batch_id)
        view = self._secured(relation.drop(INGEST))  # the window's order, not a label
        session = relation.sparkSession
        view.createOrReplaceTempView(self.view)
        try:
            out = session.sql(self.text)
            if self.level is not None:
                out = at_output_level(out, self.level, self.output)
            self.deliver(out.drop(ARRIVAL) if ARRIVAL in out.columns else out, batch_id)
        finally:
            session.catalog.dropTempView(self.view)

    def _secured(self, relation: DataFrame) -> DataFrame:
        view = secured_view(
            relation,
            self.stream,
            self.codec,
            self.roles,
            keep_labels=True,
            salt=self.salt,
            level=self.level,
        )
        return with_provenance(view, self.stream.name, self.provenance)
