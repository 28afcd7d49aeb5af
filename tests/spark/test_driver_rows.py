"""A small frame's rows computed on the driver, without a Spark job (engine/frames/driver_rows.py).

The shared network hands delivery a frame over the pass it has just written from the
driver (a local relation) instead of reading the files back; the delivery's SecFilter
checks are then evaluated by Spark on the driver. These tests hold that path to the job
path: the same rows, the same masks and the same drop reports for every recipient, no
job, and the job path whenever the driver cannot (or fails to) compute the rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TypeVar

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamshield.engine.delivery import collected_rows
from streamshield.engine.delivery.collected_rows import collect_on_driver, collect_rows
from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.frames.driver_rows import driver_arrow, is_local, local_frame
from streamshield.engine.store.labelled_store import labelled_schema
from streamshield.engine.store.small_writes import read_written, write_parquet
from streamshield.engine.views.provenance_columns import with_provenance
from streamshield.engine.views.secured_view import secured_view
from streamshield.policy.provenance import Rights
from tests.spark.conformance import STREAMS
from tests.spark.test_delivery import (
    BT,
    HR,
    PROVENANCE,
    Harness,
    Inbox,
    deny_cases,
    everyone,
    two_streams,
)
from tests.spark.test_small_writes import ROWS

pytestmark = pytest.mark.spark
T = TypeVar("T")


def local(frame: DataFrame) -> DataFrame:
    out = local_frame(frame, frame.toArrow())
    assert out is not None
    return out


def jobs_of(spark, run: Callable[[], T]) -> tuple[T, int]:
    """``run()``'s answer and how many Spark jobs it started, counted in a job group of
    its own (the status store keeps only the newest jobs: a count of all of them stops
    growing once a worker's session has run more than ``spark.ui.retainedJobs``)."""
    group = f"counted-{uuid.uuid4().hex}"
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        answer = run()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    return answer, len(context.statusTracker().getJobIdsForGroup(group))


def test_a_local_frame_holds_the_rows_and_types_of_the_frame(spark) -> None:
    frame = spark.sql(ROWS)
    out = local(frame)
    assert out._jdf.queryExecution().optimizedPlan().nodeName() == "LocalRelation"
    assert is_local(out) and not is_local(frame)
    assert [(f.name, f.dataType.simpleString()) for f in out.schema] == [
        (f.name, f.dataType.simpleString()) for f in frame.schema
    ]
    assert all(f.nullable for f in out.schema)  # as a file read of the rows is

    def rows(f: DataFrame) -> list:
        return sorted(f.collect(), key=lambda r: r["id"])

    assert rows(out) == rows(frame)


def test_rows_over_a_local_frame_come_without_a_job_as_a_job_gives_them(spark, tmp_path) -> None:
    frame = spark.sql(ROWS)
    table = write_parquet(frame, tmp_path / "pass", small=True)
    assert table is not None
    files = [str(p) for p in (tmp_path / "pass").glob("*.parquet")]
    over_files, over_table = read_written(frame, files), local_frame(frame, table)
    assert over_table is not None

    def query(f: DataFrame) -> DataFrame:
        return f.filter(F.col("id") % 3 != 0).select(
            F.when(F.col("flag"), F.struct("id", "s", "ts", "m", "nested")).alias("x"),
            (F.col("d") * 2).alias("d2"),
        )

    mine, started = jobs_of(spark, lambda: driver_arrow(query(over_table)))
    assert started == 0, "no Spark job"
    assert mine is not None
    theirs, started = jobs_of(spark, lambda: query(over_files)._collect_as_arrow())
    assert started > 0
    assert mine.to_pylist() == [r for b in theirs for r in b.to_pylist()]
    empty = driver_arrow(over_table.filter(F.col("id") < 0).select("id", "s"))
    assert empty is not None and empty.num_rows == 0 and empty.column_names == ["id", "s"]


def test_a_plan_that_does_not_fold_is_left_to_spark(spark) -> None:
    over = local(spark.sql(ROWS))
    assert driver_arrow(over.groupBy("flag").count()) is None  # an aggregate runs a job
    assert driver_arrow(over.observe(f"o{uuid.uuid4().hex}", F.count("*"))) is None
    assert driver_arrow(spark.sql(ROWS)) is None  # not a local relation
    assert collect_on_driver(spark.sql(ROWS), [F.col("id")], []) is None


def test_a_failing_expression_leaves_the_rows_to_the_job_which_fails(spark) -> None:
    over = local(spark.sql(ROWS))
    bad = [F.struct(F.col("s").cast("int").alias("n")).alias("x")]  # 'v1' is no int (ANSI)
    assert collect_on_driver(over, bad, []) is None
    with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
        collect_rows(over, [], lambda f: f.select(*bad))


def deliver(frame: DataFrame, rights: dict, roles, group: str) -> tuple[dict, list, int]:
    """Every user of ``rights`` subscribed to one Delivery of ``frame`` (batch 5): what
    each received, the drop reports, and the Spark jobs of the delivery."""
    inboxes = {user: Inbox() for user in rights}
    drops: list[tuple] = []
    delivery = Delivery(rights.get, PROVENANCE, roles=roles, on_drop=lambda *d: drops.append(d))
    for user, inbox in inboxes.items():
        delivery.subscribe(user, inbox)
    context = frame.sparkSession.sparkContext
    context.setJobGroup(group, "one delivery")
    try:
        delivery(frame, 5)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    ran = len(context.statusTracker().getJobIdsForGroup(group))
    return {user: inbox.take() for user, inbox in inboxes.items()}, sorted(drops), ran


def test_delivery_over_a_local_frame_checks_each_recipient_as_the_job_does(spark) -> None:
    frame = two_streams(spark)
    rights = {"hr": Rights(frozenset({HR})), "bt": Rights(frozenset({BT})), "no": None}
    by_job = deliver(frame, rights, everyone, f"job-{uuid.uuid4().hex}")
    by_driver = deliver(local(frame), rights, everyone, f"driver-{uuid.uuid4().hex}")
    assert by_job[2] == 1 and by_driver[2] == 0
    assert by_driver[:2] == by_job[:2]
    received = {user: sorted(r["v"] for r in rows) for user, rows in by_driver[0].items()}
    assert received == {"hr": [0, 2, 4], "bt": [1, 3, 5], "no": []}
    assert by_driver[1] == [
        ("bt", 5, 3, ("p0",)),
        ("hr", 5, 3, ("p1",)),
        ("no", 5, 6, ("p0", "p1")),
    ]


def test_missing_labels_and_rights_deny_on_the_driver_too(spark) -> None:
    """The job path's deny-by-default cases (test_delivery), over a local frame."""
    frame = deny_cases(spark)
    answers = {"ok": Rights(frozenset({HR})), "str": HR, "none": None}
    failing = {"ok": Rights(frozenset({HR}))}

    def no_roles(_subscription):
        raise RuntimeError("the roles lookup failed")

    for rights, roles in ((answers, everyone), (failing, no_roles)):
        by_job = deliver(frame, rights, roles, f"job-{uuid.uuid4().hex}")
        by_driver = deliver(local(frame), rights, roles, f"driver-{uuid.uuid4().hex}")
        assert by_driver[2] == 0 and by_driver[:2] == by_job[:2]
    assert by_driver[0] == {"ok": []}  # a failing roles lookup reads nothing
    by_driver = deliver(local(frame), answers, everyone, f"driver-{uuid.uuid4().hex}")
    assert by_driver[0] == {"ok": [{"v": 1}], "str": [], "none": []}


def test_recipients_roles_mask_attributes_on_the_driver_as_in_the_job(spark, tmp_path) -> None:
    """Real labelled rows of the hospital example through a cardiologist's secured view,
    delivered to recipients of other roles: each gets the rows and masks of her own roles
    (fewer rows, hidden attributes), the same over the local frame as by the job."""
    harness = Harness(spark, tmp_path)
    schema = STREAMS[HR]
    struct = labelled_schema(spark, schema.ddl, len(schema.names), harness.roles.width)
    files = [str(f) for f in harness.job.store.path(HR).rglob("*.parquet")]
    rows = spark.read.schema(struct).parquet(*files)
    view = secured_view(rows, schema, harness.roles, ["C"], keep_labels=True)
    frame = with_provenance(view, HR, PROVENANCE)
    users = {"al": ("C",), "gus": ("GP",), "nina": ("ND",), "nobody": ()}
    rights = dict.fromkeys(users, Rights(frozenset({HR})))

    def roles(subscription):
        return harness.roles.query(users[subscription.user])

    by_job = deliver(frame, rights, roles, f"job-{uuid.uuid4().hex}")
    by_driver = deliver(local(frame), rights, roles, f"driver-{uuid.uuid4().hex}")
    assert by_driver[2] == 0 and by_job[2] == 1

    def key(row: dict) -> str:
        return repr(sorted(row.items()))

    for user in users:
        assert sorted(map(key, by_driver[0][user])) == sorted(map(key, by_job[0][user])), user
    assert by_driver[1] == by_job[1]
    got = by_driver[0]
    assert got["al"] and got["nobody"] == []
    assert len(got["gus"]) < len(got["al"]) or any(
        r.get("_masked") for r in got["gus"] + got["nina"]
    ), "some other role reads less than the cardiologist"


def test_the_driver_failing_falls_back_to_the_job(spark, monkeypatch) -> None:
    frame = local(two_streams(spark))

    def broken(_frame):
        raise RuntimeError("the JVM's converter is not there")

    monkeypatch.setattr(collected_rows, "driver_arrow", broken)
    rights = {"hr": Rights(frozenset({HR})), "no": None}
    got, drops, ran = deliver(frame, rights, everyone, f"job-{uuid.uuid4().hex}")
    assert ran == 1
    assert sorted(r["v"] for r in got["hr"]) == [0, 2, 4] and got["no"] == []
    assert drops == [("hr", 5, 3, ("p1",)), ("no", 5, 6, ("p0", "p1"))]
