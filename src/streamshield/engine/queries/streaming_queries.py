"""Continuous queries of users over secured views of the labelled streams.

``register`` takes an admitted query (lang/admission.py: parsed and checked once, before
Spark sees anything), plans it in a fresh Spark session (temporary views are per
session, so no query can name another one's views) over secured views of exactly the
streams it uses for exactly the roles it runs with, applies the ordered security
rewrites of lang/rewrite_rules.py to its checked tree, and starts it on the chosen
sink. Failures reach the user as an error class only; the full message, which may quote
data values, goes to the audit log.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.policy_registry import PolicyRegistry
from streamshield.engine.levels.level_processor import LevelProcessor
from streamshield.engine.queries.punctuated_export import PunctuatedExport
from streamshield.engine.queries.source_ids import SourceIds
from streamshield.engine.spark_errors.analysis_errors import planned
from streamshield.engine.spark_errors.batch_errors import STORAGE_CAUSES, bounded
from streamshield.engine.spark_errors.error_conditions import is_condition
from streamshield.engine.store.checkpoint_leftovers import at_checkpoint
from streamshield.engine.store.labelled_store import LabelledStore, labelled_schema, read_stream
from streamshield.engine.views.labels import label_names
from streamshield.engine.views.level_columns import at_output_level
from streamshield.engine.views.provenance_columns import provenance_column, with_provenance
from streamshield.engine.views.secured_view import secured_view, statistics_view
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.rewrite_rules import Rewrite, Sliding, runs_on_statistics, secure
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import RoleHierarchy

audit = logging.getLogger("streamshield.audit")
_ERROR_CLASS = re.compile(r"\[([A-Z0-9_.]+)\]")


@dataclass(frozen=True)
class FileSink:
    path: str
    format: str = "parquet"


@dataclass(frozen=True)
class ConsoleSink:
    pass


@dataclass(frozen=True)
class MemorySink:
    """Spark's in-memory table sink, named ``table`` (tests, notebooks)."""

    table: str


@dataclass(frozen=True)
class CallbackSink:
    """Calls ``fn(frame, batch_id)`` once per micro-batch, in-process."""

    fn: Callable[[DataFrame, int], None]


Sink = FileSink | ConsoleSink | MemorySink | CallbackSink


class QueryFailed(RuntimeError):
    """A registered query stopped with an error; the message is safe to show."""


_WRAPPERS = frozenset({"STREAM_FAILED"})


def safe_error(err: BaseException) -> str:
    """The error class of a Spark failure without its message (which can quote values).

    Streaming failures wrap the cause (``[STREAM_FAILED] ... [CAST_INVALID_INPUT] ...``),
    sometimes only in the exception's cause chain (a failed state commit); the first
    class below the wrapper is the useful one. Only names Spark defines count: messages
    bracket values too (``unexpected key [902]``), and a value is never an error class.
    """
    seen: BaseException | None = err
    for _ in range(8):  # the first class named along the cause chain (bounded)
        if seen is None:
            break
        classes = [
            c for c in _ERROR_CLASS.findall(str(seen)) if c not in _WRAPPERS and is_condition(c)
        ]
        if classes:
            return classes[0]
        seen = getattr(seen, "_cause", None) or seen.__cause__
    return type(err).__name__


STORAGE_UNAVAILABLE = "STORAGE_UNAVAILABLE"
"""The error class of a query that failed because its storage could not be written: the
server starts it again once writing works (``QueryRegistry.restart``)."""


def failure_class(failure: BaseException | None) -> str:
    """The error class a failed query shows: STORAGE_UNAVAILABLE when the disk was full
    or read-only (the OS's words in the failure: a batch function's failure keeps them,
    :func:`~streamshield.engine.spark_errors.batch_errors.compact`; Spark's own class there is a
    generic TASK_WRITE_FAILED), a class the failure carries (``error_class``: a level
    application's report, engine/levels/level_application.py), else Spark's (:func:`safe_error`)."""
    if failure is None:
        return "STOPPED_UNEXPECTEDLY"
    known = getattr(failure, "error_class", None)
    if isinstance(known, str) and known:
        return known
    text = str(failure)
    if any(cause in text for cause in STORAGE_CAUSES):
        return STORAGE_UNAVAILABLE
    return safe_error(failure)


@dataclass
class RegisteredQuery:
    name: str
    sql: str
    roles: tuple[str, ...]
    streams: tuple[str, ...]
    labelled_output: bool
    handle: StreamingQuery = field(repr=False)
    session: SparkSession = field(repr=False)
    sink: Sink = field(repr=False)
    columns: tuple[str, ...] = ()  # output columns, labels and origin included
    level: QueryLevel | None = None
    """The Chinese-Wall level it runs at (None while levels are off)."""
    secured_sql: str = ""
    """Its SQL as the security rewrites produced it: what Spark parsed (``explain``)."""

    def results(self) -> list:
        """Rows of a MemorySink query so far (the table lives in the query's own session)."""
        if not isinstance(self.sink, MemorySink):
            raise TypeError("only memory-sink queries keep results in process")
        return self.session.table(self.sink.table).collect()

    @property
    def active(self) -> bool:
        return self.handle.isActive

    def error(self) -> str | None:
        """Why the query failed, as an error class; details are in the audit log."""
        failure = self.handle.exception()
        if failure is None:
            return None
        audit.error("query %s failed: %s", self.name, failure)
        return safe_error(failure)

    def process_all_available(self) -> None:
        """Block until everything available is processed; QueryFailed with a safe message."""
        try:
            self.handle.processAllAvailable()
        except PySparkException as err:
            audit.error("query %s failed: %s", self.name, err)
            raise QueryFailed(f"query {self.name} failed: {safe_error(err)}") from None

    def stop(self) -> None:
        self.handle.stop()


class QueryService:
    """Registers, lists and stops users' continuous queries."""

    def __init__(
        self,
        spark: SparkSession,
        streams: dict[str, StreamDefinition],
        hierarchy: RoleHierarchy,
        labelled: LabelledStore,
        root: str | Path,
        statistics_k: int = 3,
    ) -> None:
        self.spark, self.streams, self.hierarchy = spark, streams, hierarchy
        self.codec = RoleCodec(hierarchy)
        self.statistics_k = statistics_k  # minimum hidden contributors of a released group
        self.labelled, self.root = labelled, Path(root)
        self.queries: dict[str, RegisteredQuery] = {}
        self.sources = SourceIds(self.root / "provenance.json")
        self.sources.add(sorted(streams))

    def use_hierarchy(self, hierarchy: RoleHierarchy) -> None:
        """Registrations and starts from now on resolve roles with ``hierarchy``; a
        running query keeps the views it was compiled with until it is started again
        (the server does so for every query whose effective roles changed:
        ``ServerService.reconcile_rights``). Only a hierarchy keeping the label layout is
        accepted."""
        if not hierarchy.keeps_layout_of(self.hierarchy):
            raise ValueError("the new role hierarchy changes the label layout")
        self.hierarchy, self.codec = hierarchy, RoleCodec(hierarchy)

    def admit(
        self, sql: str, roles: Iterable[str], level: QueryLevel | None = None
    ) -> AdmittedQuery:
        """``sql`` admitted against every stream of this service (a plain query only),
        to run at ``level``."""
        admitted = admit(sql, roles, self.hierarchy, list(self.streams), level)
        if not isinstance(admitted, AdmittedQuery):
            raise QueryRejected("query_shape", "an sp script is not a query")
        return admitted

    def register(
        self,
        admitted: AdmittedQuery,
        sink: Sink,
        name: str | None = None,
        grant: bool = False,
        sliding: Sliding | None = None,
        processor: LevelProcessor | None = None,
    ) -> RegisteredQuery:
        """Secure and start an admitted query (with the roles it was admitted with);
        QueryRejected for anything not allowed.

        ``grant``: the query delegates (ON RESULT), so it reads grant views: only what
        its roles hold WITH GRANT OPTION; statistics-only access never reaches it.
        ``sliding``: a ``[RANGE t SLIDE s]`` aggregate's window.
        ``processor``: the query's level processor (its checkpoint under the level's
        directory, its jobs in the level's pool); without one, the service's own root.
        """
        roles, streams = admitted.roles, admitted.streams
        name = name or f"q-{uuid.uuid4().hex[:8]}"
        if name in self.queries:
            raise QueryRejected("duplicate_name", f"a query named {name!r} exists")
        session = self.spark.newSession()
        views = {s: f"ss_{uuid.uuid4().hex}_{s}" for s in streams}
        tree = admitted.checked.tree
        aggregate = admitted.shape.aggregate
        statistics = not grant and runs_on_statistics(tree, streams, aggregate)
        level = admitted.level
        for stream, view in views.items():
            self._view(session, stream, roles, view, statistics, grant, level)
        secured = secure(tree, self.rewrite(views, statistics, sliding, level))
        # Spark's own refusals (unknown column, type error, unsupported on a stream) are
        # the user's error: a QueryRejected naming the column or class, before anything runs.
        sql = admitted.request.sql
        columns = {s: self.streams[s].names for s in streams}
        result = planned(lambda: session.sql(secured.sql), sql, columns)
        if level is not None:
            result = at_output_level(result, level, admitted.output_level)
        checkpoint = self.checkpoint(name, processor)
        with processor.pool() if processor is not None else contextlib.nullcontext():
            handle = planned(lambda: self._start(result, sink, checkpoint, aggregate), sql, columns)
        registered = RegisteredQuery(
            name,
            sql,
            roles,
            streams,
            any(c.startswith("_ss_r0_") for c in result.columns),
            handle,
            session,
            sink,
            tuple(result.columns),
            level,
            secured.sql,
        )
        self.queries[name] = registered
        at = f" at level {level.text}" if level is not None else ""
        audit.info("query %s registered by roles %s%s over %s", name, roles, at, streams)
        return registered

    def checkpoint(self, name: str, processor: LevelProcessor | None = None) -> Path:
        """Where the streaming query of its own named ``name`` keeps its checkpoint (its
        offsets and, for an aggregate, its state store)."""
        if processor is not None:
            return processor.path("checkpoints", "queries", name)
        return self.root / "checkpoints" / "queries" / name

    def has_run(self, name: str, processor: LevelProcessor | None = None) -> bool:
        """Whether a streaming query of its own named ``name`` has committed a batch: its
        checkpoint then holds its state, which a restart must resume from."""
        commits = self.checkpoint(name, processor) / "commits"
        return commits.is_dir() and any(commits.iterdir())

    def export_punctuated(
        self, sql: str, roles: Iterable[str], out: str | Path, name: str | None = None
    ) -> RegisteredQuery:
        """Register a query whose output is written as a punctuated stream under ``out``.

        Its output columns must be attributes of its one input stream under their own
        names: the exported sps name attributes, and a renamed column would escape them.
        """
        admitted = self.admit(sql, roles)
        if len(admitted.streams) != 1:
            raise QueryRejected("export_shape", "a punctuated export reads exactly one stream")
        origin = admitted.streams[0]
        registry = PolicyRegistry(self.labelled.root.parent / "policies")
        exporter = PunctuatedExport(out, registry, name or f"export-{origin}", origin)
        query = self.register(admitted, CallbackSink(exporter), name)
        columns = [c for c in query.columns if not c.startswith("_ss_")]
        if not query.labelled_output or not set(columns) <= set(self.streams[origin].names):
            self.stop(query.name)
            raise QueryRejected(
                "export_shape", "a punctuated export may only select attributes by name"
            )
        return query

    def list(self) -> list[RegisteredQuery]:
        return sorted(self.queries.values(), key=lambda q: q.name)

    def stop(self, name: str) -> None:
        self.queries.pop(name).stop()

    @property
    def provenance(self) -> ProvenanceCodec:
        return self.sources.codec

    def rewrite(
        self,
        views: Mapping[str, str],
        statistics: bool = False,
        sliding: Sliding | None = None,
        level: QueryLevel | None = None,
    ) -> Rewrite:
        """The context of the security rewrites (lang/rewrite_rules.py) over ``views``;
        with a ``level``, its words are labels too (OR-ed: the LUB of the inputs)."""
        words = level.columns if level is not None else []
        return Rewrite(
            tuple(views),
            views,
            {s: self.streams[s].names for s in views},
            (*self._label_columns(), *words),
            (*self._provenance_columns(), *words),
            self.codec.block_width,
            self.statistics_k,
            statistics,
            sliding,
            level,
        )

    def _label_columns(self) -> builtins.list[str]:
        """Tuple label and provenance words: what a query's output rows carry on."""
        return label_names(1, self.codec.width) + self._provenance_columns()

    def _provenance_columns(self) -> builtins.list[str]:
        return [provenance_column(w) for w in range(self.provenance.width)]

    def _view(
        self,
        session: SparkSession,
        stream: str,
        roles: tuple[str, ...],
        name: str,
        statistics: bool = False,
        grant: bool = False,
        level: QueryLevel | None = None,
    ) -> None:
        schema = self.streams[stream]
        path = self.labelled.path(stream)
        path.mkdir(parents=True, exist_ok=True)
        words = level.width if level is not None else 0
        struct = labelled_schema(
            session, schema.ddl, len(schema.names), self.codec.width, words, summaries=True
        )
        source = read_stream(session, struct, path)
        if statistics:
            view = statistics_view(source, schema, self.codec, roles, level=level)
        else:
            salt = uuid.uuid4().hex
            view = secured_view(
                source,
                schema,
                self.codec,
                roles,
                keep_labels=True,
                salt=salt,
                grant=grant,
                level=level,
            )
        with_provenance(view, stream, self.provenance).createOrReplaceTempView(name)

    def _start(
        self, result: DataFrame, sink: Sink, checkpoint: Path, aggregate: bool
    ) -> StreamingQuery:
        name = checkpoint.name
        writer = at_checkpoint(result.writeStream.queryName(name), checkpoint)
        if aggregate:  # files only take final results (needs the event-time watermark)
            writer = writer.outputMode("append" if isinstance(sink, FileSink) else "update")
        if isinstance(sink, FileSink):
            return writer.format(sink.format).start(sink.path)
        if isinstance(sink, ConsoleSink):
            return writer.format("console").option("truncate", "false").start()
        if isinstance(sink, MemorySink):
            return writer.format("memory").queryName(sink.table).start()
        # Spark matches its stop pattern over a failure's whole text, which overflows
        # the JVM's stack on a long Python traceback: it gets one short line instead.
        return writer.foreachBatch(bounded(sink.fn)).start()
