"""Two labelled streams for the SCJoin experiment (paper 1, Fig. 16), through real ingest.

The paper's three knobs map onto the generated data as follows; each configuration gets
its own pair of streams (``F16L<n>``, ``F16R<n>``), one channel each, and every stream
of every configuration is labelled by ONE secure-ingest run (one JVM job, however many
configurations):

* **sp ratio** (tuples per sp): each stream re-sends its policy every ``per_sp`` tuples.
  Policy ``j`` of a window (``j = position // per_sp``) grants role ``a<j>`` only, so a
  window of 100 tuples holds ``100 / per_sp`` policies (label classes) per side.
* **similarity**: a fraction of the right stream's policy positions grant the same role
  as the left stream's policy at that position; the others grant ``b<j>``, a role no
  left policy grants (incompatible). Policies are content-addressed by ingest, so a
  similar right policy even has the left policy's id.
* **selectivity**: the fraction of positions whose left and right tuple share a key
  (exactly one partner each); every other tuple's key is unique to its side.

A micro-batch brings ``window`` new tuples per side, so the count window of 100 slides
by a whole window per batch and the ISTREAM output is the join of the two windows: the
pairs whose position is matching AND whose policies are similar. The consumer holds
every role, so what it sees is decided by the policies, not by missing roles.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.sp_patterns import ANY, Literal

ATTRIBUTES = (("id", "bigint"), ("k", "bigint"), ("v", "double"), ("ts", "bigint"))
WINDOW = 100
"""The paper's window: 100 tuples per side."""
BATCH = "_f16_batch"
STREAM_DIR = "_f16_stream"


@dataclass(frozen=True)
class Config:
    """One point of a sweep: tuples per sp, policy similarity, join selectivity."""

    n: int
    per_sp: int
    similarity: float
    selectivity: float
    batches: int

    @property
    def streams(self) -> tuple[StreamDefinition, StreamDefinition]:
        return (
            StreamDefinition(f"F16L{self.n}", ATTRIBUTES, "id", "ts"),
            StreamDefinition(f"F16R{self.n}", ATTRIBUTES, "id", "ts"),
        )

    @property
    def policies(self) -> int:
        """Policies (label classes) per window and side."""
        return -(-WINDOW // self.per_sp)

    def similar(self) -> set[int]:
        """Positions ``j`` whose right policy grants what the left one grants."""
        positions = list(range(self.policies))
        random.Random(f"sim-{self.n}").shuffle(positions)
        return set(positions[: int(self.similarity * self.policies + 0.5)])

    def matching(self, batch: int) -> set[int]:
        """Window positions whose tuples find a partner on the other side."""
        positions = list(range(WINDOW))
        random.Random(f"sel-{self.n}-{batch}").shuffle(positions)
        return set(positions[: int(self.selectivity * WINDOW + 0.5)])


def roles() -> list[str]:
    return [f"a{j:03d}" for j in range(WINDOW)] + [f"b{j:03d}" for j in range(WINDOW)]


def hierarchy() -> RoleHierarchy:
    return RoleHierarchy.build(roles())


def _sp(role: str, ts: int) -> SecurityPunctuation:
    return SecurityPunctuation(
        DataDescription(ANY, ANY, ANY), SecurityRestriction(Literal(role)), ts=ts, sn=1
    )


def _lines(config: Config, side: int) -> list[str]:
    stream = config.streams[side]
    channel = Channel(stream.name, "p0")
    similar = config.similar()
    lines, seq, ts = [], 0, 0
    for b in range(config.batches):
        matching = config.matching(b)
        for i in range(WINDOW):
            j = i // config.per_sp
            if i % config.per_sp == 0:
                ts += 1
                role = f"a{j:03d}" if side == 0 or j in similar else f"b{j:03d}"
                seq += 1
                lines.append(to_line(SpElement(channel, seq, _sp(role, ts))))
            tid = b * WINDOW + i
            key = tid if i in matching else _unique_key(side, tid)
            seq += 1
            values = {"id": tid, "k": key, "v": float(i), "ts": tid}
            lines.append(to_line(TupleElement(channel, seq, tid, ts, 1, values)))
    return lines


def _unique_key(side: int, tid: int) -> int:
    """A key no tuple of the other side has: this tuple finds no partner."""
    return -tid - 1 if side == 0 else 10**9 + tid


def ingest_all(spark: SparkSession, configs: list[Config], root: Path) -> Path:
    """Land every configuration, label it with one ingest run, split it per batch.

    Returns the split directory: ``<split>/_f16_stream=<stream>/_f16_batch=<b>/``, the
    labelled rows (as ingest wrote them) of one stream and one micro-batch.
    """
    landing = root / "landing"
    streams = {}
    for config in configs:
        for side, stream in enumerate(config.streams):
            streams[stream.name] = stream
            folder = landing / stream.name
            folder.mkdir(parents=True, exist_ok=True)
            text = "\n".join(_lines(config, side)) + "\n"
            (folder / "p0-000000000001-f16.jsonl").write_text(text)
    job = IngestJob(Ingest(spark, hierarchy(), streams), landing, root / "ingest")
    job.start(available_now=True).awaitTermination()
    paths = [str(job.store.path(name)) for name in streams]
    labelled = spark.read.option("recursiveFileLookup", "true").parquet(*paths)
    split = root / "split"
    (
        labelled.withColumn(STREAM_DIR, F.col("stream"))
        .withColumn(BATCH, F.floor(F.col("id") / WINDOW))
        .write.partitionBy(STREAM_DIR, BATCH)
        .parquet(str(split))
    )
    return split


def feed(split: Path, store: LabelledStore, stream: str, batch: int) -> bool:
    """Put one batch of a stream into a labelled store as ingest would (one directory)."""
    source = split / f"{STREAM_DIR}={stream}" / f"{BATCH}={batch}"
    if not source.exists():
        return False
    target = store.path(stream) / f"batch={batch}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    return True
