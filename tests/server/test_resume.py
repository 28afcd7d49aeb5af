"""A subscriber that comes back with the last batch id it got (``?after=`` or the SSE
``Last-Event-ID`` header) gets every later batch exactly once, replayed from the query's
result store through SecFilter with her rights of now; a replay never lets through what
live delivery would not."""

from __future__ import annotations

import httpx
import pytest

from streamshield.client import parse_sse
from tests.server.conftest import grant, ok, poll, sp_line, tuple_line

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def ticks(server):
    """Ed's stream ``ticks`` under an sp for CUSTOMER1; Al's query over it, its output
    shared with Bob (CUSTOMER2 may read the stream, but the tuples' policy is not his)."""
    joe = server.login("joe", ["ADMIN"])
    schema = {"name": "tick", "attributes": [["id", "bigint"], ["v", "bigint"]], "tid": "id"}
    ok(joe.post("/schemas", json=schema), 201)
    ok(joe.post("/streams", json={"name": "ticks", "schema": "tick"}), 201)
    for role in ("INFO_PROVIDER", "CUSTOMER1", "CUSTOMER2"):
        grant(joe, "VIEW OBJECT", "stream", "ticks", role)
    grant(joe, "WRITE", "stream", "ticks", "INFO_PROVIDER")
    grant(joe, "INJECT SP", "stream", "ticks", "INFO_PROVIDER")
    for role in ("CUSTOMER1", "CUSTOMER2"):
        grant(joe, "READ TUPLE", "stream", "ticks", role)
    grant(joe, "ADD", "system", "system", "CUSTOMER1")
    grant(joe, "VIEW CATALOG", "system", "system", "CUSTOMER1")
    al = server.login("al", ["CUSTOMER1"])
    # An aggregate stores every batch whoever listens (a shared selection computes only
    # while someone receives it): batches come while Al is away.
    text = "SELECT id, count(*) AS c FROM ticks GROUP BY id"
    ok(al.post("/queries", json={"name": "tq", "text": text}), 201)
    for permission in ("VIEW OBJECT", "SUBSCRIBE"):
        grant(al, permission, "stream", "tq_out", "CUSTOMER2")
    ed = server.login("ed", ["INFO_PROVIDER"])
    ok(ed.post("/streams/ticks/elements", content=sp_line("ticks", "ed", 1, "{CUSTOMER1}")))
    return ed


def _send(ed: httpx.Client, first: int, count: int) -> None:
    lines = [
        tuple_line("ticks", "ed", seq, seq, {"id": seq, "v": seq})
        for seq in range(first, first + count)
    ]
    assert ok(ed.post("/streams/ticks/elements", content="\n".join(lines)))["accepted"] == count


def _stored(server) -> list[int]:
    return server.service.queries.get("tq").store.batches()


def _read(client: httpx.Client, until: int, **request) -> list[tuple[int, list[int]]]:
    """(batch, ids) of the rows events until ``until`` ids came (bounded by a timeout)."""
    got: list[tuple[int, list[int]]] = []
    timeout = httpx.Timeout(30, read=30)
    with client.stream("GET", "/queries/tq_out/subscribe", timeout=timeout, **request) as answer:
        assert answer.status_code == 200
        for event, data in parse_sse(answer.iter_lines()):
            if event == "rows":
                got.append((data["batch"], [row["id"] for row in data["rows"]]))
            if sum(len(ids) for _, ids in got) >= until:
                break
    return got


def test_a_resumed_subscriber_gets_every_later_row_once(server, ticks) -> None:
    _send(ticks, 2, 3)
    poll(lambda: _stored(server))
    al = server.login("al", ["CUSTOMER1"])
    first = _read(al, 3, params={"after": -1})  # from the start: the stored batches
    assert sorted(i for _, ids in first for i in ids) == [2, 3, 4]
    last = first[-1][0]
    _send(ticks, 5, 2)  # while Al is away
    poll(lambda: max(_stored(server)) > last)
    again = _read(al, 2, params={"after": last})
    assert sorted(i for _, ids in again for i in ids) == [5, 6]
    assert all(batch > last for batch, _ in again)
    by_header = _read(al, 2, headers={"Last-Event-ID": str(last)})
    assert by_header == again


def test_a_replay_lets_through_only_what_the_recipient_may_read(server, ticks) -> None:
    """Bob may subscribe and may read the stream, but not these tuples: resuming from the
    very start replays every stored batch, and none of it reaches him."""
    _send(ticks, 20, 1)
    poll(lambda: _stored(server))
    bob = server.login("bob", ["CUSTOMER2"])
    events: list[tuple[str, dict]] = []
    timeout = httpx.Timeout(30, read=30)
    with bob.stream(
        "GET", "/queries/tq_out/subscribe", params={"after": -1}, timeout=timeout
    ) as answer:
        assert answer.status_code == 200
        for event in parse_sse(answer.iter_lines()):
            events.append(event)
            if event[0] == "replayed":
                break
    [(event, data)] = events  # every stored batch was replayed, no row reached him
    assert event == "replayed" and data["last"] >= 0


@pytest.mark.parametrize("header", ["x", "-2", "1.5"])
def test_a_bad_last_event_id_is_a_422_naming_the_header(server, ticks, header) -> None:
    al = server.login("al", ["CUSTOMER1"])
    answer = al.get("/queries/tq_out/subscribe", headers={"Last-Event-ID": header})
    assert answer.status_code == 422 and "Last-Event-ID" in answer.json()["message"]
