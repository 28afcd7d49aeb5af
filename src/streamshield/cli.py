"""The ``streamshield`` command line."""

from __future__ import annotations

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


if __name__ == "__main__":
    main()
