"""Users' continuous queries on the server: OxRBAC objects with a Spark query and a fan-out.

A query registered through the API is a QUERY object owned by its author (its output
stream, *out1* in paper 5's scenario). It runs with the roles active in the author's
session at registration, so its secured views show exactly what those roles may read;
its results go to a :class:`~streamshield.engine.delivery.Delivery`, which applies
SecFilter per subscriber with their rights of *now*.

Stopping keeps the object, the fan-out and its subscribers; starting again resumes
from the query's checkpoint under the same internal name, so no result is produced
twice. Removing stops it and closes every subscription.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamshield.engine.delivery import Delivery
from streamshield.engine.queries import CallbackSink, QueryService, RegisteredQuery
from streamshield.lang.label_propagation import is_aggregate
from streamshield.server.errors import Conflict, NotFound

audit = logging.getLogger("streamshield.audit")


@dataclass
class LiveQuery:
    """One API query: what it is, whom it runs as, and where its results go."""

    name: str
    owner: str
    sql: str
    roles: tuple[str, ...]
    inputs: tuple[str, ...]
    internal: str
    delivery: Delivery = field(repr=False)
    shape: Any = field(default=None, repr=False)
    output: str = ""
    handle: RegisteredQuery | None = field(default=None, repr=False)
    closers: dict[str, Callable[[str], None]] = field(default_factory=dict, repr=False)

    def columns(self) -> tuple[str, ...]:
        """Output columns a subscriber receives (labels are never delivered)."""
        shown = self.handle.columns if self.handle is not None else ()
        return tuple(c for c in shown if not c.startswith("_ss_"))

    @property
    def running(self) -> bool:
        return self.handle is not None and self.handle.active

    def status(self) -> str:
        if self.handle is None:
            return "stopped"
        if self.handle.active:
            return "running"
        return f"failed: {self.handle.error() or 'stopped'}"


class QueryRegistry:
    """Starts, stops and removes API queries on one :class:`QueryService`."""

    def __init__(self, service: QueryService, delivery: Callable[[bool, str], Delivery]) -> None:
        self._service = service
        self._new_delivery = delivery
        self._queries: dict[str, LiveQuery] = {}
        self._lock = threading.RLock()

    def get(self, name: str) -> LiveQuery:
        with self._lock:
            query = self._queries.get(name)
        if query is None:
            raise NotFound("no such query")
        return query

    def by_output(self, stream: str) -> LiveQuery | None:
        return next((q for q in self.all() if q.output == stream), None)

    def all(self) -> list[LiveQuery]:
        with self._lock:
            return sorted(self._queries.values(), key=lambda q: q.name)

    def running_of(self, owner: str) -> int:
        return sum(1 for q in self.all() if q.owner == owner and q.running)

    def register(
        self,
        name: str,
        owner: str,
        sql: str,
        roles: tuple[str, ...],
        inputs: tuple[str, ...],
        shape: Any = None,
        output: str = "",
    ) -> LiveQuery:
        """Plans and starts the query (QueryRejected / QueryFailed on the way)."""
        with self._lock:
            if name in self._queries:
                raise Conflict("a query of that name exists", "exists")
            internal = f"api-{uuid.uuid4().hex[:12]}"
            delivery = self._new_delivery(is_aggregate(sql), output)
            query = LiveQuery(name, owner, sql, roles, inputs, internal, delivery, shape, output)
            query.handle = self._service.register(sql, roles, CallbackSink(delivery), internal)
            self._queries[name] = query
        audit.info("query %s (%s) registered by %s with roles %s", name, internal, owner, roles)
        return query

    def start(self, name: str) -> LiveQuery:
        with self._lock:
            query = self.get(name)
            if not query.running:
                if query.handle is not None:
                    self._service.queries.pop(query.internal, None)
                sink = CallbackSink(query.delivery)
                query.handle = self._service.register(query.sql, query.roles, sink, query.internal)
        return query

    def stop(self, name: str) -> LiveQuery:
        with self._lock:
            query = self.get(name)
            if query.handle is not None:
                if query.internal in self._service.queries:
                    self._service.stop(query.internal)
                else:
                    query.handle.stop()
                query.handle = None
        return query

    def remove(self, name: str) -> None:
        with self._lock:
            self.stop(name)
            query = self._queries.pop(name)
        for close in list(query.closers.values()):
            close("query removed")

    def stop_all(self) -> None:
        for query in self.all():
            self.stop(query.name)
