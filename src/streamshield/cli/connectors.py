"""Command line for connectors: ``streamshield client kafka bind|list|show|unbind`` (Kafka
topics bound to streams) and ``client sink attach|list|detach`` (rows to Kafka or Delta).

A SASL password is read from a file (``--password-file``), never from the command line,
where every user of the machine could read it in the process list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from streamshield.cli.http import OUTPUT, request, show

COLUMNS = ["name", "stream", "topic", "status", "partitions"]
PARTITION_COLUMNS = ["partition", "provider", "next_offset", "lag", "landed", "refused", "held"]


@click.group("kafka")
def kafka() -> None:
    """Kafka topics bound to streams (administrators)."""


def _partition(value: str) -> tuple[str, dict[str, str]]:
    """``N=USER`` or ``N=USER:PROVIDER``."""
    number, equals, who = value.partition("=")
    if not (equals and number.isdigit() and who):
        raise click.BadParameter(f"{value!r} is not N=USER or N=USER:PROVIDER")
    user, _, provider = who.partition(":")
    return number, {"user": user, **({"provider": provider} if provider else {})}


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
    output: str,
) -> None:
    """Bind TOPIC to STREAM: its records land as the partitions' providers' elements.

    Example: streamshield client kafka bind quotes_feed --stream quotes
    --servers broker:9092 --topic quotes --partition 0=ed:ed.k0
    """
    security: dict[str, Any] = {"protocol": protocol}
    if sasl_mechanism:
        security["sasl_mechanism"] = sasl_mechanism
    if username:
        security["username"] = username
    if password_file is not None:
        security["password"] = password_file.read_text("utf-8").strip()
    if ca:
        security["ca_location"] = ca
    body = {
        "name": name,
        "stream": stream,
        "bootstrap_servers": servers,
        "topic": topic,
        "partitions": dict(_partition(p) for p in partitions),
        "format": form,
        "fields": dict(_field(f) for f in fields),
        "security": security,
        "max_records": max_records,
        **({"group_id": group} if group else {}),
    }
    answer = request("POST", "/connectors/kafka", json=body)
    _show_one(answer, output)


@kafka.command("list")
@OUTPUT
def kafka_list(output: str) -> None:
    """Every binding with its status.

    Example: streamshield client kafka list
    """
    answer = request("GET", "/connectors/kafka")
    rows = [
        {
            **b,
            "partitions": [
                f"{n}={p.get('provider') or p['user']}" for n, p in b["partitions"].items()
            ],
        }
        for b in answer["bindings"]
    ]
    if output == "json":
        click.echo(json.dumps(answer, indent=2))
        return
    show(rows, COLUMNS, output)


@kafka.command("show")
@click.argument("name")
@OUTPUT
def kafka_show(name: str, output: str) -> None:
    """One binding: its settings (no password) and each partition's offset and lag.

    Example: streamshield client kafka show quotes_feed
    """
    _show_one(request("GET", f"/connectors/kafka/{name}"), output)


@kafka.command("unbind")
@click.argument("name")
def kafka_unbind(name: str) -> None:
    """Stop consuming and forget the binding (what landed stays).

    Example: streamshield client kafka unbind quotes_feed
    """
    request("DELETE", f"/connectors/kafka/{name}")
    click.echo(f"unbound: {name}")


def _show_one(answer: dict, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(answer, indent=2))
        return
    click.echo(f"{answer['name']}: {answer['topic']} -> {answer['stream']} ({answer['status']})")
    show(answer["partitions_state"], PARTITION_COLUMNS, output)


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
    """Adds ``kafka`` and ``sink`` to the ``streamshield client`` group."""
    client.add_command(kafka)
    client.add_command(sink)
