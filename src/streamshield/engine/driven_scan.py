"""A stream's scan driven by ingest's commits instead of a file-source streaming query
(issue 13, item 4: a landing's latency).

Why. A landing reached a subscriber through two streaming queries in series: ingest's,
then the stream's scan (engine/stream_scan.py), a file source over the labelled store.
The scan's micro-batch waited for its trigger, listed the stream's directory, wrote its
file-source log and offsets, planned the streaming read and committed (measured ~0.15-0.2
s a batch besides the networks' own work, docs/results.md, session 18), although ingest
had just said which files it stored: its commit marker lists them
(engine/labelled_store.py). A :class:`DrivenScan` is told each committed ingest batch
(``LabelledStore.listen``; a short poll of the markers as a backstop, for ingest in
another process or a missed call), and runs one micro-batch over exactly the stored
files of the ingest batches it has not read, at once, handing it to the attached networks
as the streaming query did (:meth:`StreamScan._process`, so joining, positions, branch
ledgers, owed batches and switches are the same code). Ingest in this process tells it
when ingest's micro-batch returns, not at its marker, and the poll leaves the batch that
micro-batch holds (``LabelledStore.hold``): started at the marker, the scan's micro-batch
ran beside the rest of ingest's on the same two cores (docs/results.md, session 20). Only
batches whose markers exist are ever read, as before.

Its micro-batches keep the file source's durable bookkeeping, in the file source's own
format and in the same checkpoint (:class:`ScanLog`), so everything that reads a
scan's checkpoint reads this one unchanged: the networks' ingest ids of a micro-batch
and the scan's position (:class:`~streamshield.engine.source_log.SourceLog`), retention's
rule that a labelled batch stays until every reader has committed past it
(engine/retention.py), and a scan that switches between the two ways of running resumes
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

import json
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.util import inheritable_thread_target

from streamshield.durable import write_atomic
from streamshield.engine.batch_errors import bounded
from streamshield.engine.checkpoint_leftovers import sweep
from streamshield.engine.labelled_store import labelled_schema, read_batches
from streamshield.engine.source_log import SourceLog, ingest_id
from streamshield.engine.stream_scan import Attached, StreamScan

log = logging.getLogger("streamshield.engine")

POLL_SECONDS = 0.1
"""How often the scan looks at the markers without being told (ingest in another
process, a level's application): the file source's trigger was as short."""
STOP_SECONDS = 60.0
"""How long stopping waits for a micro-batch under way (it hands its whole batch over)."""
COMPACT_INTERVAL = 10
"""Spark's file-source log compacts every tenth offset (``compactInterval``)."""
PROGRESS_KEPT = 100
RETAINED = 100
"""Micro-batches whose offsets and commits the log keeps (Spark's
``minBatchesToRetain``); older ones, and file-source log files a newer compact file
holds, are deleted as Spark deletes them."""
LIST_SECONDS = 10.0
"""How often the markers are listed in full, besides looking for the next ids one by one
(a gap in ingest's ids, which a listing finds)."""


class ScanLog(SourceLog):
    """A file-source checkpoint written the way Spark writes it (one source)."""

    def __init__(self, checkpoint: str | Path) -> None:
        super().__init__(checkpoint)
        self.sources = self.checkpoint / "sources" / "0"

    def prepare(self) -> None:
        """Creates the checkpoint's folders and its ``metadata`` (a query id) if missing."""
        for folder in (self.checkpoint / "offsets", self.checkpoint / "commits", self.sources):
            folder.mkdir(parents=True, exist_ok=True)
        metadata = self.checkpoint / "metadata"
        if not metadata.exists():
            write_atomic(metadata, json.dumps({"id": str(uuid.uuid4())}))
        sweep(self.checkpoint)

    def query_id(self) -> str:
        try:
            return str(json.loads((self.checkpoint / "metadata").read_text())["id"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""

    def planned(self) -> list[int]:
        return _numbered(self.checkpoint / "offsets")

    def committed_batches(self) -> list[int]:
        return _numbered(self.checkpoint / "commits")

    def pending(self) -> tuple[int, list[str]] | None:
        """The newest micro-batch planned and not committed, with the files it reads
        (None: none; ValueError: its log is unreadable)."""
        planned = self.planned()
        if not planned or planned[-1] in set(self.committed_batches()):
            return None
        batch = planned[-1]
        files = self.files(batch)
        if files is None:
            raise ValueError(
                f"{self.checkpoint}: micro-batch {batch} is planned, its files unreadable"
            )
        return batch, files

    def plan(self, batch_id: int, files: Sequence[str]) -> None:
        """Logs ``files`` at the next source offset, then micro-batch ``batch_id`` at it."""
        previous = self._log_offset(batch_id - 1) if batch_id > 0 else -1
        if previous is None:  # no earlier micro-batch in the log: after every offset there
            previous = max(self._offsets(), default=-1)
        offset = previous + 1
        now = int(time.time() * 1000)
        entries = [{"path": path, "timestamp": now, "batchId": offset} for path in files]
        lines = [json.dumps(e, separators=(",", ":")) for e in entries]
        if (offset + 1) % COMPACT_INTERVAL == 0:
            self._write_lines(self.sources / f"{offset}.compact", self._before(offset) + lines)
        else:
            self._write_lines(self.sources / str(offset), lines)
        metadata = {"batchWatermarkMs": 0, "batchTimestampMs": now, "conf": self._conf()}
        tight = (",", ":")
        head = [
            json.dumps(metadata, separators=tight),
            json.dumps({"logOffset": offset}, separators=tight),
        ]
        text = "\n".join(["v1", *head])
        write_atomic(self.checkpoint / "offsets" / str(batch_id), text)

    def commit(self, batch_id: int) -> None:
        write_atomic(self.checkpoint / "commits" / str(batch_id), 'v1\n{"nextBatchWatermarkMs":0}')
        if batch_id % COMPACT_INTERVAL == 0:
            self.clean(batch_id)

    def clean(self, batch_id: int) -> None:
        """Deletes offsets and commits older than the :data:`RETAINED` newest, and the
        file-source log files a compact file at least as old as the oldest offset kept
        holds (a reader of a kept micro-batch finds its files in that compact file)."""
        oldest = batch_id - RETAINED
        if oldest <= 0:
            return
        for folder in ("offsets", "commits"):
            for old in _numbered(self.checkpoint / folder):
                if old < oldest:
                    (self.checkpoint / folder / str(old)).unlink(missing_ok=True)
        kept = self._log_offset(oldest)
        if kept is None:
            return
        compacts = [o for o in self._offsets() if (self.sources / f"{o}.compact").is_file()]
        holder = max((c for c in compacts if c < kept), default=None)
        if holder is None:
            return
        for offset in self._offsets():
            if offset < holder:
                (self.sources / str(offset)).unlink(missing_ok=True)
                (self.sources / f"{offset}.compact").unlink(missing_ok=True)

    def _conf(self) -> dict[str, Any]:
        """The newest offsets' SQL confs (Spark's, when it ran the scan before), so that
        a file-source query resuming from this log reads the confs it wrote."""
        planned = self.planned()
        if not planned:
            return {}
        try:
            lines = (self.checkpoint / "offsets" / str(planned[-1])).read_text().splitlines()
            conf = json.loads(lines[1]).get("conf", {})
        except (OSError, ValueError, IndexError, AttributeError):
            return {}
        return conf if isinstance(conf, dict) else {}

    def _offsets(self) -> list[int]:
        if not self.sources.is_dir():
            return []
        return sorted(
            int(p.name.split(".")[0])
            for p in self.sources.iterdir()
            if p.name.split(".")[0].isdigit()
        )

    def _before(self, offset: int) -> list[str]:
        """Every entry logged before ``offset`` (a compact file holds them all): the
        previous compact file's lines and the plain files after it, as Spark compacts."""
        previous = offset - COMPACT_INTERVAL
        first, lines = 0, []
        if previous >= 0 and (self.sources / f"{previous}.compact").is_file():
            lines = _lines(self.sources / f"{previous}.compact")
            first = previous + 1
        for at in range(first, offset):
            plain = self.sources / str(at)
            if not plain.is_file():
                raise ValueError(f"{self.checkpoint}: file-source log offset {at} is missing")
            lines += _lines(plain)
        return lines

    @staticmethod
    def _write_lines(path: Path, lines: list[str]) -> None:
        write_atomic(path, "\n".join(["v1", *lines]))


def _lines(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    if not lines or lines[0] != "v1":
        raise ValueError(f"{path}: not a file-source log")
    return [line for line in lines[1:] if line.strip()]


def _numbered(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


class DrivenScan(StreamScan):
    """A stream's scan whose micro-batches ingest's commits start (see the module)."""

    def __init__(self, *args: Any, poll_seconds: float = POLL_SECONDS, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.poll_seconds = poll_seconds
        self.scan_log = ScanLog(self.checkpoint)
        self.log = self.scan_log
        self._wake = threading.Event()
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
            self._wake.set()

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
            files += [_uri(folder / name) for name in names]
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
        existing = [f for f in files if os.path.exists(_local(f))]  # retention may prune
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
        rows, previous = _rows(existing), self._began
        self._began = began
        progress.update(
            batchId=batch_id,
            numInputRows=rows,
            # as a streaming query reports them: since the previous trigger, and over
            # this one's own time (the API, /metrics and the console show both)
            inputRowsPerSecond=_rate(rows, began - previous) if previous is not None else 0.0,
            processedRowsPerSecond=_rate(rows, done - began),
            ingestBatches=sorted(set(ids)),
            durationMs={
                "latestOffset": round((planned - began) * 1000),
                "queryPlanning": round((handed - planned) * 1000),
                "addBatch": round((processed - handed) * 1000),
                "commitOffsets": round((done - processed) * 1000),
                "triggerExecution": round((done - began) * 1000),
            },
        )
        return True

    def _stream_session(self) -> SparkSession:
        """The session a micro-batch's rows belong to, as a streaming query's do: a clone
        of the scan's session (its confs, its temp views) with adaptive execution off,
        which a streaming query turns off for its micro-batches. Every plan the networks
        build over the rows runs there, so they run as under the streaming scan (measured
        alone it changed no latency: docs/results.md, session 19, pair 6)."""
        if self._session is None:
            clone = self.spark._jsparkSession.cloneSession()
            self._session = SparkSession(self.spark.sparkContext, jsparkSession=clone)
            self._session.conf.set("spark.sql.adaptive.enabled", "false")
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


class DrivenHandle:
    """What a streaming query's handle offers, for a driven scan (its thread)."""

    def __init__(self, scan: DrivenScan, available_now: bool) -> None:
        self.scan, self.available_now = scan, available_now
        self.id = scan.scan_log.query_id()
        self.runId = str(uuid.uuid4())
        self.name = scan.name
        self.recentProgress_: deque[dict[str, Any]] = deque(maxlen=PROGRESS_KEPT)
        self._stopping = threading.Event()
        self._ended = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        # the thread takes this thread's Spark properties (the level's scheduler pool)
        target = inheritable_thread_target(self.scan.spark)(self._run)
        self._thread = threading.Thread(target=target, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._activate()
            while not self._stopping.is_set():
                ran = self._one()
                if ran:
                    continue
                if self.available_now:
                    break
                self.scan._wake.wait(self.scan.poll_seconds)
                self.scan._wake.clear()
        except BaseException as err:
            self._failure = err
            log.error("scan %s stopped: %s", self.name, type(err).__name__)
        finally:
            self.scan.labelled.unlisten(self.scan._told)
            self._ended.set()
            with self._idle:
                self._idle.notify_all()

    def _activate(self) -> None:
        """Makes the micro-batches' session this thread's active session in the JVM, as a
        streaming query's thread has its own. Why: PySpark calls that look the active
        session up (a reader's ``schema``, among others) otherwise fall to the builder's
        ``getOrCreate``, several Py4J round trips each (py-spy, docs/results.md, session
        20)."""
        session = self.scan._stream_session()
        jvm = session.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)

    def _one(self) -> bool:
        with self._idle:
            self._busy = True
        try:
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            progress: dict[str, Any] = {
                "id": self.id,
                "runId": self.runId,
                "name": self.name,
                "timestamp": stamp,
            }
            ran = self.scan.step(progress)
            if ran:
                self.recentProgress_.append(progress)
            return ran
        finally:
            with self._idle:
                self._busy = False
                self._idle.notify_all()

    # -- a streaming query's handle -----------------------------------------------------------

    @property
    def isActive(self) -> bool:
        return self._thread is not None and not self._ended.is_set()

    def exception(self) -> BaseException | None:
        return self._failure

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        return self.recentProgress_[-1] if self.recentProgress_ else None

    @property
    def recentProgress(self) -> list[dict[str, Any]]:
        return list(self.recentProgress_)

    @property
    def status(self) -> dict[str, Any]:
        return {
            "message": "Processing new data" if self._busy else "Waiting for data to arrive",
            "isDataAvailable": self._busy,
            "isTriggerActive": self._busy,
        }

    def stop(self) -> None:
        """Stops after the micro-batch under way (bounded wait), as the file source's stop
        ends its query."""
        self._stopping.set()
        self.scan._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_SECONDS)

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        ended = self._ended.wait(timeout)
        if self._failure is not None:
            raise self._failure
        return ended if timeout is not None else None

    def processAllAvailable(self) -> None:
        """Returns once every ingest batch committed when called has been handed out (or
        the scan stopped; its failure is raised)."""
        markers = self.scan.labelled.markers()
        newest = markers[-1] if markers else -1
        self.scan._wake.set()
        with self._idle:
            while not self._ended.is_set() and (
                self._busy
                or (self.scan._read is None or self.scan._read < newest)
                or self.scan._fresh
            ):
                self.scan._wake.set()
                self._idle.wait(0.05)
        if self._failure is not None:
            raise self._failure


def _uri(path: Path) -> str:
    """A file's URI as Spark's file source logs it (``batch=1`` unescaped)."""
    return "file://" + quote(str(path.absolute()), safe="/=:@!$&'()*+,;-._~")


def _local(uri: str) -> str:
    return unquote(uri[len("file://") :]) if uri.startswith("file://") else uri


def _rate(rows: int, seconds: float) -> float:
    return rows / seconds if seconds > 0 else 0.0


def _rows(files: list[str]) -> int:
    """Rows of the micro-batch from the files' footers (progress only)."""
    total = 0
    for uri in files:
        try:
            total += pq.read_metadata(_local(uri)).num_rows
        except (OSError, ValueError):
            continue
    return total
