"""The main job: the hospital ward through the Spark pipeline, role by role.

Monitors of three patients land heart-rate readings in three rounds; secure ingest
labels them; four users' continuous queries (cardiologist, nurse on duty, general
physician, outside insurer, plus the emergency responder) receive what the patients'
punctuations allow. Patient 140's emergency policy arrives in round 2.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import FileSink, RegisteredQuery
from streamshield.engine.session import spark_session
from streamshield.examples import hospital_ward
from streamshield.examples.hospital_catalog import hospital_catalog

USERS = {
    "cardiologist": ["C"],
    "nurse-on-duty": ["ND"],
    "general-physician": ["GP"],
    "emergency-responder": ["ER"],
    "insurer": ["INS"],
}
QUERY = "SELECT patient_id, beats_per_min, ts FROM HeartRate"


def run(root: Path, master: str | None = None, rounds: int = 3) -> Iterator[str]:
    """Runs the job under ``root`` (recreated) and yields the lines of its report."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    spark = spark_session(master)
    spark.sparkContext.setLogLevel("ERROR")
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
    queries: dict[str, RegisteredQuery] = {}
    for user, roles in USERS.items():
        sink = FileSink(str(root / "outputs" / user), "json")
        admitted = pipeline.queries.admit(QUERY, roles)
        queries[user] = pipeline.queries.register(admitted, sink, name=user)
    try:
        for round_no, elements in enumerate(hospital_ward.rounds(rounds), start=1):
            landed = pipeline.landing.append(elements)
            pipeline.ingest_available()
            yield f"round {round_no}: landed {landed.accepted} elements"
            for user, query in queries.items():
                query.process_all_available()
                yield from _report(spark, root / "outputs" / user, user)
    finally:
        for query in queries.values():
            query.stop()
    yield ""
    yield f"outputs (JSON, one directory per user): {root / 'outputs'}"
    yield f"labelled streams (Parquet): {root / 'store' / 'labelled'}"


def _report(spark, path: Path, user: str) -> Iterator[str]:
    files = any(path.glob("*.json"))
    rows = [r.asDict() for r in spark.read.json(str(path)).collect()] if files else []
    yield f"  {user:<20} has received {len(rows)} tuples"
    by_patient: dict[object, list[dict]] = {}
    for row in rows:  # JSON output omits NULLs: a masked attribute is simply absent
        by_patient.setdefault(row.get("patient_id", "(masked id)"), []).append(row)
    for patient, readings in sorted(by_patient.items(), key=lambda kv: str(kv[0])):
        seen = [a for a in _ATTRIBUTES if any(a in r for r in readings)]
        masked = [a for a in _ATTRIBUTES if a not in seen]
        peak = max((r["beats_per_min"] for r in readings if "beats_per_min" in r), default="-")
        yield (
            f"      patient {patient}: {len(readings)} readings, peak beats/min {peak}; "
            f"sees {', '.join(seen)}" + (f"; masked: {', '.join(masked)}" if masked else "")
        )


_ATTRIBUTES = ("patient_id", "beats_per_min", "ts")
