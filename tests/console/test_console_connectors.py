"""The console's connectors and sinks pages in a real browser (docs/console.md).

Shares the package's server and browser (names here are this module's own, nothing
assumes a fresh catalog). An administrator binds a Kafka topic and an MQTT topic filter
to brokers that are not there (port 9 on loopback refuses every connection): each is
listed with its channels and a retrying status, the same as the API's, and unbound in
two steps; the broker password is never on the page. A user attaches a Delta sink to
her own query and detaches it; a refusal of the API is shown under its form. A user who
is not an administrator is not offered the connectors page, sees the API's 403 when
she forces it, and is refused by the API when she asks it by hand.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.console.conftest import reader_stream, snap
from tests.server.conftest import ok, poll

pytestmark = pytest.mark.spark

NOWHERE = "127.0.0.1:9"
"""A broker address that refuses every connection: nothing needs to run."""
SASL_PASSWORD = "never-shown-4e1f9"


@pytest.fixture(scope="module")
def meters(console_server, tmp_path_factory) -> Iterator[dict]:
    """Joe's stream ``meters``; Al (CUSTOMER1) reads it and registers ``meter_watch``
    over it (in the background: planning it takes seconds, the first tests need only
    the stream); sinks may write under ``lake``."""
    joe = console_server.login("joe", ["ADMIN"])
    reader_stream(joe, "meters", [["id", "bigint"], ["kwh", "double"]])
    lake = tmp_path_factory.mktemp("lake")
    ok(joe.put("/system/settings", json={"values": {"sinks.delta_roots": [str(lake)]}}))
    al = console_server.login("al", ["CUSTOMER1"])
    text = "SELECT id, kwh FROM meters"
    with ThreadPoolExecutor(1) as background:
        registered = background.submit(
            al.post, "/queries", json={"name": "meter_watch", "text": text}
        )
        yield {"joe": joe, "al": al, "lake": lake, "registered": registered}


@pytest.fixture
def meter_watch(meters) -> str:
    """Al's query ``meter_watch``, registered and running."""
    ok(meters["registered"].result(timeout=120), 201)
    al = meters["al"]
    poll(lambda: ok(al.get("/queries/meter_watch"))["status"] == "running", timeout=60)
    return "meter_watch"


def _card(page, kind: str, name: str):
    return page.locator(f"section.binding[data-kind='{kind}'][data-binding='{name}']")


def _facts(card) -> dict[str, str]:
    terms = card.locator("dl.facts dt").all_text_contents()
    return dict(zip(terms, card.locator("dl.facts dd").all_text_contents(), strict=True))


def test_an_administrator_binds_kafka_and_mqtt_sources_and_unbinds_them(
    console, console_server, meters
) -> None:
    joe = meters["joe"]
    console.login("joe", ["ADMIN"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert page.locator("#nav a").all_text_contents()[-4:] == [
        "Users",
        "Roles",
        "Grants",
        "Connectors",
    ]
    page.click("#nav a:text('Connectors')")
    page.wait_for_selector("#kafka-bind")
    assert page.locator("#input-streams option[value='meters']").count() == 1

    # Refusals under the form: a line the console cannot read, then the API's own
    # (SASL without a password).
    page.fill("#kafka-bind-name", "meter_feed")
    page.fill("#kafka-bind-stream", "meters")
    page.fill("#kafka-bind-bootstrap_servers", NOWHERE)
    page.fill("#kafka-bind-topic", "meters.raw")
    page.fill("#kafka-bind-partitions", "0 joe")
    page.click("#kafka-bind button[type=submit]")
    page.wait_for_selector("#kafka-bind-error")
    assert "invalid_entry" in page.text_content("#kafka-bind-error")
    page.fill("#kafka-bind-partitions", "0=joe:joe.k0\n1=joe")
    page.select_option("#kafka-bind-protocol", "SASL_PLAINTEXT")
    page.select_option("#kafka-bind-sasl_mechanism", "PLAIN")
    page.fill("#kafka-bind-username", "meter_client")
    page.click("#kafka-bind button[type=submit]")
    page.wait_for_selector("#kafka-bind-error:has-text('SASL needs')")
    assert all(b["name"] != "meter_feed" for b in ok(joe.get("/connectors/kafka"))["bindings"])

    # Bound: listed with its partitions; the password is gone from the form.
    page.fill("#kafka-bind-password", SASL_PASSWORD)
    page.click("#kafka-bind button[type=submit]")
    page.wait_for_selector("#connectors-notice:has-text('bound to meters as meter_feed')")
    assert page.input_value("#kafka-bind-password") == ""
    card = _card(page, "kafka", "meter_feed")
    facts = _facts(card)
    assert facts["Brokers"] == NOWHERE and facts["Topic"] == "meters.raw"
    assert facts["Security"] == "SASL_PLAINTEXT, PLAIN, user meter_client"
    assert facts["Consumer group"] == "streamshield-meter_feed"
    rows = [
        r.locator("td").all_text_contents() for r in card.locator("table.channels tbody tr").all()
    ]
    assert rows == [
        ["0", "joe", "joe.k0", "—", "—", "0", "0", "—"],
        ["1", "joe", "joe", "—", "—", "0", "0", "—"],
    ]
    # Unbinding asks first; the question stays asked while the list is read again.
    page.click("[data-unbind='kafka/meter_feed']")
    confirm = page.locator("[data-unbind-confirm='kafka/meter_feed']")
    assert confirm.is_visible()
    reads = console.paths.count("/connectors/kafka")

    # An MQTT topic filter, likewise.
    page.fill("#mqtt-bind-name", "meter_devices")
    page.fill("#mqtt-bind-stream", "meters")
    page.fill("#mqtt-bind-host", "127.0.0.1")
    page.fill("#mqtt-bind-port", "9")
    page.fill("#mqtt-bind-topic_filter", "meters/+/reading")
    page.fill("#mqtt-bind-provider_level", "1")
    page.fill("#mqtt-bind-providers", "m1=joe:joe.m1")
    page.fill("#mqtt-bind-username", "meter_client")
    page.fill("#mqtt-bind-password", SASL_PASSWORD)
    page.click("#mqtt-bind button[type=submit]")
    page.wait_for_selector("#connectors-notice:has-text('as meter_devices')")
    mqtt = _card(page, "mqtt", "meter_devices")
    facts = _facts(mqtt)
    assert facts["Broker"] == "127.0.0.1:9" and facts["Topic filter"] == "meters/+/reading"
    assert facts["Security"] == "no TLS, user meter_client"
    assert mqtt.locator("table.channels tbody td").all_text_contents() == [
        "m1", "joe", "joe.m1", "0", "0", "0", "0", "—",
    ]  # fmt: skip

    # Neither broker is there: both sources retry, as the API says.
    for kind, name in (("kafka", "meter_feed"), ("mqtt", "meter_devices")):
        status = _card(page, kind, name).locator(".connector-status:has-text('retrying')")
        status.wait_for(timeout=30_000)
        shown = ok(joe.get(f"/connectors/{kind}/{name}"))
        assert shown["status"] == "broker_unreachable"
        assert status.get_attribute("data-status") == shown["status"]
        assert status.text_content() == "retrying: broker_unreachable"
    states = ok(joe.get("/connectors/kafka/meter_feed"))["partitions_state"]
    assert [(s["partition"], s["provider"], s["lag"]) for s in states] == [
        (0, "joe.k0", None),
        (1, "joe", None),
    ]
    assert SASL_PASSWORD not in page.content()
    snap(page, "connectors")
    assert console.paths.count("/connectors/kafka") > reads
    assert confirm.is_visible() and joe.get("/connectors/kafka/meter_feed").status_code == 200

    confirm.click()
    page.wait_for_selector("#connectors-notice:has-text('meter_feed unbound')")
    page.wait_for_selector("section.binding[data-binding='meter_feed']", state="detached")
    assert joe.get("/connectors/kafka/meter_feed").status_code == 404
    page.click("[data-unbind='mqtt/meter_devices']")
    page.click("[data-unbind-confirm='mqtt/meter_devices']")
    page.wait_for_selector("#connectors-notice:has-text('meter_devices unbound')")
    assert joe.get("/connectors/mqtt/meter_devices").status_code == 404
    page.wait_for_selector("#kafka-bindings .empty, #mqtt-bindings .empty")


def test_a_user_attaches_a_delta_sink_to_her_query_and_detaches_it(
    console, console_server, meters, meter_watch, tmp_path
) -> None:
    al = meters["al"]
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert "Sinks" in page.locator("#nav a").all_text_contents()
    page.click("#nav a:text('Sinks')")
    page.wait_for_selector("#sink-delta")
    assert page.locator("#sink-queries option[value='meter_watch']").count() == 1
    # Outside the locations an administrator allowed: the API's 403 under the form.
    page.fill("#sink-delta-name", "al_meters")
    page.fill("#sink-delta-query", "meter_watch")
    page.fill("#sink-delta-uri", str(tmp_path / "elsewhere"))
    page.click("#sink-delta button[type=submit]")
    page.wait_for_selector("#sink-delta-error")
    assert "sinks.delta_roots" in page.text_content("#sink-delta-error")
    assert al.get("/sinks/al_meters").status_code == 404

    table = str(meters["lake"] / "al_meters")
    page.fill("#sink-delta-uri", table)
    page.click("#sink-delta button[type=submit]")
    page.wait_for_selector("#sinks-notice:has-text('al_meters attached to meter_watch')")
    shown = ok(al.get("/sinks/al_meters"))
    page.wait_for_selector("#sinks tr[data-sink='al_meters']")
    row = page.locator("#sinks tr[data-sink='al_meters']")
    cells = row.locator("td").all_text_contents()
    last = "none yet" if shown["last_batch"] < 0 else str(shown["last_batch"])
    assert cells[:6] == [
        "al_meters",
        "meter_watch",
        f"Delta table {table}",
        shown["status"],
        str(shown["rows_written"]),
        last,
    ]
    assert shown["status"] == "ok" and shown["target"] == {
        "kind": "delta",
        "uri": table,
        "storage_options": {},
    }
    snap(page, "sinks")

    # Someone else neither sees it nor detaches it (404, as for no sink at all).
    mallory = console_server.login("mallory", ["OTHER"])
    assert ok(mallory.get("/sinks"))["sinks"] == []
    assert mallory.delete("/sinks/al_meters").status_code == 404

    row.locator("[data-detach='al_meters']").click()
    page.click("[data-detach-confirm='al_meters']")
    page.wait_for_selector("#sinks-notice:has-text('al_meters detached')")
    page.wait_for_selector("#no-sinks")
    assert al.get("/sinks/al_meters").status_code == 404


def test_the_connectors_page_is_not_offered_to_others_and_the_api_refuses_them(
    console, console_server, meters
) -> None:
    console.login("al", ["CUSTOMER1"])
    page = console.page
    page.wait_for_selector("#nav a")
    assert "Connectors" not in page.locator("#nav a").all_text_contents()
    console.open("#/connectors")
    page.wait_for_selector("#connectors-error")
    assert "forbidden" in page.text_content("#connectors-error")
    assert "CHANGE SYSTEM" in page.text_content("#connectors-error")
    assert page.locator("#kafka-bind, #mqtt-bind, section.binding").count() == 0
    binding = {
        "name": "al_feed",
        "stream": "meters",
        "bootstrap_servers": NOWHERE,
        "topic": "meters.raw",
        "partitions": {"0": {"user": "al"}},
    }
    with console_server.client(console.tokens[-1]) as as_al:
        assert as_al.get("/connectors/kafka").status_code == 403
        assert as_al.get("/connectors/mqtt").status_code == 403
        assert as_al.post("/connectors/kafka", json=binding).status_code == 403
        assert as_al.delete("/connectors/mqtt/meter_devices").status_code == 403
    bindings = ok(meters["joe"].get("/connectors/kafka"))["bindings"]
    assert all(b["name"] != "al_feed" for b in bindings)
