"""Start-up check that secure ingest's three pieces of state are in step.

Ingest keeps three things under its root, written in this order per micro-batch N:

1. the labelled store's batch directories and then its commit marker ``_commits/N``
   (listing each stream's files of N);
2. the shield state snapshot ``shield_state/N.json`` (the state batch N+1 starts from);
3. Spark's checkpoint: ``offsets/N`` before the batch runs, ``commits/N`` after it.

So when Spark next runs batch ``next`` (the uncommitted offset batch again, or the one
after the last committed), a consistent root has a readable marker whose files are all
there for every batch below ``next``, the snapshot of ``next - 1``, nothing of any batch
beyond ``next``, and a source log that reaches the offset ``next - 1`` recorded. A
fresh root (no checkpoint) holds no labelled batch and no snapshot at all.

Anything else means one of them was deleted, truncated or rolled back, and starting
would silently lose or mislabel tuples: a deleted checkpoint makes Spark relabel the
landing zone from batch 0 while the labelled store skips the batch ids it already
committed (tuples lost) and the shield starts from an empty state (policies that were
replaced pass again); a deleted labelled store or shield state leaves batches never
written or labelled from nothing. The check refuses to start instead
(:class:`IngestOutOfStep`), naming what is wrong; the operator recovers by relabelling
from the beginning (``docs/security.md``), the one state provably right.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path

from streamshield.durable import fsync_dir
from streamshield.engine.ingest.tracker_state import ShieldStateError, StateStore
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.engine.store.retention import read_record

BATCH_DIR = "batch="
CHECKPOINT, LABELLED, SHIELD_STATE = "checkpoints/ingest", "labelled", "shield_state"
log = logging.getLogger("streamshield.engine")


class IngestOutOfStep(ShieldStateError):
    """The checkpoint, the labelled store and the shield state disagree: ingest refuses."""


def check(checkpoint: Path, store: LabelledStore, state: StateStore) -> int | None:
    """The batch Spark will run next, if the three agree; IngestOutOfStep otherwise."""
    upcoming = next_batch(checkpoint)
    markers = store.markers()
    snapshots = state.batches()
    written = _batch_dirs(store)
    if upcoming is None:
        leftovers = [what for what, ids in _named(markers, snapshots, written) if ids]
        if leftovers:
            raise IngestOutOfStep(
                "the ingest checkpoint is missing or empty but "
                + " and ".join(leftovers)
                + " hold earlier batches: relabelling would skip them or start from an "
                "empty shield state"
            )
        return 0
    try:  # batches the retention pruned on purpose (engine/store/retention.py): not lost
        pruned = read_record(store.root)
    except ValueError as err:
        raise IngestOutOfStep(str(err)) from None
    pruned_markers = pruned.get("markers", -1)
    pruned_streams: dict[str, int] = pruned.get("streams", {})
    missing = sorted(set(range(pruned_markers + 1, upcoming)) - set(markers))
    if missing:
        raise IngestOutOfStep(
            f"the labelled store lacks the commit markers of batches {_span(missing)} that "
            f"the ingest checkpoint records as done (labelled store deleted or truncated)"
        )
    for what, ids in _named(markers, snapshots, written):
        beyond = [b for b in ids if b > upcoming]
        if beyond:
            raise IngestOutOfStep(
                f"{what} hold batches {_span(beyond)} beyond batch {upcoming} that the "
                f"ingest checkpoint runs next (checkpoint deleted or rolled back)"
            )
    for batch_id in range(pruned_markers + 1, upcoming):
        _check_marker(store, batch_id, pruned_streams)
    if upcoming > 0:
        state.read(upcoming - 1)  # ShieldStateError: missing, truncated, altered
    return upcoming


def quarantine(root: Path) -> Path:
    """Moves ingest's checkpoint, labelled store and shield state under ``root`` aside
    (kept as evidence under ``<root>/quarantine/<time>/``), so the next start relabels
    the whole landing zone from batch 0 and an empty shield state: the one starting
    point that is provably right (the landing zone is append-only: nothing accepted is
    lost). Offline only: the server and its queries must be stopped."""
    aside = root / "quarantine" / datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside.mkdir(parents=True)
    for part in (CHECKPOINT, LABELLED, SHIELD_STATE):
        if (root / part).exists():
            os.replace(root / part, aside / part.replace("/", "-"))
    for directory in (aside, root, root / CHECKPOINT.split("/")[0]):
        fsync_dir(directory)
    log.warning("ingest state moved to %s: the landing zone will be relabelled", aside)
    return aside


def next_batch(checkpoint: Path) -> int | None:
    """The micro-batch Spark runs next from this checkpoint (None: no batch planned yet)."""
    offsets = _ids(checkpoint / "offsets")
    commits = _ids(checkpoint / "commits")
    if not offsets:
        if commits:
            raise IngestOutOfStep("the ingest checkpoint has commits but no offsets")
        return None
    last = offsets[-1]
    if commits and commits[-1] > last:
        raise IngestOutOfStep("the ingest checkpoint commits a batch it has no offsets of")
    _check_source_log(checkpoint, last)
    return last + 1 if commits and commits[-1] == last else last


def _check_source_log(checkpoint: Path, batch_id: int) -> None:
    """The file source's log must reach the offset batch ``batch_id`` recorded: without
    it Spark would list the landing zone's files anew and label them twice."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
        log_offset = int(json.loads(lines[2])["logOffset"])
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        raise IngestOutOfStep(
            f"the ingest checkpoint's offsets of batch {batch_id} are unreadable"
        ) from None
    source_log = checkpoint / "sources" / "0"
    entries = (
        [
            int(p.name.removesuffix(".compact"))
            for p in source_log.iterdir()
            if p.name.removesuffix(".compact").isdigit()
        ]
        if source_log.is_dir()
        else []
    )
    if not entries or max(entries) < log_offset:
        raise IngestOutOfStep("the ingest checkpoint's file source log is missing or truncated")


def _check_marker(store: LabelledStore, batch_id: int, pruned: dict[str, int]) -> None:
    """Every file the marker lists is there, except in a stream pruned past the batch."""
    try:
        listing = store.marker(batch_id)
    except ValueError as err:
        raise IngestOutOfStep(f"the labelled store's {err}") from None
    for stream, files in listing.items():
        if batch_id <= pruned.get(stream, -1):
            continue
        present = set(store.files(stream, batch_id))
        if not set(files) <= present:
            raise IngestOutOfStep(
                f"the labelled store lost files of stream {stream} in batch {batch_id} "
                "(deleted or truncated)"
            )


def _batch_dirs(store: LabelledStore) -> list[int]:
    """Batch ids that have a labelled directory in some stream."""
    found: set[int] = set()
    for stream in store.root.iterdir() if store.root.is_dir() else []:
        if stream.name.startswith("_") or not stream.is_dir():
            continue
        for entry in stream.iterdir():
            number = entry.name.removeprefix(BATCH_DIR)
            if entry.name.startswith(BATCH_DIR) and number.isdigit():
                found.add(int(number))
    return sorted(found)


def _named(markers: list[int], snapshots: list[int], written: list[int]):
    return (
        ("the labelled store's commit markers", markers),
        ("the shield state snapshots", snapshots),
        ("the labelled store's batch directories", written),
    )


def _ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _span(ids: list[int]) -> str:
    return str(ids[0]) if len(ids) == 1 else f"{ids[0]}..{ids[-1]} ({len(ids)} batches)"
