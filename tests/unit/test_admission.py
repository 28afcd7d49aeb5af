"""A query is admitted once and secured by one ordered tuple of pure rules (no JVM)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from streamshield.examples import hospital
from streamshield.lang import query_check
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.lang.continuous import ShapeKind, SpInsert
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.rewrite_rules import (
    RULES,
    Rewrite,
    Sliding,
    bind_views,
    propagate_labels,
    refuse_reserved_names,
    runs_on_statistics,
    secure,
    sliding_window,
    statistics_only,
)

STREAMS = ["HeartRate", "BodyTemperature"]
NAMES = {s: tuple(hospital.SCHEMAS[s].attributes) for s in STREAMS}
HIERARCHY = hospital.hierarchy()


def admitted(text: str, roles=("C",)) -> AdmittedQuery:
    out = admit(text, roles, HIERARCHY, STREAMS)
    assert isinstance(out, AdmittedQuery)
    return out


def rewrite(query: AdmittedQuery, **options) -> Rewrite:
    views = {s: f"ss_v_{s}" for s in query.streams}
    return Rewrite(
        query.streams,
        views,
        {s: NAMES[s] for s in query.streams},
        ("_ss_r0_0", "_ss_d0_0"),
        ("_ss_src_0",),
        1,
        3,
        **options,
    )


def test_the_rules_run_in_their_documented_order() -> None:
    assert (
        refuse_reserved_names,
        sliding_window,
        bind_views,
        statistics_only,
        propagate_labels,
    ) == RULES


def test_admission_parses_the_text_once(monkeypatch) -> None:
    calls = []
    real = query_check._parse_one

    def counting(sql: str):
        calls.append(sql)
        return real(sql)

    monkeypatch.setattr(query_check, "_parse_one", counting)
    query = admitted("SELECT patient_id, beats_per_min FROM HeartRate WHERE beats_per_min > 90")
    assert len(calls) == 1
    secure(query.checked.tree, rewrite(query))
    # the rules work on the admitted tree and check the last tree itself: no text is
    # rendered and parsed again
    assert len(calls) == 1


def test_an_admitted_query_knows_its_shape_roles_and_streams() -> None:
    query = admitted("SELECT count(*) AS n FROM HeartRate [ROWS 10]", ("GP",))
    assert query.shape.kind is ShapeKind.WINDOW_RELATION and query.shape.aggregate
    assert query.roles == ("GP",) and "GP" in query.effective
    assert query.streams == ("HeartRate",) and not query.delegating


def test_admission_refuses_before_anything_runs() -> None:
    with pytest.raises(QueryRejected) as unknown:
        admit("SELECT 1 FROM HeartRate", ["nobody"], HIERARCHY, STREAMS)
    assert unknown.value.rule == "unknown_role"
    with pytest.raises(QueryRejected) as none:
        admit("SELECT 1 FROM HeartRate", [], HIERARCHY, STREAMS)
    assert none.value.rule == "no_role"
    with pytest.raises(QueryRejected):  # an invisible stream is an unknown one
        admit("SELECT * FROM BreathingRate", ["C"], HIERARCHY, STREAMS)
    script = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: 7, SRP = rbac:ER"
    assert isinstance(admit(script, ["C"], HIERARCHY, STREAMS), SpInsert)


def test_reserved_names_are_refused_on_the_users_tree() -> None:
    with pytest.raises(QueryRejected) as at_admission:
        admitted("SELECT _ss_r0_0 FROM HeartRate")
    assert at_admission.value.rule == "reserved_name"
    # and again by the first rule, whatever tree reaches it (defence in depth)
    query = admitted("SELECT patient_id FROM HeartRate")
    forged = sqlglot.parse_one("SELECT _ss_r0_0 FROM HeartRate", read="spark")
    with pytest.raises(QueryRejected) as refused:
        refuse_reserved_names(forged, rewrite(query))
    assert refused.value.rule == "reserved_name"


def test_rules_never_change_their_input_tree() -> None:
    query = admitted("SELECT patient_id, avg(beats_per_min) AS m FROM HeartRate GROUP BY 1")
    before = query.checked.tree.sql(dialect="spark")
    statistics = runs_on_statistics(query.checked.tree, query.streams, query.shape.aggregate)
    assert statistics
    out = secure(query.checked.tree, rewrite(query, statistics=True)).sql
    assert query.checked.tree.sql(dialect="spark") == before
    assert "_ss_v2" in out and "HAVING" in out  # the statistics rule ran
    assert "`ss_v_HeartRate`" in out and "FROM HeartRate" not in out


def test_the_secured_sql_reads_only_the_views_and_carries_labels() -> None:
    query = admitted("SELECT h.patient_id FROM HeartRate h WHERE h.beats_per_min > 90")
    out = secure(query.checked.tree, rewrite(query)).sql
    tables = {t.name for t in sqlglot.parse_one(out, read="spark").find_all(exp.Table)}
    assert tables == {"ss_v_HeartRate"}
    assert "_ss_r0_0" in out and "_ss_row0_r0" in out  # labels and dependency slots


def test_a_sliding_window_groups_by_the_event_time_before_views_are_bound() -> None:
    query = admitted("SELECT count(*) AS n FROM HeartRate [RANGE 10 SECONDS SLIDE 5 SECONDS]")
    assert query.shape.kind is ShapeKind.SLIDING_AGGREGATE
    (_, _, window) = query.shape.windows[0]
    out = secure(query.checked.tree, rewrite(query, sliding=Sliding("ts", window, True))).sql
    assert "timestamp_seconds" in out.lower() and "`window`" in out


def _kinds(tree: exp.Expr) -> list[str]:
    """Node kinds in walk order; a cast is a cast (Spark's parser reads ``CAST`` as
    sqlglot's TryCast), ``count(*)``'s width is no kind."""
    return [
        "Cast" if isinstance(n, exp.Cast | exp.TryCast) else type(n).__name__ for n in tree.walk()
    ]


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("SELECT patient_id, beats_per_min * 2 AS b FROM HeartRate WHERE beats_per_min > 90", {}),
        ("SELECT * FROM HeartRate", {}),
        (
            "SELECT patient_id, count(*) AS n, max(beats_per_min) AS top FROM HeartRate "
            "GROUP BY patient_id",
            {},
        ),
        (
            "SELECT patient_id, avg(beats_per_min) AS m FROM HeartRate GROUP BY 1",
            {"statistics": True},
        ),
        ("SELECT patient_id FROM HeartRate UNION ALL SELECT patient_id FROM BodyTemperature", {}),
        ("SELECT n FROM (SELECT count(*) AS n FROM HeartRate) t", {}),
    ],
)
def test_the_secured_tree_is_what_its_text_reads_as(text: str, options: dict) -> None:
    """The engine reads the secured tree (folds, fused passes) and Spark its rendering:
    every node a rule builds is the node the parser would read there (a ``bit_and`` is
    an aggregate, not an unknown function), so both see the same query."""
    query = admitted(text)
    secured = secure(query.checked.tree, rewrite(query, **options))
    again = sqlglot.parse_one(secured.sql, read="spark")
    assert _kinds(secured.tree) == _kinds(again)
    assert again.sql(dialect="spark") == secured.sql


@pytest.mark.parametrize(
    "sneaked",
    [
        "SELECT patient_id FROM HeartRate",  # the raw stream instead of its view
        "SELECT 1 FROM ss_v_HeartRate JOIN BodyTemperature ON TRUE",
        "SELECT 1 FROM ss_v_HeartRate WHERE patient_id IN (SELECT patient_id FROM t)",
        "SELECT * FROM range(10)",
    ],
)
def test_a_rule_that_reads_anything_but_the_views_is_caught(sneaked: str) -> None:
    """The last tree is checked to read exactly its views, whatever a rule did: a rule
    adding a read of anything else fails the registration, never reaches Spark."""
    query = admitted("SELECT patient_id FROM HeartRate")

    def sneaking(_tree: exp.Expr, _rewrite: Rewrite) -> exp.Expr:
        return sqlglot.parse_one(sneaked, read="spark")

    with pytest.raises(RuntimeError, match="reads other relations"):
        secure(query.checked.tree, rewrite(query), rules=(*RULES, sneaking))
