"""Sliding-window aggregates as folding branches of their stream's network (docs/query-sharing.md).

Each query runs twice over the same labelled batches: alone (Spark's windowed streaming
aggregation in update mode, over a watermarked secured view: ``QueryService.register``
with ``sliding``) and as a branch of one selection network (engine/sharing/aggregate_fold.py,
lang/sliding_fold.py). The batches carry late rows, some of whose windows the watermark
has closed and some not, and run long enough for windows to close and be evicted. The
branch must emit, batch by batch, exactly the rows the query alone emits.
"""

from __future__ import annotations

import datetime

import pyarrow.compute as pc
import pytest
import sqlglot

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.queries.streaming_queries import CallbackSink, QueryService
from streamshield.engine.sharing.aggregate_fold import LATEST_FILE, Closing, FoldedAggregate
from streamshield.engine.sharing.branched_network import NetworkParts, NotShared
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.engine.views.secured_view import WATERMARK_MICROS
from streamshield.lang.cql import parse_policy
from streamshield.lang.rewrite_rules import Sliding, secure
from streamshield.lang.sliding_fold import sliding_fold
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.roles import RoleHierarchy
from tests.spark.test_ingest_job import land

pytestmark = pytest.mark.spark

STREAM = StreamDefinition(
    "Vitals",
    (("pid", "bigint"), ("ward", "string"), ("hr", "bigint"), ("t", "timestamp")),
    "pid",
    "t",
)
HIERARCHY = RoleHierarchy.build(["A", "B", "H", "INS", "X"], [("H", "A")])
K = 2
# A (and H above it) reads every tuple; B only patients 0-49; INS reads pid, ward and
# t, and hr for statistics only.
POLICY = """
INSERT SP INTO STREAM Vitals LET DDP = TUPLES: *, SRP = rbac:A;
INSERT SP INTO STREAM Vitals LET DDP = TUPLES: [0, 49], SRP = rbac:B;
INSERT SP INTO STREAM Vitals LET DDP = ATTRIBUTES: {pid, ward, t}, SRP = rbac:INS;
INSERT SP INTO STREAM Vitals LET DDP = ATTRIBUTES: hr, SRP = rbac:INS FOR STATISTICS
"""
SECRET_HR = 900
"""Heart rates of patients 50-99 (B may not read them) start here; ward w9 has only them."""
BATCHES = 7
"""Landings 0-6: the last one has a late row (:data:`LATE`) and is the one folded again
after the simulated crash; its watermark has closed, and the fold evicted, the windows
that ended by then. Each landing is two micro-batches of every query alone."""
STEP = 40  # seconds of event time per batch
LATE = {4: 10, 6: 90}
"""Batch -> the second of a late row in it. Batch 4's watermark is 150 - 60 = 90 s: of
a 2-minute window sliding by 1 minute, [-60, 60) is closed for its row and [0, 120)
open; batch 6's is 230 - 60 = 170 s: [0, 120) closed, [60, 180) open."""

GROUPED = (
    "SELECT ward, count(*) AS n, sum(hr) AS s, min(hr) AS lo, max(hr) AS hi, avg(hr) AS a "
    "FROM Vitals [RANGE 2 MINUTES SLIDE 1 MINUTE] GROUP BY ward"
)
QUERIES = {
    "grouped_a": (GROUPED, ["A"]),
    "grouped_b": (GROUPED, ["B"]),
    "global_a": (
        "SELECT count(*) AS n, max(hr) AS hi FROM Vitals [RANGE 1 MINUTE SLIDE 1 MINUTE]",
        ["A"],
    ),
    "having_h": (
        "SELECT ward, count(*) AS n FROM Vitals [RANGE 90 SECONDS SLIDE 30 SECONDS] "
        "WHERE hr > 70 GROUP BY ward HAVING count(*) > 1",
        ["H"],
    ),
    "stats_ins": (
        "SELECT ward, count(*) AS n, avg(hr) AS a "
        "FROM Vitals [RANGE 2 MINUTES SLIDE 1 MINUTE] GROUP BY ward",
        ["INS"],
    ),
}


def _time(second: int) -> str:
    return f"2026-11-22T10:{second // 60:02d}:{second % 60:02d}Z"


def _batch(number: int) -> list:
    """The elements of ingest batch ``number``: two channels' tuples (and, first, their
    policies), one of them with a late row where :data:`LATE` says."""
    policy = parse_policy(POLICY, ts=10)
    out: list = []
    for p, provider in enumerate(("p0", "p1")):
        channel = Channel("Vitals", provider)
        seq = number * 10
        if number == 0:
            out += [SpElement(channel, sn, sp) for sn, sp in enumerate(policy.sps, 1)]
        seconds = [number * STEP + 10 * i + 5 * p for i in range(4)]
        if p == 1 and number in LATE:
            seconds.append(LATE[number])
        for i, second in enumerate(seconds):
            pid = (7 * number + 13 * i + 29 * p) % 100
            ward = "w9" if pid >= 50 and i % 2 else ("w1", "w2")[(pid + number) % 2]
            hr = SECRET_HR + pid if pid >= 50 else 60 + (pid * 3) % 60
            values = {"pid": pid, "ward": ward, "hr": hr, "t": _time(second)}
            out.append(TupleElement(channel, seq + 10 + i, pid, 10, policy.csn, values))
    return out


class Emitted:
    """The non-empty batches a query emitted: each one's rows as dicts, and sorted."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[dict]]] = []

    def __call__(self, frame, batch_id) -> None:
        rows = [r.asDict(recursive=True) for r in frame.collect()]
        if rows:
            self.batches.append((batch_id, rows))

    def rows(self) -> list[list[str]]:
        return [sorted(repr(sorted(r.items())) for r in rows) for _, rows in self.batches]

    def all(self) -> list[dict]:
        return [r for _, rows in self.batches for r in rows]

    def starts(self, index: int) -> set[tuple[int, int]]:
        """The (minute, second) each window emitted by the ``index``-th batch starts at."""
        _, rows = self.batches[index]
        return {(r["window"]["start"].minute, r["window"]["start"].second) for r in rows}


def _landed(spark, root):
    """A service over the stream's first batch, and a function landing the next."""
    land(root / "landing", _batch(0), 0)
    job = IngestJob(Ingest(spark, HIERARCHY, {"Vitals": STREAM}), root / "landing", root / "store")
    job.start(available_now=True).awaitTermination()
    service = QueryService(spark, {"Vitals": STREAM}, HIERARCHY, job.store, root, statistics_k=K)

    def next_batch(number: int) -> None:
        land(root / "landing", _batch(number), number)
        job.start(available_now=True).awaitTermination()

    return service, next_batch


@pytest.fixture
def stream(spark, tmp_path):
    """:func:`_landed` on a root of the test's own (the test lands more batches)."""
    service, next_batch = _landed(spark, tmp_path)
    yield service, next_batch
    for query in service.list():
        query.stop()


@pytest.fixture(scope="module")
def first_batch(spark, tmp_path_factory):
    """:func:`_landed` once for the module's tests that only plan (an ingest job each
    would be most of their time)."""
    service, _ = _landed(spark, tmp_path_factory.mktemp("sliding-first-batch"))
    return service


def _sliding(service, admitted) -> Sliding:
    _item, _stream, window = admitted.shape.windows[0]
    return Sliding("t", window, seconds=False)


def network(service, root, queries, sinks):
    parts = NetworkParts(
        service.spark,
        service.labelled,
        service.streams["Vitals"],
        service.codec,
        service.provenance,
        root,
        name=f"sliding-{root.parent.name}",
    )
    shared = SharedNetwork(parts, fuse=True)
    for name, (text, roles) in queries.items():
        admitted = service.admit(text, roles)
        sliding = _sliding(service, admitted)

        def sql(view: str, statistics: bool = False, admitted=admitted, sliding=sliding) -> str:
            rewrite = service.rewrite({"Vitals": view}, statistics, sliding)
            return secure(admitted.checked.tree, rewrite)

        shared.add(name, admitted, sql, sinks[name])
    return shared


def alone(service, queries, sinks, monkeypatch):
    """Each query as its own streaming query: the reference. Its state is kept in one
    shuffle partition instead of the session's four: the rows are the same (the
    aggregates are deterministic), and five stateful queries' state tasks, a micro-batch
    and a no-data micro-batch per landing each, were most of this test's time."""
    fresh = service.spark.newSession

    def one_partition():
        session = fresh()
        session.conf.set("spark.sql.shuffle.partitions", "1")
        return session

    out = {}
    with monkeypatch.context() as patched:  # only these queries' sessions
        patched.setattr(service.spark, "newSession", one_partition)
        for name, (text, roles) in queries.items():
            admitted = service.admit(text, roles)
            out[name] = service.register(
                admitted,
                CallbackSink(sinks[name]),
                f"alone_{name}",
                sliding=_sliding(service, admitted),
            )
    return out


SUITE = ("grouped_a", "grouped_b", "having_h", "stats_ins")
"""The queries the suite compares: those the security and late-row checks read, and the
HAVING (with a WHERE), which no other test of the suite runs as a sliding fold. A global
sliding fold runs in the suite elsewhere (tests/server/test_query_lifecycle.py's
``slide``, its count checked across a restart); ``global_a`` is compared with Spark's
own in long mode. Each query alone is a stateful streaming query of its own, two
micro-batches per landing: most of this file's time."""


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(SUITE, id="suite"),
        pytest.param(tuple(QUERIES), id="all", marks=pytest.mark.long),
    ],
)
def test_sliding_branches_emit_what_each_query_alone_emits(
    stream, tmp_path, monkeypatch, names: tuple[str, ...]
):
    service, next_batch = stream
    chosen = {name: QUERIES[name] for name in names}
    own = {name: Emitted() for name in chosen}
    branch = {name: Emitted() for name in chosen}
    queries = alone(service, chosen, own, monkeypatch)
    shared = network(service, tmp_path / "net", chosen, branch)
    assert all(b.folded is not None and b.folded.closing for b in shared.branches.values())
    shared.start()
    try:
        for number in range(BATCHES):
            if number:
                next_batch(number)
            for query in queries.values():
                query.process_all_available()
            shared.handle.processAllAvailable()
            for name in chosen:
                assert branch[name].rows() == own[name].rows(), (name, number)
    finally:
        shared.stop()
    assert all(b.folded.in_memory() is not None for b in shared.branches.values())
    assert len(own["grouped_a"].batches) == BATCHES, "every batch updated a window"
    for name in chosen:
        assert own[name].batches, name
    # the late rows: of each, the closed window's share dropped, the open one's counted
    assert (0, 0) in own["grouped_a"].starts(4) and (59, 0) not in own["grouped_a"].starts(4)
    assert (1, 0) in own["grouped_a"].starts(6) and (0, 0) not in own["grouped_a"].starts(6)
    # the state holds open windows only: those the last fold's watermark closed are gone
    for name, b in shared.branches.items():
        folded = b.folded
        previous, newest = folded.versions()[-2:]
        state = folded._state(newest)
        watermark = folded.watermark(previous)  # the one in force for the newest batch
        assert watermark > 0
        ends = state[folded.closing.end].cast("int64")
        assert state.num_rows and pc.all(pc.greater(ends, watermark)).as_py(), name
        kept = {t // 1_000_000 for t in ends.to_pylist()}
        emitted = {_epoch(r["window"]["end"]) for r in own[name].all()}
        closed = {end for end in emitted if end * 1_000_000 <= watermark}
        assert closed and not closed & kept, (name, closed, kept)  # evicted
        assert emitted - closed <= kept, name  # the open ones kept
        assert (folded.directory / LATEST_FILE).exists()
    # B never sees what only A may read: patients 50-99 (ward w9, heart rates >= 900)
    b_rows = [r for _, rows in branch["grouped_b"].batches for r in rows]
    a_rows = [r for _, rows in branch["grouped_a"].batches for r in rows]
    assert b_rows and all(r["ward"] != "w9" and r["hi"] < SECRET_HR for r in b_rows)
    assert any(r["ward"] == "w9" for r in a_rows) and any(r["hi"] >= SECRET_HR for r in a_rows)
    # a crash after the last fold wrote its state, before the positions moved: restarted
    # (states and watermarks read from disk), each branch folds that batch again from
    # the state before it, and emits what it emitted the first time (no row twice)
    for name in chosen:
        shared.ledger.advance(name, shared.branches[name].folded.versions()[-2])
    replayed = {name: Emitted() for name in chosen}
    again = network(service, tmp_path / "net", chosen, replayed)  # each catches up
    again.start(available_now=True).awaitTermination()
    for name in chosen:
        assert replayed[name].rows() == branch[name].rows()[-1:], name


@pytest.mark.parametrize(
    "text",
    [
        "SELECT count(DISTINCT ward) AS n FROM Vitals [RANGE 2 MINUTES SLIDE 1 MINUTE]",
        "SELECT ward, stddev(hr) AS s FROM Vitals [RANGE 2 MINUTES SLIDE 1 MINUTE] GROUP BY ward",
        "SELECT ward, first(hr) AS f FROM Vitals [RANGE 2 MINUTES SLIDE 1 MINUTE] GROUP BY ward",
        # Spark's watermark would grow with rows this WHERE drops (it stays above it)
        "SELECT count(*) AS n FROM Vitals [RANGE 2 MINUTES SLIDE 1 MINUTE] "
        "WHERE t > timestamp'2026-11-22 10:01:00'",
    ],
)
def test_a_sliding_aggregate_that_does_not_fold_runs_on_its_own(first_batch, tmp_path, text):
    service = first_batch
    with pytest.raises(NotShared):
        network(service, tmp_path / "net", {"x": (text, ["A"])}, {"x": Emitted()})


def test_the_drivers_sliding_fold_equals_sparks(spark, tmp_path):
    """The same partials folded by Spark (``FoldedAggregate.output``) and on the driver
    (``output_table``) drop the same late windows, evict the same closed ones and emit
    the same rows, the driver's across a restart (its watermark read back from disk)."""
    window = "`window`(t, '2 minutes', '1 minute')"
    text = f"SELECT {window} AS `window`, k, count(*) AS n, sum(x) AS s FROM v GROUP BY k, {window}"
    folded = sliding_fold(sqlglot.parse_one(text, read="spark"), "t", watermark=True)
    assert folded is not None and folded.latest is not None
    closing = Closing(folded.end, folded.latest, WATERMARK_MICROS)
    names = ("window", "k", "n", "s")
    by_spark = FoldedAggregate(folded.fold, tmp_path / "spark", names, closing=closing)
    on_driver = FoldedAggregate(folded.fold, tmp_path / "driver", names, closing=closing)
    batches = [
        [("a", "10:00:10", 1), ("b", "10:00:50", 2)],
        [("a", "10:02:30", 3)],  # the watermark becomes 10:01:30
        [("a", "10:00:20", 4), ("b", "10:03:00", 5)],  # late: [9:59, 10:01) dropped only
        [("b", "10:05:00", 6)],  # the watermark was 10:02: windows ending by then evicted
        [("a", "10:05:10", 7)],
    ]
    since = -1
    for batch_id, rows in enumerate(batches):
        frame = spark.createDataFrame(
            [(k, f"2026-11-22 {t}", x) for k, t, x in rows], "k string, t string, x bigint"
        )
        frame.selectExpr("k", "cast(t AS timestamp) AS t", "x").createOrReplaceTempView("v")
        partial = spark.sql(folded.fold.partial)
        if batch_id == 3:  # a restart: the state and the newest event time read back
            on_driver = FoldedAggregate(folded.fold, tmp_path / "driver", names, closing=closing)
        expected = by_spark.output(partial, since, batch_id)
        got = on_driver.output_table(partial.toArrow(), partial.schema, since, batch_id, spark)
        assert got is not None and got.schema == expected.schema
        assert _sorted(got) == _sorted(expected) and _sorted(got), batch_id
        if batch_id == 2:
            late = {r["window"]["start"].minute for r in got.collect()}
            assert 59 not in late and 0 in late, "the late row's closed window got nothing"
        assert by_spark.watermark(batch_id) == on_driver.watermark(batch_id)
        kept = spark.read.parquet(str(tmp_path / "spark" / f"v={batch_id}")).count()
        assert on_driver._state(batch_id).num_rows == kept, batch_id
        since = batch_id
    # the watermark in force for batch 4 is 10:04: a's windows from 10:01 and 10:02 and
    # b's from 10:02 were evicted; b's from 10:03, 10:04, 10:05 and a's from 10:04, 10:05
    # are open
    assert on_driver._state(4).num_rows == 5


def _epoch(naive: datetime.datetime) -> int:
    """Seconds since the epoch of a timestamp Spark handed over (the session's zone)."""
    return int(naive.astimezone(datetime.UTC).timestamp())


def _sorted(frame) -> list:
    return sorted(repr(tuple(r)) for r in frame.collect())
