"""Queries never die and restarts resume: every shape, with and without subscribers.

Each query running on its own writes every micro-batch to its own result store whoever
listens, so a stateful plan is always executed to the end (unexecuted, Spark fails it with
STATE_STORE_COMMIT_VALIDATION_FAILED when nobody subscribes). Selections, windowed
queries and joins run as branches of their stream's networks or of a shared join, whose
privacy switches compute a branch only while someone receives it: a window aggregate
nobody subscribes to stores nothing, and once subscribed its first batch is its whole
window (the window node is kept by the other branch, or rebuilt from the stream's
history). The result stores are counted across a server restart: no output row is lost
and none is written twice.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.server.conftest import (
    Subscriber,
    poll,
    serve_root,
    start_server,
    stop_server,
)
from tests.server.conftest import grant as _grant
from tests.server.conftest import ok as _ok

pytestmark = pytest.mark.spark

USERS = {"joe": ["ADMIN"], "al": ["CUSTOMER1"], "bob": ["CUSTOMER2"], "ward": ["INFO_PROVIDER"]}
PIDS = (1, 2, 3, 4)
ROUNDS_BEFORE, ROUNDS = 2, 3
"""Rounds of readings before and after the restart: two before, so that the stateful plans
run more than one batch with nobody subscribed and a late subscriber arrives between
them; one after, which every query must add to what it kept (each round is a batch of
every query, and most of this test's time)."""

QUERIES = {  # name -> (user, text)
    "sel": ("al", "SELECT pid, hr FROM vitals"),
    "agg": ("al", "SELECT pid, count(*) AS n, max(hr) AS top FROM vitals GROUP BY pid"),
    "slide": ("al", "SELECT count(*) AS n FROM vitals [RANGE 60 SLIDE 60]"),
    "rows": ("al", "SELECT pid, hr FROM vitals [ROWS 100]"),
    "rowsagg": ("al", "SELECT count(*) AS n FROM vitals [ROWS 100]"),
    "pairs": (
        "al",
        "SELECT v.pid AS pid, r.room AS room FROM vitals [ROWS 100] v "
        "JOIN rooms [ROWS 100] r ON v.pid = r.pid",
    ),
    "both": ("al", "SELECT pid FROM vitals UNION ALL SELECT pid FROM rooms"),
    "stats": ("bob", "SELECT count(*) AS n FROM vitals"),
}


def _sp(stream: str, seq: int, roles: str, ts: int, sn: int, privilege: str | None) -> dict:
    srp: dict = {"roles": roles, "grant_option": False}
    if privilege:
        srp["privilege"] = privilege
    return {
        "type": "sp",
        "stream": stream,
        "provider": "ward",
        "seq": seq,
        "ts": ts,
        "sn": sn,
        "ddp": {"streams": stream, "tuples": "*", "attributes": "*"},
        "srp": srp,
        "sign": "+",
        "immutable": False,
    }


def _policy(stream: str) -> list[dict]:
    """CUSTOMER1 reads everything; CUSTOMER2 may compute statistics only."""
    return [
        _sp(stream, 1, "{CUSTOMER1}", 100, 1, None),
        _sp(stream, 2, "{CUSTOMER2}", 100, 2, "statistics"),
    ]


def _tuple(stream: str, seq: int, values: dict) -> dict:
    return {
        "type": "tuple",
        "stream": stream,
        "provider": "ward",
        "seq": seq,
        "tid": values["id"],
        "policy": {"ts": 100, "csn": 2},
        "values": values,
    }


def _send(client, stream: str, elements: list[dict]) -> None:
    body = "\n".join(json.dumps(e) for e in elements)
    report = _ok(client.post(f"/streams/{stream}/elements", content=body))
    assert report["accepted"] == len(elements), report


DAY = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
"""The readings' day: yesterday, so that their event times are neither ahead of the
server's clock nor older than what it keeps (a fixed date ages past it)."""


def _vitals(round_no: int) -> list[dict]:
    """Round r: one reading per patient, seqs continuing after the two sps."""
    out = []
    for i, pid in enumerate(PIDS):
        n = (round_no - 1) * len(PIDS) + i + 1
        at = f"{DAY}T10:00:{n:02d}Z"
        values = {"id": n, "pid": pid, "hr": 60 + n, "at": at}
        out.append(_tuple("vitals", 2 + n, values))
    return out


def _stored(server, name: str) -> list[dict]:
    """Every row the query's result store holds, with its batch id (labels dropped)."""
    store = server.service.queries.get(name).store
    frame = store.everything(server.service.spark)
    if frame is None:
        return []
    rows = [r.asDict() for r in frame.collect()]
    return [{k: v for k, v in r.items() if not k.startswith("_ss_")} for r in rows]


_READ: dict[tuple[str, tuple[int, ...]], list[dict]] = {}
"""A store's rows by its directory and the batches it held when read."""


def _polled(server, name: str) -> list[dict]:
    """:func:`_stored` for a poll: read again only once the store holds another batch (a
    stored batch does not change), so that waiting does not read nine stores through
    the server's own Spark every half second while it works. Exact checks read anew."""
    store = server.service.queries.get(name).store
    key = (str(store.root), tuple(store.batches()))
    if key not in _READ:
        _READ[key] = _stored(server, name)
    return _READ[key]


def _latest(rows: list[dict], key: str | None = None) -> dict:
    """An aggregate's newest value per group (update mode: a group per changing batch)."""
    newest: dict = {}
    for row in sorted(rows, key=lambda r: r["batch"]):
        newest[row.get(key) if key else None] = row
    return newest


def _expected_after(rounds: int) -> dict[str, object]:
    readings = rounds * len(PIDS)
    return {
        "sel": readings,
        "rows": readings,
        "pairs": readings,
        "both": readings + len(PIDS),
    }


def _settled(server, rounds: int, received: tuple[str, ...] = ("rowsagg",)) -> bool:
    """Every query's store shows all ``rounds`` (exact counts checked by the caller);
    ``rowsagg`` only once in ``received`` (someone subscribes: its switch is on)."""
    counts = _expected_after(rounds)
    for name, expected in counts.items():
        if len(_polled(server, name)) < expected:
            return False
    readings = rounds * len(PIDS)
    agg = _latest(_polled(server, "agg"), "pid")
    scalars = ("stats", *received)
    scalar = {n: _latest(_polled(server, n)).get(None, {}).get("n") for n in scalars}
    slide = max((r["n"] for r in _polled(server, "slide")), default=0)
    return (
        len(agg) == len(PIDS)
        and all(row["n"] == rounds for row in agg.values())
        and scalar == dict.fromkeys(scalars, readings)
        and slide == readings
    )


def _check_exact(server, rounds: int) -> None:
    for name, expected in _expected_after(rounds).items():
        rows = _stored(server, name)
        assert len(rows) == expected, (name, len(rows), expected)
    sel = _stored(server, "sel")
    assert sorted(r["hr"] for r in sel) == [60 + n for n in range(1, rounds * len(PIDS) + 1)]
    pairs = _stored(server, "pairs")
    assert all(r["room"] == f"room-{r['pid']}" for r in pairs)


def set_up_shapes(joe) -> None:
    """The two streams the shapes of :data:`QUERIES` read, granted as their users need
    (ward provides both; al reads them, joins included; bob computes statistics)."""
    schemas = {
        "v": [["id", "bigint"], ["pid", "bigint"], ["hr", "bigint"], ["at", "timestamp"]],
        "r": [["id", "bigint"], ["pid", "bigint"], ["room", "string"]],
    }
    for name, attributes in schemas.items():
        body = {"name": name, "attributes": attributes, "tid": "id"}
        if name == "v":
            body["event_time"] = "at"
        _ok(joe.post("/schemas", json=body), 201)
    for stream, schema in (("vitals", "v"), ("rooms", "r")):
        _ok(joe.post("/streams", json={"name": stream, "schema": schema}), 201)
        for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
            _grant(joe, permission, "stream", stream, "INFO_PROVIDER")
        _grant(joe, "VIEW OBJECT", "stream", stream, "CUSTOMER1")
        _grant(joe, "READ TUPLE", "stream", stream, "CUSTOMER1")
        _grant(joe, "VIEW OBJECT", "stream", stream, "CUSTOMER2")
        _grant(joe, "READ AGGREGATE", "stream", stream, "CUSTOMER2")
    for role in ("CUSTOMER1", "CUSTOMER2"):
        _grant(joe, "ADD", "system", "system", role)
        _grant(joe, "VIEW CATALOG", "system", "system", role)
    limits = {"roles": {"CUSTOMER1": {"operators": ["join"], "max_queries": None}}}
    _ok(joe.put("/system/settings", json={"values": {"operator_limits": limits}}))


def test_every_shape_survives_batches_without_subscribers_and_a_restart(spark, tmp_path):
    first = start_server(tmp_path, spark, USERS)
    try:
        joe = first.login("joe", ["ADMIN"])
        set_up_shapes(joe)

        clients = {"al": first.login("al", ["CUSTOMER1"]), "bob": first.login("bob", ["CUSTOMER2"])}
        for name, (user, text) in QUERIES.items():
            _ok(clients[user].post("/queries", json={"name": name, "text": text}), 201)
        al = clients["al"]
        # sel: two subscribers; rows and pairs: one; the rest: nobody (yet).
        early = {
            "sel": [Subscriber(al, "sel"), Subscriber(al, "sel")],
            "rows": [Subscriber(al, "rows")],
            "pairs": [Subscriber(al, "pairs")],
        }
        assert all(s.status == 200 for subs in early.values() for s in subs)

        ward = first.login("ward", ["INFO_PROVIDER"])
        rooms = [
            _tuple("rooms", 2 + pid, {"id": pid, "pid": pid, "room": f"room-{pid}"}) for pid in PIDS
        ]
        _send(ward, "rooms", _policy("rooms") + rooms)
        _send(ward, "vitals", _policy("vitals"))
        late = None
        for round_no in range(1, ROUNDS_BEFORE + 1):
            _send(ward, "vitals", _vitals(round_no))
            poll(lambda r=round_no: _settled(first, r, received=()), timeout=120)
            if round_no == 1:  # arrives late: only what is computed from now on
                late = Subscriber(al, "both")
        _check_exact(first, ROUNDS_BEFORE)
        statuses = {q: first.service.queries.get(q).status() for q in QUERIES}
        assert set(statuses.values()) == {"running"}, statuses
        # A window branch nobody receives computes nothing (its switch is closed).
        assert _stored(first, "rowsagg") == []
        windows = first.service.cql.window_networks
        assert [set(n.branches) for n in windows.values()] == [
            {first.service.queries.get(q).internal for q in ("rows", "rowsagg")}
        ], "both window queries are branches of one window network"

        readings = ROUNDS_BEFORE * len(PIDS)
        for subscriber in early["sel"] + early["rows"] + early["pairs"]:
            poll(lambda s=subscriber: len(s.rows()) >= readings, timeout=60)
            assert len(subscriber.rows()) == readings
        # a join's rows carry _masked (empty for its owner): one shape for every recipient
        assert early["pairs"][0].rows()[0].keys() == {"pid", "room", "_masked"}
        poll(lambda: len(late.rows()) >= len(PIDS), timeout=60)
        assert sorted(r["pid"] for r in late.rows()) == list(PIDS)  # round 2 only
    finally:
        stop_server(first)
    for subscriber in (*early["sel"], *early["rows"], *early["pairs"], late):
        subscriber.close()
        assert subscriber.events[-1] == ("closed", {"reason": "server stopping"})

    second = serve_root(tmp_path, spark)
    try:
        statuses = {q: second.service.queries.get(q).status() for q in QUERIES}
        assert set(statuses.values()) == {"running"}, statuses
        al = second.login("al", ["CUSTOMER1"])
        late_agg = Subscriber(al, "agg")
        # Selections, windowed queries and joins run as switched branches, computed only
        # while someone receives them (subscriptions end with the server).
        sel_again, rows_again = Subscriber(al, "sel"), Subscriber(al, "rows")
        pairs_again = Subscriber(al, "pairs")
        # never received: its first batch is its whole window, at once (no append needed)
        window_count = Subscriber(al, "rowsagg")
        ward = second.login("ward", ["INFO_PROVIDER"])
        for round_no in range(ROUNDS_BEFORE + 1, ROUNDS + 1):
            _send(ward, "vitals", _vitals(round_no))
            poll(lambda r=round_no: _settled(second, r), timeout=120)
        _check_exact(second, ROUNDS)
        poll(lambda: {r["pid"]: r["n"] for r in late_agg.rows()} == dict.fromkeys(PIDS, ROUNDS))
        counts = [r["n"] for r in window_count.rows()]
        assert counts == sorted(counts) and counts[0] == ROUNDS_BEFORE * len(PIDS), counts
        assert counts[-1] == ROUNDS * len(PIDS)
        for subscriber in (late_agg, sel_again, rows_again, pairs_again, window_count):
            subscriber.close()
    finally:
        stop_server(second)


def _readable_by_customer1(server, schema: str, stream: str):
    """A new (id, x) stream CUSTOMER1 may query; returns joe's (the admin's) client."""
    joe = server.login("joe", ["ADMIN"])
    attributes = [["id", "bigint"], ["x", "bigint"]]
    _ok(joe.post("/schemas", json={"name": schema, "attributes": attributes, "tid": "id"}), 201)
    _ok(joe.post("/streams", json={"name": stream, "schema": schema}), 201)
    for permission in ("VIEW OBJECT", "READ TUPLE"):
        _grant(joe, permission, "stream", stream, "CUSTOMER1")
    for permission in ("ADD", "VIEW CATALOG"):
        _grant(joe, permission, "system", "system", "CUSTOMER1")
    return joe


def test_a_failed_query_says_so_everywhere_and_never_hangs_a_subscriber(server):
    """A query the engine stops with an error (ANSI division by zero on a real tuple):
    status ``failed`` with its error class, an ``error`` event for live subscribers, a
    409 for new ones, a 409 for a start that fails again, the full message for
    administrators only."""
    joe = _readable_by_customer1(server, "fs", "fails")
    al = server.login("al", ["CUSTOMER1"])
    text = "SELECT id, 100 / x AS ratio FROM fails"
    _ok(al.post("/queries", json={"name": "ratio", "text": text}), 201)
    subscriber = Subscriber(al, "ratio")
    assert subscriber.status == 200

    sp = _sp("fails", 1, "{CUSTOMER1}", 100, 1, None) | {"provider": "joe"}
    row = _tuple("fails", 2, {"id": 1, "x": 0}) | {
        "provider": "joe",
        "policy": {"ts": 100, "csn": 1},
    }
    _send(joe, "fails", [sp, row])

    poll(lambda: subscriber.events and subscriber.events[-1][0] == "error", timeout=120)
    assert subscriber.events[-1] == ("error", {"reason": "query failed (DIVIDE_BY_ZERO)"})
    [info] = [q for q in al.get("/catalog").json()["queries"] if q["name"] == "ratio"]
    assert info["status"] == "failed"
    live = server.service.queries.get("ratio")
    assert live.error_class == "DIVIDE_BY_ZERO" and live.failed_at is not None

    refused = al.get("/queries/ratio/subscribe")
    assert refused.status_code == 409 and refused.json()["error"] == "query_not_running"
    assert "DIVIDE_BY_ZERO" in refused.json()["message"]

    again = al.post("/queries/ratio/start")  # replays the failing batch: fails again
    assert again.status_code == 409 and again.json()["error"] == "query_failed", again.text
    assert "DIVIDE_BY_ZERO" in again.json()["message"]

    def failures(client) -> list[dict]:
        entries = _ok(client.get("/audit", params={"action": "query_failed"}))["entries"]
        return [e for e in entries if e["object"] and "ratio" in json.dumps(e["object"])]

    own = failures(al)
    assert own and all(e["detail"]["error_class"] == "DIVIDE_BY_ZERO" for e in own)
    assert all("admin_only" not in e["detail"] for e in own)  # Spark's text may quote values
    assert all("admin_only" in e["detail"] for e in failures(joe))

    _ok(al.post("/queries/ratio/stop"))
    assert server.service.queries.get("ratio").status() == "stopped"
    refused = al.get("/queries/ratio/subscribe")
    assert refused.status_code == 409 and "stopped" in refused.json()["message"]
    subscriber.close()


def test_secure_ingest_that_dies_is_restarted_and_audited(server):
    """Without ingest nothing is labelled and every query starves: the server restarts it
    and tells administrators why (here it was stopped behind the server's back)."""
    dead = server.service.ingest_query
    dead.stop()
    poll(lambda: (q := server.service.ingest_query) is not dead and q.isActive, timeout=30)
    joe = server.login("joe", ["ADMIN"])
    entries = _ok(joe.get("/audit", params={"action": "query_failed"}))["entries"]
    assert any(
        e["detail"].get("error_class") == "STOPPED_UNEXPECTEDLY" and e["actor"] is None
        for e in entries
    ), entries
    al = server.login("al", ["CUSTOMER1"])
    owned = _ok(al.get("/audit", params={"action": "query_failed"}))["entries"]
    assert all(e["actor"] == "al" for e in owned)  # the server's own entry is not hers


def test_a_disabled_owners_queries_stop_until_she_is_enabled(server):
    """A disabled user's queries must not keep reading with her roles."""
    joe = _readable_by_customer1(server, "ds", "owned")
    al = server.login("al", ["CUSTOMER1"])
    _ok(al.post("/queries", json={"name": "als", "text": "SELECT id FROM owned"}), 201)
    body = {"permission": "SUBSCRIBE", "kind": "stream", "object": "als_out", "user": "joe"}
    _ok(al.post("/grants", json=body))
    body["permission"] = "VIEW OBJECT"
    _ok(al.post("/grants", json=body))
    watcher = Subscriber(joe, "als")  # another user's subscription to al's output
    assert watcher.status == 200

    _ok(joe.post("/users/al/disable"))
    poll(lambda: watcher.events and watcher.events[-1][0] == "closed", timeout=30)
    reason = "query stopped: its owner acts with none of its roles"
    assert watcher.events[-1] == ("closed", {"reason": reason})
    query = server.service.queries.get("als")
    assert query.status() == "stopped" and query.roles == ()
    assert joe.get("/queries/als/subscribe").status_code == 409

    _ok(joe.post("/users/al/enable"))
    query = server.service.queries.get("als")
    assert query.status() == "running" and query.roles == ("CUSTOMER1",)
    watcher.close()
