"""The server's Prometheus metrics, in a registry of its own (several servers per process
in tests, and nothing from the process-global registry leaks in).

Two kinds of figures:

* counted as things happen, cheaply: elements accepted and rejected per stream at the
  API (from the append report), tuples accepted and denied by secure ingest (observed
  while each batch is written, no extra pass over the data) and the delivery lag of
  every hand-over to a subscriber;
* read when scraped, from what Spark already keeps: each query's status and last
  progress (``StreamingQuery.lastProgress``), subscribers per query, the ingest job's
  progress.

Labels carry stream and query names, never data values; ``/metrics`` is for
administrators and a configured scrape token only (:mod:`.routes.operations`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal, TypedDict

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

STATUSES = ("running", "stopped", "failed")
COUNTS = ("elements_accepted", "elements_rejected", "tuples_accepted", "tuples_denied")
RATE_WINDOW = 60.0  # seconds over which ingest rows/s per stream is averaged
LAG_WINDOW = 10.0  # seconds over which a query's recent delivery lag is its largest
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class RateWindow:
    """Rows per second per key over the last ``window`` seconds (a few entries per
    append request, trimmed as it goes)."""

    def __init__(self, window: float = RATE_WINDOW, clock: Callable[[], float] = time.monotonic):
        self.window, self._clock = window, clock
        self._events: dict[str, deque[tuple[float, float]]] = {}
        self._lock = threading.Lock()

    def add(self, key: str, count: float) -> None:
        now = self._clock()
        with self._lock:
            events = self._events.setdefault(key, deque())
            events.append((now, count))
            self._trim(events, now)

    def rates(self) -> dict[str, float]:
        return {key: sum(n for _, n in events) / self.window for key, events in self._kept()}

    def peaks(self) -> dict[str, float]:
        """The largest value added per key within the window (keys with none left out)."""
        return {key: max(n for _, n in events) for key, events in self._kept() if events}

    def _kept(self) -> list[tuple[str, list[tuple[float, float]]]]:
        """Every key's events still within the window (a copy, taken under the lock)."""
        now = self._clock()
        with self._lock:
            for events in self._events.values():
                self._trim(events, now)
            return [(key, list(events)) for key, events in self._events.items()]

    def _trim(self, events: deque[tuple[float, float]], now: float) -> None:
        while events and events[0][0] < now - self.window:
            events.popleft()


class StreamCounts(TypedDict):
    """One stream's counters (:data:`COUNTS`) and its accepted rows/s."""

    elements_accepted: int
    elements_rejected: int
    tuples_accepted: int
    tuples_denied: int
    rows_per_second: float


class ServerMetrics:
    """One server's registry: counters fed by the service, a collector for live state."""

    def __init__(
        self,
        queries: Callable[[], Iterable[Any]],
        ingest: Callable[[], Any],
        backlog: Callable[[], dict[str, Any]] | None = None,
        jvm: Callable[[], Any] | None = None,
        retention: Callable[[], Any] | None = None,
    ) -> None:
        """``queries``: the live queries (:class:`~streamshield.server.queries.LiveQuery`);
        ``ingest``: the ingest job's StreamingQuery or None; ``backlog``: the ingest
        backlog's state (:class:`~streamshield.server.ingest_backlog.IngestBacklog`);
        ``jvm``: the py4j JVM view whose heap is reported; ``retention``: the storage
        root's :class:`~streamshield.engine.store.retention.Pruner` (its last report)."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.elements = Counter(
            "streamshield_ingest_elements",
            "Stream elements appended through the API, by stream and outcome "
            "(accepted: landed; rejected: refused by the gate or the landing zone).",
            ["stream", "outcome"],
            registry=self.registry,
        )
        self.shield = Counter(
            "streamshield_shield_tuples",
            "Tuples labelled by secure ingest, by stream and decision (accepted: under a "
            "complete policy; denied: no policy covers them, nobody may read them).",
            ["stream", "decision"],
            registry=self.registry,
        )
        self.delivery_lag = Histogram(
            "streamshield_delivery_lag_seconds",
            "Time from a micro-batch reaching delivery to its rows being handed to a subscriber.",
            ["query"],
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.rates = RateWindow()
        self.lags = RateWindow(LAG_WINDOW)
        self._totals: dict[tuple[str, str], int] = {}  # (stream, counter) -> count
        self._lock = threading.Lock()
        self.registry.register(_LiveState(queries, ingest, self.rates, self.lags))
        self.registry.register(_Resources(backlog, jvm))
        if retention is not None:
            self.registry.register(_Retention(retention))

    def follow_connectors(self, lags: Callable[[], dict[tuple[str, int], int]]) -> None:
        """``lags()``: records not yet landed per (binding, partition) of the Kafka
        sources, shown as ``streamshield_kafka_lag_records``."""
        self.registry.register(_ConnectorLag(lags))

    def appended(self, stream: str, accepted: int, rejected: int) -> None:
        if accepted:
            self.elements.labels(stream, "accepted").inc(accepted)
            self.rates.add(stream, accepted)
        if rejected:
            self.elements.labels(stream, "rejected").inc(rejected)
        self._count(stream, elements_accepted=accepted, elements_rejected=rejected)

    def labelled(self, stream: str, accepted: int, denied: int) -> None:
        self.shield.labels(stream, "accepted").inc(accepted)
        self.shield.labels(stream, "denied").inc(denied)
        self._count(stream, tuples_accepted=accepted, tuples_denied=denied)

    def handed_over(self, query: str, seconds: float) -> None:
        self.delivery_lag.labels(query).observe(max(0.0, seconds))
        self.lags.add(query, max(0.0, seconds))

    def stream_counts(self, stream: str) -> StreamCounts:
        """What the JSON routes show of one stream: the counters since the server
        started (the same increments as ``/metrics``) and the accepted rows/s."""
        with self._lock:
            total = {k: self._totals.get((stream, k), 0) for k in COUNTS}
        return StreamCounts(
            elements_accepted=total["elements_accepted"],
            elements_rejected=total["elements_rejected"],
            tuples_accepted=total["tuples_accepted"],
            tuples_denied=total["tuples_denied"],
            rows_per_second=self.rates.rates().get(stream, 0.0),
        )

    def recent_lag(self, query: str) -> float | None:
        """The largest delivery lag of ``query`` in the last LAG_WINDOW seconds (None:
        no hand-over)."""
        return self.lags.peaks().get(query)

    def _count(self, stream: str, **increments: int) -> None:
        with self._lock:
            for key, value in increments.items():
                self._totals[(stream, key)] = self._totals.get((stream, key), 0) + value

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def status_of(query: Any) -> Literal["running", "stopped", "failed"]:
    """``running``, ``stopped`` or ``failed`` for a live query (the lead's ``status``
    attributes when present, else from its handle)."""
    handle = getattr(query, "handle", None)
    if getattr(query, "error_class", None):
        return "failed"
    if handle is None:
        return "stopped"
    if handle.active:
        return "running"
    try:
        return "failed" if handle.handle.exception() is not None else "stopped"
    except Exception:  # the JVM side is gone: it did not end well
        return "failed"


def progress_of(query: Any) -> dict | None:
    """The last progress report of a live query's StreamingQuery (None before any)."""
    handle = getattr(query, "handle", None)
    streaming = getattr(handle, "handle", None)
    return last_progress(streaming)


def last_progress(streaming: Any) -> dict | None:
    if streaming is None:
        return None
    try:
        progress = streaming.lastProgress
    except Exception:  # a stopped query whose JVM object is gone has no progress
        return None
    return dict(progress) if progress else None


class _LiveState(Collector):
    """What is true at scrape time, read from the service and Spark's progress."""

    def __init__(
        self,
        queries: Callable[[], Iterable[Any]],
        ingest: Callable[[], Any],
        rates: RateWindow,
        lags: RateWindow,
    ) -> None:
        self._queries, self._ingest, self._rates, self._lags = queries, ingest, rates, lags

    def describe(self) -> list[Metric]:
        return []  # families depend on what runs: collected, not pre-described

    def collect(self) -> Iterator[Metric]:
        by_status = GaugeMetricFamily(
            "streamshield_queries", "Queries by status.", labels=["status"]
        )
        duration = GaugeMetricFamily(
            "streamshield_query_batch_duration_seconds",
            "Duration of each query's last micro-batch.",
            labels=["query"],
        )
        input_rate = GaugeMetricFamily(
            "streamshield_query_input_rows_per_second",
            "Input rows per second of each query's last micro-batch.",
            labels=["query"],
        )
        processed = GaugeMetricFamily(
            "streamshield_query_processed_rows_per_second",
            "Processed rows per second of each query's last micro-batch.",
            labels=["query"],
        )
        subscribers = GaugeMetricFamily(
            "streamshield_query_subscribers", "Live subscriptions per query.", labels=["query"]
        )
        lag = GaugeMetricFamily(
            "streamshield_query_recent_delivery_lag_seconds",
            f"Each query's largest delivery lag over the last {LAG_WINDOW:.0f} s "
            "(absent: no hand-over in that time).",
            labels=["query"],
        )
        for query, seconds in sorted(self._lags.peaks().items()):
            lag.add_metric([query], seconds)
        counts = dict.fromkeys(STATUSES, 0)
        for query in self._queries():
            counts[status_of(query)] += 1
            delivery = getattr(query, "delivery", None)
            subscribers.add_metric([query.name], len(getattr(delivery, "subscriptions", ())))
            progress = progress_of(query)
            if progress:
                _progress(query.name, progress, duration, input_rate, processed)
        for status, count in counts.items():
            by_status.add_metric([status], count)
        yield from (by_status, duration, input_rate, processed, subscribers, lag)
        yield from self._ingest_state()

    def _ingest_state(self) -> Iterator[Metric]:
        active = GaugeMetricFamily(
            "streamshield_ingest_active", "1 while the secure ingest job runs."
        )
        streaming = self._ingest()
        running = False
        try:
            running = bool(streaming is not None and streaming.isActive)
        except Exception:
            running = False
        active.add_metric([], 1 if running else 0)
        yield active
        per_stream = GaugeMetricFamily(
            "streamshield_ingest_rows_per_second",
            f"Elements accepted per second per stream, over the last {RATE_WINDOW:.0f} s.",
            labels=["stream"],
        )
        for stream, rate in sorted(self._rates.rates().items()):
            per_stream.add_metric([stream], rate)
        yield per_stream
        progress = last_progress(streaming) if running else None
        duration = GaugeMetricFamily(
            "streamshield_ingest_batch_duration_seconds", "Duration of ingest's last micro-batch."
        )
        rows = GaugeMetricFamily(
            "streamshield_ingest_processed_rows_per_second",
            "Elements per second labelled by ingest's last micro-batch (all streams).",
        )
        if progress:
            duration.add_metric([], _seconds(progress))
            rows.add_metric([], float(progress.get("processedRowsPerSecond") or 0.0))
        yield duration
        yield rows


class _Resources(Collector):
    """What the server holds: the ingest backlog against its bound, and the driver JVM's
    heap, including what outlived young collections (``retained``: the figure that must
    stay flat under overload, where the heap's committed size only tells how far the
    collector let it grow)."""

    def __init__(
        self, backlog: Callable[[], dict[str, Any]] | None, jvm: Callable[[], Any] | None
    ) -> None:
        self._backlog, self._jvm = backlog, jvm

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        if self._backlog is not None:
            state = self._backlog()
            pending = GaugeMetricFamily(
                "streamshield_ingest_backlog_elements",
                "Elements landed through the API and not yet read by secure ingest.",
            )
            pending.add_metric([], float(state["pending"]))
            yield pending
            if state.get("limit"):
                bound = GaugeMetricFamily(
                    "streamshield_ingest_backlog_limit_elements",
                    "Backlog over which appends are refused (503 ingest_backlog).",
                )
                bound.add_metric([], float(state["limit"]))
                yield bound
        heap = jvm_heap(self._jvm() if self._jvm is not None else None)
        if heap:
            family = GaugeMetricFamily(
                "streamshield_jvm_heap_bytes",
                "The driver JVM's heap: used, committed, max, and retained (survivor "
                "spaces and old generation: what outlived young collections).",
                labels=["kind"],
            )
            for kind, value in heap.items():
                family.add_metric([kind], float(value))
            yield family


class _ConnectorLag(Collector):
    """Each bound Kafka partition's records on the broker not yet landed or refused."""

    def __init__(self, lags: Callable[[], dict[tuple[str, int], int]]) -> None:
        self._lags = lags

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "streamshield_kafka_lag_records",
            "Records of a bound Kafka partition not yet landed (or refused).",
            labels=["binding", "partition"],
        )
        for (binding, partition), lag in sorted(self._lags().items()):
            family.add_metric([binding, str(partition)], lag)
        yield family


class _Retention(Collector):
    """What the landing zone, the labelled store and the shield state hold after the last
    prune, and what pruning removed since the server started (docs/administration.md)."""

    def __init__(self, pruner: Callable[[], Any]) -> None:
        self._pruner = pruner

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        pruner = self._pruner()
        report = pruner.last
        if report is None:
            return
        families: dict[tuple[str, str], GaugeMetricFamily | CounterMetricFamily] = {
            ("kept", "files"): GaugeMetricFamily(
                "streamshield_storage_kept_files",
                "Files kept per store after the last prune.",
                labels=["store"],
            ),
            ("kept", "bytes"): GaugeMetricFamily(
                "streamshield_storage_kept_bytes",
                "Bytes kept per store after the last prune.",
                labels=["store"],
            ),
            ("pruned", "files"): CounterMetricFamily(
                "streamshield_storage_pruned_files",
                "Files the retention pruned per store since the server started.",
                labels=["store"],
            ),
            ("pruned", "bytes"): CounterMetricFamily(
                "streamshield_storage_pruned_bytes",
                "Bytes the retention pruned per store since the server started.",
                labels=["store"],
            ),
        }
        for store, figures in report.kept.items():
            families[("kept", "files")].add_metric([store], float(figures.files))
            families[("kept", "bytes")].add_metric([store], float(figures.bytes))
        for store, figures in pruner.total_pruned.items():
            families[("pruned", "files")].add_metric([store], float(figures.files))
            families[("pruned", "bytes")].add_metric([store], float(figures.bytes))
        held = GaugeMetricFamily(
            "streamshield_storage_prune_held",
            "1 when the last prune held something back (a checkpoint unreadable or "
            "still starting, ingest with nothing committed; the server log says which).",
        )
        held.add_metric([], float(bool(report.held)))
        retention = GaugeMetricFamily(
            "streamshield_storage_retention_seconds",
            "How long consumed data is kept (absent: forever).",
        )
        yield from families.values()
        yield held
        if pruner.max_age is not None:
            retention.add_metric([], float(pruner.max_age))
            yield retention


def jvm_heap(jvm: Any) -> dict[str, int]:
    """The JVM's heap figures from its management beans ({} when there is no JVM);
    ``retained``: what the heap's pools other than the young generation's eden hold (the
    survivor spaces and the old generation: what outlived young collections, garbage not
    yet reached by an old collection included). The pools' own "collection usage" is
    no use here (G1 updates the old pool's only at full collections) and the last
    collection's details are not reachable from py4j (jdk.management does not export
    their class)."""
    if jvm is None:
        return {}
    try:
        management = jvm.java.lang.management.ManagementFactory
        usage = management.getMemoryMXBean().getHeapMemoryUsage()
        retained = 0
        for pool in management.getMemoryPoolMXBeans():
            if pool.getType().name() == "HEAP" and "Eden" not in str(pool.getName()):
                retained += int(pool.getUsage().getUsed())
        return {
            "used": int(usage.getUsed()),
            "committed": int(usage.getCommitted()),
            "max": int(usage.getMax()),
            "retained": retained,
        }
    except Exception:  # a JVM going away: no figure rather than a failed scrape
        return {}


def _progress(
    name: str,
    progress: dict,
    duration: GaugeMetricFamily,
    input_rate: GaugeMetricFamily,
    processed: GaugeMetricFamily,
) -> None:
    duration.add_metric([name], _seconds(progress))
    input_rate.add_metric([name], float(progress.get("inputRowsPerSecond") or 0.0))
    processed.add_metric([name], float(progress.get("processedRowsPerSecond") or 0.0))


def _seconds(progress: dict) -> float:
    return float((progress.get("durationMs") or {}).get("triggerExecution") or 0) / 1000.0
