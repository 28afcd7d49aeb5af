"""Secure ingest's micro-batches started by a landing instead of a file-source trigger,
to cut a landing's latency.

Why. Secure ingest ran as a file-source streaming query with a 0.2 s processing-time
trigger: a landing waited for the next trigger (0.1 s on average), then each micro-batch
listed the landing zone through Hadoop's file system, wrote its offsets, planned a
streaming read and committed (~0.15 s a landing besides the labelling itself,
``bench.landing_latency``), although the server had just written the file and
knew it. :class:`DrivenIngest` runs the same micro-batches itself, in a thread of its
own (engine/queries/driven_handle.py): told by the landing zone that a file landed
(``LandingZone.listen``), it lists the landing zone at once and runs one micro-batch
over every file no earlier micro-batch read, calling the same batch function
(``IngestJob._process``: guess, labelling, the labelled store's commit marker, the
shield state, the readers told when it returns). Files landed by anyone else are found
by the same listing every ``poll_seconds`` (the trigger's interval before), so nothing
depends on being told.

Its bookkeeping is the file source's own, in the same checkpoint
(engine/ingest/file_source_log.py): the files of a micro-batch as the next file-source log
entry and ``offsets/<batch>`` before it runs, ``commits/<batch>`` after it. So ingest's
start-up check (engine/ingest/ingest_consistency.py), the batch function's reading of its own
files (``SourceLog.files``), retention (which prunes landing files every reader has
committed past) and a switch back to Spark's file source all read it as Spark's. A
micro-batch planned and not committed (a crash, a failure, a stop that interrupted it) is
replayed first with exactly its files and id, as Spark replays one; a file logged at an
offset whose micro-batch was never planned is listed again and read (``seen``).

What it keeps from Spark's file source: a file is read once, in landing order (by
modification time, then path), at most ``max_files`` per micro-batch; hidden files and
folders (``.``, ``_``) and names not ending in ``.jsonl`` are not read; each
micro-batch's rows are a read of its files with the element schema, in a clone of the
session with adaptive execution off, under a job group of the query's run id (which
stopping cancels, as Spark's stop interrupts a micro-batch).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from streamshield.engine.ingest.file_source_log import FileSourceLog, file_uri, local_path
from streamshield.engine.queries.driven_handle import (
    DrivenHandle,
    activate,
    progress_of,
    stream_session,
)
from streamshield.engine.spark_errors.batch_errors import bounded

NAME = "streamshield-ingest"
SUFFIX = ".jsonl"
STOP_GRACE_SECONDS = 10.0
"""How long a stop lets ingest's micro-batch under way finish before cancelling it (it is
replayed at the next start): the server's whole stop is bounded."""


class DrivenIngest:
    """Secure ingest's micro-batches run as soon as a file lands (see the module)."""

    def __init__(
        self,
        spark: SparkSession,
        landing: Path,
        checkpoint: Path,
        schema: Any,
        process: Callable[[DataFrame, int], None],
        poll_seconds: float,
        max_files: int | None = None,
    ) -> None:
        self.spark = spark
        self.landing, self.checkpoint = Path(landing), Path(checkpoint)
        self.schema, self.process = schema, process
        self.poll_seconds, self.max_files = poll_seconds, max_files
        self.name = NAME
        self.wake = threading.Event()
        self._told: set[Path] = set()
        """Files the landing zone said it landed since the last micro-batch began."""
        self._told_lock = threading.Lock()
        self._listed = 0.0
        """When the landing zone was last listed in full (monotonic seconds)."""
        self.log = FileSourceLog(self.checkpoint)
        self._uris: dict[str, str] = {}
        """Listed files' URIs by path: a full listing computes those of new files only."""
        self._seen: set[str] | None = None
        """Every file still there that a planned micro-batch reads (from the log at the
        start, as Spark's file source rebuilds its ``seenFiles``)."""
        self._fresh = True
        """Whether the log must be asked for a planned micro-batch to replay."""
        self._began: float | None = None
        self._session: SparkSession | None = None
        self.handle: DrivenHandle | None = None

    def start(self, available_now: bool) -> DrivenHandle:
        """Runs the micro-batches in a thread: every one there is to run and then ends
        (``available_now``), or until stopped."""
        self.log.prepare()
        self.handle = DrivenHandle(self, available_now, stop_grace=STOP_GRACE_SECONDS)
        self.handle.start()
        return self.handle

    # -- what its handle runs (engine/queries/driven_handle.py) ------------------------------------

    def tell(self, files: list[Path]) -> None:
        """The landing zone landed ``files``: the next micro-batch starts at once, and
        reads them without listing the landing zone (whose listing grows with the files
        kept there) unless a full listing is due anyway."""
        with self._told_lock:  # as this job spells its landing zone (<landing>/<stream>/<file>)
            self._told.update(self.landing / path.parent.name / path.name for path in files)
        self.wake.set()

    def query_id(self) -> str:
        return self.log.query_id()

    def activate(self) -> None:
        activate(self._stream_session())

    def finished(self) -> None:
        """Nothing to release: the landing zone only sets ``wake``."""

    def goal(self) -> set[str]:
        """The files landed now."""
        return self._listing()

    def reached(self, goal: set[str]) -> bool:
        """Every file of ``goal`` was read, or is gone (retention prunes read files)."""
        if self._fresh or self._seen is None:
            return False
        seen = self._seen
        return all(uri in seen or not os.path.exists(local_path(uri)) for uri in goal)

    def interrupt(self, run_id: str) -> None:
        self.spark.sparkContext.cancelJobGroup(run_id)

    # -- one micro-batch ----------------------------------------------------------------------

    def _listing(self) -> set[str]:
        """Every file the file source would read in the landing zone, as URIs.

        Runs every ``poll_seconds`` over every landed file still kept (days of them), so
        it does per file only a name test and a lookup: the URI is computed once per file
        and the modification time only for files no micro-batch read (:meth:`_next`)."""
        listed: set[str] = set()
        known: dict[str, str] = {}
        for folder, dirs, files in os.walk(self.landing):
            dirs[:] = [d for d in dirs if not _hidden(d)]
            for name in files:
                if _hidden(name) or not name.endswith(SUFFIX):
                    continue
                path = os.path.join(folder, name)
                uri = self._uris.get(path) or file_uri(Path(path))
                known[path] = uri
                listed.add(uri)
        self._uris = known  # files gone (pruned) are forgotten
        return listed

    def _next(self) -> tuple[int, list[str], list[int] | None] | None:
        """The micro-batch to run: the one planned and not committed (a replay, no
        stamps: it is planned already), else one over the files no planned micro-batch
        reads; None: nothing new."""
        if self._fresh:
            self._seen = self.log.seen()
            pending = self.log.pending()
            self._fresh = False
            if pending is not None:
                return pending[0], pending[1], None
        seen = self._seen if self._seen is not None else set()
        with self._told_lock:
            told, self._told = self._told, set()
        if told and time.monotonic() - self._listed < self.poll_seconds:
            landed = _stamped(told)  # what was just landed, and a full listing is not due
        else:
            self._listed = time.monotonic()
            listed = self._listing()
            landed = _stamped(Path(local_path(uri)) for uri in listed - seen)
            # files retention pruned are never listed again: forgotten, so that the set
            # does not grow for as long as the server runs (a file merely not listed, say
            # in a folder unreadable for a moment, is kept: reading it again would
            # duplicate it)
            seen.difference_update(
                [uri for uri in seen - listed if not os.path.exists(local_path(uri))]
            )
        new = [(uri, stamp) for uri, stamp in landed if uri not in seen]
        if self.max_files:
            new = new[: self.max_files]
        if not new:
            return None
        planned = self.log.planned()
        batch_id = planned[-1] + 1 if planned else 0
        return batch_id, [uri for uri, _ in new], [stamp for _, stamp in new]

    def step(self, progress: dict[str, Any]) -> bool:
        """Runs the next micro-batch, if any; whether one ran."""
        began = time.perf_counter()
        found = self._next()
        if found is None:
            return False
        batch_id, files, stamps = found
        listed = time.perf_counter()
        if stamps is not None:
            self.log.plan(batch_id, files, stamps)
        if self._seen is not None:
            self._seen.update(files)
        logged = time.perf_counter()
        run_id = str(progress.get("runId") or "")
        self.spark.sparkContext.setJobGroup(
            run_id, f"{NAME} id = {progress.get('id')} batch = {batch_id}", True
        )
        frame = self._stream_session().read.schema(self.schema).json(files)
        planned = time.perf_counter()
        bounded(self.process)(frame, batch_id)
        processed = time.perf_counter()
        self.log.commit(batch_id)
        done = time.perf_counter()
        ends = {
            "latestOffset": listed,
            "walCommit": logged,
            "queryPlanning": planned,
            "addBatch": processed,
            "commitOffsets": done,
        }
        previous, self._began = self._began, began
        progress.update(progress_of(batch_id, _lines(files), previous, began, ends))
        return True

    def _stream_session(self) -> SparkSession:
        if self._session is None:
            self._session = stream_session(self.spark)
        return self._session


def _stamped(paths: Iterable[Path]) -> list[tuple[str, int]]:
    """The files the file source would read of ``paths`` (not hidden, ``.jsonl``, still
    there), as (URI, modification time in ms), in landing order."""
    found: list[tuple[int, str]] = []
    for path in paths:
        if _hidden(path.name) or not path.name.endswith(SUFFIX):
            continue
        try:
            stamp = int(path.stat().st_mtime * 1000)
        except OSError:  # pruned or moved while listed
            continue
        found.append((stamp, file_uri(path)))
    found.sort()
    return [(uri, stamp) for stamp, uri in found]


def _hidden(name: str) -> bool:
    """Names Spark's file listing leaves out."""
    return name.startswith((".", "_"))


def _lines(files: list[str]) -> int:
    """Elements in the micro-batch's files (one per line, as the landing zone writes
    them; progress and the backlog only), counted natively in 1 MiB blocks."""
    total = 0
    for uri in files:
        try:
            with open(local_path(uri), "rb") as handle:
                ended = True
                while block := handle.read(1 << 20):
                    total += block.count(b"\n")
                    ended = block.endswith(b"\n")
                total += 0 if ended else 1
        except OSError:
            continue
    return total
