"""``streamshield admin relabel``: the offline recovery when ingest halts for its state.

When the server refuses to start ingest (or halts it) because the checkpoint, the
labelled store and the shield state are missing, damaged or out of step, the one state
that is provably right is the beginning: this command moves the three aside (kept as
evidence) so that the next start labels the whole landing zone again from batch 0 and
an empty shield state (docs/security.md, "Shield state rollback and ingest state reset").
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("relabel")
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("streamshield-data"),
    show_default=True,
    help="Storage root of the stopped server.",
)
@click.option("--yes", is_flag=True, help="Confirm: the server and its queries are stopped.")
def relabel(root: Path, yes: bool) -> None:
    """Move ingest's state aside so the next start relabels the landing zone from the start.

    Run it with the server stopped. Queries over the labelled streams read the relabelled
    batches as new input: remove and register them anew afterwards.

    Example:

        streamshield admin relabel --root ./data --yes
    """
    from streamshield.engine.ingest.ingest_consistency import quarantine

    store = root / "store"
    if not (root / "landing").is_dir() or not store.is_dir():
        raise click.ClickException(f"{root} is not a storage root (no landing zone or store)")
    if not yes:
        raise click.ClickException("stop the server first, then confirm with --yes")
    try:
        aside = quarantine(store)
    except OSError as err:
        raise click.ClickException(f"could not move the state aside: {err.strerror}") from None
    click.echo(f"ingest state moved to {aside}; the next start relabels the landing zone")
