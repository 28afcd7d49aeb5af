"""Placement of privacy switches in a shared network (PrS paper, section 5.2, Algorithm 2).

Why switches and not a re-planned network: access changes at any moment, and re-planning a
running network for every grant or revoke is disruptive. Switches are placed once, when the
network is built, and later only open and close (see ``switch_state``):

- a terminal switch at every query output (Algorithm 2, line 2): it filters the output
  per user, and is the only switch that ever sees user names;
- an initial switch on every edge from an input stream into the network (lines 7-8): with
  every query behind it revoked, the stream is not read for it at all;
- an in-network switch on the outgoing edges of the last common-prefix operators (line 15):
  every edge from a node to a consumer that serves fewer queries than the node itself. For
  two queries these are exactly the edges leaving the common prefix, as in the paper's
  Fig. 6; with three or more queries this also switches edges inside the common prefix
  where a subset of the queries branches off, so that losing *several* queries shuts every
  operator that only they use (see docs/query-sharing.md, "Deviations").

A switch governs the set of queries whose data crosses it (the paper's QueryID; a set,
because an initial switch on a stream read by a shared operator serves all its queries).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from streamshield.network.merge import Network
from streamshield.network.operators import Operator, input_canonical


class SwitchKind(Enum):
    INITIAL = "initial"
    IN_NETWORK = "in-network"
    TERMINAL = "terminal"


@dataclass(frozen=True)
class Switch:
    """A privacy switch on the edge ``producer -> consumer``.

    ``consumer`` is None for a terminal switch, which sits between a query's output node
    (``producer``) and the users receiving it.
    """

    kind: SwitchKind
    queries: frozenset[str]
    producer: str | Operator
    consumer: Operator | None

    def __post_init__(self) -> None:
        if not self.queries:
            raise ValueError("a switch governs at least one query")
        if (self.kind is SwitchKind.TERMINAL) != (self.consumer is None):
            raise ValueError("exactly the terminal switches have no consuming operator")
        if self.kind is SwitchKind.TERMINAL and len(self.queries) != 1:
            raise ValueError("a terminal switch governs exactly one query output")
        if self.kind is SwitchKind.INITIAL and not isinstance(self.producer, str):
            raise ValueError("an initial switch sits on an input stream")

    @cached_property
    def id(self) -> str:
        """A stable name for APIs and audit entries: kind, queries and a digest of the edge."""
        edge = input_canonical(self.producer)
        if self.consumer is not None:
            edge += " -> " + self.consumer.canonical
        digest = hashlib.sha256(edge.encode()).hexdigest()[:12]
        return f"{self.kind.value}:{','.join(sorted(self.queries))}:{digest}"

    @property
    def query(self) -> str:
        """The one query of a terminal switch."""
        (only,) = self.queries
        return only


def place_switches(network: Network) -> tuple[Switch, ...]:
    """Algorithm 2 of the PrS paper over a merged network; sorted by id."""
    usage = network.usage
    switches: set[Switch] = set()
    for query, root in network.roots.items():
        switches.add(Switch(SwitchKind.TERMINAL, frozenset({query}), root, None))
    for producer, consumer in network.edges:
        governed = usage[consumer]
        if isinstance(producer, str):
            switches.add(Switch(SwitchKind.INITIAL, governed, producer, consumer))
        elif governed < usage[producer]:
            switches.add(Switch(SwitchKind.IN_NETWORK, governed, producer, consumer))
    return tuple(sorted(switches, key=lambda s: s.id))
