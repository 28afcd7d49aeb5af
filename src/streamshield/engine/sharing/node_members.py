"""Which registered queries a window node has served, kept beside the node's state, so
that the state goes with the last of them.

Why: a window node's state (engine/queries/window_state.py, under ``<network>/nodes/<digest>``)
is named after what it keeps (its window and visibility), not after a query, so removing
a query could not tell which node directories it leaves unused; each one stayed on disk
for good, and a server that runs for weeks gathered one per window and set of rights
ever registered. A query that is only *stopped* stays registered and may start again,
so its node is kept: rebuilding it from the stream's history would be correct but costs
a read of that history. Only removing a query for good (``CqlService.forget``) takes its
name off the nodes, and a node left serving no name is deleted.

A name is added each time a branch joins the node (every start, after a restart too), so
a node of a running branch always lists it; a node directory written before these
records existed and never joined since lists nobody and is left alone (unknown is never
taken for unused).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from streamshield.durable import write_atomic

MEMBERS = "members.json"
GONE = ".gone-"


def members(directory: Path) -> frozenset[str] | None:
    """The names the node in ``directory`` has served (None: no readable record)."""
    try:
        names = json.loads((directory / MEMBERS).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return frozenset(names)


def join(directory: Path, name: str) -> None:
    """Records that the node in ``directory`` serves query ``name``."""
    known = members(directory) or frozenset()
    if name not in known:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / MEMBERS, json.dumps(sorted(known | {name})))


def leave(nodes: Path, name: str) -> list[Path]:
    """Takes query ``name`` off every node under ``nodes``; deletes (and returns) the
    node directories it was the last member of."""
    deleted = []
    for directory in sorted(nodes.iterdir()) if nodes.is_dir() else ():
        if directory.name.startswith(GONE):  # a deletion a crash cut short
            shutil.rmtree(directory, ignore_errors=True)
            continue
        known = members(directory)
        if known is None or name not in known:
            continue
        rest = known - {name}
        if rest:
            write_atomic(directory / MEMBERS, json.dumps(sorted(rest)))
        else:  # renamed first: a crash never leaves a node half deleted under its name
            doomed = directory.with_name(GONE + directory.name)
            directory.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
            deleted.append(directory)
    return deleted
