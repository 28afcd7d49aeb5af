"""The hospital example ingested into a fresh Pipeline, for module fixtures."""

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
