"""Hypothesis strategies for query networks: small universes, so queries share and overlap."""

from __future__ import annotations

from hypothesis import strategies as st

from streamshield.network.operators import (
    Aggregation,
    Operator,
    WindowSpec,
    aggregate,
    join,
    project,
    select,
    union,
    window,
)
from streamshield.network.predicates import Comparison, Conjunction, Op

STREAMS = ("S1", "S2")
ATTRIBUTES = ("a", "b", "c", "ts")
# Few atoms over few attributes: random selects overlap often, which is what is under test.
ATOMS = (
    Comparison("a", Op.EQ, 1),
    Comparison("a", Op.NE, 2),
    Comparison("a", Op.LT, 3),
    Comparison("b", Op.GE, 1),
    Comparison("b", Op.LT, 3),
    Comparison("c", Op.NE, 0),
)

predicates = st.frozensets(st.sampled_from(ATOMS), min_size=1, max_size=3).map(Conjunction)
attribute_sets = st.frozensets(st.sampled_from(ATTRIBUTES), min_size=1, max_size=4)
windows = st.sampled_from(
    [
        WindowSpec.rows(3),
        WindowSpec.rows(5),
        WindowSpec.range(4),
        WindowSpec.range(6, slide=2),
        WindowSpec.unbounded(),
    ]
)
conditions = st.sampled_from([{("a", "a")}, {("b", "b")}, {("a", "b"), ("c", "c")}])


def unary(child: Operator | str) -> st.SearchStrategy[Operator]:
    """One operator on top of ``child``."""
    return st.one_of(
        predicates.map(lambda p: select(p, child)),
        predicates.map(lambda p: select(p, child)),  # selects twice as likely: they overlap
        attribute_sets.map(lambda attrs: project(attrs, child)),
        windows.map(lambda w: window(w, child)),
        st.builds(
            lambda f, g: aggregate(f, "b", g, child),
            st.sampled_from([Aggregation.COUNT, Aggregation.SUM, Aggregation.MAX]),
            st.frozensets(st.sampled_from(("a", "c")), max_size=2),
        ),
    )


@st.composite
def base_trees(draw: st.DrawFn) -> Operator:
    """A short tree over the streams: the pool queries build on."""
    left: Operator | str = draw(st.sampled_from(STREAMS))
    node = draw(unary(left))
    shape = draw(st.sampled_from(["chain", "join", "union"]))
    if shape == "join":
        other = draw(unary(draw(st.sampled_from(STREAMS))))
        node = join(draw(conditions), node, other, draw(st.none() | windows))
    elif shape == "union":
        node = union(node, draw(unary(draw(st.sampled_from(STREAMS)))))
    return node


@st.composite
def query_sets(draw: st.DrawFn, min_size: int = 2, max_size: int = 4) -> dict[str, Operator]:
    """Several queries, each a few operators on top of a tree from a small shared pool."""
    pool = draw(st.lists(base_trees(), min_size=1, max_size=3))
    count = draw(st.integers(min_size, max_size))
    queries = {}
    for i in range(count):
        node = draw(st.sampled_from(pool))
        for _ in range(draw(st.integers(0, 3))):
            node = draw(unary(node))
        queries[f"Q{i}"] = node
    return queries


def _rows(draw: st.DrawFn) -> list[dict[str, object]]:
    values = st.integers(0, 3)
    rows = draw(
        st.lists(
            st.fixed_dictionaries({"a": values, "b": values}, optional={"c": values}),
            min_size=1,
            max_size=8,
        )
    )
    ts = 0
    for row in rows:
        ts += draw(st.integers(0, 3))
        row["ts"] = ts
    return rows


@st.composite
def stream_data(draw: st.DrawFn) -> dict[str, list[dict[str, object]]]:
    return {name: _rows(draw) for name in STREAMS}
