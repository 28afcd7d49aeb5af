"""The result store: a stateful query runs whether or not anyone listens, and a replayed
batch is stored once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import PySparkException

from streamshield.engine.queries.streaming_queries import safe_error
from streamshield.engine.store.result_store import ResultStore, StoringSink

pytestmark = pytest.mark.spark


def _land(directory: Path, n: int, keys: list[int]) -> None:
    lines = "\n".join(json.dumps({"k": k}) for k in keys)
    (directory / f"part-{n:04d}.json").write_text(lines + "\n")


def _aggregate(spark, tmp_path: Path, sink, name: str):
    source = tmp_path / "in"
    source.mkdir()
    frame = spark.readStream.schema("k bigint").json(str(source))
    counts = frame.groupBy("k").count()
    query = (
        counts.writeStream.outputMode("update")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .queryName(name)
        .foreachBatch(sink)
        .start()
    )
    return source, query


def test_an_unconsumed_stateful_batch_kills_the_query(spark, tmp_path) -> None:
    """Why the store exists: Spark refuses to commit a stateful batch nobody executed."""
    source, query = _aggregate(spark, tmp_path, lambda frame, batch: None, "unconsumed")
    try:
        _land(source, 1, [1, 2, 1])
        with pytest.raises(PySparkException):
            query.processAllAvailable()
        assert safe_error(query.exception()) == "STATE_STORE_COMMIT_VALIDATION_FAILED"
    finally:
        query.stop()


def test_a_stateful_query_nobody_listens_to_keeps_running(spark, tmp_path) -> None:
    store = ResultStore(tmp_path / "results", keep=2)
    delivered: list[int] = []
    listening = False
    sink = StoringSink(
        store, lambda frame, batch: delivered.append(batch), wanted=lambda: listening
    )
    source, query = _aggregate(spark, tmp_path, sink, "stored")
    try:
        for n, keys in enumerate(([1, 2, 1], [2, 3], [1]), start=1):
            if n == 3:
                listening = True
            _land(source, n, keys)
            query.processAllAvailable()
        assert query.isActive
        assert store.batches() == [1, 2]  # the newest two of batches 0, 1, 2
        assert delivered == [2]  # only what was computed while someone listened
        rows = spark.read.parquet(str(store.root)).collect()
        latest = {r["k"]: r["count"] for r in sorted(rows, key=lambda r: r["batch"])}
        assert latest == {1: 3, 2: 2, 3: 1}
    finally:
        query.stop()


def test_a_replayed_batch_replaces_its_copy(spark, tmp_path) -> None:
    store = ResultStore(tmp_path / "results")
    frame = spark.createDataFrame([(1,), (2,)], "k bigint")
    for _ in range(2):
        stored = store.write(frame, 7)
        assert sorted(r["k"] for r in stored.collect()) == [1, 2]
    assert store.batches() == [7]
    assert spark.read.parquet(str(store.root)).count() == 2
    empty = store.write(frame.limit(0), 8)
    assert empty.count() == 0 and store.batches() == [7, 8]


def test_a_replayed_batch_is_never_served_from_a_readers_cache(spark, tmp_path) -> None:
    """A subscriber resuming from batch 7 has the stored batch cached while the query
    replays batch 7 (the crash harness's failure: the replay's delivery took the
    reader's cache, whose files the replay had removed). Spark matches cached plans by
    equality, so each write of a batch must be a plan of its own."""
    store = ResultStore(tmp_path / "results")
    old = store.write(spark.createDataFrame([(1,), (2,)], "k bigint"), 7)
    resuming = store.stored(7, spark)
    assert resuming is not None
    resuming = resuming.persist()
    try:
        assert resuming.count() == 2
        replayed = store.write(spark.createDataFrame([(3,)], "k bigint"), 7).persist()
        try:
            assert [r["k"] for r in replayed.collect()] == [3]
        finally:
            replayed.unpersist()
    finally:
        resuming.unpersist()
    assert old.columns == ["k"]


def test_everything_reads_stored_and_linked_batches_with_their_ids(spark, tmp_path) -> None:
    """A branch of a shared network stores links into the network's one write: read
    back, a link is its column's rows, with the id of its batch."""
    network = ResultStore(tmp_path / "network")
    wide = spark.sql(
        "SELECT IF(k % 2 = 0, named_struct('k', k), NULL) AS even, "
        "named_struct('k', k) AS every FROM VALUES (1), (2), (4) AS t(k)"
    )
    network.write(wide, 5)
    branch = ResultStore(tmp_path / "branch")
    branch.write(spark.createDataFrame([(9,)], "k bigint"), 4)
    branch.link(5, network.files(5), "even")
    rows = sorted((r["batch"], r["k"]) for r in branch.everything(spark).collect())
    assert rows == [(4, 9), (5, 2), (5, 4)]
    assert sorted(r["k"] for r in branch.stored(5, spark).collect()) == [2, 4]
    network.clear()  # the network's store pruned: the link reads as a pruned batch
    assert branch.stored(5, spark) is None
    assert [(r["batch"], r["k"]) for r in branch.everything(spark).collect()] == [(4, 9)]


def test_a_listener_gets_the_rows_the_store_keeps_even_from_a_random_query(spark, tmp_path) -> None:
    """Delivery comes before the write and both read one cached batch: a query calling
    ``uuid()`` (users may) delivers exactly what the store keeps, computed once."""
    store = ResultStore(tmp_path / "results")
    delivered: dict[int, list[tuple]] = {}

    def deliver(frame, batch: int) -> None:
        delivered[batch] = sorted((r["k"], r["u"]) for r in frame.collect())

    source = tmp_path / "in"
    source.mkdir()
    query = (
        spark.readStream.schema("k bigint")
        .json(str(source))
        .selectExpr("k", "uuid() AS u")
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(StoringSink(store, deliver))
        .start()
    )
    try:
        _land(source, 1, [1, 2, 3])
        query.processAllAvailable()
    finally:
        query.stop()
    assert list(delivered) == store.batches() == [0]
    kept = sorted((r["k"], r["u"]) for r in store.stored(0, spark).collect())
    assert kept == delivered[0] and [k for k, _ in kept] == [1, 2, 3]


def _linked(store: ResultStore, batch_id: int, files: list[str]) -> None:
    store.link(batch_id, files, "q", {"columns": []})


def test_skipped_ids_are_not_a_gap_and_pruned_ones_are(tmp_path) -> None:
    """A network branch stores each micro-batch under the newest ingest id it covers (and
    nothing while its switch is off): ids skip without anything being lost. CI once saw
    a resumed subscriber told that batch 3 was pruned when batch 4 had covered it."""
    network = tmp_path / "network.parquet"
    network.write_bytes(b"")
    store = ResultStore(tmp_path / "results", keep=3)
    for batch_id in (2, 4, 7):
        _linked(store, batch_id, [str(network)])
    assert store.since(-1) == (None, [2, 4, 7])
    assert store.since(2) == (None, [4, 7])
    _linked(store, 9, [str(network)])  # batch 2 goes
    assert store.since(-1) == ((0, 2), [4, 7, 9])
    assert store.since(1) == ((2, 2), [4, 7, 9])
    assert store.since(3) == (None, [4, 7, 9])
    assert ResultStore(store.root, keep=3).since(3) == (None, [4, 7, 9])  # kept on disk


def test_a_link_whose_network_files_were_pruned_is_lost(tmp_path) -> None:
    store = ResultStore(tmp_path / "results")
    kept, gone = tmp_path / "kept.parquet", tmp_path / "gone.parquet"
    kept.write_bytes(b"")
    _linked(store, 1, [str(kept)])
    _linked(store, 2, [str(gone)])
    assert not store.lost(1) and store.lost(2)


def test_a_store_written_before_pruning_was_recorded_reads_as_pruned_when_full(
    tmp_path,
) -> None:
    store = ResultStore(tmp_path / "results", keep=2)
    for batch_id in (5, 6):
        (store.root / f"batch={batch_id}").mkdir(parents=True)
    assert store.since(1) == ((2, 4), [5, 6])
    assert ResultStore(store.root, keep=3).since(1) == (None, [5, 6])
