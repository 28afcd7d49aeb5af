"""A guess's decisions joined to a batch's elements (engine/ingest/ingest.py,
``Ingest._join_decisions``) give each element its reason, and the decision table's frame
is kept while the decisions stay the same; a small batch's counts taken from the rows
the driver wrote are those a job counts (engine/ingest/ingest_job.py, ``_counts``).

The elements try each way the join could decide wrongly: a key not decided, a NULL in
each key field, a seq on and past each end of a decision's gap, a late tuple, a reset,
an sp, an element of another stream."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from streamshield.engine.ingest.ingest import _FIRST, _LAST, PASS, Ingest
from streamshield.engine.ingest.ingest_job import _counts
from streamshield.examples import hospital
from streamshield.policy.shield import Reason
from tests.spark.conformance import STREAMS

pytestmark = pytest.mark.spark

ELEMENTS = (
    "stream string, provider string, seq long, tid string, p_ts long, p_csn long, "
    "values string, late boolean, is_sp boolean"
)


def test_joined_decisions_give_each_element_its_reason(spark) -> None:
    ingest = Ingest(spark, hospital.hierarchy(), STREAMS, hospital.server_policies())
    policies = {
        ("HeartRate", "pol-a"): ([], [7, -1, 2**62], (3, 9)),
        ("HeartRate", "pol-b"): ([], [1, 0, -(2**63)], (0, 1)),
    }
    decisions = [
        ("HeartRate", "p1", 0, 10, 1, PASS, "pol-a", None),
        ("HeartRate", "p1", 0, 20, 1, PASS, "pol-b", 15),  # a reset past seq 15
        ("HeartRate", "p2", 0, 10, 1, PASS, "pol-a", None),
    ]
    hr = "HeartRate"
    elements = spark.createDataFrame(
        [
            (hr, "p1", 1, "a", 10, 1, "{}", False, False),
            (hr, "p1", 2, "b", 10, 1, "{}", True, False),  # late
            (hr, "p1", 3, "c", 10, 2, "{}", False, False),  # a declaration not decided
            (hr, "p1", 14, "d", 20, 1, "{}", False, False),
            (hr, "p1", 16, "e", 20, 1, "{}", False, False),  # after the reset
            (hr, "p2", 4, "f", 10, 1, "{}", False, False),
            (hr, "p3", 5, "g", 10, 1, "{}", False, False),  # a channel not decided
            (hr, None, 6, "h", 10, 1, "{}", False, False),
            (hr, "p1", 7, "i", None, 1, "{}", False, False),
            (hr, "p1", 8, "j", 10, None, "{}", False, False),
            (hr, "p1", None, "k", 10, 1, "{}", False, False),
            (hr, "p1", _LAST, "l", 10, 1, "{}", False, False),  # on the gap's end
            (hr, "p1", _FIRST, "m", 10, 1, "{}", False, False),
            (hr, "p1", 9, None, None, None, None, False, True),  # an sp
            ("Other", "p1", 10, "n", 10, 1, "{}", False, False),
        ],
        ELEMENTS,
    )
    joined = ingest._join_decisions(elements, decisions, policies, {})
    reasons = {r["tid"]: r["reason"] for r in joined.collect()}
    assert reasons["a"] == reasons["d"] == reasons["f"] == PASS
    assert reasons["b"] == Reason.OUT_OF_ORDER.value
    assert reasons["e"] == reasons["c"] == reasons["g"] == Reason.NO_POLICY.value
    assert reasons["l"] == reasons["m"] == Reason.NO_POLICY.value  # outside the open gap
    nulls = [reasons[t] for t in "hijk"]  # a NULL in a key field or the seq: no decision
    assert nulls == [Reason.NO_POLICY.value] * 4
    assert reasons["n"] == Reason.NO_POLICY.value  # another stream's: none of its decisions
    # kept for the next batch: the same decision table frame
    kept = ingest._decided_table
    assert kept is not None
    ingest._join_decisions(elements, decisions, policies, {})
    assert ingest._decided_table is kept
    changed = [(*decisions[0][:6], "pol-b", None), *decisions[1:]]
    again = ingest._join_decisions(elements, changed, policies, {})
    assert ingest._decided_table is not kept
    words = {r["tid"]: r["_ss_fixed"] for r in again.collect()}
    assert words["a"] == [1, 0, -(2**63)]  # the new table's, not the kept one's


def test_counts_from_the_written_rows_are_a_jobs_counts(spark) -> None:
    reasons = [PASS, "no policy", PASS, None, "out of order", PASS]
    frame = spark.createDataFrame([(r,) for r in reasons], "reason string").withColumn(
        "seq", F.monotonically_increasing_id()
    )
    assert _counts(frame.toArrow(), frame) == _counts(None, frame) == (6, 3)
    empty = frame.filter(F.lit(False))
    assert _counts(empty.toArrow(), empty) == _counts(None, empty) == (0, 0)
