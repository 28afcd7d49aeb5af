"""Privacy switches behind the API: who receives which query, and what the networks show.

A shared network computes nothing for a query nobody may receive (PrS, paper 3): each
query's switch follows the query-scoped sps of the authorization part (a subscriber's
delivery injects ``+`` when she starts receiving and ``-`` when she stops), and an
administrator may inject one by hand. A grant to a query never received opens it at
once: its first instant reads the kept history (``CqlService.opened``). What the
networks show depends on who asks: administrators see every switch and the users each
terminal switch lets through; everyone else the switches governing their own queries,
other queries and receivers counted but not named.
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from streamshield.engine.queries.cql_service import CqlService
from streamshield.network.switch_state import Outcome, SwitchState
from streamshield.network.switchboard import BadQuerySp, QuerySp, Switchboard
from streamshield.network.switches import Switch, SwitchKind
from streamshield.policy.punctuation import Sign
from streamshield.server import error_codes as codes
from streamshield.server import security_port as port
from streamshield.server.access_gates import require_change_system
from streamshield.server.errors import Invalid, NotFound
from streamshield.server.queries import LiveQuery, QueryRegistry

if TYPE_CHECKING:
    from streamshield.catalog.security import Session

audit = logging.getLogger("streamshield.audit")


class SwitchService:
    """The switchboard of one server's queries, as methods taking the caller's session."""

    def __init__(self, security: Any, cql: CqlService, queries: QueryRegistry) -> None:
        self.security, self.cql, self.queries = security, cql, queries
        self.switches = Switchboard(self._ignored)
        cql.switch = self.switches.is_on  # the networks ask it before computing a branch

    def add(self, query: LiveQuery) -> None:
        """``query`` gets its switch; its delivery reports who starts and stops receiving."""
        self.switches.add(query.internal)
        query.delivery.on_access = lambda user, sign: self.inject(query.internal, user, sign)

    def forget(self, internal: str) -> None:
        self.switches.forget(internal)

    def inject(self, internal: str, user: str, sign: Sign) -> None:
        """The authorization part's query-scoped sp: ``user`` starts (``+``) or stops
        (``-``) receiving the query's output (engine/delivery/delivery.py tells when)."""
        with suppress(BadQuerySp):  # refused and audited by the switchboard: opens nothing
            self.switches.inject(QuerySp(internal, user, sign, time.time()))
            if sign is Sign.GRANT:  # a query never received reads the kept history now
                self.cql.opened(internal)

    def inject_as(self, session: Session, query: str, user: str, sign: str) -> None:
        """An administrator's query-scoped sp (the authorization part's, by hand)."""
        require_change_system(self.security, session)
        live = self.queries.maybe(query)
        if live is None:
            raise NotFound("no such query")
        try:
            self.switches.inject(QuerySp(live.internal, user, Sign(sign), time.time()))
        except (BadQuerySp, ValueError) as err:
            raise Invalid(str(err), codes.SP) from None
        if Sign(sign) is Sign.GRANT:
            self.cql.opened(live.internal)

    def networks(self, session: Session) -> list[dict]:
        """The shared networks (of selections, of windows, and shared joins) with their
        privacy switches, as the caller may see them (see the module's docstring)."""
        admin = port.check(self.security, session, "CHANGE SYSTEM", "system", "system")
        user = port.user_of(session)
        live = {q.internal: q for q in self.queries.all()}
        shown = []
        for stream, kind, network in sorted(self.cql.switched(), key=lambda n: (n[0], n[1])):
            mine = {n for n in network.branches if n in live and (admin or live[n].owner == user)}
            if not mine:
                continue
            switches = network.switches()
            state, _ = SwitchState.restore(
                switches,
                {q: u for q, u in self.switches.snapshot().items() if q in network.branches},
            )
            views = [
                self._view(switch, state, mine, live, admin)
                for switch in switches
                if switch.queries & mine
            ]
            queries = sorted(live[n].name for n in mine)
            levels = {live[n].name: _level_text(live[n]) for n in mine}
            shown.append(
                {
                    "stream": stream,
                    "kind": kind,
                    "queries": queries,
                    "levels": levels,
                    "switches": views,
                }
            )
        return shown

    def _view(
        self,
        switch: Switch,
        state: SwitchState,
        mine: set[str],
        live: dict[str, LiveQuery],
        admin: bool,
    ) -> dict:
        terminal = switch.kind is SwitchKind.TERMINAL
        users = state.users[switch] if terminal else frozenset()
        since = max(self.switches.switch(q).since for q in switch.queries)
        named = sorted(live[q].name for q in switch.queries & mine)
        return {
            "id": f"{switch.kind.value}:{','.join(named)}:{switch.id.rsplit(':', 1)[-1]}",
            "kind": switch.kind.value,
            "queries": named,
            "other_queries": len(switch.queries - mine),
            "open": state.is_open(switch),
            "counter": None if terminal else state.counters[switch],
            "receivers": len(users) if terminal else None,
            "users": sorted(users) if terminal and admin else None,
            "since": since,
        }

    def _ignored(self, sp: QuerySp, outcome: Outcome) -> None:
        public = self.queries.public_name(sp.query) or sp.query  # never the registry lock
        audit.warning("query-scoped sp %s for %s: %s", sp.sign.value, public, outcome.value)
        try:
            port.record_query_sp(self.security, sp.user, public, sp.sign.value, outcome.value)
        except Exception as err:  # auditing must not break a subscription
            audit.error("recording a query-scoped sp failed: %s", type(err).__name__)


def _level_text(query: LiveQuery) -> str | None:
    """The Chinese-Wall level a query runs at, as explain shows it (None: levels off)."""
    return query.level.text if query.level is not None else None
