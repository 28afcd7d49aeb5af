"""Admission control for appends: a bound on what has landed and is not yet ingested.

When providers send faster than secure ingest labels, everything behind the landing
zone grows with the difference: each ingest micro-batch takes *all* the files since the
previous one, so batches, the JVM's heap and the queries' batches after them grow
with the backlog, and so does every tuple's latency (the 10-minute soak at load 20-49:
latency p50 of minutes, the JVM's RSS climbing to its heap limit; docs/reliability.md).
A service must bound what it holds when input outruns it, and say so: while more than
``limit`` landed elements wait for ingest, an append is answered at once with 503
``ingest_backlog`` and a ``Retry-After`` of the expected drain time, and nothing of it
lands (a provider re-sends the same lines later: its seqs were not used up).

The backlog is counted, not listed: elements landed through the API (:meth:`landed`)
minus the rows secure ingest read (:meth:`read`, from the ingest query's progress
reports, which Spark keeps anyway: no extra pass over the data), never below zero.
Every miscount errs on the side of admitting: rows landed by other paths (the hospital
example, INSERT SP) and a batch read twice after a failure only lower it, and a backlog
left by a previous run is forgotten (it drains first: ingest reads in landing order).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from streamshield.server.errors import ApiError
from streamshield.server.settings import DEFAULT_BACKLOG as DEFAULT_LIMIT

RETRY_BOUNDS = (1, 60)
"""Retry-After is the expected drain time, at least 1 s and at most a minute."""


class IngestBacklogged(ApiError):
    """503: the ingest backlog is over its bound; nothing of the append landed."""

    status, code = 503, "ingest_backlog"

    def __init__(self, pending: int, limit: int, retry_after: int) -> None:
        super().__init__(
            f"secure ingest is behind: {pending} landed elements wait to be labelled "
            f"(bound {limit}); nothing was accepted, send the same lines again after the "
            "Retry-After seconds"
        )
        self.retry_after = retry_after


class IngestBacklog:
    """Elements landed and not yet read by secure ingest, and the admission rule on them.

    ``limit``: appends are refused while more than that many wait (None or 0: no bound).
    Thread-safe: appends run in the API's worker threads, :meth:`read` in the watch loop.
    """

    def __init__(
        self, limit: int | None = DEFAULT_LIMIT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self._clock = clock
        self._pending = 0
        self._seen = ""  # timestamp of the newest ingest progress counted
        self._rate = 0.0  # rows/s secure ingest read recently (moving average)
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def admit(self) -> None:
        """IngestBacklogged when over the bound (an append may then not land at all)."""
        with self._lock:
            if not self.limit or self._pending <= self.limit:
                return
            pending, rate = self._pending, self._rate
        retry = (pending - self.limit) / rate if rate > 0 else 5.0
        raise IngestBacklogged(pending, self.limit, _bounded(retry))

    def landed(self, count: int) -> None:
        """``count`` elements were landed through the API."""
        if count > 0:
            with self._lock:
                self._pending += count

    def read(self, progress: Iterable[dict[str, Any]]) -> None:
        """Counts the rows of the ingest batches in ``progress`` (Spark's progress
        reports, oldest first) not counted before: each report is counted once, by its
        timestamp (batch ids repeat: an idle trigger reports the next batch's id)."""
        with self._lock:
            for report in progress:
                stamp = str(report.get("timestamp") or "")
                if not stamp or stamp <= self._seen:
                    continue
                self._seen = stamp
                rows = int(report.get("numInputRows") or 0)
                self._pending = max(0, self._pending - rows)
                rate = float(report.get("processedRowsPerSecond") or 0.0)
                if rows and rate > 0:
                    self._rate = rate if self._rate == 0 else 0.7 * self._rate + 0.3 * rate

    def read_query(self, query: Any) -> None:
        """:meth:`read` of a StreamingQuery's recent progress (None: nothing to read).
        The query keeps its last 100 reports; the watch loop reads them every second."""
        if query is None:
            return
        try:
            last = query.lastProgress  # one report: the 100 only when there is news
            with self._lock:
                if not last or str(last.get("timestamp") or "") <= self._seen:
                    return
            reports = query.recentProgress  # dicts (StreamingQueryProgress is one)
        except Exception:  # a query that just died: its successor is read next time
            return
        self.read(reports)

    def state(self) -> dict[str, Any]:
        """For /metrics and the operations page: the backlog, its bound, the read rate."""
        with self._lock:
            return {"pending": self._pending, "limit": self.limit, "rate": round(self._rate, 1)}


def _bounded(seconds: float) -> int:
    low, high = RETRY_BOUNDS
    return int(min(high, max(low, math.ceil(seconds))))
