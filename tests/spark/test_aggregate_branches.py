"""Aggregates without a window as branches of their stream's network (docs/query-sharing.md).

The data and the oracle are tests/spark/test_statistics.py's: random policies over four
channels plus fixed statistics-only cases, every role set's released groups computed by
brute force. Here the stream arrives in two parts, and the aggregates run as branches of
one selection network, folded batch by batch into states of their own
(engine/sharing/aggregate_fold.py); the network's process is restarted between the parts. The
newest row each group emitted must be the oracle's over the whole stream: the same
conformance cases the queries run alone pass (test_statistics.py), including the
statistics-only release rule and its labels.
"""

from __future__ import annotations

import pytest
import sqlglot

from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.streaming_queries import QueryService
from streamshield.engine.sharing.aggregate_fold import FoldedAggregate
from streamshield.engine.sharing.branch_ledger import NOTHING
from streamshield.engine.sharing.branched_network import NetworkParts, NotShared
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.lang.partial_aggregates import fold_of
from streamshield.lang.rewrite_rules import secure
from tests.spark.test_ingest_job import land
from tests.spark.test_statistics import (
    AGGREGATES,
    ELEMENTS,
    HIERARCHY,
    SERVER,
    STREAM,
    K,
    _rows,
    _same,
    oracle,
)

pytestmark = pytest.mark.spark

ROLES = {"a": ["A"], "b": ["B"], "ins": ["INS"], "h_ins": ["H", "INS"], "x": ["X"]}
GROUPED = f"SELECT ward, {AGGREGATES} FROM Vitals GROUP BY ward"
GLOBAL = f"SELECT {AGGREGATES} FROM Vitals"
HALF = len(ELEMENTS) // 2


class Emitted:
    """Every row a branch emitted, as dicts, with the output id it came under."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict]] = []

    def __call__(self, frame, batch_id) -> None:
        self.rows += [(batch_id, r.asDict()) for r in frame.collect()]

    def newest(self, key: str | None) -> list[dict]:
        """The newest row of each group (Spark's update mode: a group's latest value)."""
        out: dict = {}
        for _batch, row in self.rows:
            out[row[key] if key else None] = row
        return list(out.values())


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    """The service over the stream's first part, and a function landing the second."""
    root = tmp_path_factory.mktemp("aggregate_branches")
    land(root / "landing", ELEMENTS[:HALF], 0)
    ingest = Ingest(spark, HIERARCHY, {"Vitals": STREAM}, {"Vitals": SERVER})
    job = IngestJob(ingest, root / "landing", root / "store")
    job.start(available_now=True).awaitTermination()
    service = QueryService(spark, {"Vitals": STREAM}, HIERARCHY, job.store, root, statistics_k=K)

    def second_part() -> None:
        land(root / "landing", ELEMENTS[HALF:], 1)
        job.start(available_now=True).awaitTermination()

    yield service, second_part
    for query in service.list():
        query.stop()


def network(service, root, queries, active=lambda _n: True, prebuilt=True):
    parts = NetworkParts(
        service.spark,
        service.labelled,
        service.streams["Vitals"],
        service.codec,
        service.provenance,
        root,
        active=active,
        name=f"aggregates-{root.parent.name}",
    )
    shared = SharedNetwork(parts, fuse=True)
    shared.prebuilt_partials = prebuilt
    for name, (text, roles) in queries.items():
        admitted = service.admit(text, roles)

        def sql(view: str, statistics: bool = False, admitted=admitted) -> str:
            return secure(admitted.checked.tree, service.rewrite({"Vitals": view}, statistics))

        shared.add(name, admitted, sql, sinks[name])
    return shared


sinks: dict[str, Emitted] = {}


def test_folded_aggregates_equal_the_oracle_across_batches_and_a_restart(stream, tmp_path):
    service, second_part = stream
    queries = {f"grouped_{n}": (GROUPED, roles) for n, roles in ROLES.items()}
    queries["global_b"] = (GLOBAL, ["B"])
    floor = min(v[0] for v in oracle(["A"], "ward").values())  # the quietest ward is left out
    busy = f"SELECT ward, count(*) AS n FROM Vitals GROUP BY ward HAVING n > {floor}"
    queries["busy_a"] = (busy, ["A"])
    sinks.update({name: Emitted() for name in queries})
    root = tmp_path / "net"
    first = network(service, root, queries)
    assert all(b.folded is not None for b in first.branches.values())
    # each one's partial query built once as columns (engine/sharing/aggregate_pass.py)
    assert all(b.partials is not None for b in first.branches.values())
    first.start(available_now=True).awaitTermination()
    # folded on the driver (engine/sharing/arrow_merge.py), each state kept in memory
    assert all(b.folded.in_memory() is not None for b in first.branches.values())
    before = {name: len(sink.rows) for name, sink in sinks.items()}
    assert before["grouped_a"] and before["global_b"] == 1

    second_part()
    again = network(service, root, queries)  # a restart: the states are on disk
    assert all(b.folded.in_memory() is None for b in again.branches.values())
    again.start(available_now=True).awaitTermination()
    assert all(b.folded.in_memory() is not None for b in again.branches.values())
    for name, roles in ROLES.items():
        sink = sinks[f"grouped_{name}"]
        expected = oracle(roles, "ward")
        got = _rows(sink.newest("ward"), "ward")
        assert got.keys() == expected.keys(), name
        for group, values in expected.items():
            assert _same(got[group], values), (name, group)
    got = _rows(sinks["global_b"].newest(None), None)
    assert got.keys() == oracle(["B"], None).keys()
    for group, values in oracle(["B"], None).items():
        assert _same(got[group], values)
    busy = {r["ward"]: r["n"] for r in sinks["busy_a"].newest("ward")}
    assert busy == {w: v[0] for w, v in oracle(["A"], "ward").items() if v[0] > floor} and busy
    assert len(sinks["grouped_a"].rows) > before["grouped_a"], "the second part updated groups"
    ids = {batch for batch, _ in sinks["grouped_a"].rows}
    assert len(ids) == 2, "one output per part: the state, not a recount, carried the first"
    for row in (r for _, r in sinks["grouped_ins"].rows):
        assert "_ss_r0_0" in row, "the output keeps its labels for delivery's recipient check"


def test_a_replay_after_a_crash_counts_no_row_twice(stream, tmp_path):
    """A crash after a fold wrote its state and before the branch's position moved: the
    rejoining branch starts again from the state at its position (the newer version is
    dropped), so the replayed batch's rows are counted once."""
    service, _ = stream
    queries = {"grouped_a": (GROUPED, ["A"])}
    sinks["grouped_a"] = Emitted()
    root = tmp_path / "net"
    first = network(service, root, queries)
    first.start(available_now=True).awaitTermination()
    once = _rows(sinks["grouped_a"].newest("ward"), "ward")
    first.ledger.advance("grouped_a", NOTHING)  # the position never moved
    sinks["grouped_a"] = Emitted()
    again = network(service, root, queries)
    again.start(available_now=True).awaitTermination()
    assert _rows(sinks["grouped_a"].newest("ward"), "ward") == once and once
    state = SharedNetwork.aggregate_path(root, "grouped_a")
    assert state.is_dir()
    again.forget("grouped_a")  # the query is removed for good: its state goes too
    assert not state.exists()


def test_an_aggregate_has_no_switch_and_folds_whoever_listens(stream, tmp_path):
    """Its every later value depends on every row: it folds each batch, as alone, so a
    subscriber coming back replays what changed meanwhile (docs/query-sharing.md); the
    selection beside it, switched off, runs no job."""
    service, _ = stream
    queries = {
        "grouped_b": (GROUPED, ["B"]),
        "ids_b": ("SELECT pid FROM Vitals WHERE hr > 100", ["B"]),
    }
    sinks.update({name: Emitted() for name in queries})
    shared = network(service, tmp_path / "net", queries, active=lambda _n: False)
    tracker = service.spark.sparkContext.statusTracker()
    shared.start(available_now=True).awaitTermination()
    expected = oracle(["B"], "ward")
    assert _rows(sinks["grouped_b"].newest("ward"), "ward").keys() == expected.keys()
    assert tracker.getJobIdsForGroup(f"{shared.name}:grouped_b") != []
    assert not sinks["ids_b"].rows
    assert tracker.getJobIdsForGroup(f"{shared.name}:ids_b") == []
    assert {q for s in shared.switches() for q in s.queries} == {"ids_b"}


def test_prebuilt_partials_emit_what_the_partial_sql_emits(stream, tmp_path):
    """Partial queries built once as column expressions (``Branch.partials``) emit, batch
    by batch, exactly what their SQL planned per batch emits: a WHERE over a qualified
    column, expression keys, a HAVING, a global aggregate, a statistics-only view."""
    service, _ = stream
    queries = {
        "keyed_h_ins": (
            "SELECT ward, hr > 90 AS high, count(*) AS n, sum(hr) AS s, min(hr) AS lo "
            "FROM Vitals WHERE Vitals.hr > 60 GROUP BY ward, hr > 90 HAVING count(*) > 1",
            ["H", "INS"],
        ),
        "stats_ins": (GROUPED, ["INS"]),
        "global_a": ("SELECT count(*) AS n, max(hr) AS hi, avg(hr) AS a FROM Vitals", ["A"]),
    }
    emitted = {}
    for prebuilt in (True, False):
        sinks.update({name: Emitted() for name in queries})
        shared = network(service, tmp_path / f"net{prebuilt}", queries, prebuilt=prebuilt)
        assert all((b.partials is not None) is prebuilt for b in shared.branches.values())
        shared.start(available_now=True).awaitTermination()
        emitted[prebuilt] = {n: sorted(map(repr, sinks[n].rows)) for n in queries}
    assert emitted[True] == emitted[False]
    assert all(emitted[True].values())


@pytest.mark.parametrize(
    "text",
    [
        "SELECT count(DISTINCT ward) FROM Vitals",
        "SELECT ward, stddev(hr) FROM Vitals GROUP BY ward",
        "SELECT ward, first(hr) FROM Vitals GROUP BY ward",
    ],
)
def test_an_aggregate_that_does_not_fold_runs_on_its_own(stream, tmp_path, text):
    service, _ = stream
    sinks["x"] = Emitted()
    with pytest.raises(NotShared):
        network(service, tmp_path / "net", {"x": (text, ["A"])})


def test_the_drivers_fold_equals_sparks_nulls_and_nans_included(spark, tmp_path):
    """The same partials folded by Spark (``FoldedAggregate.output``) and on the driver
    (``output_table``: pyarrow's merge, the final select over a local relation) give the
    same states and the same emitted rows and types, over groups with null keys, null
    values, NaNs and all-null groups; the driver's state read back after a restart (a
    new FoldedAggregate over the same folder) folds on as the held one did."""
    text = (
        "SELECT k, count(*) AS n, count(x) AS c, sum(x) AS s, avg(x) AS a, min(x) AS lo, "
        "max(y) AS hi, min(y) AS ylo, bit_and(z) AS band, bit_or(z) AS bor, max(w) AS w "
        "FROM v GROUP BY k HAVING count(*) > 0"
    )
    fold = fold_of(sqlglot.parse_one(text, read="spark"))
    assert fold is not None
    nan = float("nan")
    schema = "k string, x bigint, y double, z bigint, w string"
    batches = [
        [("a", 1, 1.0, 6, "p"), ("a", None, nan, None, None), (None, 2, None, 3, "q")],
        [("b", None, None, None, None), ("a", 5, 2.0, 12, "a"), (None, None, nan, 5, None)],
        [("b", 7, nan, -1, "z"), ("c", 1, -0.5, 0, "")],
    ]
    names = ("k", "n", "c", "s", "a", "lo", "hi", "ylo", "band", "bor", "w")
    by_spark = FoldedAggregate(fold, tmp_path / "spark", names)
    on_driver = FoldedAggregate(fold, tmp_path / "driver", names)
    since = NOTHING
    for batch_id, rows in enumerate(batches):
        spark.createDataFrame(rows, schema).createOrReplaceTempView("v")
        partial = spark.sql(fold.partial)
        if batch_id == 2:  # a restart: the state is read back from its file
            on_driver = FoldedAggregate(fold, tmp_path / "driver", names)
        expected = by_spark.output(partial, since, batch_id)
        got = on_driver.output_table(partial.toArrow(), partial.schema, since, batch_id, spark)
        assert got is not None and on_driver.in_memory() == batch_id
        assert got.schema == expected.schema
        assert _sorted(got) == _sorted(expected), batch_id
        since = batch_id


def _sorted(frame) -> list:
    return sorted(repr(tuple(r)) for r in frame.collect())
