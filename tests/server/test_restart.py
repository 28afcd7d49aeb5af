"""After a restart on the same root, queries recorded as running run again: from their
own checkpoints, with their owner's recorded roles (only those the owner still holds).
"""

from __future__ import annotations

import pytest

from tests.server.conftest import (
    PASSWORD,
    Subscriber,
    poll,
    serve_root,
    sp_line,
    start_server,
    stop_server,
    tuple_line,
)

pytestmark = pytest.mark.spark

USERS = {"joe": ["ADMIN"], "al": ["CUSTOMER1", "OTHER"], "bob": ["CUSTOMER2"]}


def _grant(client, permission, kind, obj, role) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role}
    assert client.post("/grants", json=body).status_code == 200


def _register(client, name: str) -> None:
    answer = client.post("/queries", json={"name": name, "text": "SELECT symbol FROM ticks"})
    assert answer.status_code == 201, answer.text


def test_running_queries_restart_from_their_checkpoints(spark, tmp_path) -> None:
    first = start_server(tmp_path, spark, USERS)
    try:
        joe = first.login("joe", ["ADMIN"])
        schema = {"name": "t", "attributes": [["id", "bigint"], ["symbol", "string"]], "tid": "id"}
        assert joe.post("/schemas", json=schema).status_code == 201
        assert joe.post("/streams", json={"name": "ticks", "schema": "t"}).status_code == 201
        for role in ("CUSTOMER1", "CUSTOMER2"):
            _grant(joe, "VIEW CATALOG", "system", "system", role)
            _grant(joe, "VIEW OBJECT", "stream", "ticks", role)
            _grant(joe, "READ TUPLE", "stream", "ticks", role)
            _grant(joe, "ADD", "system", "system", role)
        al = first.login("al", ["CUSTOMER1"])  # activates CUSTOMER1 only, not OTHER
        _register(al, "q_run")
        _register(al, "q_stop")
        assert al.post("/queries/q_stop/stop").status_code == 200
        _register(first.login("bob", ["CUSTOMER2"]), "q_bob")
        before = {
            name: (
                first.service.queries.get(name).internal,
                first.service.queries.get(name).handle.handle.id,
            )
            for name in ("q_run", "q_bob")
        }
        # Bob loses the role his query runs with: it must not come back with it.
        security = first.service.security
        security.set_user_roles(security.login("joe", PASSWORD, ["ADMIN"]), "bob", ["OTHER"])
    finally:
        stop_server(first)

    second = serve_root(tmp_path, spark)
    try:
        queries = second.service.queries
        run = queries.get("q_run")
        assert run.running and run.roles == ("CUSTOMER1",)  # recorded, not all al holds
        internal, query_id = before["q_run"]
        assert run.internal == internal and run.handle.handle.id == query_id  # its checkpoint
        assert not queries.get("q_stop").running  # recorded as stopped: stays stopped
        assert not queries.get("q_bob").running and queries.get("q_bob").roles == ()
        al = second.login("al", ["CUSTOMER1"])
        statuses = {q["name"]: q["status"] for q in al.get("/catalog").json()["queries"]}
        assert statuses == {"q_run": "running", "q_stop": "stopped"}
        started = al.post("/queries/q_stop/start")
        assert started.status_code == 200 and started.json()["status"] == "running"
    finally:
        stop_server(second)


JOIN = (
    "SELECT a.symbol AS bid, b.symbol AS ask FROM bids [ROWS 10] a "
    "JOIN asks [ROWS 10] b ON a.id = b.id"
)


def _feed(client, stream: str, seq: int, symbol: str) -> None:
    lines = [
        sp_line(stream, "joe", seq, "{CUSTOMER1}"),
        tuple_line(stream, "joe", seq + 1, 1, {"id": 1, "symbol": symbol}),
    ]
    answer = client.post(f"/streams/{stream}/elements", content="\n".join(lines))
    assert answer.status_code == 200 and answer.json()["accepted"] == 2, answer.text


def _join(server):
    [join] = server.service.cql.joins.values()
    return join


def test_a_join_query_keeps_its_window_state_across_a_restart(spark, tmp_path) -> None:
    """The shared join resumes from its own checkpoint and window state (found again under
    the join's name), and a tuple that entered its window before the restart still finds
    its partner after it."""
    first = start_server(tmp_path, spark, USERS)
    try:
        joe = first.login("joe", ["ADMIN"])
        schema = {"name": "t", "attributes": [["id", "bigint"], ["symbol", "string"]], "tid": "id"}
        assert joe.post("/schemas", json=schema).status_code == 201
        for stream in ("bids", "asks"):
            assert joe.post("/streams", json={"name": stream, "schema": "t"}).status_code == 201
            _grant(joe, "VIEW OBJECT", "stream", stream, "CUSTOMER1")
            _grant(joe, "READ TUPLE", "stream", stream, "CUSTOMER1")
        _grant(joe, "VIEW CATALOG", "system", "system", "CUSTOMER1")
        _grant(joe, "ADD", "system", "system", "CUSTOMER1")
        joins = {"operator_limits": {"roles": {"CUSTOMER1": {"operators": ["join"]}}}}
        assert joe.put("/system/settings", json={"values": joins}).status_code == 200
        _feed(joe, "bids", 1, "BID_BEFORE")
        al = first.login("al", ["CUSTOMER1"])
        answer = al.post("/queries", json={"name": "pairs", "text": JOIN})
        assert answer.status_code == 201, answer.text
        poll(lambda: (s := _join(first).last_stats) is not None and s.window_sizes[0] == 1)
        [before] = [handle.id for handle in first.service.cql.join_handles.values()]
    finally:
        stop_server(first)

    second = serve_root(tmp_path, spark)
    try:
        assert second.service.queries.get("pairs").running
        [after] = [handle.id for handle in second.service.cql.join_handles.values()]
        assert after == before  # the same streaming query, resumed from its checkpoint
        al = second.login("al", ["CUSTOMER1"])
        subscriber = Subscriber(al, "pairs")
        assert subscriber.status == 200
        _feed(second.login("joe", ["ADMIN"]), "asks", 1, "ASK_AFTER")
        poll(lambda: subscriber.rows())
        assert subscriber.rows() == [{"bid": "BID_BEFORE", "ask": "ASK_AFTER", "_masked": []}]
        subscriber.close()
    finally:
        stop_server(second)
