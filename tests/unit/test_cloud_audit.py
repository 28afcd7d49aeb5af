"""The cloud-auditing example (paper 2, section 4) and its oracle, without a JVM.

The server test (tests/server/test_cloud_audit.py) holds the engine to the oracle; these
tests hold the oracle and the example to the paper: every query is admitted on the path
its kind names, no query reads above its level, lowering a session only removes rows.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from streamshield.cli import main
from streamshield.examples import cloud_audit as ca
from streamshield.examples import cloud_audit_oracle as oracle
from streamshield.lang.continuous import ContinuousQuery, ShapeKind, parse_request, plan_shape
from streamshield.lang.query_check import check_query

PATH = {"select": ShapeKind.STREAM, "aggregate": ShapeKind.WINDOW_RELATION, "join": ShapeKind.JOIN}


@pytest.mark.parametrize("query", ca.QUERIES, ids=lambda q: q.name)
def test_each_query_is_admitted_on_the_path_of_its_kind(query: ca.Query) -> None:
    request = parse_request(query.text)
    assert isinstance(request, ContinuousQuery)
    check_query(request.sql, [ca.STREAM])
    assert plan_shape(request).kind is PATH[query.kind]


def test_the_papers_levels_and_users() -> None:
    lattice = ca.lattice()
    levels = {q.name: lattice.format(lattice.parse(q.level)) for q in ca.QUERIES}
    assert levels == {
        "q1": "[1, ⊥]", "q2": "[1, ⊥]", "q3": "[⊥, B]", "q4": "[⊥, T]",
        "q5": "[1, B]", "q6": "[1, B]", "q7": "[T, T]",
    }  # fmt: skip
    assert [lattice.format(lattice.parse(u.level)) for u in ca.USERS] == [
        "[1, ⊥]", "[⊥, B]", "[⊥, T]", "[1, B]", "[T, T]",
    ]  # fmt: skip
    for query in ca.QUERIES:  # every owner is cleared for her query's level
        assert lattice.dominated(ca.level(query.level), ca.level(ca.user(query.owner).level))


def test_wire_lines_number_each_channel_from_its_sp() -> None:
    tuples = 0
    for company in ca.COMPANIES:
        lines = [json.loads(x) for x in ca.wire_lines(company, 1) + ca.wire_lines(company, 2)]
        assert lines[0]["type"] == "sp" and lines[0]["srp"]["roles"] == ca.ROLE
        assert [x["seq"] for x in lines] == list(range(1, len(lines) + 1))
        assert {x["provider"] for x in lines} == {ca.provider(company)}
        tuples += len(lines) - 1
    assert tuples == len(ca.events())
    ids = [e.values[ca.TID] for e in ca.events()]
    assert ids == list(range(1, len(ids) + 1))


def test_no_query_reads_a_tuple_above_its_level() -> None:
    lattice = ca.lattice()
    for query in ca.QUERIES:
        rows = oracle.answers(query)
        assert rows, query.name  # every query has an answer in the scenario
        assert all(lattice.dominated(r.level, ca.level(query.level)) for r in rows)
    # the same text at a higher level reads more: Q2 at [1, ⊥] vs Q3 at [⊥, B]
    q2, q3 = (next(q for q in ca.QUERIES if q.name == n) for n in ("q2", "q3"))
    assert q2.text == q3.text and oracle.answers(q2) != oracle.answers(q3)


def test_the_recipient_decides_and_a_lowered_session_receives_less() -> None:
    q4, q7 = (next(q for q in ca.QUERIES if q.name == n) for n in ("q4", "q7"))
    full, lowered = oracle.answers(q4), oracle.received(q4, ca.LOWERED_USER)
    assert set(lowered) < set(full)
    assert {r.level for r in full} - {r.level for r in lowered} == {ca.level("[_, A]")}
    # Q7 is a join at [T, T]: every pair is written at [T, T] (write-equal), so no
    # subscriber below the top receives one, not even the pairs of her own companies.
    assert {r.level for r in oracle.answers(q7)} == {ca.level("[T, T]")}
    assert oracle.received(q7, "auditor1") == []
    assert oracle.received(q7, "cloud_1b") == []


def test_q5_is_written_at_its_querys_level() -> None:
    """Write-equal: the aggregate's row is at the query's level, not at its
    contributors' LUB, and an empty window's row of NULLs is at that level too."""
    (q5,) = (q for q in ca.QUERIES if q.name == "q5")
    [row] = oracle.answers(q5)
    assert row.level == ca.level("[1, B]")
    at_one = oracle.answers(ca.Query("q5", "auditor1", "[1, _]", q5.text, "aggregate", ""))
    assert [r.level for r in at_one] == [ca.level("[1, _]")]
    at_two = oracle.answers(ca.Query("q5", "cloud_all", "[2, T]", q5.text, "aggregate", ""))
    assert [r.level for r in at_two] == [ca.level("[2, T]")]  # CompanyB's records only
    [empty] = oracle.answers(ca.Query("q5", "auditor1", "[2, _]", q5.text, "aggregate", ""))
    assert empty == oracle.Row((("first_ts", None), ("last_ts", None)), ca.level("[2, _]"))


def test_cli_prints_what_each_auditor_receives() -> None:
    result = CliRunner().invoke(main, ["cloud-audit"])
    assert result.exit_code == 0, result.output
    for user in ca.USERS:
        assert f"== {user.name} at" in result.output
    assert "receives 2 row(s) of 3" in result.output  # the lowered session on Q4
    assert "receives 0 row(s) of 17" in result.output  # [1, ⊥] under Q7
