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

pytestmark = pytest.mark.spark

MESSAGES = 300
USERS = {"joe": ["ADMIN"], "feed": ["PROV"]}


def _ok(answer, status: int = 200) -> dict:
    assert answer.status_code == status, answer.text
    return answer.json() if answer.content else {}


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
            schema = {
                "name": "tick",
                "attributes": [["id", "bigint"], ["v", "bigint"]],
                "tid": "id",
            }
            _ok(joe.post("/schemas", json=schema), 201)
            _ok(joe.post("/streams", json={"name": "ticks", "schema": "tick"}), 201)
            body = {"permission": "WRITE", "kind": "stream", "object": "ticks", "role": "PROV"}
            _ok(joe.post("/grants", json=body))
            _ok(joe.post("/grants", json={**body, "permission": "INJECT SP"}))
            binding = {
                "name": "ticks_feed",
                "stream": "ticks",
                "host": broker.host,
                "port": broker.port,
                "topic_filter": "dev/+/ticks",
                "provider_level": 1,
                "providers": {"d1": {"user": "feed", "provider": "feed.m"}},
            }
            _ok(joe.post("/connectors/mqtt", json=binding), 201)
            poll(
                lambda: _ok(joe.get("/connectors/mqtt/ticks_feed"))["status"] == "ok",
                timeout=60,
            )
        sp = {
            "type": "sp",
            "ts": 100,
            "ddp": {"streams": "ticks", "tuples": "*", "attributes": "*"},
            "srp": {"roles": "{PROV}", "grant_option": False},
            "sign": "+",
            "immutable": False,
        }
        ticks = [{"type": "tuple", "values": {"id": i, "v": i * 2}} for i in range(1, MESSAGES)]
        broker.publish("dev/d1/ticks", [sp, *ticks])
        assert server.wait_exit(120), "the crash point was never reached"
        server.reap()
        landed = _landed(root)  # two landings, only the first one acked
        assert 0 < len(landed) < MESSAGES
        assert [seq for seq, _ in landed] == list(range(1, len(landed) + 1))

        server = ServerProcess(root)
        server.wait_ready()
        with server.login("joe", ["ADMIN"]) as joe:
            poll(lambda: len(_landed(root)) >= MESSAGES, timeout=120)
            [device] = _ok(joe.get("/connectors/mqtt/ticks_feed"))["devices_state"]
            assert device["duplicates"] > 0  # the killed batch came again and was known
            assert device["landed"] == MESSAGES - len(landed)
        assert _landed(root) == [(1, None), *((i + 1, i) for i in range(1, MESSAGES))]
    finally:
        if server is not None:
            server.kill()
        broker.stop()
