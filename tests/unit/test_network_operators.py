"""Operator nodes and predicates: one canonical spelling, validation, sound containment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamshield.network.evaluate import apply_window, evaluate
from streamshield.network.operators import (
    Aggregation,
    Join,
    Select,
    WindowSpec,
    aggregate,
    join,
    project,
    select,
    union,
    window,
)
from streamshield.network.predicates import Comparison, Conjunction, Op, parse_conjunction
from tests.unit.network_strategies import ATOMS

where = parse_conjunction


def test_a_node_is_equal_to_the_same_node_however_its_query_spelled_it() -> None:
    a = project(["x", "y"], select(where("a = 1 AND b > 2"), "S"))
    b = project(["y", "x"], select(where("b > 2 AND a == 1"), "S"))
    assert a == b and hash(a) == hash(b) and a.canonical == b.canonical
    assert len({a, b}) == 1


def test_nodes_that_differ_in_any_part_of_the_label_or_input_differ() -> None:
    base = select(where("a = 1"), "S")
    assert base != select(where("a = 2"), "S")  # parameter
    assert base != select(where("a = 1"), "T")  # input queue
    assert base != select(where("a = '1'"), "S")  # a string is not a number
    assert window(WindowSpec.rows(3), "S") != window(WindowSpec.rows(4), "S")  # synopsis
    assert join({("a", "a")}, "S", "T") != join({("a", "a")}, "T", "S")  # join sides
    assert base != project(["a"], "S")


def test_union_is_commutative_and_join_windows_are_part_of_the_label() -> None:
    assert union("S", "T") == union("T", "S")
    assert join({("a", "b")}, "S", "T", WindowSpec.rows(2)) != join({("a", "b")}, "S", "T")


def test_invalid_nodes_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one comparison"):
        Select(Conjunction(frozenset()), ("S",))
    with pytest.raises(ValueError, match="inputs"):
        Join(frozenset(), None, ("S",))
    with pytest.raises(ValueError, match="stream name or a node"):
        select(where("a = 1"), "")
    with pytest.raises(ValueError, match="positive size"):
        WindowSpec.rows(0)
    with pytest.raises(ValueError, match="no slide"):
        WindowSpec(WindowSpec.rows(1).kind, 1, 2)
    with pytest.raises(ValueError, match="only COUNT"):
        aggregate(Aggregation.SUM, "*", [], "S")
    with pytest.raises(ValueError, match="int, float or str"):
        Comparison("a", Op.EQ, True)
    with pytest.raises(ValueError, match="finite"):
        Comparison("a", Op.EQ, float("nan"))
    with pytest.raises(ValueError, match="attribute op constant"):
        parse_conjunction("a = b")


def test_integral_floats_are_spelled_as_integers() -> None:
    assert Comparison("a", Op.EQ, 5.0) == Comparison("a", Op.EQ, 5)
    assert Comparison("a", Op.EQ, 5.0).canonical == "'a' = 5"


def test_only_range_windows_keep_their_time_attribute() -> None:
    assert WindowSpec.rows(3) == WindowSpec(WindowSpec.rows(3).kind, 3, None, "other")
    assert WindowSpec.range(3, time_attribute="t1") != WindowSpec.range(3, time_attribute="t2")


def test_windows_keep_the_rows_the_cql_instant_holds() -> None:
    rows = [{"ts": t, "n": t} for t in (1, 2, 4, 7, 8)]
    assert [r["n"] for r in apply_window(WindowSpec.rows(2), rows)] == [7, 8]
    assert [r["n"] for r in apply_window(WindowSpec.range(4), rows)] == [7, 8]
    # Sliding every 3: the last window ends at 6, so it holds (2, 6].
    assert [r["n"] for r in apply_window(WindowSpec.range(4, slide=3), rows)] == [4]
    assert apply_window(WindowSpec.unbounded(), rows) == rows


def test_evaluator_follows_sql_for_missing_values_and_aggregates() -> None:
    rows = {"S": [{"a": 1, "b": 2}, {"a": None, "b": 3}, {"b": 4}, {"a": 1, "b": None}]}
    assert evaluate(select(where("a = 1"), "S"), rows) == [{"a": 1, "b": 2}, {"a": 1, "b": None}]
    assert evaluate(select(where("a != 2"), "S"), rows) == [{"a": 1, "b": 2}, {"a": 1, "b": None}]
    counted = evaluate(aggregate(Aggregation.COUNT, "b", ["a"], "S"), rows)
    assert counted == [{"a": 1, "count(b)": 1}, {"a": None, "count(b)": 2}]
    stars = evaluate(aggregate(Aggregation.COUNT, "*", [], "S"), rows)
    assert stars == [{"count(*)": 4}]
    assert evaluate(project(["a", "zz"], "S"), rows)[2] == {}


def test_join_matches_present_equal_values_and_left_wins_a_clash() -> None:
    rows = {"L": [{"k": 1, "v": "l"}, {"k": None, "v": "n"}], "R": [{"k": 1, "v": "r", "w": 0}]}
    assert evaluate(join({("k", "k")}, "L", "R"), rows) == [{"k": 1, "v": "l", "w": 0}]


@given(st.sampled_from(ATOMS), st.sampled_from(ATOMS), st.integers(-1, 5))
def test_comparison_containment_is_sound(mine: Comparison, other: Comparison, x: int) -> None:
    row = {mine.attribute: x, other.attribute: x}
    if mine.implies(other) and mine.holds(row):
        assert other.holds(row)


@given(
    st.sampled_from([Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE]),
    st.sampled_from([Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE]),
    st.integers(0, 4),
    st.integers(0, 4),
    st.integers(-1, 5),
)
def test_comparison_containment_is_sound_for_every_operator_pair(
    op1: Op, op2: Op, v: int, w: int, x: int
) -> None:
    mine, other = Comparison("a", op1, v), Comparison("a", op2, w)
    if mine.implies(other) and mine.holds({"a": x}):
        assert other.holds({"a": x})


def test_containment_decides_the_obvious_cases() -> None:
    assert where("a > 5 AND b = 'x'").implies(where("a >= 3"))
    assert where("a = 2").implies(where("a != 3 AND a < 4 AND a >= 2"))
    assert not where("a > 5").implies(where("a > 6"))
    assert not where("a < 5").implies(where("b < 5"))
    assert not where("a = 'x'").implies(where("a < 3"))


def _recorder_method(name: str):  # type: ignore[no-untyped-def]
    def method(self: _Recorder, other: object) -> tuple[str, object]:
        self.calls.append((name, other))
        return (name, other)

    return method


class _Recorder:
    """Records which rich comparison was called, as a Spark Column would receive it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    __eq__ = _recorder_method("eq")  # type: ignore[assignment]
    __ne__ = _recorder_method("ne")  # type: ignore[assignment]
    __lt__ = _recorder_method("lt")
    __le__ = _recorder_method("le")
    __gt__ = _recorder_method("gt")
    __ge__ = _recorder_method("ge")


@pytest.mark.parametrize(
    ("op", "name"),
    [(Op.EQ, "eq"), (Op.NE, "ne"), (Op.LT, "lt"), (Op.LE, "le"), (Op.GT, "gt"), (Op.GE, "ge")],
)
def test_op_apply_calls_the_comparison_the_spelling_means(op: Op, name: str) -> None:
    """An engine compiles selects through ``Op.apply``: each spelling must reach exactly
    its own rich comparison (a swapped LT/GT would silently invert a filter)."""
    column = _Recorder()
    assert op.apply(column, 7) == (name, 7)
    assert column.calls == [(name, 7)]
    for x in range(5, 10):
        assert op.apply(x, 7) == Comparison("a", op, 7).holds({"a": x})
