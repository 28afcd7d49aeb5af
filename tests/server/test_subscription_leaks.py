"""Subscribing and leaving, again and again, leaves nothing behind in the server: no
Python thread, no subscription in the query's delivery, in the re-check list or among
the query's closers (the soak's thread and memory figures rest on this)."""

from __future__ import annotations

import threading

import httpx
import pytest

from streamshield.client import parse_sse
from tests.server.conftest import grant, ok, poll, sp_line, tuple_line

pytestmark = pytest.mark.spark

CYCLES = 12


@pytest.fixture(scope="module")
def looped(server):
    """Al's aggregate over Ed's stream, one stored batch (so a resume has one to replay)."""
    joe = server.login("joe", ["ADMIN"])
    schema = {"name": "lk", "attributes": [["id", "bigint"], ["v", "bigint"]], "tid": "id"}
    ok(joe.post("/schemas", json=schema), 201)
    ok(joe.post("/streams", json={"name": "lks", "schema": "lk"}), 201)
    for role in ("INFO_PROVIDER", "CUSTOMER1"):
        grant(joe, "VIEW OBJECT", "stream", "lks", role)
    grant(joe, "WRITE", "stream", "lks", "INFO_PROVIDER")
    grant(joe, "INJECT SP", "stream", "lks", "INFO_PROVIDER")
    grant(joe, "READ TUPLE", "stream", "lks", "CUSTOMER1")
    grant(joe, "ADD", "system", "system", "CUSTOMER1")
    grant(joe, "VIEW CATALOG", "system", "system", "CUSTOMER1")
    al = server.login("al", ["CUSTOMER1"])
    text = "SELECT id, count(*) AS c FROM lks GROUP BY id"
    ok(al.post("/queries", json={"name": "lq", "text": text}), 201)
    ed = server.login("ed", ["INFO_PROVIDER"])
    lines = [sp_line("lks", "ed", 1, "{CUSTOMER1}")]
    lines += [tuple_line("lks", "ed", seq, seq, {"id": seq, "v": seq}) for seq in (2, 3)]
    ok(ed.post("/streams/lks/elements", content="\n".join(lines)))
    query = server.service.queries.get("lq")
    poll(lambda: query.store.batches())
    return al, query


def _cycle(al: httpx.Client, resume: bool) -> None:
    """One subscription, left by the client: after the replay, or as soon as it is open."""
    params = {"after": -1} if resume else {}
    timeout = httpx.Timeout(30, read=30)
    with al.stream("GET", "/queries/lq_out/subscribe", params=params, timeout=timeout) as answer:
        assert answer.status_code == 200
        if resume:
            for event, _data in parse_sse(answer.iter_lines()):
                if event == "replayed":
                    break


def _left_over(server, query) -> int:
    return (
        len(query.delivery.subscriptions)
        + len(query.closers)
        + len(server.service.live._live)  # what the re-check holds
    )


def test_repeated_subscribe_and_leave_holds_no_thread_or_subscription(server, looped) -> None:
    al, query = looped
    for i in range(2):  # warm-up: the event loop's and anyio's worker pools fill once
        _cycle(al, resume=i % 2 == 0)
    poll(lambda: _left_over(server, query) == 0, timeout=30, every=0.1)
    before = threading.active_count()
    for i in range(CYCLES):
        _cycle(al, resume=i % 2 == 0)
    # The server notices each client's leaving (sse-starlette's disconnect watch) and
    # unsubscribes; bounded wait for the last few.
    poll(lambda: _left_over(server, query) == 0, timeout=30, every=0.1)
    after = threading.active_count()
    names = sorted(t.name for t in threading.enumerate())
    assert after <= before + 2, f"{before} threads before {CYCLES} cycles, {after} after: {names}"
