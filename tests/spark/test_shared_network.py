"""Selections over one stream as one shared network (docs/query-sharing.md).

Four users with different roles watch HeartRate with overlapping selections. Run as one
network (one scan, shared selections, a secured branch per query) each gets exactly what
its query run alone returns; a branch whose switch is off runs no Spark job at all.
"""

from __future__ import annotations

import shutil

import pytest

from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.sharing.branch_ledger import NOTHING, BranchLedger
from streamshield.engine.sharing.fused_branches import fused_pass
from streamshield.engine.sharing.shared_network import NotShared, SharedNetwork
from streamshield.engine.store.result_store import LINK, ResultStore, StoringSink
from tests.spark.hospital_pipeline import (
    WARD_QUERIES,
    Rows,
    hospital_pipeline,
    network_parts,
    secured,
)

pytestmark = pytest.mark.spark

STREAM = "HeartRate"
QUERIES = {
    **WARD_QUERIES,
    "chosen_by_hidden": ("SELECT patient_id FROM HeartRate WHERE ts > 0", "ND"),
}
BROKEN = ("SELECT patient_id FROM HeartRate WHERE beats_per_min > 'high'", "C")
"""A plain selection that Spark fails on (no double is 'high', under ANSI casts)."""


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    yield from hospital_pipeline(spark, tmp_path_factory.mktemp("shared"))


class Every(Rows):
    """Every column of every row (labels, masked flags, origin), but the channel's
    hash, which is salted per query: a rebuilt branch row must equal its own plan's."""

    def __call__(self, frame, batch_id) -> None:
        self.calls += 1
        keep = [c for c in frame.columns if c != "_ss_channel"]
        self.columns = keep
        self.rows += [tuple(r) for r in frame.select(*keep).collect()]

    def users(self) -> Rows:
        """The user columns only, as :class:`Rows` keeps them."""
        users = Rows()
        index = [i for i, c in enumerate(self.columns) if not c.startswith("_ss_")]
        users.rows = [tuple(r[i] for i in index) for r in self.rows]
        return users


def network(
    pipeline, root, names, active=lambda _n: True, queries=QUERIES, sink=Rows
) -> tuple[SharedNetwork, dict]:
    parts = network_parts(pipeline, STREAM, root, active=active, name=f"network-{root.parent.name}")
    shared = SharedNetwork(parts, fuse=True)  # the one pass, as the server runs it
    sinks = {}
    for name in names:
        admitted, sql = secured(pipeline, STREAM, *queries[name])
        sinks[name] = sink(name)
        shared.add(name, admitted, sql, sinks[name])
    return shared, sinks


def test_each_branch_returns_exactly_what_its_query_alone_returns(pipeline, tmp_path) -> None:
    shared, sinks = network(pipeline, tmp_path / "net", list(QUERIES), sink=lambda _n: Rows())
    handle = shared.start(available_now=True)
    handle.awaitTermination()
    labelled = pipeline.queries.labelled.path(STREAM)
    stored = pipeline.queries.spark.read.option("recursiveFileLookup", "true").parquet(
        str(labelled)
    )
    read = sum(p["numInputRows"] for p in handle.recentProgress)
    assert read == stored.count(), "the scan is shared: each stored row is read once"
    # Every one of these is a plain selection: all run in the network's one pass.
    assert all(b.fused is not None for b in shared.branches.values())
    for name, (text, role) in QUERIES.items():
        alone = Rows()
        # A streaming query of its own (QueryService), not a network of one branch.
        query = pipeline.queries.register(
            pipeline.queries.admit(text, [role]), CallbackSink(alone), f"alone_{name}"
        )
        query.process_all_available()
        pipeline.queries.stop(query.name)
        assert sinks[name].sorted() == alone.sorted(), name
    assert sinks["cardio"].rows and sinks["nurse_all"].rows
    assert sinks["chosen_by_hidden"].rows == [], "nurses never read ts: no row chosen by it"
    assert len(sinks["nurse_ids"].rows) < len(sinks["cardio"].rows), "rights differ per branch"


def test_a_branch_failing_in_the_one_pass_fails_alone(pipeline, tmp_path) -> None:
    """One user's failing query must not stop the others' branches computed with it."""
    queries = {**QUERIES, "broken": BROKEN}
    shared, sinks = network(
        pipeline, tmp_path / "net", ["cardio", "broken"], queries=queries, sink=lambda _n: Rows()
    )
    assert all(b.fused is not None for b in shared.branches.values())
    shared.start(available_now=True).awaitTermination()
    branches = shared.branches
    assert branches["broken"].failure is not None and branches["cardio"].failure is None
    assert sinks["cardio"].rows and not sinks["broken"].rows
    alone = Rows()
    text, role = QUERIES["cardio"]
    query = pipeline.queries.register(
        pipeline.queries.admit(text, [role]), CallbackSink(alone), "alone_cardio_2"
    )
    query.process_all_available()
    pipeline.queries.stop(query.name)
    assert sinks["cardio"].sorted() == alone.sorted()


def test_a_switched_off_branch_runs_no_spark_job(pipeline, tmp_path) -> None:
    shared, sinks = network(
        pipeline,
        tmp_path / "net",
        ["cardio", "gp", "nurse_ids"],
        lambda n: n != "gp",
        sink=lambda _n: Rows(),
    )
    tracker = pipeline.queries.spark.sparkContext.statusTracker()
    shared.start(available_now=True).awaitTermination()
    assert sinks["gp"].calls == 0 and sinks["cardio"].rows
    assert tracker.getJobIdsForGroup(f"{shared.name}:gp") == []
    assert tracker.getJobIdsForGroup(f"{shared.name}:cardio") != []


def test_only_selections_and_folding_aggregates_over_the_stream_join_a_network(
    pipeline, tmp_path
) -> None:
    """tests/spark/test_aggregate_branches.py runs aggregates that fold."""
    shared, _ = network(pipeline, tmp_path / "net", [])
    for text in (
        "SELECT count(DISTINCT patient_id) FROM HeartRate",
        "SELECT patient_id + 1 AS p FROM HeartRate",
        "SELECT * FROM BodyTemperature",
    ):
        stream = "BodyTemperature" if "BodyTemperature" in text else STREAM
        admitted, sql = secured(pipeline, stream, text, "C")
        with pytest.raises(NotShared):
            shared.add("x", admitted, sql, Rows())


def test_the_server_stores_every_branch_with_one_write(pipeline, tmp_path) -> None:
    """The server's sinks store each batch before delivering it (engine/store/result_store.py).
    In a network every branch's batch is a link into the one write of the fused pass:
    a branch nobody listens to runs no Spark job at all, and what its store reads back
    is exactly what its query alone returns."""
    names = ["cardio", "gp", "nurse_all", "nurse_ids"]
    listening = {"cardio"}
    delivered = {name: Rows() for name in names}

    def storing(name: str) -> StoringSink:
        store = ResultStore(tmp_path / "results" / name)
        return StoringSink(store, delivered[name], wanted=lambda: name in listening)

    shared, sinks = network(pipeline, tmp_path / "net", names, sink=storing)
    tracker = pipeline.queries.spark.sparkContext.statusTracker()
    shared.start(available_now=True).awaitTermination()
    spark = pipeline.queries.spark
    for name in names:
        store = sinks[name].store
        assert store.batches(), name
        for batch in store.batches():
            assert (store.root / f"batch={batch}" / LINK).is_file(), "a link, not a copy"
        stored = Every()
        for batch in store.batches():
            frame = store.stored(batch, spark)
            if frame is not None:
                stored(frame, batch)
        everything = store.everything(spark)
        assert everything is not None and everything.count() == len(stored.rows), name
        text, role = QUERIES[name]
        alone = Every()
        query = pipeline.queries.register(
            pipeline.queries.admit(text, [role]), CallbackSink(alone), f"linked_{name}"
        )
        query.process_all_available()
        pipeline.queries.stop(query.name)
        assert stored.sorted() == alone.sorted(), name
        if name in listening:
            assert delivered[name].sorted() == alone.users().sorted() and alone.rows
            # its rows read from the pass on the driver where it was written small (no
            # job: engine/frames/driver_rows.py), else by a job in its own group
            assert delivered[name].calls
        else:
            assert delivered[name].calls == 0
            assert tracker.getJobIdsForGroup(f"{shared.name}:{name}") == [], name
    assert shared.store.batches(), "the fused pass is written once, in the network's store"
    wide = spark.read.parquet(*shared.store.files(shared.store.batches()[-1]))
    assert "_ss_common__ss_seq" in wide.columns, "what every branch shares is kept once"
    raw = set(pipeline.queries.streams[STREAM].names) | {"tid"}
    words = {c for c in wide.columns if c.startswith(("_ss_taken", "_ss_mask"))}
    assert words == {"_ss_taken0", "_ss_mask0"}, "bits, not a column per branch"
    assert set(wide.columns) - words - raw == {
        c for c in wide.columns if c.startswith("_ss_common_")
    }, "each row once: its raw values, what every branch shares, the bits"
    fused = [b.fused for b in shared.branches.values()]
    assert all(f is not None for f in fused)
    specs = fused_pass(tuple(f for f in fused if f is not None)).specs

    def mask(name: str, column: str) -> tuple:
        view = specs[shared.branches[name].fused.slot]["view"]  # type: ignore[union-attr]
        return next(tuple(v[3:]) for v in view if v[0] == column)

    assert mask("nurse_all", "patient_id") == mask("nurse_ids", "patient_id"), "one role: one bit"
    assert mask("nurse_all", "patient_id") != mask("cardio", "patient_id")


def test_a_batch_delivered_just_before_a_crash_is_stored_by_the_replay(pipeline, tmp_path) -> None:
    """A crash between a branch's delivery and its store's write replays the micro-batch.
    By then nobody may listen (the subscriber has not reconnected) and a switched-off
    branch computes nothing, yet what she got must be stored: else a resuming subscriber
    and every audit see a batch she holds and the store never had (found by bench.crash).
    The crash is rebuilt as it leaves the disk: the network's last micro-batch not
    committed, its branch's position before it, its batch owed and not stored."""
    store = ResultStore(tmp_path / "results" / "cardio")
    delivered = Rows()
    listening = {"cardio"}
    root = tmp_path / "net"

    def storing(name: str) -> StoringSink:
        return StoringSink(store, delivered, wanted=lambda: name in listening)

    shared, _ = network(pipeline, root, ["cardio"], lambda n: n in listening, sink=storing)
    shared.start(available_now=True).awaitTermination()
    assert store.owed() == [] and delivered.rows, "stored batches owe nothing"
    batches = store.batches()
    last = batches[-1]
    spark = pipeline.queries.spark
    lost = Rows()
    lost(store.stored(last, spark), last)
    commits = sorted((root / "checkpoint" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()  # the micro-batch Spark never recorded as done
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    shutil.rmtree(store.root / f"batch={last}")  # killed before the write
    store.owe(last)
    shared.ledger.advance("cardio", batches[-2] if len(batches) > 1 else NOTHING)

    listening.clear()  # restarted: she has not reconnected yet
    again, _ = network(pipeline, root, ["cardio"], lambda n: n in listening, sink=storing)
    calls = delivered.calls
    again.start(available_now=True).awaitTermination()
    assert store.batches()[-1] == last and store.owed() == []
    replayed = Rows()
    replayed(store.stored(last, spark), last)
    assert replayed.sorted() == lost.sorted() and lost.rows
    assert delivered.calls == calls, "stored, not delivered twice"


def test_a_replay_after_some_branches_linked_the_pass_keeps_their_batches(
    pipeline, tmp_path
) -> None:
    """A crash after one branch linked a micro-batch's pass and before another did: the
    replay computes the pass again for the second only. Written over the first pass, it
    would delete the files the first branch's link names, and its stored batch (what a
    resuming subscriber reads) would be gone. The crash is rebuilt as it leaves the disk:
    the last micro-batch not committed, the second branch's position and store before it."""
    root, spark = tmp_path / "net", pipeline.queries.spark
    stores = {n: ResultStore(tmp_path / "results" / n) for n in ("cardio", "gp")}

    def storing(name: str) -> StoringSink:
        return StoringSink(stores[name], Rows())

    network(pipeline, root, list(stores), sink=storing)[0].start(True).awaitTermination()
    last = stores["gp"].batches()[-1]
    before = {}
    for name, store in stores.items():
        before[name] = Rows()
        before[name](store.stored(last, spark), last)
    assert before["cardio"].rows and before["gp"].rows
    commits = sorted((root / "checkpoint" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()  # the micro-batch Spark never recorded as done
    commits[-1].with_name(f".{commits[-1].name}.crc").unlink(missing_ok=True)
    shutil.rmtree(stores["gp"].root / f"batch={last}")  # gp had not linked it yet
    older = [b for b in stores["gp"].batches() if b < last]
    BranchLedger(root / "branches").advance("gp", max(older, default=NOTHING))

    again, _ = network(pipeline, root, list(stores), sink=storing)
    again.start(available_now=True).awaitTermination()
    for name, store in stores.items():
        frame = store.stored(last, spark)
        assert frame is not None, f"{name}'s stored batch {last} is gone"
        after = Rows()
        after(frame, last)
        assert after.sorted() == before[name].sorted(), name
