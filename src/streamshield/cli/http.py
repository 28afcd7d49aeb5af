"""The command line's one way to a running server: the saved session's client, one API
call with network errors as one line, and rows shown as a table or as JSON.

Every ``streamshield client ...`` command module goes through these, so that what "not
logged in", "cannot reach the server" and ``--output json`` mean is decided once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import click

from streamshield.cli.output import EXIT_SESSION, Failure, output_argument, print_table

if TYPE_CHECKING:
    from streamshield.client import Client

OUTPUT = output_argument


def session_client() -> Client:
    """The client of the saved session (``streamshield client login``); a one-line
    failure with the session exit code when there is none."""
    from streamshield.client import Client, load_saved

    saved = load_saved()
    if saved is None or saved.token is None:
        raise Failure("not logged in: run 'streamshield client login' first", EXIT_SESSION)
    return Client(saved.url, saved.token, saved.ca)


def request(method: str, path: str, **kwargs: Any) -> Any:
    """One API call as the saved session; refusals and network errors are one line."""
    import httpx

    try:
        with session_client() as api:
            return api.request(method, path, **kwargs)
    except httpx.HTTPError as err:
        raise click.ClickException(f"cannot reach the server: {type(err).__name__}") from None


def show(rows: Iterable[dict], columns: list[str], output: str, key: str | None = None) -> None:
    """``rows`` as JSON (under ``key`` when given) or as a table of ``columns``."""
    rows = list(rows)
    if output == "json":
        click.echo(json.dumps(rows if key is None else {key: rows}, indent=2))
        return
    print_table([{c: _cell(row.get(c)) for c in columns} for row in rows], columns)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)
