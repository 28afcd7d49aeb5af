"""Administration through the real server over TLS, on a root bootstrapped like
``streamshield admin init`` and served without the example (one server for the module;
tests run in file order and build on each other).

Each rule has a test that tries to break it; the engine test checks that a role added
while data is stored changes no stored label and is live at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from streamshield.catalog.bootstrap import init_admin
from streamshield.catalog.security import SecurityCatalog
from streamshield.catalog.throttle import ThrottlePolicy
from streamshield.policy.encoding import EncodedAccess
from tests.server.conftest import Subscriber, poll, serve_root, sp_line, stop_server, tuple_line

pytestmark = pytest.mark.spark

CHIEF_PW = "the chief's long passphrase"
PW = "a perfectly long password"


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("admin")
    throttle = ThrottlePolicy(free_failures=50)  # wrong passwords below must not slow logins
    security = SecurityCatalog(root / "catalog.db", throttle=throttle)
    init_admin(security, "chief", CHIEF_PW)  # what `streamshield admin init` does
    started = serve_root(root, spark, security)
    yield started
    stop_server(started)


@pytest.fixture(scope="module")
def chief(server):
    return server.login("chief", ["ADMIN"], CHIEF_PW)


def _ok(answer, status: int = 200) -> dict:
    assert answer.status_code == status, answer.text
    return answer.json()


def _refused(answer, status: int, *words: str) -> dict:
    assert answer.status_code == status, answer.text
    body = answer.json()
    for word in words:
        assert word in body["message"], body
    return body


def test_the_administrator_creates_roles_and_users_who_then_log_in(server, chief) -> None:
    assert _ok(chief.post("/roles", json={"name": "DOCTOR"}), 201) == {
        "name": "DOCTOR",
        "juniors": [],
    }
    body = _ok(chief.post("/roles", json={"name": "CARDIO", "juniors": ["DOCTOR"]}), 201)
    assert body == {"name": "CARDIO", "juniors": ["DOCTOR"]}
    _ok(chief.post("/roles", json={"name": "NURSE"}), 201)
    assert _ok(chief.post("/roles/CARDIO/juniors", json={"junior": "NURSE"}))["juniors"] == [
        "DOCTOR",
        "NURSE",
    ]
    roles = {r["name"]: r["juniors"] for r in _ok(chief.get("/roles"))["roles"]}
    assert roles == {"ADMIN": [], "CARDIO": ["DOCTOR", "NURSE"], "DOCTOR": [], "NURSE": []}
    for name, role in (("carl", "CARDIO"), ("nina", "NURSE"), ("dora", "DOCTOR")):
        user = _ok(chief.post("/users", json={"name": name, "password": PW, "roles": [role]}), 201)
        assert user == {"name": name, "roles": [role], "disabled": False}
        server.login(name, [role], PW)
    users = _ok(chief.get("/users"))["users"]
    assert [u["name"] for u in users] == ["carl", "chief", "dora", "nina"]
    assert _ok(chief.get("/users/nina")) == {"name": "nina", "roles": ["NURSE"], "disabled": False}
    changed = _ok(chief.put("/users/dora/roles", json={"roles": ["DOCTOR", "NURSE"]}))
    assert changed["roles"] == ["DOCTOR", "NURSE"]


def test_non_administrators_are_refused(server) -> None:
    nina = server.login("nina", ["NURSE"], PW)
    attempts = [
        ("POST", "/users", {"name": "eve", "password": PW, "roles": []}),
        ("GET", "/users", None),
        ("GET", "/users/carl", None),
        ("GET", "/users/nobody", None),
        ("PUT", "/users/nina/roles", {"roles": ["ADMIN"]}),
        ("POST", "/users/carl/password", {"password": PW}),
        ("POST", "/users/carl/disable", None),
        ("POST", "/roles", {"name": "EVIL"}),
        ("POST", "/roles/NURSE/juniors", {"junior": "CARDIO"}),
        ("DELETE", "/roles/CARDIO/juniors/NURSE", None),
        ("GET", "/grants?kind=system&object=system", None),
        ("GET", "/grants?kind=stream&object=nothing_of_that_name", None),  # 403, not 404
    ]
    for method, path, body in attempts:
        answer = nina.request(method, path, json=body)
        _refused(answer, 403, "CHANGE SYSTEM")
    assert _ok(nina.get("/users/nina"))["roles"] == ["NURSE"]  # herself: yes
    assert "EVIL" not in {r["name"] for r in _ok(nina.get("/roles"))["roles"]}
    with server.client() as anonymous:
        paths = anonymous.get("/openapi.json").json()["paths"]
        assert {"403", "409"} <= set(paths["/users/{name}/disable"]["post"]["responses"])
        assert "UserOut" in json.dumps(paths["/users"]["post"])
        assert anonymous.get("/users").status_code == 401
        assert anonymous.post("/roles", json={"name": "EVIL"}).status_code == 401


def test_the_grants_on_an_object_are_listed_to_administrators(chief) -> None:
    body = {"kind": "system", "object": "system", "permission": "ADD", "role": "NURSE"}
    _ok(chief.post("/grants", json=body))
    listed = _ok(chief.get("/grants", params={"kind": "system", "object": "system"}))
    assert listed["kind"] == "system" and listed["object"] == "system"
    nurse = [g for g in listed["grants"] if g["grantee"] == "NURSE"]
    assert nurse == [
        {
            "permission": "ADD",
            "grantee_kind": "role",
            "grantee": "NURSE",
            "grantor": "chief",
            "grant_option": False,
        }
    ]
    _ok(chief.request("DELETE", "/grants", json=body))
    listed = _ok(chief.get("/grants", params={"kind": "system", "object": "system"}))
    assert not [g for g in listed["grants"] if g["grantee"] == "NURSE"]
    _refused(chief.get("/grants", params={"kind": "stream", "object": "nope"}), 404, "nope")
    assert chief.get("/grants", params={"kind": "table", "object": "x"}).status_code == 422
    assert chief.get("/grants", params={"kind": "stream"}).status_code == 422


def test_bad_input_is_refused_naming_the_field(chief) -> None:
    def user(name: str, password: str, roles: list[str]) -> dict:
        return {"name": name, "password": password, "roles": roles}

    for weak in ("", "short", " " * 16, "olga.long.name"):
        _refused(chief.post("/users", json=user("olga.long.name", weak, [])), 422, "password")
    _refused(chief.post("/users", json=user("olga", PW, ["NOPE"])), 422, "roles", "NOPE")
    _refused(chief.post("/users", json=user("CARL", PW, [])), 409, "exists")
    _refused(chief.post("/users", json=user("bad name", PW, [])), 422, "name")
    _refused(chief.post("/users", json={"name": "x", "password": PW, "admin": True}), 422)
    _refused(chief.post("/roles", json={"name": "DOCTOR"}), 409, "exists")
    _refused(chief.post("/roles", json={"name": "9LIVES"}), 422, "name")
    _refused(chief.post("/roles", json={"name": "X", "juniors": ["NOPE"]}), 422, "juniors")
    _refused(chief.post("/roles/DOCTOR/juniors", json={"junior": "CARDIO"}), 422, "cycle")
    _refused(chief.post("/roles/NURSE/juniors", json={"junior": "NURSE"}), 422, "cycle")
    _refused(chief.post("/roles/NOPE/juniors", json={"junior": "NURSE"}), 404, "NOPE")
    _refused(chief.post("/roles/NURSE/juniors", json={"junior": "NOPE"}), 422, "junior")
    _refused(chief.delete("/roles/NURSE/juniors/DOCTOR"), 404, "not a direct junior")
    _refused(chief.put("/users/nobody/roles", json={"roles": []}), 404, "nobody")
    _refused(chief.post("/users/nobody/password", json={"password": PW}), 404)
    _refused(chief.post("/users/carl/password", json={"password": "carl"}), 422, "password")
    _refused(chief.post("/users/chief/disable"), 409, "herself")
    assert "olga" not in {u["name"] for u in chief.get("/users").json()["users"]}


def test_passwords_change_and_reset(server, chief) -> None:
    nina = server.login("nina", ["NURSE"], PW)
    body = {"current": "not the password", "new": "nina's own new password"}
    _refused(nina.post("/me/password", json=body), 403, "current")
    _refused(nina.post("/me/password", json={"current": PW, "new": "tiny"}), 422, "new")
    assert _ok(nina.post("/me/password", json={"current": PW, "new": body["new"]})) == {
        "name": "nina"
    }
    with server.client() as anonymous:
        old = anonymous.post("/login", json={"user": "nina", "password": PW, "roles": ["NURSE"]})
        assert old.status_code == 401
    server.login("nina", ["NURSE"], body["new"])
    _ok(chief.post("/users/nina/password", json={"password": PW}))
    server.login("nina", ["NURSE"], PW)
    entries = json.dumps(chief.get("/audit", params={"limit": 1000}).json())
    assert PW not in entries and body["new"] not in entries and CHIEF_PW not in entries
    assert "reset_password" in entries and "change_password" in entries


def test_a_disabled_users_live_session_ends_at_once(server, chief) -> None:
    dora = server.login("dora", ["DOCTOR"], PW)
    assert dora.get("/roles").status_code == 200
    assert _ok(chief.post("/users/dora/disable"))["disabled"] is True
    _refused(dora.get("/roles"), 401)
    with server.client() as anonymous:
        disabled = anonymous.post(
            "/login", json={"user": "dora", "password": PW, "roles": ["DOCTOR"]}
        )
        wrong = anonymous.post(
            "/login", json={"user": "dora", "password": "not it at all", "roles": ["DOCTOR"]}
        )
    assert disabled.status_code == wrong.status_code == 401
    assert disabled.json() == wrong.json()  # nothing tells a disabled account apart
    assert _ok(chief.get("/users/dora"))["disabled"] is True
    assert _ok(chief.post("/users/dora/enable"))["disabled"] is False
    server.login("dora", ["DOCTOR"], PW)


def _labels(server, spark) -> dict[int, EncodedAccess]:
    """Tuple-level labels of every stored ``vitals`` tuple, by tid, as stored on disk and
    read by every engine (a word a batch left out restored)."""
    store = server.service.pipeline.ingest.store
    if not store.path("vitals").exists():
        return {}
    queries = server.service.pipeline.queries
    width = queries.codec.width
    rows = store.read(spark, queries.streams["vitals"], width).collect()
    return {
        row["id"]: EncodedAccess(
            tuple(row[f"_ss_r0_{w}"] for w in range(width)),
            tuple(row[f"_ss_d0_{w}"] for w in range(width)),
        )
        for row in rows
    }


def _query_ids(server, roles: list[str], name: str) -> set[int]:
    """What a continuous query with ``roles`` reads of ``vitals`` now (the real secured
    view compiled by the running engine), run to the end of what is stored."""
    from streamshield.engine.queries.streaming_queries import CallbackSink

    ids: set[int] = set()

    def collect(frame, _batch: int) -> None:
        ids.update(row["id"] for row in frame.select("id").collect())

    queries = server.service.pipeline.queries
    query = queries.register(
        queries.admit("SELECT id FROM vitals", roles), CallbackSink(collect), name
    )
    try:
        query.process_all_available()
    finally:
        queries.stop(name)
    return ids


def test_a_role_added_while_data_is_stored_changes_no_label_and_is_live(
    server, spark, chief
) -> None:
    schema = {"name": "v", "attributes": [["id", "bigint"], ["pulse", "double"]], "tid": "id"}
    _ok(chief.post("/schemas", json=schema), 201)
    _ok(chief.post("/streams", json={"name": "vitals", "schema": "v"}), 201)
    lines = [sp_line("vitals", "chief.a", 1, "{DOCTOR}")]  # DOCTOR and its seniors
    lines += [tuple_line("vitals", "chief.a", 1 + i, i, {"id": i, "pulse": 60.0}) for i in (1, 2)]
    lines += [sp_line("vitals", "chief.b", 1, "*")]  # every role known at ingest
    lines += [tuple_line("vitals", "chief.b", 2, 11, {"id": 11, "pulse": 70.0})]
    assert _ok(chief.post("/streams/vitals/elements", content="\n".join(lines)))["accepted"] == 5
    before = poll(lambda: (labels := _labels(server, spark)) and len(labels) == 3 and labels)
    codec = server.service.pipeline.queries.codec
    readers_before = {tid: codec.decode(access) for tid, access in before.items()}
    assert readers_before[1].readers == {"DOCTOR", "CARDIO"}
    assert readers_before[11].readers == {"ADMIN", "CARDIO", "DOCTOR", "NURSE"}
    reads_before = {r: _query_ids(server, [r], f"before_{r}") for r in ("CARDIO", "NURSE")}
    assert reads_before == {"CARDIO": {1, 2, 11}, "NURSE": {11}}

    _ok(chief.post("/roles", json={"name": "SURGEON"}), 201)  # appended: position 4
    _ok(chief.post("/roles/SURGEON/juniors", json={"junior": "NURSE"}))
    new_codec = server.service.pipeline.queries.codec
    assert new_codec.width == codec.width and new_codec is not codec
    assert server.service.pipeline.ingest.ingest.codec.hierarchy.roles[-1] == "SURGEON"
    after = _labels(server, spark)
    assert {tid: new_codec.decode(a) for tid, a in after.items()} == readers_before
    for roles in (["CARDIO"], ["DOCTOR"], ["NURSE"], ["ADMIN"]):
        assert {t for t, a in after.items() if a.allows(new_codec.query(roles))} == {
            t for t, a in before.items() if a.allows(codec.query(roles))
        }
    # SURGEON is in no old label; it reads an old tuple only through its junior NURSE
    assert {t for t, a in after.items() if a.allows(new_codec.query(["SURGEON"]))} == {11}
    reads_after = {r: _query_ids(server, [r], f"after_{r}") for r in ("CARDIO", "NURSE")}
    assert reads_after == reads_before
    assert _query_ids(server, ["SURGEON"], "after_SURGEON") == {11}

    # an sp naming the new role is accepted and applied, and SURGEON's query sees it
    _ok(chief.post("/users", json={"name": "sam", "password": PW, "roles": ["SURGEON"]}), 201)
    for permission in ("VIEW CATALOG", "ADD"):
        body = {"permission": permission, "kind": "system", "object": "system", "role": "SURGEON"}
        _ok(chief.post("/grants", json=body))
    for permission in ("VIEW OBJECT", "READ TUPLE"):
        body = {"permission": permission, "kind": "stream", "object": "vitals", "role": "SURGEON"}
        _ok(chief.post("/grants", json=body))
    sam = server.login("sam", ["SURGEON"], PW)
    query = {"name": "sam_q", "text": "SELECT id, pulse FROM vitals", "output": "sam_out"}
    _ok(sam.post("/queries", json=query), 201)
    subscriber = Subscriber(sam, "sam_q")
    lines = [sp_line("vitals", "chief.c", 1, "{SURGEON}")]
    lines += [tuple_line("vitals", "chief.c", 2, 21, {"id": 21, "pulse": 99.0})]
    assert _ok(chief.post("/streams/vitals/elements", content="\n".join(lines)))["accepted"] == 2
    labels = poll(lambda: (labels := _labels(server, spark)) and 21 in labels and labels)
    assert new_codec.decode(labels[21]).readers == {"SURGEON"}
    poll(lambda: any(row["id"] == 21 for row in subscriber.rows()))
    assert {row["id"] for row in subscriber.rows()} <= {11, 21}  # never DOCTOR's 1 and 2
    subscriber.close()


def test_an_administrator_works_end_to_end_through_the_cli(server, tmp_path: Path) -> None:
    from streamshield.cli import main

    runner = CliRunner()
    home = tmp_path / "home"
    secret, new = tmp_path / "lena.pw", tmp_path / "lena-new.pw"
    secret.write_text(PW + "\n")
    new.write_text("lena's own new password\n")

    def cli(*args: str, password: str = CHIEF_PW) -> str:
        env = {"STREAMSHIELD_HOME": str(home), "STREAMSHIELD_PASSWORD": password}
        result = runner.invoke(main, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result.output

    login = ["client", "login", "--url", server.url, "--ca", str(server.cert)]
    cli(*login, "--user", "chief", "--role", "ADMIN")
    assert "LAB" in cli("client", "role", "create", "LAB", "--junior", "NURSE")
    cli("client", "user", "create", "lena", "--role", "LAB", "--password-file", str(secret))
    users = json.loads(cli("client", "user", "list", "--output", "json"))["users"]
    assert {"name": "lena", "roles": ["LAB"], "disabled": False} in users
    roles = json.loads(cli("client", "role", "list", "--output", "json"))["roles"]
    assert {"name": "LAB", "juniors": ["NURSE"]} in roles
    assert "lena" in cli("client", "user", "show", "lena")

    cli(*login, "--user", "lena", "--role", "LAB", password=PW)
    refused = runner.invoke(
        main, ["client", "role", "create", "MINE"], env={"STREAMSHIELD_HOME": str(home)}
    )
    assert refused.exit_code != 0 and "403" in refused.output
    assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1
    changed = cli("client", "passwd", "--current-file", str(secret), "--new-file", str(new))
    assert "password of lena changed" in changed
    cli(*login, "--user", "lena", "--role", "LAB", password="lena's own new password")
