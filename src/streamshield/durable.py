"""Durable atomic writes: what a rename-into-place needs to survive a power cut.

An ``os.replace`` is atomic for readers, but neither the new file's contents nor the
rename itself are on disk until they are fsynced: after a crash the name can point to
an empty or partial file, or the rename can be gone while what followed it (a commit
marker, a catalog update) is not. Every atomic write the system relies on (shield state
snapshots, commit markers, staged Parquet directories, landing files, query and schema
definitions, query results) goes through this module, so the rule is kept in one place:

1. write the data and fsync it (every file of a staged directory, and the directory);
2. rename it into place;
3. fsync the directory that holds the new name.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path


def fsync_dir(directory: str | Path) -> None:
    """Makes renames and creations in ``directory`` durable.

    Some file systems cannot fsync a directory (EINVAL); their renames are as durable
    as they can be, which is not a reason to fail the write.
    """
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_tree(path: str | Path) -> None:
    """fsyncs a file, or every file and directory below a directory (a staged batch)."""
    path = Path(path)
    if path.is_file():
        _fsync_file(path)
        return
    for folder, _dirs, files in os.walk(path):
        for name in files:
            _fsync_file(Path(folder) / name)
        fsync_dir(folder)


def replace_durably(source: str | Path, target: str | Path) -> None:
    """Moves a fully written file or directory into place, durably (steps 1-3 above)."""
    source, target = Path(source), Path(target)
    fsync_tree(source)
    os.replace(source, target)
    fsync_dir(target.parent)
    if source.parent != target.parent:
        fsync_dir(source.parent)


def write_atomic(path: str | Path, data: bytes | str, mode: int | None = None) -> None:
    """Writes ``data`` to ``path`` so that no reader and no crash ever sees a partial file.

    ``mode`` (e.g. ``0o600``) is set before any byte is written.
    """
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pending(path: str | Path) -> Path:
    """Where a definition waits (a hidden sibling) until the catalog record it belongs to
    is committed: see :func:`promote`."""
    path = Path(path)
    return path.with_name(f".{path.name}.pending")


def promote(path: str | Path) -> bool:
    """Moves ``path``'s pending version into place; False when there is none.

    A definition file that belongs to a catalog record (a schema's attributes, a query's
    text) is written as pending *before* the record and promoted after it, so a crash
    between the two leaves either a pending file whose record was never made (harmless:
    the next definition of that name overwrites it) or a record whose pending file is
    promoted when it is first needed: never a record without its definition.
    """
    path = Path(path)
    waiting = pending(path)
    if not waiting.is_file():
        return False
    os.replace(waiting, path)
    fsync_dir(path.parent)
    return True
