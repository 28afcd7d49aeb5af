"""The privacy switches of every running query, driven by query-scoped sps (PrS 5.1).

A query-scoped sp says that from its timestamp on a user may (``+``) or may no longer
(``-``) receive a query's output. The server's authorization part injects one whenever
that changes; here it is the moment a user's first subscription to a query is admitted
(``+``) and the moment her last one ends, whatever ended it: her leaving, a revoked
grant or role, a logout (``-``). Nothing else hands a query's rows to a person, so
"may receive" and "is being handed rows under a checked right" are the same set.

Sps are applied in band: they queue here and take effect at the next micro-batch of the
query's network (``drain``, called when a micro-batch starts), in the order they came,
so a switch never changes in the middle of a batch. What the switches hold then follows
:mod:`streamshield.network.switch_state`: a terminal switch's user set per query, and the
initial and in-network counters that follow from those sets and the switch placement
(``SwitchState.restore``). Everything starts closed: a query nobody receives computes
nothing. A repeated ``+``, a ``-`` without its ``+`` and an sp naming an unknown query
change nothing and are reported for the audit.

No state is kept across restarts on purpose: subscriptions end when the server stops, so
every switch rightly starts closed and opens again as subscribers come back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from streamshield.network.switch_state import Outcome
from streamshield.policy.punctuation import Sign


class BadQuerySp(ValueError):
    """A query-scoped sp that is malformed or names no query: it opens nothing."""


@dataclass(frozen=True)
class QuerySp:
    """A query-scoped sp: who gains (``+``) or loses (``-``) which query's output, when."""

    query: str
    user: str
    sign: Sign
    ts: float

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not self.query.strip():
            raise BadQuerySp("a query-scoped sp names a query")
        if not isinstance(self.user, str) or not self.user.strip():
            raise BadQuerySp("a query-scoped sp names a user")
        if not isinstance(self.sign, Sign):
            raise BadQuerySp("the sign of a query-scoped sp is + or -")


Report = Callable[[QuerySp, Outcome], None]


@dataclass(frozen=True)
class QuerySwitch:
    """One query's terminal switch as the API shows it."""

    users: frozenset[str]
    since: float
    """When it last opened or closed (or was created)."""

    @property
    def open(self) -> bool:
        return bool(self.users)


class Switchboard:
    """Terminal user sets of every known query, changed only by query-scoped sps."""

    def __init__(self, report: Report | None = None) -> None:
        """``report(sp, outcome)`` is told every sp that was ignored (for the audit)."""
        self._report = report
        self._known: set[str] = set()
        self._users: dict[str, frozenset[str]] = {}
        self._since: dict[str, float] = {}
        self._pending: list[QuerySp] = []
        self._lock = threading.Lock()

    def add(self, query: str) -> None:
        """A query sps may name from now on (its switch starts closed)."""
        with self._lock:
            self._known.add(query)
            self._since.setdefault(query, time.time())

    def inject(self, sp: QuerySp) -> None:
        """Queue ``sp`` for the next micro-batch; BadQuerySp if its query is unknown."""
        with self._lock:
            known = sp.query in self._known
            if known:
                self._pending.append(sp)
        if not known:
            self._tell(sp, Outcome.UNKNOWN_QUERY)
            raise BadQuerySp("the query-scoped sp names no known query")

    def drain(self) -> None:
        """Apply every queued sp in the order it came (a micro-batch boundary)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for sp in pending:
            self._tell(sp, self._apply(sp))

    def is_on(self, query: str) -> bool:
        """Whether anyone may receive ``query``'s output (after applying queued sps)."""
        self.drain()
        with self._lock:
            return bool(self._users.get(query))

    def switch(self, query: str) -> QuerySwitch:
        with self._lock:
            return QuerySwitch(
                self._users.get(query, frozenset()), self._since.setdefault(query, time.time())
            )

    def snapshot(self) -> dict[str, list[str]]:
        """Who may receive each query (``SwitchState.restore``'s input)."""
        with self._lock:
            return {q: sorted(users) for q, users in self._users.items() if users}

    def forget(self, query: str) -> None:
        """The query is gone: its switch with it (a later sp naming it is refused)."""
        with self._lock:
            self._known.discard(query)
            self._users.pop(query, None)
            self._since.pop(query, None)
            self._pending = [sp for sp in self._pending if sp.query != query]

    def _apply(self, sp: QuerySp) -> Outcome:
        with self._lock:
            if sp.query not in self._known:  # removed while the sp waited
                return Outcome.UNKNOWN_QUERY
            users = self._users.get(sp.query, frozenset())
            had = sp.user in users
            if sp.sign is Sign.GRANT and had:
                return Outcome.DUPLICATE_GRANT
            if sp.sign is Sign.DENY and not had:
                return Outcome.UNMATCHED_REVOKE
            now = users | {sp.user} if sp.sign is Sign.GRANT else users - {sp.user}
            if bool(now) != bool(users) or sp.query not in self._since:
                self._since[sp.query] = sp.ts
            self._users[sp.query] = now
        return Outcome.APPLIED

    def _tell(self, sp: QuerySp, outcome: Outcome) -> None:
        if outcome is not Outcome.APPLIED and self._report is not None:
            self._report(sp, outcome)
