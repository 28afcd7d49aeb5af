"""Command line for event patterns (docs/cep.md): ``streamshield cep-example`` and, over
HTTPS, ``streamshield client pattern ...`` and ``streamshield client cep-rules ...``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from streamshield.cli.http import OUTPUT, request, show

COLUMNS = ["name", "owner", "roles", "status", "reason", "delivered", "pattern"]


@click.command("cep-example")
@click.option("--spark", "on_spark", is_flag=True, help="Also run it on local Spark and compare.")
def cep_example(on_spark: bool) -> None:
    """The smart-building example: three roles under xi, Phi, psi and Omega, their
    patterns' rows (or why a pattern is refused), as the plain-Python oracle computes
    them; with --spark the same patterns run through each role's protection engine on
    local Spark and must give the same rows.

    Example: streamshield cep-example --spark
    """
    from streamshield.examples.smart_building import report

    for line in report():
        click.echo(line)
    if not on_spark:
        return
    from streamshield.engine.session import spark_session
    from streamshield.examples.smart_building_spark import compare

    spark = spark_session("local[2]", "streamshield-cep-example")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory() as root:
            outcome = compare(spark, Path(root))
    finally:
        spark.stop()
    differ = [name for name, (got, expected) in outcome.items() if got != expected]
    for name, (got, _) in outcome.items():
        click.echo(
            f"spark {name}: {sum(got.values())} rows" + (" DIFFER" if name in differ else "")
        )
    if differ:
        raise click.ClickException(f"Spark and the oracle differ on {', '.join(differ)}")
    click.echo("spark: every pattern's rows are the oracle's")


@click.group("pattern")
def pattern() -> None:
    """Event patterns: register, list, explain, start, stop, remove, read rows."""


@pattern.command("register")
@click.argument("name")
@click.argument("text")
@click.option("--key", default=None, help="Partition key: an attribute every event shares.")
def pattern_register(name: str, text: str, key: str | None) -> None:
    """Register and start a pattern with your activated roles (at your session's level).

    Example: streamshield client pattern register fire "PATTERN SEQ(Temp a, Smoke b)
    WITHIN 1 MINUTE RETURN b.level" --key room
    """
    body = {"name": name, "pattern": text, **({"key": key} if key else {})}
    answer = request("POST", "/patterns", json=body)
    click.echo(f"{answer['name']}: {answer['status']} (output {answer['output']})")


@pattern.command("list")
@OUTPUT
def pattern_list(output: str) -> None:
    """The patterns you may see.

    Example: streamshield client pattern list --output json
    """
    rows = request("GET", "/patterns")["patterns"]
    show([{**r, "roles": ",".join(r["roles"])} for r in rows], COLUMNS, output)


@pattern.command("explain")
@click.argument("name")
def pattern_explain(name: str) -> None:
    """Status and the operators each variable's event type is read under.

    Example: streamshield client pattern explain fire
    """
    click.echo(json.dumps(request("GET", f"/patterns/{name}"), indent=2))


@pattern.command("start")
@click.argument("name")
def pattern_start(name: str) -> None:
    """Start a stopped pattern (refused while the rules forbid it).

    Example: streamshield client pattern start fire
    """
    click.echo(request("POST", f"/patterns/{name}/status", json={"running": True})["status"])


@pattern.command("stop")
@click.argument("name")
def pattern_stop(name: str) -> None:
    """Stop a pattern (kept until removed).

    Example: streamshield client pattern stop fire
    """
    click.echo(request("POST", f"/patterns/{name}/status", json={"running": False})["status"])


@pattern.command("remove")
@click.argument("name")
def pattern_remove(name: str) -> None:
    """Stop and remove a pattern.

    Example: streamshield client pattern remove fire
    """
    request("DELETE", f"/patterns/{name}")
    click.echo(f"pattern {name} removed")


@pattern.command("rows")
@click.argument("name")
@click.option(
    "--after", type=int, default=-1, show_default=True, help="Rows of the batches after this id."
)
def pattern_rows(name: str, after: int) -> None:
    """The rows of the batches after --after, one JSON object a line with its batch id
    (each checked against your own roles, rights and level at every read).

    Example: streamshield client pattern rows fire --after 10
    """
    for row in request("GET", f"/patterns/{name}/rows", params={"after": after})["rows"]:
        click.echo(json.dumps(row))


@click.group("cep-rules")
def cep_rules() -> None:
    """The per-role attribute operators (xi, phi, psi, omega)."""


@cep_rules.command("get")
def cep_rules_get() -> None:
    """All rules (administrators) or your roles' operator per attribute.

    Example: streamshield client cep-rules get
    """
    click.echo(json.dumps(request("GET", "/cep/rules"), indent=2))


@cep_rules.command("put")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def cep_rules_put(file: Path) -> None:
    """Replace the rules with a JSON file (CHANGE SYSTEM); running patterns apply them
    from their next micro-batch.

    Example: streamshield client cep-rules put building-rules.json
    """
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise click.ClickException(f"line {err.lineno}, column {err.colno}: not JSON") from None
    click.echo(f"rules version {request('PUT', '/cep/rules', json=document)['version']}")


def attach(main: click.Group, client: click.Group) -> None:
    main.add_command(cep_example)
    client.add_command(pattern)
    client.add_command(cep_rules)
