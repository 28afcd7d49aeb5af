"""The hospital example ingested into a fresh Pipeline, and a sink collecting rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.sharing.branched_network import NetworkParts
from streamshield.examples import hospital
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.lang.rewrite_rules import secure
from streamshield.policy.elements import Element

WARD_QUERIES = {
    "cardio": ("SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= 120", "C"),
    "gp": (
        "SELECT patient_id, ts FROM HeartRate WHERE patient_id >= 120 AND beats_per_min > 60",
        "GP",
    ),
    "nurse_all": ("SELECT * FROM HeartRate", "ND"),
    "nurse_ids": ("SELECT patient_id FROM HeartRate WHERE patient_id >= 120", "ND"),
}
"""Queries of the ward's shared-network tests (text, role): a cardiologist's and a GP's
overlapping selections (the GP's reads a hidden column), a nurse's whole stream and her
ids."""


def hospital_pipeline(
    spark, root: Path, elements: Sequence[Element] | None = None
) -> Iterator[Pipeline]:
    """Yields the pipeline with ``elements`` (default: all the example's) labelled; stops
    its queries after."""
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
    land(pipeline, hospital.elements() if elements is None else elements)
    yield pipeline
    for query in list(pipeline.queries.list()):
        pipeline.cql.stop(query.name)


def land(pipeline: Pipeline, elements: Sequence[Element]) -> None:
    """Lands ``elements`` (all accepted) and labels them."""
    if elements:
        assert not pipeline.landing.append(list(elements)).rejected
        pipeline.ingest_available()


def network_parts(pipeline: Pipeline, stream: str, root: Path, **options) -> NetworkParts:
    """What a network over ``stream`` of the pipeline is built from (``options``: the
    switch, the name, ...)."""
    engine = pipeline.queries
    return NetworkParts(
        engine.spark,
        engine.labelled,
        engine.streams[stream],
        engine.codec,
        engine.provenance,
        root,
        **options,
    )


def secured(pipeline: Pipeline, stream: str, text: str, role: str) -> tuple:
    """The query admitted with ``role``, and its secured SQL over a view of ``stream``."""
    engine = pipeline.queries
    admitted = engine.admit(text, [role])

    def sql(view: str, statistics: bool = False) -> str:
        return secure(admitted.checked.tree, engine.rewrite({stream: view}, statistics))

    return admitted, sql


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


HEART_QUERIES = {
    "cardio": ("SELECT patient_id, beats_per_min, ts FROM HeartRate WHERE patient_id >= 120", "C"),
    "nurse": ("SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= 120", "ND"),
}
"""Two overlapping selections (text, role) of the scan tests: a cardiologist's and a
nurse's, who reads no ``ts``."""


def parts() -> list[list]:
    """The example's elements in three consecutive parts, each with HeartRate tuples (its
    18 elements come first; every channel stays in order)."""
    elements = hospital.elements()
    return [elements[:6], elements[6:12], elements[12:]]


def submit(pipeline: Pipeline, name: str, sink) -> object:
    """``HEART_QUERIES[name]`` registered through the query interface as ``name``."""
    text, role = HEART_QUERIES[name]
    return pipeline.cql.submit(pipeline.cql.admit(text, [role]), CallbackSink(sink), name=name)


def alone(pipeline: Pipeline, name: str, run: str = "") -> list[tuple]:
    """``HEART_QUERIES[name]`` as a streaming query of its own, over everything stored
    (``run`` tells runs apart: each starts from the beginning, a name resumes from its
    checkpoint)."""
    text, role = HEART_QUERIES[name]
    rows = Rows()
    query = pipeline.queries.register(
        pipeline.queries.admit(text, [role]), CallbackSink(rows), f"alone_{name}{run}"
    )
    query.process_all_available()
    pipeline.queries.stop(query.name)
    return rows.sorted()
