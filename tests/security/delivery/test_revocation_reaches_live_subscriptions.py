"""A subscription that lost its right is ended at once, not at its query's next batch.

Delivery re-checks a subscriber's right with every batch, but a query can produce
nothing for a long time: without a push, a revoked subscriber would keep her stream
open (and receive the rows queued for her) until data happens to arrive. The
recipient's rights are current: the ``closed`` event comes within a second of the
revoke or logout call, and rows queued before it are not delivered.
"""

from __future__ import annotations

import time

import pytest

from tests.server.conftest import Subscriber, poll, server, spark  # noqa: F401 (fixtures)

pytestmark = pytest.mark.spark
CLOSED = ("closed", {"reason": "access revoked or session ended"})


def _ok(answer, status: int = 200) -> dict:
    assert answer.status_code == status, answer.text
    return answer.json()


def _grant(client, permission: str, kind: str, obj: str, role: str | None, user=None) -> dict:
    body = {"permission": permission, "kind": kind, "object": obj}
    body |= {"user": user} if user else {"role": role}
    return body


@pytest.fixture(scope="module")
def quiet(server):  # noqa: F811
    """A query over a stream nobody writes to: no batch will ever re-check a subscriber."""
    joe = server.login("joe", ["ADMIN"])
    schema = {"name": "qs", "attributes": [["id", "bigint"]], "tid": "id"}
    _ok(joe.post("/schemas", json=schema), 201)
    _ok(joe.post("/streams", json={"name": "quiet", "schema": "qs"}), 201)
    for permission in ("VIEW OBJECT", "READ TUPLE"):
        _ok(joe.post("/grants", json=_grant(joe, permission, "stream", "quiet", "CUSTOMER1")))
    for permission in ("ADD", "VIEW CATALOG"):
        _ok(joe.post("/grants", json=_grant(joe, permission, "system", "system", "CUSTOMER1")))
    al = server.login("al", ["CUSTOMER1"])
    _ok(al.post("/queries", json={"name": "quiet_q", "text": "SELECT id FROM quiet"}), 201)
    return al


def _closed_within(subscriber: Subscriber, started: float) -> float:
    poll(lambda: subscriber.events, timeout=10, every=0.05)
    return time.monotonic() - started


def test_a_revoked_subscribe_right_ends_the_stream_within_a_second(server, quiet) -> None:  # noqa: F811
    al = quiet
    for permission in ("VIEW OBJECT", "SUBSCRIBE"):
        _ok(al.post("/grants", json=_grant(al, permission, "stream", "quiet_q_out", None, "bob")))
    bob = server.login("bob", ["CUSTOMER2"])
    subscriber = Subscriber(bob, "quiet_q_out")
    assert subscriber.status == 200
    started = time.monotonic()
    revoke = _grant(al, "SUBSCRIBE", "stream", "quiet_q_out", None, "bob")
    _ok(al.request("DELETE", "/grants", json=revoke))
    took = _closed_within(subscriber, started)
    assert subscriber.events == [CLOSED]
    print(f"revoke -> closed event: {took:.3f} s")
    assert took < 1.0
    subscriber.close()


def test_a_logout_ends_the_sessions_streams_within_a_second(server, quiet) -> None:  # noqa: F811
    al = server.login("al", ["CUSTOMER1"])
    subscriber = Subscriber(al, "quiet_q")
    assert subscriber.status == 200
    started = time.monotonic()
    _ok(al.post("/logout"))
    took = _closed_within(subscriber, started)
    assert subscriber.events == [CLOSED]
    print(f"logout -> closed event: {took:.3f} s")
    assert took < 1.0
    subscriber.close()


def test_rows_queued_before_a_revocation_are_not_delivered(server) -> None:  # noqa: F811
    """Directly on the queue: a revocation drops the backlog, a plain close sends it."""
    import asyncio

    from streamshield.server.subscriptions import SubscriberQueue

    async def run(end: str) -> list[str]:
        queue = SubscriberQueue(asyncio.get_running_loop(), 8)
        queue.push(1, [{"x": 1}])
        queue.push(2, [{"x": 2}])
        queue.revoke("gone") if end == "revoke" else queue.close("stopped")
        await asyncio.sleep(0)
        return [event.event async for event in queue.events()]

    assert asyncio.run(run("revoke")) == ["closed"]
    assert asyncio.run(run("close")) == ["rows", "rows", "closed"]
