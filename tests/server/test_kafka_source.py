"""A Kafka topic bound to a stream, end to end through the real server and a real broker.

Tansu (a Kafka-protocol broker) holds topic ``quotes`` with two partitions; partition 0
is bound to Ed's channel ``ed.k0``, partition 1 to nobody. Ed's records carry his
policies in-band: first Al (CUSTOMER1) and Bob (CUSTOMER2) may read, Bob without the
price; then only Al. Each watches a query of his own over the stream and gets exactly
what the policy in force at each record gave him; partition 1's records never land.
"""

from __future__ import annotations

import json
import os
import stat

import pytest
from bench.tansu_broker import TansuBroker

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
)

pytestmark = pytest.mark.spark

TOPIC, BINDING = "quotes", "quotes_feed"


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
    password = tmp_path / "pw"
    password.write_text("cli-secret\n")
    run(
        "kafka", "bind", "cli_feed", "--stream", "quotes", "--servers", broker.address,
        "--topic", TOPIC, "--partition", "1=ed:ed.cli", "--protocol", "SASL_PLAINTEXT",
        "--sasl-mechanism", "PLAIN", "--username", "svc", "--password-file", str(password),
    )  # fmt: skip
    shown = json.loads(run("kafka", "show", "cli_feed", "--output", "json"))
    assert shown["partitions"] == {"1": {"user": "ed", "provider": "ed.cli"}}
    assert shown["security"] == {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "username": "svc",
        "ca_location": None,
    }
    assert "cli_feed" in run("kafka", "list") and "cli-secret" not in run("kafka", "list")
    assert "unbound: cli_feed" in run("kafka", "unbind", "cli_feed")
    assert "cli_feed" not in run("kafka", "list")
