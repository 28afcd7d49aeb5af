"""The hospital example ingested into a fresh Pipeline, and a sink collecting rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from streamshield.engine.pipeline import Pipeline
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog


def hospital_pipeline(spark, root: Path) -> Iterator[Pipeline]:
    """Yields the pipeline with the example's elements labelled; stops its queries after."""
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
    assert not pipeline.landing.append(hospital.elements()).rejected
    pipeline.ingest_available()
    yield pipeline
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


class Rows:
    """A per-batch sink keeping the user columns of every row it is handed."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.calls = 0
        self.batches: list[int] = []

    def __call__(self, frame, batch_id) -> None:
        self.calls += 1
        self.batches.append(batch_id)
        users = [c for c in frame.columns if not c.startswith("_ss_")]
        self.rows += [tuple(r) for r in frame.select(*users).collect()]

    def sorted(self) -> list[tuple]:
        return sorted(self.rows, key=str)
