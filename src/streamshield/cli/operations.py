"""CLI for operating a server: ``client query list|show|explain`` and ``client audit``.

Every command prints a table (rich) or, with ``--output json``, the server's answer as
JSON for scripts.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from streamshield.cli.http import request
from streamshield.cli.output import output_argument

QUERY_COLUMNS = {
    "name": "name",
    "owner": "owner",
    "status": "status",
    "error_class": "error",
    "last_batch": "batch",
    "input_rows_per_second": "in/s",
    "processed_rows_per_second": "out/s",
    "batch_duration_ms": "ms",
    "subscribers": "subs",
}
"""A query list's table columns and their headers: short, so that nine columns fit an
80-column terminal without breaking a header into pieces (the JSON keeps the names)."""
FIELDS = {"field": "field", "value": "value"}
AUDIT_COLUMNS = {c: c for c in ["id", "at", "actor", "action", "outcome", "object", "detail"]}


def _print(answer: Any, rows: list[dict], columns: dict[str, str], output: str, title: str) -> None:
    if output == "json":
        click.echo(json.dumps(answer, indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    for header in columns.values():
        # Values wrap, never cut: names stay whole; a header is never narrower than itself.
        table.add_column(header, overflow="fold", min_width=len(header))
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    Console(highlight=False).print(table)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@click.command("list")
@output_argument
def query_list(output: str) -> None:
    """Queries you may see, with status and last progress.

    Example: streamshield client query list --output json
    """
    answer = request("GET", "/queries")
    _print(answer, answer["queries"], QUERY_COLUMNS, output, "queries")


@click.command("show")
@click.argument("name")
@output_argument
def query_show(name: str, output: str) -> None:
    """One query: status, progress, inputs, output (its text if it is yours).

    Example: streamshield client query show heart_nina
    """
    answer = request("GET", f"/queries/{name}")
    rows = [{"field": k, "value": v} for k, v in answer.items()]
    _print(answer, rows, FIELDS, output, f"query {name}")


@click.command("explain")
@click.argument("name")
@output_argument
def query_explain(name: str, output: str) -> None:
    """A query's shape, engine and checked SQL (yours, or any as administrator).

    Example: streamshield client query explain heart_nina
    """
    answer = request("GET", f"/queries/{name}/explain")
    rows = [{"field": k, "value": v} for k, v in answer.items()]
    _print(answer, rows, FIELDS, output, f"plan of {name}")


@click.command("audit")
@click.option("--since", default=None, help="ISO-8601 time, e.g. 2026-11-23T10:00:00Z.")
@click.option("--until", default=None, help="ISO-8601 time (exclusive).")
@click.option("--user", default=None, help="Only entries of this actor.")
@click.option("--action", default=None, help="Only this action, e.g. login, grant, denied.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--before-id", type=int, default=None, help="Page: entries older than this id.")
@output_argument
def audit(
    since: str | None,
    until: str | None,
    user: str | None,
    action: str | None,
    limit: int,
    before_id: int | None,
    output: str,
) -> None:
    """Audit log entries you may read, newest first (administrators: all).

    Example: streamshield client audit --action login --since 2026-11-23T00:00:00Z --limit 20
    """
    for option, value in (("--since", since), ("--until", until)):
        if value is not None:
            try:
                datetime.fromisoformat(value)
            except ValueError:
                raise click.BadParameter("not an ISO-8601 time", param_hint=option) from None
    params = {
        "since": since,
        "until": until,
        "user": user,
        "action": action,
        "limit": limit,
        "before_id": before_id,
    }
    answer = request("GET", "/audit", params={k: v for k, v in params.items() if v is not None})
    rows = [
        {
            **entry,
            "object": f"{entry['object']['kind']} {entry['object']['name']}"
            if entry.get("object")
            else None,
        }
        for entry in answer["entries"]
    ]
    _print(answer, rows, AUDIT_COLUMNS, output, "audit (newest first)")
    if output == "table" and answer.get("next_before_id"):
        click.echo(f"older entries: --before-id {answer['next_before_id']}")


def attach(client: click.Group, query: click.Group) -> None:
    """Adds these commands to the ``client`` and ``client query`` groups."""
    for command in (query_list, query_show, query_explain):
        query.add_command(command)
    client.add_command(audit)
