"""Two levels' query processors as two Spark applications on a loopback standalone
cluster (paper 2, section 6).

The trusted ingest runs here (local mode, this process) and stamps every MessageLog
tuple with its channel's level. A query at ``[1, B]`` and one at ``[2, ⊥]`` then each
start their level's own application (engine/levels/level_application.py): its own driver
process and JVM, its executor from the worker, its own directory. Checked: the master
lists two applications, each query's stored batches hold exactly what its level
dominates (the pure lattice is the oracle), the server-side delivery that follows a
result store hands each recipient what her own level allows, an application refuses
storage outside its directory and writes nothing into the other's, and an
application stops with its last query while the other runs on.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from streamshield.catalog import SqliteCatalog, StreamDefinition
from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.levels.level_processor import LevelStorageError
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.store.result_store import ResultFollower, ResultStore
from streamshield.lang.query_check import QueryRejected
from tests.cluster.standalone import standalone_cluster
from tests.spark.test_level_queries import (
    ASSIGNMENT,
    AUDIT,
    LOG,
    LOG_TUPLES,
    NOTICES,
    ROLES,
    at,
    elements,
    readable,
)

pytestmark = pytest.mark.spark
APPLICATION_CONF = {  # two applications side by side on the worker's two cores
    "spark.cores.max": "1",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    "spark.driver.memory": "512m",
}
SELECT = "SELECT id, msgType FROM MessageLog"
SP = "INSERT SP INTO STREAM MessageLog LET DDP = STREAMS: MessageLog, SRP = rbac:AUD"


def ingested(spark, root: Path) -> Pipeline:
    """The trusted ingest's labelled store, every tuple at its channel's level."""
    catalog = SqliteCatalog(root / "catalog.db")
    for name in (LOG, NOTICES, AUDIT):
        catalog.register_stream(
            StreamDefinition(name, (("id", "bigint"), ("msgType", "string")), "id")
        )
    catalog.set_roles(ROLES, [])
    pipeline = Pipeline(spark, catalog, root, levels=lambda: ASSIGNMENT)
    assert not pipeline.landing.append(elements()).rejected
    pipeline.ingest_available()
    return pipeline


def master_applications(log: Path) -> dict[str, str]:
    """The master's own JSON status (its web UI, found in its log): active app id -> name."""
    url = re.search(r"MasterWebUI.*started at (http://\S+)", log.read_text()).group(1)
    with urllib.request.urlopen(f"{url}/json/", timeout=30) as answer:
        status = json.load(answer)
    return {app["id"]: app["name"] for app in status["activeapps"]}


def test_two_levels_run_as_two_applications_each_reading_what_it_dominates(spark, tmp_path) -> None:
    pipeline = ingested(spark, tmp_path / "root")
    queries = pipeline.queries
    high, low = at("[1, B]"), at("[2, _]")
    with standalone_cluster(tmp_path / "cluster", cores=2, memory="2g") as master:
        apps = LevelApplications(
            queries.hierarchy,
            queries.streams,
            queries.root,
            queries.labelled.root,
            master,
            APPLICATION_CONF,
        )
        try:
            one = apps.acquire(high, "hi")  # both drivers start side by side
            two = apps.acquire(low, "lo")
            one.submit("hi", SELECT, ROLES)
            two.submit("lo", SELECT, ROLES)
            one.process_all_available("hi")
            two.process_all_available("lo")
            first, second = one.status(), two.status()

            # Two applications of the standalone master, each with its own executor.
            assert first["application"] != second["application"]
            assert first["pid"] != second["pid"]
            assert first["master"] == second["master"] == master
            assert first["executors"] and second["executors"]
            listed = master_applications(tmp_path / "cluster" / "master.log")
            assert listed[first["application"]] == f"streamshield-{one.name}"
            assert listed[second["application"]] == f"streamshield-{two.name}"
            worker = tmp_path / "cluster" / "worker"
            assert (worker / first["application"]).is_dir()
            assert (worker / second["application"]).is_dir()
            assert first["local_dir"] == str(one.root / "spark-local")

            # Each reads exactly what its level dominates.
            for app, name, level in ((one, "hi", high), (two, "lo", low)):
                stored = ResultStore(app.results(name)).everything(spark)
                ids = sorted(r["id"] for r in stored.select("id").collect())
                assert ids == readable(level, LOG, LOG_TUPLES), level.text

            # The server's delivery follows the store: each recipient gets what her level
            # allows of it (here below the query's level, and at the top).
            got: dict[str, list[int]] = {"one": [], "top": []}
            recipients = {"one": at("[1, _]"), "top": at("[T, T]")}
            delivery = Delivery(
                lambda _user: ({LOG}, set()),
                queries.provenance,
                roles=lambda _s: queries.codec.query(ROLES),
                levels=lambda s: recipients[s.user].words,
            )
            for user, ids in got.items():
                delivery.subscribe(user, lambda rows, ids=ids: ids.extend(r["id"] for r in rows))
            assert ResultFollower(ResultStore(one.results("hi")), spark, delivery).poll()
            assert sorted(got["one"]) == readable(at("[1, _]"), LOG, LOG_TUPLES)
            assert sorted(got["top"]) == readable(high, LOG, LOG_TUPLES)

            # An application cannot use the other's storage, nor write outside its own.
            with pytest.raises(LevelStorageError):
                one.submit(f"../../{two.name}/results/stolen", SELECT, ROLES)  # out of results/, up
            assert not (two.root / "results" / "stolen").exists()
            with pytest.raises(QueryRejected) as refused:
                one.submit("sps", SP, ROLES)
            assert refused.value.rule == "level_application"
            assert {p.name for p in (one.root / "results").iterdir()} == {"hi"}
            assert {p.name for p in (two.root / "results").iterdir()} == {"lo"}
            assert (one.root / "networks" / LOG).is_dir() and (two.root / "networks" / LOG).is_dir()

            # The application goes with its last query; the other level's runs on.
            assert apps.release("hi") == 0
            assert two.process.poll() is None and two.status()["queries"]["lo"]["active"]
            assert one.name not in apps.active()
        finally:
            apps.close()
        assert two.process.returncode == 0
