"""One query processor per Chinese-Wall level (paper 2, section 6).

The paper runs every level's queries in a processor of their own, so that nothing a
query at one level builds (window contents, join state, caches, spill files) is ever
within reach of a query at another. Inside one Spark application a level gets:

- its own storage: every checkpoint, window and join state, network ledger and
  temporary file of its queries lives under ``<queries root>/levels/<level>/``, and
  :meth:`LevelProcessor.path` refuses any path that leaves that directory (``..``,
  absolute paths, symlinks out of it);
- its own :class:`~pyspark.sql.SparkSession` (``newSession``: own SQL settings, temporary
  views and UDF registry; the JVM, the block manager and the cache are shared);
- its own scheduler pool (``spark.scheduler.pool`` = the processor's name) for the jobs
  of the streaming queries it starts, which shares the cores fairly between levels
  when the application runs with ``spark.scheduler.mode=FAIR``;
- a trusted shepherd (:meth:`LevelProcessor.shepherd`): the processor's inputs are the
  labelled store's rows whose level its level dominates, filtered natively before any
  operator of any of its queries sees them.

That is isolation by construction of the plans, not by the operating system: the JVM is
one process. The stronger option, a Spark application (own JVMs, own executors) per
level, is engine/levels/level_application.py; it uses the same directory per level.

Processors are created on demand, when the first query at a level is registered, and
removed when its last query stops; their directories stay (a restarted query resumes
from its checkpoint). While levels are off there is one processor, ``None``, whose
directory is the queries root itself, so deployments without levels keep their layout.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from streamshield.engine.session import planning_session
from streamshield.engine.views.level_columns import dominated_by
from streamshield.policy.query_level import QueryLevel

POOL = "spark.scheduler.pool"
LEVELS_DIRECTORY = "levels"


class LevelStorageError(PermissionError):
    """A processor asked for a path outside its own level's directory."""


def processor_name(level: QueryLevel | None) -> str:
    """A directory and pool name for a level: stable, ASCII, one per level."""
    if level is None:
        return "unlevelled"
    digest = hashlib.sha256(repr((level.text, level.words)).encode()).hexdigest()[:16]
    return f"level-{digest}"


@dataclass
class LevelProcessor:
    """The query processor of one level: session, pool, storage, shepherd."""

    level: QueryLevel | None
    root: Path
    session: SparkSession = field(repr=False)
    queries: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return processor_name(self.level)

    def path(self, *parts: str) -> Path:
        """A path under this level's directory; anything resolving elsewhere (another
        level's directory included) raises :class:`LevelStorageError`."""
        root = self.root.resolve()
        target = root.joinpath(*parts).resolve()
        if target != root and root not in target.parents:
            raise LevelStorageError(f"{self.name} may not use storage outside its directory")
        return target

    def shepherd(self, frame: DataFrame) -> DataFrame:
        """Only the rows this level dominates (all of them while levels are off)."""
        if self.level is None:
            return frame
        return frame.filter(dominated_by(self.level.lattice, self.level.level, frame.columns))

    @contextlib.contextmanager
    def pool(self) -> Iterator[None]:
        """Jobs of streaming queries started inside run in this level's scheduler pool
        (a query's thread takes the starting thread's local properties)."""
        context = self.session.sparkContext
        before = context.getLocalProperty(POOL)
        context.setLocalProperty(POOL, self.name)
        try:
            yield
        finally:
            context.setLocalProperty(POOL, before)  # type: ignore[arg-type]


class LevelProcessors:
    """The processors of one query service, keyed by level, created and removed on demand."""

    def __init__(self, spark: SparkSession, root: Path) -> None:
        self.spark, self.root = spark, Path(root)
        self._processors: dict[str, LevelProcessor] = {}
        self._owner: dict[str, str] = {}  # query -> its processor's name
        self._lock = threading.Lock()

    def acquire(self, level: QueryLevel | None, query: str) -> LevelProcessor:
        """The processor of ``level`` (created now if it has no query), with ``query``."""
        name = processor_name(level)
        with self._lock:
            processor = self._processors.get(name)
            if processor is None:
                root = self.root if level is None else self.root / LEVELS_DIRECTORY / name
                root.mkdir(parents=True, exist_ok=True)
                processor = LevelProcessor(level, root, planning_session(self.spark))
                self._processors[name] = processor
            processor.queries.add(query)
            self._owner[query] = name
            return processor

    def of(self, query: str) -> LevelProcessor | None:
        with self._lock:
            name = self._owner.get(query)
            return None if name is None else self._processors.get(name)

    def release(self, query: str) -> None:
        """``query`` stopped; its processor goes with its last query (storage stays)."""
        with self._lock:
            name = self._owner.pop(query, None)
            processor = self._processors.get(name) if name is not None else None
            if name is None or processor is None:
                return
            processor.queries.discard(query)
            if not processor.queries:
                del self._processors[name]

    def active(self) -> dict[str, LevelProcessor]:
        with self._lock:
            return dict(self._processors)
