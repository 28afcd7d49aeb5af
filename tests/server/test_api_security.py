"""Security rules of the API, each tried and expected to hold (one server for the module).

Each test tries to break one protection; it fails if that protection is removed.
"""

from __future__ import annotations

import pytest

from tests.server.conftest import PASSWORD, sp_line, tuple_line

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def world(server):
    """Joe's schema and stream ``prices`` (Ed may write, Al may read and add queries)."""
    joe = server.login("joe", ["ADMIN"])
    schema = {
        "name": "quotes",
        "attributes": [
            ["id", "bigint"],
            ["symbol", "string"],
            ["price", "double"],
            ["ts", "bigint"],
        ],
        "tid": "id",
        "event_time": "ts",
    }
    assert joe.post("/schemas", json=schema).status_code == 201
    assert joe.post("/streams", json={"name": "prices", "schema": "quotes"}).status_code == 201
    grants = [
        ("VIEW CATALOG", "system", "system", "INFO_PROVIDER"),
        ("VIEW OBJECT", "stream", "prices", "INFO_PROVIDER"),
        ("WRITE", "stream", "prices", "INFO_PROVIDER"),
        ("VIEW CATALOG", "system", "system", "CUSTOMER1"),
        ("VIEW OBJECT", "stream", "prices", "CUSTOMER1"),
        ("READ TUPLE", "stream", "prices", "CUSTOMER1"),
        ("ADD", "system", "system", "CUSTOMER1"),
        ("VIEW CATALOG", "system", "system", "OTHER"),
        ("VIEW OBJECT", "stream", "prices", "OTHER"),
        ("WRITE", "stream", "prices", "OTHER"),
    ]
    for permission, kind, obj, role in grants:
        body = {"permission": permission, "kind": kind, "object": obj, "role": role}
        assert joe.post("/grants", json=body).status_code == 200
    return joe


def _login(server, user, password, roles):
    with server.client() as anonymous:
        return anonymous.post("/login", json={"user": user, "password": password, "roles": roles})


def test_forged_missing_and_logged_out_tokens_are_401(server, world) -> None:
    with server.client("forged-token") as forged:
        assert forged.get("/catalog").status_code == 401
    with server.client() as anonymous:
        assert anonymous.get("/catalog").status_code == 401
    al = server.login("al", ["CUSTOMER1"])
    assert al.get("/catalog").status_code == 200
    assert al.post("/logout").status_code == 200
    assert al.get("/catalog").status_code == 401


def test_expired_session_is_401(server, world) -> None:
    security = server.service.security
    al = server.login("al", ["CUSTOMER1"])
    clock = security.clock
    security.clock = lambda: clock() + 10_000  # past the 600 s session lifetime
    try:
        assert al.get("/catalog").status_code == 401
    finally:
        security.clock = clock


def test_invisible_objects_are_not_listed_and_read_as_missing(server, world) -> None:
    bob = server.login("bob", ["CUSTOMER2"])
    assert bob.get("/catalog").json() == {"schemas": [], "streams": [], "queries": []}
    hidden, missing = bob.get("/streams/prices"), bob.get("/streams/no_such")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"] == missing.json()["error"]


def test_appending_or_injecting_sps_into_someone_elses_stream(server, world) -> None:
    mallory = server.login("mallory", ["OTHER"])  # WRITE on prices, no INJECT SP
    values = {"id": 1, "symbol": "X", "price": 1.0, "ts": 1}
    lines = [
        sp_line("prices", "mallory", 1, "{OTHER}"),  # sps need INJECT SP
        tuple_line("prices", "ed", 1, 1, values),  # Ed's channel is not hers
        tuple_line("prices", "mallory", 2, 1, values),  # her own channel: fine
    ]
    answer = mallory.post("/streams/prices/elements", content="\n".join(lines)).json()
    reasons = {r["line"]: r["reason"] for r in answer["rejections"]}
    assert answer["accepted"] == 1
    assert reasons == {1: "not_permitted", 2: "provider_not_yours"}
    assert "X" not in str(answer)  # no values in reasons
    bob = server.login("bob", ["CUSTOMER2"])  # cannot even see the stream
    assert bob.post("/streams/prices/elements", content=lines[2]).status_code == 404


@pytest.mark.parametrize(
    "sql, rule",
    [
        ("SELECT reflect('java.lang.System', 'exit', '0') FROM prices", "forbidden_function"),
        ("SELECT * FROM parquet.`/etc`", None),
        ("SELECT _ss_r0_0 FROM prices", None),
        ("SELECT * FROM prices; SELECT * FROM prices", None),
        ("SELECT * FROM prices [RANGE 100000000 SECONDS]", None),
    ],
)
def test_hostile_sql_is_rejected_with_a_class_only(server, world, sql, rule) -> None:
    al = server.login("al", ["CUSTOMER1"])
    answer = al.post("/queries", json={"name": "hostile", "text": sql})
    assert answer.status_code == 422, answer.text
    if rule:
        assert answer.json()["error"].endswith(rule)
    assert "hostile" not in {q["name"] for q in al.get("/catalog").json()["queries"]}


def test_oversize_body_is_413(server, world) -> None:
    al = server.login("al", ["CUSTOMER1"])
    answer = al.post("/queries", json={"name": "big", "text": "x" * 100_000})
    assert answer.status_code == 413


def test_subscribing_without_subscribe_is_refused(server, world) -> None:
    from tests.server.conftest import Subscriber

    al = server.login("al", ["CUSTOMER1"])
    answer = al.post(
        "/queries", json={"name": "mine", "text": "SELECT symbol FROM prices", "output": "mine_out"}
    )
    assert answer.status_code == 201, answer.text
    mallory = server.login("mallory", ["OTHER"])
    assert Subscriber(mallory, "mine_out").status == 404  # may not even see it
    body = {"permission": "VIEW OBJECT", "kind": "stream", "object": "mine_out", "role": "OTHER"}
    assert al.post("/grants", json=body).status_code == 200
    assert Subscriber(mallory, "mine_out").status == 403  # sees it, no SUBSCRIBE
    assert PASSWORD  # keep the shared password import used


def test_each_missing_permission_is_named_once_the_stream_may_be_seen(server, world) -> None:
    """Bob gains the rights a provider and query author needs one at a time: each refusal
    names what is missing, but a stream he may not see reads exactly like one that does
    not exist (its name, the permissions on it, nothing)."""
    joe = server.login("joe", ["ADMIN"])
    assert joe.post("/streams", json={"name": "ledger", "schema": "quotes"}).status_code == 201
    bob = server.login("bob", ["CUSTOMER2"])
    line = tuple_line("ledger", "bob", 1, 1, {"id": 1, "symbol": "X", "price": 1.0, "ts": 1})

    def give(permission: str, kind: str = "stream", obj: str = "ledger") -> None:
        body = {"permission": permission, "kind": kind, "object": obj, "user": "bob"}
        assert joe.post("/grants", json=body).status_code == 200

    def register(stream: str = "ledger"):
        return bob.post("/queries", json={"name": "bobs", "text": f"SELECT price FROM {stream}"})

    def same_as_missing(hidden, missing) -> None:
        assert hidden.status_code == missing.status_code
        assert hidden.json() == {
            k: v.replace("nothere", "ledger") for k, v in missing.json().items()
        }, (hidden.text, missing.text)

    for _ in ("no grant", "WRITE alone"):
        hidden = bob.post("/streams/ledger/elements", content=line)
        missing = bob.post("/streams/nothere/elements", content=line.replace("ledger", "nothere"))
        assert hidden.status_code == 404 and "VIEW OBJECT" in hidden.json()["message"]
        assert hidden.json() == missing.json() and "WRITE" not in hidden.text
        same_as_missing(register(), register("nothere"))
        assert "VIEW OBJECT" in register().json()["message"]
        give("WRITE")  # a provider's right does not make the stream visible
    give("VIEW OBJECT")
    assert bob.post("/streams/ledger/elements", content=line).status_code == 200
    refused = register()
    assert refused.status_code == 403, refused.text  # no VIEW CATALOG needed to name it
    assert "ADD on system is needed" in refused.json()["message"], refused.text
    give("ADD", "system", "system")
    refused = register()
    assert refused.status_code == 403, refused.text
    assert "READ TUPLE on stream ledger is needed" in refused.json()["message"], refused.text
    give("READ TUPLE")
    assert register().status_code == 201
    assert bob.delete("/queries/bobs").status_code == 200


def test_login_offers_the_users_own_roles_and_ignores_their_case(server, world) -> None:
    refused = _login(server, "al", PASSWORD, ["customer2"])  # a role Al does not hold
    assert refused.status_code == 401
    assert refused.json()["message"].endswith("you hold: CUSTOMER1"), refused.text
    wrong = _login(server, "al", "not it", ["CUSTOMER1"])  # no roles before the password
    assert wrong.status_code == 401 and "CUSTOMER1" not in wrong.text
    answer = _login(server, "al", PASSWORD, ["customer1"])
    assert answer.status_code == 200, answer.text
    with server.client(answer.json()["token"]) as al:
        roles = al.get("/me/roles").json()
    assert roles == {"user": "al", "held": ["CUSTOMER1"], "active": ["CUSTOMER1"]}


# Last: failed logins from 127.0.0.1 throttle every later login from that client.
def test_wrong_password_is_401_and_says_nothing_specific(server) -> None:
    wrong = _login(server, "al", "not it", ["CUSTOMER1"])
    unknown = _login(server, "nobody", "not it", ["CUSTOMER1"])
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json()["message"] == unknown.json()["message"]
    assert "token" not in wrong.json()


def test_repeated_failures_are_throttled_even_with_the_right_password(server) -> None:
    for _ in range(4):
        _login(server, "victim-name", "guess", ["OTHER"])
    answer = _login(server, "victim-name", "guess", ["OTHER"])
    assert answer.status_code == 429 and "Retry-After" in answer.headers


def test_far_future_sps_are_rejected_and_audited(server, world) -> None:
    """docs/security.md, "No input can stall the system": an sp stamped centuries ahead
    would lock its channel; it is rejected with its own reason and audited, and an sp
    stamped now still lands on the same channel."""
    import time

    now = int(time.time() * 1_000_000)
    far = sp_line("prices", "joe.clock", 1, "{CUSTOMER1}", ts=now + 10**15)
    answer = world.post("/streams/prices/elements", content=far).json()
    assert answer["accepted"] == 0
    assert [r["reason"] for r in answer["rejections"]] == ["future_timestamp"]
    assert "ahead of the server's clock" in answer["rejections"][0]["message"]
    entries = world.get("/audit", params={"action": "denied", "user": "joe"}).json()["entries"]
    assert any(e["detail"].get("reason") == "future_timestamp" for e in entries), entries
    honest = sp_line("prices", "joe.clock", 2, "{CUSTOMER1}", ts=now)
    assert world.post("/streams/prices/elements", content=honest).json()["accepted"] == 1
