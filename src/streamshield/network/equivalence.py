"""Equivalent and overlapping nodes and their decomposition (Chinese-Wall paper, Defs. 6-9).

These are the comparisons the merge is built from: an equivalent node is computed once for
every query that needs it (Def. 6), and two overlapping select or project nodes over the
same input are split into a shared common node and per-query residuals (Defs. 7-8), so that
the common part becomes an equivalent node too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from streamshield.network.operators import Operator, Project, Select
from streamshield.network.predicates import Comparison, Conjunction


def equivalent(a: Operator, b: Operator) -> bool:
    """Def. 6: same operator, parameters, synopsis and input queues.

    Input queues are compared as the inputs themselves (recursively), because a queue is
    only the same queue when it carries the output of an equivalent node or the same stream.
    Nodes are values, so this is value equality; spelled out for the reader of the paper.
    """
    return (
        a.kind == b.kind
        and a.parameters == b.parameters
        and a.inputs == b.inputs
        and type(a) is type(b)
    )


def overlapping(a: Operator, b: Operator) -> bool:
    """Def. 7: same non-blocking operator (select or project) over the same input, with
    intersecting parameters.

    Equivalent nodes are excluded: they are shared as they are (Def. 6) and decomposing
    them would only add an identity node.
    """
    if type(a) is not type(b) or a.inputs != b.inputs or equivalent(a, b):
        return False
    if isinstance(a, Select) and isinstance(b, Select):
        return a.predicate.overlaps(b.predicate)
    if isinstance(a, Project) and isinstance(b, Project):
        return not a.attributes.isdisjoint(b.attributes)
    return False


@dataclass(frozen=True)
class Decomposition:
    """Def. 8's result for one node: the shared node Nk and the residual Ni' on top of it.

    ``residual`` is None when Ni' would be an identity (a select with no conjunct left, or a
    project keeping every attribute of Nk): the paper does not consider that case, and an
    identity operator is work without effect, so the query reads Nk directly.
    """

    common: Operator
    residual: Operator | None

    @property
    def output(self) -> Operator:
        """The node that now produces what the original node produced."""
        return self.residual if self.residual is not None else self.common


def decompose(node: Operator, other: Operator) -> Decomposition:
    """Def. 8: decompose ``node`` because it overlaps ``other``."""
    if not overlapping(node, other):
        raise ValueError("only overlapping select or project nodes are decomposed (Def. 7)")
    if isinstance(node, Select) and isinstance(other, Select):
        common = Select(node.predicate & other.predicate, node.inputs)
        rest = node.predicate - common.predicate
        return Decomposition(common, Select(rest, (common,)) if rest.conjuncts else None)
    assert isinstance(node, Project) and isinstance(other, Project)
    project = Project(node.attributes | other.attributes, node.inputs)
    if project.attributes == node.attributes:
        return Decomposition(project, None)
    return Decomposition(project, Project(node.attributes, (project,)))


def trees_overlap(x: Operator, y: Operator) -> bool:
    """Def. 9 as the paper states it: the trees differ and have a pair of equivalent nodes.

    Streams are inputs, not nodes (Def. 5's leaves are the sources), so two queries that
    only read the same stream do not overlap.
    """
    if equivalent(x, y):
        return False
    mine = set(x.nodes())
    return any(node in mine for node in y.nodes())


def share_selects(group: Iterable[Select]) -> dict[Select, Operator]:
    """Def. 8 for any number of select nodes over one input, independent of their order.

    Pairwise decomposition depends on which pair is taken first once three or more selects
    overlap. Here every select's conjuncts are ordered by how many selects of the group hold
    them (most shared first, then by canonical text), and the selects become paths of a
    trie: each trie edge is one select node holding the run of conjuncts on which no select
    branches or ends. For two selects this is exactly Def. 8 (common node = intersection,
    residuals = the differences). Returns, for each select, the node that replaces it.
    """
    selects = sorted(set(group))
    if len({s.inputs for s in selects}) > 1:
        raise ValueError("share_selects takes selects over one input")
    if not selects:
        return {}
    uses = Counter(c for s in selects for c in s.predicate.conjuncts)

    def order(c: Comparison) -> tuple[int, str]:
        return (-uses[c], c.canonical)

    paths = [(s, sorted(s.predicate.conjuncts, key=order)) for s in selects]
    result: dict[Select, Operator] = {}

    def build(below: str | Operator, members: list[tuple[Select, list[Comparison]]]) -> None:
        heads = sorted({path[0] for _, path in members}, key=order)
        for head in heads:
            run = [head]
            rest = [(s, path[1:]) for s, path in members if path[0] == head]
            while all(rest_path for _, rest_path in rest) and len({p[0] for _, p in rest}) == 1:
                run.append(rest[0][1][0])
                rest = [(s, p[1:]) for s, p in rest]
            node = Select(Conjunction.of(run), (below,))
            for s, p in rest:
                if not p:
                    result[s] = node
            if deeper := [(s, p) for s, p in rest if p]:
                build(node, deeper)

    build(selects[0].inputs[0], paths)
    return result


def share_projects(group: Iterable[Project]) -> dict[Project, Operator]:
    """Def. 8 for any number of project nodes over one input, independent of their order.

    Projects that overlap, directly or through others, share one project of the union of
    their attributes, and each keeps its own attributes on top (Def. 8, item 4). Nothing
    is shared when the union would be the whole of an input that is itself a projection
    of exactly those attributes (the common node would be an identity). Returns, for each
    project that changes, the node that replaces it.
    """
    projects = sorted(set(group))
    if len({p.inputs for p in projects}) > 1:
        raise ValueError("share_projects takes projects over one input")
    components: list[list[Project]] = []
    for p in projects:
        touching = [c for c in components if any(overlapping(p, q) for q in c)]
        merged = [p, *(q for c in touching for q in c)]
        components = [c for c in components if c not in touching] + [merged]
    result: dict[Project, Operator] = {}
    for component in components:
        if len(component) < 2:
            continue
        below = component[0].inputs[0]
        union = frozenset().union(*(p.attributes for p in component))
        if isinstance(below, Project) and below.attributes <= union:
            continue
        common = Project(union, (below,))
        for p in component:
            result[p] = common if p.attributes == union else Project(p.attributes, (common,))
    return result
