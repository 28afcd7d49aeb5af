"""The API's query requests: register, INSERT SP, start and stop, remove, subscribe.

Object-level checks first (paper 5, section 3.1): a query or stream the caller may not
view is reported as missing (404), one she may view but not use as forbidden (403); the
quota and the operator limits next, checked once, before the catalog records anything;
then the engine, given the query admitted once (lang/admission.py). Each query's rows
leave through its :class:`~streamshield.engine.delivery.delivery.Delivery`, whose
SecFilter asks, per batch, the subscriber's own rights, roles and level of now (the
recipient decides, DESIGN.md 5a).

The server's life cycle (restore, the rights watch, reconciling queries with their
owners' rights, stopping) is :class:`~streamshield.server.service.ServerService`'s; it
builds each stored query through :meth:`QueryRequests.live` as a registration does.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from streamshield.engine.delivery.delivery import Delivery, Subscription
from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.store.result_store import ResultStore
from streamshield.faults import crash_point
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.lang.continuous import ContinuousQuery, SpInsert
from streamshield.policy.bitset import Words
from streamshield.policy.operator_limits import OperatorLimits
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.access_gates import require_visible
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound, Unavailable
from streamshield.server.ingest_guard import IngestHalt
from streamshield.server.metrics import ServerMetrics
from streamshield.server.queries import LiveQuery, QueryRegistry
from streamshield.server.query_store import QueryStore, StoredQuery
from streamshield.server.retention_watch import RetentionWatch
from streamshield.server.switch_service import SwitchService

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

audit = logging.getLogger("streamshield.audit")
RECOVERY_SECONDS = 30.0


class QueryRequests:
    """The query requests of one server, each taking the caller's session first."""

    def __init__(
        self,
        security: Any,
        pipeline: Pipeline,
        registry: QueryRegistry,
        stored: QueryStore,
        switches: SwitchService,
        retention: RetentionWatch,
        halt: IngestHalt,
        metrics: ServerMetrics,
        lock: threading.RLock,
        applications: LevelApplications | None = None,
    ) -> None:
        """``lock``: the server's, which every change of the registry holds;
        ``halt``: ingest's, which refuses sps while ingest is halted."""
        self.security = security
        self.pipeline = pipeline
        self.cql = pipeline.cql
        self.queries = registry
        self.stored = stored
        self.switches = switches
        self.retention = retention
        self.halt = halt
        self.metrics = metrics
        self._lock = lock
        self.applications = applications

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
            query = self.live_query(stored, user, admitted.roles, admitted.streams, aggregate)
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

    def live_query(
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
            self.delivery(aggregate, stored.output, stored.name),
            ResultStore(self.pipeline.root / "results" / stored.internal),
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
                    lost = right_lost(self.security, query, query.owner, query.roles, {})
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
                self.queries.check_failures(self.failed)
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

    def delivery(self, aggregate: bool, output: str, name: str = "") -> Delivery:
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
        if subscription.acting is not None:  # a sink: its attached roles still held
            roles: tuple[str, ...] | frozenset[str] = subscription.acting.roles_now(self.security)
        else:
            roles = port.roles_of(port.session(self.security, subscription.session))
        return self.pipeline.queries.codec.query(roles)

    def _recipient_level(self, subscription: Subscription) -> Words | None:
        """The subscriber's session level now (DESIGN.md 5a: the recipient decides)."""
        if subscription.acting is not None:
            return subscription.acting.level_now(self.security)
        return port.recipient_level(
            self.security, port.session(self.security, subscription.session)
        )

    def failed(self, query: LiveQuery, message: str) -> None:
        port.record_query_failure(
            self.security, query.owner, query.name, query.error_class or "", message
        )

    def may_still_subscribe(self, token: str, output: str) -> bool:
        """Checked per delivered batch: the session is alive and SUBSCRIBE still held."""
        try:
            return port.can_subscribe(self.security, port.session(self.security, token), output)
        except Exception:
            return False


def right_lost(
    security: Any,
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
        readable[owner] = security.readable_sources(owner)
    raw, aggregate = readable[owner]
    for stream in query.inputs:
        if stream not in raw and stream not in aggregate:
            return f"its owner no longer holds READ on {stream}"
    level = query.level
    if level is not None and not port.clearance_dominates(security, owner, level):
        return f"its owner's clearance no longer dominates its level {level.text}"
    return None
