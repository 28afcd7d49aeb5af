"""A small ward for the Spark attacks: two providers' HeartRate channels, labelled once.

Channel ``ward-M`` lets nurses (ND) and cardiologists (C) read patient ids and times but
only C the heart rates; channel ``ward-S`` lets only C see its tuples at all; channel
``ward-T`` lets insurers (INS) use its tuples in aggregates only (FOR STATISTICS). A nurse's
query must behave as if the hidden rates were NULL and the hidden tuples did not exist,
whatever the query does with them; C's results are the control (the same attack on
readable values does reveal them, so each test can fail).
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from streamshield.engine.delivery.recipient_check import OutputLabels
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement

MASKED_RATES = {901: 71.0, 902: 150.0, 903: None, 904: 0.0}
"""ward-M: ND reads the ids (903's NULL is a real one), C the rates as well."""
HIDDEN_TUPLES = {951: 120.0, 952: 130.0}
"""ward-S: only C sees these tuples."""
STATISTICS_ONLY = {971: 61.0, 972: 62.0, 973: 63.0, 974: 64.0}
"""ward-T: insurers (INS) may use these in aggregates only; nobody else sees them."""

_POLICIES = {
    "ward-M": """
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: {patient_id, ts}, SRP = rbac:{C, ND};
INSERT SP INTO STREAM HeartRate LET DDP = ATTRIBUTES: beats_per_min, SRP = rbac:C
""",
    "ward-S": "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C",
    "ward-T": "INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, "
    "SRP = rbac:INS FOR STATISTICS",
}


def elements() -> list[Element]:
    out: list[Element] = []
    channels = (("ward-M", MASKED_RATES), ("ward-S", HIDDEN_TUPLES), ("ward-T", STATISTICS_ONLY))
    for provider, rates in channels:
        channel = Channel("HeartRate", provider)
        policy = parse_policy(_POLICIES[provider], ts=70)
        out += [SpElement(channel, sp.sn, sp) for sp in policy.sps]
        for seq, (patient, rate) in enumerate(rates.items(), start=len(policy.sps) + 1):
            values = {"patient_id": patient, "beats_per_min": rate, "ts": 2000 + seq}
            out.append(TupleElement(channel, seq, patient, 70, policy.csn, values))
    return out


class Ward:
    """The labelled ward and a way to run one continuous query to its end."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
        result = self.pipeline.landing.append(elements())
        assert not result.rejected, result.rejected
        self.pipeline.ingest_available()

    def rows(self, sql: str, roles: list[str], recipient: list[str] | None = None) -> list[dict]:
        """Every row the query delivers over the labelled ward (user columns only).

        ``recipient``: the rows as delivery hands them to a recipient holding these roles
        (engine/delivery/recipient_check.py: her own check of each row's labels), with ``_masked``.
        """
        rows: list[dict] = []
        codec = self.pipeline.cql.queries.codec

        def collect(frame, _batch) -> None:
            if recipient is not None:
                labels, mask = OutputLabels.of(frame.columns), codec.query(recipient)
                frame = frame.filter(labels.row_visible(mask)).select(*labels.payload(mask))
            rows.extend(r.asDict(recursive=True) for r in frame.collect())

        query = self.pipeline.cql.submit(self.pipeline.cql.admit(sql, roles), CallbackSink(collect))
        try:
            query.process_all_available()
        finally:
            self.pipeline.cql.stop(query.name)
        return [{k: v for k, v in r.items() if not k.startswith("_ss_")} for r in rows]
