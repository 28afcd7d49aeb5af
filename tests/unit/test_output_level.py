"""Which level a query's output rows are written at (``lang.output_level``): a row keeps
its tuple's own level only for a stateless selection over one stream; every shape with
state over several tuples, and every shape not recognised, writes at the query's level
(paper 2's write-equal rule; docs/chinese-wall.md, "Output levels")."""

from __future__ import annotations

import pytest
from sqlglot import exp

from streamshield.lang.admission import admit
from streamshield.lang.continuous import Shape, ShapeKind
from streamshield.lang.output_level import OutputLevel, output_level
from streamshield.policy.roles import RoleHierarchy

ROW, QUERY = OutputLevel.ROW, OutputLevel.QUERY
STREAMS = ["MessageLog", "Notices"]
HIERARCHY = RoleHierarchy.build(["AUD"])


def level_of(text: str) -> OutputLevel:
    admitted = admit(text, ["AUD"], HIERARCHY, STREAMS)
    return output_level(admitted.shape, admitted.checked.tree)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT id, msgType FROM MessageLog WHERE id > 1",
        "SELECT * FROM MessageLog",
        "SELECT id + 1 AS next, upper(msgType) AS t FROM MessageLog m WHERE m.id < 5",
        "SELECT m FROM (SELECT msgType AS m FROM MessageLog WHERE id > 1) t WHERE m <> 'x'",
        "SELECT id FROM MessageLog UNION ALL SELECT id FROM Notices",
        "SELECT CASE WHEN id > 1 THEN 'a' ELSE 'b' END AS k, coalesce(msgType, '') AS t "
        "FROM MessageLog",
    ],
)
def test_a_stateless_selection_keeps_each_rows_own_level(text) -> None:
    """Each output row is one input tuple's, and exists iff that tuple passes."""
    assert level_of(text) is ROW


@pytest.mark.parametrize(
    "text",
    [
        # aggregates: a count (an empty group's too) reveals the absence of tuples
        "SELECT count(*) AS n FROM MessageLog",
        "SELECT count(*) AS n FROM MessageLog WHERE msgType = 'none'",
        "SELECT msgType, count(*) AS n FROM MessageLog GROUP BY msgType",
        "SELECT msgType FROM MessageLog GROUP BY msgType HAVING count(*) > 1",
        "SELECT m FROM (SELECT max(id) AS m FROM MessageLog) t",
        "SELECT count(*) AS n FROM MessageLog GROUP BY window(ts, '10 seconds')",
        # windows: their contents depend on what evicted a tuple
        "SELECT id FROM MessageLog [ROWS 10]",
        "SELECT count(*) AS n FROM MessageLog [ROWS 10]",
        "SELECT id FROM MessageLog [NOW]",
        "SELECT count(*) AS n FROM MessageLog [RANGE 10 SECONDS]",
        "SELECT count(*) AS n FROM MessageLog [RANGE 10 SECONDS SLIDE 5 SECONDS]",
        # joins, semi- and anti-joins: a pair, or its absence, depends on both sides
        "SELECT m.id AS id FROM MessageLog [ROWS 5] m JOIN Notices [ROWS 5] n ON m.id = n.id",
        "SELECT count(*) AS n FROM MessageLog [ROWS 5] m JOIN Notices [ROWS 5] n ON m.id = n.id",
        "SELECT id FROM MessageLog WHERE id NOT IN (SELECT id FROM Notices)",
        "SELECT id FROM MessageLog WHERE NOT EXISTS (SELECT 1 FROM Notices)",
        "SELECT id, (SELECT 1) AS one FROM MessageLog",
        "SELECT id FROM MessageLog EXCEPT SELECT id FROM Notices",
        "SELECT id FROM MessageLog INTERSECT SELECT id FROM Notices",
        # a row that stands for, ranks or drops other rows
        "SELECT DISTINCT msgType FROM MessageLog",
        "SELECT id FROM MessageLog UNION SELECT id FROM Notices",
        "SELECT m FROM (SELECT DISTINCT msgType AS m FROM MessageLog) t",
        "SELECT id FROM MessageLog LIMIT 3",
        "SELECT id FROM MessageLog ORDER BY id",
        "SELECT id, row_number() OVER (ORDER BY id) AS r FROM MessageLog",
        "SELECT id, sum(id) OVER (PARTITION BY msgType) AS s FROM MessageLog",
        # a value that counts the rows before it in its partition
        "SELECT id, rand(7) AS r FROM MessageLog",
        "SELECT id, uuid() AS u FROM MessageLog",
        "SELECT id, monotonically_increasing_id() AS i FROM MessageLog",
        "SELECT id FROM MessageLog WHERE rand(1) < 0.5",
        # not recognised as a plain selection: fails closed
        "WITH t AS (SELECT id FROM MessageLog) SELECT id FROM t",
        "SELECT id FROM MessageLog TABLESAMPLE (10 PERCENT)",
    ],
)
def test_every_shape_with_state_writes_at_the_querys_level(text) -> None:
    assert level_of(text) is QUERY


def test_an_unknown_tree_fails_closed() -> None:
    """A shape no rule names (a plain STREAM shape over a tree that is no SELECT, a
    SELECT without FROM) gets the query's level."""
    stream = Shape(ShapeKind.STREAM)
    assert output_level(stream, exp.Literal.number(1)) is QUERY
    assert output_level(stream, exp.select("1")) is QUERY
    assert output_level(stream, exp.select("id").from_("MessageLog")) is ROW


@pytest.mark.parametrize("kind", [k for k in ShapeKind if k is not ShapeKind.STREAM])
def test_a_windowed_or_joined_shape_is_at_the_querys_level_whatever_its_text(kind) -> None:
    """The shape decides first: a window or a join is never refined by its text."""
    assert output_level(Shape(kind), exp.select("id").from_("MessageLog")) is QUERY


def test_restricted_operators_and_time_windows_fail_closed() -> None:
    tree = exp.select("id").from_("MessageLog")
    assert output_level(Shape(ShapeKind.STREAM, operators=frozenset({"sort"})), tree) is QUERY
    assert output_level(Shape(ShapeKind.STREAM, time_windows=(10.0,)), tree) is QUERY
    assert output_level(Shape(ShapeKind.STREAM, aggregate=True), tree) is QUERY
