"""The labelled streams on storage: one Parquet directory per stream and batch.

A micro-batch's rows are written to a private staging directory and then renamed into
place as ``<stream>/batch=<id>/`` in one atomic step, so a reader sees all of a batch
or none of it. The batch's commit marker is written after every stream's directory is
in place, durably (fsynced, see :mod:`streamshield.durable`), and lists every stream's
files of the batch (start-up checks them: :mod:`~streamshield.engine.ingest.ingest_consistency`).
A replayed batch (crash before the marker) keeps the directories already
renamed (they are complete, and ingest is deterministic for a batch) and writes only
the missing ones: nothing is read twice or lost.

A batch stores only the label words it needs (:mod:`streamshield.policy.stored_words`:
no tuple word that is zero in every row, no attribute word equal to the tuple's in every
row), so files of one stream differ in their label columns. Every reader therefore
opens a stream with :func:`read_stream` or :func:`read_batches`, which read it with the
full labelled schema (a column a file lacks reads NULL, at no cost per row) and
:func:`restored` puts each left-out word back.

Readers in the same process may :meth:`~LabelledStore.listen`: they are told each batch
id once its marker is written (the batch is then final), so a stream's driven scan
(engine/sharing/driven_scan.py) reads the new batch at once instead of waiting for a file
source's next listing. Ingest in this process :meth:`~LabelledStore.hold` s the batch
its micro-batch writes: its listeners are then told when the micro-batch returns
(:meth:`~LabelledStore.release`), not at the marker, and :meth:`~LabelledStore.held`
names it, so a reader in the same process that looks at the markers itself can leave it
until then. Why: a reader starting at the marker ran beside the rest of ingest's
micro-batch (saving the shield state, unpersisting its caches) in the same driver, Python
and Py4J on two cores, and both were slower. A reader in another process, which cannot
know, reads at the marker.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamshield.catalog.streams import StreamDefinition
from streamshield.durable import replace_durably, write_atomic
from streamshield.engine.frames.held_columns import HeldColumns
from streamshield.engine.spark_errors.batch_errors import bounded
from streamshield.engine.store.checkpoint_leftovers import at_checkpoint
from streamshield.engine.store.small_writes import write_parquet
from streamshield.engine.views import scan_summary
from streamshield.engine.views.labels import label_names
from streamshield.faults import crash_point
from streamshield.policy.query_level import level_names

log = logging.getLogger("streamshield.engine")
Listener = Callable[[int, Sequence[str]], None]
"""Told ``(batch id, streams)`` once a batch is committed; must only hand it on (it runs
in ingest's own micro-batch)."""
READ_OPTIONS = {"recursiveFileLookup": "true", "ignoreMissingFiles": "true"}
"""How every reader of a labelled stream reads it: batches are subdirectories, and a
batch directory the retention prunes (engine/store/retention.py: only batches every reader
has committed past) may vanish while a reader lists the stream. Spark fails a listing
that finds a subdirectory gone unless told to ignore missing files; a reader never
needs a pruned file, except a query starting while an old batch goes, which then
starts without it (what is kept is what a new query reads)."""

_HELD: dict[str, int] = {}
"""Per store root in this process: the batch ingest's micro-batch is writing
(:meth:`LabelledStore.hold`). Per root, not per instance: a quarantine gives ingest a
fresh instance while the readers keep theirs."""
_HOLDING = threading.Lock()

META_FIELDS = (
    ("stream", StringType()),
    ("provider", StringType()),
    ("seq", LongType()),
    ("tid", StringType()),
    ("reason", StringType()),
    ("policy_id", StringType()),
)

INGEST = "_ss_ingest"
"""A row's ingest batch (the ``batch=<id>`` directory it is stored in), added to a
reader's rows where it needs it: a branch catching up on part of a micro-batch, and the
order a ``[ROWS n]`` window counts in (engine/queries/window_state.py)."""


def ingest_column() -> Column:
    """A row's ingest batch, from the path of the file it was read from (evaluated in the
    scan's stage: a cached frame has no file name); NULL for a file outside a batch
    directory (none of the store's)."""
    found = F.regexp_extract(F.input_file_name(), r"/batch=(\d+)/[^/]*$", 1)
    return F.nullif(found, F.lit("")).cast("long")


class LabelledStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.commits = self.root / "_commits"
        self.tmp = self.root / "_tmp"
        self.commits.mkdir(parents=True, exist_ok=True)
        self._listeners: list[Listener] = []
        self._listening = threading.Lock()
        self._key = str(self.root.absolute())
        self._unpublished: dict[int, list[str]] = {}
        """Held batches committed and not yet told (told at their release)."""

    def listen(self, listener: Listener) -> None:
        """``listener`` is told every batch committed from now on (see :data:`Listener`)."""
        with self._listening:
            self._listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        with self._listening:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def adopt_listeners(self, other: LabelledStore) -> None:
        """Takes over ``other``'s listeners (ingest's store replaced by a fresh one)."""
        with other._listening:
            listeners = list(other._listeners)
        for listener in listeners:
            self.listen(listener)

    def hold(self, batch_id: int) -> None:
        """Ingest's micro-batch ``batch_id`` starts in this process: its commit is told to
        the listeners at :meth:`release`, and :meth:`held` names it until then."""
        with _HOLDING:
            _HELD[self._key] = batch_id

    def release(self, batch_id: int) -> None:
        """Ingest's micro-batch ``batch_id`` returned (or failed): the hold ends, and the
        listeners are told of it if its marker was written. Never raises."""
        with _HOLDING:
            if _HELD.get(self._key) == batch_id:
                del _HELD[self._key]
            streams = self._unpublished.pop(batch_id, None)
        if streams is not None:
            self._published(batch_id, streams)

    def held(self) -> int | None:
        """The batch ingest's micro-batch is writing in this process, if any: a reader here
        leaves it (even when its marker exists) until it is told of it."""
        with _HOLDING:
            return _HELD.get(self._key)

    def _published(self, batch_id: int, streams: Sequence[str]) -> None:
        """Tells the listeners; never raises: the batch is committed whatever they do."""
        with self._listening:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(batch_id, streams)
            except Exception as err:
                log.warning("a listener of batch %d failed (%s)", batch_id, type(err).__name__)

    def path(self, stream: str) -> Path:
        """Read it with ``recursiveFileLookup`` (batches are subdirectories)."""
        return self.root / stream

    def read(
        self,
        spark: SparkSession,
        stream: StreamDefinition,
        width: int,
        levels: int = 0,
        summaries: bool = False,
    ) -> DataFrame:
        """Every stored row of ``stream`` as a batch frame, label words restored (tests,
        benches and tools; the engines read with :meth:`per_batch` or
        :func:`read_stream`)."""
        struct = labelled_schema(spark, stream.ddl, len(stream.names), width, levels, summaries)
        reader = spark.read.schema(struct).options(**READ_OPTIONS)
        return restored(reader.parquet(str(self.path(stream.name))))

    def per_batch(
        self,
        spark: SparkSession,
        stream: StreamDefinition,
        width: int,
        process: Callable[[DataFrame, int], None],
        checkpoint: Path,
        name: str,
        available_now: bool = False,
        levels: int = 0,
        feed: Callable[[DataFrame], DataFrame] | None = None,
        trigger_seconds: float = 1.0,
        summaries: bool = False,
    ) -> StreamingQuery:
        """A streaming query handing ``process`` each micro-batch of ``stream``'s new
        labelled rows (the engines that keep their own state per batch run on it);
        ``levels``: the level words to read (0 while levels are off); ``feed``: what
        the rows pass first (a level processor's shepherd); ``trigger_seconds``: how
        often it lists the stream's directory for new files (a new file waits half of
        it on average); ``summaries``: read the scan summaries too (secured views)."""
        path = self.path(stream.name)
        path.mkdir(parents=True, exist_ok=True)
        struct = labelled_schema(spark, stream.ddl, len(stream.names), width, levels, summaries)
        rows = read_stream(spark, struct, path)
        writer = at_checkpoint(
            (rows if feed is None else feed(rows)).writeStream.foreachBatch(bounded(process)),
            checkpoint,
        ).queryName(name)
        trigger = (
            {"availableNow": True}
            if available_now
            else {"processingTime": f"{round(trigger_seconds * 1000)} milliseconds"}
        )
        return writer.trigger(**trigger).start()

    def committed(self, batch_id: int) -> bool:
        return (self.commits / str(batch_id)).exists()

    def untouched(self, batch_id: int, streams: Sequence[str]) -> bool:
        """No part of batch ``batch_id`` is in place yet (not a replay after a crash)."""
        if self.committed(batch_id):
            return False
        return not any((self.path(s) / f"batch={batch_id}").exists() for s in streams)

    def write_batch(
        self,
        batch_id: int,
        frames: dict[str, DataFrame],
        check: Callable[[], bool] | None = None,
        small: bool = False,
        tables: dict[str, pa.Table] | None = None,
    ) -> list[str] | None:
        """Write every stream's labelled rows of one batch, each all or nothing; returns
        the streams written now (a replayed batch's earlier writes are kept as they are).

        Every stream is staged before any is put in place; ``check`` (asked then) may
        refuse the staged rows: they are dropped, nothing is installed, and None says so.
        ``small``: the batch is small enough to be written from the driver
        (:mod:`~streamshield.engine.store.small_writes`); ``tables``: given each stream's rows
        the driver wrote (as written; not a stream Spark wrote), so that the caller can
        count them without another pass."""
        written: list[str] = []
        if self.committed(batch_id):
            return written
        staged: list[tuple[str, Path, Path]] = []
        try:
            for stream, frame in frames.items():
                target = self.path(stream) / f"batch={batch_id}"
                if target.exists():
                    continue  # renamed in place before a crash: complete
                staging = self.tmp / f"{batch_id}-{stream}"
                staged.append((stream, staging, target))
                shutil.rmtree(staging, ignore_errors=True)
                # small pages: the unit a secured scan's range test skips (scan_summary)
                pages = {"parquet.page.row.count.limit": str(scan_summary.PAGE_ROWS)}
                table = write_parquet(
                    frame, staging, small=small, sorted_by=scan_summary.LO, **pages
                )
                if tables is not None and table is not None:
                    tables[stream] = table
                for marker in staging.glob("*.crc"):
                    marker.unlink()
            refused = check is not None and not check()
        except BaseException:
            self._drop(staged)
            raise
        if refused:
            self._drop(staged)
            return None
        for stream, staging, target in staged:
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_durably(staging, target)
            written.append(stream)
        crash_point("ingest.before_marker")
        self._mark(batch_id, list(frames))
        crash_point("ingest.after_marker")
        with _HOLDING:
            held = _HELD.get(self._key) == batch_id
            if held:
                self._unpublished[batch_id] = list(frames)
        if not held:
            self._published(batch_id, list(frames))
        return written

    @staticmethod
    def _drop(staged: list[tuple[str, Path, Path]]) -> None:
        for _stream, staging, _target in staged:
            shutil.rmtree(staging, ignore_errors=True)

    def _mark(self, batch_id: int, streams: list[str]) -> None:
        """The marker lists each stream's files of the batch, so start-up can tell a
        deleted or emptied batch directory from a complete one."""
        listing = {stream: self.files(stream, batch_id) for stream in sorted(streams)}
        marker = {"batch": batch_id, "streams": listing}
        write_atomic(self.commits / str(batch_id), json.dumps(marker))

    def files(self, stream: str, batch_id: int) -> list[str]:
        """The data files of one stream's batch directory (none when it is missing)."""
        target = self.path(stream) / f"batch={batch_id}"
        return sorted(p.name for p in target.glob("*.parquet")) if target.is_dir() else []

    def markers(self) -> list[int]:
        """The batch ids with a commit marker, oldest first."""
        return sorted(int(p.name) for p in self.commits.iterdir() if p.name.isdigit())

    def marker(self, batch_id: int) -> dict[str, list[str]]:
        """A marker's listing; ValueError when it is unreadable or not of this batch."""
        try:
            data = json.loads((self.commits / str(batch_id)).read_bytes())
        except (OSError, ValueError):
            raise ValueError(f"commit marker {batch_id} is unreadable") from None
        streams = data.get("streams") if isinstance(data, dict) else None
        if data.get("batch") != batch_id or not isinstance(streams, dict):
            raise ValueError(f"commit marker {batch_id} does not belong to batch {batch_id}")
        return streams


_DDL_FIELDS: dict[str, tuple[StructField, ...]] = {}
"""Parsed attribute DDL: the JVM's parse costs a third of a second per query start
(five JVM round trips and an empty DataFrame), and a stream's DDL never changes."""


def labelled_schema(
    spark: SparkSession,
    ddl: str,
    n_attributes: int,
    width: int,
    levels: int = 0,
    summaries: bool = False,
) -> StructType:
    """The schema of a labelled stream: metadata, attributes, then label words, then
    ``levels`` Chinese-Wall level words (files written before levels existed read
    NULL there, and a NULL level is readable at no level), then, with ``summaries``,
    the scan summaries ingest writes (:mod:`~streamshield.engine.views.scan_summary`; NULL in
    older files, which are then read as before)."""
    if ddl not in _DDL_FIELDS:
        _DDL_FIELDS[ddl] = tuple(spark.createDataFrame([], ddl).schema.fields)
    attributes = list(_DDL_FIELDS[ddl])
    labels = [StructField(n, LongType()) for n in label_names(n_attributes + 1, width)]
    words = [StructField(n, LongType()) for n in level_names(levels)]
    meta = [StructField(n, t) for n, t in META_FIELDS]
    summary = list(scan_summary.FIELDS) if summaries else []
    return StructType(meta + attributes + labels + words + summary)


def read_stream(spark: SparkSession, struct: StructType, path: Path | str) -> DataFrame:
    """A labelled stream as a streaming source, its label words restored."""
    return restored(spark.readStream.schema(struct).options(**READ_OPTIONS).parquet(str(path)))


def read_batches(
    spark: SparkSession, struct: StructType, folders: Sequence[Path | str]
) -> DataFrame:
    """Batch directories of a labelled stream as a batch frame, label words restored."""
    return restored(spark.read.schema(struct).parquet(*(str(f) for f in folders)))


_LABEL = re.compile(r"_ss_([rd])(\d+)_(\d+)")


def restored(rows: DataFrame, columns: Sequence[str] | None = None) -> DataFrame:
    """``rows`` with every label word a batch left out put back: a tuple word as 0, an
    attribute word as the tuple's (the reference: ``stored_words.restore``). A file that
    stored every word reads unchanged. ``columns``: the full layout, when ``rows`` (a
    batch as ingest labels it, not read from files) lacks the columns left out."""
    names = tuple(columns) if columns is not None else tuple(rows.columns)
    return _restoring(names, frozenset(rows.columns)).select(rows)


@lru_cache(maxsize=64)
def _restoring(columns: tuple[str, ...], present: frozenset[str]) -> HeldColumns:
    """Built once per layout: hundreds of columns at 500 roles, each a py4j call (and
    held in the JVM, so that each batch's select is one call: engine/frames/held_columns.py)."""
    zero = F.lit(0).cast("long")

    def stored(name: str) -> Column:
        return F.col(name) if name in present else F.lit(None).cast("long")

    def word(name: str) -> Column:
        match = _LABEL.fullmatch(name)
        if match is None:
            return F.col(name)
        kind, obj, w = match.group(1), int(match.group(2)), int(match.group(3))
        if obj == 0:
            return F.coalesce(stored(name), zero).alias(name)
        return F.coalesce(stored(name), stored(f"_ss_{kind}0_{w}"), zero).alias(name)

    return HeldColumns(word(c) for c in columns)
