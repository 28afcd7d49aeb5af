"""Sinks: a query's rows written for one recipient into a Kafka topic or a Delta table.

A user who may SUBSCRIBE to a query's output attaches a sink to it; every row the sink
writes is exactly what her own SSE subscription would receive. It is one more
subscriber of the query's Delivery (SecFilter), acting as a
:class:`~streamshield.server.standing_recipient.StandingRecipient`: her user, the roles
of the session she attached it from (only those she still holds), that session's level
(re-checked against her clearance). Every micro-batch asks again, before anything is
written, whether she still holds SUBSCRIBE on the output with those roles: a revocation
stops the sink within one micro-batch, and the batches produced while she may not
receive them are skipped for good, never written later (a sink is not a way around a
revocation). Masked columns are named in each row's ``_masked``, as on SSE.

Batches are written in order, in the query's own delivery (a sink holds its query's
batches while it writes: ``docs/connectors.md`` says what that costs). ``last_batch``,
the last batch written or skipped, is kept in ``<root>/sinks/<name>.json`` (mode 0600:
it may hold broker credentials). A write that fails leaves it where it was; the next
batch, and the server's next start, first write again the batches after it from the
query's result store, through the same checks with her rights of then-now; Delta skips
what it already committed (exactly once), Kafka consumers skip by batch id
(at-least-once).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from streamshield.catalog.streams import check_name
from streamshield.connectors.sink_targets import (
    DeltaTarget,
    DeltaWriter,
    KafkaTarget,
    KafkaWriter,
    Writer,
)
from streamshield.durable import write_atomic
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.errors import Conflict, Forbidden, NotFound
from streamshield.server.standing_recipient import StandingRecipient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamshield.catalog.security import Session
    from streamshield.engine.delivery.delivery import Subscription
    from streamshield.server.queries import LiveQuery, QueryRegistry
    from streamshield.server.query_requests import QueryRequests

log = logging.getLogger("streamshield.sinks")

Target = Annotated[KafkaTarget | DeltaTarget, Field(discriminator="kind")]


class SinkRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The sink's name (an identifier, unique on the server)")
    target: Target

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "a sink's name")


class StoredSink(BaseModel):
    name: str
    query: str
    user: str
    roles: list[str]
    level: str | None = None
    target: Target
    last_batch: int = -1


class _Sink:
    def __init__(self, stored: StoredSink, writer: Writer) -> None:
        self.stored, self.writer = stored, writer
        self.recipient = StandingRecipient(stored.user, frozenset(stored.roles), stored.level)
        self.status = "waiting: the query is not running"
        self.subscription: Subscription | None = None
        self.query: LiveQuery | None = None
        self.lock = threading.Lock()
        self.written = 0
        self.behind = True  # batches after last_batch may be stored: write them first


class SinkService:
    def __init__(
        self,
        security: Any,
        requests: QueryRequests,
        queries: QueryRegistry,
        spark: SparkSession,
        root: Path,
    ) -> None:
        self.security, self.requests, self.queries, self.spark = security, requests, queries, spark
        self.root = root.resolve()
        self.directory = root / "sinks"
        self._sinks: dict[str, _Sink] = {}
        self._lock = threading.Lock()

    # -- requests ----------------------------------------------------------------------------

    def attach(self, session: Session, query_name: str, request: SinkRequest) -> dict:
        query = self.requests.subscribable(session, query_name)  # VIEW, SUBSCRIBE, running
        self._allowed(request.target)
        level = self.security.session_level(session)
        lattice = self.security.lattice() if level is not None else None
        stored = StoredSink(
            name=request.name,
            query=query.name,
            user=port.user_of(session),
            roles=sorted(port.roles_of(session)),
            level=lattice.format(level) if lattice is not None else None,
            target=request.target,
            last_batch=max(query.store.batches(), default=-1),  # from the next batch on
        )
        with self._lock:
            if request.name in self._sinks or self._path(request.name).exists():
                raise Conflict(f"a sink named {request.name} exists", codes.EXISTS)
            sink = _Sink(stored, self._writer(stored))
            sink.behind = False
            self._keep(sink)
            self._sinks[request.name] = sink
        # From the next batch on; nothing before it (a new subscriber gets live rows).
        self._subscribe(sink, query, catch_up=False)
        return self.describe(sink)

    def detach(self, session: Session, name: str) -> None:
        sink = self._visible(session, name)
        with self._lock:
            self._sinks.pop(name, None)
            self._path(name).unlink(missing_ok=True)
        self._unsubscribe(sink)
        sink.writer.close()

    def listed(self, session: Session) -> list[dict]:
        admin = self._admin(session)
        user = port.user_of(session)
        return [
            self.describe(s)
            for _, s in sorted(self._sinks.items())
            if admin or s.stored.user == user
        ]

    def shown(self, session: Session, name: str) -> dict:
        return self.describe(self._visible(session, name))

    @staticmethod
    def describe(sink: _Sink) -> dict:
        stored = sink.stored
        target = stored.target.model_dump(mode="json")
        if isinstance(target.get("security"), dict):
            target["security"].pop("password", None)
        return {
            "name": stored.name,
            "query": stored.query,
            "user": stored.user,
            "roles": stored.roles,
            "level": stored.level,
            "target": target,
            "status": sink.status,
            "last_batch": stored.last_batch,
            "rows_written": sink.written,
        }

    # -- the server's life -------------------------------------------------------------------

    def restore(self) -> None:
        """Every kept sink, subscribed again, with the batches it missed written first."""
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob("*.json")):
            if path.stem in self._sinks:
                continue  # running already
            try:
                stored = StoredSink.model_validate_json(path.read_text("utf-8"))
                sink = _Sink(stored, self._writer(stored))
            except (OSError, ValidationError, ValueError) as err:
                log.error("sink %s not restored: %s", path.stem, type(err).__name__)
                continue
            with self._lock:
                self._sinks[stored.name] = sink
            query = self.queries.maybe(stored.query)
            if query is not None:
                self._subscribe(sink, query, catch_up=True)

    def follow_queries(self) -> None:
        """Subscribes the sinks whose query came (back) since (the server's watch)."""
        for sink in list(self._sinks.values()):
            query = self.queries.maybe(sink.stored.query)
            if query is not None and query is not sink.query:
                self._unsubscribe(sink)
                self._subscribe(sink, query, catch_up=True)
            elif query is None and sink.query is not None:
                self._unsubscribe(sink)
                sink.status = "waiting: the query is removed"

    def stop_all(self) -> None:
        for sink in list(self._sinks.values()):
            self._unsubscribe(sink)
            sink.writer.close()

    # -- delivery ----------------------------------------------------------------------------

    def _subscribe(self, sink: _Sink, query: LiveQuery, catch_up: bool) -> None:
        def deliver(rows: list[dict], batch_id: int) -> None:
            self._batch(sink, query, rows, batch_id)

        sink.query = query
        sink.subscription = query.delivery.subscribe(
            sink.stored.user, deliver, "", batched=True, acting=sink.recipient
        )
        sink.status = "ok"
        if catch_up:
            with sink.lock:
                self._catch_up(sink, query, None)

    def _unsubscribe(self, sink: _Sink) -> None:
        if sink.query is not None and sink.subscription is not None:
            sink.query.delivery.unsubscribe(sink.subscription)
        sink.query = sink.subscription = None

    def _batch(self, sink: _Sink, query: LiveQuery, rows: list[dict], batch_id: int) -> None:
        with sink.lock:
            if batch_id <= sink.stored.last_batch:
                return  # replayed by the engine after a restart: written already
            if sink.behind and not self._catch_up(sink, query, batch_id):
                return
            if not self._write(sink, query.output, rows, batch_id):
                return  # a later batch or a restart writes it again from the store

    def _catch_up(self, sink: _Sink, query: LiveQuery, before: int | None) -> bool:
        """Writes the stored batches after ``last_batch`` (those before ``before``);
        False when one could not be written (the sink stays behind it)."""
        store = query.store
        _gap, stored = store.since(sink.stored.last_batch)
        for batch in stored:
            if before is not None and batch >= before:
                break
            if not self._write(sink, query.output, self._replayed(sink, query, batch), batch):
                return False
        sink.behind = False
        return True

    def _replayed(self, sink: _Sink, query: LiveQuery, batch: int) -> list[dict]:
        """A stored batch through SecFilter for her, with her rights of now."""
        frame = query.store.stored(batch, self.spark)
        got: list[dict] = []
        if frame is not None and sink.subscription is not None:
            collect = replace(sink.subscription, deliver=lambda rows, _b: got.extend(rows))
            query.delivery.replay(frame, batch, collect)
        return got

    def _write(self, sink: _Sink, output: str, rows: list[dict], batch_id: int) -> bool:
        """One batch for her, if she may still receive it; True when it is done with
        (written, or skipped for good because she may not)."""
        if not sink.recipient.may_subscribe(self.security, output):
            sink.status = f"suspended: SUBSCRIBE on {output} with the sink's roles is gone"
            self._advance(sink, batch_id)  # never written later
            return True
        try:
            sink.writer.write(sink.stored.query, batch_id, rows)
        except Exception as err:  # the sink stays behind this batch and retries it
            sink.status, sink.behind = f"failing: {type(err).__name__}", True
            log.warning("sink %s: batch %d not written (%s)", sink.stored.name, batch_id, err)
            return False
        sink.status, sink.written = "ok", sink.written + len(rows)
        self._advance(sink, batch_id)
        return True

    def _advance(self, sink: _Sink, batch_id: int) -> None:
        sink.stored.last_batch = batch_id
        self._keep(sink)

    # -- parts -------------------------------------------------------------------------------

    def _allowed(self, target: KafkaTarget | DeltaTarget) -> None:
        """A user's sink writes only where an administrator allowed sinks to write
        (``sinks.delta_roots``, ``sinks.kafka_brokers``; none set: nowhere), never
        into the server's own storage root: else a subscriber could make the server
        write files anywhere it may, or connect to any host (deny by default)."""
        settings = port.settings(self.security)
        if isinstance(target, KafkaTarget):
            allowed = set(settings.get("sinks.kafka_brokers") or [])
            servers = set(target.bootstrap_servers.split(","))
            if not servers or not servers <= allowed:
                raise Forbidden(
                    "the sink's brokers are not among those an administrator allowed "
                    "(setting sinks.kafka_brokers)"
                )
            return
        if not within(target.uri, settings.get("sinks.delta_roots") or [], self.root):
            raise Forbidden(
                "the table is not under a location an administrator allowed for sinks "
                "(setting sinks.delta_roots), or is inside the server's storage"
            )

    def _writer(self, stored: StoredSink) -> Writer:
        target = stored.target
        if isinstance(target, KafkaTarget):
            return KafkaWriter(target)
        return DeltaWriter(target, f"streamshield-sink-{stored.name}")

    def _keep(self, sink: _Sink) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        data = sink.stored.model_dump(mode="json")
        target = sink.stored.target
        if isinstance(target, KafkaTarget) and target.security.password is not None:
            data["target"]["security"]["password"] = target.security.password.get_secret_value()
        if isinstance(target, DeltaTarget):
            data["target"]["storage_options"] = target.options()
        write_atomic(self._path(sink.stored.name), json.dumps(data, indent=2), mode=0o600)

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def _admin(self, session: Session) -> bool:
        return port.check(self.security, session, "CHANGE SYSTEM", "system", "system")

    def _visible(self, session: Session, name: str) -> _Sink:
        """Her own sink, or any for an administrator; others' are not found."""
        sink = self._sinks.get(name)
        if sink is None or not (sink.stored.user == port.user_of(session) or self._admin(session)):
            raise NotFound("no such sink, or not yours")  # one answer: existence not told
        return sink


def within(uri: str, roots: list[str], server_root: Path) -> bool:
    """Whether the table ``uri`` lies under one of ``roots`` and outside ``server_root``.

    A local path (or ``file://``) is compared after resolving ``..`` and symbolic links;
    a remote URI by its text, which may hold no ``..`` segment."""
    if "://" in uri and not uri.startswith("file://"):
        if "/../" in uri + "/" or "/./" in uri + "/":
            return False
        return any(root.endswith("/") and uri.startswith(root) for root in roots)
    local = uri.removeprefix("file://")
    if not Path(local).is_absolute():
        return False
    path = Path(os.path.realpath(local))
    if path == server_root or server_root in path.parents:
        return False
    for root in roots:
        written = root.removeprefix("file://")
        if "://" in written or not Path(written).is_absolute():
            continue  # a remote prefix, or a relative path: never a local root
        base = Path(os.path.realpath(written))
        if path == base or base in path.parents:
            return True
    return False
