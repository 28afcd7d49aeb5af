"""Where the privacy switches of a shared join sit (PrS Algorithm 2).

A shared SCJoin (engine/queries/scjoin.py) is one node kind of the shared networks: queries that
join the same two windowed streams (same aliases, keys, windows, plan and level) share
one join node, whose windows and pairs are computed once per micro-batch, and each query
is a branch over the pairs (its own secured delivery and SQL, run as one unit). As a
network that is the DAG ``left stream, right stream -> join -> branch per query``, so
Algorithm 2 places:

- an initial switch on each input's edge into the join, governing every query of the
  join: open while any of them is received (its counter is how many users receive one);
- an in-network switch on each edge out of a join serving several queries, governing
  the one query behind it (as the window network does for a shared window node);
- a terminal switch at every query's output.

The engine acts on the same state: a branch whose switch is off runs no job, and with
every branch off the pairs are not computed (the windows still take the batch's tuples:
that is the input's bookkeeping, so a branch switched on again joins against the
windows it would have had).

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from streamshield.network.merge import Network
from streamshield.network.operators import Operator
from streamshield.network.switches import Switch, place_switches
from streamshield.network.window_sharing import BranchVertex


@dataclass(frozen=True, eq=False, repr=False)
class JoinVertex(Operator):
    """A shared join as a vertex of the network: ``node`` spells what it joins (sides,
    windows, keys, plan, level), so two joins of the same streams are two vertices."""

    kind: ClassVar[str] = "join"
    arity: ClassVar[tuple[int, int | None]] = (2, 2)
    node: str
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()

    @property
    def parameters(self) -> str:
        return self.node


def join_switches(
    streams: tuple[str, str], node: str, queries: Iterable[str]
) -> tuple[Switch, ...]:
    """PrS Algorithm 2 over the join ``node`` of ``streams`` (left, right; a self-join
    reads one stream: one initial switch) and its branches ``queries``; sorted by id,
    empty without queries."""
    vertex = JoinVertex(node, streams)
    roots: dict[str, Operator] = {q: BranchVertex(q, (vertex,)) for q in queries}
    if not roots:
        return ()
    nodes = frozenset([vertex, *roots.values()])
    edges = frozenset((i, v) for v in nodes for i in v.inputs)
    return place_switches(Network(roots, nodes, edges))
