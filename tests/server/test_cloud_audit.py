"""The paper's cloud-auditing scenario end to end through the real server over TLS
(paper 2, section 4), checked row by row against the plain-Python oracle.

Five auditors log in at [1, ⊥], [⊥, B], [⊥, T], [1, B] and [T, T] (their clearances),
register Q1-Q5 at their levels and subscribe; two of them also subscribe to the [⊥, T]
query Q4 and receive only the rows their own level dominates. The five companies send
their MessageLog on their own channels (each at its company's level) in two phases;
between them the [⊥, T] auditor lowers her session to [⊥, B] and from then on receives
only CompanyB's rows, also from her own [⊥, T] query. One server, batched appends.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from streamshield.examples import cloud_audit as ca
from streamshield.examples import cloud_audit_oracle as oracle
from tests.server.conftest import PASSWORD, Subscriber, poll, start_server, stop_server
from tests.server.conftest import grant as _grant
from tests.server.conftest import ok as _ok

pytestmark = pytest.mark.spark

ROLE = "CUSTOMER1"  # the auditors' role, granted by every company's sp
USERS = {
    "chief": ["ADMIN"],
    **{ca.provider(c): ["INFO_PROVIDER"] for c in ca.COMPANIES},
    **{u.name: [ROLE] for u in ca.USERS},
}
QUERIES = {q.name: q for q in ca.QUERIES}
CHECKED = tuple(QUERIES)
"""All seven, the self-joins Q6 and Q7 included (planned as written each would spend minutes per
micro-batch planning, docs/chinese-wall.md "Why the joins were slow")."""
SETTLE = float(os.environ.get("CLOUD_AUDIT_SETTLE", "180"))
"""Seconds a subscription may take to fill: an upper bound, not a sleep (the wait ends
with the last row); raise it on a machine loaded far beyond its cores."""
SHARED = ("q4", "q7")
"""Queries whose output other auditors subscribe to (beside their owners)."""
SUBSCRIPTIONS = [(q.owner, q.name) for q in ca.QUERIES if q.name in CHECKED] + [
    ("session_b", "q4"),  # [⊥, B] under the [⊥, T] query: CompanyB's rows only
    ("auditor1", "q4"),  # [1, ⊥]: no Q4 row is hers
    # Q7 is a join at [T, T]: its pairs are written at [T, T] (write-equal), so
    # neither auditor below the top receives one, not even her own companies' pairs.
    ("auditor1", "q7"),  # [1, ⊥]
    ("cloud_1b", "q7"),  # [1, B]
]


@pytest.fixture(scope="module")
def server(spark, tmp_path_factory):
    started = start_server(tmp_path_factory.mktemp("cloud-audit"), spark, USERS)
    yield started
    stop_server(started)


def _setup_catalog(chief, levels: bool = True, event_time: str | None = None) -> None:
    """The stream, grants and limits; ``levels``: the COI classes, the stream's and
    channels' levels and the auditors' clearances too; ``event_time``: the attribute
    MessageLog's RANGE windows read (none in the paper's queries)."""
    schema = {"name": ca.SCHEMA, "attributes": [list(a) for a in ca.ATTRIBUTES], "tid": ca.TID}
    if event_time is not None:
        schema["event_time"] = event_time
    _ok(chief.post("/schemas", json=schema), 201)
    _ok(chief.post("/streams", json={"name": ca.STREAM, "schema": ca.SCHEMA}), 201)
    for role in (ROLE, "INFO_PROVIDER"):
        _grant(chief, "VIEW CATALOG", "system", "system", role)
        _grant(chief, "VIEW OBJECT", "schema", ca.SCHEMA, role)
        _grant(chief, "VIEW OBJECT", "stream", ca.STREAM, role)
    _grant(chief, "READ TUPLE", "stream", ca.STREAM, ROLE)
    _grant(chief, "ADD", "system", "system", ROLE)
    _grant(chief, "WRITE", "stream", ca.STREAM, "INFO_PROVIDER")
    _grant(chief, "INJECT SP", "stream", ca.STREAM, "INFO_PROVIDER")
    joins = {"operator_limits": {"roles": {ROLE: {"operators": ["join"]}}}}  # Q6, Q7
    _ok(chief.put("/system/settings", json={"values": joins}))
    if not levels:
        return
    for name, companies in ca.COI_CLASSES.items():
        _ok(chief.post("/levels/coi", json={"name": name, "companies": list(companies)}), 201)
    _ok(chief.put(f"/levels/streams/{ca.STREAM}", json={"level": ca.STREAM_LEVEL}))
    for company in ca.COMPANIES:
        path = f"/levels/streams/{ca.STREAM}/channels/{ca.provider(company)}"
        _ok(chief.put(path, json={"level": ca.channel_level(company)}))
    for user in ca.USERS:
        _ok(chief.put(f"/users/{user.name}/clearance", json={"level": user.level}))


def _session(server, user: ca.User):
    with server.client() as anonymous:
        body = {"user": user.name, "password": PASSWORD, "roles": [ROLE], "level": user.level}
        answer = _ok(anonymous.post("/login", json=body))
    assert answer["level"] == user.level.replace("_", "⊥")
    return server.client(answer["token"])


def _send(server, phase: int) -> None:
    for company in ca.COMPANIES:
        lines = ca.wire_lines(company, phase, role=ROLE)
        with server.login(ca.provider(company), ["INFO_PROVIDER"]) as client:
            answer = _ok(client.post(f"/streams/{ca.STREAM}/elements", content="\n".join(lines)))
        assert answer["accepted"] == len(lines), answer


def _shape(rows) -> list[tuple]:
    """Rows as sorted tuples of (column, value), for a multiset comparison."""
    return sorted(tuple(sorted((k, v) for k, v in r.items() if k != "_masked")) for r in rows)


def _expected(rows: list[oracle.Row]) -> list[tuple]:
    return sorted(row.values for row in rows)


def _settle(subscriber: Subscriber, want: list[tuple], last: bool = False, who=()) -> None:
    """Waits until the subscriber holds as many rows as ``want`` (``last``: an RSTREAM,
    one row per micro-batch, whose latest row is the answer now), then compares."""

    def got() -> list[tuple]:
        rows = subscriber.rows()
        return _shape(rows[-1:] if last else rows)

    with contextlib.suppress(AssertionError):  # the comparison below shows what arrived
        poll(lambda: got() == want if last else len(subscriber.rows()) >= len(want), SETTLE)
    assert got() == want, (who, subscriber.events[-3:])


@pytest.fixture(scope="module")
def scenario(server):
    chief = server.login("chief", ["ADMIN"])
    _setup_catalog(chief)
    sessions = {u.name: _session(server, u) for u in ca.USERS}
    for query in (q for q in ca.QUERIES if q.name in CHECKED):
        owner = sessions[query.owner]
        body = {"name": query.name, "text": query.text, "output": f"{query.name}_out"}
        _ok(owner.post("/queries", json=body), 201)
        if query.name in SHARED:
            _grant(owner, "VIEW OBJECT", "stream", f"{query.name}_out", ROLE)
            _grant(owner, "SUBSCRIBE", "stream", f"{query.name}_out", ROLE)
    subscribers = {(u, q): Subscriber(sessions[u], q) for u, q in SUBSCRIPTIONS}
    assert {s.status for s in subscribers.values()} == {200}
    yield sessions, subscribers
    for subscriber in subscribers.values():
        subscriber.close()
    for client in (chief, *sessions.values()):
        client.close()


def test_every_query_runs_at_its_owners_level(server, scenario) -> None:
    for query in (q for q in ca.QUERIES if q.name in CHECKED):
        level = ca.level(query.level)
        assert server.service.queries.get(query.name).level.text == ca.lattice().format(level)


def test_each_user_receives_exactly_what_the_oracle_says(server, scenario) -> None:
    sessions, subscribers = scenario
    lowered = (ca.LOWERED_USER, "q4")
    _send(server, 1)
    phase_one = [t for t in oracle.logged() if t.phase == 1]
    before = ca.level(ca.user(ca.LOWERED_USER).level)
    wanted = _expected(oracle.delivered(oracle.answers(QUERIES["q4"], phase_one), before))
    assert wanted  # she receives rows in phase 1 (and, at [⊥, T], one of CompanyA's)
    _settle(subscribers[lowered], wanted)
    _ok(sessions[ca.LOWERED_USER].put("/me/level", json={"level": ca.LOWERED_TO}))
    _send(server, 2)

    for (user, name), subscriber in subscribers.items():
        query = QUERIES[name]
        want = _expected(oracle.received(query, user))
        if want:
            _settle(subscriber, want, last=query.kind == "aggregate", who=(user, name))
    # The streams are drained (every non-empty subscription got its last row); the
    # ones the oracle leaves empty got nothing, and no row carried a level word.
    for (user, name), subscriber in subscribers.items():
        if not oracle.received(QUERIES[name], user):
            assert subscriber.rows() == [], (user, name)
        assert all(not any(k.startswith("_ss_") for k in r) for r in subscriber.rows())
    full = oracle.answers(QUERIES["q4"])
    assert len(oracle.received(QUERIES["q4"], ca.LOWERED_USER)) < len(full)
