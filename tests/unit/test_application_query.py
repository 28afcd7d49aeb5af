"""The server's registry routing a level's queries to the level's own application, without
a JVM (against the stand-in driver of tests/unit/fake_level_driver.py): the checks that
stay in the server come first (ON RESULT, operator limits: no application starts), a
query with a level runs in its level's application with that application's result
store, the application goes with its last query, and a driver that dies fails its
queries with LEVEL_APPLICATION_LOST, which the server restarts into a new driver.
Plus the setting that chooses it.

The real thing through the server over TLS: tests/server/test_level_applications.py.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from streamshield.cli import main
from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.levels.level_processor import processor_name
from streamshield.engine.store.result_store import ResultStore
from streamshield.lang.admission import admit
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.operator_limits import LimitExceeded, LimitRule, OperatorLimits
from streamshield.server.application_query import LEVEL_APPLICATION_LOST, ApplicationQuery
from streamshield.server.queries import LiveQuery, QueryRegistry
from streamshield.server.settings import ConfigError, load
from tests.polling import poll
from tests.unit.test_level_application import HIERARCHY, STREAMS, at, importable  # noqa: F401

SELECT = "SELECT id FROM MessageLog"
ON_RESULT = f"""{SELECT}
ON RESULT
INSERT SP AS s INTO STREAM
LET s.DDP = TUPLES:ALL, s.SRP = rbac:AUD, s.SIGN = POSITIVE, s.IMMUTABLE = TRUE;"""
UNLIMITED = OperatorLimits()
FAKE = "tests.unit.fake_level_driver"


@pytest.fixture
def routed(tmp_path, importable):  # noqa: F811
    """A registry whose queries with a level go to stand-in applications."""
    apps = LevelApplications(
        HIERARCHY, STREAMS, tmp_path / "store", tmp_path / "labelled", driver=FAKE
    )
    engine = SimpleNamespace(
        hierarchy=HIERARCHY, codec=RoleCodec(HIERARCHY), streams=STREAMS, spark=None
    )

    def admitted(text: str, roles, level=None):
        return admit(text, roles, HIERARCHY, list(STREAMS), level)

    cql = SimpleNamespace(queries=engine, streams=STREAMS, admit=admitted)
    registry = QueryRegistry(cql, apps)  # type: ignore[arg-type]
    yield registry, apps
    for query in registry.all():
        registry.stop(query.name)
    apps.close()


def live(tmp_path, name: str, level: str, text: str = SELECT, owner: str = "ann") -> LiveQuery:
    return LiveQuery(
        name,
        owner,
        text,
        ("AUD",),
        ("MessageLog",),
        f"api_{name}",
        SimpleNamespace(subscriptions=()),  # type: ignore[arg-type]
        ResultStore(tmp_path / "in-process" / name),
        level=at(level),
    )


def test_a_query_with_a_level_runs_in_its_levels_application(tmp_path, routed) -> None:
    registry, apps = routed
    registry.add(live(tmp_path, "q1", "[1, B]"))
    registry.add(live(tmp_path, "q2", "[1, B]"))
    one = registry.start("q1", UNLIMITED)
    two = registry.start("q2", UNLIMITED)
    assert isinstance(one.handle, ApplicationQuery) and one.status() == "running"
    assert one.handle.application is two.handle.application  # one level, one application
    assert one.columns() == ("id",)  # from the application's reply, labels never shown
    level_root = (tmp_path / "store").resolve() / "levels" / processor_name(at("[1, B]"))
    assert one.store.root.resolve() == level_root / "results" / "api_q1"
    application = one.handle.application

    registry.stop("q1")
    assert application.process.poll() is None  # q2 still runs there
    registry.remove("q2")
    assert application.process.wait(30) == 0  # gone with its last query
    assert apps.active() == {}


def test_the_servers_checks_come_before_any_application_starts(tmp_path, routed) -> None:
    registry, apps = routed
    registry.add(live(tmp_path, "sps", "[1, B]", ON_RESULT))
    with pytest.raises(QueryRejected) as refused:
        registry.start("sps", UNLIMITED)
    assert refused.value.rule == "level_application"
    assert apps.active() == {}

    one_query = OperatorLimits(LimitRule(max_queries=1))
    registry.add(live(tmp_path, "q1", "[1, B]"))
    registry.add(live(tmp_path, "q2", "[2, _]"))
    registry.start("q1", one_query)
    with pytest.raises(LimitExceeded):
        registry.start("q2", one_query)
    assert set(apps.active()) == {processor_name(at("[1, B]"))}  # none for [2, ⊥]


def test_a_failing_query_or_a_dead_driver_fails_and_the_lost_one_restarts(tmp_path, routed) -> None:
    registry, _apps = routed
    registry.add(live(tmp_path, "bad", "[1, B]"))
    registry.add(live(tmp_path, "ok", "[1, B]"))
    bad, ok = registry.start("bad", UNLIMITED), registry.start("ok", UNLIMITED)
    bad.handle.application.request("fail", name="api_bad")
    poll(lambda: not bad.handle.active, 30.0, 0.05)
    assert [q.name for q in registry.check_failures(lambda *_: None)] == ["bad"]
    assert bad.status() == "failed" and bad.error_class == "CAST_INVALID_INPUT"
    assert registry.restartable(0) == []  # a bad query is not started again by itself

    first = ok.handle.application
    first.process.kill()  # the driver dies (an OOM, a JVM crash)
    poll(lambda: not ok.handle.active, 30.0, 0.05)
    assert [q.name for q in registry.check_failures(lambda *_: None)] == ["ok"]
    assert ok.error_class == LEVEL_APPLICATION_LOST
    assert registry.restart(registry.restartable(0), UNLIMITED) == ["ok"]
    assert ok.status() == "running" and ok.handle.application is not first
    assert ok.handle.application.process.poll() is None


def test_a_slow_driver_start_holds_up_no_other_start(tmp_path, routed, monkeypatch) -> None:
    """A registration waits for its level's driver outside the registry's lock (as the
    server does, outside its own too): another level's query starts meanwhile."""
    registry, apps = routed
    gate = tmp_path / "gate"
    monkeypatch.setenv("FAKE_LEVEL_DRIVER_GATE", str(gate))
    monkeypatch.setenv("FAKE_LEVEL_DRIVER_GATED", at("[1, B]").text)
    registry.add(live(tmp_path, "slow", "[1, B]"))
    registry.add(live(tmp_path, "fast", "[2, _]"))
    done: dict = {}

    def register() -> None:
        with registry.levels_started(["slow"], ready=True) as startable:
            done["startable"] = startable
            done["query"] = registry.start("slow", UNLIMITED)

    thread = threading.Thread(target=register, daemon=True)
    thread.start()
    poll(lambda: len(apps.active()) == 1, 30.0, 0.05)  # the slow level's driver is starting
    assert registry.start("fast", UNLIMITED).status() == "running"
    assert thread.is_alive() and "startable" not in done  # still starting, not in the way
    gate.touch()
    thread.join(30)
    assert done["startable"] == ["slow"] and done["query"].status() == "running"
    assert len(apps.active()) == 2


def test_a_driver_that_does_not_start_is_left_out_and_let_go(tmp_path, routed, monkeypatch) -> None:
    registry, apps = routed
    monkeypatch.setenv("FAKE_LEVEL_DRIVER_DEAD", at("[1, B]").text)
    registry.add(live(tmp_path, "q", "[1, B]"))
    with registry.levels_started(["q"], ready=True) as startable:
        assert startable == []  # its start would only start another driver: not tried
    assert apps.active() == {} and registry.get("q").status() == "stopped"


def test_a_lost_query_restarts_into_the_driver_started_for_it(tmp_path, routed) -> None:
    """The watch starts the new driver outside the locks; the failed run's handle is let
    go first, so the restart does not stop the driver just started for it."""
    registry, _apps = routed
    registry.add(live(tmp_path, "ok", "[1, B]"))
    ok = registry.start("ok", UNLIMITED)
    first = ok.handle.application
    first.process.kill()
    poll(lambda: not ok.handle.active, 30.0, 0.05)
    registry.check_failures(lambda *_: None)
    with registry.levels_started(registry.restartable(0), ready=True) as due:
        warmed = _apps.of(ok.internal)
        assert due == ["ok"] and warmed is not first and warmed.ready is not None
        assert registry.restart(due, UNLIMITED) == ["ok"]
    assert ok.status() == "running" and ok.handle.application is warmed
    assert warmed.process.poll() is None


def test_the_setting_chooses_where_levels_run(monkeypatch) -> None:
    for name in ("STREAMSHIELD_LEVEL_APPLICATIONS", "STREAMSHIELD_LEVEL_MASTER"):
        monkeypatch.delenv(name, raising=False)
    assert load({}).level_applications == "in_process"
    chosen = load(
        {"level_applications": "separate", "level_master": "spark://h:7077", "level_conf": {"a": 1}}
    )
    assert chosen.level_master == "spark://h:7077" and chosen.level_conf == {"a": "1"}
    with pytest.raises(ConfigError, match="level_master and level_conf go with"):
        load({"level_master": "spark://h:7077"})
    with pytest.raises(ConfigError, match="level_applications"):
        load({"level_applications": "elsewhere"})
    result = CliRunner().invoke(main, ["serve", "--level-conf", "no-equals-sign"])
    assert result.exit_code == 2 and "--level-conf" in result.output
