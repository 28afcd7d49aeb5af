"""One recipient class's rows of one batch, shared by every subscriber of that class.

Delivery hands every subscriber of a class (equal rights, roles and level) the very same
list; what a receiver derives from the rows alone, and the same for each of them, is
made once for all of them (:meth:`SharedRows.once`): the bytes of an SSE ``rows`` event,
a session's per-batch check. Made per subscriber, that work grew with the number of
watchers (16 watchers: 16 encodings of every batch on the event loop). The list is
fresh per batch, so nothing derived from it outlives the batch's hand-over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


class SharedRows(list):
    """A list of row dicts that receivers must not mutate, with a memo of what is
    derived from it (thread-safe: each value is made once)."""

    __slots__ = ("_lock", "_made")

    def __init__(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(rows)
        self._lock = threading.Lock()
        self._made: dict[Hashable, Any] = {}

    def once(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()`` the first time ``key`` is asked for, the same value after; a
        failing ``make`` is not remembered (the next caller tries again)."""
        with self._lock:
            if key not in self._made:
                self._made[key] = make()
            return self._made[key]
