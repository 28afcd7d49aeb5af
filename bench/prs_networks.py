"""Random shared-operator networks like the privacy-switch paper's simulator (section 6.1).

The paper's generator takes the number of input streams, of interleaved queries, of users,
of operators and a *degree of sharing*: the share of the network's operators that are in
the common prefix (used by more than one query). Its heuristics: selects come before joins
("join push-down"), selects and projects read one input, joins two. It does not print its
algorithm, so this one is ours, built on the project's pure model: each query is an
operator tree (``network/operators.py``), the trees are merged by ``network/merge.py``
exactly as registered queries are, and the degree reported is *measured* on the merged
network (``len(common_prefix) / len(nodes)``), never assumed.

How a network is drawn (seeded, deterministic: the same arguments give the same network):

1. ``round(degree * operators)`` operators are shared. A *core* tree (selects on streams,
   joined on ``k``, then selects/projects) is used by every query; when there are enough
   shared operators, part of them form a *branch* on top of the core used by a random
   subset of at least two queries (the interleaving the paper's Fig. 7 shows).
2. The other operators are split over the queries (at least one each) and grown on top of
   the core, the branch or, with no sharing, the raw streams: selects with fresh
   conjuncts, joins with a fresh select on a stream the query does not read yet, projects
   keeping ``k`` and a grouping attribute; about a third of the queries end in a grouped aggregate.
3. Every conjunct is drawn once per network, so two queries' private selects never
   overlap (Def. 7) and the merge shares exactly what step 1 built; projects never sit
   directly on a shared node (two of them would be merged into a shared project).
4. The trees are merged; a draw whose operator count or degree misses the target (by more
   than ``tolerance``) is discarded and the next attempt is drawn.

Streams ``s1``-``s3`` have columns ``k`` (a key, unique per stream: joins are 1:1),
``a{i}``, ``b{i}`` (0-99) and ``g{i}`` (0-9, the grouping key); ``bench.prs_executor``
generates their rows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from streamshield.network.merge import Network, merge
from streamshield.network.operators import (
    Aggregation,
    Operator,
    aggregate,
    join,
    project,
    select,
)
from streamshield.network.predicates import Comparison, Conjunction, Op
from streamshield.network.switch_state import AccessChange, SwitchState
from streamshield.network.switches import place_switches
from streamshield.policy.punctuation import Sign

STREAMS = ("s1", "s2", "s3")
KEY = "k"


def stream_attributes(stream: str) -> tuple[str, ...]:
    """The columns of stream ``s{i}``: the join key and three attributes of its own."""
    i = stream[1:]
    return (KEY, f"a{i}", f"b{i}", f"g{i}")


@dataclass(frozen=True)
class GeneratedNetwork:
    """One drawn network: the queries' trees, the merged network and each query's users."""

    queries: Mapping[str, Operator]
    network: Network
    users: Mapping[str, tuple[str, ...]]
    target_degree: float
    seed: int
    attempt: int

    @property
    def operators(self) -> int:
        return len(self.network.nodes)

    @property
    def degree(self) -> float:
        """Measured: the share of operators used by more than one query."""
        return len(self.network.common_prefix) / len(self.network.nodes)

    @cached_property
    def switches(self):  # type: ignore[no-untyped-def]
        return place_switches(self.network)

    def state(self, lost: frozenset[str] = frozenset()) -> SwitchState:
        """Every user granted (one ``+`` sp each), then every user of ``lost`` revoked."""
        state = SwitchState.closed(self.switches)
        for query, users in sorted(self.users.items()):
            for user in users:
                state, _ = state.apply(AccessChange(query, user, Sign.GRANT))
        for query in sorted(lost):
            for user in self.users[query]:
                state, _ = state.apply(AccessChange(query, user, Sign.DENY))
        return state

    def summary(self) -> dict[str, object]:
        return {
            "seed": self.seed,
            "attempt": self.attempt,
            "operators": self.operators,
            "common_prefix": len(self.network.common_prefix),
            "degree": round(self.degree, 3),
            "switches": len(self.switches),
            "users": {q: len(u) for q, u in self.users.items()},
        }


class _Exhausted(Exception):
    """A draw ran out of fresh conjuncts (a narrow projection): the attempt is discarded."""


@dataclass
class _Drawer:
    """Draws fresh operators; remembers the atoms used so that no two selects overlap."""

    rng: random.Random
    used: set[Comparison] = field(default_factory=set)

    def atom(self, attributes: Sequence[str]) -> Comparison:
        for _ in range(200):
            attribute = self.rng.choice([a for a in attributes if a != KEY])
            kind = attribute[0]
            if kind == "a":
                atom = Comparison(attribute, Op.LT, self.rng.randint(55, 97))
            elif kind == "b":
                atom = Comparison(attribute, Op.GE, self.rng.randint(3, 40))
            else:
                atom = Comparison(attribute, Op.NE, self.rng.randint(0, 9))
            if atom not in self.used:
                self.used.add(atom)
                return atom
        raise _Exhausted("no fresh conjunct left over these attributes")

    def select(self, below: Operator | str, attributes: Sequence[str]) -> Operator:
        return select(Conjunction.of([self.atom(attributes)]), below)

    def grow(
        self, below: Operator | str, count: int, attributes: tuple[str, ...], on_shared: bool
    ) -> tuple[Operator | str, tuple[str, ...]]:
        """``count`` operators on top of ``below``: selects, joins, projects (see module)."""
        node, attrs = below, attributes
        while count > 0:
            read = {node} if isinstance(node, str) else node.streams
            unread = [s for s in STREAMS if s not in read]
            kinds = []
            if isinstance(node, str):
                kinds = ["select"]
            else:
                if count >= 2 and unread:
                    kinds += ["join", "join"]
                if node.kind != "select":
                    kinds += ["select", "select"]
                if node.kind != "project" and not on_shared and len(attrs) > 3:
                    kinds += ["project"]
                if not kinds:  # a shared select, nothing to join: only a project is left
                    kinds = ["project"]
            kind = self.rng.choice(kinds)
            if kind == "select":
                node = self.select(node, attrs)
                count -= 1
            elif kind == "join":
                stream = self.rng.choice(unread)
                leaf = self.select(stream, stream_attributes(stream))
                node = join({(KEY, KEY)}, node, leaf)
                attrs = attrs + stream_attributes(stream)[1:]
                count -= 2
            else:
                groups = [a for a in attrs if a.startswith("g")]
                rest = [a for a in attrs if a != KEY and not a.startswith("g")]
                keep = [self.rng.choice(groups), *self.rng.sample(rest, k=len(rest) // 2)]
                node = project([KEY, *keep], node)
                attrs = tuple(a for a in attrs if a == KEY or a in keep)
                count -= 1
            on_shared = False
        return node, attrs

    def root(self, below: Operator, attributes: tuple[str, ...]) -> Operator:
        """A grouped aggregate over ``below`` (one operator)."""
        groups = [a for a in attributes if a.startswith("g")]
        values = [a for a in attributes if a[0] in "ab"]
        function = self.rng.choice([Aggregation.COUNT, Aggregation.SUM, Aggregation.MAX])
        attribute = "*" if function is Aggregation.COUNT or not values else self.rng.choice(values)
        if attribute == "*":
            function = Aggregation.COUNT
        return aggregate(function, attribute, {self.rng.choice(groups)}, below)


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` positive integers, uniformly among compositions."""
    if total < parts:
        raise ValueError("fewer private operators than queries")
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    return [b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)]


def _propose(rng: random.Random, queries: int, operators: int, degree: float) -> dict:
    drawer = _Drawer(rng)
    names = [f"Q{i + 1}" for i in range(queries)]
    shared = round(degree * operators)
    private = _split(rng, operators - shared, queries)
    bases: dict[str, tuple[Operator | str, tuple[str, ...], bool]] = {}
    if shared == 0:
        for name in names:
            stream = rng.choice(STREAMS)
            bases[name] = (stream, stream_attributes(stream), False)
    else:
        branch = rng.randint(1, shared // 3) if shared >= 4 and queries >= 3 else 0
        stream = rng.choice(STREAMS)
        core, attrs = drawer.grow(stream, shared - branch, stream_attributes(stream), False)
        for name in names:
            bases[name] = (core, attrs, True)
        if branch:
            members = rng.sample(names, k=rng.randint(2, queries - 1))
            top, top_attrs = drawer.grow(core, branch, attrs, True)
            for name in members:
                bases[name] = (top, top_attrs, True)
    trees = {}
    for name, count in zip(names, private, strict=True):
        below, attrs, on_shared = bases[name]
        aggregated = count >= 2 and rng.random() < 0.35
        node, attrs = drawer.grow(below, count - aggregated, attrs, on_shared)
        assert not isinstance(node, str)
        trees[name] = drawer.root(node, attrs) if aggregated else node
    users = {name: tuple(f"{name}-u{j}" for j in range(rng.randint(1, 3))) for name in names}
    return {"trees": trees, "users": users}


def generate(
    queries: int,
    operators: int,
    degree: float,
    seed: int,
    tolerance: float = 0.08,
    slack: int = 2,
    attempts: int = 2000,
) -> GeneratedNetwork:
    """A network of ``queries`` queries with ``operators`` (up to ``+slack``) operators
    whose measured degree of sharing is within ``tolerance`` of ``degree``."""
    if not 0 <= degree < 1:
        raise ValueError("the degree of sharing is a share in [0, 1)")
    for attempt in range(attempts):
        rng = random.Random(f"prs:{queries}:{operators}:{degree}:{seed}:{attempt}")
        try:
            proposal = _propose(rng, queries, operators, degree)
        except _Exhausted:
            continue
        network = merge(proposal["trees"])
        count = len(network.nodes)
        measured = len(network.common_prefix) / count
        if operators <= count <= operators + slack and abs(measured - degree) <= tolerance:
            return GeneratedNetwork(
                proposal["trees"], network, proposal["users"], degree, seed, attempt
            )
    raise RuntimeError(
        f"no network of {queries} queries, {operators} operators, degree {degree} "
        f"in {attempts} attempts"
    )
