"""Paper 5, section 4.1 (Figs. 8-10) through the real server over TLS.

Joe (ADMIN) adds schema s and streams in1, in2 and grants them to CUSTOMER1 and
INFO_PROVIDER; Ed (INFO_PROVIDER) sees exactly s, in1, in2 and streams prices into
both; Al (CUSTOMER1) registers q1, an aggregate over the union of in1 and in2 with
output stream out1, and receives aggregates of provenance in1, in2 and both; Bob
(CUSTOMER2) first sees nothing, then, after Joe grants him s and the aggregate-read
right on in1 and Al grants him out1, sees s, in1, out1 and receives only the
aggregates that come from in1 alone.
"""

from __future__ import annotations

import pytest

from tests.server.conftest import Subscriber, poll, sp_line, tuple_line

pytestmark = pytest.mark.spark

Q1 = (
    "SELECT symbol, sum(price) AS total, count(*) AS n FROM "
    "(SELECT symbol, price FROM in1 UNION ALL SELECT symbol, price FROM in2) AS t "
    "GROUP BY symbol"
)
ROLES_ALL = "{CUSTOMER1, CUSTOMER2}"


def _grant(client, permission, kind, obj, role) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role}
    answer = client.post("/grants", json=body)
    assert answer.status_code == 200, answer.text


def _names(catalog: dict) -> set[str]:
    return {o["name"] for kind in ("schemas", "streams", "queries") for o in catalog[kind]}


def _prices(stream: str, symbols: list[str], start_seq: int) -> list[str]:
    lines = [sp_line(stream, "ed", start_seq, ROLES_ALL)]
    for i, symbol in enumerate(symbols, 1):
        values = {"id": i, "symbol": symbol, "price": 10.0 * i, "ts": i}
        lines.append(tuple_line(stream, "ed", start_seq + i, i, values))
    return lines


def test_scenario(server) -> None:
    joe = server.login("joe", ["ADMIN"])
    # Fig. 8: Joe adds s, in1, in2 and grants them to CUSTOMER1 and INFO_PROVIDER.
    schema = {
        "name": "s",
        "attributes": [
            ["id", "bigint"],
            ["symbol", "string"],
            ["price", "double"],
            ["ts", "bigint"],
        ],
        "tid": "id",
        "event_time": "ts",
    }
    answer = joe.post("/schemas", json=schema)
    assert answer.status_code == 201, answer.text
    for stream in ("in1", "in2"):
        answer = joe.post("/streams", json={"name": stream, "schema": "s"})
        assert answer.status_code == 201, answer.text
    for role in ("CUSTOMER1", "INFO_PROVIDER"):
        _grant(joe, "VIEW CATALOG", "system", "system", role)
        for kind, obj in (("schema", "s"), ("stream", "in1"), ("stream", "in2")):
            _grant(joe, "VIEW OBJECT", kind, obj, role)
    for stream in ("in1", "in2"):
        _grant(joe, "READ TUPLE", "stream", stream, "CUSTOMER1")
        _grant(joe, "WRITE", "stream", stream, "INFO_PROVIDER")
        _grant(joe, "INJECT SP", "stream", stream, "INFO_PROVIDER")
    _grant(joe, "ADD", "system", "system", "CUSTOMER1")

    # Ed sees exactly what he was granted and streams into in1 and in2.
    ed = server.login("ed", ["INFO_PROVIDER"])
    assert _names(ed.get("/catalog").json()) == {"s", "in1", "in2"}
    for stream, symbols in (("in1", ["A", "C"]), ("in2", ["B", "C"])):
        answer = ed.post(
            f"/streams/{stream}/elements", content="\n".join(_prices(stream, symbols, 1))
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["accepted"] == 3 and answer.json()["rejected"] == 0

    # Fig. 9: Al sees s, in1, in2, inserts q1 (output out1, owned by him) and subscribes.
    al = server.login("al", ["CUSTOMER1"])
    assert _names(al.get("/catalog").json()) == {"s", "in1", "in2"}
    answer = al.post("/queries", json={"name": "q1", "text": Q1, "output": "out1"})
    assert answer.status_code == 201, answer.text
    catalog = al.get("/catalog").json()
    assert {"q1", "out1"} <= _names(catalog)
    assert [q["owner"] for q in catalog["queries"] if q["name"] == "q1"] == ["al"]
    query = server.service.queries.get("q1")
    assert any(c.startswith("_ss_src_") for c in query.handle.columns)  # provenance flows
    al_sub = Subscriber(al, "q1")
    assert al_sub.status == 200
    # Al (READ on in1 and in2) gets aggregates from in1 (A), in2 (B) and both (C).
    poll(lambda: {r["symbol"] for r in al_sub.rows()} >= {"A", "B", "C"})

    # Fig. 10: Bob sees nothing until Joe grants s, in1 and Al grants out1.
    bob = server.login("bob", ["CUSTOMER2"])
    assert _names(bob.get("/catalog").json()) == set()
    assert Subscriber(bob, "out1").status == 404
    _grant(joe, "VIEW CATALOG", "system", "system", "CUSTOMER2")
    for kind, obj in (("schema", "s"), ("stream", "in1")):
        _grant(joe, "VIEW OBJECT", kind, obj, "CUSTOMER2")
    # the aggregate-read right: aggregates over in1, never its raw tuples
    _grant(joe, "READ AGGREGATE", "stream", "in1", "CUSTOMER2")
    _grant(al, "VIEW OBJECT", "stream", "out1", "CUSTOMER2")
    _grant(al, "SUBSCRIBE", "stream", "out1", "CUSTOMER2")
    assert _names(bob.get("/catalog").json()) == {"s", "in1", "out1"}
    bob_sub = Subscriber(bob, "out1")
    assert bob_sub.status == 200
    # New prices on both streams: Bob receives the aggregates of A (in1 only) and nothing
    # of B (in2 only) or C (in1 and in2), although he is connected to out1.
    for stream, symbols in (("in1", ["A", "C"]), ("in2", ["B", "C"])):
        lines = [
            tuple_line(
                stream, "ed", 4 + i, 10 + i, {"id": 10 + i, "symbol": s, "price": 1.0, "ts": 10 + i}
            )
            for i, s in enumerate(symbols)
        ]
        assert (
            ed.post(f"/streams/{stream}/elements", content="\n".join(lines)).json()["accepted"] == 2
        )
    poll(lambda: bob_sub.rows())
    poll(lambda: len({r["symbol"] for r in al_sub.rows() if r["n"] >= 2}) == 3)
    assert {r["symbol"] for r in bob_sub.rows()} == {"A"}
    al_sub.close()
    bob_sub.close()
