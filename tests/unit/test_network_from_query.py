"""Operator trees come from admitted queries: exactly, or not at all (no JVM)."""

from __future__ import annotations

import pytest

from streamshield.examples import hospital
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.network.from_query import operator_tree, where_conjuncts
from streamshield.network.merge import merge
from streamshield.network.operators import (
    Aggregation,
    WindowSpec,
    aggregate,
    join,
    project,
    select,
    union,
    window,
)
from streamshield.network.predicates import parse_conjunction

STREAMS = ["HeartRate", "BodyTemperature"]


def admitted(text: str) -> AdmittedQuery:
    out = admit(text, ["C"], hospital.hierarchy(), STREAMS)
    assert isinstance(out, AdmittedQuery)
    return out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELECT * FROM HeartRate", "HeartRate"),
        (
            "SELECT patient_id, ts FROM HeartRate WHERE beats_per_min > 90 AND 120 <= patient_id",
            project(
                ["patient_id", "ts"],
                select(parse_conjunction("beats_per_min > 90 AND patient_id >= 120"), "HeartRate"),
            ),
        ),
        (
            "SELECT patient_id, avg(beats_per_min) FROM HeartRate [ROWS 100] GROUP BY patient_id",
            aggregate(
                Aggregation.AVG,
                "beats_per_min",
                ["patient_id"],
                window(WindowSpec.rows(100), "HeartRate"),
            ),
        ),
        (
            "SELECT count(*) FROM HeartRate [RANGE 10 SECONDS] WHERE beats_per_min >= -1.5",
            aggregate(
                Aggregation.COUNT,
                "*",
                [],
                select(
                    parse_conjunction("beats_per_min >= -1.5"),
                    window(WindowSpec.range(10), "HeartRate"),
                ),
            ),
        ),
        (
            "SELECT patient_id FROM HeartRate UNION ALL SELECT patient_id FROM BodyTemperature",
            union(project(["patient_id"], "HeartRate"), project(["patient_id"], "BodyTemperature")),
        ),
        (
            "SELECT * FROM HeartRate [ROWS 10] h JOIN BodyTemperature [ROWS 20] b "
            "ON h.patient_id = b.patient_id",
            join(
                {("patient_id", "patient_id")},
                window(WindowSpec.rows(10), "HeartRate"),
                window(WindowSpec.rows(20), "BodyTemperature"),
            ),
        ),
    ],
)
def test_shareable_plans_become_the_papers_operators(text: str, expected) -> None:
    assert operator_tree(admitted(text)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "SELECT beats_per_min + 1 AS b FROM HeartRate",
        "SELECT patient_id AS p FROM HeartRate",
        "SELECT * FROM HeartRate WHERE beats_per_min > 90 OR patient_id = 1",
        "SELECT * FROM HeartRate WHERE beats_per_min > ts",
        "SELECT count(*), max(ts) FROM HeartRate",
        "SELECT * FROM HeartRate [NOW]",
        "SELECT DISTINCT patient_id FROM HeartRate",
        "SELECT patient_id FROM HeartRate ORDER BY patient_id",
        "SELECT n FROM (SELECT count(*) AS n FROM HeartRate) t",
        "SELECT patient_id, ts FROM HeartRate GROUP BY patient_id",
    ],
)
def test_other_plans_are_not_shared(text: str) -> None:
    assert operator_tree(admitted(text)) is None


def test_two_clinicians_queries_share_their_window_and_selection() -> None:
    """The common case of query sharing: two users watching one ward share the work."""
    q1 = operator_tree(admitted("SELECT * FROM HeartRate [ROWS 50] WHERE patient_id = 120"))
    q2 = operator_tree(
        admitted(
            "SELECT patient_id, count(*) FROM HeartRate [ROWS 50] "
            "WHERE patient_id = 120 GROUP BY patient_id"
        )
    )
    network = merge({"q1": q1, "q2": q2})
    shared = [node for node, users in network.usage.items() if users == {"q1", "q2"}]
    assert any(node.kind == "window" for node in shared)
    assert any(node.kind == "select" for node in shared)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "SELECT patient_id FROM HeartRate [NOW] WHERE beats_per_min > 90 AND ts < 5",
            "beats_per_min > 90 AND ts < 5",
        ),
        (  # an OR, a function and a column on both sides are left out; the rest stay
            "SELECT count(*) AS n FROM HeartRate [RANGE 30] WHERE (ts = 1 OR ts = 2) "
            "AND abs(beats_per_min) > 3 AND 120 <= patient_id AND ts > patient_id",
            "patient_id >= 120",
        ),
        (  # without a window, a subquery is allowed: left out as well
            "SELECT ts FROM HeartRate WHERE ts > (SELECT min(ts) FROM BodyTemperature) "
            "AND beats_per_min <> 1.5",
            "beats_per_min != 1.5",
        ),
        ("SELECT patient_id FROM HeartRate [ROWS 2]", None),
        ("SELECT patient_id FROM HeartRate [ROWS 2] WHERE ts = 1 OR ts = 2", None),
        (  # the outer WHERE names the derived table's columns, not the stream's
            "SELECT p FROM (SELECT beats_per_min AS p FROM HeartRate) t WHERE p > 1",
            None,
        ),
    ],
)
def test_a_where_gives_the_conjuncts_a_shared_select_may_filter_by(text, expected) -> None:
    conjuncts = where_conjuncts(admitted(text))
    assert conjuncts == (None if expected is None else parse_conjunction(expected))


@pytest.mark.parametrize(
    "text",
    ["SELECT 1", "SELECT 1 AS one", "SELECT * FROM HeartRate UNION ALL SELECT 2"],
)
def test_a_select_without_from_has_no_tree(text: str) -> None:
    """A SELECT of constants is admitted, but no stream feeds it: nothing to share."""
    assert operator_tree(admitted(text)) is None
