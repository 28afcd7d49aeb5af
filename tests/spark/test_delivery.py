"""SecFilter at delivery: provenance through queries, rights read fresh every micro-batch.

Queries read the hospital example's labelled store (real secure ingest) through
secured views with provenance; each ``feed`` copies a stream's labelled files into the
query's source once more, so one ``processAllAvailable`` is exactly one micro-batch.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamshield.engine.delivery import delivery as delivery_module
from streamshield.engine.delivery.delivery import Delivery, _class_plan
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.store.labelled_store import labelled_schema, read_stream
from streamshield.engine.views.labels import denied_column, reader_column
from streamshield.engine.views.provenance_columns import provenance_column, with_provenance
from streamshield.engine.views.secured_view import secured_view
from streamshield.examples import hospital
from streamshield.lang.label_propagation import propagate_labels
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.provenance import ProvenanceCodec, Rights
from tests.spark.conformance import STREAMS
from tests.spark.test_ingest_job import land

pytestmark = pytest.mark.spark

HR, BT = "HeartRate", "BodyTemperature"
PROVENANCE = ProvenanceCodec([HR, BT, "BreathingRate"])  # registration order
ROLES = ["C"]  # a cardiologist's query: sees HeartRate and BodyTemperature tuples


def everyone(_subscription) -> tuple[int, ...]:
    """A recipient mask for static frames whose tuple label every role reads."""
    return (1,)


def readable_by_everyone(frame: DataFrame) -> DataFrame:
    """A tuple label (one word) that admits every role and denies none."""
    return frame.withColumns(
        {"_ss_r0_0": F.lit(-1).cast("long"), "_ss_d0_0": F.lit(0).cast("long")}
    )


class Harness:
    """Labelled store of the hospital example and query sources fed batch by batch."""

    def __init__(self, spark, root: Path) -> None:
        land(root / "landing", hospital.elements(), 0)  # one ingest micro-batch
        ingest = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
        self.job = IngestJob(ingest, root / "landing", root / "store")
        self.job.start(available_now=True).awaitTermination()
        self.spark, self.root = spark, root
        self.roles = RoleCodec(hospital.hierarchy())
        self.run = ""

    def query_mask(self, _subscription=None) -> tuple[int, ...]:
        """Every subscriber here is a cardiologist, as the query (the recipient's mask)."""
        return self.roles.query(ROLES)

    def fresh(self) -> Harness:
        """Empty sources for the next test's queries."""
        self.run = uuid.uuid4().hex
        return self

    def source(self, stream: str) -> Path:
        return self.root / "sources" / self.run / stream

    def feed(self, *streams: str) -> None:
        """One more copy of each stream's labelled tuples for the next micro-batch."""
        for stream in streams:
            target = self.source(stream) / uuid.uuid4().hex
            target.mkdir(parents=True)
            files = self.job.store.path(stream).rglob("*.parquet")
            for n, f in enumerate(files):
                shutil.copy(f, target / f"part-{n}.parquet")

    def view(self, stream: str, session=None) -> DataFrame:
        session = session or self.spark
        schema = STREAMS[stream]
        self.source(stream).mkdir(parents=True, exist_ok=True)
        struct = labelled_schema(session, schema.ddl, len(schema.names), self.roles.width)
        source = read_stream(session, struct, self.source(stream))
        view = secured_view(source, schema, self.roles, ROLES, keep_labels=True)
        return with_provenance(view, stream, PROVENANCE)  # the lead's one-line wiring

    def start(self, frame: DataFrame, delivery: Delivery, update: bool = False):
        name = f"delivery_{uuid.uuid4().hex[:8]}"
        writer = frame.writeStream.queryName(name).foreachBatch(delivery)
        writer = writer.option("checkpointLocation", str(self.root / "checkpoints" / name))
        return (writer.outputMode("update") if update else writer).start()

    def sql(self, text: str, stream: str) -> DataFrame:
        """A user query over one stream with label propagation, as QueryService runs it."""
        session = self.spark.newSession()
        self.view(stream, session).createOrReplaceTempView(stream)
        labels = [c(0, w) for w in range(self.roles.width) for c in (reader_column, denied_column)]
        labels += [provenance_column(w) for w in range(PROVENANCE.width)]
        return session.sql(propagate_labels(text, labels, "_ss_r"))


@pytest.fixture(scope="module")
def labelled(spark, tmp_path_factory) -> Harness:
    return Harness(spark, tmp_path_factory.mktemp("delivery"))


@pytest.fixture
def harness(labelled) -> Harness:
    return labelled.fresh()


class Inbox:
    """A subscriber's received rows, per micro-batch."""

    def __init__(self) -> None:
        self.batches: list[list[dict]] = []

    def __call__(self, rows: list[dict]) -> None:
        self.batches.append(rows)

    def take(self) -> list[dict]:
        rows = [r for batch in self.batches for r in batch]
        self.batches.clear()
        return rows


def expected_rows(harness: Harness, stream: str) -> int:
    """Tuples of one copy of the stream that the query's roles see."""
    schema = STREAMS[stream]
    frame = harness.job.store.read(harness.spark, schema, harness.roles.width)
    return secured_view(frame, schema, harness.roles, ROLES).count()


def test_revocation_takes_effect_in_the_next_micro_batch(harness) -> None:
    rights = {"alice": Rights(frozenset({HR})), "bob": Rights(frozenset({HR}))}

    def lookup(user: str) -> Rights:
        if user == "mallory":
            raise ConnectionError("catalog down")
        return rights[user]

    drops: list[tuple] = []
    delivery = Delivery(
        lookup, PROVENANCE, roles=harness.query_mask, on_drop=lambda *d: drops.append(d)
    )
    alice, bob, mallory = Inbox(), Inbox(), Inbox()
    delivery.subscribe("alice", alice)
    delivery.subscribe("bob", bob)
    delivery.subscribe("mallory", mallory)
    query = harness.start(
        harness.sql("SELECT patient_id, beats_per_min FROM HeartRate", HR), delivery
    )
    n = expected_rows(harness, HR)
    try:
        harness.feed(HR)
        query.processAllAvailable()
        got = alice.take()
        assert len(got) == n > 0 and len(bob.take()) == n
        assert set(got[0]) == {"patient_id", "beats_per_min"}, "no label or origin columns"

        rights["alice"] = Rights(frozenset({BT}))  # revoke HeartRate, keep another right
        drops.clear()
        harness.feed(HR)
        query.processAllAvailable()
        assert alice.take() == [], "a revoked subscriber gets nothing from the next batch"
        assert len(bob.take()) == n, "the others still receive"
        dropped = {d[0]: d for d in drops}
        assert dropped["alice"][2] == n and dropped["alice"][3], "counted, with policy ids"
        assert "bob" not in dropped

        rights["alice"] = Rights(frozenset({HR}))  # grant again
        harness.feed(HR)
        query.processAllAvailable()
        assert len(alice.take()) == n
        assert mallory.take() == [], "a failed rights lookup delivers nothing"
    finally:
        query.stop()


def test_strong_semantic_on_a_union_and_its_aggregate(harness) -> None:
    tuple_label = [
        c(0, w) for w in range(harness.roles.width) for c in (reader_column, denied_column)
    ]
    hr = harness.view(HR).select("patient_id", "ts", provenance_column(0), *tuple_label)
    bt = harness.view(BT).select("patient_id", "ts", provenance_column(0), *tuple_label)
    union = hr.unionByName(bt)
    counts = union.groupBy("patient_id").agg(
        F.count("*").alias("n"),
        F.bit_or(provenance_column(0)).alias(provenance_column(0)),
        *(F.bit_and(c).alias(c) for c in tuple_label if c.startswith("_ss_r")),
        *(F.bit_or(c).alias(c) for c in tuple_label if c.startswith("_ss_d")),
    )
    rights = {
        "both": Rights(frozenset({HR, BT})),
        "hr_only": Rights(frozenset({HR})),
        "hr_agg_bt": Rights(frozenset({HR}), frozenset({BT})),
    }
    raw, aggregated = (
        Delivery(rights.get, PROVENANCE, roles=harness.query_mask),
        Delivery(rights.get, PROVENANCE, roles=harness.query_mask, aggregate=True),
    )
    inboxes = {}
    for user in rights:
        inboxes["raw", user], inboxes["agg", user] = Inbox(), Inbox()
        raw.subscribe(user, inboxes["raw", user])
        aggregated.subscribe(user, inboxes["agg", user])
    queries = [harness.start(union, raw), harness.start(counts, aggregated, update=True)]
    try:
        harness.feed(HR, BT)
        for query in queries:
            query.processAllAvailable()
        n_hr, n_bt = expected_rows(harness, HR), expected_rows(harness, BT)
        assert len(inboxes["raw", "both"].take()) == n_hr + n_bt
        assert len(inboxes["raw", "hr_only"].take()) == n_hr
        assert len(inboxes["raw", "hr_agg_bt"].take()) == n_hr, "no raw BodyTemperature"
        groups = inboxes["agg", "both"].take()
        assert groups and sum(g["n"] for g in groups) == n_hr + n_bt
        assert inboxes["agg", "hr_only"].take() == [], "mixed rows need READ on both"
        assert inboxes["agg", "hr_agg_bt"].take() == groups, "aggregate-read releases them"
    finally:
        for query in queries:
            query.stop()


def deny_cases(spark) -> DataFrame:
    """One batch of four rows (v = 1 to 4): one readable with HR's provenance, the others
    with a label missing, empty or naming what no right covers."""
    src = [provenance_column(0), provenance_column(1)]
    hr = PROVENANCE.label(HR)[0]
    return spark.createDataFrame(
        [(1, hr, 0, "p1"), (2, None, 0, "p2"), (3, 0, 0, "p3"), (4, hr, 1 << 3, "p4")],
        ["v", *src, "_ss_policy"],
    ).transform(readable_by_everyone)


def test_unlabelled_or_malformed_rows_and_rights_deny(spark) -> None:
    """Checks on one static batch: every way a label or a right can be missing denies."""
    frame = deny_cases(spark)
    answers = {"ok": Rights(frozenset({HR})), "pair": ({HR}, set()), "str": HR, "none": None}
    inboxes = {user: Inbox() for user in answers}
    drops: list[tuple] = []
    delivery = Delivery(answers.get, PROVENANCE, roles=everyone, on_drop=lambda *d: drops.append(d))
    for user, inbox in inboxes.items():
        delivery.subscribe(user, inbox)
    delivery(frame, 7)
    # NULL word, no source at all, a source no codec knows: dropped
    assert inboxes["ok"].take() == [{"v": 1}] and inboxes["pair"].take() == [{"v": 1}]
    assert inboxes["str"].take() == [] and inboxes["none"].take() == []
    assert sorted(drops) == [
        ("none", 7, 4, ("p1", "p2", "p3", "p4")),
        ("ok", 7, 3, ("p2", "p3", "p4")),
        ("pair", 7, 3, ("p2", "p3", "p4")),
        ("str", 7, 4, ("p1", "p2", "p3", "p4")),
    ]
    # no provenance column at all (a query the lead forgot to label): nobody gets anything
    unlabelled = Delivery(answers.get, PROVENANCE, roles=everyone)
    unlabelled.subscribe("ok", inboxes["ok"])
    unlabelled(frame.drop(provenance_column(0), provenance_column(1)), 8)
    assert inboxes["ok"].take() == []


def test_aggregate_right_never_releases_raw_tuples(spark) -> None:
    """A query wrongly declared an aggregate still outputs tuples with their seq: raw."""
    frame = spark.createDataFrame(
        [(1, PROVENANCE.label(BT)[0], 5)], ["v", provenance_column(0), "_ss_seq"]
    ).transform(readable_by_everyone)
    inbox = Inbox()
    delivery = Delivery(
        lambda _: Rights(aggregate=frozenset({BT})), PROVENANCE, roles=everyone, aggregate=True
    )
    delivery.subscribe("u", inbox)
    delivery(frame, 0)
    assert inbox.take() == []
    delivery(frame.drop("_ss_seq"), 1)
    assert inbox.take() == [{"v": 1}], "a real aggregate's row is released"


def test_provenance_beyond_64_sources_is_checked_word_by_word(spark) -> None:
    """Borealis stops at 32 sources; here a label spans words. A row from a source in word
    0 and one in word 2 needs READ on both, and the same bit in another word is no stand-in.
    """
    codec = ProvenanceCodec([f"s{i}" for i in range(150)])
    assert codec.width == 3
    columns = [provenance_column(w) for w in range(codec.width)]
    frame = spark.createDataFrame(
        [(1, *codec.encode(["s3", "s140"])), (2, *codec.encode(["s140"]))], ["v", *columns]
    ).transform(readable_by_everyone)
    rights = {
        "both": Rights(frozenset({"s3", "s140"})),
        "high": Rights(frozenset({"s140"})),
        "low": Rights(frozenset({"s3"})),
        "same_bits_elsewhere": Rights(frozenset({"s3", "s12", "s76"})),  # bit 12 of words 0, 1
    }
    inboxes = {user: Inbox() for user in rights}
    delivery = Delivery(rights.get, codec, roles=everyone)
    for user, inbox in inboxes.items():
        delivery.subscribe(user, inbox)
    delivery(frame, 0)
    received = {user: sorted(r["v"] for r in inbox.take()) for user, inbox in inboxes.items()}
    assert received == {"both": [1, 2], "high": [2], "low": [], "same_bits_elsewhere": []}


def two_streams(spark) -> DataFrame:
    """Six rows every role reads: even ones from HeartRate (policy p0), odd ones from
    BodyTemperature (p1)."""
    hr, bt = PROVENANCE.label(HR)[0], PROVENANCE.label(BT)[0]
    return (
        spark.range(6)
        .select(
            F.col("id").alias("v"),
            F.when(F.col("id") % 2 == 0, F.lit(hr))
            .otherwise(F.lit(bt))
            .alias(provenance_column(0)),
            F.concat(F.lit("p"), (F.col("id") % 2).cast("string")).alias("_ss_policy"),
        )
        .transform(readable_by_everyone)
    )


def test_class_plans_outlive_the_batch_but_never_a_change_of_rights(spark, monkeypatch) -> None:
    """A class's columns are built once and reused batch after batch (building them is
    Py4J-bound), yet a subscriber whose rights change is checked with the new ones in
    the very next batch: the plan is keyed by the rights themselves."""
    built: list[tuple] = []

    def class_plan(*args):
        built.append(args[5])
        return _class_plan(*args)

    monkeypatch.setattr(delivery_module, "_class_plan", class_plan)
    frame = two_streams(spark)
    rights = {"hr": Rights(frozenset({HR})), "bt": Rights(frozenset({BT}))}
    inboxes = {user: Inbox() for user in rights}
    delivery = Delivery(rights.get, PROVENANCE, roles=everyone, on_drop=lambda *_d: None)
    for user, inbox in inboxes.items():
        delivery.subscribe(user, inbox)

    def deliver(batch: int) -> dict[str, list[int]]:
        delivery(frame, batch)
        return {user: sorted(r["v"] for r in inbox.take()) for user, inbox in inboxes.items()}

    assert deliver(1) == {"hr": [0, 2, 4], "bt": [1, 3, 5]} and len(built) == 2
    assert deliver(2) == {"hr": [0, 2, 4], "bt": [1, 3, 5]} and len(built) == 2, "reused"
    rights["bt"] = Rights(frozenset({HR}))  # revoke BodyTemperature, grant HeartRate
    assert deliver(3) == {"hr": [0, 2, 4], "bt": [0, 2, 4]} and len(built) == 2, "hr's plan"
    rights["hr"] = Rights(frozenset())  # revoke everything
    assert deliver(4) == {"hr": [], "bt": [0, 2, 4]} and len(built) == 3


def test_one_job_per_batch_for_every_class_and_its_drop_report(spark) -> None:
    """Three recipient classes (rights and masks differ) and a drop report: one Spark job
    reads the batch once; each class still gets only its own rows, masked its own way."""
    frame = two_streams(spark)
    rights = {"hr": Rights(frozenset({HR})), "bt": Rights(frozenset({BT})), "no": None}
    inboxes = {user: Inbox() for user in rights}
    drops: list[tuple] = []
    delivery = Delivery(rights.get, PROVENANCE, roles=everyone, on_drop=lambda *d: drops.append(d))
    for user, inbox in inboxes.items():
        delivery.subscribe(user, inbox)
    context = spark.sparkContext
    group = f"delivery-{uuid.uuid4().hex}"
    context.setJobGroup(group, "one delivery")
    try:
        delivery(frame, 3)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert len(context.statusTracker().getJobIdsForGroup(group)) == 1
    received = {user: [r["v"] for r in inbox.take()] for user, inbox in inboxes.items()}
    assert received == {"hr": [0, 2, 4], "bt": [1, 3, 5], "no": []}
    assert sorted(drops) == [
        ("bt", 3, 3, ("p0",)),
        ("hr", 3, 3, ("p1",)),
        ("no", 3, 6, ("p0", "p1")),
    ]


def test_a_check_that_folds_to_false_still_reports_its_drops(spark) -> None:
    """A recipient whose level words have another width than the rows' reads nothing:
    her condition is the literal false, Spark plans the observed counts away, and the
    drop report is counted another way instead of waiting for them forever."""
    frame = spark.createDataFrame(
        [(1, PROVENANCE.label(HR)[0], "p1"), (2, PROVENANCE.label(HR)[0], "p2")],
        ["v", provenance_column(0), "_ss_policy"],
    ).transform(readable_by_everyone)
    inbox, drops = Inbox(), []
    delivery = Delivery(
        lambda _: Rights(frozenset({HR})),
        PROVENANCE,
        roles=everyone,
        levels=lambda _s: (1,),  # levels on, but the rows carry no level words
        on_drop=lambda *d: drops.append(d),
    )
    delivery.subscribe("u", inbox)
    delivery(frame, 9)
    assert inbox.take() == []
    assert drops == [("u", 9, 2, ("p1", "p2"))]
