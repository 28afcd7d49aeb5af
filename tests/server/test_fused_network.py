"""A real server runs its shared networks fused (docs/query-sharing.md): one pass per micro-batch,
each row stored once, each query's batch a link into it, and security still per branch.

Al (CUSTOMER1) and Bob (CUSTOMER2) register the same selection over one stream: it runs
as two branches of one fused network, but Al may read every tuple and every attribute
and Bob only tuples 5-14 and not ``hr``, so each gets different rows and Bob never a
heart rate. Al's second selection is received by Mallory alone; revoking her SUBSCRIBE
closes that branch's switch: it then runs no Spark job and stores nothing, while Al's
and Bob's branches go on in the pass, every row of them.
"""

from __future__ import annotations

import json

import pytest

from tests.server.conftest import (
    Subscriber,
    grant,
    ok,
    poll,
    start_server,
    stop_server,
    tuple_line,
)
from tests.spark.delivery_groups import record_groups

pytestmark = pytest.mark.spark

USERS = {
    "joe": ["ADMIN"],
    "al": ["CUSTOMER1"],
    "bob": ["CUSTOMER2"],
    "mallory": ["OTHER"],
    "ward": ["INFO_PROVIDER"],
}
SCHEMA = {"name": "v", "attributes": [["id", "bigint"], ["pid", "bigint"], ["hr", "bigint"]]}
SELECTION = "SELECT pid, hr FROM vitals WHERE pid >= 2"
POLICY = (  # (roles, tuples, attributes): one policy of three sps
    ("{CUSTOMER1}", "*", "*"),
    ("{CUSTOMER2}", "[5, 14]", "{id, pid}"),
    ("{OTHER}", "*", "*"),
)


def _elements(ids: range, first: bool = False) -> str:
    """Tuples ``ids`` (pid 1 + id % 4, hr 60 + id) under the policy, which comes first."""
    lines = []
    for sn, (roles, tuples, attributes) in enumerate(POLICY if first else (), start=1):
        sp = {"type": "sp", "stream": "vitals", "provider": "ward", "seq": sn, "ts": 100}
        sp |= {"sn": sn, "sign": "+", "immutable": False}
        sp |= {"ddp": {"streams": "vitals", "tuples": tuples, "attributes": attributes}}
        sp |= {"srp": {"roles": roles, "grant_option": False}}
        lines.append(json.dumps(sp))
    for i in ids:
        values = {"id": i, "pid": 1 + i % 4, "hr": 60 + i}
        lines.append(tuple_line("vitals", "ward", 10 + i, i, values, csn=len(POLICY)))
    return "\n".join(lines)


def _expected(ids: range, readable: range | None = None) -> list[tuple]:
    """The selection's ``(pid, hr)`` rows for a reader of every tuple and attribute, or
    of tuples ``readable`` only and without ``hr``."""
    return sorted(
        (
            (1 + i % 4, None if readable else 60 + i)
            for i in ids
            if 1 + i % 4 >= 2 and (readable is None or i in readable)
        ),
        key=str,
    )


def _rows(subscriber: Subscriber) -> list[tuple]:
    return sorted(((r["pid"], r.get("hr")) for r in subscriber.rows()), key=str)


def _until(condition, *subscribers: Subscriber) -> None:
    """Polls (a micro-batch takes minutes at load 30); says what each got if it fails."""
    try:
        poll(condition, timeout=300)
    except AssertionError:
        got = [(_rows(s), [e for e, _ in s.events]) for s in subscribers]
        raise AssertionError(f"rows and events so far: {got}") from None


def test_one_fused_network_gives_each_user_her_rows_and_a_revoke_shuts_one_branch(
    spark, tmp_path, monkeypatch
) -> None:
    server = start_server(tmp_path, spark, USERS)
    try:
        joe = server.login("joe", ["ADMIN"])
        ok(joe.post("/schemas", json=SCHEMA | {"tid": "id"}), 201)
        ok(joe.post("/streams", json={"name": "vitals", "schema": "v"}), 201)
        for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
            grant(joe, permission, "stream", "vitals", "INFO_PROVIDER")
        for role in ("CUSTOMER1", "CUSTOMER2", "OTHER"):
            for permission in ("VIEW OBJECT", "READ TUPLE"):
                grant(joe, permission, "stream", "vitals", role)
            grant(joe, "VIEW CATALOG", "system", "system", role)
        for role in ("CUSTOMER1", "CUSTOMER2"):
            grant(joe, "ADD", "system", "system", role)
        al, bob = server.login("al", ["CUSTOMER1"]), server.login("bob", ["CUSTOMER2"])
        mallory = server.login("mallory", ["OTHER"])
        ok(al.post("/queries", json={"name": "mine", "text": SELECTION}), 201)
        ok(bob.post("/queries", json={"name": "his", "text": SELECTION}), 201)
        third = "SELECT pid, hr FROM vitals WHERE pid >= 3"
        ok(al.post("/queries", json={"name": "hers", "text": third}), 201)
        for permission in ("VIEW OBJECT", "SUBSCRIBE"):
            grant(al, permission, "stream", "hers_out", "OTHER")

        engine = server.service.cql
        internal = {n: server.service.queries.get(n).internal for n in ("mine", "his", "hers")}
        (network,) = engine.networks.values()
        assert network.fuse and set(network.branches) == set(internal.values())
        assert all(b.fused is not None for b in network.branches.values()), "one pass for all"

        mine, his = Subscriber(al, "mine"), Subscriber(bob, "his")
        hers = Subscriber(mallory, "hers_out")
        assert mine.status == his.status == hers.status == 200
        ward = server.login("ward", ["INFO_PROVIDER"])
        ok(ward.post("/streams/vitals/elements", content=_elements(range(3, 11), True)))
        first = range(3, 11)
        _until(lambda: len(mine.rows()) == 6 and len(his.rows()) == 5, mine, his, hers)
        _until(lambda: len(hers.rows()) == 4, mine, his, hers)
        assert _rows(mine) == _expected(first)
        assert _rows(his) == _expected(first, range(5, 15)), "his rights, not hers"
        assert all(r.get("hr") is None for r in his.rows()), "bob never gets a heart rate"
        assert sorted(r["pid"] for r in hers.rows()) == [3, 3, 4, 4]
        stores = {n: server.service.queries.get(n).store for n in internal}
        for name, store in stores.items():
            linked = [store.root / f"batch={b}" / "link.json" for b in store.batches()]
            assert linked and all(link.is_file() for link in linked), f"{name}: links"
        assert network.store.batches(), "each row stored once, in the network's store"

        # Mallory may no longer subscribe: her subscription ends, the switch of the
        # query only she received closes, and its branch leaves the pass.
        grant_body = {"permission": "SUBSCRIBE", "kind": "stream", "object": "hers_out"}
        ok(al.request("DELETE", "/grants", json=grant_body | {"role": "OTHER"}))
        poll(lambda: any(e == "closed" for e, _ in hers.events), timeout=60)
        poll(lambda: not network.handle.status["isTriggerActive"], timeout=60, every=0.05)
        tracker = spark.sparkContext.statusTracker()
        groups = {n: f"{network.name}:{i}" for n, i in internal.items()}
        groups["(one delivery job)"] = f"{network.name}:(delivery)"
        before = {n: set(tracker.getJobIdsForGroup(g)) for n, g in groups.items()}
        delivered = record_groups(monkeypatch, spark.sparkContext)
        stored = stores["hers"].batches()
        passes = len(network.store.batches())
        ok(ward.post("/streams/vitals/elements", content=_elements(range(11, 19))))
        both = range(3, 19)
        _until(lambda: len(mine.rows()) == 12 and len(his.rows()) == 8, mine, his, hers)
        assert _rows(mine) == _expected(both)
        assert _rows(his) == _expected(both, range(5, 15))
        ran = {n: set(tracker.getJobIdsForGroup(g)) - before[n] for n, g in groups.items()}
        assert not ran["hers"] and groups["hers"] not in delivered, "no job, no delivery"
        # The listening branches ran: in one delivery for both (``deliver_together``) or
        # each on its own (a Spark job each, or none: a small pass is delivered from the
        # driver, engine/frames/driver_rows.py).
        both = {groups["mine"], groups["his"]}
        assert groups["(one delivery job)"] in delivered or both <= set(delivered), delivered
        assert stores["hers"].batches() == stored, "the closed branch stored nothing"
        assert len(network.store.batches()) > passes, "the others' pass went on"
        assert len(hers.rows()) == 4, "the closed subscription got nothing more"
        for subscriber in (mine, his, hers):
            subscriber.close()
    finally:
        stop_server(server)
