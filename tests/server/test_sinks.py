"""Sinks per recipient through the real server: a Kafka topic and Delta tables.

Al's query over ``trades``; Bob may subscribe to its output too. Ed's sp lets Al
(CUSTOMER1) read everything and Bob (CUSTOMER2) everything but the price. Al attaches a
Delta table, Bob a Kafka topic (on a real Tansu broker) and a Delta table: each gets
exactly what his own subscription would, masks named in ``_masked``. Then Al revokes
Bob's SUBSCRIBE: from the next batch on Bob's sinks get nothing, Al's go on.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from bench.tansu_broker import TansuBroker
from deltalake import DeltaTable

from streamshield.connectors.sink_targets import DeltaTarget, DeltaWriter
from tests.server.conftest import grant, ok, poll, sp_line, tuple_line
from tests.server.connector_worlds import QUOTE, input_stream

LAKE_SECRET = "lake-key-never-shown"

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    started = TansuBroker(tmp_path_factory.mktemp("tansu") / "broker.log")
    started.create_topic("bob_rows", 1)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def world(server, broker, tmp_path_factory):
    joe = server.login("joe", ["ADMIN"])
    input_stream(joe, "trades", QUOTE)
    for role in ("INFO_PROVIDER", "CUSTOMER1", "CUSTOMER2"):
        grant(joe, "VIEW OBJECT", "stream", "trades", role)
    grant(joe, "READ TUPLE", "stream", "trades", "CUSTOMER1")
    grant(joe, "READ TUPLE", "stream", "trades", "CUSTOMER2")
    grant(joe, "ADD", "system", "system", "CUSTOMER1")
    al, bob = server.login("al", ["CUSTOMER1"]), server.login("bob", ["CUSTOMER2"])
    text = "SELECT id, sym, price FROM trades"
    ok(al.post("/queries", json={"name": "tradeq", "text": text}), 201)
    share = {"permission": "SUBSCRIBE", "kind": "stream", "object": "tradeq_out", "user": "bob"}
    ok(al.post("/grants", json=share))
    ok(al.post("/grants", json={**share, "permission": "VIEW OBJECT"}))
    lake = tmp_path_factory.mktemp("lake")
    allowed = {"sinks.delta_roots": [str(lake)], "sinks.kafka_brokers": [broker.address]}
    ok(joe.put("/system/settings", json={"values": allowed}))
    tables = {"al": str(lake / "al"), "bob": str(lake / "bob")}
    for who, client in (("al", al), ("bob", bob)):
        target = {"kind": "delta", "uri": tables[who]}
        if who == "bob":  # a store's key: kept for the writer, never shown
            target["storage_options"] = {"AWS_SECRET_ACCESS_KEY": LAKE_SECRET}
        ok(
            client.post("/queries/tradeq/sinks", json={"name": f"{who}_lake", "target": target}),
            201,
        )
    kafka = {"kind": "kafka", "bootstrap_servers": broker.address, "topic": "bob_rows"}
    ok(bob.post("/queries/tradeq/sinks", json={"name": "bob_topic", "target": kafka}), 201)
    ed = server.login("ed", ["INFO_PROVIDER"])
    lines = [
        sp_line("trades", "ed", 1, "{CUSTOMER1, CUSTOMER2}"),
        json.dumps({**json.loads(sp_line("trades", "ed", 2, "{CUSTOMER2}", sn=2)), "sign": "-",
                    "ddp": {"streams": "trades", "tuples": "*", "attributes": "price"}}),
    ]  # fmt: skip
    ok(ed.post("/streams/trades/elements", content="\n".join(lines)))
    return {"al": al, "bob": bob, "ed": ed, "tables": tables}


def _post(ed, first_seq: int, tids: range) -> None:
    lines = [
        tuple_line("trades", "ed", first_seq + i, tid, {"id": tid, "sym": "X", "price": tid * 1.5},
                   csn=2)
        for i, tid in enumerate(tids)
    ]  # fmt: skip
    ok(ed.post("/streams/trades/elements", content="\n".join(lines)))


def _lake(uri: str) -> dict[int, tuple]:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        frame = DeltaTable(uri).to_pandas()
    except TableNotFoundError:
        return {}
    prices = frame["price"] if "price" in frame else [None] * len(frame)
    return {
        int(i): (None if p != p or p is None else p, list(m))
        for i, p, m in zip(frame["id"], prices, frame["_masked"], strict=True)
    }


def _topic(broker: TansuBroker) -> list[tuple[dict, dict]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.address, "group.id": "check"})
    consumer.assign([TopicPartition("bob_rows", 0, 0)])
    got = []
    try:
        while True:
            messages = consumer.consume(1000, 2.0)
            if not messages:
                return got
            for m in messages:
                if m.error() is None:
                    headers = {k: v.decode() for k, v in m.headers() or []}
                    got.append((json.loads(m.value()), headers))
    finally:
        consumer.close()


def test_each_sink_gets_what_its_recipient_would(server, broker, world) -> None:
    _post(world["ed"], 3, range(1, 4))
    poll(lambda: set(_lake(world["tables"]["al"])) == {1, 2, 3}, timeout=120)
    poll(lambda: set(_lake(world["tables"]["bob"])) == {1, 2, 3}, timeout=60)
    assert _lake(world["tables"]["al"]) == {1: (1.5, []), 2: (3.0, []), 3: (4.5, [])}
    assert _lake(world["tables"]["bob"]) == {i: (None, ["price"]) for i in (1, 2, 3)}
    records = poll(lambda: (got := _topic(broker)) and len(got) >= 3 and got, timeout=60)
    assert sorted(r["id"] for r, _ in records) == [1, 2, 3]
    assert all(r["price"] is None and r["_masked"] == ["price"] for r, _ in records)
    assert all(h["streamshield.query"] == "tradeq" and h["streamshield.batch"].isdigit()
               for _, h in records)  # fmt: skip
    sinks = {s["name"]: s for s in ok(world["bob"].get("/sinks"))["sinks"]}
    assert set(sinks) == {"bob_lake", "bob_topic"}  # his own only
    assert sinks["bob_lake"]["target"]["storage_options"] == {"AWS_SECRET_ACCESS_KEY": "**********"}
    joe = server.login("joe", ["ADMIN"])
    for reader in (world["bob"], joe):
        for path in ("/sinks", "/sinks/bob_lake"):
            assert LAKE_SECRET not in reader.get(path).text, path
    kept = server.service.root / "sinks" / "bob_lake.json"
    assert LAKE_SECRET in kept.read_text() and stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert sinks["bob_topic"]["status"] == "ok" and sinks["bob_topic"]["rows_written"] == 3


def test_a_revocation_stops_the_recipients_sinks_from_the_next_batch(server, broker, world) -> None:
    share = {"permission": "SUBSCRIBE", "kind": "stream", "object": "tradeq_out", "user": "bob"}
    ok(world["al"].request("DELETE", "/grants", json=share))
    _post(world["ed"], 6, range(4, 6))
    poll(lambda: set(_lake(world["tables"]["al"])) >= {4, 5}, timeout=120)
    assert set(_lake(world["tables"]["bob"])) == {1, 2, 3}
    assert sorted(r["id"] for r, _ in _topic(broker)) == [1, 2, 3]
    # Al's sink may have written the batch before Bob's was handed it: wait for his.
    poll(lambda: ok(world["bob"].get("/sinks/bob_topic"))["status"].startswith("suspended"))
    assert set(_lake(world["tables"]["bob"])) == {1, 2, 3}
    ok(world["al"].post("/grants", json=share))  # back: new batches only, never 4 and 5
    _post(world["ed"], 8, range(6, 7))
    poll(lambda: 6 in _lake(world["tables"]["bob"]), timeout=120)
    assert set(_lake(world["tables"]["bob"])) == {1, 2, 3, 6}


def test_sinks_are_their_owners_and_replays_commit_nothing_twice(server, world) -> None:

    mallory = server.login("mallory", ["OTHER"])
    target = {"kind": "delta", "uri": world["tables"]["al"] + "_m"}
    refused = mallory.post("/queries/tradeq/sinks", json={"name": "m_lake", "target": target})
    assert refused.status_code == 404  # she may not even see the output
    assert mallory.get("/sinks/al_lake").status_code == 404
    assert mallory.delete("/sinks/al_lake").status_code == 404
    assert ok(mallory.get("/sinks"))["sinks"] == []
    again = world["al"].post("/queries/tradeq/sinks", json={"name": "al_lake", "target": target})
    assert again.status_code == 409

    uri = world["tables"]["al"]
    table = DeltaTable(uri)
    version, rows = table.version(), len(table.to_pandas())
    writer = DeltaWriter(DeltaTarget(uri=uri), "streamshield-sink-al_lake")
    done = writer.committed()
    assert done is not None
    writer.write("tradeq", done, [{"id": 99, "sym": "X", "price": 1.0, "_masked": []}])
    assert (DeltaTable(uri).version(), len(DeltaTable(uri).to_pandas())) == (version, rows)
    history = DeltaTable(uri).history(1)[0]
    assert history["streamshield.batch"] == str(done)


@pytest.mark.parametrize(
    "target",
    [
        {"kind": "delta", "uri": "/tmp/elsewhere/table"},  # not under sinks.delta_roots
        {"kind": "delta", "uri": "{lake}/../escape"},  # out of it by ..
        {"kind": "delta", "uri": "{root}/landing/trades"},  # the server's own storage
        {"kind": "delta", "uri": "s3://bucket/lake/t"},  # no remote root allowed
        {"kind": "kafka", "bootstrap_servers": "10.0.0.1:9092", "topic": "x"},  # not allowed
        {"kind": "kafka", "bootstrap_servers": "{broker},10.0.0.1:9092", "topic": "x"},
    ],
)
def test_a_sink_writes_only_where_an_administrator_allowed(
    server, broker, world, target: dict
) -> None:
    lake = str(Path(world["tables"]["al"]).parent)
    filled = {
        k: v.format(lake=lake, root=server.service.root, broker=broker.address)
        for k, v in target.items()
    }
    answer = world["al"].post("/queries/tradeq/sinks", json={"name": "nowhere", "target": filled})
    assert answer.status_code == 403, answer.text
    assert "nowhere" not in {s["name"] for s in ok(world["al"].get("/sinks"))["sinks"]}


def test_a_sink_restored_writes_the_batches_it_missed_once(server, world) -> None:
    """Bob's table sink is gone while two batches come (as if its server were down: Al's
    sink keeps the query running and storing); restored from its file, it writes them
    from the result store, masked for Bob, each once, before any new batch arrives."""
    sinks = server.service.sinks
    bob_lake = sinks._sinks.pop("bob_lake")
    sinks._unsubscribe(bob_lake)
    _post(world["ed"], 9, range(7, 9))
    poll(lambda: set(_lake(world["tables"]["al"])) >= {7, 8}, timeout=120)
    assert not {7, 8} & set(_lake(world["tables"]["bob"]))
    poll(lambda: any(b > bob_lake.stored.last_batch for b in
                     server.service.queries.get("tradeq").store.batches()), timeout=60)  # fmt: skip
    sinks.restore()
    assert set(_lake(world["tables"]["bob"])) == {1, 2, 3, 6, 7, 8}
    assert _lake(world["tables"]["bob"])[7] == (None, ["price"])
    sinks._unsubscribe(sinks._sinks.pop("bob_lake"))
    sinks.restore()  # again from its file: nothing twice
    assert len(DeltaTable(world["tables"]["bob"]).to_pandas()) == 6


def test_the_command_line_attaches_lists_and_detaches(server, world, tmp_path) -> None:
    from click.testing import CliRunner

    from streamshield.cli import main
    from tests.server.conftest import PASSWORD

    env = {"STREAMSHIELD_HOME": str(tmp_path), "STREAMSHIELD_PASSWORD": PASSWORD}

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(main, ["client", *args], env=env, catch_exceptions=False)
        assert result.exit_code == code, result.output + result.stderr
        return result.output

    run(
        "login",
        "--url",
        server.url,
        "--ca",
        str(server.cert),
        "--user",
        "al",
        "--role",
        "CUSTOMER1",
    )
    uri = str(Path(world["tables"]["al"]).parent / "cli_lake")
    attached = json.loads(
        run("sink", "attach", "tradeq", "cli_lake", "--delta", uri, "--output", "json")
    )
    assert attached["sinks"][0]["target"] == {"kind": "delta", "uri": uri, "storage_options": {}}
    assert "cli_lake" in run("sink", "list")
    run("sink", "attach", "tradeq", "bad", code=2)  # neither target
    assert "detached: cli_lake" in run("sink", "detach", "cli_lake")
    assert "cli_lake" not in run("sink", "list")
