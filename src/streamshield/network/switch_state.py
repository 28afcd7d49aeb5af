"""What privacy switches hold and how query-scoped sps change it (PrS paper, section 5.1).

Initial and in-network switches keep an access counter, terminal switches the set of users
that may receive the query's output. Everything starts closed (counter 0, no user): a query
nobody has been granted produces nothing and costs nothing. A ``+`` sp for a query
increments every counter governing it and adds the user to its terminal switch; a ``-``
does the reverse.

Where this is stricter than the paper, and why:

- the paper assumes the authorization server never repeats an sp; here a ``+`` for a user
  who already has access, or a ``-`` for a user who has none, changes nothing and is
  reported. Counting a repeated ``+`` twice would keep a branch open after that user's
  single ``-`` (failing open); honouring an unmatched ``-`` would drive a counter below
  zero or close a branch another user still reads;
- an sp naming a query that has no switches is rejected and opens nothing.

Every call returns an ``Outcome`` so the server can audit what was ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from streamshield.network.merge import Network
from streamshield.network.operators import Operator
from streamshield.network.switches import Switch, SwitchKind
from streamshield.policy.punctuation import Sign


@dataclass(frozen=True)
class AccessChange:
    """The part of a query-scoped sp that drives switches: who gains or loses which query."""

    query: str
    user: str
    sign: Sign


class Outcome(Enum):
    APPLIED = "applied"
    DUPLICATE_GRANT = "duplicate-grant"  # ignored: the user already had access
    UNMATCHED_REVOKE = "unmatched-revoke"  # ignored: a '-' without a matching '+'
    UNKNOWN_QUERY = "unknown-query"  # rejected: no switch governs this query


@dataclass(frozen=True)
class SwitchState:
    """The state of every switch of one network; immutable, ``apply`` returns a new one."""

    switches: tuple[Switch, ...]
    counters: Mapping[Switch, int] = field(default_factory=dict)
    users: Mapping[Switch, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Deny by default: a switch the caller left out is closed, never missing.
        known = set(self.switches)
        if not known.issuperset(self.counters) or not known.issuperset(self.users):
            raise ValueError("switch state names a switch the network does not have")
        if any(n < 0 for n in self.counters.values()):
            raise ValueError("a switch counter is below zero")
        counters = {
            s: self.counters.get(s, 0) for s in self.switches if s.kind is not SwitchKind.TERMINAL
        }
        users = {
            s: frozenset(self.users.get(s, ()))
            for s in self.switches
            if s.kind is SwitchKind.TERMINAL
        }
        object.__setattr__(self, "counters", counters)
        object.__setattr__(self, "users", users)

    @classmethod
    def closed(cls, switches: tuple[Switch, ...]) -> SwitchState:
        """Deny by default: every counter at zero, every terminal switch without users."""
        return cls(switches)

    def snapshot(self) -> dict[str, list[str]]:
        """What survives a restart or a re-plan: who may receive each query's output.

        Counters are not stored: they follow from the user sets and the placement, so a
        snapshot taken before a query was added or removed restores onto the new network.
        """
        return {s.query: sorted(users) for s, users in sorted(self.users.items(), key=_by_id)}

    @classmethod
    def restore(
        cls, switches: tuple[Switch, ...], snapshot: Mapping[str, list[str]]
    ) -> tuple[SwitchState, frozenset[str]]:
        """Rebuild the state from a snapshot by replaying its grants onto closed switches.

        Returns the state and the snapshot's queries that have no switch here (dropped,
        never opening anything, for the caller to audit). A malformed snapshot raises.
        """
        state = cls.closed(switches)
        dropped = set()
        for query, users in sorted(snapshot.items()):
            if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
                raise ValueError(f"snapshot of switch state: users of {query!r} are not names")
            for user in users:
                state, outcome = state.apply(AccessChange(query, user, Sign.GRANT))
                if outcome is Outcome.UNKNOWN_QUERY:
                    dropped.add(query)
                elif outcome is not Outcome.APPLIED:
                    raise ValueError(f"snapshot of switch state: {query!r} repeats a user")
        return state, frozenset(dropped)

    def terminal(self, query: str) -> Switch | None:
        return next((s for s in self.users if s.query == query), None)

    def receivers(self, query: str) -> frozenset[str]:
        """The users a query's terminal switch lets its output through to."""
        terminal = self.terminal(query)
        return self.users[terminal] if terminal is not None else frozenset()

    def is_open(self, switch: Switch) -> bool:
        if switch.kind is SwitchKind.TERMINAL:
            return bool(self.users[switch])
        return self.counters[switch] > 0

    def apply(self, change: AccessChange) -> tuple[SwitchState, Outcome]:
        """Apply one sp; the state is unchanged unless the outcome is APPLIED."""
        terminal = self.terminal(change.query)
        if terminal is None:
            return self, Outcome.UNKNOWN_QUERY
        had = change.user in self.users[terminal]
        if change.sign is Sign.GRANT and had:
            return self, Outcome.DUPLICATE_GRANT
        if change.sign is Sign.DENY and not had:
            return self, Outcome.UNMATCHED_REVOKE
        step = 1 if change.sign is Sign.GRANT else -1
        counters = {
            s: n + step if change.query in s.queries else n for s, n in self.counters.items()
        }
        users = dict(self.users)
        users[terminal] = (
            users[terminal] | {change.user} if step > 0 else users[terminal] - {change.user}
        )
        return SwitchState(self.switches, counters, users), Outcome.APPLIED


def _by_id(item: tuple[Switch, object]) -> str:
    return item[0].id


def operators_off(network: Network, state: SwitchState) -> frozenset[Operator]:
    """The operators no data reaches, following the flow through the switches.

    An operator runs when data arrives on at least one of its inputs: from a stream or a
    running operator, across the edge's switch if there is one and it is open. Computed
    from the flow (not from the users directly) so that tests can compare it with the
    definition: an operator is off exactly when no query using it has a user.
    """
    on_edge = {(s.producer, s.consumer): s for s in state.switches if s.consumer is not None}
    inputs: dict[Operator, list[str | Operator]] = {}
    for producer, consumer in network.edges:
        inputs.setdefault(consumer, []).append(producer)
    running: dict[Operator, bool] = {}

    def flows(producer: str | Operator, consumer: Operator) -> bool:
        if not isinstance(producer, str) and not runs(producer):
            return False
        switch = on_edge.get((producer, consumer))
        return switch is None or state.is_open(switch)

    def runs(node: Operator) -> bool:
        if node not in running:
            running[node] = any(flows(p, node) for p in inputs.get(node, []))
        return running[node]

    return frozenset(node for node in network.nodes if not runs(node))
