"""A versioned, in-memory view of answers derived from the security catalog.

Delivery asks the same questions for every micro-batch and every subscriber: is this
session alive, which streams may this user read, which roles and level does she act
with, does she still hold SUBSCRIBE. The answers change only when the catalog does, so
they are kept here, each valid only while the catalog version
(:data:`~streamshield.catalog.tables.catalog_version`, moved by database triggers with
every change a right is derived from, whoever makes it) is the one it was computed
under.

* A write by this process (any writing transaction on the engine) marks the view
  stale: the next lookup reads the version again, so a change made here is seen by the
  very next decision, as without the view.
* A change by another process is seen within ``poll_seconds``: a lookup reads the
  version when it last did so longer ago than that.
* Race-free: an answer computed while the view was invalidated (its generation moved)
  is returned to its caller but not kept, so a revocation racing a lookup cannot leave
  a stale allow behind.
* Fail closed: when the version cannot be read the view forgets everything and every
  lookup computes afresh (which raises, and so denies, when the catalog is unreadable).
* Failures are never kept (an unknown token is looked up again every time, as before).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

POLL_SECONDS = 0.2
"""How stale a change made by another process may be seen (the version's read period)."""

MAX_ENTRIES = 100_000
"""Answers kept at most; beyond, the view starts afresh (a memo, not a second catalog)."""

_MISSING = object()


class CatalogView:
    """Answers keyed by the question, valid for one catalog version (module doc)."""

    def __init__(
        self,
        read_version: Callable[[], int],
        *,
        poll_seconds: float = POLL_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read_version = read_version
        self.poll_seconds = poll_seconds
        self._max_entries = max_entries
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, Any] = {}
        self._version: int | None = None
        self._read_at = float("-inf")
        self._stale = True
        self._generation = 0

    def written(self) -> None:
        """This process wrote to the catalog: the next lookup reads the version."""
        with self._lock:
            self._stale = True

    @property
    def generation(self) -> int:
        """Moves whenever the kept answers are dropped (a new version, an unreadable
        one, too many answers): whoever derived something from the catalog derives it
        again when it moved. Reads the version when due, like a lookup."""
        self._current()
        return self._generation

    def lookup(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The kept answer to ``key``, or ``compute()`` (kept if nothing moved meanwhile)."""
        generation = self._current()
        if generation is not None:
            with self._lock:
                hit = self._entries.get(key, _MISSING)
            if hit is not _MISSING:
                return hit
        value = compute()
        if generation is not None:
            with self._lock:
                if self._generation == generation:
                    if len(self._entries) >= self._max_entries:
                        self._drop()
                    else:
                        self._entries[key] = value
        return value

    def kept(self, kind: str) -> list[Any]:
        """The kept answers whose key is a tuple starting with ``kind``."""
        with self._lock:
            return [
                value
                for key, value in self._entries.items()
                if isinstance(key, tuple) and key and key[0] == kind
            ]

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def _current(self) -> int | None:
        """The generation answers may be kept under now; None: keep nothing."""
        now = self._clock()
        with self._lock:
            if not self._stale and now - self._read_at < self.poll_seconds:
                return self._generation
            # Cleared before reading: a write ending during the read marks it again.
            self._stale = False
        try:
            version = self._read_version()
        except Exception:
            with self._lock:
                self._drop()
                self._version, self._stale = None, True
            return None
        with self._lock:
            self._read_at = max(self._read_at, now)
            if version != self._version:
                self._version = version
                self._drop()
            return self._generation

    def _drop(self) -> None:
        self._entries.clear()
        self._generation += 1
