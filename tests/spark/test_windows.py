"""Time-window aggregates over a secured stream with an event-time watermark."""

from __future__ import annotations

import pytest

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.streaming_queries import MemorySink, QueryService
from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement

pytestmark = pytest.mark.spark

VITALS = StreamDefinition(
    "Vitals",
    (("patient_id", "bigint"), ("pulse", "double"), ("ts", "timestamp")),
    "patient_id",
    "ts",
)
POLICY = """
INSERT SP INTO STREAM Vitals LET DDP = TUPLES: *, SRP = rbac:C;
INSERT SP INTO STREAM Vitals LET DDP = TUPLES: [100, 199], SRP = rbac:GP
"""


def test_windowed_counts_see_only_readable_tuples(spark, tmp_path) -> None:
    channel = Channel("Vitals", "ward-B")
    policy = parse_policy(POLICY, ts=10)
    elements = [SpElement(channel, sn, sp) for sn, sp in enumerate(policy.sps, 1)]
    seq = len(elements)
    for minute in range(3):
        for second, patient in ((5, 150), (25, 250), (45, 150)):
            seq += 1
            ts = f"2026-11-22T10:{minute:02d}:{second:02d}Z"
            values = {"patient_id": patient, "pulse": 60.0 + minute, "ts": ts}
            elements.append(TupleElement(channel, seq, patient, 10, policy.csn, values))
    landing = tmp_path / "landing" / "Vitals"
    landing.mkdir(parents=True)
    (landing / "ward-B-000000000001-x.jsonl").write_text(
        "\n".join(to_line(e) for e in elements) + "\n"
    )
    ingest = Ingest(spark, hospital.hierarchy(), {"Vitals": VITALS})
    job = IngestJob(ingest, tmp_path / "landing", tmp_path / "store")
    job.start(available_now=True).awaitTermination()
    service = QueryService(spark, {"Vitals": VITALS}, hospital.hierarchy(), job.store, tmp_path)
    sql = (
        "SELECT window(ts, '1 minute') AS w, count(*) AS n, avg(pulse) AS p "
        "FROM Vitals GROUP BY window(ts, '1 minute')"
    )
    counts = {}
    for role in ("C", "GP", "ND"):
        query = service.register(service.admit(sql, [role]), MemorySink(f"win_{role}"))
        query.process_all_available()
        counts[role] = sorted(r["n"] for r in query.results())
        assert all(r["_ss_r0_0"] != 0 for r in query.results()), "aggregate output is labelled"
        progress = [p for p in query.handle.recentProgress if p.get("eventTime")]
        if role != "ND":
            assert any("watermark" in p["eventTime"] for p in progress), "no watermark"
        query.stop()
    assert counts == {"C": [3, 3, 3], "GP": [2, 2, 2], "ND": []}
