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


if __name__ == "__main__":
    main()
