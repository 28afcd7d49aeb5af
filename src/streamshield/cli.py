"""The ``streamshield`` command line."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from streamshield import __version__


@click.group()
@click.version_option(__version__)
def main() -> None:
    """streamshield: secure multi-tenant stream processing on Spark."""


@main.command()
def demo() -> None:
    """Run the hospital example through the reference Security Shield, role by role."""
    from streamshield.demo import report

    click.echo("streamshield demo: hospital example (paper 1), reference Security Shield")
    for line in report():
        click.echo(line)


@main.command()
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


@main.command()
@ROOT
def init(root: Path) -> None:
    """Create a storage root with the hospital example's catalog (streams, roles, policy)."""
    from streamshield.examples.hospital_catalog import hospital_catalog

    root.mkdir(parents=True, exist_ok=True)
    catalog = hospital_catalog(root / "catalog.db")
    for definition in catalog.streams():
        click.echo(f"stream {definition.name}: {definition.ddl}")


@main.command()
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


@main.command()
@ROOT
@click.option("--master", default=None, help="Spark master URL (default: local[2]).")
def ingest(root: Path, master: str | None) -> None:
    """Label everything landed so far (secure ingest, then stop)."""
    from streamshield.engine.pipeline import Pipeline
    from streamshield.engine.session import spark_session

    Pipeline(spark_session(master), _catalog(root), root).ingest_available()
    click.echo(f"labelled streams: {root / 'store' / 'labelled'}")


@main.command()
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
    from streamshield.engine.queries import ConsoleSink, FileSink, QueryFailed
    from streamshield.engine.session import spark_session
    from streamshield.lang.query_check import QueryRejected

    pipeline = Pipeline(spark_session(master), _catalog(root), root)
    if fmt != "console" and out is None:
        raise click.UsageError("--out is needed for file outputs")
    try:
        if fmt == "punctuated":
            registered = pipeline.queries.export_punctuated(sql, roles, out)
        else:
            sink = ConsoleSink() if fmt == "console" else FileSink(str(out), fmt)
            registered = pipeline.queries.register(sql, roles, sink)
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
@click.option(
    "--conf",
    "conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="Spark configuration (repeat) [env STREAMSHIELD_SPARK_CONF as a JSON object].",
)
@click.option("--spark-ui/--no-spark-ui", default=None, help=_setting("spark_ui"))
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
def serve(
    config: Path | None,
    root: Path | None,
    host: str | None,
    port: int | None,
    catalog_url: str | None,
    master: str | None,
    conf: tuple[str, ...],
    spark_ui: bool | None,
    jvm_class_cache: bool | None,
    log_level: str | None,
    cert: Path | None,
    key: Path | None,
    example: bool | None,
    round_seconds: float | None,
) -> None:
    """Start the secure server (HTTPS API, continuous ingest, live subscriptions).

    SIGTERM or SIGINT stops it cleanly (exit code 0). Configuration errors exit with
    code 2 and one line naming the key.
    """
    from streamshield.server.main import run_server
    from streamshield.server.settings import ConfigError, load, parse_conf

    given = {
        "root": root,
        "host": host,
        "port": port,
        "catalog_url": catalog_url,
        "spark_master": master,
        "spark_ui": spark_ui,
        "jvm_class_cache": jvm_class_cache,
        "log_level": log_level,
        "tls_cert": cert,
        "tls_key": key,
        "example": example,
        "round_seconds": round_seconds,
    }
    try:
        given["spark_conf"] = parse_conf(conf)
        settings = load(given, config)
    except ConfigError as err:
        raise click.UsageError(str(err)) from None
    for path in (settings.tls_cert, settings.tls_key):
        if path is not None and not path.exists():
            raise click.UsageError(f"no such file: {path}")
    code = run_server(settings, click.echo)
    raise SystemExit(code)


# -- the client ---------------------------------------------------------------------------------


@main.group()
def client() -> None:
    """Talk to a running server over HTTPS (token kept in $STREAMSHIELD_HOME, 0600)."""


def _client():
    from streamshield.client import Client, load_saved

    saved = load_saved()
    if saved is None or saved.token is None:
        raise click.ClickException("not logged in: run 'streamshield client login' first")
    return Client(saved.url, saved.token, saved.ca)


def _call(fn, *args, **kwargs):
    from streamshield.client import ClientError

    try:
        return fn(*args, **kwargs)
    except ClientError as err:
        raise click.ClickException(f"{err.status} {err.code}: {err.message}") from None


@client.command("login")
@click.option("--url", default="https://127.0.0.1:8443", show_default=True)
@click.option(
    "--ca",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="Trust this certificate (the server's self-signed one).",
)
@click.option("--user", required=True)
@click.option("--role", "roles", multiple=True, required=True, help="Role to activate (repeat).")
@click.password_option(confirmation_prompt=False, envvar="STREAMSHIELD_PASSWORD")
def client_login(url: str, ca: Path | None, user: str, roles: tuple[str, ...], password: str):
    """Log in and keep the session token."""
    from streamshield.client import Client, Saved, save

    ca_path = str(ca.resolve()) if ca else None
    with Client(url, None, ca_path) as api:
        answer = _call(api.login, user, password, list(roles))
    save(Saved(url, answer["token"], ca_path, user))
    expires = datetime.fromtimestamp(float(answer["expires_at"]), UTC)
    click.echo(
        f"logged in as {user} with roles {', '.join(answer['roles'])}; "
        f"session expires at {expires:%Y-%m-%d %H:%M:%S} UTC"
    )


@client.command("logout")
def client_logout() -> None:
    """End the session and forget the token."""
    from streamshield.client import ClientError, forget

    try:
        with _client() as api:
            api.logout()
    except ClientError:
        pass  # an expired session is as good as ended
    forget()
    click.echo("logged out")


@client.command("catalog")
def client_catalog() -> None:
    """The schemas, streams and queries you may see."""
    from streamshield.client import table

    with _client() as api:
        view = _call(api.catalog)
    for kind, items in view.items():
        click.echo(f"{kind}:")
        click.echo(table(items))
        click.echo("")


@client.command("stream")
@click.argument("name")
def client_stream(name: str) -> None:
    """One stream's definition."""
    from streamshield.client import table

    with _client() as api:
        answer = _call(api.stream, name)
    click.echo(
        f"stream {answer['name']} (tid {answer['tid']}, event time {answer['event_time'] or '-'})"
    )
    click.echo(table([{"attribute": a, "type": t} for a, t in answer["attributes"]]))


@client.command("add-schema")
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
def client_add_schema(name: str, attributes: tuple[str, ...], tid: str, event_time: str | None):
    """Add a schema (needs ADD on the system)."""
    pairs = [tuple(a.split(":", 1)) for a in attributes]
    if any(len(p) != 2 for p in pairs):
        raise click.UsageError("attributes are name:type")
    with _client() as api:
        _call(api.add_schema, name, pairs, tid, event_time)
    click.echo(f"schema {name} added")


@client.command("add-stream")
@click.argument("name")
@click.option("--schema", required=True)
def client_add_stream(name: str, schema: str) -> None:
    """Add a stream of a schema (needs ADD on the schema)."""
    with _client() as api:
        _call(api.add_stream, name, schema)
    click.echo(f"stream {name} added")


@client.command("ingest")
@click.argument("stream")
@click.argument("file", type=click.File("r"), default="-")
def client_ingest(stream: str, file) -> None:
    """Append wire-format JSON lines (tuples need WRITE, sps INJECT SP) from FILE or stdin."""
    from streamshield.client import table

    with _client() as api:
        answer = _call(api.append, stream, file.read().splitlines())
    click.echo(f"accepted {answer['accepted']}, rejected {answer['rejected']}")
    if answer["rejections"]:
        click.echo(table(answer["rejections"], ["line", "reason", "message"]))


@client.group("query")
def client_query() -> None:
    """Register, start, stop and remove continuous queries."""


@client_query.command("register")
@click.argument("name")
@click.argument("text")
def client_query_register(name: str, text: str) -> None:
    """Register a query (or send an INSERT SP script)."""
    with _client() as api:
        answer = _call(api.register, name, text)
    click.echo(" ".join(f"{k}={v}" for k, v in answer.items()))


@client_query.command("start")
@click.argument("name")
def client_query_start(name: str) -> None:
    with _client() as api:
        click.echo(_call(api.set_status, name, True)["status"])


@client_query.command("stop")
@click.argument("name")
def client_query_stop(name: str) -> None:
    with _client() as api:
        click.echo(_call(api.set_status, name, False)["status"])


@client_query.command("remove")
@click.argument("name")
def client_query_remove(name: str) -> None:
    with _client() as api:
        _call(api.remove, name)
    click.echo(f"query {name} removed")


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


@client.command("grant")
@_grant_options
@click.option("--grant-option", is_flag=True)
def client_grant(permission, kind, obj, role, user, grant_option) -> None:
    """Grant PERMISSION (e.g. "READ TUPLE") on KIND OBJ to --role or --user."""
    with _client() as api:
        _call(api.grant, _grant_body(permission, kind, obj, role, user, grant_option))
    click.echo("granted")


@client.command("revoke")
@_grant_options
def client_revoke(permission, kind, obj, role, user) -> None:
    """Revoke PERMISSION on KIND OBJ from --role or --user."""
    with _client() as api:
        _call(api.grant, _grant_body(permission, kind, obj, role, user, False), revoke=True)
    click.echo("revoked")


@client.command("settings")
@click.option("--set", "assignments", multiple=True, help="key=JSON value (repeat).")
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
    with _client() as api:
        answer = _call(api.set_settings, values) if values else _call(api.settings)
    for key, value in sorted(answer.items()):
        click.echo(f"{key} = {json.dumps(value)}")


@client.command("subscribe")
@click.argument("name")
@click.option("--limit", default=0, help="Stop after this many rows (0: run until closed).")
def client_subscribe(name: str, limit: int) -> None:
    """Print a query's results as they arrive (only rows you may read)."""
    import json

    from streamshield.client import ClientError

    seen = 0
    with _client() as api:
        try:
            for event, data in api.subscribe(name):
                if event != "rows":
                    click.echo(f"[{event}] {data.get('reason', '')}")
                    return
                for row in data["rows"]:
                    click.echo(json.dumps(row, default=str))
                    seen += 1
                    if limit and seen >= limit:
                        return
        except ClientError as err:
            raise click.ClickException(f"{err.status} {err.code}: {err.message}") from None


__import__("streamshield.cli_operations").cli_operations.attach(client, client_query)


if __name__ == "__main__":
    main()
