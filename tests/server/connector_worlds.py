"""What the connector tests (Kafka and MQTT sources, sinks, their kill tests) set up
alike: an input stream a provider role may write, its sps and tuples as a broker
carries them (no stream, provider or seq: the binding decides those), and readers who
each watch a query of their own."""

from __future__ import annotations

from typing import Any

from tests.server.conftest import Subscriber, grant, ok, poll

QUOTE = [["id", "bigint"], ["sym", "string"], ["price", "double"]]
TICK = [["id", "bigint"], ["v", "bigint"]]


def input_stream(joe: Any, stream: str, attributes: list, role: str = "INFO_PROVIDER") -> None:
    """Schema ``<stream>_row`` and the stream, which ``role`` may WRITE and INJECT SP on."""
    schema = {"name": f"{stream}_row", "attributes": attributes, "tid": "id"}
    ok(joe.post("/schemas", json=schema), 201)
    ok(joe.post("/streams", json={"name": stream, "schema": schema["name"]}), 201)
    for permission in ("WRITE", "INJECT SP"):
        grant(joe, permission, "stream", stream, role)


def sp(
    stream: str, roles: str, ts: int = 100, sn: int = 1, sign: str = "+", attributes: str = "*"
) -> dict:
    """An sp over every tuple of ``stream`` as a broker message carries it."""
    return {
        "type": "sp",
        "ts": ts,
        "sn": sn,
        "ddp": {"streams": stream, "tuples": "*", "attributes": attributes},
        "srp": {"roles": roles, "grant_option": False},
        "sign": sign,
        "immutable": False,
    }


def quote(tid: int, price: float = 10.0) -> dict:
    return {"type": "tuple", "tid": tid, "values": {"id": tid, "sym": "ACME", "price": price}}


def ticks(count: int, role: str) -> list[dict]:
    """An sp admitting ``role``, then ticks 1 .. count - 1."""
    rows = [{"type": "tuple", "values": {"id": i, "v": i * 2}} for i in range(1, count)]
    return [sp("ticks", "{" + role + "}"), *rows]


def quote_readers(server: Any, joe: Any) -> dict[str, Subscriber]:
    """Al (CUSTOMER1) and Bob (CUSTOMER2) may read ``quotes`` and each watches a query
    of his own over it (``alq``, ``bobq``)."""
    for role in ("INFO_PROVIDER", "CUSTOMER1", "CUSTOMER2"):
        grant(joe, "VIEW OBJECT", "stream", "quotes", role)
    for role in ("CUSTOMER1", "CUSTOMER2"):
        grant(joe, "READ TUPLE", "stream", "quotes", role)
        grant(joe, "ADD", "system", "system", role)
    al, bob = server.login("al", ["CUSTOMER1"]), server.login("bob", ["CUSTOMER2"])
    text = "SELECT id, sym, price FROM quotes"
    ok(al.post("/queries", json={"name": "alq", "text": text}), 201)
    ok(bob.post("/queries", json={"name": "bobq", "text": text}), 201)
    watchers = {"al": Subscriber(al, "alq"), "bob": Subscriber(bob, "bobq")}
    for name in ("alq", "bobq"):
        poll(lambda n=name: server.service.queries.get(n).delivery.subscriptions, timeout=60)
    return watchers


def rows_by_id(subscriber: Subscriber) -> dict[int, dict]:
    return {row["id"]: row for row in subscriber.rows()}


UNBOUND_QUOTE = {**quote(99), "policy": {"ts": 100, "csn": 1}}
"""A tuple sent where the binding reads nothing: it must never land."""
IN_BAND = [
    sp("quotes", "{CUSTOMER1, CUSTOMER2}"),
    sp("quotes", "{CUSTOMER2}", sn=2, sign="-", attributes="price"),
    quote(1, 11.0),
    quote(2, 12.0),
    quote(3, 13.0),
    sp("quotes", "{CUSTOMER1}", ts=200),  # from here on Al alone
    quote(4, 14.0),
    quote(5, 15.0),
]
"""A provider's policies in-band: Al and Bob may read, Bob without the price; then
only Al."""


def check_in_band_delivery(watchers: dict[str, Subscriber]) -> None:
    """Each reader got exactly what :data:`IN_BAND`'s policy in force gave him, once."""
    al, bob = watchers["al"], watchers["bob"]
    poll(lambda: set(rows_by_id(al)) >= {1, 2, 3, 4, 5}, timeout=120)
    poll(lambda: set(rows_by_id(bob)) >= {1, 2, 3}, timeout=60)
    prices = {i: r["price"] for i, r in rows_by_id(al).items()}
    assert prices == {1: 11, 2: 12, 3: 13, 4: 14, 5: 15}
    assert all(row["_masked"] == [] for row in al.rows())
    assert {i: (r["price"], r["_masked"]) for i, r in rows_by_id(bob).items()} == {
        i: (None, ["price"]) for i in (1, 2, 3)
    }
    assert len(al.rows()) == 5 and len(bob.rows()) == 3  # each once; 99 never lands
