"""A Kafka topic bound to a stream, end to end through the real server and a real broker.

Tansu (a Kafka-protocol broker) holds topic ``quotes`` with two partitions; partition 0
is bound to Ed's channel ``ed.k0``, partition 1 to nobody. Ed's records carry his
policies in-band: first Al (CUSTOMER1) and Bob (CUSTOMER2) may read, Bob without the
price; then only Al. Each watches a query of his own over the stream and gets exactly
what the policy in force at each record gave him; partition 1's records never land.

Topic ``quotes_avro`` holds Avro records in Confluent's wire format, written by
confluent-kafka's own AvroSerializer against a schema registry of the test's
(tests/schema_registry.py): Ed's sps and tuples on channel ``ed.avro``, read back with
the schema each record's id names.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from collections import Counter

import pytest
from bench.tansu_broker import TansuBroker
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schema_registry import SchemaRegistryServer
from tests.server.conftest import PASSWORD, ok, poll
from tests.server.connector_worlds import (
    IN_BAND,
    QUOTE,
    UNBOUND_QUOTE,
    check_in_band_delivery,
    input_stream,
    quote,
    quote_readers,
    rows_by_id,
    sp,
)

pytestmark = pytest.mark.spark

TOPIC, BINDING = "quotes", "quotes_feed"
AVRO_TOPIC, AVRO_BINDING = "quotes_avro", "avro_feed"
REGISTRY_USER, REGISTRY_PASSWORD = "svc", "reg-pw-never-shown"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    started = TansuBroker(tmp_path_factory.mktemp("tansu") / "broker.log")
    started.create_topic(TOPIC, 2)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def world(server, broker):
    joe = server.login("joe", ["ADMIN"])
    input_stream(joe, "quotes", QUOTE)
    watchers = quote_readers(server, joe)
    binding = {
        "name": BINDING,
        "stream": "quotes",
        "bootstrap_servers": broker.address,
        "topic": TOPIC,
        "partitions": {"0": {"user": "ed", "provider": "ed.k0"}},
    }
    shown = ok(joe.post("/connectors/kafka", json=binding), 201)
    assert shown["status"] in ("ok", "starting")
    yield joe, watchers
    for watcher in watchers.values():
        watcher.close()


def _feed(joe) -> dict:
    return ok(joe.get(f"/connectors/kafka/{BINDING}"))


def test_each_reader_gets_what_the_in_band_policy_gave_him(server, broker, world) -> None:
    joe, watchers = world
    broker.produce(TOPIC, 1, [UNBOUND_QUOTE])
    broker.produce(TOPIC, 0, IN_BAND)
    check_in_band_delivery(watchers)
    state = _feed(joe)["partitions_state"]
    assert state == [
        {
            "partition": 0,
            "provider": "ed.k0",
            "next_offset": 8,
            "lag": state[0]["lag"],
            "landed": 8,
            "refused": 0,
            "held": None,
        }
    ]
    poll(lambda: _feed(joe)["partitions_state"][0]["lag"] == 0, timeout=30)


def test_bad_records_are_refused_one_by_one_and_audited(server, broker, world) -> None:
    joe, watchers = world
    broker.produce(
        TOPIC,
        0,
        [
            b"not json",
            b"[1, 2]",
            {**quote(60), "seq": 1},
            {**quote(61), "provider": "ed"},
            {**quote(62), "values": {"id": 62, "sym": "ACME", "price": "dear"}},
            quote(6, 16.0),
        ],
    )
    poll(lambda: 6 in rows_by_id(watchers["al"]), timeout=120)
    assert not {60, 61, 62} & set(rows_by_id(watchers["al"]))
    part = _feed(joe)["partitions_state"][0]
    assert (part["landed"], part["refused"], part["next_offset"]) == (9, 5, 14)
    entries = ok(joe.get("/audit", params={"action": "denied", "user": "ed"}))["entries"]
    reasons: dict[str, int] = {}  # one entry per landing and reason: the records may
    for entry in entries:  # have come in more than one
        reason = entry["detail"]["reason"]
        reasons[reason] = reasons.get(reason, 0) + entry["detail"]["rejected"]
    assert reasons == {
        "malformed_record": 2,
        "seq_given": 1,
        "wrong_channel": 1,
        "type_mismatch": 1,
    }
    metrics = joe.get("/metrics").text
    assert f'streamshield_kafka_lag_records{{binding="{BINDING}",partition="0"}}' in metrics
    ingest = ok(joe.get("/streams/quotes/ingest"))
    assert [(f["binding"], f["topic"]) for f in ingest["kafka"]] == [(BINDING, TOPIC)]
    assert ingest["counts"]["elements_rejected"] >= 5
    al = server.login("al", ["CUSTOMER1"])
    assert ok(al.get("/streams/quotes/ingest"))["kafka"] == []  # a reader sees no feeds


def test_a_provider_without_rights_holds_records_back_and_loses_none(server, broker, world) -> None:
    joe, watchers = world
    body = {"permission": "WRITE", "kind": "stream", "object": "quotes", "role": "INFO_PROVIDER"}
    ok(joe.request("DELETE", "/grants", json=body))
    ok(joe.request("DELETE", "/grants", json={**body, "permission": "INJECT SP"}))
    broker.produce(TOPIC, 0, [quote(7, 17.0)])
    poll(lambda: (_feed(joe)["partitions_state"][0]["held"] or "") == "forbidden", timeout=60)
    assert _feed(joe)["status"] == "held_back: forbidden"
    assert 7 not in rows_by_id(watchers["al"])
    ok(joe.post("/grants", json=body))
    poll(lambda: 7 in rows_by_id(watchers["al"]), timeout=120)
    assert rows_by_id(watchers["al"])[7]["price"] == 17.0
    assert _feed(joe)["status"] == "ok"
    assert [row["id"] for row in watchers["al"].rows()].count(7) == 1
    ok(joe.post("/grants", json={**body, "permission": "INJECT SP"}))  # as it was


def test_a_bound_channel_takes_no_appends_through_the_api(server, broker, world) -> None:
    """Its seqs are the partition's offsets: a line landed beside them would take the seq
    a later record needs. Refused per line, other channels of the provider unaffected."""
    joe, watchers = world
    ed = server.login("ed", ["INFO_PROVIDER"])
    on_fed = {**quote(81, 18.0), "stream": "quotes", "provider": "ed.k0"}
    elsewhere = {**quote(82, 18.5), "stream": "quotes", "provider": "ed.api"}
    sp_fed = {**sp("quotes", "{CUSTOMER1}", ts=900), "stream": "quotes", "provider": "ed.k0"}
    body = "\n".join(json.dumps(line) for line in (on_fed, sp_fed, elsewhere))
    report = ok(ed.post("/streams/quotes/elements?assign=seq", content=body))
    assert report["accepted"] == 1, report
    assert [(r["line"], r["reason"]) for r in report["rejections"]] == [
        (1, "channel_fed_by_connector"),
        (2, "channel_fed_by_connector"),
    ]
    refused = _feed(joe)["partitions_state"][0]["refused"]
    broker.produce(TOPIC, 0, [quote(83, 18.25)])  # the partition goes on from its offset
    poll(lambda: 83 in rows_by_id(watchers["al"]), timeout=120)
    assert 81 not in rows_by_id(watchers["al"])
    assert _feed(joe)["partitions_state"][0]["refused"] == refused


def test_only_administrators_bind_and_a_binding_keeps_its_secret(server, broker, world) -> None:
    joe, _ = world
    al = server.login("al", ["CUSTOMER1"])
    binding = {
        "name": "other_feed",
        "stream": "quotes",
        "bootstrap_servers": broker.address,
        "topic": TOPIC,
        "partitions": {"1": {"user": "al"}},
        "security": {
            "protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "username": "svc",
            "password": "pw-never-shown",
        },
    }
    assert al.post("/connectors/kafka", json=binding).status_code == 403
    assert al.get("/connectors/kafka").status_code == 403
    assert al.get(f"/connectors/kafka/{BINDING}").status_code == 403
    assert al.delete(f"/connectors/kafka/{BINDING}").status_code == 403
    refused = joe.post("/connectors/kafka", json=binding)  # Al may not write quotes
    assert refused.status_code == 422 and "WRITE" in refused.json()["message"]
    same_channel = {**binding, "partitions": {"1": {"user": "ed", "provider": "ed.k0"}}}
    assert joe.post("/connectors/kafka", json=same_channel).json()["error"] == "exists"
    again = {**binding, "name": BINDING, "partitions": {"1": {"user": "ed"}}}
    assert joe.post("/connectors/kafka", json=again).status_code == 409
    assert joe.post("/connectors/kafka", json={**binding, "stream": "nope"}).status_code in (
        404,
        422,
    )
    kept = {**binding, "partitions": {"1": {"user": "ed", "provider": "ed.k1"}}}
    shown = ok(joe.post("/connectors/kafka", json=kept), 201)
    try:
        listed = joe.get("/connectors/kafka").text
        assert "pw-never-shown" not in listed and "pw-never-shown" not in str(shown)
        path = server.service.root / "connectors" / "kafka" / "other_feed.json"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        audit = ok(joe.get("/audit", params={"action": "bind_connector"}))["entries"]
        assert sorted(e["detail"]["binding"] for e in audit) == ["other_feed", BINDING]
        assert "pw-never-shown" not in str(audit)
    finally:
        assert joe.delete("/connectors/kafka/other_feed").status_code == 200
    assert not path.exists()
    assert joe.get("/connectors/kafka/other_feed").status_code == 404


def test_a_broker_outage_shows_in_readiness_and_the_server_stays_ready(
    server, world, tmp_path
) -> None:
    joe, _ = world
    gone = TansuBroker(tmp_path / "gone.log")
    gone.create_topic("gone", 1)
    binding = {
        "name": "gone_feed",
        "stream": "quotes",
        "bootstrap_servers": gone.address,
        "topic": "gone",
        "partitions": {"0": {"user": "ed", "provider": "ed.gone"}},
    }
    ok(joe.post("/connectors/kafka", json=binding), 201)
    try:

        def detail() -> dict:
            return server.client().get("/readyz").json()

        poll(lambda: detail()["detail"].get("kafka.ok") == 2, timeout=60)
        gone.stop()
        answer = poll(
            lambda: (d := detail())["detail"].get("kafka.broker_unreachable") == 1 and d,
            timeout=60,
        )
        assert answer["status"] == "ready" and answer["detail"] == {
            "kafka.ok": 1,
            "kafka.broker_unreachable": 1,
        }
        assert "gone_feed" not in str(answer)  # no token asked: no names
        assert ok(joe.get("/connectors/kafka/gone_feed"))["status"] == "broker_unreachable"
    finally:
        gone.stop()
        assert joe.delete("/connectors/kafka/gone_feed").status_code == 200


def test_the_command_line_binds_shows_and_unbinds(server, broker, world, tmp_path) -> None:
    from click.testing import CliRunner

    from streamshield.cli import main

    env = {"STREAMSHIELD_HOME": str(tmp_path), "STREAMSHIELD_PASSWORD": PASSWORD}

    def run(*args: str) -> str:
        result = CliRunner().invoke(main, ["client", *args], env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output + result.stderr
        return result.output

    login = ("login", "--url", server.url, "--ca", str(server.cert), "--user", "joe")
    run(*login, "--role", "ADMIN")
    password, registry_password = tmp_path / "pw", tmp_path / "registry-pw"
    password.write_text("cli-secret\n")
    registry_password.write_text("cli-registry-secret\n")
    run(
        "kafka", "bind", "cli_feed", "--stream", "quotes", "--servers", broker.address,
        "--topic", TOPIC, "--partition", "1=ed:ed.cli", "--protocol", "SASL_PLAINTEXT",
        "--sasl-mechanism", "PLAIN", "--username", "svc", "--password-file", str(password),
        "--encoding", "json_schema", "--registry-url", "https://registry.example:8081",
        "--registry-username", "reader", "--registry-password-file", str(registry_password),
        "--registry-ca", "/etc/ssl/registry-ca.pem",
    )  # fmt: skip
    shown = json.loads(run("kafka", "show", "cli_feed", "--output", "json"))
    assert shown["partitions"] == {"1": {"user": "ed", "provider": "ed.cli"}}
    assert shown["security"] == {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "username": "svc",
        "ca_location": None,
    }
    assert shown["encoding"] == "json_schema"
    assert shown["schema_registry"] == {
        "url": "https://registry.example:8081",
        "username": "reader",
        "ca_location": "/etc/ssl/registry-ca.pem",
    }
    listed = run("kafka", "list")
    assert "cli_feed" in listed and "cli-secret" not in listed and "registry-secret" not in listed
    assert "unbound: cli_feed" in run("kafka", "unbind", "cli_feed")
    assert "cli_feed" not in run("kafka", "list")


def _avro_schema(name: str, fields: list) -> str:
    return json.dumps({"type": "record", "name": name, "fields": fields})


SP_SCHEMA = _avro_schema(
    "Sp",
    [
        {"name": "type", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "sn", "type": "long"},
        {
            "name": "ddp",
            "type": {
                "type": "record",
                "name": "Ddp",
                "fields": [
                    {"name": n, "type": "string"} for n in ("streams", "tuples", "attributes")
                ],
            },
        },
        {
            "name": "srp",
            "type": {
                "type": "record",
                "name": "Srp",
                "fields": [
                    {"name": "roles", "type": "string"},
                    {"name": "grant_option", "type": "boolean"},
                ],
            },
        },
        {"name": "sign", "type": "string"},
        {"name": "immutable", "type": "boolean"},
    ],
)


def _tuple_schema(name: str) -> str:
    values = {
        "type": "record",
        "name": f"{name}Values",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "sym", "type": "string"},
            {"name": "price", "type": "double"},
        ],
    }
    return _avro_schema(
        name,
        [
            {"name": "type", "type": "string"},
            {"name": "tid", "type": "long"},
            {"name": "values", "type": values},
        ],
    )


@pytest.fixture(scope="module")
def avro_feed(server, broker, world):
    """The registry (basic auth), topic ``quotes_avro`` bound with encoding avro to Ed's
    channel ``ed.avro``, and a producer's serializer for each Avro schema."""
    joe, _ = world
    registry = SchemaRegistryServer(user=REGISTRY_USER, password=REGISTRY_PASSWORD)
    broker.create_topic(AVRO_TOPIC, 1)
    binding = {
        "name": AVRO_BINDING,
        "stream": "quotes",
        "bootstrap_servers": broker.address,
        "topic": AVRO_TOPIC,
        "partitions": {"0": {"user": "ed", "provider": "ed.avro"}},
        "encoding": "avro",
        "schema_registry": {
            "url": registry.url,
            "username": REGISTRY_USER,
            "password": REGISTRY_PASSWORD,
        },
    }
    for wrong, says in (
        ({"schema_registry": {"url": "ftp://" + registry.url[7:]}}, "http(s)"),
        ({"schema_registry": None}, "needs a schema_registry"),
        ({"encoding": "protobuf"}, "encoding"),
    ):
        refused = joe.post("/connectors/kafka", json={**binding, **wrong})
        assert refused.status_code == 422 and says in refused.text, refused.text
    shown = ok(joe.post("/connectors/kafka", json=binding), 201)
    assert shown["schema_registry"] == {
        "url": registry.url,
        "username": REGISTRY_USER,
        "ca_location": None,
    }
    listed = joe.get("/connectors/kafka").text
    assert REGISTRY_PASSWORD not in listed and REGISTRY_PASSWORD not in str(shown)
    kept = server.service.root / "connectors" / "kafka" / f"{AVRO_BINDING}.json"
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    client = SchemaRegistryClient(
        {"url": registry.url, "basic.auth.user.info": f"{REGISTRY_USER}:{REGISTRY_PASSWORD}"}
    )
    context = SerializationContext(AVRO_TOPIC, MessageField.VALUE)

    def writer(schema: str):
        serializer = AvroSerializer(client, schema)
        return lambda value: serializer(value, context)

    yield joe, registry, writer
    client.close()
    registry.stop()


def _avro_feed(joe) -> dict:
    return ok(joe.get(f"/connectors/kafka/{AVRO_BINDING}"))


def _refusals(joe) -> Counter:
    """Ed's refused records in the audit, by reason."""
    entries = ok(joe.get("/audit", params={"action": "denied", "user": "ed"}))["entries"]
    counts: Counter = Counter()
    for entry in entries:
        counts[entry["detail"]["reason"]] += entry["detail"]["rejected"]
    return counts


def test_avro_records_land_for_each_reader_and_bad_ones_are_refused_by_reason(
    server, broker, world, avro_feed
) -> None:
    _, watchers = world
    joe, registry, writer = avro_feed
    policy, quotes = writer(SP_SCHEMA), writer(_tuple_schema("QuoteTuple"))
    before = _refusals(joe)
    good = quotes(quote(22, 22.0))
    broker.produce(
        AVRO_TOPIC,
        0,
        [
            policy(sp("quotes", "{CUSTOMER1, CUSTOMER2}", ts=300)),
            policy(sp("quotes", "{CUSTOMER2}", ts=300, sn=2, sign="-", attributes="price")),
            quotes(quote(21, 21.0)),
            b"\x01" + good[1:],  # wrong magic byte
            b"\x00\x00",  # shorter than the header
            b"\x00" + struct.pack(">I", 4242) + good[5:],  # an id the registry never gave
            good[:8],  # the body cut short
            good,
            quotes(quote(23, 23.0)),
        ],
    )
    al, bob = watchers["al"], watchers["bob"]
    poll(lambda: {21, 22, 23} <= set(rows_by_id(al)), timeout=120)
    poll(lambda: {21, 22, 23} <= set(rows_by_id(bob)), timeout=60)
    assert {i: rows_by_id(al)[i]["price"] for i in (21, 22, 23)} == {21: 21, 22: 22, 23: 23}
    assert {
        i: (rows_by_id(bob)[i]["price"], rows_by_id(bob)[i]["_masked"]) for i in (21, 22, 23)
    } == {i: (None, ["price"]) for i in (21, 22, 23)}
    assert [row["id"] for row in al.rows()].count(22) == 1
    [part] = _avro_feed(joe)["partitions_state"]
    assert (part["landed"], part["refused"], part["next_offset"]) == (5, 4, 9)
    assert _refusals(joe) - before == {
        "not_wire_format": 2,
        "unknown_schema": 1,
        "undecodable_record": 1,
    }
    ids = [struct.unpack(">I", record[1:5])[0] for record in (policy(sp("quotes", "{X}")), good)]
    fetched = {
        path: n for (method, path), n in registry.asked.items() if path.startswith("/schemas/ids/")
    }
    assert fetched == {f"/schemas/ids/{i}": 1 for i in (*ids, 4242)}  # each id asked once


def test_a_registry_outage_holds_avro_records_back_and_loses_none(
    server, broker, world, avro_feed
) -> None:
    _, watchers = world
    joe, registry, writer = avro_feed
    held = writer(_tuple_schema("HeldTuple"))  # a schema the server has not fetched yet
    records = [held(quote(24, 24.0)), held(quote(25, 25.0))]
    registry.stop()
    try:
        broker.produce(AVRO_TOPIC, 0, records)
        poll(lambda: _avro_feed(joe)["status"] == "registry_unreachable", timeout=60)
        ready = server.client().get("/readyz").json()
        assert ready["status"] == "ready"
        assert ready["detail"].get("kafka.registry_unreachable") == 1, ready
        [part] = _avro_feed(joe)["partitions_state"]
        assert (part["held"], part["next_offset"], part["refused"]) == (
            "registry_unreachable",
            9,
            4,
        )
        assert not {24, 25} & set(rows_by_id(watchers["al"]))
    finally:
        registry.start()
    poll(lambda: {24, 25} <= set(rows_by_id(watchers["al"])), timeout=120)
    assert _avro_feed(joe)["status"] == "ok"
    [part] = _avro_feed(joe)["partitions_state"]
    assert (part["landed"], part["refused"], part["next_offset"], part["held"]) == (7, 4, 11, None)
    ids = [row["id"] for row in watchers["al"].rows()]
    assert (ids.count(24), ids.count(25)) == (1, 1)
