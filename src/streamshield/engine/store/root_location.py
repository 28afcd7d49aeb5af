"""A storage root is served from where it was written, or not at all.

Spark's file sources remember the files they have read by absolute path (the ingest
checkpoint's ``sources/0/<offset>`` lists ``file:///<root>/landing/<stream>/<file>``).
Served from another path (a root restored from a backup elsewhere, a release fixture
unpacked in another directory) every landed file looks new: ingest would read the whole
landing zone again and every query every labelled file, producing every tuple and every
output row a second time. So start-up compares the path the ingest checkpoint recorded
with the root it is given and refuses a moved root, naming where it belongs.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

INGEST_SOURCES = Path("store") / "checkpoints" / "ingest" / "sources" / "0"


class RootMoved(RuntimeError):
    """The root was written at another path; the message says where and what to do."""


def recorded_root(root: Path) -> Path | None:
    """The root path the ingest checkpoint's first recorded file lies under (None: no
    file recorded yet, or a log this module does not read)."""
    folder = root / INGEST_SOURCES
    if not folder.is_dir():
        return None
    logs = sorted(
        (p for p in folder.iterdir() if p.name.split(".")[0].isdigit()),
        key=lambda p: int(p.name.split(".")[0]),
    )
    for log in logs:
        try:
            lines = log.read_text().splitlines()
        except OSError:
            continue
        for line in lines[1:]:
            found = _landing_file(line)
            if found is not None:
                return found.parents[2]  # <root>/landing/<stream>/<file>
    return None


def check(root: Path) -> None:
    """Raises :class:`RootMoved` when ``root`` is not where its checkpoints were written."""
    recorded = recorded_root(root)
    if recorded is None or recorded == root.resolve():
        return
    raise RootMoved(
        f"this storage root was written at {recorded} and is now at {root.resolve()}: "
        "Spark's checkpoints name every file they have read by its absolute path, so "
        "served from here every landed tuple would be labelled and every output row "
        f"produced again. Serve it from {recorded} (move it back, or mount it there)."
    )


def _landing_file(line: str) -> Path | None:
    try:
        path = json.loads(line)["path"]
    except (ValueError, KeyError, TypeError):
        return None
    parsed = urlparse(str(path))
    if parsed.scheme not in ("", "file"):
        return None
    local = Path(unquote(parsed.path))
    return local if len(local.parents) >= 3 and local.parents[1].name == "landing" else None
