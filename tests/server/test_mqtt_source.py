"""An MQTT topic filter bound to a stream, end to end through the real server and broker.

Mosquitto (started by the test) carries ``plant/<device>/quotes``; the binding maps
device ``m1`` to Ed's channel ``ed.m1`` and no other device. Ed's messages carry his
policies in-band: first Al (CUSTOMER1) and Bob (CUSTOMER2) may read, Bob without the
price; then only Al. Each watches a query of his own over the stream and gets exactly
what the policy in force at each message gave him; device ``m9``'s messages never land.

The restart test comes first and serves a root of its own (the module's server starts
after it): a server stopped and started again on the same root receives, exactly once,
what the devices published while it was down.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from tests.mqtt_broker import MosquittoBroker
from tests.server.conftest import (
    PASSWORD,
    ok,
    poll,
    serve_root,
    start_server,
    stop_server,
)
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

BINDING = "plant_feed"
TOPIC = "plant/{}/quotes"


def _binding(host: str, port: int, **change) -> dict:
    return {
        "name": BINDING,
        "stream": "quotes",
        "host": host,
        "port": port,
        "topic_filter": "plant/+/quotes",
        "provider_level": 1,
        "providers": {"m1": {"user": "ed", "provider": "ed.m1"}},
        **change,
    }


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    started = MosquittoBroker(tmp_path_factory.mktemp("mosquitto"))
    yield started
    started.stop()


def _landed(root, provider: str) -> list[tuple[int, int]]:
    """(seq, id) of every tuple landed on the channel, in seq order."""
    rows = []
    for path in (root / "landing" / "quotes").glob(f"{provider}-*.jsonl"):
        for line in path.read_text().splitlines():
            element = json.loads(line)
            if element["type"] == "tuple":
                rows.append((element["seq"], element["values"]["id"]))
    return sorted(rows)


@pytest.mark.long  # in the suite: test_mqtt_crash.py restarts on what the broker queued
def test_a_restarted_server_gets_what_was_published_while_it_was_down_once(
    spark, broker, tmp_path
) -> None:
    users = {"joe": ["ADMIN"], "ed": ["INFO_PROVIDER"]}
    topic = TOPIC.format("r1")
    first = start_server(tmp_path, spark, users)
    try:
        joe = first.login("joe", ["ADMIN"])
        input_stream(joe, "quotes", QUOTE)
        binding = _binding(
            broker.host,
            broker.port,
            name="restart_feed",
            format="values",
            providers={"r1": {"user": "ed", "provider": "ed.r1"}},
        )
        ok(joe.post("/connectors/mqtt", json=binding), 201)
        poll(lambda: ok(joe.get("/connectors/mqtt/restart_feed"))["status"] == "ok", timeout=60)
        broker.publish(topic, [{"id": i, "sym": "R", "price": 1.0} for i in (1, 2, 3)])
        poll(lambda: len(_landed(tmp_path, "ed.r1")) == 3, timeout=60)
    finally:
        stop_server(first)
    broker.publish(topic, [{"id": i, "sym": "R", "price": 1.0} for i in range(4, 9)])

    second = serve_root(tmp_path, spark)
    try:
        poll(lambda: len(_landed(tmp_path, "ed.r1")) >= 8, timeout=60)
        broker.publish(topic, [{"id": 9, "sym": "R", "price": 1.0}])
        poll(lambda: len(_landed(tmp_path, "ed.r1")) >= 9, timeout=60)
        assert _landed(tmp_path, "ed.r1") == [(i, i) for i in range(1, 10)]
        joe = second.login("joe", ["ADMIN"])
        [device] = ok(joe.get("/connectors/mqtt/restart_feed"))["devices_state"]
        assert (device["landed"], device["duplicates"], device["waiting"]) == (6, 0, 0)
        assert joe.delete("/connectors/mqtt/restart_feed").status_code == 200
    finally:
        stop_server(second)


@pytest.fixture(scope="module")
def world(server, broker):
    joe = server.login("joe", ["ADMIN"])
    input_stream(joe, "quotes", QUOTE)
    watchers = quote_readers(server, joe)
    shown = ok(joe.post("/connectors/mqtt", json=_binding(broker.host, broker.port)), 201)
    assert shown["status"] in ("ok", "starting")
    poll(lambda: _feed(joe)["status"] == "ok", timeout=60)
    yield joe, watchers
    for watcher in watchers.values():
        watcher.close()


def _feed(joe) -> dict:
    return ok(joe.get(f"/connectors/mqtt/{BINDING}"))


def test_each_reader_gets_what_the_in_band_policy_gave_him(server, broker, world) -> None:
    joe, watchers = world
    broker.publish(TOPIC.format("m9"), [UNBOUND_QUOTE])
    broker.publish(TOPIC.format("m1"), IN_BAND)
    check_in_band_delivery(watchers)
    feed = _feed(joe)
    assert feed["devices_state"] == [
        {
            "device": "m1",
            "provider": "ed.m1",
            "waiting": 0,
            "landed": 8,
            "refused": 0,
            "duplicates": 0,
            "held": None,
        }
    ]
    assert feed["unbound"] == 1
    landed = (server.service.root / "landing" / "quotes").glob("*.jsonl")
    assert {path.name.split("-")[0] for path in landed} == {"ed.m1"}


def test_bad_messages_are_refused_one_by_one_and_audited(server, broker, world) -> None:
    joe, watchers = world
    broker.publish(
        TOPIC.format("m1"),
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
    poll(lambda: _feed(joe)["devices_state"][0]["refused"] == 5, timeout=30)
    device = _feed(joe)["devices_state"][0]
    assert (device["landed"], device["refused"], device["waiting"]) == (9, 5, 0)
    entries = ok(joe.get("/audit", params={"action": "denied", "user": "ed"}))["entries"]
    reasons: dict[str, int] = {}
    for entry in entries:
        reason = entry["detail"]["reason"]
        reasons[reason] = reasons.get(reason, 0) + entry["detail"]["rejected"]
    assert reasons == {
        "malformed_record": 2,
        "seq_given": 1,
        "wrong_channel": 1,
        "type_mismatch": 1,
    }
    ingest = ok(joe.get("/streams/quotes/ingest"))
    assert [(f["binding"], f["topic_filter"]) for f in ingest["mqtt"]] == [
        (BINDING, "plant/+/quotes")
    ]
    assert ingest["counts"]["elements_rejected"] >= 6  # the five and the unbound device's
    ed = server.login("ed", ["INFO_PROVIDER"])
    assert [f["binding"] for f in ok(ed.get("/streams/quotes/ingest"))["mqtt"]] == [BINDING]
    al = server.login("al", ["CUSTOMER1"])
    assert ok(al.get("/streams/quotes/ingest"))["mqtt"] == []  # a reader sees no feeds


def test_a_provider_without_rights_holds_messages_back_and_loses_none(
    server, broker, world
) -> None:
    joe, watchers = world
    body = {"permission": "WRITE", "kind": "stream", "object": "quotes", "role": "INFO_PROVIDER"}
    ok(joe.request("DELETE", "/grants", json=body))
    ok(joe.request("DELETE", "/grants", json={**body, "permission": "INJECT SP"}))
    broker.publish(TOPIC.format("m1"), [quote(7, 17.0)])
    poll(lambda: (_feed(joe)["devices_state"][0]["held"] or "") == "forbidden", timeout=60)
    assert _feed(joe)["status"] == "held_back: forbidden"
    assert _feed(joe)["devices_state"][0]["waiting"] == 1  # unacked: kept by the broker too
    assert 7 not in rows_by_id(watchers["al"])
    ok(joe.post("/grants", json=body))
    ok(joe.post("/grants", json={**body, "permission": "INJECT SP"}))
    poll(lambda: 7 in rows_by_id(watchers["al"]), timeout=120)
    assert rows_by_id(watchers["al"])[7]["price"] == 17.0
    assert _feed(joe)["status"] == "ok"
    assert [row["id"] for row in watchers["al"].rows()].count(7) == 1


def test_only_administrators_bind_and_a_binding_keeps_its_secret(server, broker, world) -> None:
    joe, _ = world
    al = server.login("al", ["CUSTOMER1"])
    binding = _binding(
        broker.host,
        broker.port,
        name="other_feed",
        providers={"m2": {"user": "al"}},
        username="svc",
        password="pw-never-shown",
    )
    assert al.post("/connectors/mqtt", json=binding).status_code == 403
    assert al.get("/connectors/mqtt").status_code == 403
    assert al.get(f"/connectors/mqtt/{BINDING}").status_code == 403
    assert al.delete(f"/connectors/mqtt/{BINDING}").status_code == 403
    refused = joe.post("/connectors/mqtt", json=binding)  # Al may not write quotes
    assert refused.status_code == 422 and "WRITE" in refused.json()["message"]
    same_channel = {**binding, "providers": {"m2": {"user": "ed", "provider": "ed.m1"}}}
    assert joe.post("/connectors/mqtt", json=same_channel).json()["error"] == "exists"
    again = {**binding, "name": BINDING, "providers": {"m2": {"user": "ed"}}}
    assert joe.post("/connectors/mqtt", json=again).status_code == 409
    assert joe.post("/connectors/mqtt", json={**binding, "stream": "nope"}).status_code in (
        404,
        422,
    )
    no_default = {**binding, "providers": {"*": {"user": "ed", "provider": "ed.any"}}}
    assert joe.post("/connectors/mqtt", json=no_default).status_code == 201  # a literal name
    poll(lambda: ok(joe.get("/connectors/mqtt/other_feed"))["status"] == "ok", timeout=60)
    broker.publish(TOPIC.format("m7"), [quote(70)])  # "*" is no wildcard: m7 is unbound
    poll(lambda: ok(joe.get("/connectors/mqtt/other_feed"))["unbound"] == 1, timeout=30)
    assert joe.delete("/connectors/mqtt/other_feed").status_code == 200
    kept = {**binding, "providers": {"m2": {"user": "ed", "provider": "ed.m2"}}}
    shown = ok(joe.post("/connectors/mqtt", json=kept), 201)
    path = server.service.root / "connectors" / "mqtt" / "other_feed.json"
    try:
        listed = joe.get("/connectors/mqtt").text
        assert "pw-never-shown" not in listed and "pw-never-shown" not in str(shown)
        assert shown["username"] == "svc" and "password" not in shown
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        audit = ok(joe.get("/audit", params={"action": "bind_connector"}))["entries"]
        bound = [e["detail"]["binding"] for e in audit if e["detail"].get("connector") == "mqtt"]
        assert sorted(bound) == ["other_feed", "other_feed", BINDING]
        assert "pw-never-shown" not in json.dumps(audit)
    finally:
        assert joe.delete("/connectors/mqtt/other_feed").status_code == 200
    assert not path.exists() and not path.with_suffix(".state").exists()
    assert joe.get("/connectors/mqtt/other_feed").status_code == 404
    assert not list((server.service.root / "landing" / "quotes").glob("ed.any-*"))


def test_a_broker_outage_shows_in_readiness_and_the_source_comes_back(
    server, world, tmp_path
) -> None:
    joe, watchers = world
    gone = MosquittoBroker(tmp_path / "gone")
    binding = _binding(
        gone.host,
        gone.port,
        name="gone_feed",
        providers={"g1": {"user": "ed", "provider": "ed.g1"}},
    )
    ok(joe.post("/connectors/mqtt", json=binding), 201)
    try:

        def detail() -> dict:
            return server.client().get("/readyz").json()

        poll(lambda: detail()["detail"].get("mqtt.ok") == 2, timeout=60)
        gone.stop()
        answer = poll(
            lambda: (d := detail())["detail"].get("mqtt.broker_unreachable") == 1 and d,
            timeout=60,
        )
        assert answer["status"] == "ready" and answer["detail"]["mqtt.ok"] == 1
        assert "gone_feed" not in str(answer)  # no token asked: no names
        shown = ok(joe.get("/connectors/mqtt/gone_feed"))
        assert shown["status"] == "broker_unreachable"
        gone.start()
        poll(lambda: detail()["detail"].get("mqtt.ok") == 2, timeout=60)
        gone.publish(TOPIC.format("g1"), [sp("quotes", "{CUSTOMER1}"), quote(80, 18.0)])
        poll(lambda: 80 in rows_by_id(watchers["al"]), timeout=120)
    finally:
        gone.stop()
        assert joe.delete("/connectors/mqtt/gone_feed").status_code == 200


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
        "mqtt", "bind", "cli_feed", "--stream", "quotes", "--host", broker.host,
        "--port", str(broker.port), "--filter", "cli/+", "--level", "1",
        "--device", "c1=ed:ed.cli", "--username", "svc", "--password-file", str(password),
    )  # fmt: skip
    shown = json.loads(run("mqtt", "show", "cli_feed", "--output", "json"))
    assert shown["providers"] == {"c1": {"user": "ed", "provider": "ed.cli"}}
    assert shown["client_id"] == "streamshield-cli_feed" and shown["username"] == "svc"
    assert "password" not in shown
    listed = run("mqtt", "list")
    assert "cli_feed" in listed and "cli-secret" not in listed
    assert "unbound: cli_feed" in run("mqtt", "unbind", "cli_feed")
    assert "cli_feed" not in run("mqtt", "list")
