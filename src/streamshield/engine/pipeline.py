"""The whole pipeline behind one object: landing zone, secure ingest, continuous queries.

``cql`` is the query interface users talk to (queries of every shape, INSERT SP,
delegation); ``queries`` is the native single-stream engine underneath it.

Everything lives under one storage root, the only thing driver and executors must
share: ``catalog.db``, ``landing/``, ``store/`` (labelled streams, shield state,
checkpoints).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from streamshield.catalog.store import Catalog
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.cql_service import CqlService
from streamshield.engine.queries.streaming_queries import QueryService
from streamshield.engine.tuning import STREAMING, EngineTuning
from streamshield.landing import LandingZone
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.roles import RoleHierarchy


class Pipeline:
    def __init__(
        self,
        spark: SparkSession,
        catalog: Catalog,
        root: str | Path,
        levels: Callable[[], LevelAssignment | None] | None = None,
        tuning: EngineTuning = STREAMING,
    ) -> None:
        """``levels``: the catalog's stream and channel levels now (the security
        catalog's ``level_assignment``); secure ingest stamps them on every tuple.
        ``tuning``: the engine's speed choices (engine/tuning.py; a server's are its
        settings)."""
        self.root = Path(root)
        self.catalog = catalog
        streams = {d.name: d for d in catalog.streams()}
        hierarchy = catalog.hierarchy()
        self.landing = LandingZone(self.root / "landing", catalog)
        ingest = Ingest(spark, hierarchy, streams, catalog.server_policies(), levels=levels)
        self.ingest = IngestJob(ingest, self.root / "landing", self.root / "store", tuning)
        self.landing.listen(self.ingest.wake)
        self.queries = QueryService(
            spark, streams, hierarchy, self.ingest.store, self.root / "store"
        )
        self.cql = CqlService(
            self.queries, self.landing, catalog, ingest, self.ingest.state, tuning=tuning
        )
        self.hierarchy_version = 0
        """Grows by one with every hierarchy :meth:`use_hierarchy` applies (after it is in
        place): what derives rights from the hierarchy compares it, not the hierarchy."""

    def use_hierarchy(self, hierarchy: RoleHierarchy) -> None:
        """A changed role hierarchy, live: the next ingest batch labels with it, new
        query registrations and starts resolve roles with it, and ``hierarchy_version``
        tells whatever derived rights from the old one to derive them again. It must
        keep the label layout (positions and width, :meth:`RoleHierarchy.keeps_layout_of`),
        which the catalog's role administration guarantees; anything else is refused
        (ValueError)."""
        if not hierarchy.keeps_layout_of(self.queries.hierarchy):
            raise ValueError("the new role hierarchy changes the label layout")
        self.ingest.ingest.use_hierarchy(hierarchy)
        self.queries.use_hierarchy(hierarchy)
        self.hierarchy_version += 1

    def ingest_available(self) -> None:
        """Label everything landed so far (an availableNow run of the ingest query)."""
        self.ingest.start(available_now=True).awaitTermination()
