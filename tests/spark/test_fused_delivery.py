"""Every listening branch of a fused network delivered by one Spark job.

With the server's sinks (a result store, then SecFilter delivery), each listening branch
reads its link back and delivers in a job of its own: N listening users, N jobs. With
``SharedNetwork.deliver_together`` the network delivers them all in one job over its
pass (off by default: it measured no faster). Per-user semantics must not move: each
subscriber gets exactly what her branch's own delivery gives her (her rights, her roles,
her branch's rows and masks), never a row or value of another branch, even when she
subscribes to two queries or to another user's query; a branch nobody receives runs no
job.
"""

from __future__ import annotations

import pytest

from streamshield.engine.delivery import delivery as delivery_module
from streamshield.engine.delivery.collected_rows import (
    arrow_table,
    collect_on_driver,
    collect_rows,
    picked_rows,
)
from streamshield.engine.delivery.delivery import Delivery, _class_plan
from streamshield.engine.sharing import shared_network
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.engine.store.result_store import ResultStore, StoringSink
from tests.spark.hospital_pipeline import (
    WARD_QUERIES,
    hospital_pipeline,
    network_parts,
    secured,
)

pytestmark = pytest.mark.spark

STREAM = "HeartRate"
QUERIES = {
    "cardio": WARD_QUERIES["cardio"],
    "gp": WARD_QUERIES["gp"],
    "nurse": WARD_QUERIES["nurse_all"],
    "off": WARD_QUERIES["nurse_ids"],
    "twin": WARD_QUERIES["cardio"],
}
USERS = {"al": ("C",), "cara": ("C",), "gus": ("GP",), "nina": ("ND",)}
SUBSCRIBED = {
    "cardio": ["al", "gus"],
    "gp": ["gus"],
    "nurse": ["nina"],
    "off": [],
    "twin": ["cara"],
}
"""Gus reads Al's cardiologist query too: with his own roles, so with masks. Cara asks
Al's question with Al's roles: their rows are built once and handed over as one list."""


@pytest.fixture(scope="module")
def pipeline(spark, tmp_path_factory):
    yield from hospital_pipeline(spark, tmp_path_factory.mktemp("fused_delivery"))


def run(pipeline, root, together: bool) -> tuple[SharedNetwork, dict, list]:
    """The four queries as one fused network with the server's sinks, everyone in
    ``SUBSCRIBED`` listening; what each (user, query) got, and the drops reported."""
    engine = pipeline.queries
    got: dict[tuple[str, str], list] = {}
    drops: list[tuple] = []
    parts = network_parts(
        pipeline, STREAM, root, active=lambda n: bool(SUBSCRIBED[n]), name=f"net-{root.parent.name}"
    )
    network = SharedNetwork(parts, fuse=True)
    network.deliver_together = together
    for name, (text, role) in QUERIES.items():
        delivery = Delivery(
            lambda _user: ({STREAM}, set()),
            engine.provenance,
            roles=lambda s: engine.codec.query(USERS[s.user]),
            on_drop=lambda user, _b, count, ids, name=name: drops.append((name, user, count, ids)),
        )
        delivery.query_mask = lambda role=role: engine.codec.query([role])
        for user in SUBSCRIBED[name]:
            rows = got.setdefault((user, name), [])
            delivery.subscribe(user, lambda batch, rows=rows: rows.extend(batch))
        sink = StoringSink(
            ResultStore(root / "results" / name),
            delivery,
            wanted=lambda d=delivery: bool(d.subscriptions),
        )
        admitted, sql = secured(pipeline, STREAM, text, role)
        network.add(name, admitted, sql, sink)
    network.start(available_now=True).awaitTermination()
    return network, got, drops


@pytest.fixture(scope="module")
def each(pipeline, tmp_path_factory) -> tuple[SharedNetwork, dict, list]:
    """The same network delivering each branch in a job of its own (as before)."""
    return run(pipeline, tmp_path_factory.mktemp("each"), together=False)


def test_one_job_delivers_every_listening_branch_as_each_alone(
    pipeline, each, tmp_path, monkeypatch
) -> None:
    sc = pipeline.queries.spark.sparkContext
    tracker = sc.statusTracker()
    apart, alone, alone_drops = each
    jobs: list[list[str]] = []  # each delivery's columns (a Spark job's or the driver's)
    groups: list[str] = []  # the job group each delivery ran in
    plans: list[str] = []  # each class plan built

    def collect(frame, metrics, then):
        jobs.append(then(frame).columns)
        groups.append(sc.getLocalProperty("spark.jobGroup.id"))
        return collect_rows(frame, metrics, then)

    def on_driver(frame, picks, drops):
        got = collect_on_driver(frame, picks, drops)
        if got is not None:  # the pass is on the driver: no job (engine/frames/driver_rows.py)
            jobs.append(frame.select(*picks).columns)
            groups.append(sc.getLocalProperty("spark.jobGroup.id"))
        return got

    def class_plan(*args):
        plans.append(args[3])
        return _class_plan(*args)

    def with_pass(frame):  # the job that computes a small pass delivers too
        groups.append(sc.getLocalProperty("spark.jobGroup.id"))
        return arrow_table(frame)

    def picked(table, first, picks, drops):
        jobs.append(table.column_names[first : first + picks])
        return picked_rows(table, first, picks, drops)

    monkeypatch.setattr(delivery_module, "collect_rows", collect)
    monkeypatch.setattr(delivery_module, "collect_on_driver", on_driver)
    monkeypatch.setattr(delivery_module, "_class_plan", class_plan)
    monkeypatch.setattr(shared_network, "arrow_table", with_pass)
    monkeypatch.setattr(shared_network, "picked_rows", picked)
    one, together, together_drops = run(pipeline, tmp_path / "one", together=True)
    monkeypatch.undo()

    def key(row: dict) -> str:
        return repr(sorted(row.items()))

    for subscription, rows in alone.items():
        assert rows, subscription
        assert sorted(map(key, together[subscription])) == sorted(map(key, rows)), subscription
    assert sorted(together_drops, key=repr) == sorted(alone_drops, key=repr)
    assert any(count for _q, _u, count, _ids in together_drops), "some rows were withheld"
    # Never another branch's rows or columns: Al's cardiologist query has no ts (Gus's
    # does), Gus's has no heart rate; Gus reads fewer of Al's rows than Al (his roles);
    # Nina (ND) never a ts value.
    assert all("ts" not in r for r in together["al", "cardio"]) and together["al", "cardio"]
    assert all("beats_per_min" not in r and "ts" in r for r in together["gus", "gp"])
    assert all(r["patient_id"] >= 120 for r in together["al", "cardio"] + together["gus", "gp"])
    assert len(together["gus", "cardio"]) < len(together["al", "cardio"])
    assert all(r.get("ts") is None for r in together["nina", "nurse"])
    # Cara's branch has Al's rows, built once: one column for both (four, not five, in
    # every job: Al and Cara, Gus on Al's query, Gus's own, Nina's), one list for both.
    assert jobs and {len(columns) for columns in jobs} == {4}, jobs
    assert together["cara", "twin"] is not together["al", "cardio"]  # her own record
    assert sorted(map(key, together["cara", "twin"])) == sorted(map(key, together["al", "cardio"]))
    # A plan per distinct class over each distinct output (Cara's delivery reuses the
    # one Al's built; ``test_delivery`` shows they outlive the batch).
    assert len(plans) == 4, plans
    # One delivery for all of them; none in any branch's own group, none for the off
    # branch (each a Spark job, or none at all when the pass is on the driver).
    assert set(groups) == {f"{one.name}:(delivery)"}, groups
    for name in QUERIES:
        assert tracker.getJobIdsForGroup(f"{one.name}:{name}") == [], name
    assert tracker.getJobIdsForGroup(f"{apart.name}:(delivery)") == []
    assert tracker.getJobIdsForGroup(f"{apart.name}:off") == []
    for name in ("cardio", "gp", "nurse"):  # stored before delivered: a link each
        assert ResultStore(tmp_path / "one" / "results" / name).batches(), name


def test_when_the_one_job_fails_each_branch_delivers_alone(
    pipeline, each, tmp_path, monkeypatch
) -> None:
    """A failing expression of one branch must not cost the others their rows."""
    _, alone, _ = each

    def failing(*_args, **_kwargs) -> None:
        raise RuntimeError("one branch's item failed")

    sc = pipeline.queries.spark.sparkContext
    groups: list[str] = []  # the job group of each delivery (a job's or the driver's)

    def grouped(collect):
        def recorded(*args):
            got = collect(*args)
            if got is not None:
                groups.append(sc.getLocalProperty("spark.jobGroup.id"))
            return got

        return recorded

    monkeypatch.setattr(shared_network, "deliver_together", failing)
    monkeypatch.setattr(shared_network, "arrow_table", failing)  # the pass's own job
    monkeypatch.setattr(delivery_module, "collect_rows", grouped(collect_rows))
    monkeypatch.setattr(delivery_module, "collect_on_driver", grouped(collect_on_driver))
    network, got, _ = run(pipeline, tmp_path / "one", together=True)
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in alone.items()}
    assert f"{network.name}:cardio" in groups, "delivered alone"


def test_a_small_stored_batch_is_passed_from_the_driver(pipeline, each) -> None:
    """The network sizes the stored ingest batches it reads by their paths in the store:
    the store lists bare file names, and one sized as a bare name (not found) counted as
    large, so no pass was ever written from the driver (engine/store/small_writes.py)."""
    network = each[0]
    newest = max(pipeline.queries.labelled.markers())
    assert any(pipeline.queries.labelled.files(STREAM, i) for i in range(newest + 1))
    assert network._small(0, newest)
    passes = [d for d in (network.root / "results").glob("batch=*") if d.is_dir()]
    assert passes, "the network stored no pass"
    for folder in passes:  # the driver writes one file and none of Spark's markers
        assert len(list(folder.glob("*.parquet"))) == 1
        assert not list(folder.glob("_SUCCESS"))


@pytest.mark.parametrize("budget", [0, 10**9], ids=["job", "driver"])
def test_the_pass_is_delivered_by_a_job_past_the_driver_work_bound(
    pipeline, each, tmp_path, monkeypatch, budget
) -> None:
    """A local relation's projections are computed interpreted while Spark plans (their
    cost a row growing with the square of the columns: 16 branches' 390 columns cost
    ~3 ms a row), so a pass whose rows times branches squared pass ``DRIVER_WORK`` is
    delivered by a Spark job over its stored files, one within it from the driver; the
    rows are the same either way."""
    _, alone, alone_drops = each
    ways: list[str] = []

    def collect(frame, metrics, then):
        ways.append("job")
        return collect_rows(frame, metrics, then)

    def on_driver(frame, picks, drops):
        got = collect_on_driver(frame, picks, drops)
        if got is not None:
            ways.append("driver")
        return got

    monkeypatch.setattr(shared_network, "DRIVER_WORK", budget)
    # as when the pass's own job cannot deliver (:meth:`SharedNetwork._pass_delivered`)
    monkeypatch.setattr(SharedNetwork, "_pass_delivered", lambda *_args: None)
    monkeypatch.setattr(delivery_module, "collect_rows", collect)
    monkeypatch.setattr(delivery_module, "collect_on_driver", on_driver)
    _, together, together_drops = run(pipeline, tmp_path / "one", together=True)
    monkeypatch.undo()
    assert set(ways) == {"job" if budget == 0 else "driver"}, ways

    def key(row: dict) -> str:
        return repr(sorted(row.items()))

    for subscription, rows in alone.items():
        assert sorted(map(key, together[subscription])) == sorted(map(key, rows)), subscription
    assert sorted(together_drops, key=repr) == sorted(alone_drops, key=repr)
