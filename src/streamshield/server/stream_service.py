"""Schemas, streams and what providers append to them, behind the API.

A stream is created from a stored schema (the definition is staged before the catalog
records it, so a crash never leaves a record without one) and is live from ingest's
next micro-batch: ingest and the queries share the engine's mapping of streams. An
append lands only the lines its caller may send (WRITE for tuples, INJECT SP for sps;
per-line rejections, never a silent drop), one channel's appends serialised so that
seqs the server assigns never race, and nothing lands while ingest is halted or far
behind (a 503 the provider retries).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamshield.catalog.store import UnknownStreamError
from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.pipeline import Pipeline
from streamshield.faults import crash_point
from streamshield.landing import Parsed
from streamshield.policy.policy import Combine, ServerPolicy
from streamshield.server import security_port as port
from streamshield.server.access_gates import require_change_system, require_visible
from streamshield.server.element_gate import AppendReport, LineRejection, append_checked
from streamshield.server.errors import Forbidden, Invalid, NotFound
from streamshield.server.ingest_backlog import IngestBacklog
from streamshield.server.ingest_guard import IngestHalt
from streamshield.server.metrics import ServerMetrics
from streamshield.server.provider_assign import SeqAssigner
from streamshield.server.queries import QueryRegistry
from streamshield.server.schemas import SchemaDef, SchemaStore

if TYPE_CHECKING:
    from streamshield.catalog.security import Session


class StreamService:
    """The catalog's objects that hold data, as methods taking the caller's session."""

    def __init__(
        self,
        security: Any,
        pipeline: Pipeline,
        queries: QueryRegistry,
        schemas: SchemaStore,
        lock: threading.RLock,
        halt: IngestHalt,
        backlog: IngestBacklog,
        metrics: ServerMetrics,
    ) -> None:
        """``lock``: the server's, under which a new stream joins the engine's mapping."""
        self.security, self.pipeline, self.queries = security, pipeline, queries
        self.schemas, self._lock = schemas, lock
        self.halt, self.backlog, self.metrics = halt, backlog, metrics
        self.assigner = SeqAssigner(pipeline.landing)
        self.fed: Callable[[str], frozenset[str]] = lambda _stream: frozenset()
        """The providers of a stream whose channels a connector feeds (the server's
        connectors, once they exist): those channels take no appends through the API."""

    def catalog_view(self, session: Session) -> dict[str, list[dict]]:
        """What the caller may see; objects without VIEW OBJECT do not appear at all."""
        schemas = [{"name": n} for n in port.visible(self.security, session, "schema")]
        streams = [
            {"name": n, "kind": "input" if n in self.pipeline.queries.streams else "output"}
            for n in port.visible(self.security, session, "stream")
        ]
        queries = []
        for record in port.queries(self.security, session):
            live = self.queries.maybe(record.name)
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

    def stream(self, session: Session, name: str) -> dict:
        require_visible(self.security, session, "stream", name)
        definition = self.pipeline.queries.streams.get(name)
        if definition is not None:
            return {"kind": "input", **describe(definition)}
        query = self.queries.by_output(name)
        return {
            "name": name,
            "kind": "output",
            "query": query.name if query else None,
            "columns": list(query.columns()) if query else [],
        }

    def add_schema(self, session: Session, schema: SchemaDef) -> dict:
        try:
            StreamDefinition(
                "schema_check",
                schema.attributes,
                schema.tid,
                schema.event_time,
                schema.not_null,
                schema.tags,
            )
        except ValueError as err:
            raise Invalid(str(err)) from None
        self.schemas.stage(schema)  # never a catalog record without its definition
        crash_point("catalog.schema")
        try:
            port.add_schema(self.security, session, schema.name)
        except BaseException:
            self.schemas.discard(schema.name)
            raise
        self.schemas.commit(schema.name)
        return {"name": schema.name}

    def add_stream(self, session: Session, name: str, schema: str) -> dict:
        require_visible(self.security, session, "schema", schema)
        shape = self.schemas.load(schema)
        if shape is None:
            raise NotFound("no such schema")
        try:
            definition = StreamDefinition(
                name, shape.attributes, shape.tid, shape.event_time, shape.not_null, shape.tags
            )
        except ValueError as err:
            raise Invalid(str(err)) from None
        with self._lock:
            port.add_stream(self.security, session, schema, definition)
            # Ingest and queries share this mapping: the stream is live from the next batch.
            self.pipeline.queries.streams[name] = definition
            # its provenance bit, persisted before any use
            self.pipeline.queries.sources.add([name])
            self.pipeline.landing.stream_dir(name).mkdir(parents=True, exist_ok=True)
        return describe(definition)

    def set_tags(self, session: Session, name: str, tags: dict[str, list[str]]) -> dict:
        """Replaces an input stream's attribute tags (CHANGE SYSTEM, audited). Ingest
        shares the definitions mapping: the next micro-batch resolves tag policies
        against the new tags; tuples already labelled keep their labels."""
        require_visible(self.security, session, "stream", name)
        if name not in self.pipeline.queries.streams:
            raise NotFound("no such input stream")
        with self._lock:
            definition = port.set_stream_tags(self.security, session, name, tags)
            self.pipeline.queries.streams[name] = definition
        return describe(definition)

    def set_server_policy(self, session: Session, scope: str, cql_text: str, mode: str) -> dict:
        """Stores a scope's server policy (CHANGE SYSTEM, audited); in force for ingest
        from its next micro-batch, for streams the scope takes in now and later."""
        with self._lock:
            try:
                port.set_server_policy(self.security, session, scope, cql_text, Combine(mode))
            except UnknownStreamError:
                raise NotFound("no such input stream") from None
            policies = self.security.server_policies()
            self.pipeline.ingest.ingest.use_server_policies(policies)
        return describe_server_policy(scope, policies[scope])

    def server_policies(self, session: Session) -> list[dict]:
        """Every stored server policy, for an administrator (403 otherwise)."""
        require_change_system(self.security, session)
        policies = self.security.server_policies()
        return [describe_server_policy(scope, p) for scope, p in sorted(policies.items())]

    def append(
        self, session: Session, stream: str, lines: Iterable[str], assign: bool = False
    ) -> AppendReport:
        """Lands the lines the caller may send; ``assign``: the server gives seqs (and
        sp ts/sn, tuple policies) per channel, see :mod:`provider_assign`. Appends on one
        channel are serialised so that assigned seqs never race (different providers'
        appends are not)."""
        require_visible(self.security, session, "stream", stream)
        definition = self.pipeline.queries.streams.get(stream)
        if definition is None:
            raise Forbidden("a query's output stream takes no appends")
        rights = self._rights(session, stream)
        user = port.user_of(session)
        fed = self.fed(stream)
        return self._land(user, definition, list(lines), rights, assign=assign, fed=fed)

    def land_for(
        self, user: str, stream: str, lines: list[str], seqs: list[int] | None
    ) -> AppendReport:
        """Lands lines on ``user``'s behalf with the given seqs (a connector's records:
        their offsets; None: the channel's next ones, an MQTT source's), under the rules
        of :meth:`append`: her WRITE / INJECT SP now, read again at every call; sp ts/sn
        and tuple policies are filled as with ``assign``. A disabled provider or one
        without either right is refused whole (Forbidden): the records wait, none is
        dropped for it."""
        definition = self.pipeline.queries.streams.get(stream)
        if definition is None:
            raise NotFound(f"no input stream {stream}")
        if not port.user_enabled(self.security, user):
            raise Forbidden(f"the provider {user} is unknown or disabled")
        rights = self._rights(user, stream)
        return self._land(user, definition, lines, rights, assign=True, seqs=seqs)

    def _rights(self, who: Session | str, stream: str) -> tuple[bool, bool]:
        """(WRITE, INJECT SP) of ``who`` on ``stream``; Forbidden with neither."""
        may_write = port.can_write(self.security, who, stream)
        may_inject = port.can_inject(self.security, who, stream)
        if not (may_write or may_inject):
            raise Forbidden(f"WRITE or INJECT SP on stream {stream} is needed to append")
        return may_write, may_inject

    def _land(
        self,
        user: str,
        definition: StreamDefinition,
        lines: list[str],
        rights: tuple[bool, bool],
        assign: bool,
        seqs: list[int] | None = None,
        fed: frozenset[str] = frozenset(),
    ) -> AppendReport:
        stream = definition.name
        may_write, may_inject = rights
        self.halt.refuse_input()
        self.backlog.admit()  # 503 ingest_backlog: nothing lands while ingest is far behind
        with self.assigner.lock(stream, user):
            assigned = None
            landing: Iterable[str | Parsed] = lines
            if assign:
                assigned = self.assigner.assign(stream, user, definition.tid, lines, seqs)
                landing = assigned.lines
            report = append_checked(
                self.pipeline.landing,
                user,
                stream,
                landing,
                may_write=may_write,
                may_inject=may_inject,
                fed=fed,
            )
            if assigned is not None:
                self.assigner.landed(assigned, clean=not report.rejected)
        if assigned is not None:
            report.rejected.extend(LineRejection(*r) for r in assigned.rejected)
            report.rejected.sort(key=lambda r: r.line)
            report.assigned = assigned.last_seq
        self.backlog.landed(report.accepted)
        self.metrics.appended(stream, report.accepted, len(report.rejected))
        future = sum(1 for r in report.rejected if r.reason == "future_timestamp")
        if future:  # an sp that would lock its channel: worth an administrator's look
            port.record_rejected(self.security, user, stream, "future_timestamp", future)
        return report


def describe_server_policy(scope: str, policy: ServerPolicy) -> dict:
    """A server policy as the API shows it (its CQL is an administrator's to keep)."""
    return {"scope": scope, "mode": policy.mode.value, "sps": len(policy.sps)}


def describe(definition: StreamDefinition) -> dict:
    """A stream's definition as the API shows it."""
    return {
        "name": definition.name,
        "attributes": [list(pair) for pair in definition.attributes],
        "tid": definition.tid,
        "event_time": definition.event_time,
        "not_null": list(definition.not_null),
        "tags": {n: sorted(tags) for n, tags in definition.tags_of.items()},
    }
