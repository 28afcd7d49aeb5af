"""Users' continuous queries on the server: OxRBAC objects with an engine query and a fan-out.

A query registered through the API is a QUERY object owned by its author (its output
stream, *out1* in paper 5's scenario). It runs with the roles active in the author's
session at registration, so its secured views show exactly what those roles may read;
its results go to a :class:`~streamshield.engine.delivery.Delivery`, which applies
SecFilter per subscriber with their rights of *now*.

Every query goes through :class:`~streamshield.engine.cql_service.CqlService`, which
parses the text again, routes it to the engine for its shape and applies the operator
limits it is given. Starting a stopped query submits the same text under the same
internal name, so the engine resumes from that name's checkpoint and no result is
produced twice. Stopping keeps the object, the fan-out and its subscribers; removing
stops it and closes every subscription.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from streamshield.engine.cql_service import CqlService
from streamshield.engine.delivery import Delivery
from streamshield.engine.queries import CallbackSink, RegisteredQuery
from streamshield.lang.continuous import Shape
from streamshield.policy.operator_limits import OperatorLimits
from streamshield.server.errors import Conflict, Invalid, NotFound

audit = logging.getLogger("streamshield.audit")


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
    shape: Shape | None = field(default=None, repr=False)
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
    """Starts, stops and removes API queries on one :class:`CqlService`.

    One lock serialises every change: the operator limits are installed on the shared
    CqlService right before each submit, so two registrations cannot see each other's
    limits or miss each other's running shapes.
    """

    def __init__(self, cql: CqlService) -> None:
        self._cql = cql
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
                raise Conflict("a query of that name exists", "exists")
            self._queries[query.name] = query

    def start(self, name: str, limits: OperatorLimits) -> LiveQuery:
        """Submits the query's text with its roles under ``limits`` (no-op when running)."""
        with self._lock:
            query = self.get(name)
            if query.running:
                return query
            if query.handle is not None:
                self._forget(query)
            running = self.running_shapes(query.owner, besides=name)
            result = self._cql.submit(
                query.text,
                query.roles,
                CallbackSink(query.delivery),
                name=query.internal,
                provider=query.owner,
                running=running,
                limits=limits,
            )
            if not isinstance(result, RegisteredQuery):  # parse_request decided otherwise
                raise Invalid("the text is not a continuous query")
            query.handle = result
            query.shape = self._cql.shapes.get(query.internal, query.shape)
        audit.info(
            "query %s (%s) started for %s with roles %s",
            name,
            query.internal,
            query.owner,
            query.roles,
        )
        return query

    def stop(self, name: str) -> LiveQuery:
        with self._lock:
            query = self.get(name)
            if query.handle is not None:
                self._forget(query)
        return query

    def _forget(self, query: LiveQuery) -> None:
        """Stops the engine query (a shared join only with its last subscriber)."""
        try:
            self._cql.stop(query.internal)
        except KeyError:  # already gone from the engine's books (failed and cleaned up)
            if query.handle is not None:
                query.handle.stop()
        query.handle = None

    def remove(self, name: str) -> LiveQuery:
        with self._lock:
            self.stop(name)
            query = self._queries.pop(name)
        for close in list(query.closers.values()):
            close("query removed")
        return query

    def remove_quietly(self, name: str) -> None:
        """Removes the query if it is known (undoing a registration that failed)."""
        with self._lock:
            if name in self._queries:
                self.remove(name)

    def stop_all(self) -> None:
        for query in self.all():
            self.stop(query.name)

    def running_names(self) -> Sequence[str]:
        return [q.name for q in self.all() if q.running]
