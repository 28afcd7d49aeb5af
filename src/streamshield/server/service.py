"""The server's state behind the HTTP API: one Spark pipeline, one security catalog.

``ServerService`` is what every endpoint calls; it owns

* the :class:`~streamshield.engine.pipeline.Pipeline` under the storage root (landing
  zone, the secure ingest job running continuously on a processing-time trigger, the
  query service);
* the :class:`~streamshield.catalog.security.SecurityCatalog` (users, sessions,
  OxRBAC objects and permissions, settings, quotas, audit);
* the API's queries with their Delivery fan-outs (:mod:`streamshield.server.queries`).

Object-level checks happen here, before any component acts (paper 5, section 3.1):
an object the caller may not view is reported as missing (404), one it may view but
not use as forbidden (403). Data-level checks (SecFilter) happen in Delivery.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamshield.engine.ingest.tracker_state import ShieldStateError
from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.batch_boundary import at_batch_boundary
from streamshield.engine.queries.streaming_queries import safe_error
from streamshield.engine.store import root_location
from streamshield.engine.tuning import SERVER, EngineTuning
from streamshield.lang.continuous import ContinuousQuery, parse_request
from streamshield.lang.label_propagation import is_aggregate
from streamshield.lang.query_check import parse_tree
from streamshield.server import security_port as port
from streamshield.server.administration_service import AdministrationService
from streamshield.server.application_query import SeparateLevels
from streamshield.server.connector_service import ConnectorService
from streamshield.server.event_patterns import PatternService
from streamshield.server.ingest_backlog import IngestBacklog
from streamshield.server.ingest_guard import ERROR_CLASS as HALT_CLASS
from streamshield.server.ingest_guard import IngestHalt, is_state_failure, reason_of
from streamshield.server.metrics import ServerMetrics
from streamshield.server.queries import QueryRegistry
from streamshield.server.query_requests import QueryRequests, right_lost
from streamshield.server.query_store import QueryStore
from streamshield.server.retention_watch import RetentionWatch
from streamshield.server.schemas import SchemaStore
from streamshield.server.sink_service import SinkService
from streamshield.server.stream_service import StreamService
from streamshield.server.subscriptions import LiveSubscriptions
from streamshield.server.switch_service import SwitchService

audit = logging.getLogger("streamshield.audit")
WATCH_SECONDS = 1.0
RIGHTS_SECONDS = 0.2
"""How often the watch looks at the catalog version (and session expiries): a change
made by another process ends a subscription it revokes within about twice this."""
INGEST_TRIGGER_SECONDS = 0.2
"""How often secure ingest looks for landed files. Driven (the default), a landing
through the API starts its micro-batch at once and this look only finds files landed by
other means; as a streaming query, a landing waits for the next trigger: half the
interval on average, so the 1 s interval it had cost 0.5 s of every landing's latency.
An idle look only lists the landing zone (its idle CPU: ``bench.landing_latency``,
bench/results/landing-latency.json)."""
INGEST_RETRY_SECONDS = 10.0


class ServerService:
    """Everything the API does, as methods taking the caller's session first."""

    def __init__(
        self,
        spark: SparkSession,
        root: str | Path,
        security: Any,
        separate_levels: SeparateLevels | None = None,
        tuning: EngineTuning = SERVER,
    ) -> None:
        """``separate_levels``: each level's queries run in a Spark application of its
        own (``level_applications = "separate"``); None: in this one. ``tuning``: the
        engine's speed choices (engine/tuning.py), from the server's settings."""
        self.root = Path(root)
        root_location.check(self.root)  # a moved root would produce everything again
        self.spark = spark
        self.security = security
        self.catalog = security.catalog
        self.pipeline = Pipeline(spark, self.catalog, self.root, security.level_assignment, tuning)
        self.cql = self.pipeline.cql
        self.applications: LevelApplications | None = None
        if separate_levels is not None:
            engine = self.pipeline.queries
            self.applications = LevelApplications(
                lambda: engine.hierarchy,  # asked at each start: the hierarchy of now
                engine.streams,  # the live mapping: a later stream reaches later drivers
                engine.root,
                engine.labelled.root,
                separate_levels.master,
                separate_levels.conf,
            )
        self.queries = QueryRegistry(self.cql, self.applications)
        # Privacy switches: a shared network computes nothing for a query nobody receives.
        self.switches = SwitchService(security, self.cql, self.queries)
        # A query writes at its level: a derived stream gets its query's level.
        self.cql.write_level = lambda stream, at: security.write_at(stream, at.lattice, at.level)
        self.schemas = SchemaStore(self.root / "schemas")
        self.stored = QueryStore(self.root / "queries")
        self._lock = threading.RLock()
        self._ingest: Any = None
        self._stopping = threading.Event()
        self._reconciled: tuple[int, int] | None = None  # the rights queries follow
        self._rechecked: tuple[int, int] | None = None  # the rights subscriptions follow
        self.live = LiveSubscriptions()  # re-checked when rights or a session change
        self._watcher: threading.Thread | None = None
        self.started = False  # ingest runs and the previous run's queries are restored
        self.halt = IngestHalt()  # ingest stopped for its shield state: not restarted
        self.backlog = IngestBacklog()  # appends refused while ingest is too far behind
        # Consumed landing files and labelled batches past it are pruned (off until set).
        self.retention = RetentionWatch(self.root, self.root / "queries")
        self.metrics = ServerMetrics(
            self.queries.all,
            lambda: self._ingest,
            backlog=self.backlog.state,
            jvm=lambda: spark.sparkContext._jvm,
            retention=lambda: self.retention.pruner,
        )
        self.pipeline.ingest.on_counts = self.metrics.labelled
        self.streams = StreamService(
            security,
            self.pipeline,
            self.queries,
            self.schemas,
            self._lock,
            self.halt,
            self.backlog,
            self.metrics,
        )
        """Schemas, streams and appends (server/stream_service.py)."""
        self.query_requests = QueryRequests(
            security,
            self.pipeline,
            self.queries,
            self.stored,
            self.switches,
            self.retention,
            self.halt,
            self.metrics,
            self._lock,
            self.applications,
        )
        """Register, INSERT SP, start, stop, remove, subscribe (server/query_requests.py)."""
        self.administration = AdministrationService(
            security, self.recheck_subscriptions, self.reconcile_rights
        )
        """Sessions, grants and system settings (server/administration_service.py): a
        logout ends that session's subscriptions, a grant re-derives every right."""
        self.patterns = PatternService(self)  # event patterns (docs/cep.md)
        self.sinks = SinkService(security, self.query_requests, self.queries, spark, self.root)
        """Rows written for their recipient to Kafka or Delta (server/sink_service.py)."""
        self.connectors = ConnectorService(security, self.streams, self.root)
        """Kafka topics and MQTT topic filters bound to streams (server/connector_service.py)."""
        self.streams.fed = self.connectors.channels_of
        self.metrics.follow_connectors(self.connectors.lags)

    # -- life cycle ------------------------------------------------------------------------

    def start(self, phase: Callable[[str], AbstractContextManager[Any]] | None = None) -> None:
        """Starts the ingest job (continuous, processing-time trigger) and the queries the
        catalog records, those recorded as running from their checkpoints; ``phase``
        times each step (``streamshield serve`` logs them: where a restart's time goes)."""
        timed = phase or (lambda _name: nullcontext())
        self.halt.clear()  # the one the appends ask (StreamService)
        with timed("ingest"):
            self._ingest = self._start_ingest()
        with timed("queries"):
            self.restore_queries()
        with timed("patterns"):
            self.patterns.restore()
        with timed("connectors"):
            self.sinks.restore()
            self.connectors.start_all()
        self._stopping.clear()
        self._watcher = threading.Thread(target=self._watch, name="query-watch", daemon=True)
        self._watcher.start()
        self.retention.start()
        self._reconciled = self.rights_stamp()  # the queries just started follow it
        self.started = True

    def _watch(self) -> None:
        """Follows the catalog (:meth:`follow_rights`, every RIGHTS_SECONDS); notices,
        within a second, a query the engine stopped with an error, and restarts secure
        ingest if it died (nothing would be labelled until a restart)."""
        retry_at = slow_at = 0.0
        while not self._stopping.wait(RIGHTS_SECONDS):
            try:
                self.follow_rights()
            except Exception as err:  # the watch must outlive any one bad check
                audit.error("rights watch: %s", type(err).__name__)
            if time.monotonic() < slow_at:
                continue
            slow_at = time.monotonic() + WATCH_SECONDS
            try:
                self.backlog.read_query(self._ingest)
                self.queries.check_failures(self.query_requests.failed)
                self.patterns.check_ended()
                self.sinks.follow_queries()
                if time.monotonic() >= retry_at and self._ingest_died():
                    retry_at = time.monotonic() + INGEST_RETRY_SECONDS
                    with self._lock:
                        if not self._stopping.is_set():
                            self._ingest = self._start_ingest()
                if self.queries.restartable(INGEST_RETRY_SECONDS):
                    self._restart_failed()
            except Exception as err:  # the watch must outlive any one bad check
                audit.error("query watch: %s", type(err).__name__)

    def _restart_failed(self) -> None:
        """Queries that failed on a full or read-only disk, or lost their level's own
        application, start again every INGEST_RETRY_SECONDS until they run (as ingest
        does); the failure and each restart are audited. Their subscribers got an
        ``error`` event and resume with ``?after=`` (nothing stored is lost: the failed
        batch is replayed)."""
        due = self.queries.restartable(INGEST_RETRY_SECONDS)
        # Levels' own drivers start outside the locks (a JVM start holds up no request).
        with self.queries.levels_started(due, ready=True) as startable, self._lock:
            still = set(self.queries.restartable(INGEST_RETRY_SECONDS))
            due = [name for name in startable if name in still]
            if due and not self._stopping.is_set():
                self.queries.restart(due, self.query_requests.limits())

    def _start_ingest(self) -> Any:
        """The running ingest query, or None when its state forbids starting (halted)."""
        try:
            return self.pipeline.ingest.start(
                available_now=False, trigger_seconds=INGEST_TRIGGER_SECONDS
            )
        except ShieldStateError as err:
            self._halt(err)
            return None

    def _halt(self, failure: BaseException) -> None:
        """Ingest stays stopped (see :mod:`streamshield.server.ingest_guard`), audited once."""
        reason = reason_of(failure)
        if self.halt.halt(reason):
            port.record_query_failure(self.security, None, "ingest", HALT_CLASS, reason)

    def _ingest_died(self) -> bool:
        """True (once per death, audited for administrators) when ingest stopped with an
        error it may recover from by a restart; a shield state failure halts it instead."""
        ingest = self._ingest
        if ingest is None or ingest.isActive or self._stopping.is_set():
            return False
        failure = ingest.exception()
        if is_state_failure(failure):
            self._ingest = None
            self._halt(failure)
            return False
        error_class = safe_error(failure) if failure else "STOPPED_UNEXPECTEDLY"
        audit.error("secure ingest stopped (%s): restarting it", error_class)
        port.record_query_failure(self.security, None, "ingest", error_class, str(failure))
        return True

    @property
    def ingest_query(self) -> Any:
        """The ingest job's StreamingQuery (None before :meth:`start`, after :meth:`stop`)."""
        return self._ingest

    def restore_queries(self) -> None:
        """Queries of a previous run: each with its owner's recorded roles that the owner
        still holds (none left: it stays stopped). Failures are audited, never widened."""
        due = []
        for record in port.all_queries(self.security):
            port.audit_restored(self.security, record.name)  # a crash before its entry
            stored = self.stored.load(record.name)
            if self.patterns.is_pattern(record.name) or self.patterns.stored(record.name):
                continue  # an event pattern: PatternService.restore starts it
            if stored is None or self.queries.has(record.name):
                if stored is None:
                    audit.error("query %s has no stored definition: not restored", record.name)
                continue
            roles = tuple(sorted(set(record.roles) & port.held_roles(self.security, record.owner)))
            aggregate = _aggregate(stored.text)
            query = self.query_requests.live_query(
                stored, record.owner, roles, tuple(record.inputs), aggregate
            )
            self.queries.add(query)
            if str(record.status) != "running":
                continue
            if not roles:
                audit.error("query %s: owner holds none of its roles: not restarted", record.name)
                query.suspended = "its owner acts with none of its roles"
                continue
            due.append(record.name)
        with self.queries.levels_started(due):
            for name in due:
                try:
                    self.queries.start(name, self.query_requests.limits())
                except Exception as err:  # one broken query must not keep the server down
                    audit.error("query %s not restarted: %s", name, type(err).__name__)

    def rights_stamp(self) -> tuple[int, int]:
        """Changes with every change of roles or rights: the catalog's version (users,
        roles, sessions, grants, the hierarchy, clearances, levels, changed by any
        process: :mod:`streamshield.catalog.view`) and every hierarchy the engine
        applied. Whatever derives a right from them keeps the stamp it derived it under
        and derives again when the stamp moved (running patterns per micro-batch, queries
        in :meth:`reconcile_rights`, live subscriptions in :meth:`follow_rights`):
        comparing two numbers, at most one catalog read per poll period."""
        return int(getattr(self.security, "changes", 0)), self.pipeline.hierarchy_version

    def follow_rights(self) -> None:
        """Reconciles the queries when the rights stamp moved, or else re-checks the
        live subscriptions when it moved since their last re-check or a session the
        catalog's view keeps has expired: no per-subscriber work while nothing changes."""
        stamp = self.rights_stamp()
        if stamp != self._reconciled:
            self.reconcile_rights()  # re-checks the subscriptions first
        elif stamp != self._rechecked or port.session_expired(self.security):
            self.recheck_subscriptions()

    def use_hierarchy(self, hierarchy: Any) -> None:
        """The role hierarchy changed (an edge added or removed): the engine labels and
        compiles under it from now, and every running query is reconciled with it."""
        with self._lock:
            self.pipeline.use_hierarchy(hierarchy)
            self.reconcile_rights()

    def reconcile_owner(self, user: str) -> None:
        """After ``user`` was disabled, enabled or given other roles (see
        :meth:`reconcile_rights`, which does it for every owner)."""
        self.reconcile_rights()

    def reconcile_rights(self) -> None:
        """Each query runs with exactly what its owner may still give it, under the role
        hierarchy in force: the roles of its record she acts with now, their effective
        roles (the roles and their juniors) now, READ (TUPLE or AGGREGATE) on every input
        and, with levels on, a clearance dominating its level. A query whose roles or
        effective roles changed is stopped (its subscribers are told why) and started
        again, recompiled with what is left: from its next micro-batch it reads only what
        those roles may read now. One that lost its last role, an input's READ or its
        level stays stopped until the right comes back.

        Called by every request that changes roles or rights before it answers, and by
        the server's watch when :meth:`rights_stamp` moved (a change made otherwise); the
        catalog is read then, once per query, never per micro-batch."""
        stamp = self.rights_stamp()
        self.recheck_subscriptions()  # sessions may have ended, rights changed
        acting: dict[str, frozenset[str]] = {}
        readable: dict[str, tuple[set[str], set[str]]] = {}
        with self._lock:
            hierarchy = self.pipeline.queries.hierarchy
            for record in port.all_queries(self.security):
                query = self.queries.maybe(record.name)
                if query is None:
                    continue
                owner = record.owner
                if owner not in acting:
                    acting[owner] = port.held_roles(self.security, owner)
                roles = tuple(sorted(set(record.roles) & acting[owner]))
                if query.handle is None and query.suspended is None:
                    query.roles = roles  # stopped by its owner: its next start uses them
                    continue
                lost = right_lost(self.security, query, owner, roles, readable)
                effective = frozenset(hierarchy.effective(roles)) if roles else frozenset()
                if query.handle is not None:
                    if lost is None and (roles, effective) == (query.roles, query.effective):
                        continue  # derives what it runs with (a failure stays one)
                    why = lost or "its owner's roles or the role hierarchy changed"
                    self.queries.stop(record.name, f"query stopped: {why}")
                query.roles = roles
                if lost is None and str(record.status) == "running":
                    query.suspended = None
                    try:
                        self.queries.start(record.name, self.query_requests.limits())
                    except Exception as err:  # audited; the others still reconcile
                        audit.error("query %s not restarted: %s", record.name, err)
                else:
                    query.suspended = lost or "stopped"
                    audit.warning("query %s suspended: %s", record.name, query.suspended)
        self._reconciled = stamp

    def end_subscriptions(self, reason: str) -> None:
        """Ends every live subscription with a ``closed`` event (before the API stops)."""
        for query in self.queries.all():
            query.end_subscriptions(reason)

    def stop(self, boundary_timeout: float = 10.0) -> None:
        """Stops the queries, then ingest, each between two micro-batches when they get
        there within ``boundary_timeout`` in all (an interrupted batch is redone from the
        checkpoint on restart, but interrupting it costs a JVM stack trace for nothing)."""
        self.started = False
        self._stopping.set()
        self.connectors.stop_all()  # nothing lands while the rest stops
        self.retention.stop()
        if self._watcher is not None:
            self._watcher.join(10)
            self._watcher = None
        deadline = time.monotonic() + boundary_timeout  # for all of them together

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        for query in self.queries.all():
            if query.running and query.handle is not None:
                at_batch_boundary(query.handle.handle, left())
            self.queries.stop(query.name, "server stopping")
        self.patterns.stop_all()
        self.sinks.stop_all()
        if self.applications is not None:
            self.applications.close()  # each went with its last query; none is left behind
        if self._ingest is not None:
            at_batch_boundary(self._ingest, left())
            self._ingest.stop()
            self._ingest = None

    def recheck_subscriptions(self) -> int:
        """Ends every live subscription whose session or SUBSCRIBE right is gone."""
        self._rechecked = self.rights_stamp()  # before: a change meanwhile re-checks again
        return self.live.recheck()


def _aggregate(text: str) -> bool:
    """Whether a stored query's outer SELECT aggregates (READ AGGREGATE applies at
    delivery), read once when the server restores it.

    Unparseable here means "not an aggregate", which can only deliver less.
    """
    try:
        request = parse_request(text)
        return isinstance(request, ContinuousQuery) and is_aggregate(parse_tree(request.sql))
    except Exception:
        return False
