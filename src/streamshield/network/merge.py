"""Merging the operator trees of several queries into one shared network (CW Algorithm 2).

The merge runs in three steps, each a function of the *set* of queries so that the network
never depends on the order in which queries were registered:

1. ``normalise``: stacked selects become one conjunctive select and stacked projects one
   project, so that the same query written two ways has one tree;
2. ``decompose``: overlapping select and project nodes over one input are split into a
   shared node and residuals (Defs. 7-8), repeated until no overlap is left;
3. Algorithm 2: node and edge sets are united, keeping one node per equivalence class
   (Def. 6), and every node is annotated with the queries that use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from streamshield.network.equivalence import equivalent, share_projects, share_selects
from streamshield.network.operators import Operator, Project, Select

Edge = tuple["str | Operator", Operator]

#: Upper bound on decomposition rounds; each round strictly splits a select or adds a shared
#: project, so a well-formed input never comes near it. Reaching it is a bug, not a limit.
MAX_ROUNDS = 10_000


def normalise(node: Operator) -> Operator:
    """Fuse stacked selects (conjunction) and stacked projects (intersection)."""
    inputs = tuple(i if isinstance(i, str) else normalise(i) for i in node.inputs)
    node = node.with_inputs(inputs)
    below = inputs[0]
    if isinstance(node, Select) and isinstance(below, Select):
        return Select(node.predicate | below.predicate, below.inputs)
    if isinstance(node, Project) and isinstance(below, Project):
        return Project(node.attributes & below.attributes, below.inputs)
    return node


def _replace(node: Operator, replacements: Mapping[Operator, Operator]) -> Operator:
    if node in replacements:
        return replacements[node]
    inputs = [i if isinstance(i, str) else _replace(i, replacements) for i in node.inputs]
    return node.with_inputs(inputs)


def _next_replacements(roots: Iterable[Operator]) -> dict[Operator, Operator]:
    """The decomposition of the lowest group of selects or projects that still overlaps."""
    groups: dict[tuple[type, tuple[str | Operator, ...]], set[Operator]] = {}
    for root in roots:
        for node in root.nodes():
            if isinstance(node, Select | Project):
                groups.setdefault((type(node), node.inputs), set()).add(node)

    def lowest_first(key: tuple[type, tuple[str | Operator, ...]]) -> tuple[int, str, str]:
        kind, (below,) = key
        height = 0 if isinstance(below, str) else below.height
        return (height, kind.__name__, below if isinstance(below, str) else below.canonical)

    for key in sorted(groups, key=lowest_first):
        members = groups[key]
        if len(members) < 2:
            continue
        found: Mapping[Select, Operator] | Mapping[Project, Operator]
        if key[0] is Select:
            found = share_selects(m for m in members if isinstance(m, Select))
        else:
            found = share_projects(m for m in members if isinstance(m, Project))
        changed: dict[Operator, Operator] = {k: v for k, v in found.items() if k != v}
        if changed:
            return changed
    return {}


def decompose(roots: Mapping[str, Operator]) -> dict[str, Operator]:
    """Apply Def. 8 across all queries until no two selects over one input overlap."""
    current = dict(roots)
    for _ in range(MAX_ROUNDS):
        replacements = _next_replacements(current.values())
        if not replacements:
            return current
        current = {q: _replace(root, replacements) for q, root in current.items()}
    raise RuntimeError("query decomposition did not converge")  # pragma: no cover


def _tree_edges(root: Operator) -> set[Edge]:
    return {(i, node) for node in root.nodes() for i in node.inputs}


@dataclass(frozen=True)
class Network:
    """A shared operator network: a DAG of nodes, each query's output node, and its edges.

    Def. 1 of the privacy-switch paper: a vertex per operator, an edge from producer to
    consumer, and the label of each vertex (its node's ``label``); stream names are the
    producers of the first operators. ``roots`` maps each query to its output node.
    """

    roots: Mapping[str, Operator]
    nodes: frozenset[Operator] = field(default=frozenset())
    edges: frozenset[Edge] = field(default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "roots", dict(sorted(self.roots.items())))

    def __hash__(self) -> int:
        return hash(self.canonical)

    @classmethod
    def of_tree(cls, query: str, root: Operator) -> Network:
        """OPT(Q): one query's operator tree as a network of its own."""
        return cls({query: root}, frozenset(root.nodes()), frozenset(_tree_edges(root)))

    def merge(self, other: Network) -> Network:
        """Algorithm 2 (Merge Operator Trees), step by step as printed.

        Nodes of ``other`` are added only when no equivalent node is present yet; its edges
        are added unless already present. With nodes as values, "an equivalent node is
        present" and "the edge is present" are set membership tests.
        """
        clash = self.roots.keys() & other.roots.keys()
        if clash:
            raise ValueError(f"query names are not unique: {sorted(clash)}")
        nodes = set(self.nodes)
        edges = set(self.edges)
        for node in other.nodes:
            if not any(equivalent(node, mine) for mine in _same_kind(nodes, node)):
                nodes.add(node)
        for edge in other.edges:
            if edge not in edges:
                edges.add(edge)
        return Network({**self.roots, **other.roots}, frozenset(nodes), frozenset(edges))

    @cached_property
    def usage(self) -> dict[Operator, frozenset[str]]:
        """Each node annotated with the queries whose output depends on it."""
        users: dict[Operator, set[str]] = {node: set() for node in self.nodes}
        for query, root in self.roots.items():
            for node in root.nodes():
                users[node].add(query)
        return {node: frozenset(qs) for node, qs in users.items()}

    @cached_property
    def common_prefix(self) -> frozenset[Operator]:
        """Def. 1 (PrS paper): nodes whose results are used by more than one query."""
        return frozenset(node for node, qs in self.usage.items() if len(qs) > 1)

    def consumers(self, producer: str | Operator) -> frozenset[Operator]:
        return frozenset(consumer for source, consumer in self.edges if source == producer)

    @cached_property
    def streams(self) -> frozenset[str]:
        return frozenset(source for source, _ in self.edges if isinstance(source, str))

    def components(self) -> list[frozenset[str]]:
        """Groups of queries that share at least one node, transitively.

        Each group is one network to execute; a query sharing nothing runs on its own.
        """
        groups: list[tuple[set[str], set[Operator]]] = []
        for query, root in self.roots.items():
            nodes = set(root.nodes())
            touching = [g for g in groups if g[1] & nodes]
            merged = ({query}, nodes)
            for qs, ns in touching:
                merged[0].update(qs)
                merged[1].update(ns)
            groups = [g for g in groups if g not in touching] + [merged]
        return sorted((frozenset(qs) for qs, _ in groups), key=sorted)

    @cached_property
    def canonical(self) -> str:
        """One text per network: equal networks (same queries, same nodes) spell the same."""
        lines = [f"query {q!r} -> {root.canonical}" for q, root in self.roots.items()]
        lines += sorted(f"node {n.canonical} used by {sorted(self.usage[n])}" for n in self.nodes)
        return "\n".join(lines)


def _same_kind(nodes: Iterable[Operator], node: Operator) -> list[Operator]:
    return [n for n in nodes if type(n) is type(node)]


def merge(queries: Mapping[str, Operator]) -> Network:
    """Merge the trees of all queries into one network (normalise, decompose, Algorithm 2).

    Queries whose trees share nothing end up in separate components of the same value;
    ``Network.components`` tells them apart.
    """
    shared = decompose({q: normalise(root) for q, root in queries.items()})
    network = Network({})
    for query in sorted(shared):
        network = network.merge(Network.of_tree(query, shared[query]))
    return network
