"""Event patterns (complex event processing) behind the HTTP API (docs/cep.md).

A pattern is an OxRBAC *query* object (``ADD`` on SYSTEM, ``READ`` on every stream it
reads, the owner's quota, ``SET QUERY STATUS``, ``VIEW OBJECT``; its output stream
``<name>_out`` is what ``SUBSCRIBE`` is granted on), registered with the roles of the
session that registers it. Its event types are streams of the server: each is read
through the secured view of those roles (the Security Shield's tuple filter and
attribute masks, as for any query), and then through the role's protection engine
(:mod:`streamshield.cep.protection`). The administrator's per-role attribute operators
(:mod:`streamshield.policy.cep_rules`) are one JSON document, changed with ``PUT
/cep/rules`` (CHANGE SYSTEM) and kept under ``<root>/cep/rules.json``; running patterns
apply a change from their next micro-batch (:mod:`streamshield.cep.running`).

A pattern runs at the Chinese-Wall level of the session registering it (while levels
are on), in that level's query processor, shared with the level's SQL queries
(``CqlService.processors``: session, scheduler pool, storage, shepherd): it reads only
events whose level that level dominates, its state lives under the level's directory,
and its rows carry the labels of the events they were built from
(:mod:`streamshield.cep.match_labels`).

Delivery checks the recipient, at every read (``rows``) and every batch (the SSE
subscription): she may SUBSCRIBE to the output, holds READ TUPLE on every stream the
pattern reads, and her *own* activated roles would be allowed to register the pattern
under the rules in force (paper 4: "PSPE will also receive the output ... and send the
result to the user within the user role of such space"); then each row goes through
:class:`~streamshield.engine.delivery.delivery.Delivery` like a query's: her roles against the
row's and each column's labels, her READ rights against its provenance, her session's
level against its level.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from streamshield.cep.labelled_events import labelled_events
from streamshield.cep.match_labels import Absence, LabelLayout
from streamshield.cep.pattern import TIME, Pattern, PatternError, compile_pattern
from streamshield.cep.rule_book import RuleBook
from streamshield.cep.running import RunningPattern, Status
from streamshield.cep.validation import PatternRefused, narrower_for, validate
from streamshield.durable import write_atomic
from streamshield.engine.delivery.delivery import Delivery, Subscription
from streamshield.engine.levels.level_processor import LevelProcessor
from streamshield.engine.store.labelled_store import labelled_schema, read_stream
from streamshield.engine.store.result_store import ResultStore
from streamshield.engine.views.level_columns import at_output_level
from streamshield.lang.output_level import OutputLevel
from streamshield.policy.cep_rules import AccessObject
from streamshield.policy.cep_rules_text import RulesError, dumps, from_document
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import RoleHierarchy
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound
from streamshield.server.subscriptions import json_value

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

audit = logging.getLogger("streamshield.audit")
KINDS = {"bigint": "long", "int": "long", "long": "long", "double": "double", "float": "double"}
KEPT_BATCHES = 1000  # micro-batches of a pattern's rows kept (oldest dropped first)
READ_BATCHES = 50  # stored batches one ``rows`` read goes through (the rest: read again)
DELAY = timedelta(seconds=10)  # how late an event may arrive and still be matched
TRIGGER = {"processingTime": "1 second"}


@dataclass
class Registered:
    name: str
    text: str
    owner: str
    roles: tuple[str, ...]
    running: RunningPattern = field(init=False)
    """Set once the record exists: the running pattern's sink writes to the record."""
    store: ResultStore
    """Each micro-batch's labelled rows (what ``rows`` and a resumed subscription read)."""
    delivery: Delivery
    """SecFilter per recipient, shared with the query path."""
    key: str | None = None
    level: QueryLevel | None = None
    """The Chinese-Wall level it runs at (None while levels are off)."""
    closers: dict[str, Callable[[str, str], None]] = field(default_factory=dict)
    """Live subscriptions' ``close`` (an SSE stream ends when the pattern does)."""
    delivered: int = 0  # rows ever produced (before any recipient's check)

    @property
    def output(self) -> str:
        return f"{self.name}_out"

    def end_subscriptions(self, reason: str, event: str = "closed") -> None:
        for close in list(self.closers.values()):
            close(reason, event)


SEPARATE_LEVELS = (
    "event patterns do not run in a level's own Spark application "
    "(level_applications = separate): they would run in the server's shared one; "
    "use level_applications = in_process for patterns at a level"
)


class PatternService:
    """Registers, runs and delivers event patterns; one per server."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.root = Path(server.root) / "cep"
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.patterns: dict[str, Registered] = {}
        rules = self.root / "rules.json"
        access = AccessObject({}, {})
        if rules.exists():
            access = from_document(json.loads(rules.read_text()), self._rights()[1])
        # The roles are asked of the server at every read, never kept: a role created or
        # an edge changed at run time is what the next registration, rules change,
        # recipient check and running pattern's micro-batch see.
        self.book = RuleBook(access, self._rights)
        self._stored = self.root / "patterns.json"  # name -> text, owner, roles

    def _rights(self) -> tuple[Any, RoleHierarchy]:
        """The rights stamp and the role hierarchy in force (``RuleBook``'s rights)."""
        return self.server.rights_stamp(), self.server.pipeline.queries.hierarchy

    def _acting(
        self,
        owner: str,
        registered: Iterable[str],
        level: QueryLevel | None,
        inputs: Sequence[str],
    ) -> Callable[[], frozenset[str]]:
        """What a running pattern of ``owner`` asks after every change of rights: the
        roles of its registration (``registered``) she may act with now, while she still
        holds READ (TUPLE or AGGREGATE) on every stream it reads and, with levels on, her
        clearance dominates its level; PatternRefused naming what she lost otherwise.
        Catalog reads happen only then, never per micro-batch."""

        def acting() -> frozenset[str]:
            security = self.server.security
            roles = port.held_roles(security, owner) & frozenset(registered)
            if not roles:
                raise PatternRefused(
                    f"its owner {owner} acts with none of the roles it was registered with"
                )
            raw, aggregate = security.readable_sources(owner)
            for stream in inputs:
                if stream not in raw and stream not in aggregate:
                    raise PatternRefused(f"its owner {owner} no longer holds READ on {stream}")
            if level is not None and not port.clearance_dominates(security, owner, level):
                raise PatternRefused(
                    f"its owner's clearance no longer dominates its level {level.text}"
                )
            return roles

        return acting

    def _save(self) -> None:
        """The definitions, so that patterns survive a restart (checkpoints resume them)."""
        document = {
            name: {
                "text": p.text,
                "owner": p.owner,
                "roles": list(p.roles),
                "key": p.key,
                "level": p.level.text if p.level is not None else None,
            }
            for name, p in self.patterns.items()
        }
        write_atomic(self._stored, json.dumps(document, indent=2, sort_keys=True))

    def is_pattern(self, name: str) -> bool:
        return name in self.patterns

    def stored(self, name: str) -> bool:
        """Whether ``name`` is a pattern of a previous run (not a SQL query)."""
        return self._stored.exists() and name in json.loads(self._stored.read_text())

    def restore(self) -> None:
        """Patterns of a previous run, with their owner's recorded roles she still holds;
        those recorded as running start from their checkpoints (a pattern the rules now
        refuse stays stopped with the reason)."""
        if not self._stored.exists():
            return
        stored = json.loads(self._stored.read_text())
        security = self.server.security
        records = {r.name: r for r in port.all_queries(security)}
        edition = self.book.current()
        for name, entry in stored.items():
            record = records.get(name)
            if record is None or name in self.patterns:
                continue
            held = port.held_roles(security, entry["owner"])
            roles = tuple(sorted(set(entry["roles"]) & held))
            try:
                pattern = compile_pattern(entry["text"], edition.access.event_types)
            except PatternError as err:
                audit.error("pattern %s not restored: %s", name, err)
                continue
            level = port.stored_query_level(security, entry.get("level"))
            registered = self._registered(
                name, entry["text"], entry["owner"], roles, pattern, entry.get("key"), level
            )
            self.patterns[name] = registered
            if str(record.status) != "running" or not roles:
                continue
            try:
                self._refuse_in_separate_levels(level)
            except Conflict:
                registered.running.status = Status.STOPPED
                registered.running.reason = f"not restarted: {SEPARATE_LEVELS}"
                audit.error("pattern %s not restarted: %s", name, SEPARATE_LEVELS)
                continue
            try:
                registered.running.start()
            except PatternRefused as refused:
                registered.running.status = Status.STOPPED
                registered.running.reason = f"not restarted: {refused}"

    # -- rules -----------------------------------------------------------------------

    def rules(self, session: Session) -> dict:
        """Administrators: the whole document. Others: the operator on each attribute
        for their activated roles (no condition constants: those are data)."""
        edition = self.book.current()
        if self._admin(session):
            return {"version": edition.version, "rules": json.loads(dumps(edition.access))}
        effective = edition.access.effective(edition.hierarchy, port.roles_of(session))
        mine = {t: {a: str(r.operator) for a, r in attrs.items()} for t, attrs in effective.items()}
        return {"version": edition.version, "operators": mine}

    def set_rules(self, session: Session, document: Any) -> dict:
        if not self._admin(session):
            raise Forbidden("changing the attribute operators needs CHANGE SYSTEM")
        edition = self.book.current()
        try:
            access = from_document(document, edition.hierarchy)
        except RulesError as err:
            raise Invalid(f"rules: {err}") from None
        self._check_streams(access)
        write_atomic(self.root / "rules.json", dumps(access))
        edition = self.book.replace(access)
        audit.info("cep rules version %d set by %s", edition.version, port.user_of(session))
        return {"version": edition.version}

    def _check_streams(self, access: AccessObject) -> None:
        """Every event type is a stream with the declared attributes and an event time."""
        streams = self.server.pipeline.queries.streams
        for type_, attrs in access.event_types.items():
            definition = streams.get(type_)
            if definition is None:
                raise Invalid(f"rules: event_types.{type_}: not a stream of this server")
            if attrs.get(TIME) != "timestamp":
                raise Invalid(f"rules: event_types.{type_}: needs {TIME} of kind timestamp")
            types = dict(definition.attributes)
            for name, kind in attrs.items():
                actual = types.get(name)
                if actual is None or KINDS.get(actual, actual) != kind:
                    raise Invalid(
                        f"rules: event_types.{type_}.{name}: not an attribute of kind {kind} "
                        "of the stream"
                    )

    # -- registration and life cycle ------------------------------------------------------

    def register(self, session: Session, name: str, text: str, key: str | None = None) -> dict:
        """Parse, check against the event types, validate against the session's operators,
        then record it as a query object and start it at the session's level."""
        security = self.server.security  # audited once it started, or refused
        level = port.session_query_level(security, session)
        self._refuse_in_separate_levels(level)
        edition = self.book.current()
        try:
            pattern = self._compiled(text, edition.access)
            _check_key(pattern, key, edition.access)
            roles = tuple(sorted(port.roles_of(session)))
            effective = self.server.pipeline.queries.hierarchy.effective(roles)
            limits = self.server.query_requests.limits()
            limits.check_span(effective, pattern.within.total_seconds())
            try:
                validate(pattern, edition.access, edition.hierarchy, roles, key=key)
            except PatternRefused as refused:
                raise Forbidden(f"pattern refused: {refused}") from None
        except Exception as err:
            port.refused(security, session, name, err, recorded=False)
            raise
        with self._lock:
            if name in self.patterns:
                raise Conflict(f"pattern {name} exists")
            inputs = sorted({i.type for i in pattern.items})
            port.add_query(security, session, name, inputs, f"{name}_out", False)
            owner = port.user_of(session)
            registered = self._registered(name, text, owner, roles, pattern, key, level)
            try:
                registered.running.start()
            except BaseException as err:
                port.refused(security, session, name, err, recorded=True)
                raise
            port.registered(security, session, name)
            self.patterns[name] = registered
            self._save()
        return self.describe(registered)

    def _refuse_in_separate_levels(self, level: QueryLevel | None) -> None:
        """A pattern runs in the level's processor inside the server's own Spark
        application; with ``level_applications = separate`` the operator asked that a
        level's work run only in the level's own application, which patterns cannot do
        yet. Refused (409), never run in the shared application instead."""
        if level is not None and getattr(self.server, "applications", None) is not None:
            raise Conflict(SEPARATE_LEVELS, codes.LEVEL_APPLICATIONS)

    def _compiled(self, text: str, access: AccessObject) -> Pattern:
        try:
            return compile_pattern(text, access.event_types)
        except PatternError as err:
            raise Invalid(f"pattern: {err}") from None

    def _registered(
        self,
        name: str,
        text: str,
        owner: str,
        roles: tuple[str, ...],
        pattern: Pattern,
        key: str | None,
        level: QueryLevel | None,
    ) -> Registered:
        delivery = self.server.query_requests.delivery(pattern.aggregated, f"{name}_out", name)
        store = ResultStore(self.root / "results" / name, keep=KEPT_BATCHES)
        registered = Registered(
            name,
            text,
            owner,
            roles,
            store,
            delivery,
            key,
            level,
        )
        registered.running = self._running(registered, pattern)
        return registered

    def _running(self, registered: Registered, pattern: Pattern) -> RunningPattern:
        level = registered.level

        def sink(frame: DataFrame, batch_id: int) -> None:
            """Store the batch (executed whoever listens), then hand it to the live
            subscribers through SecFilter; Python per micro-batch only."""
            if level is not None:  # a match depends on several events (and on absences)
                frame = at_output_level(frame, level, OutputLevel.QUERY)
            stored = registered.store.write(frame, batch_id)
            count = stored.count()
            with self._lock:
                registered.delivered += count
            if count and registered.delivery.subscriptions:
                registered.delivery(stored, batch_id)

        def sources(processor: LevelProcessor, roles: frozenset[str]) -> Mapping[str, DataFrame]:
            return {i.type: self._secured(i.type, roles, level, processor) for i in pattern.items}

        def labels(roles: frozenset[str]) -> LabelLayout:
            return self._layout(level, tuple(sorted(roles)), pattern)

        return RunningPattern(
            pattern,
            registered.roles,
            self.book,
            sources,
            lambda _rows: None,
            name=registered.name,
            processors=self.server.cql.processors,
            level=level,
            delay=DELAY,
            key=registered.key,
            trigger=TRIGGER,
            labels=labels,
            sink=sink,
            earlier=self.root / "checkpoints" / registered.name,
            acting=self._acting(
                registered.owner, registered.roles, level, sorted({i.type for i in pattern.items})
            ),
        )

    def _layout(
        self,
        level: QueryLevel | None,
        roles: Iterable[str] = (),
        pattern: Pattern | None = None,
    ) -> LabelLayout:
        """The label widths; with ``pattern``, also what its NOT matches' rows are
        labelled with (its roles' view of the negated types, at its level)."""
        queries = self.server.pipeline.queries
        width = level.width if level is not None else 0
        absence = None
        if pattern is not None and pattern.negations:
            negated = sorted({i.type for i in pattern.negations})
            absence = Absence(
                queries.codec.query(roles),
                level.words if level is not None else (),
                tuple((t, queries.provenance.label(t)) for t in negated),
            )
        return LabelLayout(queries.codec.width, queries.provenance.width, width, absence)

    def _secured(
        self,
        stream: str,
        roles: Iterable[str],
        level: QueryLevel | None,
        processor: LevelProcessor,
    ) -> DataFrame:
        """The stream's labelled store, read in the level's processor, through the
        secured view of ``roles`` at ``level`` (only events whose level it dominates),
        each event with the labels a match is built from: its tuple label, each
        attribute's (renamed by attribute name), its stream's provenance and its level."""
        queries = self.server.pipeline.queries
        schema = queries.streams[stream]
        path = queries.labelled.path(stream)
        path.mkdir(parents=True, exist_ok=True)
        session = processor.session
        layout = self._layout(level)
        struct = labelled_schema(
            session, schema.ddl, len(schema.names), layout.width, layout.levels
        )
        labelled = read_stream(session, struct, path)  # RunningPattern adds the shepherd above
        provenance = queries.provenance.label(stream)
        return labelled_events(labelled, schema, queries.codec, roles, level, provenance, layout)

    def _get(self, session: Session, name: str) -> Registered:
        registered = self.patterns.get(name)
        if registered is None or not port.check(
            self.server.security, session, "VIEW OBJECT", "query", name
        ):
            raise NotFound(f"no pattern {name}")
        return registered

    def list(self, session: Session) -> list[dict]:
        return [
            self.describe(p)
            for name, p in sorted(self.patterns.items())
            if port.check(self.server.security, session, "VIEW OBJECT", "query", name)
        ]

    def explain(self, session: Session, name: str) -> dict:
        """Status and what the pattern's roles' operators release to it, per variable."""
        registered = self._get(session, name)
        edition = self.book.current()
        pattern = registered.running.pattern
        roles = registered.running.roles  # those of its registration it runs with now
        effective = edition.access.effective(edition.hierarchy, roles)
        variables = []
        for item in pattern.items:
            rules = effective.get(item.type, {})
            variables.append(
                {
                    "variable": item.var,
                    "event_type": item.type,
                    "negated": item.negated,
                    "operators": {a: str(r.operator) for a, r in sorted(rules.items())},
                }
            )
        try:
            clearance = validate(
                pattern, edition.access, edition.hierarchy, roles, key=registered.key
            )
            legal, k_rule = True, clearance.statistics
        except PatternRefused:
            legal, k_rule = False, False
        return {
            **self.describe(registered),
            "rules_version": edition.version,
            "legal_now": legal,
            "k_rule": k_rule,
            "variables": variables,
        }

    def set_status(self, session: Session, name: str, running: bool) -> dict:
        registered = self._get(session, name)
        if running:
            self._refuse_in_separate_levels(registered.level)
        port.set_query_status(
            self.server.security, session, name, "running" if running else "stopped"
        )
        if running and registered.running.status is not Status.RUNNING:
            try:
                registered.running.start()
            except PatternRefused as refused:
                port.set_query_status(self.server.security, session, name, "stopped")
                raise Forbidden(f"pattern refused: {refused}") from None
        elif not running:
            registered.running.stop()
            registered.end_subscriptions("pattern stopped")
        return self.describe(registered)

    def remove(self, session: Session, name: str) -> None:
        registered = self._get(session, name)
        port.remove_query(self.server.security, session, name)
        # A pattern registered later under the same name must not resume this one's state.
        registered.running.forget()
        registered.end_subscriptions("pattern removed")
        registered.store.clear()
        with self._lock:
            self.patterns.pop(name, None)
            self._save()

    def receivable(self, session: Session, name: str) -> Registered:
        """The pattern, if the caller may receive its rows now: SUBSCRIBE on the output,
        READ TUPLE on every stream it reads, and her own operators allow the pattern
        (each row is then checked against her roles, rights and level by Delivery)."""
        registered = self._get(session, name)
        security = self.server.security
        if not port.can_subscribe(security, session, registered.output):
            raise Forbidden(f"no SUBSCRIBE on {registered.output}")
        for item in registered.running.pattern.items:  # a match shows every event type
            if not port.check(security, session, "READ TUPLE", "stream", item.type):
                raise Forbidden(f"no READ TUPLE on stream {item.type}")
        edition = self.book.current()
        try:
            validate(
                registered.running.pattern,
                edition.access,
                edition.hierarchy,
                port.roles_of(session),
                key=registered.key,
            )
        except PatternRefused as refused:
            raise Forbidden(f"your roles may not receive this pattern: {refused}") from None
        wider = narrower_for(
            registered.running.pattern,
            edition.access,
            edition.hierarchy,
            port.roles_of(session),
            registered.running.roles,
        )
        if wider is not None:
            raise Forbidden(
                f"your roles may not receive this pattern: attribute {wider} is released "
                "to the pattern's roles beyond your operators"
            )
        return registered

    def may_still_receive(self, token: str, name: str) -> bool:
        """Per delivered batch of a live subscription: every check of :meth:`receivable`."""
        try:
            self.receivable(port.session(self.server.security, token), name)
        except Exception:
            return False
        return True

    def subscribable(self, session: Session, name: str) -> Registered:
        """:meth:`receivable`, and running (nothing comes from a stopped pattern: 409)."""
        registered = self.receivable(session, name)
        status = registered.running.observed()
        if status is not Status.RUNNING:
            why = f" ({registered.running.reason})" if registered.running.reason else ""
            raise Conflict(
                f"the pattern is {status}{why}: it produces nothing until it is started again",
                codes.PATTERN_NOT_RUNNING,
            )
        return registered

    def rows(self, session: Session, token: str, name: str, after: int) -> dict:
        """The rows of the stored batches after batch ``after`` that the caller may have
        now (at most READ_BATCHES batches a read; ``last`` says where to go on; ``gap``:
        the batches after ``after`` pruned before they were read)."""
        registered = self.receivable(session, name)
        gap, stored = registered.store.since(after)
        batches = stored[:READ_BATCHES]
        got: list[dict] = []

        def collect(rows: list[dict], batch: int) -> None:
            got.extend({"batch": batch, **_plain(row)} for row in rows)

        reader = Subscription(port.user_of(session), collect, token, batched=True)
        for batch in batches:
            frame = registered.store.stored(batch, self.server.spark)
            if frame is not None:
                registered.delivery.replay(frame, batch, reader)
        last = batches[-1] if batches else max(after, gap[1] if gap else after)
        status = str(registered.running.observed())
        missing = {"first": gap[0], "last": gap[1]} if gap else None
        return {"name": name, "status": status, "rows": got, "last": last, "gap": missing}

    def check_ended(self) -> None:
        """Ends the live subscriptions of patterns no longer running (a rule change, a
        failure): called by the server's watch every second."""
        for registered in list(self.patterns.values()):
            if registered.closers and registered.running.observed() is not Status.RUNNING:
                reason = registered.running.reason or "pattern stopped"
                event = "error" if registered.running.status is Status.FAILED else "closed"
                registered.end_subscriptions(
                    f"pattern {registered.running.status}: {reason}", event
                )

    def stop_all(self) -> None:
        for registered in list(self.patterns.values()):
            registered.running.stop()

    def describe(self, registered: Registered) -> dict:
        return {
            "name": registered.name,
            "pattern": registered.text,
            "owner": registered.owner,
            "roles": list(registered.roles),
            "output": registered.output,
            "key": registered.key,
            "level": registered.level.text if registered.level is not None else None,
            "status": str(registered.running.observed()),
            "reason": registered.running.reason,
            "restarts": registered.running.restarts,
            "delivered": registered.delivered,
        }

    def _admin(self, session: Session) -> bool:
        return port.check(self.server.security, session, "CHANGE SYSTEM", "system", "system")


def _plain(row: dict) -> dict:
    """JSON-able values (timestamps as ISO-8601 with their zone, as the SSE rows)."""
    return {k: (json_value(v) if isinstance(v, date) else v) for k, v in row.items()}


def _check_key(pattern: Pattern, key: str | None, access: AccessObject) -> None:
    """A partition key is an attribute of one kind on every event type of the pattern,
    not the event time, and not the name of an output column (it leads every row)."""
    if key is None:
        return
    if key == TIME:
        raise Invalid(f"key: the event time {TIME} cannot be a partition key")
    kinds = set()
    for item in pattern.items:
        kind = access.event_types.get(item.type, {}).get(key)
        if kind is None:
            raise Invalid(f"key: event type {item.type} has no attribute {key}")
        kinds.add(kind)
    if len(kinds) > 1:
        raise Invalid(f"key: attribute {key} has different kinds on the pattern's event types")
    if key in {o.name for o in pattern.outputs} or key in ("window_start", "window_end"):
        raise Invalid(f"key: {key} is also an output column name")
