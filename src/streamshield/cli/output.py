"""What every ``streamshield client`` command shares: output format, errors, examples.

* ``--output table|json`` (:func:`output_option`, or :func:`output_argument` for a
  command that takes the choice as an argument; also accepted on the ``client`` group,
  whose choice holds unless the command's own option is given):
  table output is for people (rich tables), JSON is the command's full answer, one
  document on stdout, for scripts. Commands call :func:`emit` and never print JSON or
  tables themselves, so the choice works the same everywhere.
* :class:`ClientGroup` turns every failure into one line on stderr and a distinct exit
  code (:data:`EXIT_CODES`); a traceback never reaches the user.
* :func:`example` writes the "Example:" epilog every command's ``--help`` ends with.

Other command modules attach to the ``client`` group and use the same three helpers.
"""

from __future__ import annotations

import json
import shutil
import ssl
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

EXIT_REFUSED = 1
"""The server refused the request (4xx other than 401), or some ingested lines were rejected."""
EXIT_USAGE = 2
"""Wrong command line (click's own code)."""
EXIT_UNREACHABLE = 3
"""No connection to the server: refused, unknown host, timed out."""
EXIT_TLS = 4
"""The server's certificate is not trusted (wrong --ca, expired, wrong host name)."""
EXIT_SESSION = 5
"""Not logged in, or the session expired or was ended: log in again."""
EXIT_SERVER = 6
"""The server failed (5xx)."""
EXIT_LOCAL = 7
"""A local file is unreadable: the saved session, the CA certificate, an input file."""
EXIT_CODES = {
    EXIT_REFUSED: "refused by the server (or rejected lines)",
    EXIT_USAGE: "usage error",
    EXIT_UNREACHABLE: "server unreachable",
    EXIT_TLS: "certificate not trusted",
    EXIT_SESSION: "not logged in or session expired",
    EXIT_SERVER: "server error",
    EXIT_LOCAL: "local file unreadable (session, CA, input)",
}
_META = "streamshield.output"


class Failure(click.ClickException):
    """One line for stderr and an exit code; what every caught error becomes."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        # ignore: click's stubs make exit_code a ClassVar, yet set per instance is how
        # click's own exceptions carry theirs
        self.exit_code = exit_code  # type: ignore[misc]


def failure(err: BaseException) -> Failure:
    """The one-line message and exit code for an error a client command let escape."""
    import httpx

    from streamshield.client import ClientError, LocalFileError

    if isinstance(err, ClientError):
        if err.status == 401:
            return Failure(
                f"{err.message or 'unauthorized'}: not logged in or the session expired; "
                "run 'streamshield client login'",
                EXIT_SESSION,
            )
        if err.status >= 500:
            return Failure(f"server error {err.status}: {err.message}", EXIT_SERVER)
        return Failure(f"{err.status} {err.code}: {err.message}", EXIT_REFUSED)
    if isinstance(err, LocalFileError):
        return Failure(str(err), EXIT_LOCAL)
    if isinstance(err, httpx.ConnectError | httpx.ConnectTimeout) and _is_tls(err):
        return Failure(f"TLS: the server's certificate is not trusted ({_reason(err)})", EXIT_TLS)
    if isinstance(err, ssl.SSLError):
        return Failure(f"TLS: {_reason(err)}", EXIT_TLS)
    if isinstance(err, httpx.TimeoutException):
        return Failure(
            f"the server did not answer in time ({type(err).__name__})", EXIT_UNREACHABLE
        )
    if isinstance(err, httpx.TransportError):
        url = getattr(getattr(err, "request", None), "url", None) if _has_request(err) else None
        where = f" at {url.scheme}://{url.netloc.decode()}" if url is not None else ""
        return Failure(f"cannot reach the server{where}: {_reason(err)}", EXIT_UNREACHABLE)
    if isinstance(err, OSError):
        name = getattr(err, "filename", None)
        return Failure(f"{name or 'file'}: {err.strerror or err}", EXIT_LOCAL)
    return Failure(f"unexpected error: {type(err).__name__}: {err}", EXIT_REFUSED)


def _has_request(err: BaseException) -> bool:
    try:
        err.request  # type: ignore[attr-defined]  # noqa: B018  (raises when unset)
    except (AttributeError, RuntimeError):
        return False
    return True


def _is_tls(err: BaseException) -> bool:
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:200]


class ClientGroup(click.Group):
    """A group whose commands fail with one line and an exit code, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except Exception as err:  # the user gets one line; nothing useful is in a traceback
            raise failure(err) from None


def _remember(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.find_root().meta[_META] = value
    return value


def output_option(fn: F) -> F:
    """``--output table|json`` on a command (the ``client`` group takes it too)."""
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_remember,
        help="table (default, for people) or json (the full answer, for scripts).",
    )(fn)


def _chosen(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    _remember(ctx, param, value)
    return str(ctx.find_root().meta.get(_META, "table"))


def output_argument(fn: F) -> F:
    """``--output table|json`` passed to the command as ``output``: its own when given,
    else the ``client`` group's (``client -o json audit``), else table. For commands that
    print through :func:`~streamshield.cli.http.show` rather than :func:`emit`."""
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default=None,
        callback=_chosen,
        help="table (default, for people) or json (the full answer, for scripts).",
    )(fn)


def output_format() -> str:
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().meta.get(_META, "table") if ctx is not None else "table"


def emit(
    data: Any,
    *,
    rows: Sequence[dict] | None = None,
    columns: Sequence[str] | None = None,
    text: str | None = None,
    title: str | None = None,
) -> None:
    """Print a command's answer: ``data`` as JSON, or ``rows`` as a table and/or ``text``."""
    if output_format() == "json":
        click.echo(json.dumps(data, indent=2, default=str, sort_keys=False))
        return
    if text is not None:
        click.echo(text)
    if rows is not None:
        print_table(rows, columns, title)


def print_table(
    rows: Sequence[dict], columns: Sequence[str] | None = None, title: str | None = None
) -> None:
    from rich.console import Console
    from rich.table import Table

    if not rows:
        click.echo(f"{title}: (none)" if title else "(none)")
        return
    columns = list(columns or dict.fromkeys(k for row in rows for k in row))
    table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    width = shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 160
    Console(file=sys.stdout, width=width, highlight=False, soft_wrap=False).print(table)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


def example(*lines: str) -> str:
    """A click epilog: "Example:" and command lines, kept as written (``\\b``)."""
    body = "\n".join(f"  {line}" for line in lines)
    return f"\b\nExample{'s' if len(lines) > 1 else ''}:\n{body}"


def exit_codes_help() -> str:
    """The exit codes, for the ``client`` group's help."""
    lines = [f"  {code}  {what}" for code, what in sorted(EXIT_CODES.items())]
    return "\b\nExit codes:\n" + "\n".join(lines)
