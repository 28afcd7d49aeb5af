"""Threat: a query user reading a hidden value through what she computes from it.

The class: any user expression, predicate, subquery or aggregate whose result depends
on an attribute value or a tuple her roles may not read. The secured view masks hidden
attributes to NULL and drops hidden tuples *below* every user expression, so a nurse's
query sees the ward as if the hidden rates were NULL and the hidden tuples absent: a
predicate on a masked attribute selects by NULL, not by the value (no oracle), CASE,
COALESCE, comparisons and hashes give the same result for every masked row, and counts
do not include tuples she cannot see. The cardiologist's identical query is the control:
on readable values each of these expressions does tell the rows apart.
"""

from __future__ import annotations

import pytest

from tests.security.ward import HIDDEN_TUPLES, MASKED_RATES

pytestmark = pytest.mark.spark

PROBES = {
    "over": "CASE WHEN t.beats_per_min > 100 THEN 'high' ELSE 'low' END",
    "fallback": "coalesce(t.beats_per_min, -1)",
    "defined": "nvl2(t.beats_per_min, 1, 0)",
    "is_null": "t.beats_per_min IS NULL",
    "exact": "if(t.beats_per_min = 150, 1, 0)",
    "hashed": "hash(t.beats_per_min)",
    "text": "concat('r=', CAST(t.beats_per_min AS STRING))",
    "ratio": "try_divide(1, t.beats_per_min)",
    "json": "to_json(named_struct('b', t.beats_per_min))",
    "biggest": "greatest(t.beats_per_min, 100)",
    "ordered": "t.beats_per_min <=> 71.0",
}
EXPRESSIONS = "SELECT t.patient_id, " + ", ".join(f"{e} AS {n}" for n, e in PROBES.items())
# a derived table: the user's subquery sits above the mask too
PROBE_SQL = f"{EXPRESSIONS} FROM (SELECT * FROM HeartRate WHERE patient_id > 900) t"

ORACLE_SQL = (
    "SELECT t.patient_id FROM (SELECT * FROM HeartRate) t WHERE t.patient_id > 900 AND ("
    "t.beats_per_min > 100 OR t.beats_per_min = 0 OR "
    "CASE WHEN t.beats_per_min IS NULL THEN false ELSE t.beats_per_min < 80 END)"
)


def test_expressions_over_a_masked_attribute_cannot_tell_rows_apart(labelled_ward) -> None:
    nurse = {r["patient_id"]: r for r in labelled_ward.rows(PROBE_SQL, ["ND"])}
    assert set(nurse) == set(MASKED_RATES)  # ward-S's tuples do not exist for her
    probes = {pid: {k: v for k, v in r.items() if k != "patient_id"} for pid, r in nurse.items()}
    assert all(p == probes[903] for p in probes.values()), probes  # 903's NULL is real
    cardiologist = {r["patient_id"]: r for r in labelled_ward.rows(PROBE_SQL, ["C"])}
    assert set(cardiologist) == set(MASKED_RATES) | set(HIDDEN_TUPLES)
    differing = [n for n in PROBES if cardiologist[901][n] != cardiologist[902][n]]
    assert len(differing) >= len(PROBES) - 2, differing  # the probes do read values


def test_a_predicate_on_a_masked_attribute_is_no_oracle(labelled_ward) -> None:
    assert labelled_ward.rows(ORACLE_SQL, ["ND"]) == []
    selected = {r["patient_id"] for r in labelled_ward.rows(ORACLE_SQL, ["C"])}
    assert selected == {901, 902, 904, 951, 952}  # the same predicate on readable values


def test_aggregates_count_only_what_the_roles_may_read(labelled_ward) -> None:
    sql = (
        "SELECT count(*) AS n, count(beats_per_min) AS rated, sum(beats_per_min) AS total, "
        "max(patient_id) AS top, min(beats_per_min) AS lowest "
        "FROM HeartRate WHERE patient_id > 900"
    )
    [nurse] = labelled_ward.rows(sql, ["ND"])[-1:]
    assert nurse == {"n": 4, "rated": 0, "total": None, "top": 904, "lowest": None}
    [cardiologist] = labelled_ward.rows(sql, ["C"])[-1:]
    assert cardiologist["n"] == 6 and cardiologist["rated"] == 5 and cardiologist["top"] == 952


def test_a_shared_result_reaches_a_recipient_as_her_own_query_would(labelled_ward) -> None:
    """A cardiologist's results carry the labels of what they were made of, so a nurse
    receiving them (delivery's recipient check) gets what her own query would give:
    ward-M's ids with the rate masked, none of ward-S's tuples, no count over both."""
    sql = "SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id > 900"
    owner = {r["patient_id"]: r for r in labelled_ward.rows(sql, ["C"], recipient=["C"])}
    assert owner[902]["beats_per_min"] == 150.0 and set(owner) >= set(HIDDEN_TUPLES)
    nurse = {r["patient_id"]: r for r in labelled_ward.rows(sql, ["C"], recipient=["ND"])}
    assert set(nurse) == set(MASKED_RATES)
    assert all(r["beats_per_min"] is None for r in nurse.values())
    assert all("beats_per_min" in r["_masked"] for r in nurse.values())
    derived = "SELECT patient_id, beats_per_min * 2 AS doubled FROM HeartRate"
    doubled = labelled_ward.rows(
        derived + " WHERE patient_id IN (901, 902)", ["C"], recipient=["ND"]
    )
    assert {r["patient_id"] for r in doubled} == {901, 902}
    assert all(r["doubled"] is None and "doubled" in r["_masked"] for r in doubled)
    chosen = "SELECT patient_id FROM HeartRate WHERE beats_per_min > 100"  # chosen by a rate
    assert labelled_ward.rows(chosen, ["C"], recipient=["ND"]) == []
    count = "SELECT count(*) AS n FROM HeartRate WHERE patient_id > 900"
    assert labelled_ward.rows(count, ["C"], recipient=["C"])[-1]["n"] == 6
    assert labelled_ward.rows(count, ["C"], recipient=["ND"]) == []


def test_statistics_only_values_are_no_oracle_outside_whitelisted_aggregates(labelled_ward) -> None:
    """An insurer may aggregate ward-T's rates (FOR STATISTICS) but not read them: a
    CASE, a count_if, a FILTER clause or a GROUP BY over the rate sees NULL, so none can
    count the rows above a threshold; avg over the bare column does read the rates."""
    sql = (
        "SELECT count(*) AS n, avg(beats_per_min) AS mean, "
        "sum(CASE WHEN beats_per_min > 62 THEN 1 ELSE 0 END) AS high, "
        "count_if(beats_per_min > 62) AS counted, "
        "avg(beats_per_min) FILTER (WHERE beats_per_min > 62) AS filtered "
        "FROM HeartRate"
    )
    [row] = labelled_ward.rows(sql, ["INS"])[-1:]
    assert row == {"n": 4, "mean": 62.5, "high": 0, "counted": 0, "filtered": None}
    grouped = labelled_ward.rows(
        "SELECT beats_per_min, count(*) AS n FROM HeartRate GROUP BY 1", ["INS"]
    )
    assert {r["beats_per_min"] for r in grouped} == {None}
