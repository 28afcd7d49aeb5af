"""A shared query's output reaches each recipient only as far as *her* roles allow.

Al (CUSTOMER1) reads every tuple and attribute of the ward stream. Bob (CUSTOMER2) reads
tuples 1-5 only and not their temperature; Mallory (OTHER) may only use the stream for
statistics. Al shares his queries' outputs with both (SUBSCRIBE). The recipient decides:
each recipient gets what her own query would return (the same query registered by
her, subscribed beside the shared one), never more: rows she could not read are
dropped, attributes masked, aggregates over tuples she could not read withheld.
Before the fix delivery checked only the stream-level right, so Bob received every
tuple and every temperature of Al's queries.
"""

from __future__ import annotations

import json

import pytest

from tests.server.conftest import Subscriber, poll, server, spark  # noqa: F401 (fixtures)
from tests.server.conftest import grant as _grant
from tests.server.conftest import ok as _ok

pytestmark = pytest.mark.spark

SCHEMA = {
    "name": "vitals",
    "attributes": [["id", "bigint"], ["hr", "double"], ["temp", "double"], ["ts", "bigint"]],
    "tid": "id",
}
QUERIES = {
    "rows": "SELECT id, hr, temp FROM ward",
    "chosen_by_temp": "SELECT id, hr FROM ward WHERE temp > 36.15",
    "per_patient": (
        "SELECT id, count(*) AS n, max(hr) AS top, max(temp) AS hot FROM ward GROUP BY id"
    ),
    "overall": "SELECT count(*) AS n, avg(hr) AS m FROM ward",
}


def _sp(sn: int, tuples: str, attributes: str, roles: str, privilege: str | None = None) -> str:
    srp: dict = {"roles": roles, "grant_option": False}
    if privilege:
        srp["privilege"] = privilege
    return json.dumps(
        {
            "type": "sp",
            "stream": "ward",
            "provider": "ed",
            "seq": sn,
            "ts": 100,
            "sn": sn,
            "ddp": {"streams": "ward", "tuples": tuples, "attributes": attributes},
            "srp": srp,
            "sign": "+",
            "immutable": False,
        }
    )


def _tuple(seq: int, tid: int) -> str:
    values = {"id": tid, "hr": 60.0 + tid, "temp": 36.0 + tid / 10, "ts": tid}
    return json.dumps(
        {
            "type": "tuple",
            "stream": "ward",
            "provider": "ed",
            "seq": seq,
            "tid": tid,
            "policy": {"ts": 100, "csn": 3},
            "values": values,
        }
    )


@pytest.fixture(scope="module")
def ward(server):  # noqa: F811
    """The stream, its policy (in the data), Al's queries and everyone's subscriptions."""
    joe = server.login("joe", ["ADMIN"])
    _ok(joe.post("/schemas", json=SCHEMA), 201)
    _ok(joe.post("/streams", json={"name": "ward", "schema": "vitals"}), 201)
    for role in ("CUSTOMER1", "CUSTOMER2", "OTHER", "INFO_PROVIDER"):
        _grant(joe, "VIEW CATALOG", "system", "system", role)
        _grant(joe, "VIEW OBJECT", "stream", "ward", role)
    for role in ("CUSTOMER1", "CUSTOMER2", "OTHER"):
        _grant(joe, "ADD", "system", "system", role)
    for role in ("CUSTOMER1", "CUSTOMER2"):
        _grant(joe, "READ TUPLE", "stream", "ward", role)
    _grant(joe, "READ AGGREGATE", "stream", "ward", "OTHER")
    for permission in ("WRITE", "INJECT SP"):
        _grant(joe, permission, "stream", "ward", "INFO_PROVIDER")

    al = server.login("al", ["CUSTOMER1"])
    bob = server.login("bob", ["CUSTOMER2"])
    mallory = server.login("mallory", ["OTHER"])
    for name, text in QUERIES.items():
        _ok(al.post("/queries", json={"name": f"al_{name}", "text": text}), 201)
        for role in ("CUSTOMER2", "OTHER"):
            _grant(al, "VIEW OBJECT", "stream", f"al_{name}_out", role)
            _grant(al, "SUBSCRIBE", "stream", f"al_{name}_out", role)
        _ok(bob.post("/queries", json={"name": f"bob_{name}", "text": text}), 201)
    _ok(mallory.post("/queries", json={"name": "mallory_overall", "text": QUERIES["overall"]}), 201)

    subscribers = {}
    for name in QUERIES:
        subscribers["al", name] = Subscriber(al, f"al_{name}")
        subscribers["bob", name] = Subscriber(bob, f"al_{name}_out")
        subscribers["bob_own", name] = Subscriber(bob, f"bob_{name}")
        subscribers["mallory", name] = Subscriber(mallory, f"al_{name}_out")
    subscribers["mallory_own", "overall"] = Subscriber(mallory, "mallory_overall")
    assert all(s.status == 200 for s in subscribers.values())

    ed = server.login("ed", ["INFO_PROVIDER"])
    policy = [
        _sp(1, "*", "*", "{CUSTOMER1}"),
        _sp(2, "[1, 5]", "{id, hr, ts}", "{CUSTOMER2}"),
        _sp(3, "*", "*", "{OTHER}", "statistics"),
    ]
    lines = policy + [_tuple(3 + tid, tid) for tid in range(1, 11)]
    assert _ok(ed.post("/streams/ward/elements", content="\n".join(lines)))["accepted"] == 13
    poll(lambda: len(subscribers["al", "rows"].rows()) == 10, timeout=120)
    poll(lambda: len(_final(subscribers["al", "per_patient"].rows(), "id")) == 10, timeout=60)
    poll(lambda: _final(subscribers["al", "overall"].rows()).get(()) is not None, timeout=60)
    poll(lambda: subscribers["mallory_own", "overall"].rows(), timeout=60)
    poll(lambda: len(subscribers["bob_own", "rows"].rows()) == 5, timeout=60)
    poll(lambda: len(_final(subscribers["bob_own", "per_patient"].rows(), "id")) == 5, timeout=60)
    # Stopping a query waits for its batch to end, every recipient served: then each
    # subscription ends with ``closed`` after its rows, and an empty one is truly empty.
    for owner, prefix, names in ((al, "al", QUERIES), (bob, "bob", QUERIES)):
        for name in names:
            _ok(owner.post(f"/queries/{prefix}_{name}/stop"))
    _ok(mallory.post("/queries/mallory_overall/stop"))
    for subscriber in subscribers.values():
        poll(lambda s=subscriber: any(e == "closed" for e, _ in s.events), timeout=60)
    yield subscribers
    for subscriber in subscribers.values():
        subscriber.close()


def _final(rows: list[dict], *key: str) -> dict:
    """The last update of each group (aggregates emit updates in update mode)."""
    return {tuple(r[k] for k in key): r for r in rows}


def _by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["id"])


def test_narrower_tuples_and_attributes_are_dropped_and_masked(ward) -> None:
    shared, own = ward["bob", "rows"].rows(), ward["bob_own", "rows"].rows()
    assert [r["id"] for r in _by_id(shared)] == [1, 2, 3, 4, 5], "tuples 6-10 are not his"
    assert all(r["temp"] is None and r["_masked"] == ["temp"] for r in shared)
    assert _by_id(shared) == _by_id(own), "exactly what his own query returns"
    assert {r["temp"] for r in ward["al", "rows"].rows()} != {None}, "Al's rows have them"


def test_a_row_chosen_by_an_attribute_the_recipient_cannot_read_is_dropped(ward) -> None:
    """``WHERE temp > 36.15`` tells its reader about temp: Bob may not know it."""
    assert len(ward["al", "chosen_by_temp"].rows()) == 9
    assert ward["bob", "chosen_by_temp"].rows() == ward["bob_own", "chosen_by_temp"].rows() == []


def test_a_measure_over_an_attribute_the_recipient_cannot_read_is_masked(ward) -> None:
    """Al's per-patient aggregate: Bob gets his five groups, ``hot`` (over temp) masked,
    the rest as his own query computes it."""
    shared = _final(ward["bob", "per_patient"].rows(), "id")
    own = _final(ward["bob_own", "per_patient"].rows(), "id")
    assert sorted(shared) == sorted(own) == [(i,) for i in range(1, 6)]
    for key, row in shared.items():
        assert row["hot"] is None and row["_masked"] == ["hot"]
        assert {k: row[k] for k in ("id", "n", "top", "hot")} == {
            k: own[key][k] for k in ("id", "n", "top", "hot")
        }
    assert len(_final(ward["al", "per_patient"].rows(), "id")) == 10


def test_statistics_only_recipients_get_released_aggregates_and_no_rows(ward) -> None:
    shared = _final(ward["mallory", "overall"].rows())
    own = _final(ward["mallory_own", "overall"].rows())
    assert shared and shared == own and shared[()]["n"] == 10
    for name in ("rows", "chosen_by_temp", "per_patient"):
        assert ward["mallory", name].rows() == [], f"statistics-only: no {name}"


def test_an_aggregate_over_tuples_the_recipient_cannot_read_is_withheld(ward) -> None:
    """Bob's own query counts his 5 tuples; Al's counts 10, which would tell him more."""
    assert _final(ward["bob_own", "overall"].rows())[()]["n"] == 5
    assert ward["bob", "overall"].rows() == []
