"""A Spark application per level, through the real server over TLS (paper 2, section 6).

The server runs with ``level_applications = separate`` (local-mode drivers): Ann
(session [1, B]) and Bob (session [2, B]) each register a query on MessageLog, whose
providers' channels are at [1, ⊥], [2, ⊥] and [⊥, B]. Checked: the two queries run in
two applications (two driver processes, neither the server's), each subscriber receives
exactly what her level dominates (the pure lattice is the oracle), also from the other's
query (the recipient decides), a restart of the server restores both queries into new
applications that resume where they were, and stopping a level's last query stops its
application while the other level's runs on.

It starts four driver JVMs besides the server's (two levels, twice), too long for the
suite's budget: it runs in long mode, ``STREAMSHIELD_LONG_TESTS=1`` (docs/chinese-wall.md
has its times); tests/unit/test_application_query.py checks the routing in the suite,
against a stand-in driver.
"""

from __future__ import annotations

import os
import time

import pytest

from streamshield.policy.lattice import Lattice
from streamshield.server.application_query import ApplicationQuery, SeparateLevels
from tests.server.conftest import Subscriber, poll, serve_root, start_server, stop_server
from tests.server.conftest import ok as _ok
from tests.server.test_level_queries import SQL, _log, _send, _session, define_levels

pytestmark = [pytest.mark.spark, pytest.mark.long]  # four driver JVM starts

USERS = {
    "chief": ["ADMIN"],
    "company1": ["INFO_PROVIDER"],
    "company2": ["INFO_PROVIDER"],
    "companyB": ["INFO_PROVIDER"],
    "ann": ["CUSTOMER1"],
    "bob": ["CUSTOMER2"],
}
CHANNELS = {"company1": "[1, _]", "company2": "[2, _]", "companyB": "[_, B]"}
SESSIONS = {"ann": ("CUSTOMER1", "[1, B]"), "bob": ("CUSTOMER2", "[2, B]")}
SEPARATE = SeparateLevels("local[1]", {"spark.driver.memory": "512m"})
LATTICE = Lattice.of({"COI1": ["1", "2"], "COI2": ["A", "B", "C"]})
START_SECONDS = 240
"""A level's first query is answered once its driver's JVM runs: over a minute at a
load of 30 on the 2 shared cores."""


def readable(user: str, sent: dict[str, list[int]]) -> list[int]:
    """The oracle: ids of the tuples sent whose channel's level the user's session
    level dominates (and, for a query's rows, its own level: the same here)."""
    level = LATTICE.parse(SESSIONS[user][1])
    return sorted(
        tid
        for provider, ids in sent.items()
        if LATTICE.dominated(LATTICE.parse(CHANNELS[provider]), level)
        for tid in ids
    )


def oracle(sent: dict[str, list[int]]) -> dict[str, list[int]]:
    """What each subscription receives: Bob of Ann's query what both levels dominate."""
    ann, bob = readable("ann", sent), readable("bob", sent)
    return {"ann": ann, "bob": bob, "bob on ann's": sorted(set(ann) & set(bob))}


def login(server, user: str):
    role, level = SESSIONS[user]
    return _session(server, user, [role], level)


def send(server, sent: dict[str, list[int]], first_seq: int) -> None:
    for provider, ids in sent.items():
        assert _send(server, provider, _log(provider, first_seq, ids))["accepted"] == len(ids)


def subscribed(server, clients) -> dict[str, Subscriber]:
    ann, bob = clients
    subscribers = {
        "ann": Subscriber(ann, "q_ann"),
        "bob": Subscriber(bob, "q_bob"),
        "bob on ann's": Subscriber(bob, "q_ann"),
    }
    assert {s.status for s in subscribers.values()} == {200}
    return subscribers


def received(subscribers: dict[str, Subscriber], oracle: dict[str, list[int]]) -> None:
    for name, expected in oracle.items():
        poll(lambda name=name, expected=expected: _ids(subscribers[name]) == expected, 120)
    for subscriber in subscribers.values():
        assert all(r.get("_ss_lvl_0") is None for r in subscriber.rows())  # no label leaves
        subscriber.close()


def _ids(subscriber: Subscriber) -> list[int]:
    return sorted(r["id"] for r in subscriber.rows())


def applications(server) -> dict[str, object]:
    """Query name -> the level application its handle runs in."""
    out = {}
    for query in server.service.queries.all():
        assert isinstance(query.handle, ApplicationQuery), query.name
        out[query.name] = query.handle.application
    return out


def test_levels_run_in_applications_of_their_own_through_a_restart(spark, tmp_path) -> None:
    root = tmp_path / "root"
    took = Took()
    server = start_server(root, spark, USERS, separate_levels=SEPARATE)
    try:
        with server.login("chief", ["ADMIN"]) as chief:
            define_levels(
                server,
                chief,
                CHANNELS,
                {user: level for user, (_role, level) in SESSIONS.items()},
                {user: role for user, (role, _level) in SESSIONS.items()},
            )
        clients = login(server, "ann"), login(server, "bob")
        took("server start, levels and grants")
        for client, name in zip(clients, ("q_ann", "q_bob"), strict=True):
            body = {"name": name, "text": SQL, "output": f"{name}_out"}
            _ok(client.post("/queries", json=body, timeout=START_SECONDS), 201)
            took(f"register {name} (its level's driver starts)")
        ann = clients[0]
        _ok(ann.post("/grants", json=_grant("q_ann_out", "VIEW OBJECT")))
        _ok(ann.post("/grants", json=_grant("q_ann_out", "SUBSCRIBE")))

        # Two levels, two applications: two driver processes, neither this one.
        apps = applications(server)
        first = {name: app.wait_ready()["pid"] for name, app in apps.items()}
        assert len(set(first.values())) == 2 and os.getpid() not in first.values()
        assert len(server.service.applications.active()) == 2

        subscribers = subscribed(server, clients)
        sent = {"company1": [1, 2], "company2": [11, 12], "companyB": [31, 32]}
        send(server, sent, 2)
        assert oracle(sent) == {
            "ann": [1, 2, 31, 32],
            "bob": [11, 12, 31, 32],
            "bob on ann's": [31, 32],
        }
        received(subscribers, oracle(sent))
        took("rows sent to every subscriber's last row")
        for client in clients:
            client.close()
        stop_server(server)
        took("server stop (both applications with it)")
        assert all(app.process.poll() == 0 for app in apps.values())  # stopped with the server

        # A restart restores both queries, each into a new application of its level.
        server = serve_root(root, spark, separate_levels=SEPARATE)
        took("server restart (both queries restored into new applications)")
        apps = applications(server)
        assert {q.name: q.status() for q in server.service.queries.all()} == {
            "q_ann": "running",
            "q_bob": "running",
        }
        again = {name: app.wait_ready()["pid"] for name, app in apps.items()}
        assert len(set(again.values())) == 2 and not set(again.values()) & set(first.values())
        clients = login(server, "ann"), login(server, "bob")
        subscribers = subscribed(server, clients)
        later = {"company1": [3], "company2": [13], "companyB": [33]}
        send(server, later, 4)
        received(subscribers, oracle(later))  # once each: resumed from the checkpoints
        took("rows sent after the restart to every subscriber's last row")

        # Stopping a level's last query stops its application; the other runs on.
        _ok(clients[1].post("/queries/q_bob/stop"))
        assert apps["q_bob"].process.wait(60) == 0
        took("stop of a level's last query to its driver's exit")
        assert apps["q_ann"].process.poll() is None
        assert list(server.service.applications.active()) == [apps["q_ann"].name]

        # Starting it again starts a new driver for its level (outside the server's locks).
        _ok(clients[1].post("/queries/q_bob/start", timeout=START_SECONDS))
        took("start of a stopped level query (its level's driver starts)")
        restarted = applications(server)["q_bob"]
        assert restarted.wait_ready()["pid"] not in {*first.values(), *again.values()}
        assert len(server.service.applications.active()) == 2
        for client in clients:
            client.close()
    finally:
        if server.service.started:  # not stopped for the restart yet, or restarted
            stop_server(server)
    assert server.service.applications.active() == {}


class Took:
    """Phases' seconds, printed (``pytest -s``) for docs/chinese-wall.md's figures."""

    def __init__(self) -> None:
        self.since = time.monotonic()

    def __call__(self, phase: str) -> None:
        now = time.monotonic()
        print(f"{phase}: {now - self.since:.1f} s")
        self.since = now


def _grant(stream: str, permission: str) -> dict:
    return {"permission": permission, "kind": "stream", "object": stream, "role": "CUSTOMER2"}
