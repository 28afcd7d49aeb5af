"""The ``streamshield`` command line."""

from __future__ import annotations

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


if __name__ == "__main__":
    main()
