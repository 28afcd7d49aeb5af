"""The ``streamshield`` command line."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import click

from streamshield import __version__
from streamshield.cli import admin, cep, connectors, levels, networks, operations, recovery
from streamshield.cli.http import session_client
from streamshield.cli.output import (
    EXIT_REFUSED,
    EXIT_SESSION,
    ClientGroup,
    Failure,
    emit,
    example,
    exit_codes_help,
    output_format,
    output_option,
    print_table,
)


@click.group()
@click.version_option(__version__)
def main() -> None:
    """streamshield: secure multi-tenant stream processing on Spark."""


@main.command(epilog=example("streamshield demo"))
def demo() -> None:
    """Run the hospital example through the reference Security Shield, role by role."""
    from streamshield.demo import report

    click.echo("streamshield demo: hospital example (paper 1), reference Security Shield")
    for line in report():
        click.echo(line)


@main.command("cloud-audit", epilog=example("streamshield cloud-audit"))
def cloud_audit() -> None:
    """Print the cloud-auditing example (paper 2): Q1-Q7 at their levels and what each
    auditor receives, as the plain-Python oracle computes it (no Spark).

    tests/server/test_cloud_audit.py checks the real server against the same oracle.
    """
    from streamshield.examples.cloud_audit_report import report

    for line in report():
        click.echo(line)


@main.command(epilog=example("streamshield run --rounds 2"))
@click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=Path("streamshield-run"),
    show_default=True,
    help="Storage root for the run (recreated).",
)
@click.option("--master", default=None, help="Spark master URL (default: local[2]).")
@click.option("--rounds", default=3, show_default=True, help="Rounds of readings to stream.")
def run(root: Path, master: str | None, rounds: int) -> None:
    """Run the hospital ward through the Spark pipeline and show what each user receives."""
    from streamshield.main_job import run as run_job

    click.echo("streamshield: hospital ward on Spark (local embedded default)")
    for line in run_job(root.resolve(), master, rounds):
        click.echo(line)


ROOT = click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=Path("streamshield-data"),
    show_default=True,
    help="Storage root: catalog.db, landing/, store/.",
)


def _catalog(root: Path):
    from streamshield.catalog.store import SqliteCatalog

    path = root / "catalog.db"
    if not path.exists():
        raise click.ClickException(f"no catalog at {path}: run 'streamshield init' first")
    return SqliteCatalog(path)


@main.command(epilog=example("streamshield init --root data"))
@ROOT
def init(root: Path) -> None:
    """Create a storage root with the hospital example's catalog (streams, roles, policy)."""
    from streamshield.examples.hospital_catalog import hospital_catalog

    root.mkdir(parents=True, exist_ok=True)
    catalog = hospital_catalog(root / "catalog.db")
    for definition in catalog.streams():
        click.echo(f"stream {definition.name}: {definition.ddl}")


@main.command(epilog=example("streamshield land --root data feed.jsonl"))
@ROOT
@click.argument("files", nargs=-1, type=click.Path(exists=True, path_type=Path), required=True)
def land(root: Path, files: tuple[Path, ...]) -> None:
    """Append elements (JSON lines or Parquet files) to the landing zone."""
    from streamshield.landing import LandingZone

    zone = LandingZone(root / "landing", _catalog(root))
    for path in files:
        if path.suffix == ".parquet":
            result = zone.append_parquet(path)
        else:
            with path.open() as handle:
                result = zone.append_lines(handle)
        click.echo(f"{path}: accepted {result.accepted}, rejected {len(result.rejected)}")
        for rejection in result.rejected:
            click.echo(f"  line {rejection.line}: {rejection.reason}: {rejection.message}")


@main.command(epilog=example("streamshield ingest --root data"))
@ROOT
@click.option("--master", default=None, help="Spark master URL (default: local[2]).")
def ingest(root: Path, master: str | None) -> None:
    """Label everything landed so far (secure ingest, then stop)."""
    from streamshield.engine.pipeline import Pipeline
    from streamshield.engine.session import spark_session

    Pipeline(spark_session(master), _catalog(root), root).ingest_available()
    click.echo(f"labelled streams: {root / 'store' / 'labelled'}")


@main.command(
    epilog=example(
        'streamshield query --root data --role ND --sql "SELECT patient_id FROM HeartRate"'
    )
)
@ROOT
@click.option("--role", "roles", multiple=True, required=True, help="Activated role (repeat).")
@click.option("--sql", required=True, help="The continuous query (SELECT ...).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Output directory.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["console", "json", "parquet", "punctuated"]),
    default="console",
    show_default=True,
)
@click.option("--master", default=None, help="Spark master URL (default: local[2]).")
def query(
    root: Path, roles: tuple[str, ...], sql: str, out: Path | None, fmt: str, master: str | None
) -> None:
    """Run a secured query over what has been ingested so far, then stop."""
    from streamshield.engine.pipeline import Pipeline
    from streamshield.engine.queries.streaming_queries import ConsoleSink, FileSink, QueryFailed
    from streamshield.engine.session import spark_session
    from streamshield.lang.query_check import QueryRejected

    pipeline = Pipeline(spark_session(master), _catalog(root), root)
    if fmt != "console" and out is None:
        raise click.UsageError("--out is needed for file outputs")
    try:
        if fmt == "punctuated":
            # cast: file outputs have an --out (checked above)
            registered = pipeline.queries.export_punctuated(sql, roles, cast(Path, out))
        else:
            sink = ConsoleSink() if fmt == "console" else FileSink(str(out), fmt)
            registered = pipeline.queries.register(pipeline.queries.admit(sql, roles), sink)
        registered.process_all_available()
        registered.stop()
    except (QueryRejected, QueryFailed) as err:
        raise click.ClickException(str(err)) from None
    if out is not None:
        click.echo(f"output: {out}")


def _setting(name: str) -> str:
    """Help suffix naming the environment variable and the default of a setting."""
    from streamshield.server.settings import ENV_PREFIX, ServeSettings

    field = ServeSettings.model_fields[name]
    default = field.default
    shown = "none" if default is None else default
    if isinstance(default, bool):
        shown = str(default).lower()
    return f"{field.description} [env {ENV_PREFIX}{name.upper()}; default: {shown}]"


def _conf_option(flag: str, what: str, setting: str) -> Callable:
    """A repeatable ``KEY=VALUE`` option of a configuration dictionary setting."""
    return click.option(
        flag,
        multiple=True,
        metavar="KEY=VALUE",
        help=f"{what} (repeat) [env STREAMSHIELD_{setting.upper()} as a JSON object].",
    )


@main.command(
    epilog="Example: streamshield serve --root /srv/ss --no-example "
    "--catalog-url postgresql+psycopg://ss@db/ss --conf spark.driver.memory=4g\n\n"
    "Precedence: options > STREAMSHIELD_* environment variables > --config file > defaults. "
    "The file is TOML with the option names as keys (underscores), e.g. "
    'port = 9443 and [spark_conf] "spark.driver.memory" = "4g".'
)
@click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path),
    default=None,
    help="TOML configuration file [env STREAMSHIELD_CONFIG].",
)
@click.option("--root", type=click.Path(path_type=Path), default=None, help=_setting("root"))
@click.option("--host", default=None, help=_setting("host"))
@click.option("--port", type=int, default=None, help=_setting("port"))
@click.option("--catalog-url", default=None, help=_setting("catalog_url"))
@click.option("--master", default=None, help=_setting("spark_master"))
@_conf_option("--conf", "Spark configuration", "spark_conf")
@click.option("--spark-ui/--no-spark-ui", default=None, help=_setting("spark_ui"))
@click.option(
    "--level-applications",
    type=click.Choice(["in_process", "separate"]),
    default=None,
    help=_setting("level_applications"),
)
@click.option("--level-master", default=None, help=_setting("level_master"))
@_conf_option(
    "--level-conf",
    "Spark configuration of the levels' own applications (with --level-applications separate)",
    "level_conf",
)
@click.option(
    "--jvm-class-cache/--no-jvm-class-cache", default=None, help=_setting("jvm_class_cache")
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error", "critical"], case_sensitive=False),
    default=None,
    help=_setting("log_level"),
)
@click.option("--cert", type=click.Path(path_type=Path), default=None, help=_setting("tls_cert"))
@click.option("--key", type=click.Path(path_type=Path), default=None, help=_setting("tls_key"))
@click.option("--example/--no-example", default=None, help=_setting("example"))
@click.option("--round-seconds", type=float, default=None, help=_setting("round_seconds"))
@click.option("--max-clock-skew", type=float, default=None, help=_setting("max_clock_skew"))
@click.option("--max-ingest-backlog", type=int, default=None, help=_setting("max_ingest_backlog"))
@click.option(
    "--ingest-latency-budget",
    "ingest_latency_budget_seconds",
    type=float,
    default=None,
    help=_setting("ingest_latency_budget_seconds"),
)
@click.option(
    "--subscriber-queue-batches", type=int, default=None, help=_setting("subscriber_queue_batches")
)
@click.option(
    "--subscriber-queue-bytes", type=int, default=None, help=_setting("subscriber_queue_bytes")
)
@click.option(
    "--catalog-poll",
    "catalog_poll_seconds",
    type=float,
    default=None,
    help=_setting("catalog_poll_seconds"),
)
@click.option("--share-windows/--no-share-windows", default=None, help=_setting("share_windows"))
@click.option("--fuse-branches/--no-fuse-branches", default=None, help=_setting("fuse_branches"))
@click.option(
    "--share-aggregates/--no-share-aggregates", default=None, help=_setting("share_aggregates")
)
@click.option("--share-sliding/--no-share-sliding", default=None, help=_setting("share_sliding"))
@click.option("--driven-scan/--no-driven-scan", default=None, help=_setting("driven_scan"))
@click.option("--driven-ingest/--no-driven-ingest", default=None, help=_setting("driven_ingest"))
@click.option("--retention", default=None, help=_setting("retention"))
def serve(
    config: Path | None,
    root: Path | None,
    host: str | None,
    port: int | None,
    catalog_url: str | None,
    master: str | None,
    conf: tuple[str, ...],
    spark_ui: bool | None,
    level_applications: str | None,
    level_master: str | None,
    level_conf: tuple[str, ...],
    jvm_class_cache: bool | None,
    log_level: str | None,
    cert: Path | None,
    key: Path | None,
    example: bool | None,
    round_seconds: float | None,
    max_clock_skew: float | None,
    max_ingest_backlog: int | None,
    ingest_latency_budget_seconds: float | None,
    subscriber_queue_batches: int | None,
    subscriber_queue_bytes: int | None,
    catalog_poll_seconds: float | None,
    share_windows: bool | None,
    fuse_branches: bool | None,
    share_aggregates: bool | None,
    share_sliding: bool | None,
    driven_scan: bool | None,
    driven_ingest: bool | None,
    retention: str | None,
) -> None:
    """Start the secure server (HTTPS API, continuous ingest, live subscriptions).

    SIGTERM or SIGINT stops it cleanly (exit code 0). Configuration errors exit with
    code 2 and one line naming the key.
    """
    from streamshield.server.main import run_server
    from streamshield.server.settings import ConfigError, load, parse_conf

    given: dict[str, Any] = {
        "root": root,
        "host": host,
        "port": port,
        "catalog_url": catalog_url,
        "spark_master": master,
        "spark_ui": spark_ui,
        "level_applications": level_applications,
        "level_master": level_master,
        "jvm_class_cache": jvm_class_cache,
        "log_level": log_level,
        "tls_cert": cert,
        "tls_key": key,
        "example": example,
        "round_seconds": round_seconds,
        "max_clock_skew": max_clock_skew,
        "max_ingest_backlog": max_ingest_backlog,
        "ingest_latency_budget_seconds": ingest_latency_budget_seconds,
        "subscriber_queue_batches": subscriber_queue_batches,
        "subscriber_queue_bytes": subscriber_queue_bytes,
        "catalog_poll_seconds": catalog_poll_seconds,
        "share_windows": share_windows,
        "fuse_branches": fuse_branches,
        "share_aggregates": share_aggregates,
        "share_sliding": share_sliding,
        "driven_scan": driven_scan,
        "driven_ingest": driven_ingest,
        "retention": retention,
    }
    try:
        given["spark_conf"] = parse_conf(conf)
        given["level_conf"] = parse_conf(level_conf, "--level-conf")
        settings = load(given, config)
    except ConfigError as err:
        raise click.UsageError(str(err)) from None
    for path in (settings.tls_cert, settings.tls_key):
        if path is not None and not path.exists():
            raise click.UsageError(f"no such file: {path}")
    code = run_server(settings, click.echo)
    raise SystemExit(code)


@main.command("warm-up", epilog=example("streamshield warm-up"))
def warm_up() -> None:
    """Write the JVM class archive the server maps at start, once per install.

    Serves the hospital example on a throw-away root until its queries have run a
    batch (half a minute to two minutes); returns at once when the archive is in place. `make run`
    calls it first, so that the server's first start and stop are quick.
    """
    from streamshield.server.warm_up import warm_up as write_archive

    raise SystemExit(write_archive(click.echo))


@main.command(
    "sample-feed",
    epilog=example(
        "streamshield sample-feed --rows 50 | streamshield client ingest HeartRate -",
        "streamshield sample-feed --stream vitals2 --roles ND --roles C --rows 5",
    ),
)
@click.option("--stream", default="HeartRate", show_default=True, help="Stream the lines name.")
@click.option(
    "--provider",
    default=None,
    help="Provider of the channel (default: left out, the server uses your user name).",
)
@click.option("--rows", default=20, show_default=True, type=click.IntRange(0, 10_000_000))
@click.option(
    "--roles",
    "roles",
    multiple=True,
    default=("C", "ND"),
    show_default=True,
    help="Roles the feed's sp grants (repeat).",
)
@click.option("--seed", default=7, show_default=True, help="Seed of the readings.")
def sample_feed(
    stream: str, provider: str | None, rows: int, roles: tuple[str, ...], seed: int
) -> None:
    """Print a sample provider feed (JSON lines) to pipe into 'client ingest'.

    One sp granting ROLES every attribute, then ROWS heart-rate readings shaped like the
    bundled example's HeartRate stream (patient_id bigint, beats_per_min double, ts
    bigint). The lines carry no seq: the server assigns them (see docs/wire-format.md).
    """
    from streamshield.examples.sample_feed import sample_lines

    for line in sample_lines(stream, provider, rows, roles, seed):
        click.echo(line)


# -- the client ---------------------------------------------------------------------------------


@main.group(cls=ClientGroup, epilog=exit_codes_help())
@output_option
def client() -> None:
    """Talk to a running server over HTTPS (token kept in $STREAMSHIELD_HOME, 0600).

    Every command takes --output table|json; errors are one line on stderr and a
    non-zero exit code (below).
    """


def _when(value: object) -> str:
    """An API time (ISO-8601 or epoch seconds) as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if isinstance(value, int | float):
        moment = datetime.fromtimestamp(float(value), UTC)
    else:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


@client.command(
    "login",
    epilog=example(
        "streamshield client login --url https://127.0.0.1:8443 "
        "--ca streamshield-data/tls/server-cert.pem --user nina --role ND"
    )
    + example("streamshield client login --token-file ~/.cache/idp-token")
    + example(
        "streamshield client login --oidc-device https://idp.example/realms/hospital "
        "--client-id streamshield-cli"
    ),
)
@click.option("--url", default="https://127.0.0.1:8443", show_default=True)
@click.option(
    "--ca",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Trust this certificate (the server's self-signed one).",
)
@click.option("--user", default=None, help="User name (password login).")
@click.option("--role", "roles", multiple=True, help="Role to activate (repeat; password login).")
@click.option(
    "--level",
    default=None,
    help="Chinese-Wall level to run at, e.g. '[1, B]' (within your clearance; default public).",
)
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Log in with the OpenID Connect token (JWT) in this file instead of a password.",
)
@click.option(
    "--oidc-device",
    "issuer",
    default=None,
    help="Log in through this issuer's device-code flow (an https:// issuer URL).",
)
@click.option("--client-id", default=None, help="OAuth client id for --oidc-device.")
@click.option(
    "--oidc-ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="CA bundle the issuer's certificate is checked against (--oidc-device).",
)
@click.option("--scope", default="openid", show_default=True, help="Scopes for --oidc-device.")
@click.option(
    "--id-token", is_flag=True, help="Use the ID token, not the access token (--oidc-device)."
)
@output_option
def client_login(
    url: str,
    ca: Path | None,
    user: str | None,
    roles: tuple[str, ...],
    level: str | None,
    token_file: Path | None,
    issuer: str | None,
    client_id: str | None,
    oidc_ca: Path | None,
    scope: str,
    id_token: bool,
):
    """Log in and keep the session token: with a password (--user, --role; the password
    is asked, or $STREAMSHIELD_PASSWORD), a token file, or the device-code flow."""
    ca_path = str(ca.resolve()) if ca else None
    if token_file is not None or issuer is not None:
        if token_file is not None and issuer is not None:
            raise click.UsageError("--token-file and --oidc-device exclude each other")
        if user or roles or level:
            raise click.UsageError("--user, --role and --level go with a password login")
        if issuer is not None:
            from streamshield.cli.device_flow import device_token

            if not client_id:
                raise click.UsageError("--oidc-device needs --client-id")
            oidc_ca_path = str(oidc_ca.resolve()) if oidc_ca else None
            token = device_token(
                issuer, client_id, scope=scope, ca=oidc_ca_path, tell=click.echo, id_token=id_token
            )
        else:
            assert token_file is not None
            token = token_file.read_text().strip()
        _token_login(url, ca_path, token)
        return
    if not user or not roles:
        raise click.UsageError("a password login needs --user and --role")
    _password_login(url, ca_path, user, roles, level)


def _password_login(
    url: str, ca_path: str | None, user: str, roles: tuple[str, ...], level: str | None
) -> None:
    from streamshield.client import Client, ClientError, Saved, save

    password = os.environ.get("STREAMSHIELD_PASSWORD") or click.prompt("Password", hide_input=True)
    with Client(url, None, ca_path) as api:
        try:
            answer = api.login(user, password, list(roles), level)
        except ClientError as err:
            if err.status != 401:
                raise
            raise Failure(f"login failed: {err.message}", EXIT_SESSION) from None
    save(Saved(url, answer["token"], ca_path, user))
    _logged_in({k: v for k, v in answer.items() if k != "token"})


def _token_login(url: str, ca_path: str | None, token: str) -> None:
    """Keeps an OpenID Connect token as the session once the server accepted it."""
    from streamshield.client import Client, ClientError, Saved, save

    with Client(url, token, ca_path) as api:
        try:
            answer = api.request("GET", "/me")
        except ClientError as err:
            if err.status != 401:
                raise
            raise Failure(f"login failed: {err.message}", EXIT_SESSION) from None
    save(Saved(url, token, ca_path, answer["user"]))
    _logged_in(answer)


def _logged_in(answer: dict) -> None:
    emit(
        answer,
        text=f"logged in as {answer['user']} with roles {', '.join(answer['roles'])}"
        + (f" at level {answer['level']}" if answer.get("level") else "")
        + f"; session expires at {_when(answer['expires_at'])}",
    )


@client.command("logout", epilog=example("streamshield client logout"))
@output_option
def client_logout() -> None:
    """End the session and forget the token."""
    from streamshield.client import ClientError, LocalFileError, forget

    try:
        with session_client() as api:
            api.logout()
    except (ClientError, Failure, LocalFileError):
        pass  # an expired, missing or unreadable session is as good as ended
    forget()
    emit({"logged_out": True}, text="logged out")


def tag_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--tag attribute:TAG`` (repeat; TAG1,TAG2 for several)."""
    return click.option(
        "--tag",
        "tags",
        multiple=True,
        help="attribute:TAG (repeat; attribute:TAG1,TAG2 for several), e.g. dx:PHI",
    )(command)


def attribute_tags(given: Iterable[str]) -> dict[str, list[str]]:
    """``--tag`` values as tags per attribute; a usage error unless each is attribute:TAG."""
    tags: dict[str, list[str]] = {}
    for item in given:
        attribute, _, names = item.partition(":")
        listed = [n.strip() for n in names.split(",") if n.strip()]
        if not attribute or not listed:
            raise click.UsageError("tags are attribute:TAG (or attribute:TAG1,TAG2)")
        tags.setdefault(attribute, []).extend(listed)
    return tags


@client.command("catalog", epilog=example("streamshield client catalog --output json"))
@output_option
def client_catalog() -> None:
    """The schemas, streams and queries you may see."""
    with session_client() as api:
        view = api.catalog()
    emit(view)
    if output_format() == "table":
        for kind, items in view.items():
            print_table(items, title=kind)


@client.command("stream", epilog=example("streamshield client stream HeartRate"))
@click.argument("name")
@output_option
def client_stream(name: str) -> None:
    """One stream's definition."""
    with session_client() as api:
        answer = api.stream(name)
    if answer.get("kind") == "output":
        emit(
            answer,
            rows=[{"column": c} for c in answer.get("columns", [])],
            text=f"output stream {answer['name']} of query {answer.get('query') or '-'}",
        )
        return
    required = {answer["tid"], answer["event_time"], *answer.get("not_null", [])}
    emit(
        answer,
        rows=[
            {
                "attribute": a,
                "type": t,
                "not null": "yes" if a in required else "",
                "tags": " ".join(answer.get("tags", {}).get(a, [])),
            }
            for a, t in answer["attributes"]
        ],
        text=f"stream {answer['name']} (tid {answer['tid']}, "
        f"event time {answer['event_time'] or '-'})",
    )


@client.command(
    "add-schema",
    epilog=example(
        "streamshield client add-schema quotes --attribute id:bigint "
        "--attribute price:double --attribute at:timestamp --tid id --event-time at "
        "--not-null price",
        "streamshield client add-schema ward --attribute id:bigint --attribute dx:string "
        "--tid id --tag dx:PHI",
    ),
)
@click.argument("name")
@click.option(
    "--attribute",
    "attributes",
    multiple=True,
    required=True,
    help="name:type (repeat), e.g. price:double",
)
@click.option("--tid", required=True)
@click.option("--event-time", default=None)
@click.option(
    "--not-null",
    "not_null",
    multiple=True,
    help="an attribute every tuple must carry, not null (repeat); the tid and the event "
    "time always must",
)
@tag_option
@output_option
def client_add_schema(
    name: str,
    attributes: tuple[str, ...],
    tid: str,
    event_time: str | None,
    not_null: tuple[str, ...],
    tags: tuple[str, ...],
):
    """Add a schema (needs ADD on the system); its streams copy its tags."""
    pairs = [tuple(a.split(":", 1)) for a in attributes]
    if any(len(p) != 2 for p in pairs):
        raise click.UsageError("attributes are name:type")
    with session_client() as api:
        answer = api.add_schema(name, pairs, tid, event_time, not_null, attribute_tags(tags))
    emit(answer, text=f"schema {name} added")


@client.command(
    "set-tags",
    epilog=example(
        "streamshield client set-tags ward_a --tag dx:PHI --tag name:PII",
        "streamshield client set-tags ward_a   # no tag on any attribute",
    ),
)
@click.argument("stream")
@tag_option
@output_option
def client_set_tags(stream: str, tags: tuple[str, ...]) -> None:
    """Replace a stream's attribute tags (needs CHANGE SYSTEM). Tag policies follow from
    the next ingest micro-batch; tuples already labelled keep their labels."""
    with session_client() as api:
        answer = api.set_tags(stream, attribute_tags(tags))
    shown = ", ".join(f"{a}: {' '.join(t)}" for a, t in answer["tags"].items()) or "none"
    emit(answer, text=f"stream {stream} tags: {shown}")


@client.command(
    "set-server-policy",
    epilog=example(
        "streamshield client set-server-policy 'ward*' --mode intersect --cql "
        "'INSERT SP INTO STREAM LET DDP = ATTRIBUTES: TAGGED PHI, SRP = rbac:D'",
    ),
)
@click.argument("scope")
@click.option("--cql", required=True, help="INSERT SP statements (ATTRIBUTES: TAGGED PHI ...)")
@click.option(
    "--mode", type=click.Choice(["intersect", "union"]), default="intersect", show_default=True
)
@output_option
def client_set_server_policy(scope: str, cql: str, mode: str) -> None:
    """Set the server policy of a stream or a stream-name glob such as ward* (needs CHANGE
    SYSTEM); a glob also covers streams added later."""
    with session_client() as api:
        answer = api.set_server_policy(scope, cql, mode)
    emit(answer, text=f"server policy {scope} ({answer['mode']}, {answer['sps']} sps) set")


@client.command(
    "add-stream", epilog=example("streamshield client add-stream prices --schema quotes")
)
@click.argument("name")
@click.option("--schema", required=True)
@output_option
def client_add_stream(name: str, schema: str) -> None:
    """Add a stream of a schema (needs ADD on the schema)."""
    with session_client() as api:
        answer = api.add_stream(name, schema)
    emit(answer, text=f"stream {name} added")


@client.command(
    "ingest",
    epilog=example(
        "streamshield client ingest prices feed.jsonl",
        "streamshield sample-feed --stream prices --provider ed --rows 100 "
        "| streamshield client ingest prices -",
    ),
)
@click.argument("stream")
@click.argument("file", type=click.File("r", encoding="utf-8"), default="-")
@click.option("--show", default=10, show_default=True, help="Rejections to list (by line number).")
@click.option(
    "--assign-seq",
    "assign",
    type=click.Choice(["auto", "yes", "no"]),
    default="auto",
    show_default=True,
    help="Let the server assign seqs (and sp ts, tuple policies) per channel; auto: for "
    "chunks whose lines carry no seq.",
)
@output_option
def client_ingest(stream: str, file, show: int, assign: str) -> None:
    """Append wire-format JSON lines from FILE or stdin (-), any size, in chunks.

    Tuples need WRITE on the stream, sps INJECT SP. Prints how many lines were accepted
    and rejected, with the first reasons by line number; exits 1 if any was rejected.
    """
    accepted, rejected = 0, 0
    rejections: list[dict[str, Any]] = []
    with session_client() as api:
        for _first, answer in api.append_chunked(stream, file, assign=assign):
            accepted += answer["accepted"]
            rejected += answer["rejected"]
            rejections.extend(answer["rejections"][: max(0, show - len(rejections))])
    summary = {"accepted": accepted, "rejected": rejected, "rejections": rejections}
    emit(
        summary,
        rows=rejections or None,
        columns=["line", "reason", "message"],
        text=f"accepted {accepted}, rejected {rejected}"
        + (f" (first {len(rejections)} below)" if rejections else ""),
    )
    if rejected:
        raise click.exceptions.Exit(EXIT_REFUSED)


@client.group("query", cls=ClientGroup)
def client_query() -> None:
    """Register, start, stop and remove continuous queries."""


@client_query.command(
    "register",
    epilog=example(
        'streamshield client query register hot "SELECT id, price FROM prices WHERE price > 10"'
    ),
)
@click.argument("name")
@click.argument("text")
@output_option
def client_query_register(name: str, text: str) -> None:
    """Register a query (or send an INSERT SP script)."""
    with session_client() as api:
        answer = api.register(name, text)
    emit(answer, text=" ".join(f"{k}={v}" for k, v in answer.items()))


@client_query.command("start", epilog=example("streamshield client query start hot"))
@click.argument("name")
@output_option
def client_query_start(name: str) -> None:
    """Start a stopped query (it resumes from its checkpoint)."""
    with session_client() as api:
        answer = api.set_status(name, True)
    emit(answer, text=str(answer["status"]))


@client_query.command("stop", epilog=example("streamshield client query stop hot"))
@click.argument("name")
@output_option
def client_query_stop(name: str) -> None:
    """Stop a query (kept, with its subscribers, until removed)."""
    with session_client() as api:
        answer = api.set_status(name, False)
    emit(answer, text=str(answer["status"]))


@client_query.command("remove", epilog=example("streamshield client query remove hot"))
@click.argument("name")
@output_option
def client_query_remove(name: str) -> None:
    """Stop and remove a query; its subscriptions end."""
    with session_client() as api:
        answer = api.remove(name)
    emit(answer, text=f"query {name} removed")


GRANT_OPTIONS = [
    click.argument("permission"),
    click.argument("kind", type=click.Choice(["system", "schema", "stream", "query"])),
    click.argument("obj"),
    click.option("--role", default=None),
    click.option("--user", default=None),
]


def _grant_options(fn):
    for option in reversed(GRANT_OPTIONS):
        fn = option(fn)
    return fn


def _grant_body(permission, kind, obj, role, user, grant_option: bool) -> dict:
    return {
        "permission": permission,
        "kind": kind,
        "object": obj,
        "role": role,
        "user": user,
        "grant_option": grant_option,
    }


@client.command(
    "grant", epilog=example('streamshield client grant "READ TUPLE" stream prices --role ND')
)
@_grant_options
@click.option("--grant-option", is_flag=True)
@output_option
def client_grant(permission, kind, obj, role, user, grant_option) -> None:
    """Grant PERMISSION (e.g. "READ TUPLE") on KIND OBJ to --role or --user."""
    with session_client() as api:
        answer = api.grant(_grant_body(permission, kind, obj, role, user, grant_option))
    emit(answer, text="granted")


@client.command(
    "revoke", epilog=example('streamshield client revoke "READ TUPLE" stream prices --role ND')
)
@_grant_options
@output_option
def client_revoke(permission, kind, obj, role, user) -> None:
    """Revoke PERMISSION on KIND OBJ from --role or --user (404 if there is no such grant)."""
    with session_client() as api:
        answer = api.grant(_grant_body(permission, kind, obj, role, user, False), revoke=True)
    emit(answer, text="revoked")


@client.command(
    "settings",
    epilog=example(
        "streamshield client settings",
        'streamshield client settings --set \'operator_limits={"default": {"max_rows": 500}}\'',
    ),
)
@click.option("--set", "assignments", multiple=True, help="key=JSON value (repeat).")
@output_option
def client_settings(assignments: tuple[str, ...]) -> None:
    """Show the system settings, or change them (needs CHANGE SYSTEM)."""
    import json

    values = {}
    for assignment in assignments:
        key, _, raw = assignment.partition("=")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    with session_client() as api:
        answer = api.set_settings(values) if values else api.settings()
    rows = [{"key": k, "value": json.dumps(v)} for k, v in sorted(answer.items())]
    emit(answer, rows=rows)


@client.command(
    "subscribe", epilog=example("streamshield client subscribe heart_nina_out --limit 10")
)
@click.argument("name")
@click.option("--limit", default=0, help="Stop after this many rows (0: run until closed).")
@click.option(
    "--after",
    type=click.IntRange(-1),
    default=None,
    help="First the stored results after this batch id (-1: all stored), then live ones.",
)
@output_option
def client_subscribe(name: str, limit: int, after: int | None) -> None:
    """Print a query's results as they arrive, one JSON object a line (rows you may read).

    A row's ``_masked`` lists its columns hidden from you (null because masked, not
    because the value is null). ``--after -1`` starts with the results stored before
    you subscribed. A ``lagging`` event (the server has more than half its
    bound queued for you) is a warning on stderr; any other event ends the command
    (exit 1).
    """
    import json

    seen = 0
    with session_client() as api:
        for event, data in api.subscribe(name, after):
            if event == "replayed":  # the stored batches are over: live ones follow
                continue
            if event == "gap":  # asked for batches no longer stored: the later ones follow
                click.echo(
                    f"[gap] batches {data.get('first')}-{data.get('last')} are gone", err=True
                )
                continue
            if event == "lagging":  # told, not dropped: reading on is how to catch up
                click.echo(f"[lagging] {data.get('behind')} batches behind", err=True)
                continue
            if event != "rows":
                message = data.get("reason") or data.get("message") or ""
                if output_format() == "json":
                    click.echo(json.dumps({"event": event, **data}, default=str))
                else:
                    click.echo(f"[{event}] {message}", err=True)
                raise click.exceptions.Exit(EXIT_REFUSED)
            for row in data["rows"]:
                click.echo(json.dumps(row, default=str))
                seen += 1
                if limit and seen >= limit:
                    return


operations.attach(client, client_query)  # client query list/show/explain, audit


admin.attach(main, client)  # admin init; client user, role, passwd
admin.admin.add_command(recovery.relabel)  # admin relabel
levels.attach(client)  # client level ...
networks.attach(client)  # client network list|sp
connectors.attach(client)  # client kafka|mqtt bind|list|show|unbind; client sink ...
cep.attach(main, client)  # cep-example; client pattern ...|cep-rules get|put
