"""Secured views: what a query with given roles, at a given level, may see of a stream.

The Security Shield filter on the tuple label, the Chinese-Wall conjunct "the tuple's
level is dominated by the query's level" (simple security, paper 2 Algorithm 1) in the
same Filter, and attribute masking to NULL on the attribute labels, as plain Catalyst
expressions over the label columns. User SQL is only ever planned on top of this view,
so the filter and the masks sit beneath every user expression.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.views import labels, scan_summary
from streamshield.engine.views.level_columns import readable_at
from streamshield.lang.label_propagation import hidden_column
from streamshield.lang.statistics_rewrite import full_column, stats_column
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.privileges import Privilege
from streamshield.policy.query_level import QueryLevel

LABEL_PREFIX = "_ss_"
WATERMARK = "1 minute"
"""The event-time watermark's delay on a secured (or statistics) view whose event time
is a timestamp: Spark drops a windowed aggregate's rows for windows that closed more
than this before the newest event time, and evicts those windows' state."""
WATERMARK_MICROS = 60_000_000
""":data:`WATERMARK` in microseconds (a sliding-window branch keeps it itself,
engine/sharing/aggregate_fold.py)."""


def _is_label(column: str) -> bool:
    """A label column an output carries (not a scan summary: it describes stored rows)."""
    return column.startswith(LABEL_PREFIX) and not column.startswith(scan_summary.PREFIX)


def secured_view(
    labelled: DataFrame,
    schema: StreamDefinition,
    codec: RoleCodec,
    roles: Iterable[str],
    keep_labels: bool = False,
    watermark: str = WATERMARK,
    salt: str = "",
    grant: bool = False,
    level: QueryLevel | None = None,
) -> DataFrame:
    """Rows the roles may read, unreadable attributes as NULL; labels dropped unless asked.

    ``level``: the query's Chinese-Wall level ``C``; only rows whose level words are
    dominated by it pass (None while levels are off). The level words stay with the
    labels (``keep_labels``), so the query's output carries their LUB.

    The row's origin is kept for re-punctuating outputs, without telling more than the
    row itself: the channel as a salted hash (a provider's name can identify a person),
    the tuple id only where the id attribute is visible.

    ``grant`` makes it a *grant view* (the input of a delegating query): only what the
    roles hold WITH GRANT OPTION, as well as READ, is visible.
    """
    view = SecuredProjection.of(
        labelled.columns, schema, codec, roles, keep_labels, salt, grant, level
    ).apply(labelled)
    if schema.event_time and schema.types[schema.event_time] == "timestamp":
        view = view.withWatermark(schema.event_time, watermark)
    return view


@dataclass(frozen=True)
class SecuredProjection:
    """A secured view as a filter and a column list, built once and applied to any batch.

    A query's roles do not change while it runs, so its view's expressions do not
    either; building them (hundreds of Py4J calls for a wide label) once, when the query
    joins, rather than per micro-batch, is what lets many branches of a shared network
    plan their batch cheaply. Column expressions are unresolved, so one value serves
    every micro-batch's DataFrame of the same labelled layout.
    """

    condition: Column
    columns: tuple[Column, ...]
    common: frozenset[str] = frozenset()
    """The columns whose values do not depend on the roles (labels, origin, provenance
    constants): equal for every branch of a shared network over the same rows, so its
    one pass stores them once (engine/sharing/fused_branches.py)."""
    visibility: tuple[object, ...] | None = None
    """What its tests depend on (READ words, GRANT words, level words): projections of
    equal visibility over the same rows have equal tuple and attribute tests, so a
    shared network's pass computes them once for all such branches."""
    tests: Mapping[int, Column] = field(default_factory=dict)
    """Object number -> its attribute test (TRUE or FALSE, never NULL)."""
    masked: tuple[tuple[str, str, int], ...] = ()
    """``(view column, labelled column, object)``: the labelled value where the
    object's test holds, NULL elsewhere (how a pass that stores each row once rebuilds
    this view's masked values)."""
    flags: tuple[tuple[str, int], ...] = ()
    """``(view column, object)``: TRUE where the object's test fails (hidden flags)."""

    @classmethod
    def of(
        cls,
        labelled_columns: Iterable[str],
        schema: StreamDefinition,
        codec: RoleCodec,
        roles: Iterable[str],
        keep_labels: bool = False,
        salt: str = "",
        grant: bool = False,
        level: QueryLevel | None = None,
    ) -> SecuredProjection:
        """The projection of :func:`secured_view` over rows with ``labelled_columns``."""
        labelled_columns = list(labelled_columns)
        read = codec.query(roles)
        delegable = codec.query(roles, Privilege.GRANT) if grant else None

        def own(obj: int) -> Column:
            allowed = labels.allows(obj, read)
            return allowed if delegable is None else allowed & labels.allows(obj, delegable)

        # Each mask tests its attribute's own label: the tuple test is the Filter below
        # it, and every user predicate lands in that Filter *after* it (see tuple_test).
        # A batch without attribute sps stores no attribute words (policy/stored_words),
        # so there these tests read missing columns, which cost nothing per row; the
        # ``_ss_scan_same`` shortcut they replaced read a column of its own on every row.
        tests = {obj: own(obj) for obj in range(1, len(schema.names) + 1)}
        masked = [
            F.when(tests[obj], F.col(name)).alias(name)
            for obj, name in enumerate(schema.names, start=1)
        ]
        extra: list[Column | str] = []
        flags: tuple[tuple[str, int], ...] = ()
        if keep_labels:  # per attribute: hidden from these roles (its value above is NULL)
            extra += [c for c in labelled_columns if _is_label(c)]
            extra += [
                (~F.coalesce(tests[obj], F.lit(False))).alias(hidden_column(name))
                for obj, name in enumerate(schema.names, start=1)
            ]
            flags = tuple((hidden_column(n), obj) for obj, n in enumerate(schema.names, 1))
        tid_obj = schema.names.index(schema.tid) + 1
        tid_visible = tests[tid_obj]
        origin = [
            F.sha2(F.concat_ws("\x1f", F.lit(salt), "stream", "provider"), 256).alias(
                "_ss_channel"
            ),
            F.col("seq").alias("_ss_seq"),
            F.when(tid_visible, F.col("tid")).alias("_ss_tid"),
            F.col("policy_id").alias("_ss_policy"),
        ]
        columns = (*origin, *masked, *(F.col(c) if isinstance(c, str) else c for c in extra))
        common = {"_ss_channel", "_ss_seq", "_ss_policy", *(c for c in extra if isinstance(c, str))}
        visibility = (
            tuple(read),
            None if delegable is None else tuple(delegable),
            None if level is None else tuple(level.words),
        )
        parts = (
            *((n, n, obj) for obj, n in enumerate(schema.names, 1)),
            ("_ss_tid", "tid", tid_obj),
        )
        condition = tuple_test(own(0), level, labelled_columns)
        skip = scan_summary.prefilter(read, labelled_columns, len(codec.hierarchy.roles))
        if skip is not None:  # a range test Parquet can skip pages with; never decides
            condition = skip & condition
        return cls(condition, columns, frozenset(common), visibility, tests, parts, flags)

    def apply(self, labelled: DataFrame) -> DataFrame:
        return labelled.filter(self.condition).select(*self.columns)

    def with_columns(self, more: Mapping[str, Column]) -> SecuredProjection:
        """The same view with constant columns added (a stream's provenance words)."""
        columns = (*self.columns, *(c.alias(n) for n, c in more.items()))
        return replace(self, columns=columns, common=self.common | set(more))


def tuple_test(
    allowed: Column, level: QueryLevel | None = None, columns: Iterable[str] = ()
) -> Column:
    """The Security Shield filter: the tuple's label allows the roles and, with a
    ``level``, the tuple's level is dominated by it (``columns``: the frame's, whose
    level words are checked at plan time). Both are one conjunction, the lowest Filter.

    ``reason`` is not read: ingest folds it into the labels (a tuple that did not pass
    gets all-zero reader words, which allow nobody), so this test alone hides it, and the
    scan skips a string column per row. tests/spark/conformance.py checks that fold on
    every differential and fuzzed input.

    The Filter holding this test is the lowest operator of every query over the view.
    Catalyst pushes a user predicate through the masking projection into this same
    Filter and puts it after this test (``CombineFilters`` keeps the lower condition
    first; a generated Filter evaluates conjuncts left to right and stops at the first
    false one), so a user expression never runs on a row this test rejects, not even to
    fail (an ANSI cast or division): tests/security/error_exfiltration checks it with
    expressions that fail on such a row's value.
    """
    return allowed if level is None else allowed & readable_at(level, list(columns))


def statistics_view(
    labelled: DataFrame,
    schema: StreamDefinition,
    codec: RoleCodec,
    roles: Iterable[str],
    watermark: str = WATERMARK,
    level: QueryLevel | None = None,
) -> DataFrame:
    """The view of an aggregate query: rows the roles may READ or use for STATISTICS
    (and, with ``level``, whose level that level dominates).

    Raw attributes are masked with the READ mask exactly as in :func:`secured_view`, so
    a statistics-only row shows only NULLs to every user expression. Hidden columns
    (``lang/statistics_rewrite.py``) carry each attribute masked with the STATISTICS mask,
    for the arguments of whitelisted aggregates only, and per object whether this row is
    READ-readable, for the release rule. Labels are kept for the output label.
    """
    read, stats = codec.query(roles), codec.query(roles, Privilege.STATISTICS)
    tuple_read = tuple_test(labels.allows(0, read))
    tuple_stats = tuple_test(labels.allows(0, stats))
    visible = labelled.filter(tuple_test(labels.allows(0, stats), level, labelled.columns))
    columns = [tuple_read.alias(full_column(0))]
    for obj, name in enumerate(schema.names, start=1):
        readable = tuple_read & labels.allows(obj, read)
        columns += [
            F.when(readable, F.col(name)).alias(name),
            F.when(tuple_stats & labels.allows(obj, stats), F.col(name)).alias(stats_column(obj)),
            readable.alias(full_column(obj)),
        ]
    extra = [c for c in labelled.columns if _is_label(c)]
    view = visible.select(*columns, *extra)
    if schema.event_time and schema.types[schema.event_time] == "timestamp":
        view = view.withWatermark(schema.event_time, watermark)
    return view


@dataclass(frozen=True)
class StatisticsProjection:
    """:func:`statistics_view` as a shared network's branch applies it to each batch
    (the counterpart of :class:`SecuredProjection` for an aggregate that statistics-only
    access may feed), with the stream's provenance words as constant columns."""

    schema: StreamDefinition
    codec: RoleCodec
    roles: tuple[str, ...]
    level: QueryLevel | None = None
    constants: Mapping[str, Column] = field(default_factory=dict)

    def apply(self, labelled: DataFrame) -> DataFrame:
        view = statistics_view(labelled, self.schema, self.codec, self.roles, level=self.level)
        return view.withColumns(dict(self.constants))
