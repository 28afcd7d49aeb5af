"""Runs generated shared-operator networks on Spark, in the privacy-switch paper's modes.

Modes (PrS paper, section 6.1, plus what Fig. 9 compares):

* ``non-shared``: every query's own tree (as registered, before merging) computed on its
  own, one Spark job per query, nothing reused between queries;
* ``shared`` (the paper's "shared without PrSs": post-filtering only): the merged network,
  every node built once as one DataFrame; a node read by two or more consumers in this
  run is persisted while they run and unpersisted after the last output job that needs
  it; every query's output job runs, and a query whose users all lost access has its
  output dropped at the end (post-filtering);
* ``switches``: as ``shared``, but operators that ``operators_off(network, state)``
  reports as off are never built, so no Spark job reads them: only queries whose terminal
  switch has a user run their output job (their operators are on by construction; the
  run checks it and refuses otherwise).

Why batch DataFrames and not ``availableNow`` streams: the paper measures how long a
network takes to process a fixed input (1000 tuples per run), not a latency. A batch
run over a fixed input of each stream is one instant of every operator (the generated
networks have no windows: the paper assumes every shared operator has the same window
and omits it), and it leaves out the streaming fixed cost (~0.2 s per micro-batch plus
checkpoint writes per query) that is the same in every mode but would count once per
query in ``non-shared`` and once per network otherwise. Engine-level streaming networks
are ``engine/sharing/shared_network.py``'s job; this executor only measures plans.

Rows carry no labels: the experiment is about how much work a network does, and in the
project a network's shared operators run on labelled rows with every branch applying its
own checks (docs/query-sharing.md); labels would add the same per-row cost to every mode.

Each output job runs in its own Spark job group, ``prs:<run>:<mode>:<query>``, so that a
test can ask Spark (``statusTracker().getJobIdsForGroup``) which queries ran work.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.prs_networks import STREAMS, GeneratedNetwork, stream_attributes
from streamshield.network.merge import Network
from streamshield.network.operators import (
    Aggregate,
    Aggregation,
    Join,
    Operator,
    Project,
    Select,
    Union,
    Window,
    WindowKind,
)
from streamshield.network.switch_state import SwitchState, operators_off

MODES = ("non-shared", "shared", "switches")
Output = Callable[[DataFrame], object]


def stream_schema(stream: str) -> str:
    key, *rest = stream_attributes(stream)
    return ", ".join([f"{key} bigint", *(f"{a} int" for a in rest)])


def random_rows(rows: int, seed: int) -> dict[str, list[dict[str, int]]]:
    """Small Python rows of the three streams (for the tests' pure reference): each
    stream holds ``rows`` keys out of ``1.5 * rows``, so joins drop some rows."""
    rng = random.Random(seed)
    out = {}
    for stream in STREAMS:
        key, a, b, g = stream_attributes(stream)
        keys = rng.sample(range(rows * 3 // 2), rows)
        out[stream] = [
            {key: k, a: rng.randrange(100), b: rng.randrange(100), g: rng.randrange(10)}
            for k in keys
        ]
    return out


def frames_of_rows(
    spark: SparkSession, rows: Mapping[str, list[dict[str, int]]]
) -> dict[str, DataFrame]:
    return {s: spark.createDataFrame(rows[s], stream_schema(s)) for s in STREAMS}


def write_streams(spark: SparkSession, folder: Path, rows: int, seed: int) -> dict[str, DataFrame]:
    """``rows`` rows per stream as Parquet under ``folder`` (keys 0..rows-1 in every
    stream, so joins are 1:1), and a reader per stream. Written once, never timed."""
    frames = {}
    for n, stream in enumerate(STREAMS):
        key, a, b, g = stream_attributes(stream)
        path = folder / stream
        if not path.exists():
            base = seed * 10 + n * 3
            (
                spark.range(rows)
                .select(
                    F.col("id").alias(key),
                    (F.rand(base) * 100).cast("int").alias(a),
                    (F.rand(base + 1) * 100).cast("int").alias(b),
                    (F.rand(base + 2) * 10).cast("int").alias(g),
                )
                .write.parquet(str(path))
            )
        frames[stream] = spark.read.parquet(str(path))
    return frames


# -- one operator onto DataFrames --------------------------------------------------------


def _all(columns: Iterable[Column]) -> Column:
    return functools.reduce(lambda x, y: x & y, columns)


_AGGREGATES: dict[Aggregation, Callable[[Column], Column]] = {
    Aggregation.COUNT: F.count,
    Aggregation.SUM: F.sum,
    Aggregation.MIN: F.min,
    Aggregation.MAX: F.max,
    Aggregation.AVG: F.avg,
}


def compile_node(node: Operator, inputs: list[DataFrame]) -> DataFrame:
    """``node`` on its inputs' frames, with ``network/evaluate.py``'s meaning (SQL NULLs
    fail comparisons and join conditions, a join's left side wins a name clash, an
    aggregate over no rows has no group). Windows other than UNBOUNDED need an order
    and state that a batch frame does not have: refused."""
    if isinstance(node, Select):
        atoms = (a.op.apply(F.col(a.attribute), F.lit(a.value)) for a in node.predicate.conjuncts)
        return inputs[0].filter(_all(atoms))
    if isinstance(node, Project):
        return inputs[0].select(*sorted(node.attributes & set(inputs[0].columns)))
    if isinstance(node, Join):
        left, right = inputs
        # Both sides renamed: they often derive from one source frame, and Spark resolves
        # df["col"] of a self-join ambiguously.
        lcols, rcols = left.columns, right.columns
        lhs = left.select(*(F.col(c).alias(f"_l_{c}") for c in lcols))
        rhs = right.select(*(F.col(c).alias(f"_r_{c}") for c in rcols))
        on = _all(F.col(f"_l_{a}") == F.col(f"_r_{b}") for a, b in sorted(node.condition))
        kept = [F.col(f"_l_{c}").alias(c) for c in lcols]
        kept += [F.col(f"_r_{c}").alias(c) for c in rcols if c not in lcols]
        return lhs.join(rhs, on, "inner").select(*kept)
    if isinstance(node, Aggregate):
        keys = sorted(node.group_by)
        if node.attribute == "*":
            value = F.count(F.lit(1))
        else:
            value = _AGGREGATES[node.function](F.col(node.attribute))
        grouped = inputs[0].groupBy(*keys)
        if keys:
            return grouped.agg(value.alias(node.output_attribute))
        # A global aggregate gives one row even over no rows; evaluate gives no group.
        counted = grouped.agg(value.alias(node.output_attribute), F.count(F.lit(1)).alias("_n"))
        return counted.filter(F.col("_n") > 0).drop("_n")
    if isinstance(node, Union):
        return functools.reduce(lambda x, y: x.unionByName(y, allowMissingColumns=True), inputs)
    if isinstance(node, Window) and node.spec.kind is WindowKind.UNBOUNDED:
        return inputs[0]
    raise NotImplementedError(f"{node.kind} {node.parameters} has no batch meaning here")


# -- running a network --------------------------------------------------------------------


def noop(frame: DataFrame) -> None:
    """Materialise every row and column, keep nothing (Spark's noop writer)."""
    frame.write.format("noop").mode("overwrite").save()


def collect(frame: DataFrame) -> list[dict[str, object]]:
    return [row.asDict() for row in frame.collect()]


@dataclass
class Run:
    """What one mode did: its time, each query's delivered output, what Spark touched."""

    mode: str
    seconds: float
    groups: dict[str, str]
    """Per query of the network, whether it ran or not: the Spark job group its output
    job runs in (a query that ran no job has a group with no job)."""
    delivered: dict[str, object] = field(default_factory=dict)
    """Per query with a user: what ``output`` returned (queries without one get nothing)."""
    built: frozenset[Operator] = frozenset()
    persisted: frozenset[Operator] = frozenset()
    off: frozenset[Operator] = frozenset()


class Executor:
    """Runs networks over fixed stream frames; ``output`` is the delivery action."""

    _runs = count()

    def __init__(
        self,
        spark: SparkSession,
        streams: Mapping[str, DataFrame],
        output: Output = noop,
        discard: Output = noop,
    ) -> None:
        self.spark, self.streams = spark, dict(streams)
        self.output, self.discard = output, discard

    def run(self, mode: str, generated: GeneratedNetwork, state: SwitchState) -> Run:
        if mode == "non-shared":
            return self.non_shared(generated.queries, state)
        if mode in ("shared", "switches"):
            return self.shared(generated.network, state, switches=mode == "switches")
        raise ValueError(f"unknown mode {mode!r}")

    def non_shared(self, queries: Mapping[str, Operator], state: SwitchState) -> Run:
        """Every query's own tree on its own: nothing built once is read twice."""
        began = time.perf_counter()
        run = self._start("non-shared", queries)
        built: set[Operator] = set()
        for query, root in sorted(queries.items()):
            frames: dict[Operator, DataFrame] = {}
            frame = self._build(root, frames, frozenset())
            built.update(frames)
            self._deliver(run, query, frame, state)
        run.built = frozenset(built)
        run.seconds = time.perf_counter() - began
        return run

    def shared(self, network: Network, state: SwitchState, switches: bool) -> Run:
        """The merged network once; with ``switches``, off operators are never built."""
        began = time.perf_counter()
        mode = "switches" if switches else "shared"
        off = operators_off(network, state) if switches else frozenset()
        running = [
            q for q in network.roots if not switches or state.receivers(q)
        ]  # post-filtering runs every output job; switches only those with a user
        needed = {n for q in running for n in network.roots[q].nodes()}
        if needed & off:  # a query with a user reads an operator a switch closed
            raise RuntimeError("switch state and receivers disagree; nothing was run")
        readers: dict[Operator, int] = {n: 0 for n in needed}
        for producer, consumer in network.edges:
            if consumer in needed and not isinstance(producer, str):
                readers[producer] += 1
        for q in running:
            readers[network.roots[q]] += 1
        persist = frozenset(n for n, k in readers.items() if k >= 2)
        last_use = {n: i for i, q in enumerate(running) for n in network.roots[q].nodes()}
        frames: dict[Operator, DataFrame] = {}
        run = self._start(mode, network.roots)
        run.off, run.persisted = off, persist
        try:
            for i, query in enumerate(running):
                frame = self._build(network.roots[query], frames, persist)
                self._deliver(run, query, frame, state)
                for node in persist:
                    if last_use[node] == i:
                        frames[node].unpersist()
        finally:
            for node in persist & frames.keys():
                frames[node].unpersist()
        run.built = frozenset(frames)
        run.seconds = time.perf_counter() - began
        return run

    def _build(
        self, node: Operator, frames: dict[Operator, DataFrame], persist: frozenset[Operator]
    ) -> DataFrame:
        if node not in frames:
            inputs = [
                self.streams[i] if isinstance(i, str) else self._build(i, frames, persist)
                for i in node.inputs
            ]
            frame = compile_node(node, inputs)
            frames[node] = frame.persist() if node in persist else frame
        return frames[node]

    def _start(self, mode: str, queries: Iterable[str]) -> Run:
        number = next(self._runs)
        return Run(mode, 0.0, {q: f"prs:{number}:{mode}:{q}" for q in queries})

    def _deliver(self, run: Run, query: str, frame: DataFrame, state: SwitchState) -> None:
        sc = self.spark.sparkContext
        sc.setJobGroup(run.groups[query], f"{run.mode} output of {query}", False)
        try:
            if state.receivers(query):  # the terminal switch has a user
                run.delivered[query] = self.output(frame)
            else:  # post-filtering: computed in full, dropped at the output
                self.discard(frame)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
