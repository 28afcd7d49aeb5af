"""A Kafka source killed between a landing and its offset commit loses and repeats nothing.

The real server (``streamshield serve``, a process of its own) consumes a topic in
landings of at most 50 records and SIGKILLs itself at crash point ``kafka.before_commit``
after its second landing: the group's committed offset is still the first landing's. A
server restarted on the same root (in this process, on the suite's Spark) must go on
from the landing, not from the commit: every record lands exactly once, with its
offset + 1 as seq, and none is refused as a replay.
"""

from __future__ import annotations

import json

import pytest
from bench.server_process import PASSWORD, ServerProcess, prepare_root
from bench.tansu_broker import TansuBroker

from tests.polling import poll
from tests.server.conftest import ok, serve_root, spark, stop_server  # noqa: F401
from tests.server.connector_worlds import TICK, input_stream, ticks

pytestmark = pytest.mark.spark

RECORDS = 300
USERS = {"joe": ["ADMIN"], "feed": ["PROV"]}


def _landed_seqs(root) -> list[int]:
    seqs = []
    for path in sorted((root / "landing" / "ticks").glob("feed.k-*.jsonl")):
        seqs += [json.loads(line)["seq"] for line in path.read_text().splitlines() if line]
    return sorted(seqs)


def test_a_kill_before_the_commit_lands_every_record_once(spark, tmp_path) -> None:  # noqa: F811
    broker = TansuBroker(tmp_path / "broker.log")
    root = tmp_path / "root"
    server = None
    try:
        broker.create_topic("ticks", 1)
        broker.produce("ticks", 0, ticks(RECORDS, "PROV"))
        prepare_root(root, None, ["ADMIN", "PROV"], USERS)
        server = ServerProcess(root, crash_at="kafka.before_commit:2")
        server.wait_ready()
        with server.login("joe", ["ADMIN"]) as joe:
            input_stream(joe, "ticks", TICK, role="PROV")
            binding = {
                "name": "ticks_feed",
                "stream": "ticks",
                "bootstrap_servers": broker.address,
                "topic": "ticks",
                "partitions": {"0": {"user": "feed", "provider": "feed.k"}},
                "max_records": 50,
            }
            ok(joe.post("/connectors/kafka", json=binding), 201)
        assert server.wait_exit(120), "the crash point was never reached"
        server.reap()
        landed = _landed_seqs(root)  # two landings, only the first one's commit
        assert 0 < len(landed) < RECORDS and landed == list(range(1, len(landed) + 1))
        assert broker.committed("streamshield-ticks_feed", "ticks", 0) < len(landed)

        # The restart in this process (the suite's warm Spark): one JVM start fewer.
        restarted = serve_root(root, spark)
        try:
            with restarted.login("joe", ["ADMIN"], password=PASSWORD) as joe:

                def state() -> dict:
                    return ok(joe.get("/connectors/kafka/ticks_feed"))["partitions_state"][0]

                poll(lambda: state()["next_offset"] == RECORDS, timeout=120)
                assert (state()["landed"], state()["refused"]) == (RECORDS - len(landed), 0)
        finally:
            stop_server(restarted)
        assert _landed_seqs(root) == list(range(1, RECORDS + 1))
    finally:
        if server is not None:
            server.kill()
        broker.stop()
