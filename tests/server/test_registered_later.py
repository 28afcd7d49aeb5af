"""A query registered after the data reads every labelled batch still kept
(docs/administration.md, "What a query registered later reads"), whatever its shape and
level: the cloud-auditing MessageLog of paper 2 through the real server, levels on (the
companies' Chinese-Wall levels) and off.

Each shape is registered twice by the same owner: once before the two phases are
ingested (subscribed at once), once after them with no append to follow. Both must hold
the rows the plain-Python oracle gives. A selection, a windowed query and a join run as
switched branches (a shared network, a window network, a shared join): nobody receives
the later one while the data arrives, so its history waits for its first subscriber and
reaches her without another append. An aggregate (a tumbling window's too) folds every
batch from its registration on (it has no switch): what it computed before she
subscribed is replayed with ``after=-1``; a window whose end has passed was released
with its tuples, no later append needed.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter

import pytest

from streamshield.examples import cloud_audit as ca
from streamshield.examples import cloud_audit_oracle as oracle
from tests.server.conftest import PASSWORD, Subscriber, poll, start_server, stop_server
from tests.server.test_cloud_audit import ROLE, SETTLE, USERS, _send, _setup_catalog
from tests.server.test_cloud_audit import _ok as ok

pytestmark = pytest.mark.spark

QUERIES = {q.name: q for q in ca.QUERIES}
FAILED = 'SELECT eventId FROM MessageLog [ROWS 100] WHERE outcome = "failure"'
SENDS = 'SELECT count(*) AS n FROM MessageLog WHERE msgType = "send"'
TUMBLING = "SELECT count(*) AS n FROM MessageLog [RANGE 100 SLIDE 100]"
SHAPES = {  # name -> (owner, text, kind: select | latest | replayed | windows)
    "sel": ("session_b", QUERIES["q3"].text, "select"),  # a shared network's branch
    "win": ("session_coi2", FAILED, "select"),  # a window network's ISTREAM branch
    "winagg": ("cloud_1b", QUERIES["q5"].text, "latest"),  # a window network's aggregate
    "join": ("cloud_1b", QUERIES["q6"].text, "select"),  # a shared join's subscription
    "agg": ("auditor1", SENDS, "replayed"),  # a folding aggregate branch (no switch)
    # a tumbling window's count, folded: each window's row is released with its tuples,
    # so a window whose end has passed needs no later append (docs/query-sharing.md)
    "tumble": ("auditor1", TUMBLING, "windows"),
}


def _readable(owner: str, levels: bool) -> list[oracle.Logged]:
    tuples = oracle.logged()
    if not levels:
        return tuples
    return oracle.readable(ca.level(ca.user(owner).level), tuples, ca.lattice())


def _expected(name: str, levels: bool) -> list[tuple]:
    """The oracle's rows of shape ``name`` at its owner's level (everything: levels off)."""
    owner, _text, _kind = SHAPES[name]
    seen = _readable(owner, levels)
    if name == "win":
        rows = [{"eventId": t.values["eventId"]} for t in seen if t.values["outcome"] == "failure"]
    elif name == "agg":
        rows = [{"n": sum(t.values["msgType"] == "send" for t in seen)}]
    elif name == "tumble":  # bigint event time: seconds, windows [100 k, 100 (k + 1))
        starts = Counter(int(t.values["timestamp"]) // 100 for t in seen)
        rows = [{"n": n} for n in starts.values()]
    else:
        query = {"sel": "q3", "winagg": "q5", "join": "q6"}[name]
        rows = [dict(r.values) for r in oracle.EVALUATORS[query](ca.lattice(), seen)]
    return sorted(tuple(sorted(r.items())) for r in rows)


def _got(subscriber: Subscriber, kind: str) -> list[tuple]:
    rows = [{k: v for k, v in r.items() if k != "_masked"} for r in subscriber.rows()]
    if kind == "windows":  # each window's newest count (update mode: a row per change)
        rows = [{"n": r["n"]} for r in {json.dumps(r["window"]): r for r in rows}.values()]
    elif kind != "select":  # an aggregate: its newest row is its answer now
        rows = rows[-1:]
    return sorted(tuple(sorted(r.items())) for r in rows)


def _session(server, owner: str, levels: bool):
    body = {"user": owner, "password": PASSWORD, "roles": [ROLE]}
    if levels:
        body["level"] = ca.user(owner).level
    with server.client() as anonymous:
        token = ok(anonymous.post("/login", json=body))["token"]
    return server.client(token)


def _settle(subscriber: Subscriber, kind: str, want: list[tuple], who: str) -> None:
    with contextlib.suppress(AssertionError):  # the comparison shows what arrived
        poll(lambda: _got(subscriber, kind) == want, SETTLE)
    assert _got(subscriber, kind) == want, (who, subscriber.events[-3:])


@pytest.mark.parametrize(
    "levels",
    # levels off in long mode: the same paths, less to check, a second server's start
    [pytest.param(True, id="levels"), pytest.param(False, id="no-levels", marks=pytest.mark.long)],
)
def test_a_query_registered_after_the_data_reads_the_kept_history(spark, tmp_path, levels):
    server = start_server(tmp_path, spark, USERS)
    subscribers: list[Subscriber] = []
    try:
        chief = server.login("chief", ["ADMIN"])
        _setup_catalog(chief, levels, event_time="timestamp")
        sessions = {owner: _session(server, owner, levels) for owner, _, _ in SHAPES.values()}

        def register(name: str, when: str) -> Subscriber:
            owner, text, kind = SHAPES[name]
            body = {"name": f"{name}_{when}", "text": text}
            ok(sessions[owner].post("/queries", json=body), 201)
            replayed = kind in ("replayed", "windows")
            path = f"/queries/{name}_{when}/subscribe" + ("?after=-1" if replayed else "")
            subscriber = Subscriber(sessions[owner], f"{name}_{when}", path)
            assert subscriber.status == 200
            subscribers.append(subscriber)
            return subscriber

        before = {name: register(name, "before") for name in SHAPES}
        _send(server, 1)
        _send(server, 2)
        for name, subscriber in before.items():
            _settle(subscriber, SHAPES[name][2], _expected(name, levels), f"{name} before")
        after = {name: register(name, "after") for name in SHAPES}  # no append follows
        for name, subscriber in after.items():
            want = _expected(name, levels)
            assert want, name  # every shape has rows to read back
            _settle(subscriber, SHAPES[name][2], want, f"{name} after")
        if levels:  # the history reaches another recipient only as far as her level
            owner = sessions["session_coi2"]
            for permission in ("VIEW OBJECT", "SUBSCRIBE"):
                body = {"permission": permission, "kind": "stream", "object": "win_after_out"}
                ok(owner.post("/grants", json=body | {"role": ROLE}))
            lower = Subscriber(
                sessions["session_b"], "win_after", "/queries/win_after/subscribe?after=-1"
            )
            subscribers.append(lower)
            # A window's rows are written at its query's level [⊥, T] (write-equal,
            # docs/chinese-wall.md "Output levels"): the [⊥, B] recipient is replayed the
            # history and reads none of it, although some of its tuples are at [⊥, B].
            assert _readable("session_b", levels), "the lower level has tuples of its own"
            poll(lambda: any(event == "replayed" for event, _ in lower.events), SETTLE)
            assert _got(lower, "select") == [], ("win after, a lower recipient", lower.events)
    finally:
        for subscriber in subscribers:
            subscriber.close()
        stop_server(server)
