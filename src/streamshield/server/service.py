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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.delivery import Delivery
from streamshield.engine.pipeline import Pipeline
from streamshield.lang.continuous import (
    ContinuousQuery,
    ShapeKind,
    SpInsert,
    parse_request,
    plan_shape,
    sliding_window_sql,
)
from streamshield.lang.cql import parse_policy
from streamshield.lang.query_check import check_query
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement
from streamshield.policy.operator_limits import OperatorLimits
from streamshield.policy.provenance import ProvenanceCodec
from streamshield.server import security_port as port
from streamshield.server.element_gate import AppendReport, append_checked
from streamshield.server.errors import Conflict, Forbidden, Invalid, NotFound
from streamshield.server.queries import LiveQuery, QueryRegistry
from streamshield.server.schemas import SchemaStore

audit = logging.getLogger("streamshield.audit")


@dataclass(frozen=True)
class SchemaDef:
    name: str
    attributes: tuple[tuple[str, str], ...]
    tid: str
    event_time: str | None = None


class ServerService:
    """Everything the API does, as methods taking the caller's session first."""

    def __init__(self, spark: SparkSession, root: str | Path, security: Any) -> None:
        self.root = Path(root)
        self.spark = spark
        self.security = security
        self.catalog = security.catalog
        self.pipeline = Pipeline(spark, self.catalog, self.root)
        self._codec = ProvenanceCodec(d.name for d in self.catalog.streams())
        self.queries = QueryRegistry(self.pipeline.queries, self._delivery)
        self.schemas = SchemaStore(self.root / "schemas")
        self._lock = threading.RLock()
        self._ingest: Any = None

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Starts the ingest job (continuous, processing-time trigger)."""
        self._ingest = self.pipeline.ingest.start(available_now=False)

    def stop(self) -> None:
        self.queries.stop_all()
        if self._ingest is not None:
            self._ingest.stop()
            self._ingest = None

    def _delivery(self, aggregate: bool, output: str) -> Delivery:
        def dropped(user: str, batch: int, count: int, policies: tuple[str, ...]) -> None:
            port.record_drop(self.security, user, output, count, policies)

        return Delivery(self._rights, self.codec, aggregate=aggregate, on_drop=dropped)

    @property
    def codec(self) -> ProvenanceCodec:
        codec = getattr(self.pipeline.queries, "provenance", None)
        return codec if isinstance(codec, ProvenanceCodec) else self._codec

    def _rights(self, user: str) -> object:
        return self.security.readable_sources(user)

    # -- sessions --------------------------------------------------------------------------

    def login(self, user: str, password: str, roles: list[str], client: str) -> Any:
        return port.login(self.security, user, password, roles, client)

    def session(self, token: str) -> Any:
        return port.session(self.security, token)

    def logout(self, token: str) -> None:
        port.logout(self.security, token)

    # -- catalog ---------------------------------------------------------------------------

    def catalog_view(self, session: Any) -> dict[str, list[dict]]:
        """What the caller may see; objects without VIEW OBJECT do not appear at all."""
        schemas = [{"name": n} for n in port.visible(self.security, session, "schema")]
        streams = [
            {"name": n, "kind": "input" if n in self.pipeline.queries.streams else "output"}
            for n in port.visible(self.security, session, "stream")
        ]
        queries = []
        for record in port.queries(self.security, session):
            live = self._maybe(record.name)
            queries.append(
                {
                    "name": record.name,
                    "owner": record.owner,
                    "inputs": list(record.inputs),
                    "output": record.output_stream,
                    "status": live.status() if live is not None else "not loaded",
                }
            )
        return {"schemas": schemas, "streams": streams, "queries": queries}

    def stream(self, session: Any, name: str) -> dict:
        self._visible(session, "stream", name)
        definition = self.pipeline.queries.streams.get(name)
        if definition is not None:
            return {"kind": "input", **_describe(definition)}
        query = self.queries.by_output(name)
        return {
            "name": name,
            "kind": "output",
            "query": query.name if query else None,
            "columns": list(query.columns()) if query else [],
        }

    def add_schema(self, session: Any, schema: SchemaDef) -> dict:
        try:
            StreamDefinition("schema_check", schema.attributes, schema.tid, schema.event_time)
        except ValueError as err:
            raise Invalid(str(err)) from None
        port.add_schema(self.security, session, schema.name)
        self.schemas.save(schema)
        return {"name": schema.name}

    def add_stream(self, session: Any, name: str, schema: str) -> dict:
        self._visible(session, "schema", schema)
        shape = self.schemas.load(schema)
        if shape is None:
            raise NotFound("no such schema")
        try:
            definition = StreamDefinition(name, shape.attributes, shape.tid, shape.event_time)
        except ValueError as err:
            raise Invalid(str(err)) from None
        with self._lock:
            port.add_stream(self.security, session, schema, definition)
            # Ingest and queries share this mapping: the stream is live from the next batch.
            self.pipeline.queries.streams[name] = definition  # type: ignore[index]
            self._codec = self._codec.appended([name])
            self.pipeline.landing.stream_dir(name).mkdir(parents=True, exist_ok=True)
        return _describe(definition)

    def append(self, session: Any, stream: str, lines: Iterable[str]) -> AppendReport:
        self._visible(session, "stream", stream)
        if stream not in self.pipeline.queries.streams:
            raise Forbidden("a query's output stream takes no appends")
        may_write = port.can_write(self.security, session, stream)
        may_inject = port.can_inject(self.security, session, stream)
        if not (may_write or may_inject):
            raise Forbidden("WRITE or INJECT SP on this stream is needed to append")
        return append_checked(
            self.pipeline.landing,
            port.user_of(session),
            stream,
            lines,
            may_write=may_write,
            may_inject=may_inject,
        )

    # -- queries ---------------------------------------------------------------------------

    def register_request(self, session: Any, name: str, text: str, output: str | None) -> dict:
        """A continuous query or an INSERT SP script, told apart by ``parse_request``."""
        request = parse_request(text)
        if isinstance(request, SpInsert):
            return self.inject_sps(session, request, text)
        query = self.register_query(session, name, request, output or f"{name}_out")
        return {
            "name": query.name,
            "output": query.output,
            "status": query.status(),
            "inputs": list(query.inputs),
        }

    def register_query(
        self, session: Any, name: str, request: ContinuousQuery, output: str
    ) -> LiveQuery:
        """ADD, READ on every input, operator limits (quota included), then Spark."""
        user = port.user_of(session)
        if request.on_result:
            raise Invalid("ON RESULT is not served through the API yet", "not_supported")
        shape = plan_shape(request)
        sql = self._executable(request, shape)
        readable = [
            s
            for s in port.visible(self.security, session, "stream")
            if s in self.pipeline.queries.streams
        ]
        checked = check_query(sql, readable)  # unknown and invisible streams look the same
        effective = self.pipeline.queries.hierarchy.effective(port.roles_of(session))
        running = [q.shape for q in self.queries.all() if q.owner == user and q.running]
        self.limits().check(shape, effective, running)
        port.add_query(self.security, session, name, checked.streams, output)
        try:
            return self.queries.register(
                name, user, sql, port.roles_of(session), checked.streams, shape, output
            )
        except BaseException:
            port.remove_query(self.security, session, name)
            raise

    def _executable(self, request: ContinuousQuery, shape: Any) -> str:
        if shape.kind is ShapeKind.STREAM:
            return request.sql
        if shape.kind is ShapeKind.SLIDING_AGGREGATE:
            ((_item, stream, window),) = shape.windows
            definition = self.pipeline.queries.streams.get(stream)
            if definition is None or definition.event_time is None:
                raise Invalid("a RANGE window needs a stream with an event time", "window")
            return sliding_window_sql(request.sql, definition.event_time, window)
        raise Invalid(
            f"{shape.kind.value} queries are not served through the API yet", "not_supported"
        )

    def limits(self) -> OperatorLimits:
        """The operator limits setting; unreadable is an error (never "unlimited")."""
        stored = port.settings(self.security).get(port.LIMITS_SETTING)
        return OperatorLimits() if stored is None else OperatorLimits.from_dict(stored)

    def inject_sps(self, session: Any, request: SpInsert, text: str) -> dict:
        """An INSERT SP script: a policy on the caller's own channel of the stream."""
        self._visible(session, "stream", request.stream)
        user = port.user_of(session)
        if not port.can_inject(self.security, session, request.stream):
            raise Forbidden("INJECT SP on this stream is needed")
        channel = Channel(request.stream, user)
        policy = parse_policy(text, ts=time.time_ns() // 1_000_000)
        seq = self.catalog.last_seq(channel)
        elements = [SpElement(channel, seq + i, sp) for i, sp in enumerate(policy.sps, 1)]
        report = append_checked(
            self.pipeline.landing,
            user,
            request.stream,
            [to_line(e) for e in elements],
            may_write=False,
            may_inject=True,
        )
        if report.rejected:
            raise Conflict("the sps could not be landed: " + report.rejected[0].message)
        return {"stream": request.stream, "provider": user, "ts": policy.ts, "sps": report.accepted}

    def set_query_status(self, session: Any, name: str, running: bool) -> LiveQuery:
        self._visible(session, "query", name)
        if running:
            query = self.queries.get(name)
            if not query.running:
                others = [
                    q.shape for q in self.queries.all() if q.owner == query.owner and q.running
                ]
                effective = self.pipeline.queries.hierarchy.effective(query.roles)
                self.limits().check(query.shape, effective, others)
            port.set_query_status(self.security, session, name, "running")
            return self.queries.start(name)
        port.set_query_status(self.security, session, name, "stopped")
        return self.queries.stop(name)

    def remove_query(self, session: Any, name: str) -> None:
        self._visible(session, "query", name)
        port.remove_query(self.security, session, name)
        self.queries.remove(name)

    def subscribable(self, session: Any, name: str) -> LiveQuery:
        """The query by its name or its output stream's, if the caller may SUBSCRIBE to the
        output stream (404 when it may not even see that stream)."""
        query = self.queries.by_output(name) or self._maybe(name)
        if query is None or not port.check(
            self.security, session, "VIEW OBJECT", "stream", query.output
        ):
            raise NotFound("no such query or output stream")
        if not port.can_subscribe(self.security, session, query.output):
            raise Forbidden("SUBSCRIBE on the output stream is needed")
        return query

    def may_still_subscribe(self, token: str, output: str) -> bool:
        """Checked per delivered batch: the session is alive and SUBSCRIBE still held."""
        try:
            return port.can_subscribe(self.security, self.session(token), output)
        except Exception:
            return False

    # -- permissions, system, audit --------------------------------------------------------

    def grant(self, session: Any, body: dict, revoke: bool = False) -> None:
        """The catalog decides (owner, CHANGE PERM or grant option; 404 for unseen objects)."""
        port.grant(self.security, session, body, revoke)

    def settings(self, session: Any) -> dict:
        port.require(self.security, session, "CHANGE SYSTEM", "system", "system")
        return port.settings(self.security)

    def set_settings(self, session: Any, values: dict) -> dict:
        for key, value in values.items():
            port.set_setting(self.security, session, key, value)
        return port.settings(self.security)

    def audit(self, session: Any, filters: dict) -> list[dict]:
        return port.audit_entries(self.security, session, filters)

    # -- helpers ---------------------------------------------------------------------------

    def _visible(self, session: Any, kind: str, name: str) -> None:
        if kind not in port.KINDS:
            raise Invalid(f"kind must be one of {', '.join(port.KINDS)}")
        if not port.check(self.security, session, "VIEW OBJECT", kind, name):
            raise NotFound(f"no such {kind}")

    def _maybe(self, name: str) -> LiveQuery | None:
        try:
            return self.queries.get(name)
        except NotFound:
            return None


def _describe(definition: StreamDefinition) -> dict:
    return {
        "name": definition.name,
        "attributes": [list(pair) for pair in definition.attributes],
        "tid": definition.tid,
        "event_time": definition.event_time,
    }
