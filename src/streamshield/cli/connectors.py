"""Command line for connectors: ``streamshield client kafka|mqtt bind|list|show|unbind``
(brokers bound to streams) and ``client sink attach|list|detach`` (rows to Kafka or Delta).

A broker's or schema registry's password is read from a file (``--password-file``,
``--registry-password-file``), never from the command line, where every user of the
machine could read it in the process list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from streamshield.cli.http import OUTPUT, request, show


@dataclass(frozen=True)
class SourceKind:
    """What the list, show and unbind commands of one kind of source binding show."""

    kind: str
    """``kafka`` or ``mqtt``: the route ``/connectors/<kind>`` and the command group."""
    source: str
    """The binding's field that names what it reads (topic, topic filter)."""
    channels: str
    """The binding's field mapping broker names to who their messages act as."""
    column: str
    """The list's column of those channels."""
    state: list[str]
    """The columns of each channel's state in ``show``."""
    example: str

    def show(self, answer: dict, output: str) -> None:
        if output == "json":
            click.echo(json.dumps(answer, indent=2))
            return
        click.echo(
            f"{answer['name']}: {answer[self.source]} -> {answer['stream']} ({answer['status']})"
        )
        show(answer[f"{self.column}_state"], self.state, output)

    def commands(self, group: click.Group) -> None:
        """Adds ``list``, ``show NAME`` and ``unbind NAME`` to the kind's group."""
        route = f"/connectors/{self.kind}"

        @group.command(
            "list",
            help=f"Every binding with its status.\n\nExample: streamshield client {self.kind} list",
        )
        @OUTPUT
        def listed(output: str) -> None:
            answer = request("GET", route)
            if output == "json":
                click.echo(json.dumps(answer, indent=2))
                return
            rows = [
                {
                    **b,
                    self.column: [
                        f"{n}={p.get('provider') or p['user']}" for n, p in b[self.channels].items()
                    ],
                }
                for b in answer["bindings"]
            ]
            show(rows, ["name", "stream", self.source, "status", self.column], output)

        @group.command(
            "show",
            help="One binding: its settings (no password) and each channel's "
            f"state.\n\nExample: streamshield client {self.kind} show {self.example}",
        )
        @click.argument("name")
        @OUTPUT
        def shown(name: str, output: str) -> None:
            self.show(request("GET", f"{route}/{name}"), output)

        @group.command(
            "unbind",
            help="Stop reading and forget the binding (what landed stays)."
            f"\n\nExample: streamshield client {self.kind} unbind {self.example}",
        )
        @click.argument("name")
        def unbind(name: str) -> None:
            request("DELETE", f"{route}/{name}")
            click.echo(f"unbound: {name}")


KAFKA = SourceKind(
    "kafka",
    source="topic",
    channels="partitions",
    column="partitions",
    state=["partition", "provider", "next_offset", "lag", "landed", "refused", "held"],
    example="quotes_feed",
)
MQTT = SourceKind(
    "mqtt",
    source="topic_filter",
    channels="providers",
    column="devices",
    state=["device", "provider", "waiting", "landed", "refused", "duplicates", "held"],
    example="plant_feed",
)


@click.group("kafka")
def kafka() -> None:
    """Kafka topics bound to streams (administrators)."""


KAFKA.commands(kafka)


def _partition(value: str) -> tuple[str, dict[str, str]]:
    """``N=USER`` or ``N=USER:PROVIDER``."""
    number, equals, who = value.partition("=")
    if not (equals and number.isdigit() and who):
        raise click.BadParameter(f"{value!r} is not N=USER or N=USER:PROVIDER")
    user, _, provider = who.partition(":")
    return number, {"user": user, **({"provider": provider} if provider else {})}


def _credentials(
    username: str | None, password_file: Path | None, ca: str | None, ca_key: str
) -> dict[str, str]:
    """What a broker or a registry is logged in to with, as given: the user, the password
    read from its file, the CA file under ``ca_key``."""
    given = {}
    if username:
        given["username"] = username
    if password_file is not None:
        given["password"] = password_file.read_text("utf-8").strip()
    if ca:
        given[ca_key] = ca
    return given


def _field(value: str) -> tuple[str, str]:
    source, equals, attribute = value.partition("=")
    if not (equals and source and attribute):
        raise click.BadParameter(f"{value!r} is not RECORD_FIELD=ATTRIBUTE")
    return source, attribute


@kafka.command("bind")
@click.argument("name")
@click.option("--stream", required=True, help="The input stream the records land in.")
@click.option("--servers", required=True, help="Bootstrap servers, host:port[,host:port].")
@click.option("--topic", required=True)
@click.option(
    "--partition",
    "partitions",
    multiple=True,
    required=True,
    help="N=USER or N=USER:PROVIDER: partition N's records act as USER on PROVIDER's "
    "channel (repeat per partition; others are not read).",
)
@click.option("--format", "form", type=click.Choice(["element", "values"]), default="element")
@click.option("--field", "fields", multiple=True, help="RECORD_FIELD=ATTRIBUTE (values format).")
@click.option("--group", default=None, help="Consumer group (default: streamshield-NAME).")
@click.option(
    "--protocol",
    type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
    default="PLAINTEXT",
)
@click.option("--sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]))
@click.option("--username", default=None)
@click.option("--password-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--ca", default=None, help="PEM file of the broker's CA (on the server).")
@click.option("--max-records", type=click.IntRange(1, 100_000), default=5000, show_default=True)
@click.option(
    "--encoding",
    type=click.Choice(["json", "avro", "json_schema"]),
    default="json",
    show_default=True,
    help="How record values are written: JSON, or Avro / JSON Schema in Confluent's wire "
    "format (needs --registry-url).",
)
@click.option("--registry-url", default=None, help="http(s)://host:port of the schema registry.")
@click.option("--registry-username", default=None, help="The registry's basic auth user.")
@click.option(
    "--registry-password-file", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--registry-ca", default=None, help="PEM file of the registry's CA (on the server).")
@OUTPUT
def kafka_bind(
    name: str,
    stream: str,
    servers: str,
    topic: str,
    partitions: tuple[str, ...],
    form: str,
    fields: tuple[str, ...],
    group: str | None,
    protocol: str,
    sasl_mechanism: str | None,
    username: str | None,
    password_file: Path | None,
    ca: str | None,
    max_records: int,
    encoding: str,
    registry_url: str | None,
    registry_username: str | None,
    registry_password_file: Path | None,
    registry_ca: str | None,
    output: str,
) -> None:
    """Bind TOPIC to STREAM: its records land as the partitions' providers' elements.

    Example: streamshield client kafka bind quotes_feed --stream quotes
    --servers broker:9092 --topic quotes --partition 0=ed:ed.k0

    Avro values: ... --encoding avro --registry-url https://registry:8081 --format values
    """
    security: dict[str, Any] = {"protocol": protocol}
    if sasl_mechanism:
        security["sasl_mechanism"] = sasl_mechanism
    security.update(_credentials(username, password_file, ca, "ca_location"))
    body: dict[str, Any] = {
        "name": name,
        "stream": stream,
        "bootstrap_servers": servers,
        "topic": topic,
        "partitions": dict(_partition(p) for p in partitions),
        "format": form,
        "fields": dict(_field(f) for f in fields),
        "security": security,
        "max_records": max_records,
        "encoding": encoding,
        **({"group_id": group} if group else {}),
    }
    registry = _credentials(registry_username, registry_password_file, registry_ca, "ca_location")
    if registry_url is not None:
        body["schema_registry"] = {"url": registry_url, **registry}
    elif registry:
        raise click.UsageError(
            "--registry-username, --registry-password-file and --registry-ca need --registry-url"
        )
    KAFKA.show(request("POST", "/connectors/kafka", json=body), output)


@click.group("mqtt")
def mqtt() -> None:
    """MQTT topic filters bound to streams (administrators)."""


MQTT.commands(mqtt)


def _device(value: str) -> tuple[str, dict[str, str]]:
    """``DEVICE=USER`` or ``DEVICE=USER:PROVIDER``."""
    device, equals, who = value.partition("=")
    if not (equals and device and who):
        raise click.BadParameter(f"{value!r} is not DEVICE=USER or DEVICE=USER:PROVIDER")
    user, _, provider = who.partition(":")
    return device, {"user": user, **({"provider": provider} if provider else {})}


@mqtt.command("bind")
@click.argument("name")
@click.option("--stream", required=True, help="The input stream the messages land in.")
@click.option("--host", required=True, help="The broker's host name or address.")
@click.option("--port", type=click.IntRange(1, 65535), default=1883, show_default=True)
@click.option("--filter", "topic_filter", required=True, help="Topic filter, e.g. plant/+/reading.")
@click.option(
    "--level",
    "provider_level",
    type=click.IntRange(0, 1000),
    required=True,
    help="Which topic level (0-based) names the device.",
)
@click.option(
    "--device",
    "devices",
    multiple=True,
    required=True,
    help="DEVICE=USER or DEVICE=USER:PROVIDER: DEVICE's messages act as USER on "
    "PROVIDER's channel (repeat per device; other devices are refused).",
)
@click.option("--format", "form", type=click.Choice(["element", "values"]), default="element")
@click.option("--field", "fields", multiple=True, help="PAYLOAD_FIELD=ATTRIBUTE (values format).")
@click.option("--client-id", default=None, help="Session client id (default: streamshield-NAME).")
@click.option("--username", default=None)
@click.option("--password-file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--ca", default=None, help="PEM file of the broker's CA (on the server): TLS.")
@OUTPUT
def mqtt_bind(
    name: str,
    stream: str,
    host: str,
    port: int,
    topic_filter: str,
    provider_level: int,
    devices: tuple[str, ...],
    form: str,
    fields: tuple[str, ...],
    client_id: str | None,
    username: str | None,
    password_file: Path | None,
    ca: str | None,
    output: str,
) -> None:
    """Bind a topic filter to STREAM: each device's messages land on its provider's channel.

    Example: streamshield client mqtt bind plant_feed --stream readings
    --host broker --filter 'plant/+/reading' --level 1 --device m1=ed:ed.m1
    """
    body: dict[str, Any] = {
        "name": name,
        "stream": stream,
        "host": host,
        "port": port,
        "topic_filter": topic_filter,
        "provider_level": provider_level,
        "providers": dict(_device(d) for d in devices),
        "format": form,
        "fields": dict(_field(f) for f in fields),
    }
    if client_id:
        body["client_id"] = client_id
    body.update(_credentials(username, password_file, ca, "ca_file"))
    MQTT.show(request("POST", "/connectors/mqtt", json=body), output)


SINK_COLUMNS = ["name", "query", "user", "target", "status", "last_batch", "rows_written"]


@click.group("sink")
def sink() -> None:
    """A query's rows, as you would receive them, written to Kafka or Delta Lake."""


@sink.command("attach")
@click.argument("query")
@click.argument("name")
@click.option("--delta", "delta_uri", default=None, help="A Delta table's path or URI.")
@click.option("--kafka-servers", default=None, help="host:port[,...] of the target brokers.")
@click.option("--kafka-topic", default=None)
@OUTPUT
def sink_attach(
    query: str,
    name: str,
    delta_uri: str | None,
    kafka_servers: str | None,
    kafka_topic: str | None,
    output: str,
) -> None:
    """Write QUERY's rows, as this session receives them, to a Delta table or a topic.

    Example: streamshield client sink attach heart_nina nina_lake --delta /data/lake/nina
    """
    if (delta_uri is None) == (kafka_servers is None or kafka_topic is None):
        raise click.UsageError("give --delta, or --kafka-servers and --kafka-topic")
    target: dict[str, Any] = (
        {"kind": "delta", "uri": delta_uri}
        if delta_uri is not None
        else {"kind": "kafka", "bootstrap_servers": kafka_servers, "topic": kafka_topic}
    )
    answer = request("POST", f"/queries/{query}/sinks", json={"name": name, "target": target})
    _show_sinks({"sinks": [answer]}, output)


@sink.command("list")
@OUTPUT
def sink_list(output: str) -> None:
    """Your sinks (administrators: every one) and their state.

    Example: streamshield client sink list
    """
    _show_sinks(request("GET", "/sinks"), output)


@sink.command("detach")
@click.argument("name")
def sink_detach(name: str) -> None:
    """Stop writing and forget the sink (what it wrote stays).

    Example: streamshield client sink detach nina_lake
    """
    request("DELETE", f"/sinks/{name}")
    click.echo(f"detached: {name}")


def _show_sinks(answer: dict, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(answer, indent=2))
        return
    rows = [
        {**s, "target": s["target"].get("uri") or s["target"].get("topic")} for s in answer["sinks"]
    ]
    show(rows, SINK_COLUMNS, output)


def attach(client: click.Group) -> None:
    """Adds ``kafka``, ``mqtt`` and ``sink`` to the ``streamshield client`` group."""
    client.add_command(kafka)
    client.add_command(mqtt)
    client.add_command(sink)
