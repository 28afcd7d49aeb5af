"""Which windowed queries may share one window node, and why.

Queries over the same stream with an equal window specification could keep the window's
state once. Whether they may depends on the window's meaning under security: a query's
window holds only tuples *its* roles and level may read (engine/queries/window_query.py), so a
shared window must give every branch exactly the window it would have alone, and no
branch's window may depend on tuples it cannot read.

- ``[NOW]`` is the micro-batch's tuples: filtering by a branch's rights after the window
  equals filtering before it. One node serves every right.
- ``[ROWS n]`` holds the n latest tuples of the stream *the query may read* (in the
  stream's order, lang/windows.py ``StreamPosition``; n in all): which tuples a branch's
  window holds depends on which tuples it can see (a hidden tuple must not push a
  visible one out). The n latest tuples of everyone are not a synopsis that serves each
  (a branch seeing fewer tuples needs older ones), so a ROWS node is shared only by
  branches with the same visibility: the same reader mask (effective roles) and level.
  Among those it serves every size: it keeps the latest tuples its largest branch
  needs, and each branch cuts its own n latest out of them (the n latest of the m >= n
  latest are the n latest).
- ``[RANGE t]`` keeps tuples within t of the newest event time *seen by the query*
  (engine/queries/window_state.py): per branch, ``{visible tuples: time > newest visible - t}``.
  That too depends on visibility (a hidden newer tuple must not evict visible ones), but
  it has a synopsis serving every right *and every width*: keep every readable tuple
  with ``time > min over branches b of (newest visible to b - t_b)``, and let each
  branch cut at its own newest visible time less its own width. Every branch's window is
  a subset of the node's, computed from tuples it may read only; so one RANGE node of a
  stream serves every right and every ``[RANGE t]`` (a larger synopsis serving a
  smaller window).

Above a node, branches share selections: the common conjuncts of their WHEREs become
select nodes over the node, merged as any selects are (CW Algorithm 2, Defs. 6-8), so
CW's Q1 and Q2 share the window *and* ``msgType = send AND receiver = CompanyB``.

Switches: a window network is the DAG stream -> window node -> selections -> branch (a
branch runs the rest of its query over its cut as one unit), so PrS Algorithm 2 puts an
initial switch on each node's input (governing the node's branches), an in-network
switch on each edge out of the last operator several branches share (the node, or a
shared select above it), and a terminal switch at each branch's output.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from streamshield.lang.windows import MAX_WINDOW_SIZE, WindowKind, WindowSpec
from streamshield.network.merge import Network, merge
from streamshield.network.operators import Operator, select
from streamshield.network.predicates import Conjunction
from streamshield.network.switches import Switch, place_switches


@dataclass(frozen=True)
class WindowNode:
    """One shared window: its specification and, where the window depends on who reads
    it (``ROWS``), the visibility of the branches it serves (None: every right)."""

    window: WindowSpec
    visibility: Hashable | None = None

    @property
    def per_branch_clock(self) -> bool:
        """Each branch cuts the node's rows at its own newest visible time (RANGE)."""
        return self.window.kind is WindowKind.RANGE

    @property
    def per_branch_count(self) -> bool:
        """Each branch cuts its own n latest rows out of the node's (ROWS)."""
        return self.window.kind is WindowKind.ROWS


def shares_across_rights(window: WindowSpec) -> bool:
    """Whether one node of this window serves branches with different rights."""
    return window.kind is not WindowKind.ROWS


RANGE_NODE = WindowSpec(WindowKind.RANGE, MAX_WINDOW_SIZE)
"""The window of a stream's one RANGE node. It serves every width: what it keeps is the
bound its branches give it, each branch cutting its own width (so this size never
evicts a row)."""
ROWS_NODE = WindowSpec(WindowKind.ROWS, MAX_WINDOW_SIZE)
"""The window of a visibility's one ROWS node. It serves every size: it keeps as many
latest rows as its largest branch needs, each branch cutting its own (so this size
never evicts a row)."""


def window_node(window: WindowSpec, visibility: Hashable) -> WindowNode:
    """The node a branch with this window and visibility (its reader mask and level,
    any hashable value equal exactly when two branches see the same tuples) reads."""
    if window.slide is not None:
        raise ValueError("a sliding RANGE window is an aggregate's, not a shared relation")
    if window.kind is WindowKind.RANGE:
        return WindowNode(RANGE_NODE)
    if window.kind is WindowKind.ROWS:
        return WindowNode(ROWS_NODE, visibility)
    return WindowNode(window)


def window_nodes(
    branches: Mapping[str, tuple[WindowSpec, Hashable]],
) -> dict[WindowNode, frozenset[str]]:
    """The window nodes of a set of branches (name -> window, visibility) and the
    branches each serves: independent of the order branches came in."""
    nodes: dict[WindowNode, set[str]] = {}
    for name, (window, visibility) in branches.items():
        nodes.setdefault(window_node(window, visibility), set()).add(name)
    return {node: frozenset(names) for node, names in nodes.items()}


@dataclass(frozen=True, eq=False, repr=False)
class WindowVertex(Operator):
    """A window node as a vertex of the network (``node``: its window and, for a node of
    one visibility, a digest of it: two ROWS nodes of one size are two vertices)."""

    kind: ClassVar[str] = "window"
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    node: str
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()

    @property
    def parameters(self) -> str:
        return self.node


@dataclass(frozen=True, eq=False, repr=False)
class BranchVertex(Operator):
    """A branch's own plan over its cut of a node (its WHERE, aggregate, secured view),
    which the network runs as one unit: one vertex, switched as a whole."""

    kind: ClassVar[str] = "branch"
    arity: ClassVar[tuple[int, int | None]] = (1, 1)
    query: str
    inputs: tuple[str | Operator, ...]

    def __post_init__(self) -> None:
        self._check_inputs()

    @property
    def parameters(self) -> str:
        return repr(self.query)


def node_vertex(stream: str, node: WindowNode) -> WindowVertex:
    """The vertex of ``node`` reading ``stream`` (equal for equal nodes: merged once)."""
    return WindowVertex(_spelled(node), (stream,))


def window_network(
    stream: str,
    nodes: Mapping[WindowNode, frozenset[str]],
    wheres: Mapping[str, Conjunction | None] | None = None,
) -> Network:
    """The merged network stream -> window node -> selections -> branch of ``nodes``
    (each with the branches it serves); ``wheres``: each branch's WHERE conjuncts
    (network/from_query.py ``where_conjuncts``), whose common parts over one node become
    shared select nodes (CW Figs. 3-5: Q1 and Q2 share the window *and*
    ``msgType = send AND receiver = CompanyB``), decomposed as any selects are (Defs. 7-8).
    A branch vertex stands for the rest of its query, run as one unit."""
    wheres = wheres or {}
    roots: dict[str, Operator] = {}
    for node, members in nodes.items():
        vertex = node_vertex(stream, node)
        for member in members:
            where = wheres.get(member)
            below: Operator = select(where, vertex) if where and where.conjuncts else vertex
            roots[member] = BranchVertex(member, (below,))
    return merge(roots)


def window_switches(
    stream: str,
    nodes: Mapping[WindowNode, frozenset[str]],
    wheres: Mapping[str, Conjunction | None] | None = None,
) -> tuple[Switch, ...]:
    """PrS Algorithm 2 over :func:`window_network`: switches on the nodes' inputs, on the
    edges out of the last operators several branches share, at every branch's output."""
    if not nodes:
        return ()
    return place_switches(window_network(stream, nodes, wheres))


def _spelled(node: WindowNode) -> str:
    text = node.window.kind.value  # NOW, RANGE of every width, ROWS of every size
    if node.visibility is None:
        return text
    return f"{text} #{hashlib.sha256(repr(node.visibility).encode()).hexdigest()[:12]}"
