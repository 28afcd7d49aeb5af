"""Command line for Chinese-Wall levels: ``streamshield client level ...`` over HTTPS.

COI and CI classes, stream and channel levels, clearances, and the level one's own
session runs at (``docs/chinese-wall.md``). Quote levels on the shell: ``'[1, B]'``
(an unquoted ``[_,T]`` is a glob pattern to the shell).
"""

from __future__ import annotations

import json
from urllib.parse import quote

import click

from streamshield.cli.http import OUTPUT, request, show


def _path(name: str) -> str:
    return quote(name, safe="")


def _one(answer: dict, columns: list[str], output: str) -> None:
    """One object: itself as JSON (levels with ``⊥`` as is), or a one-row table."""
    if output == "json":
        click.echo(json.dumps(answer, indent=2, ensure_ascii=False))
    else:
        show([answer], columns, output)


@click.group("level")
def level() -> None:
    """Chinese-Wall levels: classes, stream levels, clearances, your session's level."""


# -- classes ----------------------------------------------------------------------------------


@level.command("show")
@OUTPUT
def level_show(output: str) -> None:
    """List the COI classes (in component order) and the CI classes.

    Example: streamshield client level show
    """
    answer = request("GET", "/levels")
    if output == "json":
        click.echo(json.dumps(answer, indent=2, ensure_ascii=False))
        return
    rows = [{"kind": "COI", **c, "level": ""} for c in answer["coi_classes"]]
    rows += [{"kind": "CI", **c} for c in answer["ci_classes"]]
    show(rows, ["kind", "name", "companies", "level"], output)
    click.echo(f"public {answer['public']}  trusted {answer['trusted']}")


@level.command("coi")
@click.argument("name")
@click.argument("companies", nargs=-1, required=True)
@click.option("--capacity", type=int, default=None, help="Label room in companies (first class).")
@OUTPUT
def level_coi(name: str, companies: tuple[str, ...], capacity: int | None, output: str) -> None:
    """Define COI class NAME of two or more competing COMPANIES (needs CHANGE SYSTEM).

    Example: streamshield client level coi COI2 A B C
    """
    body: dict = {"name": name, "companies": list(companies)}
    if capacity is not None:
        body["capacity"] = capacity
    _one(request("POST", "/levels/coi", json=body), ["name", "companies"], output)


@level.command("add-company")
@click.argument("name")
@click.argument("company")
@OUTPUT
def level_add_company(name: str, company: str, output: str) -> None:
    """Add COMPANY to COI class NAME (needs CHANGE SYSTEM).

    Example: streamshield client level add-company COI2 D
    """
    answer = request("POST", f"/levels/coi/{_path(name)}/companies", json={"company": company})
    _one(answer, ["name", "companies"], output)


@level.command("ci")
@click.argument("name")
@click.argument("companies", nargs=-1, required=True)
@OUTPUT
def level_ci(name: str, companies: tuple[str, ...], output: str) -> None:
    """Define CI class NAME: complementing COMPANIES, at most one per COI class.

    Example: streamshield client level ci service5 1 B
    """
    answer = request("POST", "/levels/ci", json={"name": name, "companies": list(companies)})
    _one(answer, ["name", "companies", "level"], output)


# -- streams ----------------------------------------------------------------------------------

STREAM_COLUMNS = ["stream", "level", "assigned", "channels"]


def _stream_row(answer: dict) -> dict:
    channels = [f"{c['provider']}={c['level']}" for c in answer["channels"]]
    return {**answer, "channels": channels}


@level.group("stream")
def stream() -> None:
    """An input stream's level and its channels' levels."""


@stream.command("show")
@click.argument("name")
@OUTPUT
def stream_show(name: str, output: str) -> None:
    """Show the level of input stream NAME and of its channels.

    Example: streamshield client level stream show MessageLog
    """
    answer = request("GET", f"/levels/streams/{_path(name)}")
    _one(_stream_row(answer) if output == "table" else answer, STREAM_COLUMNS, output)


@stream.command("set")
@click.argument("name")
@click.argument("level_text", metavar="LEVEL")
@OUTPUT
def stream_set(name: str, level_text: str, output: str) -> None:
    """Set the level of input stream NAME (needs CHANGE SYSTEM).

    Example: streamshield client level stream set MessageLog '[T, T]'
    """
    answer = request("PUT", f"/levels/streams/{_path(name)}", json={"level": level_text})
    _one(_stream_row(answer) if output == "table" else answer, STREAM_COLUMNS, output)


@stream.command("channel")
@click.argument("name")
@click.argument("provider")
@click.argument("level_text", metavar="LEVEL")
@OUTPUT
def stream_channel(name: str, provider: str, level_text: str, output: str) -> None:
    """Set the level of PROVIDER's tuples on stream NAME (dominated by the stream's).

    Example: streamshield client level stream channel MessageLog company1 '[1, _]'
    """
    answer = request(
        "PUT",
        f"/levels/streams/{_path(name)}/channels/{_path(provider)}",
        json={"level": level_text},
    )
    _one(_stream_row(answer) if output == "table" else answer, STREAM_COLUMNS, output)


@stream.command("unset-channel")
@click.argument("name")
@click.argument("provider")
@OUTPUT
def stream_unset_channel(name: str, provider: str, output: str) -> None:
    """PROVIDER's tuples on stream NAME go back to the stream's level.

    Example: streamshield client level stream unset-channel MessageLog company1
    """
    answer = request("DELETE", f"/levels/streams/{_path(name)}/channels/{_path(provider)}")
    _one(_stream_row(answer) if output == "table" else answer, STREAM_COLUMNS, output)


# -- clearances and one's own level -------------------------------------------------------------


@level.group("clearance")
def clearance() -> None:
    """Users' clearances: the highest level their sessions may run at."""


@clearance.command("show")
@click.argument("user")
@OUTPUT
def clearance_show(user: str, output: str) -> None:
    """Show USER's clearance (your own, or anyone's with CHANGE SYSTEM).

    Example: streamshield client level clearance show ann
    """
    _one(request("GET", f"/users/{_path(user)}/clearance"), ["user", "clearance"], output)


@clearance.command("set")
@click.argument("user")
@click.argument("level_text", metavar="LEVEL")
@OUTPUT
def clearance_set(user: str, level_text: str, output: str) -> None:
    """Set USER's clearance (needs CHANGE SYSTEM); her sessions above it drop to public.

    Example: streamshield client level clearance set ann '[1, B]'
    """
    answer = request("PUT", f"/users/{_path(user)}/clearance", json={"level": level_text})
    _one(answer, ["user", "clearance", "sessions_lowered"], output)


@level.command("me")
@OUTPUT
def level_me(output: str) -> None:
    """Show your clearance and the level your session runs at.

    Example: streamshield client level me
    """
    _one(request("GET", "/me/level"), ["user", "clearance", "level"], output)


@level.command("activate")
@click.argument("level_text", metavar="LEVEL")
@OUTPUT
def level_activate(level_text: str, output: str) -> None:
    """Run your session at LEVEL (dominated by your clearance).

    Example: streamshield client level activate '[_, B]'
    """
    answer = request("PUT", "/me/level", json={"level": level_text})
    _one(answer, ["user", "clearance", "level"], output)


def attach(client: click.Group) -> None:
    """Adds ``level`` to the ``streamshield client`` group."""
    client.add_command(level)
