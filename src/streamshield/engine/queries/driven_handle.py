"""What a streaming query's handle offers, for a query whose micro-batches the project
runs itself (a driven scan, driven ingest).

Why. The server, its watch, ``/metrics``, the operations page, the backlog and the
benches read a query through its handle: ``isActive``, ``exception()``,
``lastProgress``, ``recentProgress``, ``status``, ``stop()``, ``awaitTermination()``,
``processAllAvailable()``. A driven query runs its micro-batches in a thread of its own,
woken when told of new input (and polled as a backstop); this handle runs that thread
and answers for it as Spark's ``StreamingQuery`` answers, so every reader works on either
kind unchanged.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from datetime import UTC, datetime
from typing import Any, Protocol

from pyspark.sql import SparkSession
from pyspark.util import inheritable_thread_target

from streamshield.engine.spark_errors.batch_errors import BatchInterrupted

log = logging.getLogger("streamshield.engine")

STOP_SECONDS = 60.0
"""How long stopping waits for a micro-batch under way (it hands its whole batch over)."""
PROGRESS_KEPT = 100


class Driven(Protocol):
    """A query whose micro-batches a :class:`DrivenHandle` runs."""

    name: str
    wake: threading.Event
    """Set when there may be new input: the loop runs a step at once."""
    poll_seconds: float
    """How long the loop waits for ``wake`` before looking anyway."""
    spark: Any

    def query_id(self) -> str:
        """The checkpoint's query id (stable across runs, as Spark's ``id``)."""

    def activate(self) -> None:
        """In the query's thread, before its first step."""

    def step(self, progress: dict[str, Any]) -> bool:
        """Runs the next micro-batch, if any, filling its progress report; whether one ran."""

    def finished(self) -> None:
        """In the query's thread, when it ends for any reason."""

    def goal(self) -> Any:
        """What ``processAllAvailable`` waits for, taken when it is called."""

    def reached(self, goal: Any) -> bool:
        """Whether every micro-batch the goal needs has run (none is under way)."""

    def interrupt(self, run_id: str) -> None:
        """Stopping: ends a micro-batch under way early (its Spark jobs cancelled); the
        micro-batch is replayed at the next start, as Spark replays one."""


class DrivenHandle:
    """A driven query's thread and its streaming query's handle (see the module)."""

    def __init__(self, query: Driven, available_now: bool, stop_grace: float = STOP_SECONDS):
        """``stop_grace``: how long ``stop`` lets a micro-batch under way finish before
        it interrupts it."""
        self.query, self.available_now, self.stop_grace = query, available_now, stop_grace
        self.id = query.query_id()
        self.runId = str(uuid.uuid4())
        self.name = query.name
        self.recentProgress_: deque[dict[str, Any]] = deque(maxlen=PROGRESS_KEPT)
        self._stopping = threading.Event()
        self._ended = threading.Event()
        self._idle = threading.Condition()
        self._busy = False
        self._failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        # the thread takes this thread's Spark properties (the level's scheduler pool)
        target = inheritable_thread_target(self.query.spark)(self._run)
        self._thread = threading.Thread(target=target, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.query.activate()
            while not self._stopping.is_set():
                ran = self._one()
                if ran:
                    continue
                if self.available_now:
                    break
                self.query.wake.wait(self.query.poll_seconds)
                self.query.wake.clear()
        except BaseException as err:
            if self._stopping.is_set() and isinstance(err, Exception):
                # a stop interrupted the micro-batch: it is replayed at the next start
                log.warning("%s stopped during a micro-batch (%s)", self.name, type(err).__name__)
            else:
                self._failure = err
                # an interruption (the JVM gone, a stop) is logged where it happened
                report = log.warning if isinstance(err, BatchInterrupted) else log.error
                report("%s stopped: %s", self.name, type(err).__name__)
        finally:
            self.query.finished()
            self._ended.set()
            with self._idle:
                self._idle.notify_all()

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
            ran = self.query.step(progress)
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
        """Stops after the micro-batch under way, or interrupts it after ``stop_grace``
        seconds (it is replayed at the next start), then waits (bounded) for the end."""
        self._stopping.set()
        self.query.wake.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(self.stop_grace)
        if thread.is_alive():
            self.query.interrupt(self.runId)
            thread.join(STOP_SECONDS)

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        ended = self._ended.wait(timeout)
        if self._failure is not None:
            raise self._failure
        return ended if timeout is not None else None

    def processAllAvailable(self) -> None:
        """Returns once every input there when called has been handed out (or the query
        stopped; its failure is raised)."""
        goal = self.query.goal()
        self.query.wake.set()
        with self._idle:
            while not self._ended.is_set() and (self._busy or not self.query.reached(goal)):
                self.query.wake.set()
                self._idle.wait(0.05)
        if self._failure is not None:
            raise self._failure


def activate(session: Any) -> None:
    """Makes ``session`` the calling thread's active session in the JVM."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)


def stream_session(spark: SparkSession) -> SparkSession:
    """A session for a driven query's micro-batches, as Spark makes one for a streaming
    query: a clone of ``spark`` (its confs, its temp views) with adaptive execution off,
    which a streaming query turns off for its micro-batches."""
    clone = spark._jsparkSession.cloneSession()
    session = SparkSession(spark.sparkContext, jsparkSession=clone)
    session.conf.set("spark.sql.adaptive.enabled", "false")
    return session


def progress_of(
    batch_id: int, rows: int, previous: float | None, began: float, ends: dict[str, float]
) -> dict[str, Any]:
    """A micro-batch's progress as a streaming query reports it: its input rates since
    the previous micro-batch began (``previous``) and over its own time (the API,
    /metrics and the console show both), and ``durationMs`` per stage from ``ends``
    (each stage's end, in order, the first stage starting at ``began``)."""
    durations, start = {}, began
    for stage, end in ends.items():
        durations[stage] = round((end - start) * 1000)
        start = end
    durations["triggerExecution"] = round((start - began) * 1000)
    return {
        "batchId": batch_id,
        "numInputRows": rows,
        "inputRowsPerSecond": _rate(rows, began - previous) if previous is not None else 0.0,
        "processedRowsPerSecond": _rate(rows, start - began),
        "durationMs": durations,
    }


def _rate(rows: int, seconds: float) -> float:
    return rows / seconds if seconds > 0 else 0.0
