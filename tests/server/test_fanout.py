"""Fan-out through the real server: what a batch costs does not grow with its watchers,
and a watcher that cannot keep up is told and dropped without slowing anyone else.

One query, Al's selection over ``fan``; Al and Carol (both CUSTOMER1, each READ TUPLE by
a grant of her own) watch it. Subscribers of one recipient class share one encoded
``rows`` event per batch; each one's own checks still decide what she gets.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import statistics
import threading
import time
from collections import Counter

import httpx
import pytest

from streamshield.engine.delivery.shared_rows import SharedRows
from streamshield.server import subscriptions
from tests.server.conftest import PASSWORD, Subscriber, grant, ok, poll, sp_line, tuple_line

pytestmark = pytest.mark.spark

MARK = 100_000  # length of the slow-reader test's rows: a few fill a socket's buffers


def _user_grant(client: httpx.Client, permission: str, user: str, revoke: bool = False) -> None:
    body = {"permission": permission, "kind": "stream", "object": "fan", "user": user}
    ok(client.request("DELETE" if revoke else "POST", "/grants", json=body))


@pytest.fixture(scope="module")
def fan(server):
    """The stream, Al's query ``fanq`` over it, and Carol, who may watch its output."""
    joe = server.login("joe", ["ADMIN"])
    schema = {"name": "fans", "attributes": [["id", "bigint"], ["note", "string"]], "tid": "id"}
    ok(joe.post("/schemas", json=schema), 201)
    ok(joe.post("/streams", json={"name": "fan", "schema": "fans"}), 201)
    body = {"name": "carol", "password": PASSWORD, "roles": ["CUSTOMER1"]}
    ok(joe.post("/users", json=body), 201)
    for role in ("INFO_PROVIDER", "CUSTOMER1"):
        grant(joe, "VIEW OBJECT", "stream", "fan", role)
    grant(joe, "WRITE", "stream", "fan", "INFO_PROVIDER")
    grant(joe, "INJECT SP", "stream", "fan", "INFO_PROVIDER")
    grant(joe, "ADD", "system", "system", "CUSTOMER1")
    grant(joe, "VIEW CATALOG", "system", "system", "CUSTOMER1")
    for user in ("al", "carol"):
        _user_grant(joe, "READ TUPLE", user)
    al = server.login("al", ["CUSTOMER1"])
    ok(al.post("/queries", json={"name": "fanq", "text": "SELECT id, note FROM fan"}), 201)
    body = {"permission": "SUBSCRIBE", "kind": "stream", "object": "fanq_out", "user": "carol"}
    ok(al.post("/grants", json=body))
    ok(al.post("/grants", json={**body, "permission": "VIEW OBJECT"}))
    ed = server.login("ed", ["INFO_PROVIDER"])
    ok(ed.post("/streams/fan/elements", content=sp_line("fan", "ed", 1, "{CUSTOMER1}")))
    return joe, al, ed, server.service.queries.get("fanq")


class _Appender:
    """Ed's tuples, numbered on (one channel, one policy)."""

    def __init__(self, ed: httpx.Client) -> None:
        self.ed, self.seq = ed, 1

    def post(self, tids: range, note: str = "n") -> None:
        lines = []
        for tid in tids:
            self.seq += 1
            lines.append(tuple_line("fan", "ed", self.seq, tid, {"id": tid, "note": note}))
        ok(self.ed.post("/streams/fan/elements", content="\n".join(lines)))


def _ids(subscriber: Subscriber) -> set[int]:
    return {row["id"] for row in subscriber.rows()}


def test_one_class_is_encoded_once_a_batch_and_checked_once_a_session(
    server, fan, monkeypatch
) -> None:
    """Three watchers in one class (Al twice on one session, Carol): per batch one
    encoding of the rows and one re-check per session, not per subscription; then Carol
    loses READ and gets nothing more, though her class shared the encoding before."""
    joe, al, ed, query = fan
    carol = server.login("carol", ["CUSTOMER1"])
    watchers = [Subscriber(al, "fanq"), Subscriber(al, "fanq"), Subscriber(carol, "fanq")]
    poll(lambda: len(query.delivery.subscriptions) == 3, timeout=30)
    appender = _Appender(ed)

    dumps, encoded = json.dumps, Counter()

    def counting(value, **kwargs):
        if isinstance(value, dict) and "rows" in value and "batch" in value:
            encoded[value["batch"]] += 1
        return dumps(value, **kwargs)

    monkeypatch.setattr(subscriptions.json, "dumps", counting)
    checks: list[str] = []
    requests = server.service.query_requests
    may_still_subscribe = requests.may_still_subscribe

    def counted(token: str, output: str) -> bool:
        if threading.current_thread().name != "query-watch":  # not the 1 s re-check
            checks.append(token)
        return may_still_subscribe(token, output)

    monkeypatch.setattr(requests, "may_still_subscribe", counted)
    appender.post(range(1, 21))
    poll(lambda: all(_ids(w) == set(range(1, 21)) for w in watchers), timeout=120)
    assert list(encoded.values()) == [1] * len(encoded), encoded  # one encoding a batch
    batches = len(encoded)
    assert len(checks) == 2 * batches and len(set(checks)) == 2, (checks, batches)
    assert [w.rows() for w in watchers[1:]] == [watchers[0].rows()] * 2

    _user_grant(joe, "READ TUPLE", "carol", revoke=True)
    appender.post(range(21, 31))
    poll(lambda: _ids(watchers[0]) >= set(range(21, 31)), timeout=120)
    appender.post(range(31, 41))  # a later batch: Carol's would have come by then
    poll(lambda: _ids(watchers[1]) >= set(range(21, 41)), timeout=120)
    assert _ids(watchers[2]) == set(range(1, 21))
    monkeypatch.undo()
    for watcher in watchers:
        watcher.close()
    poll(lambda: not query.delivery.subscriptions, timeout=30)


def test_a_reader_that_reads_nothing_is_told_and_dropped_without_slowing_the_others(
    server, fan
) -> None:
    """Batches are handed over where Delivery hands them (one shared list to every
    subscription, from a thread of their own as Spark's would), so the figures do not
    depend on micro-batch timing. The stalled reader's socket fills, its queue passes
    half its bound (``lagging``), then the bound (``dropped``); meanwhile the others get
    every batch at once and no hand-over waits for a socket."""
    _, al, _, query = fan
    readers = [Subscriber(server.login("al", ["CUSTOMER1"]), "fanq") for _ in range(2)]
    stalled = server.login("al", ["CUSTOMER1"])
    opened, resume = threading.Event(), threading.Event()
    stalled_events: list[tuple[str, dict]] = []

    def stall() -> None:
        from streamshield.client import parse_sse

        timeout = httpx.Timeout(30, read=None)
        with stalled.stream("GET", "/queries/fanq/subscribe", timeout=timeout) as response:
            opened.set()
            resume.wait(120)  # reads nothing until the server has given up on it
            stalled_events.extend(parse_sse(response.iter_lines()))

    thread = threading.Thread(target=stall, daemon=True)
    thread.start()
    assert opened.wait(30)
    poll(lambda: len(query.delivery.subscriptions) == 3, timeout=30)
    note = "X" * MARK

    def got(reader: Subscriber, batch: int) -> bool:
        return any(e == "rows" and d["batch"] == batch for e, d in reader.events)

    handovers, latencies = [], []
    batch = 10_000  # ids no micro-batch of the query has
    while len(query.delivery.subscriptions) == 3 and batch < 10_300:
        batch += 1
        rows = SharedRows([{"id": batch, "note": note}])
        started = time.monotonic()
        for subscription in query.delivery.subscriptions:
            subscription.deliver(rows, batch)
        handovers.append(time.monotonic() - started)
        poll(lambda b=batch: all(got(r, b) for r in readers), timeout=30, every=0.005)
        latencies.append(time.monotonic() - started)
    poll(lambda: len(query.delivery.subscriptions) == 2, timeout=30)  # the stalled one left
    resume.set()
    thread.join(60)
    sent = batch - 10_000
    print(
        f"\nslow reader dropped after {sent} batches of {MARK // 1000} kB: others' latency "
        f"median {statistics.median(latencies) * 1000:.1f} ms, max {max(latencies) * 1000:.1f}"
        f" ms; hand-over to 3 subscribers max {max(handovers) * 1000:.2f} ms"
    )
    names = [event for event, _ in stalled_events]
    assert names and names[-1] == "dropped", names[-5:]
    assert stalled_events[-1][1] == {"reason": "slow consumer: too many undelivered batches"}
    assert "lagging" in names and names.index("lagging") < len(names) - 1
    assert names.count("rows") < sent
    for reader in readers:
        ids = [d["batch"] for e, d in reader.events if e == "rows" and d["batch"] > 10_000]
        assert ids == list(range(10_001, batch + 1))
        assert not any(e in ("lagging", "dropped") for e, _ in reader.events)
    assert max(handovers) < 0.5  # a stuck socket never holds the delivering thread
    assert max(latencies) < 5 and statistics.median(latencies) < 1
    for reader in readers:
        reader.close()
    poll(lambda: not query.delivery.subscriptions, timeout=30)
    assert al.get("/healthz").status_code == 200


@pytest.mark.parametrize(
    "idle", [pytest.param(250, id="250"), pytest.param(2000, id="2000", marks=pytest.mark.long)]
)
def test_many_idle_subscriptions_leave_healthz_answering_at_once(server, fan, idle) -> None:
    """``idle`` SSE connections opened by one asyncio client, none read: /healthz keeps
    answering fast, a batch to all of them is one encoding and a quick hand-over, and
    all of them leave cleanly. (Opening them costs ~50 ms each on two busy cores, mostly
    each subscribe's own checks: the thousands run in long mode.)"""
    _, al, _, query = fan
    token = al.headers["Authorization"].removeprefix("Bearer ")
    context = ssl.create_default_context(cafile=str(server.cert))
    headers = {"Authorization": f"Bearer {token}"}

    async def run() -> tuple[list[float], float, float]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        timeout = httpx.Timeout(60, read=None)
        async with httpx.AsyncClient(
            base_url=server.url, verify=context, headers=headers, limits=limits, timeout=timeout
        ) as client:
            gate = asyncio.Semaphore(32)

            async def one() -> httpx.Response:
                async with gate:
                    request = client.build_request("GET", "/queries/fanq/subscribe")
                    response = await client.send(request, stream=True)
                    assert response.status_code == 200
                    return response

            started = time.monotonic()
            streams = await asyncio.gather(*(one() for _ in range(idle)))
            opened = time.monotonic() - started
            try:
                poll(lambda: len(query.delivery.subscriptions) == idle, timeout=60, every=0.05)
                async with httpx.AsyncClient(base_url=server.url, verify=context) as probe:
                    await probe.get("/healthz")  # its own connection, opened once
                    answers = []
                    for _ in range(20):
                        begun = time.monotonic()
                        assert (await probe.get("/healthz")).status_code == 200
                        answers.append(time.monotonic() - begun)
                    rows = SharedRows([{"id": 1, "note": "n"}])
                    begun = time.monotonic()
                    for subscription in query.delivery.subscriptions:
                        subscription.deliver(rows, 20_000)
                    handover = time.monotonic() - begun
                    busy = time.monotonic()
                    assert (await probe.get("/healthz")).status_code == 200
                    answers.append(time.monotonic() - busy)
            finally:
                await asyncio.gather(*(s.aclose() for s in streams))
            return answers, opened, handover

    answers, opened, handover = asyncio.run(run())
    print(
        f"\n{idle} idle SSE subscriptions (opened in {opened:.1f} s): /healthz median "
        f"{statistics.median(answers) * 1000:.1f} ms, max {max(answers) * 1000:.1f} ms; one "
        f"batch handed to all in {handover * 1000:.1f} ms"
    )
    assert statistics.median(answers) < 0.1 and max(answers) < 1.0
    assert handover < 2.0
    poll(lambda: not query.delivery.subscriptions, timeout=60)
    assert not server.service.live._live
