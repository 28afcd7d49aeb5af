"""The server's retention: a thread that prunes the storage root now and then.

What may be pruned is decided by :mod:`streamshield.engine.store.retention` from the
checkpoints on disk. The server adds what only it knows: which query checkpoints belong
to no query any more (a removed query's, left by a crash between the removal and the
checkpoint's deletion: nothing can restart from it, and it would hold its stream's
pruning back for good). Removing a query deletes its checkpoints (:meth:`drop`).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from streamshield.engine.store.retention import STARTING_GRACE, Pruner, PruneReport

log = logging.getLogger("streamshield.server")
CHECK_SECONDS = 60.0
"""At most this long between prunes (sooner for a retention under two minutes)."""


class RetentionWatch:
    """Runs :class:`Pruner` every :attr:`interval` seconds in a daemon thread."""

    def __init__(
        self,
        root: Path,
        queries: Path,
        max_age: float | None = None,
        clock: Callable[[], float] = time.time,
        starting_grace: float = STARTING_GRACE,
    ) -> None:
        """``root``: the storage root; ``queries``: where query definitions are kept
        (:class:`~streamshield.server.query_store.QueryStore`), whose internal names own
        the checkpoints under ``store/checkpoints/queries``."""
        self.root, self.queries = Path(root), Path(queries)
        self.pruner = Pruner(root, max_age, clock, starting_grace, ignore=self._orphan)
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set by :meth:`stop` and by a new retention: the thread does not sleep out an
        interval chosen for the old one (a minute, for a week's retention)."""
        self._thread: threading.Thread | None = None

    @property
    def max_age(self) -> float | None:
        return self.pruner.max_age

    @max_age.setter
    def max_age(self, seconds: float | None) -> None:
        """A new retention applies at once: the thread prunes now, then every
        :attr:`interval` of the new retention."""
        self.pruner.max_age = seconds
        self._wake.set()

    @property
    def interval(self) -> float:
        age = self.pruner.max_age
        return CHECK_SECONDS if age is None else min(CHECK_SECONDS, max(1.0, age / 2))

    def start(self) -> None:
        self._stop.clear()
        self._wake.clear()
        self._thread = threading.Thread(target=self._run, name="retention", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def prune(self) -> PruneReport:
        """One prune now (the thread's, or a test's)."""
        return self.pruner.run()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.prune()
            except Exception as err:  # the next round tries again; nothing was half-lost
                log.error("retention: prune failed (%s: %s)", type(err).__name__, err)

    # -- query checkpoints --------------------------------------------------------------

    def known_internals(self) -> set[str]:
        """Internal names of every query defined, staged definitions included."""
        names: set[str] = set()
        for path in self.queries.glob("*") if self.queries.is_dir() else []:
            if not (path.name.endswith(".json") or path.name.endswith(".json.pending")):
                continue
            try:
                names.add(str(json.loads(path.read_text())["internal"]))
            except (OSError, ValueError, KeyError, TypeError):
                return _EVERYTHING  # unreadable: every checkpoint may be a query's
        return names

    def _orphan(self, checkpoint: Path) -> bool:
        """A query checkpoint no definition names, older than the starting grace (a
        query being registered has its checkpoint before its definition is final)."""
        if checkpoint.parent.name != "queries" or checkpoint.parent.parent.name != "checkpoints":
            return False
        try:
            age = time.time() - (checkpoint / "metadata").stat().st_mtime
        except OSError:
            return False
        known = self.known_internals()
        return (
            known is not _EVERYTHING
            and checkpoint.name not in known
            and (age > self.pruner.starting_grace)
        )

    def drop(self, internal: str) -> None:
        """Deletes a removed query's checkpoints (at any level): nothing restarts them."""
        store = self.root / "store"
        for base in (store, *store.glob("levels/*")):
            target = base / "checkpoints" / "queries" / internal
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)


class _Everything(set[str]):
    """Marks "could not tell": no checkpoint is an orphan."""


_EVERYTHING: set[str] = _Everything()
