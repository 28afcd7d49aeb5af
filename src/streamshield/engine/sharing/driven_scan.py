"""A stream's scan driven by ingest's commits instead of a file-source streaming query,
to cut a landing's latency.

Why. A landing reached a subscriber through two streaming queries in series: ingest's,
then the stream's scan (engine/sharing/stream_scan.py), a file source over the labelled store.
The scan's micro-batch waited for its trigger, listed the stream's directory, wrote its
file-source log and offsets, planned the streaming read and committed (measured ~0.15-0.2
s a batch besides the networks' own work, ``bench.landing_latency``), although ingest
had just said which files it stored: its commit marker lists them
(engine/store/labelled_store.py). A :class:`DrivenScan` is told each committed ingest batch
(``LabelledStore.listen``; a short poll of the markers as a backstop, for ingest in
another process or a missed call), and runs one micro-batch over exactly the stored
files of the ingest batches it has not read, at once, handing it to the attached networks
as the streaming query did (:meth:`StreamScan._process`, so joining, positions, branch
ledgers, owed batches and switches are the same code). Ingest in this process tells it
when ingest's micro-batch returns, not at its marker, and the poll leaves the batch that
micro-batch holds (``LabelledStore.hold``): started at the marker, the scan's micro-batch
ran beside the rest of ingest's on the same two cores, and both were slower. Only
batches whose markers exist are ever read.

Its micro-batches keep the file source's durable bookkeeping, in the file source's own
format and in the same checkpoint (engine/ingest/file_source_log.py), so everything that reads a
scan's checkpoint reads this one unchanged: the networks' ingest ids of a micro-batch
and the scan's position (:class:`~streamshield.engine.ingest.source_log.SourceLog`), retention's
rule that a labelled batch stays until every reader has committed past it
(engine/store/retention.py), and a scan that switches between the two ways of running resumes
where the other stopped. Per micro-batch, before its rows are handed out: the files it
reads as the next file-source log entry (``sources/0/<offset>``, a ``.compact`` file every
tenth offset as Spark writes them), then ``offsets/<batch>`` naming that log offset; after
every network had it: ``commits/<batch>``. A micro-batch planned and not committed (a
crash, a failing network) is replayed with exactly the files it was planned with, under
its own id, before anything new, as Spark replays one; micro-batch ids only grow.

What it does not do: no listing of the stream's directory and no Spark planning of a
streaming read; a micro-batch's read is a batch read of the listed files
(``labelled_store.read_batches``), restored and fed through the level's shepherd as the
streaming read was. A failing micro-batch stops the scan (its handle reports the error,
as a failed streaming query's does) and is replayed at the next start.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from streamshield.engine.ingest.file_source_log import FileSourceLog, file_uri, local_path
from streamshield.engine.ingest.source_log import ingest_id
from streamshield.engine.queries.driven_handle import (
    DrivenHandle,
    activate,
    progress_of,
    stream_session,
)
from streamshield.engine.sharing.stream_scan import Attached, StreamScan
from streamshield.engine.spark_errors.batch_errors import bounded
from streamshield.engine.store.labelled_store import labelled_schema, read_batches

log = logging.getLogger("streamshield.engine")

POLL_SECONDS = 0.1
"""How often the scan looks at the markers without being told (ingest in another
process, a level's application): the file source's trigger was as short."""
LIST_SECONDS = 10.0
"""How often the markers are listed in full, besides looking for the next ids one by one
(a gap in ingest's ids, which a listing finds)."""


class DrivenScan(StreamScan):
    """A stream's scan whose micro-batches ingest's commits start (see the module)."""

    def __init__(self, *args: Any, poll_seconds: float = POLL_SECONDS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.poll_seconds = poll_seconds
        self.scan_log = FileSourceLog(self.checkpoint)
        self.log = self.scan_log
        self.wake = threading.Event()
        self._read: int | None = None
        """The newest ingest batch whose marker the scan has looked at (in memory)."""
        self._fresh = True
        """Whether the log must be asked for a planned micro-batch to replay (at each
        start: afterwards only this scan writes its log)."""
        self._began: float | None = None
        """When the previous micro-batch began (its input rate's interval)."""
        self._told_of = -1
        """The newest ingest batch ingest said it committed."""
        self._listed = 0.0
        self._session: SparkSession | None = None
        self._driver: DrivenHandle | None = None

    # -- attaching ----------------------------------------------------------------------------

    def attach(self, network: Attached, available_now: bool = False) -> Any:
        if network.levels != self.levels:
            raise ValueError(f"{network.name} reads level words of another width")
        with self._lock:
            if network not in self._networks:
                self._networks.append(network)
            if self._driver is None or not self._driver.isActive:
                self.scan_log.prepare()
                self._fresh = True
                self._driver = DrivenHandle(self, available_now)
                self.handle = self._driver  # type: ignore[assignment]
                if not available_now:
                    self.labelled.listen(self._told)
                self._driver.start()
            return self._driver

    def detach(self, network: Attached) -> None:
        with self._lock:
            if network in self._networks:
                self._networks.remove(network)
            driver = None if self._networks else self._driver
        if driver is not None:
            driver.stop()

    def _told(self, batch_id: int, streams: Sequence[str]) -> None:
        """Ingest committed a batch (runs in ingest's micro-batch: only wakes the scan)."""
        if self.stream.name in streams:
            self._told_of = max(self._told_of, batch_id)
            self.wake.set()

    def _markers(self) -> list[int]:
        """The committed ingest batches after the scan's position: the next ids looked at
        one by one (a file each, not a listing per poll); the markers listed when ingest
        told of one not found so, or every :data:`LIST_SECONDS`."""
        read = self._read if self._read is not None else -1
        held = self.labelled.held()  # ingest here is still in that micro-batch: told later
        ids: list[int] = []
        while read + len(ids) + 1 != held and self.labelled.committed(read + len(ids) + 1):
            ids.append(read + len(ids) + 1)
        if ids:
            return ids
        if self._told_of > read or time.monotonic() - self._listed > LIST_SECONDS:
            self._listed = time.monotonic()
            return [i for i in self.labelled.markers() if i > read and i != held]
        return []

    # -- one micro-batch ----------------------------------------------------------------------

    def _next(self) -> tuple[int, list[str], bool] | None:
        """The micro-batch to run: the one planned and not committed (a replay), else one
        over the stored files of every committed ingest batch after the scan's
        position; None: nothing new. (id, files, whether it is planned already)."""
        if self._fresh:
            pending = self.scan_log.pending()
            self._fresh = False
            if pending is not None:
                return pending[0], pending[1], True
        if self._read is None:
            position = self.scan_log.position()
            if position is None:
                raise ValueError(f"{self.checkpoint}: the scan's log is unreadable")
            self._read = position
        ids = self._markers()
        if not ids:
            return None
        files: list[str] = []
        for batch in ids:
            try:
                names = self.labelled.marker(batch).get(self.stream.name, [])
            except ValueError:  # written while we looked (it is atomic): look again later
                ids = [i for i in ids if i < batch]
                break
            folder = self.labelled.path(self.stream.name) / f"batch={batch}"
            files += [file_uri(folder / name) for name in names]
        if not ids:
            return None
        if not files:  # nothing of this stream: no micro-batch (as the file source)
            self._read = max(ids)
            return None
        planned = self.scan_log.planned()
        batch_id = planned[-1] + 1 if planned else 0
        return batch_id, files, False

    def step(self, progress: dict[str, Any]) -> bool:
        """Runs the next micro-batch, if any; whether one ran."""
        began = time.perf_counter()
        found = self._next()
        if found is None:
            return False
        batch_id, files, replay = found
        if not replay:
            self.scan_log.plan(batch_id, files)
        planned = time.perf_counter()
        existing = [f for f in files if os.path.exists(local_path(f))]  # retention may prune
        frame = self._frame(existing)
        handed = time.perf_counter()
        if frame is not None:
            bounded(self._process)(frame, batch_id)
        processed = time.perf_counter()
        self.scan_log.commit(batch_id)
        ids = [i for i in (ingest_id(f) for f in files) if i is not None]
        if ids:
            self._read = max(self._read if self._read is not None else -1, max(ids))
        done = time.perf_counter()
        ends = {
            "latestOffset": planned,
            "queryPlanning": handed,
            "addBatch": processed,
            "commitOffsets": done,
        }
        previous, self._began = self._began, began
        progress.update(progress_of(batch_id, _rows(existing), previous, began, ends))
        progress["ingestBatches"] = sorted(set(ids))
        return True

    # -- what its handle runs (engine/queries/driven_handle.py) ------------------------------------

    def query_id(self) -> str:
        return self.scan_log.query_id()

    def activate(self) -> None:
        """Makes the micro-batches' session this thread's active session in the JVM, as a
        streaming query's thread has its own. Why: PySpark calls that look the active
        session up (a reader's ``schema``, among others) otherwise fall to the builder's
        ``getOrCreate``, several Py4J round trips each (a py-spy profile of
        ``bench.landing_latency``)."""
        activate(self._stream_session())

    def finished(self) -> None:
        self.labelled.unlisten(self._told)

    def goal(self) -> int:
        """The newest ingest batch committed now."""
        markers = self.labelled.markers()
        return markers[-1] if markers else -1

    def reached(self, goal: int) -> bool:
        return not self._fresh and self._read is not None and self._read >= goal

    def interrupt(self, run_id: str) -> None:
        """Nothing to interrupt: the networks' jobs run under their own job groups, and a
        micro-batch hands its whole batch over (the stop waits for it)."""

    def _stream_session(self) -> SparkSession:
        """The session a micro-batch's rows belong to, as a streaming query's do: a clone
        of the scan's session (its confs, its temp views) with adaptive execution off,
        which a streaming query turns off for its micro-batches. Every plan the networks
        build over the rows runs there, so they run as under the streaming scan (measured
        alone it changed no latency, ``bench.landing_latency``)."""
        if self._session is None:
            self._session = stream_session(self.spark)
        return self._session

    def _frame(self, files: list[str]) -> DataFrame | None:
        """The micro-batch's rows as the streaming read gave them (None: no file left)."""
        if not files:
            return None
        struct = labelled_schema(
            self.spark,
            self.stream.ddl,
            len(self.stream.names),
            self.width,
            self.levels,
            summaries=True,  # whichever network needs them: the others drop them
        )
        rows = read_batches(self._stream_session(), struct, files)
        return rows if self.feed is None else self.feed(rows)


def _rows(files: list[str]) -> int:
    """Rows of the micro-batch from the files' footers (progress only)."""
    total = 0
    for uri in files:
        try:
            total += pq.read_metadata(local_path(uri)).num_rows
        except (OSError, ValueError):
            continue
    return total
