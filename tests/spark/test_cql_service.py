"""The query interface end to end: INSERT SP, window queries, joins in SQL, delegation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.cql_service import SpsInserted
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.lang.cql import parse_policy
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.elements import Channel, SpElement, TupleElement
from tests.spark.conformance import reference

pytestmark = pytest.mark.spark

# A channel whose provider lets cardiologists pass patient ids and times on (WITH GRANT
# OPTION) but not heart rates, which they may only read.
DELEGABLE = """
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: {patient_id, ts},
  SRP = rbac:C WITH GRANT OPTION;
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: beats_per_min, SRP = rbac:C
"""
GRANTED = Channel("HeartRate", "ward-G")


def delegable_elements() -> list:
    policy = parse_policy(DELEGABLE, ts=50)
    out: list = [SpElement(GRANTED, sp.sn, sp) for sp in policy.sps]
    for i, patient in enumerate((301, 302, 303), start=len(out) + 1):
        values = {"patient_id": patient, "beats_per_min": 60.0 + i, "ts": 1000 + i}
        out.append(TupleElement(GRANTED, i, patient, 50, policy.csn, values))
    return out


class Collect:
    """A callback sink keeping every delivered row, per batch."""

    def __init__(self) -> None:
        self.batches: list[list[dict]] = []

    def __call__(self, frame, batch_id) -> None:
        self.batches.append([r.asDict() for r in frame.collect()])

    @property
    def rows(self) -> list[dict]:
        return [row for batch in self.batches for row in batch]


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("cql")
    catalog = hospital_catalog(root / "catalog.db")
    pipeline = Pipeline(spark, catalog, root)
    result = pipeline.landing.append(hospital.elements() + delegable_elements())
    assert not result.rejected
    pipeline.ingest_available()
    yield pipeline
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


def submit(pipeline, text, roles, name=None):
    sink = Collect()
    query = pipeline.cql.submit(pipeline.cql.admit(text, roles), CallbackSink(sink), name=name)
    query.process_all_available()
    return query, sink


def visible_heart_rates(roles) -> list[tuple]:
    elements = hospital.elements() + delegable_elements()
    tuples = {
        (e.channel.provider, e.seq): e
        for e in elements
        if isinstance(e, TupleElement) and e.channel.stream == "HeartRate"
    }
    out = []
    for (stream, provider, seq), (reason, attrs, _pid) in reference(elements, roles).items():
        if stream == "HeartRate" and reason == "pass":
            values = tuples[(provider, seq)].values
            out.append(tuple(values[a] if a in attrs else None for a in ("patient_id", "ts")))
    return sorted(out, key=str)


def test_now_window_emits_each_visible_tuple_once(pipeline) -> None:
    _, sink = submit(pipeline, "SELECT patient_id, ts FROM HeartRate [NOW]", ["C"])
    got = sorted(((r["patient_id"], r["ts"]) for r in sink.rows), key=str)
    assert got == visible_heart_rates(["C"])


def test_rows_window_aggregate_counts_only_the_latest_visible_tuples(pipeline) -> None:
    sql = "SELECT count(*) AS n FROM HeartRate [ROWS 2]"
    _, sink = submit(pipeline, sql, ["C"])
    # two channels (ward-A, ward-G) both with >= 2 tuples C may read: 2 of the stream
    assert [r["n"] for r in sink.rows] == [2]
    _, none = submit(pipeline, sql, ["INS"])
    assert [r["n"] for r in none.rows] == [0]  # an insurer reads no heart rate


def test_join_in_sql_pairs_only_tuples_one_role_reads_on_both_sides(pipeline) -> None:
    sql = (
        "SELECT h.patient_id AS pid, h.beats_per_min AS hr, b.temperature AS temp "
        "FROM HeartRate [ROWS 100] h JOIN BodyTemperature [ROWS 100] b "
        "ON h.patient_id = b.patient_id"
    )
    _, sink = submit(pipeline, sql, ["C"])
    heart = [pid for pid, _ts in visible_heart_rates(["C"]) if pid is not None]
    temperature = [120, 125, 140]
    expected = sorted(p for p in heart for q in temperature if p == q)
    assert sorted(r["pid"] for r in sink.rows) == expected
    assert all(r["hr"] is not None and r["temp"] is not None for r in sink.rows)
    assert all(r["_ss_r0_0"] is not None for r in sink.rows)  # the pair stays labelled
    _, nurse = submit(pipeline, sql, ["ND"])
    assert nurse.rows == []  # nurses never read the join key on BodyTemperature


def test_insert_sp_through_the_query_interface_governs_the_providers_tuples(pipeline) -> None:
    text = "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: 7, SRP = rbac:ER"
    inserted = pipeline.cql.submit(
        pipeline.cql.admit(text, ["ER"]), CallbackSink(Collect()), provider="ward-S"
    )
    assert isinstance(inserted, SpsInserted) and inserted.csn == 1
    channel = inserted.channel
    values = {"patient_id": 7, "beats_per_min": 80.0, "ts": 5}
    tuple_ = TupleElement(channel, inserted.last_seq + 1, 7, inserted.ts, inserted.csn, values)
    assert not pipeline.landing.append([tuple_]).rejected
    pipeline.ingest_available()
    sql = "SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id = 7"
    _, sink = submit(pipeline, sql, ["ER"])
    assert [(r["patient_id"], r["beats_per_min"]) for r in sink.rows] == [(7, 80.0)]
    _, other = submit(pipeline, sql, ["C"])
    assert other.rows == []  # the inserted policy grants emergency responders only
    with pytest.raises(QueryRejected) as unknown:
        pipeline.cql.submit(
            pipeline.cql.admit(
                "INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: *, SRP = rbac:Nobody", ["ER"]
            ),
            CallbackSink(Collect()),
            provider="ward-S",
        )
    assert unknown.value.rule == "unknown_role"
    with pytest.raises(QueryRejected):
        pipeline.cql.submit(
            pipeline.cql.admit(
                "INSERT SP INTO STREAM Secret LET DDP = TUPLES: *, SRP = rbac:ER", ["ER"]
            ),
            CallbackSink(Collect()),
            provider="ward-S",
        )


ON_RESULT = (
    "SELECT patient_id, beats_per_min, ts FROM HeartRate "
    "ON RESULT INSERT SP INTO STREAM {target} LET DDP = TUPLES: *, SRP = rbac:INS"
)


def test_delegation_passes_on_only_what_is_held_with_grant_option(pipeline) -> None:
    submit(pipeline, ON_RESULT.format(target=""), ["C"], name="deleg")
    assert "deleg_result" in pipeline.cql.streams
    pipeline.ingest_available()
    _, sink = submit(pipeline, "SELECT * FROM deleg_result", ["INS"])
    rows = sorted(sink.rows, key=lambda r: r["patient_id"])
    # only ward-G's tuples were held WITH GRANT OPTION; ward-A's, readable by C, stay out
    assert [r["patient_id"] for r in rows] == [301, 302, 303]
    # the heart rate was readable but not delegable: it never reaches the insurer
    assert all(r["beats_per_min"] is None for r in rows)
    assert [r["ts"] for r in rows] == [1003, 1004, 1005]
    _, other = submit(pipeline, "SELECT * FROM deleg_result", ["ND"])
    assert other.rows == []  # the delegated sp names the insurer only


@pytest.mark.parametrize(
    ("roles", "target", "rule"),
    [
        (["GP"], "", "no_grant_option"),  # reads HeartRate, holds no grant option on it
        (["C"], "HeartRate", "on_result_stream"),  # may not inject into its own input
        (["INS"], "", "no_grant_option"),
    ],
)
def test_delegation_without_grant_option_is_rejected_at_registration(
    pipeline, roles, target, rule
) -> None:
    with pytest.raises(QueryRejected) as err:
        pipeline.cql.submit(
            pipeline.cql.admit(ON_RESULT.format(target=target), roles), CallbackSink(Collect())
        )
    assert err.value.rule == rule


def test_an_aggregate_that_ran_on_its_own_resumes_on_its_own(pipeline) -> None:
    """Switching aggregates to folding branches (the default) must not
    move one that already ran as a streaming query of its own: its checkpoint holds every
    group since it began, while a branch would fold only the batches still stored, and
    would emit every group again. Resumed with sharing on, it stays alone, emits nothing
    new, and counts on from its own state."""
    cql = pipeline.cql
    text = "SELECT patient_id, count(*) AS n FROM HeartRate GROUP BY patient_id"
    before, after = Collect(), Collect()
    assert cql.tuning.share_aggregates
    cql.tuning = replace(
        cql.tuning, share_aggregates=False
    )  # as a server with the setting off runs it
    try:
        cql.submit(
            cql.admit(text, ["C"]), CallbackSink(before), name="upgraded"
        ).process_all_available()
    finally:
        cql.tuning = replace(cql.tuning, share_aggregates=True)
    cql.stop("upgraded")
    counts = {r["patient_id"]: r["n"] for r in before.rows}
    assert counts[301] == 1

    resumed = cql.submit(cql.admit(text, ["C"]), CallbackSink(after), name="upgraded")
    resumed.process_all_available()
    assert not any("upgraded" in n.branches for n in cql.networks.values())
    assert after.rows == [], "nothing new arrived: nothing is emitted again"
    policy = parse_policy(DELEGABLE, ts=50)
    seq = len(policy.sps) + 3  # the channel's last seq (delegable_elements)
    values = {"patient_id": 301, "beats_per_min": 70.0, "ts": 1100}
    one_more = TupleElement(GRANTED, seq + 1, 301, 50, policy.csn, values)
    assert not pipeline.landing.append([one_more]).rejected
    pipeline.ingest_available()
    resumed.process_all_available()
    assert [(r["patient_id"], r["n"]) for r in after.rows] == [(301, 2)]
    cql.stop("upgraded")


def test_a_branch_restarted_without_sharing_starts_over_the_stored_batches(pipeline) -> None:
    """The other direction (docs/query-sharing.md): a folding branch restarted with
    ``share_aggregates`` off runs as a new query of its own over the stored batches. It
    emits every group once more, with the counts the branch had reached: no row is
    counted twice, none is lost while the batches are stored."""
    cql = pipeline.cql
    text = "SELECT patient_id, count(*) AS n FROM HeartRate GROUP BY patient_id"
    shared, alone = Collect(), Collect()
    assert cql.tuning.share_aggregates
    cql.submit(
        cql.admit(text, ["C"]), CallbackSink(shared), name="downgraded"
    ).process_all_available()
    assert any("downgraded" in n.branches for n in cql.networks.values())
    cql.stop("downgraded")
    reached = {r["patient_id"]: r["n"] for r in shared.rows}  # the last update wins
    assert reached and sum(reached.values()) > len(reached)

    cql.tuning = replace(cql.tuning, share_aggregates=False)
    try:
        resumed = cql.submit(cql.admit(text, ["C"]), CallbackSink(alone), name="downgraded")
        resumed.process_all_available()
        assert not any("downgraded" in n.branches for n in cql.networks.values())
        assert {r["patient_id"]: r["n"] for r in alone.rows} == reached
        assert len(alone.rows) == len(reached), "each group once"
    finally:
        cql.tuning = replace(cql.tuning, share_aggregates=True)
        cql.stop("downgraded")


def test_a_sliding_aggregate_folds_as_a_branch_unless_it_ran_on_its_own(pipeline) -> None:
    """A ``[RANGE t SLIDE s]`` aggregate joins its stream's selection network as a
    folding branch (``share_sliding``) and emits what it emits as Spark's windowed
    aggregation of its own (HeartRate's event time is a bigint: no watermark, alone or
    folded). One that already ran on its own resumes on its own, from its checkpoint."""
    cql = pipeline.cql
    text = (
        "SELECT patient_id, count(*) AS n, max(beats_per_min) AS hi "
        "FROM HeartRate [RANGE 60 SLIDE 30] GROUP BY patient_id"
    )
    own, folded, resumed = Collect(), Collect(), Collect()
    assert cql.tuning.share_sliding, "on by default"
    cql.tuning = replace(cql.tuning, share_sliding=False)
    try:
        cql.submit(
            cql.admit(text, ["C"]), CallbackSink(own), name="slide_own"
        ).process_all_available()
    finally:
        cql.tuning = replace(cql.tuning, share_sliding=True)
    assert "slide_own" not in cql.branches
    cql.submit(cql.admit(text, ["C"]), CallbackSink(folded), name="slide_b").process_all_available()
    assert "slide_b" in cql.branches
    branch = cql.networks[cql.branches["slide_b"]].branches["slide_b"]
    assert branch.folded is not None and branch.folded.closing is None
    assert own.rows and sorted(map(repr, folded.rows)) == sorted(map(repr, own.rows))
    cql.stop("slide_own")
    again = cql.submit(cql.admit(text, ["C"]), CallbackSink(resumed), name="slide_own")
    again.process_all_available()
    assert "slide_own" not in cql.branches, "its checkpoint holds its state: alone"
    assert resumed.rows == [], "nothing new arrived: nothing is emitted again"
    for name in ("slide_own", "slide_b"):
        cql.stop(name)
