"""Chinese-Wall levels through the real server over TLS (paper 2, sections 3-4): classes,
stream and channel levels, clearances, a session's level at login and after, the CLI.

One server for the module; tests run in file order and build on each other (the
paper's cloud-auditing classes COI1 = {1, 2}, COI2 = {A, B, C}). Each rule has a test
that tries to break it and gets a clear 4xx naming the field, never a 500.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from streamshield.policy.lattice import Lattice
from tests.server.conftest import PASSWORD, start_server, stop_server

pytestmark = pytest.mark.spark

USERS = {"chief": ["ADMIN"], "session_manager": ["OTHER"], "company1": ["CUSTOMER1"]}
CLOUD = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory):
    started = start_server(tmp_path_factory.mktemp("levels"), spark, USERS)
    yield started
    stop_server(started)


@pytest.fixture(scope="module")
def chief(server):
    return server.login("chief", ["ADMIN"])


@pytest.fixture(scope="module")
def manager(server):
    return server.login("session_manager", ["OTHER"])


def _ok(answer, status: int = 200) -> dict:
    assert answer.status_code == status, answer.text
    return answer.json()


def _refused(answer, status: int, code: str, *words: str) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["error"] == code, body
    shown = body["message"] + json.dumps(body.get("problems", []), ensure_ascii=False)
    for word in words:
        assert word in shown, body  # the message, or a problem's field for body validation
    return body


def _login(server, user: str, roles: list[str], level: str | None = None):
    body: dict = {"user": user, "password": PASSWORD, "roles": roles}
    if level is not None:
        body["level"] = level
    with server.client() as anonymous:
        return anonymous.post("/login", json=body)


def test_before_any_class_levels_are_off_and_say_so(server, chief, manager) -> None:
    assert _ok(manager.get("/levels")) == {
        "coi_classes": [],
        "ci_classes": [],
        "capacity": None,
        "public": None,
        "trusted": None,
    }
    _refused(manager.put("/me/level", json={"level": "[_]"}), 409, "conflict", "no COI class")
    _refused(_login(server, "company1", ["CUSTOMER1"], "[_]"), 409, "conflict", "no COI class")
    assert server.service.security.session_level(chief.headers["Authorization"][7:]) is None


def test_a_non_administrator_defines_nothing(server, manager) -> None:
    attempts = [
        ("POST", "/levels/coi", {"name": "COI1", "companies": ["1", "2"]}),
        ("POST", "/levels/ci", {"name": "x", "companies": ["1"]}),
        ("POST", "/levels/coi/COI1/companies", {"company": "3"}),
        ("PUT", "/levels/streams/MessageLog", {"level": "[T, T]"}),
        ("PUT", "/levels/streams/MessageLog/channels/company1", {"level": "[1, _]"}),
        ("DELETE", "/levels/streams/MessageLog/channels/company1", None),
        ("PUT", "/users/session_manager/clearance", {"level": "[T, T]"}),
        ("GET", "/users/chief/clearance", None),
    ]
    for method, path, body in attempts:
        answer = manager.request(method, path, json=body)
        _refused(answer, 403, "forbidden", "CHANGE SYSTEM")
    assert _ok(manager.get("/levels"))["coi_classes"] == []


def test_the_administrator_defines_the_papers_classes(server, chief, manager) -> None:
    coi1 = {"name": "COI1", "companies": ["1", "2"]}
    assert _ok(chief.post("/levels/coi", json=coi1), 201) == coi1
    _ok(chief.post("/levels/coi", json={"name": "COI2", "companies": ["A", "B"]}), 201)
    added = _ok(chief.post("/levels/coi/COI2/companies", json={"company": "C"}))
    assert added == {"name": "COI2", "companies": ["A", "B", "C"]}
    service5 = _ok(
        chief.post("/levels/ci", json={"name": "service5", "companies": ["1", "B"]}), 201
    )
    assert service5 == {"name": "service5", "companies": ["1", "B"], "level": "[1, B]"}
    seen = _ok(manager.get("/levels"))  # every logged-in user reads the classes
    assert seen == {
        "coi_classes": [coi1, {"name": "COI2", "companies": ["A", "B", "C"]}],
        "ci_classes": [service5],
        "capacity": 64,
        "public": "[⊥, ⊥]",
        "trusted": "[T, T]",
    }


def test_bad_definitions_are_clear_4xx(chief) -> None:
    def coi(name: str, companies: list) -> dict:
        return {"name": name, "companies": companies}

    cases = [
        ("/levels/ci", coi("x", ["1", "2"]), 422, "invalid_level.two_companies_one_class", "COI1"),
        ("/levels/ci", coi("x", ["1", "Z"]), 422, "invalid_level.unknown_company", "'Z'"),
        ("/levels/ci", coi("SERVICE5", ["2"]), 409, "exists", "service5"),
        ("/levels/coi", coi("COI9", ["p"]), 422, "invalid", "companies"),  # pydantic: min 2
        ("/levels/coi", coi("COI9", ["p", "p"]), 422, "invalid_level.duplicate_company", "'p'"),
        ("/levels/coi", coi("T", ["p", "q"]), 422, "invalid_level.bad_name", "name"),
        ("/levels/coi", coi("COI9", ["p", "a]"]), 422, "invalid_level.bad_name", "companies"),
        ("/levels/coi", coi("coi1", ["p", "q"]), 409, "exists", "'COI1'"),
        ("/levels/coi", coi("COI9", ["p", "b"]), 409, "exists", "'B'"),
        ("/levels/coi", {**coi("COI9", ["p", "q"]), "capacity": 128}, 409, "conflict", "fixed"),
        ("/levels/coi", {**coi("COI9", ["p", "q"]), "admin": True}, 422, "invalid", "admin"),
        ("/levels/coi", coi("COI9", "pq"), 422, "invalid", "body.companies"),
        ("/levels/coi/NOPE/companies", {"company": "q"}, 404, "not_found", "NOPE"),
        ("/levels/coi/COI1/companies", {"company": "a"}, 409, "exists", "COI2"),
    ]
    for path, body, status, code, word in cases:
        _refused(chief.post(path, json=body), status, code, word)


def test_stream_and_channel_levels(server, chief, manager) -> None:
    schema = {"name": "log", "attributes": [["id", "bigint"], ["msgType", "string"]], "tid": "id"}
    _ok(chief.post("/schemas", json=schema), 201)
    _ok(chief.post("/streams", json={"name": "MessageLog", "schema": "log"}), 201)
    assert _ok(chief.get("/levels/streams/MessageLog")) == {
        "stream": "MessageLog",
        "level": "[⊥, ⊥]",  # public until the administrator puts it behind the wall
        "assigned": False,
        "channels": [],
    }
    assert _ok(chief.put("/levels/streams/MessageLog", json={"level": "[_, T]"}))["assigned"]
    path = "/levels/streams/MessageLog/channels/company1"
    _refused(chief.put(path, json={"level": "[1, _]"}), 422, "invalid", "not dominated", "[⊥, T]")
    _ok(chief.put("/levels/streams/MessageLog", json={"level": "[T, T]"}))
    answer = _ok(chief.put(path, json={"level": "[1, _]"}))
    assert answer["channels"] == [{"provider": "company1", "level": "[1, ⊥]"}]
    _refused(
        chief.put("/levels/streams/MessageLog", json={"level": "[2, T]"}),
        409,
        "conflict",
        "'company1'",
    )
    _refused(chief.put("/levels/streams/nothing", json={"level": "[T, T]"}), 404, "not_found")
    nobody = chief.put("/levels/streams/MessageLog/channels/nobody", json={"level": "[1, _]"})
    _refused(nobody, 404, "not_found", "provider")
    gone = chief.delete("/levels/streams/MessageLog/channels/chief")
    _refused(gone, 404, "not_found", "no level of its own")
    _refused(chief.get("/levels/streams/nothing"), 404, "not_found")
    _refused(manager.get("/levels/streams/MessageLog"), 404, "not_found")  # may not see it
    assignment = server.service.security.level_assignment()
    assert assignment.tuple_level("MessageLog", "company1") == CLOUD.parse("[1, _]")
    assert assignment.tuple_level("MessageLog", "someone") == CLOUD.trusted  # the stream's
    assert assignment.tuple_level("other", "someone") == CLOUD.public  # no level set


@pytest.mark.parametrize(
    ("text", "code", "words"),
    [
        ("1, B", "invalid_level.syntax", "brackets"),
        ("[1]", "invalid_level.arity", "2 components"),
        ("[A, 1]", "invalid_level.wrong_class", "'A'"),
        ("[1, Z]", "invalid_level.unknown_company", "'Z'"),
        ("[1,, B]", "invalid_level.syntax", "empty"),
        ("[1 2, B]", "invalid_level.syntax", "component 1"),
    ],
)
def test_malformed_levels_are_422_naming_the_field(chief, manager, text, code, words) -> None:
    body = {"level": text}
    for client, method, path in (
        (chief, "PUT", "/levels/streams/MessageLog"),
        (chief, "PUT", "/users/session_manager/clearance"),
        (manager, "PUT", "/me/level"),
    ):
        answer = _refused(client.request(method, path, json=body), 422, code, words)
        assert answer["message"].startswith("level: ")
    _refused(manager.put("/me/level", json={"level": 5}), 422, "invalid", "body.level")
    _refused(manager.put("/me/level", json={}), 422, "invalid", "body.level")


def test_a_session_runs_at_most_at_its_clearance(server, chief, manager) -> None:
    assert _ok(manager.get("/me/level")) == {
        "user": "session_manager",
        "clearance": "[⊥, ⊥]",
        "level": "[⊥, ⊥]",
    }
    _refused(manager.put("/me/level", json={"level": "[_, B]"}), 403, "above_clearance", "[⊥, ⊥]")
    answer = _ok(chief.put("/users/session_manager/clearance", json={"level": "[_, T]"}))
    assert answer == {"user": "session_manager", "clearance": "[⊥, T]", "sessions_lowered": 0}
    assert _ok(manager.get("/users/session_manager/clearance"))["clearance"] == "[⊥, T]"
    assert _ok(manager.put("/me/level", json={"level": "[_, T]"}))["level"] == "[⊥, T]"
    for above in ("[1, _]", "[1, T]", "[T, T]"):
        _refused(manager.put("/me/level", json={"level": above}), 403, "above_clearance")
    assert _ok(manager.get("/me/level"))["level"] == "[⊥, T]"  # refusals changed nothing
    # at login: a level within the clearance, or no session at all
    at_b = _ok(_login(server, "session_manager", ["OTHER"], "[_, B]"))
    assert at_b["level"] == "[⊥, B]"
    with server.client(at_b["token"]) as second:
        assert _ok(second.get("/me/level"))["level"] == "[⊥, B]"
    _refused(_login(server, "session_manager", ["OTHER"], "[1, B]"), 403, "above_clearance")
    _refused(_login(server, "session_manager", ["OTHER"], "[1 2, B]"), 422, "invalid_level.syntax")
    assert _ok(_login(server, "session_manager", ["OTHER"]))["level"] is None
    # lowering the clearance lowers every session above it at once
    answer = _ok(chief.put("/users/session_manager/clearance", json={"level": "[_, B]"}))
    assert answer["sessions_lowered"] == 1  # the [⊥, T] session; the [⊥, B] one stays
    assert _ok(manager.get("/me/level"))["level"] == "[⊥, ⊥]"
    security = server.service.security
    assert security.session_level(manager.headers["Authorization"][7:]) == CLOUD.public
    assert security.session_level(at_b["token"]) == CLOUD.parse("[_, B]")
    _refused(chief.put("/users/nobody/clearance", json={"level": "[1, B]"}), 404, "not_found")
    _refused(chief.get("/users/nobody/clearance"), 404, "not_found")


def test_every_change_and_refusal_is_audited(chief) -> None:
    entries = _ok(chief.get("/audit", params={"limit": 500}))["entries"]
    actions = {e["action"] for e in entries if e["outcome"] == "ok"}
    assert {
        "define_coi_class",
        "add_company",
        "define_ci_class",
        "set_stream_level",
        "set_channel_level",
        "set_clearance",
        "activate_level",
    } <= actions
    denied = [e for e in entries if e["outcome"] == "denied" and e["actor"] == "session_manager"]
    requests = {e["detail"].get("request") for e in denied}
    assert {"define_coi_class", "set_clearance", "activate_level"} <= requests


def test_the_openapi_document_describes_the_level_routes(server) -> None:
    with server.client() as anonymous:
        document = anonymous.get("/openapi.json").json()
    paths, components = document["paths"], document["components"]["schemas"]
    assert {"403", "409", "422"} <= set(paths["/me/level"]["put"]["responses"])
    assert "SessionLevelOut" in json.dumps(paths["/me/level"]["put"])
    assert "level" in components["LoginBody"]["properties"]
    assert "level" in components["LoginAnswer"]["properties"]
    assert {"403", "409"} <= set(paths["/login"]["post"]["responses"])
    assert "HTTPValidationError" not in components  # every 422 is documented as ErrorBody
    for path in ("/levels", "/levels/coi", "/levels/streams/{name}", "/users/{name}/clearance"):
        assert path in paths


def test_the_cli(server, tmp_path) -> None:
    from streamshield.cli import main

    runner = CliRunner()
    env = {"STREAMSHIELD_HOME": str(tmp_path / "home"), "STREAMSHIELD_PASSWORD": PASSWORD}

    def cli(*args: str, code: int = 0) -> str:
        result = runner.invoke(main, list(args), env=env)
        assert result.exit_code == code, result.output
        return result.output

    login = ["client", "login", "--url", server.url, "--ca", str(server.cert)]
    cli(*login, "--user", "chief", "--role", "ADMIN")
    cli("client", "level", "coi", "COI3", "x1", "x2")
    shown = json.loads(cli("client", "level", "show", "--output", "json"))
    assert [c["name"] for c in shown["coi_classes"]] == ["COI1", "COI2", "COI3"]
    assert "service5" in cli("client", "level", "show")
    cli("client", "level", "clearance", "set", "company1", "[1, _, x1]")
    answer = json.loads(cli("client", "level", "stream", "show", "MessageLog", "--output", "json"))
    assert answer["channels"] == [{"provider": "company1", "level": "[1, ⊥, ⊥]"}]
    result = runner.invoke(main, ["client", "level", "ci", "bad", "1", "2"], env=env)
    assert result.exit_code != 0 and "COI1" in result.output and "Traceback" not in result.output
    result = runner.invoke(
        main, [*login, "--user", "company1", "--role", "CUSTOMER1", "--level", "[T, _, _]"], env=env
    )
    assert result.exit_code != 0 and "not dominated by your clearance" in result.output
    assert "at level [1, ⊥, x1]" in cli(
        *login, "--user", "company1", "--role", "CUSTOMER1", "--level", "[1, _, x1]"
    )
    assert "[1, ⊥, ⊥]" in cli("client", "level", "activate", "[1, _, _]")
    mine = json.loads(cli("client", "level", "me", "--output", "json"))
    assert mine == {"user": "company1", "clearance": "[1, ⊥, x1]", "level": "[1, ⊥, ⊥]"}
    result = runner.invoke(main, ["client", "level", "activate", "[T, T, T]"], env=env)
    assert result.exit_code != 0 and "clearance" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(main, ["client", "level", "coi", "MINE", "p", "q"], env=env)
    assert result.exit_code != 0 and "CHANGE SYSTEM" in result.output
