"""Users' continuous queries on the server: OxRBAC objects with an engine query and a fan-out.

A query registered through the API is a QUERY object owned by its author (its output
stream, *out1* in paper 5's scenario). It runs with the roles active in the author's
session at registration, so its secured views show exactly what those roles may read.
Every micro-batch is written to the query's own
:class:`~streamshield.engine.store.result_store.ResultStore` (so a stateful plan is executed
and committed whether or not anyone listens); while someone listens, its rows first go
to a :class:`~streamshield.engine.delivery.delivery.Delivery`, which applies SecFilter per
subscriber with their rights of *now*, and are written after (from the same cache).

Every query goes through :class:`~streamshield.engine.queries.cql_service.CqlService`, which
parses the text again, routes it to the engine for its shape and applies the operator
limits it is given. Starting a stopped query submits the same text under the same
internal name, so the engine resumes from that name's checkpoint and no result is
produced twice. Stopping or failing ends every subscription with a ``closed`` or
``error`` event (nobody waits on a query that produces nothing); removing also drops
the stored results.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.levels.level_application import ApplicationError, LevelApplications
from streamshield.engine.queries.batch_boundary import at_batch_boundary
from streamshield.engine.queries.cql_service import CqlService
from streamshield.engine.queries.streaming_queries import (
    STORAGE_UNAVAILABLE,
    CallbackSink,
    RegisteredQuery,
    failure_class,
)
from streamshield.engine.store.result_store import ResultStore, StoringSink
from streamshield.lang.admission import AdmittedQuery
from streamshield.lang.continuous import Shape
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.bitset import Words
from streamshield.policy.operator_limits import OperatorLimits
from streamshield.policy.query_level import QueryLevel
from streamshield.server import error_codes as codes
from streamshield.server.application_query import LEVEL_APPLICATION_LOST, ApplicationQuery
from streamshield.server.errors import Conflict, Invalid, NotFound, Unavailable

audit = logging.getLogger("streamshield.audit")
STOP_AT_BOUNDARY_SECONDS = 10.0
RESTARTED = (STORAGE_UNAVAILABLE, LEVEL_APPLICATION_LOST)
"""Failures the server starts a query again after (the cause may pass by itself)."""


@dataclass
class LiveQuery:
    """One API query: what it is, whom it runs as, and where its results go."""

    name: str
    owner: str
    text: str
    roles: tuple[str, ...]
    inputs: tuple[str, ...]
    internal: str
    delivery: Delivery = field(repr=False)
    store: ResultStore = field(repr=False)
    shape: Shape | None = field(default=None, repr=False)
    output: str = ""
    handle: RegisteredQuery | ApplicationQuery | None = field(default=None, repr=False)
    """The running query: in the server's application, or in its level's own."""
    closers: dict[str, Callable[[str, str], None]] = field(default_factory=dict, repr=False)
    error_class: str | None = None
    """Why the engine stopped the query (a Spark error class), until it is started again."""
    failed_at: float | None = None
    level: QueryLevel | None = None
    """The Chinese-Wall level it runs at (None while levels are off)."""
    admitted: AdmittedQuery | None = field(default=None, repr=False)
    """The query as the API admitted it, for its first start (later starts admit the
    stored text again, with the roles it has then)."""
    suspended: str | None = None
    """Why it is not running although its record says running (its owner lost a role or
    right it needs): it starts again when the right comes back."""
    effective: frozenset[str] = frozenset()
    """The effective roles (its roles and their juniors) it was last started with:
    what its secured views read, until it is started again."""
    compiled_mask: Words | None = field(default=None, repr=False)
    """Their READ mask, while every start of it in this server compiled the same one
    (None once two differed: its stored batches may then hold rows of either view, so no
    recipient is exempt from the row checks)."""

    def compiled(self, effective: frozenset[str], mask: Words) -> None:
        """Notes a start compiled for ``effective`` with READ mask ``mask``."""
        first = not self.effective
        self.compiled_mask = mask if first or self.compiled_mask == mask else None
        self.effective = effective

    def own_mask(self) -> Words:
        """The READ mask a recipient acting with exactly it gets the output as it is
        with (``Delivery.query_mask``): the compiled one, or the empty mask, which
        exempts nobody, before the first start and once two starts differed."""
        return () if self.compiled_mask is None else self.compiled_mask

    def columns(self) -> tuple[str, ...]:
        """Output columns a subscriber receives (labels are never delivered)."""
        shown = self.handle.columns if self.handle is not None else ()
        return tuple(c for c in shown if not c.startswith("_ss_"))

    @property
    def running(self) -> bool:
        return self.handle is not None and self.handle.active

    @property
    def secured_sql(self) -> str | None:
        """The SQL Spark parsed for it, as the security rewrites produced it; None
        while it does not run in this process (a level's own application runs it)."""
        handle = self.handle
        return handle.secured_sql if self.running and isinstance(handle, RegisteredQuery) else None

    def status(self) -> str:
        """``running``, ``stopped`` (by its owner) or ``failed`` (see ``error_class``)."""
        if self.error_class is not None:
            return "failed"
        if self.handle is None:
            return "stopped"
        return "running" if self.handle.active else "failed"

    def end_subscriptions(self, reason: str, event: str = "closed") -> None:
        for close in list(self.closers.values()):
            close(reason, event)


class QueryRegistry:
    """Starts, stops and removes API queries on one :class:`CqlService`.

    One lock serialises every change: the operator limits are installed on the shared
    CqlService right before each submit, so two registrations cannot see each other's
    limits or miss each other's running shapes.
    """

    def __init__(self, cql: CqlService, applications: LevelApplications | None = None) -> None:
        """``applications``: where queries that have a level run (``level_applications =
        "separate"``); None runs every query in the server's own application."""
        self._cql = cql
        self._applications = applications
        self._queries: dict[str, LiveQuery] = {}
        self._lock = threading.RLock()

    def get(self, name: str) -> LiveQuery:
        with self._lock:
            query = self._queries.get(name)
        if query is None:
            raise NotFound("no such query")
        return query

    def maybe(self, name: str) -> LiveQuery | None:
        """The query named ``name``, None when there is none."""
        with self._lock:
            return self._queries.get(name)

    def by_output(self, stream: str) -> LiveQuery | None:
        return next((q for q in self.all() if q.output == stream), None)

    def all(self) -> list[LiveQuery]:
        with self._lock:
            return sorted(self._queries.values(), key=lambda q: q.name)

    def public_name(self, internal: str) -> str | None:
        """The name of the query whose engine name is ``internal``, without the registry's
        lock: a network's micro-batch asks while holding its batch lock, and a
        registration holds the registry's lock while it waits for that batch lock (to
        join the network), so taking it here could deadlock. Copying the values is one
        step under the GIL, so the snapshot is consistent."""
        return next((q.name for q in tuple(self._queries.values()) if q.internal == internal), None)

    def running_shapes(self, owner: str, besides: str | None = None) -> list[Shape]:
        """Shapes of ``owner``'s running queries (what operator limits count)."""
        return [
            q.shape
            for q in self.all()
            if q.owner == owner and q.running and q.shape is not None and q.name != besides
        ]

    def has(self, name: str) -> bool:
        with self._lock:
            return name in self._queries

    def add(self, query: LiveQuery) -> None:
        """Records a query (stopped) so that it can be started, listed and removed."""
        with self._lock:
            if query.name in self._queries:
                raise Conflict("a query of that name exists", codes.EXISTS)
            self._queries[query.name] = query

    def start(self, name: str, limits: OperatorLimits | None) -> LiveQuery:
        """Starts the query with its roles at its level (no-op when running): the query
        admitted at its registration while its roles, level and hierarchy still hold,
        else its text admitted anew. ``limits``: its operator limits, checked against the
        owner's other running queries; None when the caller checked them already (a
        registration, before the catalog recorded it)."""
        with self._lock:
            query = self.get(name)
            if query.running:
                return query
            if query.handle is not None:
                self._forget(query)
            query.error_class = query.failed_at = None
            running = self.running_shapes(query.owner, besides=name)
            delivery = query.delivery
            sink = StoringSink(query.store, delivery, wanted=lambda: bool(delivery.subscriptions))
            admitted, query.admitted = query.admitted, None
            engine = self._cql.queries  # the hierarchy in force, the same for every step
            effective = frozenset(engine.hierarchy.effective(query.roles))
            mask = tuple(engine.codec.query(query.roles))
            if (
                admitted is None
                or admitted.roles != query.roles
                or admitted.level != query.level
                or admitted.effective != effective
            ):  # admitted for other roles or hierarchy: admit it anew
                request = self._cql.admit(query.text, query.roles, query.level)
                if not isinstance(request, AdmittedQuery):
                    raise Invalid("the text is not a continuous query")
                admitted = request
            if limits is not None:
                limits.check(admitted.shape, admitted.effective, running)
            if self._applications is not None and query.level is not None:
                self._start_in_application(query, admitted)
                query.compiled(effective, mask)
                return self._started(query)
            result = self._cql.submit(
                admitted, CallbackSink(sink), name=query.internal, provider=query.owner
            )
            if not isinstance(result, RegisteredQuery):  # parse_request decided otherwise
                raise Invalid("the text is not a continuous query")
            query.handle = result
            query.shape = self._cql.shapes.get(query.internal, query.shape)
            query.compiled(effective, mask)
        return self._started(query)

    @staticmethod
    def _started(query: LiveQuery) -> LiveQuery:
        audit.info(
            "query %s (%s) started for %s with roles %s",
            query.name,
            query.internal,
            query.owner,
            query.roles,
        )
        return query

    def _start_in_application(self, query: LiveQuery, admitted: AdmittedQuery) -> None:
        """Hands ``query`` to its level's own application after the server's checks
        (admission with its roles at its level, operator limits); its results are the
        application's store for it, followed into its Delivery here."""
        assert self._applications is not None and query.level is not None
        engine = self._cql.queries
        if admitted.delegating:
            raise QueryRejected(
                "level_application",
                "ON RESULT writes to the server's catalog: it runs only with "
                "level_applications = in_process",
            )
        query.store = ResultStore(self._applications.results(query.level, query.internal))
        try:
            query.handle = ApplicationQuery.start(
                self._applications,
                query.level,
                query.internal,
                query.text,
                query.roles,
                query.store,
                query.delivery,
                engine.spark,
            )
        except ApplicationError as err:
            audit.error("query %s: its level's application failed: %s", query.name, err)
            raise Unavailable(
                "the level's own Spark application did not start or answer; try again "
                "later (the server's log says why)"
            ) from None
        query.shape = admitted.shape

    @contextmanager
    def levels_started(self, names: Sequence[str], ready: bool = False) -> Iterator[list[str]]:
        """Around starting ``names`` (a registration, a restart's queries): their levels'
        own applications start side by side first, since a driver's JVM start is most
        of a start; one left without a started query afterwards is stopped again.

        ``ready``: also wait here until each driver has started, and yield only the
        names that may start now (a name whose application did not start is left out:
        its start would only start another driver). The caller holds neither this
        registry's lock nor the server's while it waits, so a slow driver start blocks
        no other registration; each start then finds its driver running and only hands
        it the query. Without ``ready`` every name is yielded (restore at start-up)."""
        applications, warmed, startable = self._applications, [], list(names)
        with self._lock:
            queries = [self._queries[name] for name in names if name in self._queries]
        for query in queries:
            if applications is None or query.level is None:
                continue
            with self._lock:  # a failed run's handle: let go of its application first,
                if isinstance(query.handle, ApplicationQuery) and not query.running:
                    self._forget(query)  # or its start would stop the one started here
            try:
                application = applications.acquire(query.level, query.internal)
                warmed.append((query, application))
            except Exception as err:  # its own start tries again and says why
                audit.error("query %s: its level's application: %s", query.name, err)
        for query, application in warmed if ready else ():
            try:
                application.wait_ready()
            except ApplicationError as err:
                audit.error("query %s: its level's application: %s", query.name, err)
                startable.remove(query.name)
        try:
            yield startable
        finally:
            for query, _ in warmed:
                if applications is not None and not isinstance(query.handle, ApplicationQuery):
                    with suppress(ApplicationError):
                        applications.release(query.internal)

    def stop(self, name: str, reason: str = "query stopped") -> LiveQuery:
        """Stops the engine query at a batch boundary; its subscribers get ``closed``.

        The wait (bounded) lets a micro-batch being handed over reach every subscriber
        before the stop: a stop in the middle would cut off those served last.
        """
        handle = self.get(name).handle
        if handle is not None and handle.active:
            at_batch_boundary(handle.handle, STOP_AT_BOUNDARY_SECONDS)
        with self._lock:
            query = self.get(name)
            if query.handle is not None:
                self._forget(query)
            query.error_class = query.failed_at = None
        query.end_subscriptions(reason)
        return query

    def check_failures(self, on_failure: Callable[[LiveQuery, str], None]) -> list[LiveQuery]:
        """Marks queries the engine stopped on its own as failed (called every second).

        Each newly failed query gets ``error_class`` and ``failed_at``, its subscribers an
        ``error`` event, and ``on_failure(query, full_message)`` is called once (the full
        message may quote data values: it is for the administrators' audit only).
        """
        failed = []
        with self._lock:
            for query in self._queries.values():
                if query.handle is None or query.error_class is not None or query.handle.active:
                    continue
                failure = query.handle.handle.exception()
                query.error_class = failure_class(failure)
                query.failed_at = time.time()
                failed.append((query, str(failure) if failure else "stopped outside the server"))
        for query, message in failed:
            audit.error("query %s failed: %s", query.name, query.error_class)
            query.end_subscriptions(f"query failed ({query.error_class})", "error")
            try:
                on_failure(query, message)
            except Exception as err:  # auditing must not stop the watch
                audit.error("recording the failure of %s failed: %s", query.name, err)
        return [query for query, _ in failed]

    def restartable(self, after: float) -> list[str]:
        """Queries failed at least ``after`` seconds ago for a cause that passes (their
        storage, their level's application: :data:`RESTARTED`)."""
        now = time.time()
        return [
            q.name
            for q in self.all()
            if q.error_class in RESTARTED and now - (q.failed_at or now) >= after
        ]

    def restart(self, names: list[str], limits: OperatorLimits) -> list[str]:
        """Starts again queries failed for a cause that passes (the names started). One
        that fails again is marked again (by :meth:`check_failures`, or here with its
        cause when its start fails) and retried later: it recovers once space returns or
        its level's application starts."""
        started = []
        for name in names:
            cause = self.get(name).error_class or STORAGE_UNAVAILABLE
            try:
                self.start(name, limits)
                started.append(name)
                audit.info("query %s restarted after %s", name, cause)
            except Exception as err:  # still failing: the next round tries again
                with self._lock:
                    query = self.get(name)
                    query.error_class, query.failed_at = cause, time.time()
                audit.error("query %s not restarted yet: %s", name, type(err).__name__)
        return started

    def _forget(self, query: LiveQuery) -> None:
        """Stops the engine query (a shared join only with its last subscriber; a
        level's application with its last query)."""
        if isinstance(query.handle, ApplicationQuery):
            query.handle.stop()
            query.handle = None
            return
        try:
            self._cql.stop(query.internal)
        except KeyError:  # already gone from the engine's books (failed and cleaned up)
            if query.handle is not None:
                query.handle.stop()
        query.handle = None

    def remove(self, name: str) -> LiveQuery:
        with self._lock:
            query = self.stop(name, "query removed")
            self._queries.pop(name)
        query.store.clear()
        return query

    def remove_quietly(self, name: str) -> None:
        """Removes the query if it is known (undoing a registration that failed)."""
        with self._lock:
            if name in self._queries:
                self.remove(name)

    def stop_all(self) -> None:
        for query in self.all():
            self.stop(query.name, "server stopping")

    def running_names(self) -> Sequence[str]:
        return [q.name for q in self.all() if q.running]
