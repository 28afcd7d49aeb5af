"""Level-aware queries through the real server over TLS (docs/chinese-wall.md).

The cloud-auditing lattice (COI1 = {1, 2}, COI2 = {A, B, C}); MessageLog at [T, T]
with company1's channel at [1, ⊥] and company2's at [2, ⊥]. Ann (cleared [T, T]) and
Bob (cleared [1, ⊥]) register the same selection; each query runs at its session's
level, Bob also subscribes to Ann's query and gets only the rows his own level
dominates (the recipient decides), explain shows the level conjunct, and every bad
input (a provider's level field, a query naming a level word, a session level above
the clearance) is a clear refusal naming the field. Tests build on each other.
"""

from __future__ import annotations

import re

import pytest

from tests.server.conftest import (
    PASSWORD,
    Subscriber,
    poll,
    sp_line,
    start_server,
    stop_server,
    tuple_line,
)
from tests.server.conftest import grant as _grant
from tests.server.conftest import ok as _ok

pytestmark = pytest.mark.spark

USERS = {
    "chief": ["ADMIN"],
    "company1": ["INFO_PROVIDER"],
    "company2": ["INFO_PROVIDER"],
    "ann": ["CUSTOMER1"],
    "bob": ["CUSTOMER2"],
}
SQL = "SELECT id, msgType FROM MessageLog"
READERS = "{CUSTOMER1, CUSTOMER2}"


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory):
    started = start_server(tmp_path_factory.mktemp("level-queries"), spark, USERS)
    yield started
    stop_server(started)


def _login(server, user: str, roles: list[str], level: str | None):
    with server.client() as anonymous:
        body = {"user": user, "password": PASSWORD, "roles": roles, "level": level}
        return anonymous.post("/login", json=body)


def _session(server, user: str, roles: list[str], level: str):
    answer = _ok(_login(server, user, roles, level))
    assert answer["level"] == level.replace("_", "⊥")
    return server.client(answer["token"])


def _send(server, provider: str, lines: list[str]) -> dict:
    with server.login(provider, ["INFO_PROVIDER"]) as client:
        return _ok(client.post("/streams/MessageLog/elements", content="\n".join(lines)))


def _log(provider: str, first_seq: int, ids: list[int]) -> list[str]:
    return [
        tuple_line("MessageLog", provider, first_seq + i, tid, {"id": tid, "msgType": provider})
        for i, tid in enumerate(ids)
    ]


def define_levels(
    server, chief, channels: dict[str, str], clearances: dict[str, str], readers: dict[str, str]
) -> None:
    """The cloud-auditing lattice with MessageLog at [T, T]; each provider's channel at
    its level (``channels``) with its policy for ``READERS``; ``clearances`` of users;
    ``readers`` (user -> role) may see, read and register queries on MessageLog."""
    schema = {"name": "log", "attributes": [["id", "bigint"], ["msgType", "string"]], "tid": "id"}
    _ok(chief.post("/schemas", json=schema), 201)
    _ok(chief.post("/streams", json={"name": "MessageLog", "schema": "log"}), 201)
    roles = sorted(set(readers.values()))
    for role in (*roles, "INFO_PROVIDER"):
        _grant(chief, "VIEW CATALOG", "system", "system", role)
        _grant(chief, "VIEW OBJECT", "schema", "log", role)
        _grant(chief, "VIEW OBJECT", "stream", "MessageLog", role)
    for role in roles:
        _grant(chief, "READ TUPLE", "stream", "MessageLog", role)
        _grant(chief, "ADD", "system", "system", role)
    _grant(chief, "WRITE", "stream", "MessageLog", "INFO_PROVIDER")
    _grant(chief, "INJECT SP", "stream", "MessageLog", "INFO_PROVIDER")
    _ok(chief.post("/levels/coi", json={"name": "COI1", "companies": ["1", "2"]}), 201)
    _ok(chief.post("/levels/coi", json={"name": "COI2", "companies": ["A", "B", "C"]}), 201)
    _ok(chief.put("/levels/streams/MessageLog", json={"level": "[T, T]"}))
    for provider, level in channels.items():
        _ok(chief.put(f"/levels/streams/MessageLog/channels/{provider}", json={"level": level}))
    for user, level in clearances.items():
        _ok(chief.put(f"/users/{user}/clearance", json={"level": level}))
    for provider in channels:  # each channel's policy first
        assert _send(server, provider, [sp_line("MessageLog", provider, 1, READERS)])["accepted"]


@pytest.fixture(scope="module")
def setup(server):
    chief = server.login("chief", ["ADMIN"])
    define_levels(
        server,
        chief,
        {"company1": "[1, _]", "company2": "[2, _]"},
        {"ann": "[T, T]", "bob": "[1, _]"},
        {"ann": "CUSTOMER1", "bob": "CUSTOMER2"},
    )
    ann = _session(server, "ann", ["CUSTOMER1"], "[T, T]")
    bob = _session(server, "bob", ["CUSTOMER2"], "[1, _]")
    _ok(ann.post("/queries", json={"name": "q_ann", "text": SQL, "output": "ann_out"}), 201)
    _ok(bob.post("/queries", json={"name": "q_bob", "text": SQL, "output": "bob_out"}), 201)
    _grant(ann, "VIEW OBJECT", "stream", "ann_out", "CUSTOMER2")
    _grant(ann, "SUBSCRIBE", "stream", "ann_out", "CUSTOMER2")
    yield chief, ann, bob
    for client in (chief, ann, bob):
        client.close()


def test_each_query_runs_at_its_sessions_level_and_each_recipient_at_hers(server, setup) -> None:
    _chief, ann, bob = setup
    assert server.service.queries.get("q_ann").level.text == "[T, T]"
    assert server.service.queries.get("q_bob").level.text == "[1, ⊥]"
    subscribers = {
        "ann on q_ann": Subscriber(ann, "q_ann"),
        "bob on q_ann": Subscriber(bob, "q_ann"),
        "bob on q_bob": Subscriber(bob, "q_bob"),
    }
    assert {s.status for s in subscribers.values()} == {200}
    assert _send(server, "company1", _log("company1", 2, [1, 2]))["accepted"] == 2
    assert _send(server, "company2", _log("company2", 2, [11, 12]))["accepted"] == 2

    def ids(name: str) -> list[int]:
        return sorted(r["id"] for r in subscribers[name].rows())

    poll(lambda: ids("ann on q_ann") == [1, 2, 11, 12])
    poll(lambda: ids("bob on q_bob") == [1, 2])
    poll(lambda: ids("bob on q_ann") == [1, 2])
    # Bob lowers his session to public: rows at [1, ⊥] reach him no more, from Ann's
    # query nor from his own (which keeps running at [1, ⊥]); raised again, they do.
    _ok(bob.put("/me/level", json={"level": "[_, _]"}))
    assert _send(server, "company1", _log("company1", 4, [3]))["accepted"] == 1
    poll(lambda: ids("ann on q_ann") == [1, 2, 3, 11, 12])
    _ok(bob.put("/me/level", json={"level": "[1, _]"}))
    assert _send(server, "company1", _log("company1", 5, [4]))["accepted"] == 1
    poll(lambda: ids("ann on q_ann") == [1, 2, 3, 4, 11, 12])
    poll(lambda: ids("bob on q_bob") == [1, 2, 4])  # 3 came while he was public
    poll(lambda: ids("bob on q_ann") == [1, 2, 4])
    assert all(r.get("_ss_lvl_0") is None for s in subscribers.values() for r in s.rows())
    for subscriber in subscribers.values():
        subscriber.close()


def test_a_reader_sees_no_policy_of_a_channel_above_her_level(setup) -> None:
    """GET /streams/{name}/ingest: Ann at [T, T] sees both channels' policies, Bob at
    [1, ⊥] only company1's (company2's channel is at [2, ⊥]); the chief sees all."""
    chief, ann, bob = setup

    def channels(client) -> list[dict]:
        return _ok(client.get("/streams/MessageLog/ingest"))["channels"]

    assert len(channels(ann)) == 2 and len(channels(bob)) == 1
    assert [c["provider"] for c in channels(bob)] == [None]  # a reader sees no provider
    assert sorted(c["provider"] for c in channels(chief)) == ["company1", "company2"]


def test_explain_shows_the_level_conjunct(setup) -> None:
    _chief, _ann, bob = setup
    plan = _ok(bob.get("/queries/q_bob/explain"))
    assert plan["level"] == "[1, ⊥]"
    assert plan["security"][0] == "tuple_label_allows(roles: CUSTOMER2)"
    assert plan["security"][1].startswith("coalesce((`_ss_lvl_0` & -2) = 0, false)")
    assert plan["security"][1].endswith("/* level(t) dominated by [1, ⊥] */")
    # what Spark parsed: the query over its secured view, its level words carried on
    secured = plan["secured_sql"]
    assert re.search(r"FROM `ss_[0-9a-f]{32}_MessageLog`", secured), secured
    assert "_ss_lvl_0" in secured and "MessageLog`" in secured


def test_a_provider_may_not_send_a_level(server) -> None:
    line = tuple_line("MessageLog", "company1", 10, 9, {"id": 9, "msgType": "x"})
    forged = line[:-1] + ', "level": "[_, _]"}'
    valued = tuple_line("MessageLog", "company1", 11, 9, {"id": 9, "level": "[_, _]"})
    answer = _send(server, "company1", [forged, valued])
    assert answer["accepted"] == 0
    refused = [(r["line"], r["reason"], r["message"].split(":")[0]) for r in answer["rejections"]]
    assert refused == [(1, "reserved_field", "level"), (2, "reserved_field", "values.level")]


def test_a_query_may_not_name_the_level(setup) -> None:
    _chief, ann, _bob = setup
    for text in ("SELECT id, _ss_lvl_0 FROM MessageLog", "SELECT id AS level FROM MessageLog"):
        answer = ann.post("/queries", json={"name": "q_forge", "text": text})
        assert answer.status_code == 422, answer.text
        assert "reserved_name" in answer.text


def test_a_session_level_above_the_clearance_is_refused(server, setup) -> None:
    answer = _login(server, "bob", ["CUSTOMER2"], "[T, T]")
    assert answer.status_code == 403 and answer.json()["error"] == "above_clearance"
    assert answer.json()["message"].startswith("level:")
    _chief, _ann, bob = setup
    refused = bob.put("/me/level", json={"level": "[2, _]"})
    assert refused.status_code == 403 and refused.json()["error"] == "above_clearance"
