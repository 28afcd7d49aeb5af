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

An element count alone does not bound latency: how long a backlog takes to drain
depends on how fast ingest reads, which changes with the machine's load and the queries
behind it. So an append is also refused while the backlog exceeds the latency budget
(``budget`` seconds, the ``ingest_latency_budget_seconds`` setting) by either of two
signals (:func:`refusal`, pure):

* measured: the oldest element landed through the API and not yet read has waited
  longer than the budget (the landings are kept in order, per append, and ingest's rows
  consume them from the oldest: ingest reads in landing order);
* predicted: the backlog divided by ingest's recent throughput exceeds the budget. The
  throughput is the best rows/s of ingest's recent batches that read at least
  :data:`MIN_RATE_ROWS` rows: a small batch's rate is mostly its fixed cost and would
  predict a long drain where there is none, and the best rate errs towards admitting
  (the measured signal still catches an estimate that was too hopeful).

A backlog of zero admits any append, so a provider is never locked out by an estimate.

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
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from streamshield.server import error_codes as codes
from streamshield.server.errors import ApiError
from streamshield.server.settings import DEFAULT_BACKLOG as DEFAULT_LIMIT

RETRY_BOUNDS = (1, 60)
"""Retry-After is the expected drain time, at least 1 s and at most a minute."""
UNKNOWN_DRAIN = 5.0
"""The Retry-After (s) when ingest's throughput is not known yet."""
MIN_RATE_ROWS = 1000
"""Rows an ingest batch must read for its rate to predict a drain time."""
RATES_KEPT = 20
"""Recent qualifying batch rates of which the best predicts the drain."""
LANDINGS_KEPT = 10_000
"""Appends remembered one by one for the oldest's age; beyond it the newest entry is
merged into (its time the newer: the age errs towards admitting)."""


def refusal(
    pending: int,
    oldest_age: float | None,
    rate: float,
    capacity: float,
    limit: int | None,
    budget: float | None,
) -> float | None:
    """Seconds a provider should wait before it sends again, or None: admitted now.

    ``pending``: elements landed and not read; ``oldest_age``: seconds the oldest of them
    has waited (None: not known); ``rate``: ingest's recent rows/s (moving average, for
    the element bound's drain time); ``capacity``: its best recent rows/s on batches big
    enough to tell (0: not known); ``limit``/``budget``: the element bound and the latency
    budget in seconds (None or 0: no such bound). Refused when over the element bound,
    or when the oldest element's wait or the predicted drain exceeds the budget.
    """
    if pending <= 0:
        return None
    waits: list[float] = []
    if limit and pending > limit:
        waits.append((pending - limit) / rate if rate > 0 else UNKNOWN_DRAIN)
    if budget:
        drain = pending / capacity if capacity > 0 else None
        if drain is not None and drain > budget:
            waits.append(drain - budget)
        if oldest_age is not None and oldest_age > budget:
            waits.append(drain if drain is not None else UNKNOWN_DRAIN)
    return max(waits) if waits else None


class IngestBacklogged(ApiError):
    """503: the ingest backlog is over its bound; nothing of the append landed."""

    status, code = 503, codes.INGEST_BACKLOG

    def __init__(self, pending: int, limit: int | None, retry_after: int) -> None:
        bound = f"bound {limit}, " if limit else ""
        super().__init__(
            f"secure ingest is behind: {pending} landed elements wait to be labelled "
            f"({bound}or longer than the latency budget); nothing was accepted, send the "
            "same lines again after the Retry-After seconds"
        )
        self.retry_after = retry_after


class IngestBacklog:
    """Elements landed and not yet read by secure ingest, and the admission rule on them.

    ``limit``: appends are refused while more than that many wait; ``budget``: while
    the backlog exceeds that many seconds (None or 0: no such bound; ``streamshield
    serve`` sets its ``ingest_latency_budget_seconds``, default
    :data:`~streamshield.server.settings.DEFAULT_LATENCY_BUDGET`). Thread-safe:
    appends run in the API's worker threads, :meth:`read` in the watch loop.
    """

    def __init__(
        self,
        limit: int | None = DEFAULT_LIMIT,
        clock: Callable[[], float] = time.monotonic,
        budget: float | None = None,
    ) -> None:
        self.limit = limit
        self.budget = budget
        self.clock = clock
        self._pending = 0
        self._landings: deque[list[float]] = deque()  # [landed at, elements not read]
        self._seen = ""  # timestamp of the newest ingest progress counted
        self._rate = 0.0  # rows/s secure ingest read recently (moving average)
        self._rates: deque[float] = deque(maxlen=RATES_KEPT)  # of batches >= MIN_RATE_ROWS
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    def oldest_age(self) -> float | None:
        """Seconds the oldest element landed through the API and not yet read has waited."""
        with self._lock:
            return self.clock() - self._landings[0][0] if self._landings else None

    def admit(self) -> None:
        """IngestBacklogged when over a bound (an append may then not land at all)."""
        with self._lock:
            pending, rate = self._pending, self._rate
            age = self.clock() - self._landings[0][0] if self._landings else None
            capacity = max(self._rates, default=0.0)
        wait = refusal(pending, age, rate, capacity, self.limit, self.budget)
        if wait is not None:
            raise IngestBacklogged(pending, self.limit, _bounded(wait))

    def landed(self, count: int) -> None:
        """``count`` elements were landed through the API."""
        if count > 0:
            with self._lock:
                self._pending += count
                if len(self._landings) < LANDINGS_KEPT:
                    self._landings.append([self.clock(), float(count)])
                else:
                    newest = self._landings[-1]
                    newest[0], newest[1] = self.clock(), newest[1] + count

    def _consume(self, rows: int) -> None:
        """The oldest landings' elements were read (lock held)."""
        while rows > 0 and self._landings:
            oldest = self._landings[0]
            taken = min(rows, oldest[1])
            oldest[1] -= taken
            rows -= int(taken)
            if oldest[1] <= 0:
                self._landings.popleft()
        if self._pending == 0:
            self._landings.clear()

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
                self._consume(rows)
                rate = float(report.get("processedRowsPerSecond") or 0.0)
                if rows and rate > 0:
                    self._rate = rate if self._rate == 0 else 0.7 * self._rate + 0.3 * rate
                    if rows >= MIN_RATE_ROWS:
                        self._rates.append(rate)

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
