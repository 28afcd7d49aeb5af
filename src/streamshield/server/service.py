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

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from streamshield.engine.delivery.delivery import Delivery, Subscription
from streamshield.engine.ingest.tracker_state import ShieldStateError
from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.batch_boundary import at_batch_boundary
from streamshield.engine.queries.streaming_queries import safe_error
from streamshield.engine.store import root_location
from streamshield.engine.store.result_store import ResultStore
from streamshield.engine.tuning import SERVER, EngineTuning
from streamshield.faults import crash_point
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.lang.continuous import ContinuousQuery, SpInsert, parse_request
from streamshield.lang.label_propagation import is_aggregate
from streamshield.lang.query_check import parse_tree
from streamshield.policy.bitset import Words
from streamshield.policy.operator_limits import OperatorLimits
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.access_gates import require_visible
from streamshield.server.administration_service import AdministrationService
from streamshield.server.application_query import SeparateLevels
from streamshield.server.errors import (
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    Unavailable,
)
from streamshield.server.event_patterns import PatternService
from streamshield.server.ingest_backlog import IngestBacklog
from streamshield.server.ingest_guard import ERROR_CLASS as HALT_CLASS
from streamshield.server.ingest_guard import IngestHalt, is_state_failure, reason_of
from streamshield.server.metrics import ServerMetrics
from streamshield.server.queries import LiveQuery, QueryRegistry
from streamshield.server.query_store import QueryStore, StoredQuery
from streamshield.server.retention_watch import RetentionWatch
from streamshield.server.schemas import SchemaStore
from streamshield.server.stream_service import StreamService
from streamshield.server.subscriptions import LiveSubscriptions, Resume
from streamshield.server.switch_service import SwitchService

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

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
RECOVERY_SECONDS = 30.0


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
        self.administration = AdministrationService(
            security, self.recheck_subscriptions, self.reconcile_rights
        )
        """Sessions, grants and system settings (server/administration_service.py): a
        logout ends that session's subscriptions, a grant re-derives every right."""
        self.patterns = PatternService(self)  # event patterns (docs/cep.md)

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
                self.queries.check_failures(self._query_failed)
                self.patterns.check_ended()
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
                self.queries.restart(due, self.limits())

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

    def _query_failed(self, query: LiveQuery, message: str) -> None:
        port.record_query_failure(
            self.security, query.owner, query.name, query.error_class or "", message
        )

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
            query = self._live(stored, record.owner, roles, tuple(record.inputs), aggregate)
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
                    self.queries.start(name, self.limits())
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
                lost = self._right_lost(query, owner, roles, readable)
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
                        self.queries.start(record.name, self.limits())
                    except Exception as err:  # audited; the others still reconcile
                        audit.error("query %s not restarted: %s", record.name, err)
                else:
                    query.suspended = lost or "stopped"
                    audit.warning("query %s suspended: %s", record.name, query.suspended)
        self._reconciled = stamp

    def _right_lost(
        self,
        query: LiveQuery,
        owner: str,
        roles: tuple[str, ...],
        readable: dict[str, tuple[set[str], set[str]]],
    ) -> str | None:
        """What ``owner`` no longer gives ``query`` (None: nothing): a role, READ on an
        input, or a clearance dominating its level."""
        if not roles:
            return "its owner acts with none of its roles"
        if owner not in readable:
            readable[owner] = self.security.readable_sources(owner)
        raw, aggregate = readable[owner]
        for stream in query.inputs:
            if stream not in raw and stream not in aggregate:
                return f"its owner no longer holds READ on {stream}"
        level = query.level
        if level is not None and not port.clearance_dominates(self.security, owner, level):
            return f"its owner's clearance no longer dominates its level {level.text}"
        return None

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
        if self.applications is not None:
            self.applications.close()  # each went with its last query; none is left behind
        if self._ingest is not None:
            at_batch_boundary(self._ingest, left())
            self._ingest.stop()
            self._ingest = None

    def _delivery(self, aggregate: bool, output: str, name: str = "") -> Delivery:
        def dropped(user: str, batch: int, count: int, policies: tuple[str, ...]) -> None:
            port.record_drop(self.security, user, output, count, policies)

        delivery = Delivery(
            self._rights,
            self.codec,
            roles=self._read_mask,
            aggregate=aggregate,
            on_drop=dropped,
            levels=self._recipient_level,
        )
        delivery.on_handover = lambda seconds: self.metrics.handed_over(name or output, seconds)
        return delivery

    @property
    def codec(self) -> ProvenanceCodec:
        """Which source streams a provenance bit stands for (every stream has one)."""
        return self.pipeline.queries.provenance

    def _rights(self, user: str) -> tuple[set[str], set[str]]:
        return self.security.readable_sources(user)

    def _read_mask(self, subscription: Subscription) -> Words:
        """The subscriber's active roles now (her session's), as the READ query mask:
        rows are checked against them, whoever registered the query."""
        roles = port.roles_of(port.session(self.security, subscription.session))
        return self.pipeline.queries.codec.query(roles)

    def _recipient_level(self, subscription: Subscription) -> Words | None:
        """The subscriber's session level now (DESIGN.md 5a: the recipient decides)."""
        return port.recipient_level(
            self.security, port.session(self.security, subscription.session)
        )

    # -- queries ---------------------------------------------------------------------------

    def register_request(self, session: Session, name: str, text: str, output: str | None) -> dict:
        """A continuous query or an INSERT SP script, told apart by ``parse_request``.

        OxRBAC decides first (visibility, INJECT SP, ADD, READ on inputs, quota); then
        :class:`CqlService` checks, limits and routes the text, and its refusals are
        the only source of ``not_supported`` answers.
        """
        # A query names its streams: VIEW OBJECT on each is what resolves it (VIEW
        # CATALOG is for listing). Unknown and invisible streams look the same.
        readable = port.seen_streams(self.security, session, self.pipeline.queries.streams)
        hierarchy = self.pipeline.queries.hierarchy
        try:
            admitted = admit(text, port.roles_of(session), hierarchy, readable)
        except Exception as err:
            self._refused(session, name, err, recorded=False)
            raise
        if isinstance(admitted, SpInsert):
            return self.inject_sps(session, admitted)
        query = self.register_query(session, name, admitted, output)
        return {
            "name": query.name,
            "output": query.output,
            "status": query.status(),
            "inputs": list(query.inputs),
        }

    def register_query(
        self, session: Session, name: str, admitted: AdmittedQuery, output: str | None
    ) -> LiveQuery:
        """ADD, READ on every input, quota, operator limits, then the engine: the query
        admitted once (lang/admission.py) is what the engine runs on its first start."""
        user = port.user_of(session)
        try:
            output = self._output_name(name, admitted.request, output)
        except Exception as err:
            self._refused(session, name, err, recorded=False)
            raise
        if admitted.level is None:  # it runs at the level of the session registering it
            admitted = replace(admitted, level=port.session_query_level(self.security, session))
        level = admitted.level
        with self._lock:
            # Limits before the catalog records anything: checked once, under the lock
            # its start below is under too.
            running = self.queries.running_shapes(user)
            try:
                self.limits().check(admitted.shape, admitted.effective, running)
            except Exception as err:
                self._refused(session, name, err, recorded=False)
                raise
            internal = f"api_{uuid.uuid4().hex[:12]}"
            text = level.text if level is not None else None
            stored = StoredQuery(name, admitted.text, output, internal, text)
            # Staged before the catalog records it: a crash in between never leaves a
            # record without its definition (restore_queries promotes the staged one).
            self.stored.stage(stored)
            try:  # audited with its outcome: registered (started) or refused
                port.add_query(self.security, session, name, admitted.streams, output, False)
            except BaseException:
                self.stored.discard(name)
                raise
            crash_point("catalog.query")
            aggregate = admitted.shape.aggregate
            query = self._live(stored, user, admitted.roles, admitted.streams, aggregate)
            query.level, query.admitted = level, admitted
            separate = self.applications is not None and level is not None
            try:
                self.queries.add(query)
                if not separate:
                    self.queries.start(name, None)  # its limits: checked above
            except BaseException as err:
                self._unregister(session, query, err)
                raise
            if not separate:
                port.registered(self.security, session, name)
                self.stored.commit(name)
                return query
        return self._start_in_own_application(session, query)

    def _start_in_own_application(self, session: Session, query: LiveQuery) -> LiveQuery:
        """The start of a registered query whose level runs in its own Spark
        application: the level's driver starts (or is found running) outside the
        locks, so a slow JVM start holds up no other request; the start itself (the
        limits checked again, since the owner's other queries may have changed while
        no lock was held; the hand-over to the running driver) is under them. A query
        removed meanwhile is not started; one that fails to start is unregistered."""
        name = query.name
        try:
            with (
                self.queries.levels_started([name], ready=True) as startable,
                self._lock,
            ):
                if self.queries.maybe(name) is not query:
                    raise Conflict("the query was removed while it started", codes.REMOVED)
                if name not in startable:
                    raise Unavailable(
                        "the level's own Spark application did not start; try again "
                        "later (the server's log says why)"
                    )
                self.queries.start(name, self.limits())
                port.registered(self.security, session, name)
                self.stored.commit(name)
        except BaseException as err:
            with self._lock:
                if self.queries.maybe(name) is query:
                    self._unregister(session, query, err)
            raise
        return query

    def _unregister(self, session: Session, query: LiveQuery, err: BaseException) -> None:
        """Undoes a registration whose start failed: registry, catalog (audited as
        refused, with the code its author gets), staged text."""
        self.queries.remove_quietly(query.name)
        self._refused(session, query.name, err, recorded=True)
        self.stored.discard(query.name)

    def _refused(self, session: Session, name: str, err: BaseException, recorded: bool) -> None:
        port.refused(self.security, session, name, err, recorded=recorded)

    @staticmethod
    def _output_name(name: str, request: ContinuousQuery, output: str | None) -> str:
        """The output stream object: ON RESULT names the derived stream it creates."""
        if not request.on_result:
            return output or f"{name}_out"
        targets = {st.stream for st in request.on_result if st.stream}
        target = next(iter(targets)) if len(targets) == 1 else f"{name}_result"
        if output is not None and output != target:
            raise Invalid("with ON RESULT the output is the stream the sps go to", codes.OUTPUT)
        return target

    def _live(
        self,
        stored: StoredQuery,
        owner: str,
        roles: tuple[str, ...],
        inputs: tuple[str, ...],
        aggregate: bool,
    ) -> LiveQuery:
        """``aggregate``: its outer SELECT aggregates (READ AGGREGATE applies at delivery)."""
        query = LiveQuery(
            stored.name,
            owner,
            stored.text,
            roles,
            inputs,
            stored.internal,
            self._delivery(aggregate, stored.output, stored.name),
            ResultStore(self.root / "results" / stored.internal),
            output=stored.output,
            level=port.stored_query_level(self.security, stored.level),
        )
        # A subscriber whose roles read now exactly what the running query was compiled
        # to read gets its output as it is (never the roles' mask of now: after a role
        # change the query may read more until it is recompiled).
        query.delivery.query_mask = query.own_mask
        self.switches.add(query)
        return query

    def limits(self) -> OperatorLimits:
        """The operator limits setting; unreadable is an error (never "unlimited")."""
        stored = port.settings(self.security).get(port.LIMITS_SETTING)
        if stored is None:
            return OperatorLimits()
        try:
            return OperatorLimits.from_dict(stored)
        except (ValueError, TypeError) as err:
            audit.error("operator limits setting unreadable: %s", err)
            raise Invalid(
                "the operator limits setting is unreadable; ask an administrator",
                codes.LIMITS_UNREADABLE,
            ) from None

    def inject_sps(self, session: Session, request: SpInsert) -> dict:
        """An INSERT SP script: a policy on the caller's own channel of the stream."""
        require_visible(self.security, session, "stream", request.stream)
        user = port.user_of(session)
        if not port.can_inject(self.security, session, request.stream):
            raise Forbidden(f"INJECT SP on stream {request.stream} is needed")
        if request.stream not in self.pipeline.queries.streams:
            raise Forbidden("a query's output stream takes no sps")
        self.halt.refuse_input()
        with self._lock:
            done = self.cql.insert_sps(request, user)
        return {
            "stream": done.channel.stream,
            "provider": done.channel.provider,
            "ts": done.ts,
            "csn": done.csn,
            "last_seq": done.last_seq,
        }

    def set_query_status(self, session: Session, name: str, running: bool) -> LiveQuery:
        """SET QUERY STATUS (the catalog decides, quota included), then the engine. A
        start whose level runs in its own Spark application starts that driver first,
        outside the locks (as a registration does), and only for a caller allowed to
        start the query: a JVM start holds up no other request."""
        require_visible(self.security, session, "query", name)
        warm = running and port.check(self.security, session, "SET QUERY STATUS", "query", name)
        with (
            self.queries.levels_started([name] if warm else [], ready=True) as startable,
            self._lock,
        ):
            if running:
                query = self.queries.get(name)
                if not query.running:
                    if warm and name not in startable:
                        raise Unavailable(
                            "the level's own Spark application did not start; try again "
                            "later (the server's log says why)"
                        )
                    lost = self._right_lost(query, query.owner, query.roles, {})
                    if lost is not None:
                        raise Forbidden(f"the query cannot start: {lost}")
                    failed = query.error_class is not None
                    port.set_query_status(self.security, session, name, "running")
                    try:
                        query = self.queries.start(name, self.limits())
                    except BaseException:
                        port.set_query_status(self.security, session, name, "stopped")
                        raise
                    if failed:
                        self._recovered(query)
                return query
            port.set_query_status(self.security, session, name, "stopped")
            return self.queries.stop(name)

    def _recovered(self, query: LiveQuery, timeout: float = RECOVERY_SECONDS) -> None:
        """After a failure, a start waits for the query's first batch (its replay of the
        batch that failed, if any): a query failing again is a 409 naming the error class,
        not a "running" that turns into "failed" a moment later."""
        handle = query.handle.handle if query.handle is not None else None
        deadline = time.monotonic() + timeout
        while handle is not None and time.monotonic() < deadline:
            if not handle.isActive:
                self.queries.check_failures(self._query_failed)
                raise Conflict(
                    f"the query failed again on start ({query.error_class}); its definition "
                    "or its input needs a change: remove it and register it anew",
                    codes.QUERY_FAILED,
                )
            if handle.lastProgress is not None:
                return
            time.sleep(0.2)

    def remove_query(self, session: Session, name: str) -> None:
        require_visible(self.security, session, "query", name)
        with self._lock:
            port.remove_query(self.security, session, name)
            internal = self.queries.get(name).internal if self.queries.has(name) else None
            self.queries.remove_quietly(name)
            self.stored.remove(name)
            if internal is not None:
                self.switches.forget(internal)
                self.cql.forget(internal)
                self.retention.drop(internal)  # nothing restarts it: it holds nothing back

    def subscribable(self, session: Session, name: str) -> LiveQuery:
        """The query by its name or its output stream's, if the caller may SUBSCRIBE to the
        output stream (404 when it may not even see that stream)."""
        query = self.queries.by_output(name) or self.queries.maybe(name)
        if query is None or not port.check(
            self.security, session, "VIEW OBJECT", "stream", query.output
        ):
            raise NotFound("no such query or output stream, or you lack VIEW OBJECT on it")
        if not port.can_subscribe(self.security, session, query.output):
            raise Forbidden(f"SUBSCRIBE on stream {query.output} is needed")
        status = query.status()
        if status != "running":
            why = f" ({query.error_class})" if query.error_class else ""
            raise Conflict(
                f"the query is {status}{why}: it produces nothing until it is started again",
                codes.QUERY_NOT_RUNNING,
            )
        return query

    async def replay(
        self, query: LiveQuery, subscription: Subscription, after: int, resume: Resume, queue: Any
    ) -> None:
        """The stored batches after ``after`` to a resuming subscriber, oldest first, each
        through SecFilter with her rights of now (as if it were live); batches no longer
        stored are announced as a ``gap`` (ids may skip: the store says what it pruned,
        :meth:`ResultStore.since`). Batches are delivered before they are stored:
        the replay first waits for those in flight, which may have been delivered just
        before she subscribed (:meth:`ResultStore.settle`)."""
        if not await asyncio.to_thread(query.store.settle, lambda: queue.ended):
            return
        gap, stored = query.store.since(after)
        if gap:
            queue.notice("gap", {"first": gap[0], "last": gap[1]})
        for batch in stored:
            if queue.ended or not self.may_still_subscribe(subscription.session, query.output):
                return
            if query.store.lost(batch):
                queue.notice("gap", {"first": batch, "last": batch})
                continue
            rows = await asyncio.to_thread(self._replayed_rows, query, subscription, batch)
            await resume.replayed(batch, rows)

    def _replayed_rows(self, query: LiveQuery, subscription: Subscription, batch: int) -> list:
        frame = query.store.stored(batch, self.spark)
        if frame is None:
            return []
        got: list[dict] = []
        collect = replace(subscription, deliver=lambda rows, _batch: got.extend(rows))
        query.delivery.replay(frame, batch, collect)
        return got

    def recheck_subscriptions(self) -> int:
        """Ends every live subscription whose session or SUBSCRIBE right is gone."""
        self._rechecked = self.rights_stamp()  # before: a change meanwhile re-checks again
        return self.live.recheck(self.may_still_subscribe)

    def may_still_subscribe(self, token: str, output: str) -> bool:
        """Checked per delivered batch: the session is alive and SUBSCRIBE still held."""
        try:
            return port.can_subscribe(self.security, port.session(self.security, token), output)
        except Exception:
            return False


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


def _nowhere(_frame: Any, _batch: int) -> None:
    """The sink an INSERT SP request never uses (it lands sps, it produces no rows)."""
