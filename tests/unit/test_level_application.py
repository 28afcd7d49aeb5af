"""A level's own Spark application, without a JVM: the spec it is started with, its
life cycle (one per level, on demand, gone with its last query) against a stand-in
driver, and the real driver's refusals before it starts Spark.

The real applications on a standalone cluster: tests/cluster/test_level_applications.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.levels.level_application import (
    ApplicationError,
    ApplicationSpec,
    LevelApplications,
)
from streamshield.engine.levels.level_processor import LevelStorageError, processor_name
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.lattice import Lattice
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import RoleHierarchy

REPO = Path(__file__).resolve().parents[2]
FAKE = "tests.unit.fake_level_driver"
CLOUD = Lattice.of(
    {"COI1": ["1", "2"], "COI2": ["A", "B", "C"]}, order=["A", "1", "B", "2", "C"], capacity=2
)
HIERARCHY = RoleHierarchy.build(
    ["AUD", "LEAD"], [("LEAD", "AUD")], order=["LEAD", "AUD"], capacity=128
)
STREAMS = {
    "MessageLog": StreamDefinition(
        "MessageLog", (("id", "bigint"), ("ts", "bigint"), ("msgType", "string")), "id", "ts"
    ),
    "Notices": StreamDefinition("Notices", (("id", "bigint"),), "id"),
}


def at(text: str) -> QueryLevel:
    return QueryLevel(CLOUD, CLOUD.parse(text))


@pytest.fixture
def importable(monkeypatch) -> None:
    """Child processes import this tree (src and tests), not an installed copy."""
    paths = [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def spec(tmp_path: Path, level: str = "[1, B]") -> ApplicationSpec:
    return ApplicationSpec.of(
        at(level), HIERARCHY, STREAMS, tmp_path / "store", tmp_path / "store" / "labelled"
    )


def test_the_spec_round_trips_the_lattice_roles_and_streams(tmp_path) -> None:
    sent = spec(tmp_path)
    got = ApplicationSpec.from_json(sent.to_json())
    assert got == sent
    level = got.query_level()
    assert level.words == at("[1, B]").words and level.width == 2  # order and width kept
    assert got.hierarchy() == HIERARCHY and got.hierarchy().roles == ("LEAD", "AUD")
    assert got.hierarchy().block_words == 2
    assert dict((s.name, s) for s in got.streams) == STREAMS
    # the same directory as the level's processor inside the server's application
    assert got.root == (tmp_path / "store").resolve() / "levels" / processor_name(level)


def test_a_spec_whose_encoding_differs_is_refused(tmp_path) -> None:
    body = json.loads(spec(tmp_path).to_json())
    body["companies"] = ["1", "A", "B", "2", "C"]  # another bit order: other tuples
    with pytest.raises(ApplicationError, match="encoding"):
        ApplicationSpec.from_json(json.dumps(body)).query_level()


def test_one_application_per_level_on_demand_gone_with_its_last_query(tmp_path, importable) -> None:
    apps = LevelApplications(
        HIERARCHY, STREAMS, tmp_path / "store", tmp_path / "labelled", driver=FAKE
    )
    high, low = at("[1, B]"), at("[2, _]")
    try:
        first = apps.acquire(high, "q1")
        assert apps.acquire(high, "q2") is first  # one level, one application
        other = apps.acquire(low, "q3")
        assert other is not first and other.root != first.root
        for app, name in ((first, "q1"), (first, "q2"), (other, "q3")):
            app.submit(name, "SELECT id FROM MessageLog", ["AUD"])
        assert first.wait_ready()["pid"] != other.wait_ready()["pid"]
        assert first.wait_ready()["level"] == high.text
        assert (first.root / "application.json").is_file()
        assert first.results("q1") == first.root / "results" / "q1"

        assert apps.release("q1") is None  # q2 still runs there
        assert list(first.status()["queries"]) == ["q2"]
        assert apps.release("q2") == 0  # the last one: the driver exits cleanly
        assert first.process.poll() == 0
        assert set(apps.active()) == {processor_name(low)}
        assert other.process.poll() is None
    finally:
        apps.close()
    assert other.process.poll() == 0 and apps.active() == {}


def test_refusals_come_back_as_they_would_in_process(tmp_path, importable) -> None:
    apps = LevelApplications(
        HIERARCHY, STREAMS, tmp_path / "store", tmp_path / "labelled", driver=FAKE
    )
    try:
        app = apps.acquire(at("[1, B]"), "q")
        with pytest.raises(LevelStorageError):
            app.submit("../level-other/q", "SELECT id FROM MessageLog", ["AUD"])
        with pytest.raises(QueryRejected) as refused:
            app.submit("q", "INSERT SP INTO STREAM MessageLog", ["AUD"])
        assert refused.value.rule == "level_application"
        with pytest.raises(ApplicationError, match="exited"):
            app.request("die")  # a crashed driver: an error naming its log, never a hang
        with pytest.raises(ApplicationError):
            app.status()
        assert app.process.returncode == 3
    finally:
        apps.close()


def run_driver(path: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "streamshield.engine.levels.level_driver", str(path)],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, json.loads(done.stdout.decode().splitlines()[0])


def test_the_driver_refuses_before_spark_a_spec_outside_its_directory(tmp_path, importable) -> None:
    sent = spec(tmp_path)
    elsewhere = tmp_path / "application.json"  # not in the level's directory
    elsewhere.write_text(sent.to_json())
    code, reply = run_driver(elsewhere)
    assert code == 1 and reply["ok"] is False and "outside" in reply["message"]


def test_the_driver_refuses_streams_the_server_gave_no_provenance_id(tmp_path, importable) -> None:
    sent = spec(tmp_path)
    sent.root.mkdir(parents=True)
    (sent.root / "application.json").write_text(sent.to_json())
    (tmp_path / "store" / "provenance.json").write_text(json.dumps(["MessageLog"]))
    code, reply = run_driver(sent.root / "application.json")
    assert code == 1 and "provenance" in reply["message"]
    assert json.loads((tmp_path / "store" / "provenance.json").read_text()) == ["MessageLog"]


def test_a_driver_that_does_not_answer_is_stopped(tmp_path, importable) -> None:
    """A late answer would be taken for the next request's: the driver is ended instead."""
    apps = LevelApplications(
        HIERARCHY, STREAMS, tmp_path / "store", tmp_path / "labelled", driver=FAKE
    )
    try:
        app = apps.acquire(at("[_, C]"), "q")
        app.wait_ready()
        with pytest.raises(ApplicationError, match="no answer"):
            app.request("hang", timeout=0.5)
        assert app.process.poll() is not None
    finally:
        apps.close()
