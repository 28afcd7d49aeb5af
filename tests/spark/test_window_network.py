"""Windowed queries over one stream as one window network: windows and
aggregates are node kinds of a shared network.

Users with different rights watch HeartRate through ``[RANGE 30]`` (and one ``[RANGE 1]``
reading the same node), ``[ROWS 2]`` (also counted: an aggregate branch) and ``[NOW]``
windows, some with WHEREs that share selections above their node. The stream arrives in
two parts; in between the network's process stops and starts again (its RANGE node is rebuilt from
the stored history, its ROWS nodes resume from their stored state), and one query joins
late. Each branch must return exactly what its query returns as a window query of its
own (engine/queries/window_query.py) over the same two parts, a cardiologist and a general
physician sharing one RANGE node must get different rows, and a branch whose switch is
off must run no Spark job.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

import pytest

from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.queries.window_query import WindowQuery
from streamshield.engine.sharing import node_members
from streamshield.engine.sharing.shared_selections import selected_frames
from streamshield.engine.sharing.window_network import WindowNetwork
from streamshield.examples import hospital
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, SpElement, TupleElement
from tests.spark.hospital_pipeline import Rows, hospital_pipeline, land, network_parts, secured

pytestmark = pytest.mark.spark

STREAM = "HeartRate"
QUERIES = {  # name -> (text, role)
    "c_range": ("SELECT patient_id, beats_per_min, ts FROM HeartRate [RANGE 30]", "C"),
    "gp_range": ("SELECT patient_id, beats_per_min, ts FROM HeartRate [RANGE 30]", "GP"),
    "c_rows": ("SELECT patient_id, ts FROM HeartRate [ROWS 2]", "C"),
    "c_rows_count": ("SELECT count(*) AS n FROM HeartRate [ROWS 2]", "C"),
    "gp_rows": ("SELECT patient_id, ts FROM HeartRate [ROWS 2]", "GP"),
    "gp_now_late": ("SELECT patient_id, ts FROM HeartRate [NOW]", "GP"),
    "off": ("SELECT beats_per_min FROM HeartRate [RANGE 30]", "C"),
    # a narrower RANGE reads the same node, cut at its own width (and its own clock)
    "gp_range_1": ("SELECT patient_id, ts FROM HeartRate [RANGE 1]", "GP"),
    # CW Figs. 3-5 over the RANGE node: all three share ``beats_per_min >= 71``, the last
    # two all of ``beats_per_min >= 71 AND ts > 0``; nurses read no ts (it is NULL in
    # their view), so the shared filter's raw ``ts > 0`` must not choose a row for them
    "c_high": (
        "SELECT patient_id, beats_per_min, ts FROM HeartRate [RANGE 30] "
        "WHERE beats_per_min >= 71 AND patient_id = 120",
        "C",
    ),
    "gp_high": (
        "SELECT patient_id, ts FROM HeartRate [RANGE 30] WHERE beats_per_min >= 71 AND ts > 0",
        "GP",
    ),
    "nd_high": (
        "SELECT patient_id FROM HeartRate [RANGE 30] WHERE ts > 0 AND beats_per_min >= 71",
        "ND",
    ),
    # and over C's ROWS node: an aggregate and a selection share their WHERE
    "c_rows_high": ("SELECT patient_id FROM HeartRate [ROWS 2] WHERE beats_per_min >= 71", "C"),
    "c_rows_high_count": (
        "SELECT count(*) AS n FROM HeartRate [ROWS 2] WHERE beats_per_min >= 71",
        "C",
    ),
    # ROWS of other sizes read C's one ROWS node, each cutting its own latest rows; the
    # larger one joins late, so the node (kept at 2 until then) is rebuilt at 5
    "c_rows_1": ("SELECT patient_id, ts FROM HeartRate [ROWS 1]", "C"),
    "c_rows_5_late": ("SELECT patient_id, ts FROM HeartRate [ROWS 5]", "C"),
}
WARD_Z = """
INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C;
INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 133], SRP = rbac:GP
"""
LATE = {"gp_now_late", "c_rows_5_late"}
OFF = {"off"}


@pytest.fixture(scope="module")
def parts(spark, tmp_path_factory):
    """A pipeline with the first part of the hospital's elements ingested, and a function
    that lands and ingests the rest (HeartRate: policy 1 and two minutes, then the rest)."""
    elements = hospital.elements()
    for pipeline in hospital_pipeline(spark, tmp_path_factory.mktemp("windows"), elements[:9]):
        # once, whichever test asks first
        rest = functools.partial(land, pipeline, elements[9:] + _hidden_newer())
        yield pipeline, functools.cache(rest)


def _hidden_newer() -> list:
    """A channel where GP's newest tuple is 50 s older than one only C reads: had the
    shared RANGE 30 node evicted by everyone's newest time, GP would lose hers."""
    channel = Channel(STREAM, "ward-Z")
    policy = parse_policy(WARD_Z, ts=500)
    out: list = [SpElement(channel, sp.sn, sp) for sp in policy.sps]
    for seq, (patient, ts) in enumerate(((120, 950), (140, 1000)), start=len(out) + 1):
        values = {"patient_id": patient, "beats_per_min": 80.0, "ts": ts}
        out.append(TupleElement(channel, seq, patient, 500, policy.csn, values))
    return out


def _alone(pipeline: Pipeline, root, name: str, sink: Rows) -> WindowQuery:
    """The query as a window query of its own (a streaming query, its own state)."""
    text, role = QUERIES[name]
    admitted, sql = secured(pipeline, STREAM, text, role)
    engine = pipeline.queries
    return WindowQuery(
        engine.spark,
        engine.labelled,
        engine.streams[STREAM],
        engine.codec,
        admitted.roles,
        admitted.shape.windows[0][2],
        sql,
        admitted.shape.aggregate,
        sink,
        root / name,
        f"alone_{name}",
        engine.provenance,
    )


def _network(
    pipeline: Pipeline, root, names, sinks: dict[str, Rows], active: Callable[[str], bool]
) -> WindowNetwork:
    network = WindowNetwork(
        network_parts(pipeline, STREAM, root, active=active, name=f"windows-{root.name}")
    )
    for name in names:
        admitted, sql = secured(pipeline, STREAM, *QUERIES[name])
        network.add(name, admitted, sql, sinks[name])
    return network


def test_branches_over_shared_windows_equal_their_queries_alone(
    parts, tmp_path, monkeypatch
) -> None:
    pipeline, rest = parts
    shared_selects: list[int] = []

    def counting(network, names, leaves, stream, cached):
        before = len(cached)
        out = selected_frames(network, names, leaves, stream, cached)
        shared_selects.append(len(cached) - before)
        return out

    monkeypatch.setattr("streamshield.engine.sharing.window_network.selected_frames", counting)
    spark = pipeline.queries.spark
    active = {name for name in QUERIES if name not in OFF}
    alone = {name: Rows() for name in QUERIES if name not in OFF}
    shared = {name: Rows() for name in QUERIES}
    tracker = spark.sparkContext.statusTracker()
    net_root = tmp_path / "net"

    for stage in (1, 2):
        handles = [  # side by side: each is small, its cost mostly a streaming query's
            _alone(pipeline, tmp_path / "alone", name, sink).start(True)
            for name, sink in alone.items()
        ]
        for handle in handles:
            handle.awaitTermination()
        names = [n for n in QUERIES if stage == 2 or n not in LATE]
        # a new network object each time: the process restarted, memory is gone
        network = _network(pipeline, net_root, names, shared, lambda n: n in active)
        network.start(available_now=True).awaitTermination()
        if stage == 1:
            nodes = network.nodes()
            rest()

    assert all(b.failure is None for b in network.branches.values())
    for name, sink in alone.items():
        assert shared[name].sorted() == sink.sorted(), name
    # one RANGE node for both rights, a ROWS node per visibility (the count shares C's)
    assert sorted(sorted(members) for members in nodes.values()) == [
        ["c_high", "c_range", "gp_high", "gp_range", "gp_range_1", "nd_high", "off"],
        ["c_rows", "c_rows_1", "c_rows_count", "c_rows_high", "c_rows_high_count"],
        ["gp_rows"],
    ]
    assert len(list((net_root / "nodes").iterdir())) == 3, "one state per window node"
    c, gp = shared["c_range"].rows, shared["gp_range"].rows
    assert gp and len(gp) < len(c), "rights differ per branch over one shared window"
    assert {r[0] for r in gp} <= {120, 125}, "GP reads patients 120-133 only"
    assert (120, 80.0, 950) in gp, "a hidden newer tuple evicts none of GP's"
    assert (120, 80.0, 950) not in c, "C's own clock (1000) evicted it from C's window"
    assert shared["gp_now_late"].rows, "a late branch catches up with the history"
    assert len(network.nodes()) == 4, "RANGE, GP's ROWS, NOW, and one for C's ROWS 1, 2, 5"
    assert shared["c_rows_1"].rows and len(shared["c_rows_1"].rows) < len(shared["c_rows"].rows)
    assert len(shared["c_rows_5_late"].rows) > len(shared["c_rows"].rows)
    # per micro-batch and node: RANGE two shared selects, C's ROWS node one, others none
    assert {1, 2} <= set(shared_selects) <= {0, 1, 2}
    assert shared["c_high"].rows and shared["gp_high"].rows
    assert {r[0] for r in shared["c_high"].rows} == {120}
    assert shared["nd_high"].rows == [], "nurses never read ts: no row chosen by it"
    assert shared["c_rows_high_count"].rows and shared["c_rows_high"].rows
    narrow = shared["gp_range_1"].rows
    assert narrow and len(narrow) < len(gp), "RANGE 1 keeps fewer of GP's rows than 30"
    assert shared["off"].calls == 0
    assert tracker.getJobIdsForGroup(f"{network.name}:off") == []
    assert tracker.getJobIdsForGroup(f"{network.name}:c_range") != []


def test_the_query_interface_runs_window_queries_as_branches(parts) -> None:
    pipeline, rest = parts
    rest()  # landed already when the module's first test ran
    cql = pipeline.cql
    first, second = Rows(), Rows()
    one = cql.submit(
        cql.admit("SELECT patient_id FROM HeartRate [ROWS 2]", ["C"]), CallbackSink(first)
    )
    one.process_all_available()
    two = cql.submit(
        cql.admit("SELECT count(*) AS n FROM HeartRate [ROWS 2]", ["C"]), CallbackSink(second)
    )
    two.process_all_available()
    (network,) = cql.window_networks.values()
    assert set(network.branches) == {one.name, two.name}
    assert len(network.nodes()) == 1, "one window node for both"
    assert first.rows and second.rows, "the second joined late and caught up"
    assert second.rows[-1] == (2,), "ROWS 2 of HeartRate: 2 in all, not 2 per channel"
    sliding = cql.submit(
        cql.admit("SELECT count(*) AS n FROM HeartRate [RANGE 60 SLIDE 60]", ["C"]),
        CallbackSink(Rows()),
    )
    assert sliding.name not in cql.window_branches, "an aggregate over a sliding window"
    assert sliding.name in cql.branches, "... folds as a branch of the selection network"
    for query in (one, two, sliding):
        cql.stop(query.name)
    assert cql.window_networks == {}, "the network stops with its last branch"
    nodes = cql.queries.root / WindowNetwork.FOLDER / STREAM / "nodes"
    (node,) = [d for d in nodes.iterdir() if one.name in (node_members.members(d) or ())]
    assert node_members.members(node) == {one.name, two.name}, "stopped, still registered"
    cql.forget(one.name)
    assert (node / "kept.json").exists(), "the count is still registered: the node stays"
    cql.forget(two.name)
    assert not node.exists(), "removed for good with the last query it served"
    counts = Rows()
    aggregate = "SELECT patient_id, count(*) AS n FROM HeartRate GROUP BY patient_id"
    assert cql.tuning.share_aggregates, "on by default"
    cql.tuning = replace(
        cql.tuning, share_aggregates=False
    )  # Spark's streaming aggregation, a query of its own
    try:
        alone = cql.submit(cql.admit(aggregate, ["C"]), CallbackSink(Rows()))
        assert cql.networks == {}, "switched off, an aggregate runs on its own"
    finally:
        cql.tuning = replace(cql.tuning, share_aggregates=True)
    folded = cql.submit(cql.admit(aggregate, ["C"]), CallbackSink(counts))  # a folding branch
    folded.process_all_available()
    ((network),) = cql.networks.values()
    assert network.branches[folded.name].folded is not None and counts.rows
    for query in (alone, folded):
        cql.stop(query.name)
