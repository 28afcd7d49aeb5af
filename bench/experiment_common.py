"""Shared pieces of the paper experiments (security-punctuations, section 6).

The paper's knobs are the sp ratio (tuples per policy), the *SS state* (the set of
roles the Security Shield checks sps against, i.e. the roles of the queries it serves)
and a filter rate of about 50%. Our workload reproduces exactly those knobs:

* the query runs with ``state`` roles (``r000``..); the hierarchy has ``2 * state`` roles
  so that a policy can grant only roles outside the state (with one role in total no
  policy could be rejected without a deny sp, and the paper filters 50% at 1 role too);
* each provider re-sends its policy every ``tuples_per_sp`` tuples; a policy grants
  1-8 random roles, with probability ``pass_rate`` at least one of them in the state;
* ``value`` is uniform in [0, 100), so ``value < x`` has selectivity ``x`` percent.

Every sample of ``repeats`` rounds is kept, the arms interleaved within each round
(:func:`interleaved`: the machine is shared, so a change of load must hit all arms
alike); the plots show median and min-max. Plain and secured runs use the same data in
the same session.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from bench.workload import STREAM
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.engine.store import labelled_store
from streamshield.engine.store.labelled_store import META_FIELDS, labelled_schema
from streamshield.engine.views import labels
from streamshield.engine.views.secured_view import tuple_test
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.sp_patterns import ANY, Literal, OneOf


@dataclass(frozen=True)
class Workload:
    """One generated case: ``state`` roles in the query, an sp every ``per_sp`` tuples."""

    tuples: int
    per_sp: int
    state: int
    providers: int = 4
    pass_rate: float = 0.5
    seed: int = 13

    @property
    def roles(self) -> list[str]:
        return [f"r{i:04d}" for i in range(2 * self.state)]

    @property
    def query_roles(self) -> list[str]:
        return self.roles[: self.state]

    def hierarchy(self) -> RoleHierarchy:
        return RoleHierarchy.build(self.roles)

    def codec(self) -> RoleCodec:
        return RoleCodec(self.hierarchy())


def _policy_roles(rng: random.Random, w: Workload) -> list[str]:
    inside, outside = w.roles[: w.state], w.roles[w.state :]
    k = rng.randint(1, 8)
    if rng.random() < w.pass_rate:  # at least one role of the state: the tuples pass
        chosen = [rng.choice(inside), *rng.sample(w.roles, k=min(k - 1, len(w.roles)))]
    else:
        chosen = rng.sample(outside, k=min(k, len(outside)))
    return sorted(set(chosen))


def write_landing(root: Path, w: Workload) -> Path:
    """JSON-lines landing files of ``w``: one file per provider (channel)."""
    rng = random.Random(w.seed)
    folder = root / STREAM.name
    folder.mkdir(parents=True, exist_ok=True)
    for p in range(w.providers):
        channel = Channel(STREAM.name, f"p{p}")
        lines, seq, ts = [], 0, 0
        for i in range(w.tuples // w.providers):
            if i % w.per_sp == 0:
                ts += 1
                granted = _policy_roles(rng, w)
                pattern = (
                    Literal(granted[0])
                    if len(granted) == 1
                    else OneOf(frozenset(Literal(r) for r in granted))
                )
                sp = SecurityPunctuation(
                    DataDescription(ANY, ANY, ANY), SecurityRestriction(pattern), ts=ts, sn=1
                )
                seq += 1
                lines.append(to_line(SpElement(channel, seq, sp)))
            seq += 1
            tid = p * w.tuples + i
            values = {"id": tid, "value": rng.random() * 100, "ts": i}
            lines.append(to_line(TupleElement(channel, seq, tid, ts, 1, values)))
        (folder / f"p{p}-000000000001-exp.jsonl").write_text("\n".join(lines) + "\n")
    return root


def session() -> SparkSession:
    spark = spark_session(app_name="streamshield-experiments")
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def interleaved(arms: Mapping[str, Callable[[int], float]], repeats: int) -> dict[str, list[float]]:
    """Every sample of every arm, the arms alternating within each round and the order of
    a round reversed every other round, so that a change of load hits all arms alike."""
    names = list(arms)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        for name in names if i % 2 == 0 else reversed(names):
            samples[name].append(arms[name](i))
    return samples


def save_json(path: Path, result: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    return path


def timed(start: Callable[[], StreamingQuery]) -> float:
    began = time.perf_counter()
    start().awaitTermination()
    return time.perf_counter() - began


def secure_ingest(spark: SparkSession, landing: Path, out: Path, w: Workload) -> float:
    """Wall time of the SS analyser (secure ingest) over the landing zone, one run."""
    job = IngestJob(Ingest(spark, w.hierarchy(), {STREAM.name: STREAM}), landing, out)
    return timed(lambda: job.start(available_now=True))


def labelled_path(out: Path) -> Path:
    return out / "labelled" / STREAM.name


def read_stream(spark: SparkSession, path: Path, schema) -> DataFrame:
    """A labelled stream as the engines read it (label words restored)."""
    return labelled_store.read_stream(spark, schema, path)


def labelled_struct(spark: SparkSession, w: Workload):
    return labelled_schema(spark, STREAM.ddl, len(STREAM.names), w.codec().width)


def plain_columns() -> list[str]:
    return [name for name, _ in META_FIELDS] + list(STREAM.names)


def ss_condition(w: Workload) -> Column:
    """The secured view's tuple test (SS filter) for the workload's query roles."""
    query = w.codec().query(w.query_roles)
    return tuple_test(labels.allows(0, query))


def run_noop(frame: DataFrame, checkpoint: Path) -> float:
    """Wall time of a streaming query draining ``frame`` into the no-op sink."""
    return timed(
        lambda: (
            frame.writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
    )


def clock() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def changed_flags(flags: Iterable[tuple[str, object, object]]) -> str:
    """`` --flag value`` for each (flag, value, default) whose value is not its default:
    the part of a bench's command line a reader needs to run it again."""
    return "".join(f" {flag} {value}" for flag, value, default in flags if value != default)


def link_copies(source: Path, target: Path, copies: int) -> Path:
    """``copies`` hard links of every Parquet file under ``source``: k times the rows, free.

    Rewriting wide labelled rows with Spark costs minutes at 500 roles; linking the files
    ingest wrote gives a query real labels at any size without touching the disk.
    """
    target.mkdir(parents=True, exist_ok=True)
    files = sorted(source.rglob("*.parquet"))
    for k in range(copies):
        for n, file in enumerate(files):
            os.link(file, target / f"c{k:04d}-{n:04d}.parquet")
    return target
