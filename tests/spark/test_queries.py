"""Secured continuous queries: what each role receives, hostile SQL, safe errors, labels."""

from __future__ import annotations

import logging
import re

import pytest

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.streaming_queries import MemorySink, QueryFailed, QueryService
from streamshield.examples import hospital
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.wire import parse_lines
from streamshield.policy.elements import SpElement, TupleElement
from streamshield.policy.shield import Decision, Forward, Schema, SecurityShield
from tests.spark.conformance import STREAMS, reference
from tests.spark.test_ingest_job import chunks, land

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def service(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("queries")
    for i, part in enumerate(chunks(hospital.elements(), 12)):
        land(root / "landing", part, i)
    ingest = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
    job = IngestJob(ingest, root / "landing", root / "store")
    job.start(available_now=True).awaitTermination()
    service = QueryService(spark, STREAMS, hospital.hierarchy(), job.store, root / "store")
    yield service
    for query in service.list():
        query.stop()


def run(service, spark, sql, roles, table):
    query = service.register(service.admit(sql, roles), MemorySink(table))
    query.process_all_available()
    return query, query.results()


def expected_heart_rate(roles):
    elements = hospital.elements()
    by_seq = {
        e.seq: e
        for e in elements
        if isinstance(e, TupleElement) and e.channel.stream == "HeartRate"
    }
    out = []
    for (stream, _provider, seq), (reason, attrs, _pid) in reference(elements, roles).items():
        if stream == "HeartRate" and reason == "pass":
            values = by_seq[seq].values
            out.append(
                (seq, *(values[a] if a in attrs else None for a in ("patient_id", "beats_per_min")))
            )
    return sorted(out)


@pytest.mark.parametrize("role", ["C", "GP", "ND", "ER", "INS"])
def test_selection_sees_exactly_what_the_reference_allows(service, spark, role) -> None:
    sql = "SELECT patient_id, beats_per_min FROM HeartRate WHERE beats_per_min > 0"
    _, rows = run(service, spark, sql, [role], f"sel_{role}")
    got = sorted((r["_ss_seq"], r["patient_id"], r["beats_per_min"]) for r in rows)
    assert got == expected_heart_rate([role])


def test_output_is_labelled(service, spark) -> None:
    query, rows = run(service, spark, "SELECT ts FROM HeartRate", ["C"], "labelled_out")
    assert query.labelled_output
    assert rows and all(r["_ss_policy"] and r["_ss_r0_0"] != 0 for r in rows)
    assert all(r["_ss_channel"] and "ward" not in r["_ss_channel"] for r in rows)


def test_origin_does_not_reveal_a_masked_tuple_id(service, spark) -> None:
    """Nurses see BodyTemperature without patient ids: the origin must not add them."""
    _, rows = run(service, spark, "SELECT * FROM BodyTemperature", ["ND"], "origin_nd")
    assert rows and all(r["patient_id"] is None and r["_ss_tid"] is None for r in rows)
    assert not any("provider" in r.asDict() or "stream" in r.asDict() for r in rows)


def test_aggregate_over_visible_rows_only(service, spark) -> None:
    sql = "SELECT patient_id, count(*) AS n FROM HeartRate GROUP BY patient_id"
    _, rows = run(service, spark, sql, ["GP"], "agg_gp")
    counts = {}
    for _seq, pid, _ in expected_heart_rate(["GP"]):
        counts[pid] = counts.get(pid, 0) + 1
    latest = {r["patient_id"]: r["n"] for r in rows}
    assert latest == counts
    assert all("_ss_r0_0" in r.asDict() for r in rows)


def test_union_keeps_each_tuples_own_labels_and_source(service, spark) -> None:
    sql = (
        "SELECT patient_id, ts FROM HeartRate UNION ALL SELECT patient_id, ts FROM BodyTemperature"
    )
    query, rows = run(service, spark, sql, ["C"], "union_c")
    assert query.labelled_output
    heart = service.provenance.label("HeartRate")[0]
    temperature = service.provenance.label("BodyTemperature")[0]
    sources = sorted(r["_ss_src_0"] for r in rows)
    # every row names its own stream only: none is widened to both
    assert set(sources) == {heart, temperature}
    assert sources.count(heart) == len(expected_heart_rate(["C"]))
    assert all(r["_ss_r0_0"] != 0 and r["_ss_policy"] for r in rows)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM parquet.`/etc`",
        "SELECT reflect('java.lang.System', 'exit', '0') FROM HeartRate",
        "SELECT java_method('java.lang.Runtime', 'getRuntime') FROM HeartRate",
        "SELECT * FROM range(10)",
        "SET spark.sql.ansi.enabled=false",
        "SELECT * FROM HeartRate; DROP TABLE x",
        "SELECT * FROM Unknown",
        "SELECT * FROM ss_0123_HeartRate",
        "INSERT INTO HeartRate SELECT * FROM HeartRate",
        "SELECT ts, 0 AS _ss_r0_0 FROM HeartRate",
    ],
)
def test_hostile_sql_is_rejected_before_spark(service, sql) -> None:
    before = len(service.spark.streams.active)
    with pytest.raises(QueryRejected):
        service.register(service.admit(sql, ["C"]), MemorySink("never"))
    assert len(service.spark.streams.active) == before


def test_unknown_or_missing_role_is_rejected(service) -> None:
    with pytest.raises(QueryRejected, match="unknown role"):
        service.register(service.admit("SELECT ts FROM HeartRate", ["Surgeon"]), MemorySink("x1"))
    with pytest.raises(QueryRejected):
        service.register(service.admit("SELECT ts FROM HeartRate", []), MemorySink("x2"))


CAST_ERROR = "SELECT CAST(CAST(beats_per_min AS STRING) AS INT) AS b FROM HeartRate"


def test_runtime_errors_do_not_leak_values(service, spark, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="streamshield.audit")
    query = service.register(service.admit(CAST_ERROR, ["C"]), MemorySink("cast_c"))
    with pytest.raises(QueryFailed) as failure:
        query.process_all_available()
    message = str(failure.value)
    assert "CAST_INVALID_INPUT" in message
    assert not re.search(r"'\d+\.\d+'", message) and "beats" not in message
    audit = [r.getMessage() for r in caplog.records if r.name == "streamshield.audit"]
    # which partition's bad value fails first is up to Spark: any of them is the detail
    assert any(re.search(r"'\d+\.\d+'", m) for m in audit), "the audit log keeps the details"


def test_hidden_rows_never_reach_user_expressions(service, spark) -> None:
    """The insurer sees no HeartRate tuple: the failing cast must never even run."""
    query, rows = run(service, spark, CAST_ERROR, ["INS"], "cast_ins")
    assert rows == [] and query.error() is None


def test_list_and_stop(service) -> None:
    query = service.register(
        service.admit("SELECT ts FROM HeartRate", ["C"]), MemorySink("to_stop")
    )
    assert query.name in [q.name for q in service.list()]
    service.stop(query.name)
    assert not query.active
    assert query.name not in [q.name for q in service.list()]


def test_punctuated_export_keeps_enforcing_downstream(service, tmp_path) -> None:
    """The exported stream, run through a reference shield downstream, gives each role
    no more than the exporting query could see, and each segment's sps come once."""
    out = tmp_path / "export"
    sql = "SELECT patient_id, beats_per_min, ts FROM HeartRate"
    query = service.export_punctuated(sql, ["GP"], out, name="export_gp")
    query.process_all_available()
    elements = list(
        parse_lines(
            line for f in sorted(out.glob("b*.jsonl")) for line in f.read_text().splitlines()
        )
    )
    tuples = [e for e in elements if isinstance(e, TupleElement)]
    expected = expected_heart_rate(["GP"])
    assert len(tuples) == len(expected)
    schemas = {"export_gp": Schema(("patient_id", "beats_per_min", "ts"))}
    downstream = SecurityShield(hospital.hierarchy(), ["GP"], schemas)
    outs = list(downstream.process(elements))
    assert all(d.passed for d in outs if isinstance(d, Decision))
    forwards = [o for o in outs if isinstance(o, Forward)]
    sps = [e for e in elements if isinstance(e, SpElement)]
    assert sum(len(f.policy.sps) for f in forwards) == len(sps), "each sp forwarded once"
    # a role the exporting query's policies never granted stays denied downstream
    insurer = SecurityShield(hospital.hierarchy(), ["INS"], schemas).decisions(elements)
    assert insurer and not any(d.passed for d in insurer)


def test_export_of_renamed_columns_is_rejected(service, tmp_path) -> None:
    with pytest.raises(QueryRejected, match="attributes by name"):
        service.export_punctuated(
            "SELECT beats_per_min AS b FROM HeartRate", ["GP"], tmp_path / "x", name="bad_export"
        )
