"""Branches of a shared network join, leave, rejoin, fail and replay without losing or
repeating a row.

The network is the one CqlService runs for every selection over HeartRate. Each query's
rows, summed over everything its branch was handed, must equal what the same query
registered as a streaming query of its own returns over the whole stream: a late joiner
gets the history, a branch that left gets exactly what it missed, a replayed micro-batch
nothing twice, and one failing branch stops alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from streamshield.engine.queries.streaming_queries import CallbackSink, QueryFailed
from streamshield.engine.sharing.branched_network import NetworkParts
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.engine.store.result_store import ResultStore, StoringSink
from streamshield.examples import hospital
from streamshield.lang.rewrite_rules import secure
from tests.spark.hospital_pipeline import (
    HEART_QUERIES,
    Rows,
    alone,
    hospital_pipeline,
    land,
    parts,
    submit,
)

pytestmark = pytest.mark.spark


@pytest.fixture
def pipeline(spark, tmp_path):
    """The stream's scan as a file-source streaming query (the shared scan's tests below
    are about that query; tests/spark/test_driven_scan.py has the scan driven by ingest's
    commits, the ``driven_scan`` setting)."""
    for running in hospital_pipeline(spark, tmp_path, []):
        running.cql.tuning = replace(running.cql.tuning, driven_scan=False)
        yield running


def networks(pipeline) -> list[str]:
    """The streaming queries of the running networks (each runs in its level processor's
    session, not the test's; a stream's networks share its scan)."""
    handles = [n.handle for n in pipeline.cql.networks.values() if n.handle is not None]
    return [h.name for h in handles if h.isActive]


def test_join_leave_and_rejoin_give_every_row_exactly_once(pipeline, spark) -> None:
    first, second, third = parts()
    cardio, nurse = Rows(), Rows()
    land(pipeline, first)
    submit(pipeline, "nurse", nurse).process_all_available()
    land(pipeline, second)
    joined = submit(pipeline, "cardio", cardio)  # joins a running network: catches up
    joined.process_all_available()
    assert networks(pipeline) == ["scan-HeartRate"], "both queries run in one network"
    assert cardio.rows, "the late joiner got the stream's history"
    pipeline.cql.stop("cardio")  # leaves; the network goes on for the nurse
    seen = len(cardio.rows)
    land(pipeline, third)
    pipeline.queries.queries["nurse"].process_all_available()
    assert len(cardio.rows) == seen, "a branch that left is handed nothing"
    submit(pipeline, "cardio", cardio).process_all_available()  # rejoins: what it missed
    assert len(cardio.rows) > seen, "it got the rows stored while it was away"
    assert cardio.sorted() == alone(pipeline, "cardio")
    assert nurse.sorted() == alone(pipeline, "nurse")


def test_a_failing_branch_stops_alone(pipeline) -> None:
    land(pipeline, hospital.elements())

    def broken(_frame, _batch_id) -> None:
        raise RuntimeError("the sink is broken")

    cardio = Rows()
    healthy = submit(pipeline, "cardio", cardio)
    failing = submit(pipeline, "nurse", broken)
    with pytest.raises((QueryFailed, RuntimeError)):
        failing.process_all_available()
    healthy.process_all_available()
    assert not failing.active and failing.error() is not None
    assert healthy.active
    assert cardio.sorted() == alone(pipeline, "cardio")


def test_a_replayed_micro_batch_hands_nothing_twice(pipeline) -> None:
    first, second, _ = parts()
    land(pipeline, first)
    cardio = Rows()
    submit(pipeline, "cardio", cardio).process_all_available()
    land(pipeline, second)
    pipeline.queries.queries["cardio"].process_all_available()
    commits = pipeline.cql.networks[("HeartRate", "unlevelled")].root / "checkpoint" / "commits"
    pipeline.cql.stop("cardio")  # the last branch: the network stops
    assert ("HeartRate", "unlevelled") not in pipeline.cql.networks
    last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()  # as if the process died before Spark recorded the batch as done
    (commits / f".{last.name}.crc").unlink(missing_ok=True)
    handed = list(cardio.rows)
    submit(pipeline, "cardio", cardio).process_all_available()  # Spark replays that batch
    assert cardio.rows == handed, "the replay handed nothing again"
    assert cardio.sorted() == alone(pipeline, "cardio")


def test_an_owed_batch_is_stored_again_under_its_own_id(pipeline, tmp_path) -> None:
    """A branch's output is handed over under an ingest batch's id N. Killed after the
    delivery and before the store's write, N is owed, and the restarted network's first
    micro-batch reads N together with the batch after it while nobody listens: N must be
    stored alone, under N (a resuming subscriber who had N skips it; folded into a later
    id she would be handed its rows twice), and the batch after it, which nobody may
    receive, is not computed. The crash is rebuilt as it leaves the disk: a fresh
    checkpoint (no micro-batch ran), the position before N, N owed."""
    first, second, third = parts()
    land(pipeline, first)
    before = alone(pipeline, "cardio", "_before")
    land(pipeline, second)
    with_n = alone(pipeline, "cardio", "_with_n")
    land(pipeline, third)
    ids = pipeline.queries.labelled.markers()
    assert len(ids) == 3
    engine = pipeline.queries
    store, delivered = ResultStore(tmp_path / "results"), Rows()
    shared = SharedNetwork(
        NetworkParts(
            engine.spark,
            engine.labelled,
            engine.streams["HeartRate"],
            engine.codec,
            engine.provenance,
            tmp_path / "net",
            lambda _name: False,  # restarted: she has not reconnected, the switch is closed
        )
    )
    shared.ledger.advance("cardio", ids[0])
    store.owe(ids[1])
    text, role = HEART_QUERIES["cardio"]
    admitted = engine.admit(text, [role])

    def sql(view: str) -> str:
        return secure(admitted.checked.tree, engine.rewrite({"HeartRate": view}))

    sink = StoringSink(store, delivered, wanted=lambda: False)
    shared.add("cardio", admitted, sql, sink)
    shared.start(available_now=True).awaitTermination()
    assert store.batches() == [ids[1]] and store.owed() == [], "N alone, the rest not computed"
    assert delivered.calls == 0 and shared.ledger.covered("cardio") == ids[2]
    stored = Rows()
    stored(store.stored(ids[1], engine.spark), ids[1])
    expected = Counter(with_n) - Counter(before)
    assert stored.rows and Counter(stored.rows) == expected, "exactly N's rows"


WINDOW = "SELECT count(*) AS n FROM HeartRate [ROWS 2]"


def test_selections_and_windows_of_one_stream_share_one_scan(pipeline) -> None:
    """One streaming query reads HeartRate for its selection network and its window
    network (engine/sharing/stream_scan.py): each still gets every batch once, a network joining
    the running scan catches up, and the scan stops with the last of them."""
    first, second, third = parts()
    land(pipeline, first)
    nurse, counts = Rows(), Rows()
    submit(pipeline, "nurse", nurse).process_all_available()
    land(pipeline, second)
    window = pipeline.cql.submit(
        pipeline.cql.admit(WINDOW, ["C"]), CallbackSink(counts), name="counts"
    )
    window.process_all_available()  # joins the running scan: catches up with the history
    key = ("HeartRate", "unlevelled")
    selections, windows = pipeline.cql.networks[key], pipeline.cql.window_networks[key]
    assert selections.scan is windows.scan is pipeline.cql.scans[key]
    assert selections.handle is windows.handle, "one streaming query for both"
    session = selections.spark
    reading = [q.name for q in session.streams.active if "HeartRate" in (q.name or "")]
    assert reading == ["scan-HeartRate"], reading
    assert counts.rows, "the window network had the history"

    pipeline.cql.stop("nurse")  # the selection network stops; the scan goes on
    assert key not in pipeline.cql.networks and windows.handle.isActive
    handed = len(counts.rows)
    land(pipeline, third)
    window.process_all_available()
    assert len(counts.rows) > handed, "the window network still gets the stream's batches"
    assert nurse.sorted() == alone(pipeline, "nurse"), "the selection got every row once"
    pipeline.cql.stop("counts")
    assert pipeline.cql.scans == {} and not windows.handle.isActive, "stopped with the last"
    pipeline.cql.tuning = replace(
        pipeline.cql.tuning, share_windows=False
    )  # the same window as a streaming query of its own
    own = Rows()
    pipeline.cql.submit(
        pipeline.cql.admit(WINDOW, ["C"]), CallbackSink(own), name="own"
    ).process_all_available()
    assert own.rows[-1] == counts.rows[-1], "the same window over the whole stream"


def test_a_selection_joining_a_running_scan_gets_what_landed_just_before(pipeline) -> None:
    """While the stream's scan runs for a window, each part lands and a new selection
    joins at once: the scan may be handing that part out as it joins, and the selection
    must still get every row once (StreamScan.joining)."""
    counts = Rows()
    pipeline.cql.submit(pipeline.cql.admit(WINDOW, ["C"]), CallbackSink(counts), name="counts")
    for i, part in enumerate(parts()):
        land(pipeline, part)
        rows = Rows()
        text, role = HEART_QUERIES["nurse"]
        query = pipeline.cql.submit(
            pipeline.cql.admit(text, [role]), CallbackSink(rows), name=f"nurse{i}"
        )
        query.process_all_available()
        assert rows.sorted() == alone(pipeline, "nurse", str(i)), f"joined after part {i}"
