"""An MQTT source killed between a landing and its acks loses and repeats nothing.

The real server (``streamshield serve``, a process of its own) subscribes a device's
topic and SIGKILLs itself at crash point ``mqtt.before_ack`` on its second pass: a
batch has landed and is recorded in the source's state, the broker has not been told.
The broker sends that batch again (DUP set) to the restarted server, which must know it
as landed and drop it, and land everything after it: every message lands exactly once,
in publication order, with seqs 1, 2, 3, ...
"""

from __future__ import annotations

import json

import pytest
from bench.server_process import ServerProcess, prepare_root

from tests.mqtt_broker import MosquittoBroker
from tests.polling import poll
from tests.server.conftest import ok
from tests.server.connector_worlds import TICK, input_stream, ticks

pytestmark = pytest.mark.spark

MESSAGES = 300
USERS = {"joe": ["ADMIN"], "feed": ["PROV"]}


def _landed(root) -> list[tuple[int, int | None]]:
    """(seq, tuple id or None for an sp) of every landed element, in seq order."""
    rows = []
    for path in (root / "landing" / "ticks").glob("feed.m-*.jsonl"):
        for line in path.read_text().splitlines():
            element = json.loads(line)
            rows.append((element["seq"], element.get("values", {}).get("id")))
    return sorted(rows)


def test_a_kill_before_the_acks_lands_every_message_once(tmp_path) -> None:
    broker = MosquittoBroker(tmp_path / "broker")
    root = tmp_path / "root"
    server = None
    try:
        prepare_root(root, None, ["ADMIN", "PROV"], USERS)
        server = ServerProcess(root, crash_at="mqtt.before_ack:2")
        server.wait_ready()
        with server.login("joe", ["ADMIN"]) as joe:
            input_stream(joe, "ticks", TICK, role="PROV")
            binding = {
                "name": "ticks_feed",
                "stream": "ticks",
                "host": broker.host,
                "port": broker.port,
                "topic_filter": "dev/+/ticks",
                "provider_level": 1,
                "providers": {"d1": {"user": "feed", "provider": "feed.m"}},
            }
            ok(joe.post("/connectors/mqtt", json=binding), 201)
            poll(
                lambda: ok(joe.get("/connectors/mqtt/ticks_feed"))["status"] == "ok",
                timeout=60,
            )
        broker.publish("dev/d1/ticks", ticks(MESSAGES, "PROV"))
        assert server.wait_exit(120), "the crash point was never reached"
        server.reap()
        landed = _landed(root)  # two landings, only the first one acked
        assert 0 < len(landed) < MESSAGES
        assert [seq for seq, _ in landed] == list(range(1, len(landed) + 1))

        server = ServerProcess(root)
        server.wait_ready()
        with server.login("joe", ["ADMIN"]) as joe:
            poll(lambda: len(_landed(root)) >= MESSAGES, timeout=120)
            [device] = ok(joe.get("/connectors/mqtt/ticks_feed"))["devices_state"]
            assert device["duplicates"] > 0  # the killed batch came again and was known
            assert device["landed"] == MESSAGES - len(landed)
        assert _landed(root) == [(1, None), *((i + 1, i) for i in range(1, MESSAGES))]
    finally:
        if server is not None:
            server.kill()
        broker.stop()
