"""Command line for shared query networks: ``streamshield client network ...`` over HTTPS.

``list`` shows each network's privacy switches with their state (counters, receivers,
since when) and the level its queries run at (a stream has one network of selections and
one of windows per level; the window network's rows say ``<stream> windows``, a shared
join's ``<left> JOIN <right>``);
``sp`` injects a query-scoped sp by hand (administrators).
"""

from __future__ import annotations

import json

import click

from streamshield.cli.http import OUTPUT, request, show

COLUMNS = ["stream", "level", "kind", "queries", "open", "counter", "receivers", "users", "since"]


@click.group("network")
def network() -> None:
    """Shared query networks and their privacy switches."""


@network.command("list")
@OUTPUT
def network_list(output: str) -> None:
    """The shared networks you may see, one row per privacy switch.

    Example: streamshield client network list --output json
    """
    answer = request("GET", "/networks")
    if output == "json":
        click.echo(json.dumps(answer, indent=2))
        return
    rows = switch_rows(answer)
    with_levels = any(r["level"] != "-" for r in rows)  # a column only while levels are on
    show(rows, [c for c in COLUMNS if with_levels or c != "level"], output)


def switch_rows(answer: dict) -> list[dict]:
    """One row per privacy switch of ``GET /networks``, with the level of its queries
    (``-`` while levels are off; a switch's queries share their network's level). A
    window network's stream reads ``<stream> windows`` (a column more would not fit an
    80-column terminal, and the two words wrap in a narrow stream column where a
    parenthesis would be cut)."""
    rows = []
    for n in answer["networks"]:
        levels = n.get("levels") or {}
        windows = n.get("kind") == "windows"
        stream = f"{n['stream']} windows" if windows else n["stream"]
        for switch in n["switches"]:
            level = sorted({levels.get(q) or "-" for q in switch["queries"]}) or ["-"]
            rows.append(
                {
                    "stream": stream,
                    **switch,
                    "level": ",".join(level),
                    "queries": ",".join(switch["queries"]),
                }
            )
    return rows


@network.command("sp")
@click.argument("query")
@click.argument("user")
@click.argument("sign", type=click.Choice(["+", "-"]))
def network_sp(query: str, user: str, sign: str) -> None:
    """Inject a query-scoped sp: USER may (+) or may no longer (-) receive QUERY's output.
    Applied at the query's next micro-batch; needs CHANGE SYSTEM.

    Example: streamshield client network sp ward_watch bob -
    """
    request("POST", "/networks/sps", json={"query": query, "user": user, "sign": sign})
    click.echo(f"queued: {sign} {user} on {query}")


def attach(client: click.Group) -> None:
    """Adds ``network`` to the ``streamshield client`` group."""
    client.add_command(network)
